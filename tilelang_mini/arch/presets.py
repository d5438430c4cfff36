"""The Ascend-like chip presets of design section 5. A model, not a claim of cycle accuracy.

Sizes are the public figures of the parts; per-pipe costs are in `costs.py`.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..errors import CompileError
from .costs import COSTS_910B, COSTS_950, Costs

KIB = 1024


@dataclass(frozen=True)
class Chip:
    name: str
    aic_cores: int                      # cube cores (AIC)
    aiv_per_aic: int                    # vector cores per cube core
    capacity: tuple[tuple[str, int], ...]   # scope -> bytes per core
    alignment: tuple[tuple[str, int], ...]  # scope -> byte alignment of an allocation
    direct_l0c_to_ub: bool              # FIX can write UB directly (else through GM)
    direct_ub_to_l1: bool               # MTE3 can write L1 directly (else through GM)
    event_ids: int                      # set_flag/wait_flag ids per pipe pair (0..n-1)
    cross_flags: int                    # cross-core flag ids (0..n-1)
    cross_flag_pending: int             # pending sets a cross-core flag counter holds
    clock_ghz: float
    peak_bf16_tflops: float
    costs: Costs
    fp8_cube: bool = False              # the cube multiplies FP8 (e4m3/e5m2) operands
    mx_gran: int = 0                    # K values per UE8M0 scale of the scaled MMAD (0: none)
    int4_cube: bool = True              # the cube multiplies packed int4 (int4x2) operands

    def capacity_of(self, scope: str) -> int:
        return dict(self.capacity)[scope]

    def alignment_of(self, scope: str) -> int:
        return dict(self.alignment)[scope]


_ALIGN = (("L1", 32), ("UB", 32), ("L0A", 512), ("L0B", 512), ("L0C", 64))

ASCEND910B = Chip(
    name="ascend910b", aic_cores=24, aiv_per_aic=2,
    capacity=(("L1", 512 * KIB), ("L0A", 64 * KIB), ("L0B", 64 * KIB), ("L0C", 128 * KIB),
              ("UB", 192 * KIB)),
    alignment=_ALIGN, direct_l0c_to_ub=False, direct_ub_to_l1=False,
    event_ids=8, cross_flags=11, cross_flag_pending=15, clock_ghz=1.8, peak_bf16_tflops=350.0,
    costs=COSTS_910B,
)

ASCEND950 = replace(
    ASCEND910B,  # what the 950 changes:
    name="ascend950", aic_cores=32,
    capacity=(("L1", 512 * KIB), ("L0A", 64 * KIB), ("L0B", 64 * KIB), ("L0C", 256 * KIB),
              ("UB", 248 * KIB)),
    direct_l0c_to_ub=True, direct_ub_to_l1=True, cross_flags=16, clock_ghz=1.65,
    peak_bf16_tflops=432.0, costs=COSTS_950, fp8_cube=True, mx_gran=32,
    int4_cube=False,
)

CHIPS = {c.name: c for c in (ASCEND910B, ASCEND950)}
DEFAULT_CHIP = ASCEND910B.name  # a compile that names no chip (TILELANG_MINI_CHIP overrides)


def get_chip(name: str) -> Chip:
    try:
        return CHIPS[name]
    except KeyError:
        raise CompileError(f"unknown chip {name!r}; available chips: {', '.join(CHIPS)}") from None
