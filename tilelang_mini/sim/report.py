"""What a simulation reports: `SimReport` (cycles, pipe occupancy, events), its `SimEvent`s, and
the short IR text of a statement used in race, deadlock and timeline reports."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from ..ir.printer import print_ir_line
from ..ir.nodes import PIPES


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

    def __getattr__(self, name):
        # `events` left to make on first use (`defer_events`): made now, then kept
        parts = self.__dict__.get("_event_parts")
        if name != "events" or parts is None:
            raise AttributeError(name)
        self.events = events = [e for part in parts for e in part()]
        del self._event_parts
        return events

    def __getstate__(self):
        self.events  # noqa: B018 (made before pickling: the records hold closures)
        return self.__dict__

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


def defer_events(report: SimReport, parts: list) -> SimReport:
    """`report` with its events made on first use, from `parts`: functions returning the
    SimEvents of a block each (`block_events` of records, `instr_events` of instructions)."""
    del report.events
    report._event_parts = parts
    return report


def instr_events(done: list) -> list:
    """SimEvents of a block's completed DynInstrs, in completion order (`core`: the core's
    name with the block's prefix; `op.pidx`: its pipe; `start`, `end`: its cycles)."""
    new = tuple.__new__
    out = []
    for di in done:
        op = di.op
        lab = op.label
        if lab is None:
            lab = op.label = _labels(di.stmt)[1:]
        out.append(new(SimEvent, (di.core, PIPES[op.pidx], di.start, di.end, lab[0], lab[1])))
    return out


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


def instr_label(stmt) -> str:
    """The short text of a statement in reports (race, deadlock and timeline events)."""
    return _labels(stmt)[1]
