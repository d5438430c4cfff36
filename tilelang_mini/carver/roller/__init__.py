"""`tilelang.carver.roller`: the names TileLang's examples import (rasterization plans)."""
from . import rasterization

__all__ = ["rasterization"]
