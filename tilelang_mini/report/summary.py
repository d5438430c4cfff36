"""A one-screen schedule summary of a compiled kernel: grid, buffers against the chip's
capacities, and the instructions per core and pipe (static counts, loops not unrolled)."""
from __future__ import annotations

from collections import Counter

from ..arch import get_chip
from ..ir import dtypes
from ..ir.nodes import Alloc, For, SYNC_OPS, walk_statements
from ..ir.pipes import pipe_of


def summarize(kernel) -> str:
    ir, chip = kernel.ir, get_chip(kernel.chip)
    blocks = 1
    for g in ir.grid:
        blocks *= g
    lines = [f"schedule of {ir.name} on {chip.name}: grid {ir.grid} = {blocks} blocks over "
             f"{chip.aic_cores} cube cores ({-(-blocks // chip.aic_cores)} waves)"]
    used = Counter()
    for s in walk_statements(ir.body):
        if isinstance(s, Alloc):
            used[s.buffer.scope] += s.buffer.numel * dtypes.itemsize(s.buffer.dtype)
    caps = dict(chip.capacity)
    parts = []
    for scope, n in sorted(used.items()):
        cap = caps.get(scope)
        parts.append(f"{scope} {n / 1024:.1f} KiB" + (f"/{cap // 1024} KiB" if cap else ""))
    lines.append("  buffers: " + (", ".join(parts) or "none"))
    counts = Counter()
    syncs = Counter()
    for s, core in _with_core(ir.body, None):
        if isinstance(s, SYNC_OPS):
            syncs[type(s).__name__] += 1
            continue
        pipe = pipe_of(s, core)
        if pipe is not None or _is_op(s):
            counts[(core or "-", pipe or "tile op")] += 1
    ops = ", ".join(f"{c}.{p}: {n}" if c != "-" else f"{p}: {n}" for (c, p), n in sorted(counts.items()))
    lines.append("  instructions: " + (ops or "none"))
    if syncs:
        lines.append("  sync: " + ", ".join(f"{k} {v}" for k, v in sorted(syncs.items())))
    return "\n".join(lines)


def _is_op(s) -> bool:
    from ..ir.nodes import TILE_OPS
    return isinstance(s, TILE_OPS) or (isinstance(s, For) and s.kind == "parallel")


def _with_core(body, core):
    for s in body:
        if getattr(s, "core", None) in ("C", "V") and hasattr(s, "body"):
            yield from _with_core(s.body, s.core)
            continue
        yield s, core
        if isinstance(s, For) and s.kind == "parallel":
            continue
        for f in ("body", "then_body", "else_body"):
            if hasattr(s, f):
                yield from _with_core(getattr(s, f), core)
