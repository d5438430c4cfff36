"""TileLang's `tilelang.rocm.target` target queries (`target_is_gfx950(target)`,
`target_is_cdna(...)`, ...): host-side questions about the machine, which here is never an AMD
GPU, so every `target_is_*` answers False (examples pick their portable path, as on NVIDIA).
Any other name is a ROCm-only stub, as in the rest of `tilelang.rocm`."""
from ..cuda import CudaOnly


def _never(*_args, **_kwargs) -> bool:
    return False


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    if name.startswith("target_is_"):
        return _never
    return CudaOnly(f"tilelang.rocm.target.{name}")
