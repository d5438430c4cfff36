"""`from tilelang.carver.arch.ascend import Ascend` (tilelang-ascend's carver): the chip a
template recommends tiles for. Here the default chip preset (or a named one), with the numbers
a recommendation reads: cube cores and the per-core buffer capacities."""
from __future__ import annotations


class Ascend:
    def __init__(self, chip: str | None = None):
        from ...arch import get_chip
        from ...runtime import config
        self.chip = get_chip(chip or config.default_chip())
        self.name = self.chip.name
        self.compute_max_core = self.chip.aic_cores

    def capacity(self, scope: str) -> int:
        return self.chip.capacity_of(scope)

    def __repr__(self) -> str:
        return f"Ascend({self.name!r})"


__all__ = ["Ascend"]
