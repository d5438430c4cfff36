"""plan_memory: each on-chip buffer gets an aligned byte offset in its scope; buffers whose live
ranges do not overlap share bytes. A scope that overflows is a CompileError at the allocation
that does not fit, naming the scope, the chip, and every buffer with its size:

    A_s = alloc_L1((128, 64), "float16")     ->   A_s = alloc_L1((128, 64), "float16", offset=0)
    B_s = alloc_L1((64, 128), "float16")     ->   B_s = alloc_L1((64, 128), "float16", offset=16384)

A buffer is live from its first to its last use; a use inside a loop keeps it live for the whole
loop (the next iteration uses it again).
"""
from __future__ import annotations

from dataclasses import replace

from ..arch import Chip
from ..errors import CompileError
from ..ir import dtypes
from ..ir.nodes import Alloc, For, Kernel, Load, Region, Store, body_fields, walk, walk_own

PLANNED = ("L1", "L0A", "L0B", "L0C", "UB")


def nbytes(buf) -> int:
    return buf.numel * dtypes.itemsize(buf.dtype)


def plan_memory(kernel: Kernel, chip: Chip) -> Kernel:
    allocs = [s for s in _walk(kernel.body) if isinstance(s, Alloc)]
    live = _live_ranges(kernel.body)
    offsets: dict[str, int] = {}
    for scope in PLANNED:
        mine = [a for a in allocs if a.buffer.scope == scope]
        if mine:
            offsets.update(_assign(mine, live, scope, chip))

    def rw(stmts):
        out = []
        for s in stmts:
            if isinstance(s, Alloc) and s.buffer.name in offsets:
                s = replace(s, offset=offsets[s.buffer.name])
            changes = {f: tuple(rw(getattr(s, f))) for f in body_fields(s)}
            out.append(replace(s, **changes) if changes else s)
        return out
    planned = replace(kernel, body=tuple(rw(list(kernel.body))))
    check_plan(planned, {a.buffer.name for a in allocs if a.offset is None})
    return planned


def check_plan(kernel: Kernel, placed=None) -> None:
    """No two buffers of one scope that are live at the same time share a byte (`placed`: the
    names to check, default all). A failure is a compiler bug, reported as an internal error
    naming both buffers, their bytes and their live ranges."""
    live = _live_ranges(kernel.body)
    allocs = [s for s in _walk(kernel.body) if isinstance(s, Alloc) and s.offset is not None
              and s.buffer.scope in PLANNED and (placed is None or s.buffer.name in placed)]
    by_scope: dict[str, list] = {}
    for a in allocs:
        by_scope.setdefault(a.buffer.scope, []).append(a)
    for scope, mine in by_scope.items():
        mine.sort(key=lambda a: a.offset)
        for i, a in enumerate(mine):
            a_end = a.offset + nbytes(a.buffer)
            for b in mine[i + 1:]:
                if b.offset >= a_end:
                    break
                la, lb = live.get(a.buffer.name), live.get(b.buffer.name)
                if la is None or lb is None or la[1] < lb[0] or lb[1] < la[0]:
                    continue
                raise CompileError(
                    f"internal: plan_memory placed '{a.buffer.name}' ({scope} bytes {a.offset}.."
                    f"{a_end}) and '{b.buffer.name}' (bytes {b.offset}..{b.offset + nbytes(b.buffer)})"
                    f" on shared bytes while both are live (program positions {la} and {lb})",
                    b.loc)


def _assign(allocs, live, scope: str, chip: Chip) -> dict:
    align, cap = chip.alignment_of(scope), chip.capacity_of(scope)
    placed: list[tuple[int, int, int, int]] = []  # (offset, end, live_start, live_end)
    out = {}
    for a in allocs:
        if a.offset is not None:  # expert mode: keep the user's offset, check it
            if a.offset % align:
                raise CompileError(f"{scope} offset {a.offset} of '{a.buffer.name}' is not "
                                   f"{align}-byte aligned", a.loc)
            out[a.buffer.name] = a.offset
            lo, hi = live.get(a.buffer.name, (0, 0))
            placed.append((a.offset, a.offset + nbytes(a.buffer), lo, hi))
            _check_fit(a, a.offset + nbytes(a.buffer), cap, scope, chip, allocs)
    for a in allocs:
        if a.offset is not None:
            continue
        size = nbytes(a.buffer)
        lo, hi = live.get(a.buffer.name, (0, 0))
        conflicts = sorted((o, e) for o, e, l2, h2 in placed if not (hi < l2 or h2 < lo))
        offset = 0
        for o, e in conflicts:
            if offset + size <= o:
                break
            offset = max(offset, -(-e // align) * align)
        _check_fit(a, offset + size, cap, scope, chip, allocs)
        placed.append((offset, offset + size, lo, hi))
        out[a.buffer.name] = offset
    return out


def _check_fit(a: Alloc, end: int, cap: int, scope: str, chip: Chip, allocs) -> None:
    if end <= cap:
        return
    listing = ", ".join(f"{x.buffer.name} {_shape(x.buffer)} {x.buffer.dtype} = "
                        f"{nbytes(x.buffer) / 1024:g} KiB" for x in allocs)
    raise CompileError(
        f"{scope} overflow on {chip.name}: '{a.buffer.name}' needs bytes up to {end / 1024:g} KiB "
        f"but {scope} has {cap / 1024:g} KiB per {'AIV' if scope == 'UB' else 'AIC'}; "
        f"{scope} buffers: {listing}. Use smaller tiles or fewer stages", a.loc)


def _shape(b) -> str:
    return "x".join(str(s) for s in b.shape)


def _walk(body):
    for s in body:
        yield s
        for f in body_fields(s):
            yield from _walk(getattr(s, f))


def _live_ranges(body) -> dict:
    """buffer name -> (first, last) leaf position in program order; a use inside a loop counts
    for the whole span of its outermost loop."""
    leaves = []  # (position, outermost loop id or None, statement)

    def visit(stmts, loop):
        for s in stmts:
            is_loop = isinstance(s, For) and s.kind != "parallel"
            if body_fields(s) and not (isinstance(s, For) and s.kind == "parallel"):
                leaves.append((len(leaves), loop, s, False))  # the statement's own expressions
                for f in body_fields(s):
                    visit(getattr(s, f), loop if loop is not None or not is_loop else id(s))
            else:
                leaves.append((len(leaves), loop, s, True))

    visit(list(body), None)
    spans: dict[int, list[int]] = {}
    for pos, loop, _, _ in leaves:
        if loop is not None:
            span = spans.setdefault(loop, [pos, pos])
            span[1] = pos
    ranges: dict[str, tuple[int, int]] = {}
    for pos, loop, s, whole in leaves:
        lo, hi = spans[loop] if loop is not None else (pos, pos)
        nodes = walk(s) if whole else walk_own(s)
        for n in nodes:
            if isinstance(n, (Region, Load, Store)):
                old = ranges.get(n.buffer.name, (lo, hi))
                ranges[n.buffer.name] = (min(old[0], lo), max(old[1], hi))
    return ranges
