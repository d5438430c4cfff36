"""`from tilelang.carver.arch import driver` (see driver.py); `from tilelang.carver.arch.ascend
import Ascend` (ascend.py)."""
from . import ascend, driver
from .ascend import Ascend

__all__ = ["Ascend", "ascend", "driver"]
