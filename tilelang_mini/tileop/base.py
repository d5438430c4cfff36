"""`from tilelang.tileop.base import GemmWarpPolicy`: the same enum as `T.GemmWarpPolicy`."""
from ..language.hints import GemmWarpPolicy

__all__ = ["GemmWarpPolicy"]
