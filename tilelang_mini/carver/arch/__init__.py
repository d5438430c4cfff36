"""`from tilelang.carver.arch import driver` (see driver.py)."""
from . import driver

__all__ = ["driver"]
