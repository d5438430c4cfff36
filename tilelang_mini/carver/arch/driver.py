"""TileLang's `driver.get_num_sms()`: the number of streaming multiprocessors a persistent
kernel launches one block per. Here: the cube cores (AIC) of the default chip, the unit that
`T.Kernel(n, is_npu=True)` distributes blocks over."""


def get_num_sms(device_id: int = 0) -> int:
    from ...arch import get_chip
    from ...runtime import config
    return get_chip(config.default_chip()).aic_cores


__all__ = ["get_num_sms"]
