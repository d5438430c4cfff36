"""`from tilelang.carver.roller.rasterization import NoRasterization`: TileLang's block
rasterization plans (a GPU L2 swizzle). Values a recommendation carries; on this machine a plan is
a hint with no effect on meaning (as `T.use_swizzle`)."""
from __future__ import annotations


class Rasterization:
    panel_width_ = None

    def get_code(self) -> list[str]:
        return []

    @property
    def panel_width(self):
        return self.panel_width_


class NoRasterization(Rasterization):
    def __repr__(self) -> str:
        return "<NoRasterization>"


class Rasterization2DRow(Rasterization):
    def __init__(self, panel_width=4):
        self.panel_width_ = panel_width

    def __repr__(self) -> str:
        return f"<Rasterization2DRow:{self.panel_width_}>"


class Rasterization2DColumn(Rasterization2DRow):
    def __repr__(self) -> str:
        return f"<Rasterization2DColumn:{self.panel_width_}>"
