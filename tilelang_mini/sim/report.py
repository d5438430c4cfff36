"""What a simulation reports: `SimReport` (cycles, pipe occupancy, events), its `SimEvent`s, and
the short IR text of a statement used in race, deadlock and timeline reports."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from ..ir.graph import print_ir_line


class SimEvent(NamedTuple):
    core: str    # "C", "V0", "V1" (prefixed "b<block>." when several blocks were simulated)
    pipe: str
    start: int
    end: int
    label: str   # IR text of the instruction
    loc: str     # file:line:col


@dataclass
class SimReport:
    cycles: int
    block_cycles: dict
    pipe_busy: dict                 # "MTE2" -> busy cycles summed over cores and blocks
    core_pipe_busy: dict            # "C.MTE2" / "V0.V" -> busy cycles summed over blocks
    events: list = field(default_factory=list)
    instructions: int = 0
    blocks: tuple = ()              # the simulated blocks
    estimated: bool = False         # cycles include blocks counted at the mean of the simulated
    aic_cores: int = 1              # the chip's: where each block ran (block b on core b % n)
    clock_ghz: float = 1.0

    def to_perfetto(self, path) -> None:
        """Write the simulated blocks as Chrome-trace JSON (Perfetto, chrome://tracing): one
        track per pipe per core, each block placed on its AIC after the blocks before it."""
        from ..report.timeline import report_to_perfetto
        report_to_perfetto(self, path)


_LABEL_CACHE: dict[int, tuple] = {}


def _labels(stmt) -> tuple:
    """(stmt, its IR line, its location as text), made once per statement object."""
    hit = _LABEL_CACHE.get(id(stmt))
    if hit is None or hit[0] is not stmt:
        hit = (stmt, print_ir_line(stmt), str(stmt.loc))
        _LABEL_CACHE[id(stmt)] = hit
    return hit


def block_events(raw, prefix: str) -> list:
    """SimEvents of a block's (core, pipe, start, end, stmt) records."""
    out = []
    new = tuple.__new__  # (SimEvent(...) without its Python-level __new__: once per event)
    for core, pipe, s, e, st in raw:
        hit = _LABEL_CACHE.get(id(st))  # (_labels, inline)
        if hit is None or hit[0] is not st:
            hit = _labels(st)
        out.append(new(SimEvent, (prefix + core, pipe, s, e, hit[1], hit[2])))
    return out


def event_label(stmt) -> tuple:
    """(label, loc) of a statement's SimEvents."""
    return _labels(stmt)[1:]


def instr_label(stmt) -> str:
    """The short text of a statement in reports (race, deadlock and timeline events)."""
    return _labels(stmt)[1]
