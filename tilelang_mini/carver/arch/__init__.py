"""`from tilelang.carver.arch import driver` (see driver.py); `from tilelang.carver.arch.ascend
import Ascend` (ascend.py). TileLang's GPU architectures `CUDA("cuda")` / `CDNA("hip")` name the
machine a template recommends tiles for: here that machine is the Ascend chip (the default
preset), whatever device string they are given."""
from . import ascend, driver
from .ascend import Ascend


class CUDA(Ascend):
    """TileLang's `CUDA(target)`: the recommendations' machine, the Ascend chip here."""

    def __init__(self, target=None, chip: str | None = None):
        super().__init__(chip)
        self.target = target


CDNA = CUDA

__all__ = ["Ascend", "CDNA", "CUDA", "ascend", "driver"]
