"""Bytes shared by buffers that plan_memory placed on common memory (its reuse of dead space).

The simulator race-checks each buffer by element boxes. An access to buffer `b` also touches
every buffer `y` planned on some of `b`'s bytes, but only on the bytes it really touches: the
access's element box (any rank) becomes byte ranges of the scope (one per contiguous run: a
row of a strided 2-D box, one range for a box of whole rows), and those become element boxes of
`y` (any rank, exact):

    b = alloc_ub((4, 24), "float32", offset=0)      # bytes [0, 384)
    y = alloc_ub((96,), "float32", offset=0)
    fill(b[0 +: 1, 0 +: 24])  -> bytes [0, 96)  -> y elements [0, 24)
    fill(b[2 +: 1, 0 +: 1])   -> bytes [192, 196) -> y elements [48, 49): no overlap, no race

Boxes are flat tuples (lo0, hi0, lo1, hi1, ...) as in the simulator.
"""
from __future__ import annotations

from ..ir import dtypes
from ..ir.happens_before import byte_ranges  # noqa: F401 (one definition, shared)
from ..ir.nodes import Alloc, walk_statements


def placements(kernel) -> dict:
    """name -> (buffer, offset, end) of every on-chip buffer plan_memory placed."""
    return {s.buffer.name: (s.buffer, s.offset,
                            s.offset + s.buffer.numel * dtypes.itemsize(s.buffer.dtype))
            for s in walk_statements(kernel.body)
            if isinstance(s, Alloc) and s.offset is not None}


def aliases(placed: dict) -> dict:
    """name -> the buffers of the same scope whose planned bytes overlap its own."""
    out: dict = {}
    for b, lo, hi in placed.values():
        for c, lo2, hi2 in placed.values():
            if c.name != b.name and c.scope == b.scope and lo < hi2 and lo2 < hi:
                out.setdefault(b.name, []).append(c)
    return out


def alias_boxes(ranges: list, y, offset: int) -> list:
    """Element boxes of `y` (placed at `offset`, any rank) covering the given byte ranges,
    exactly: a run of elements is, per leading index, a partial first slice, whole middle
    slices and a partial last slice, recursively.

        y: (4, 8) float32; bytes [16, 100) -> [(0, 1, 4, 8), (3, 4, 0, 1), (1, 3, 0, 8)]"""
    size = dtypes.itemsize(y.dtype)
    end = offset + y.numel * size
    shape = tuple(y.shape) or (1,)
    out = []
    for lo, hi in ranges:
        lo, hi = max(lo, offset), min(hi, end)
        if hi <= lo:
            continue
        out += _flat_boxes((lo - offset) // size, -(-(hi - offset) // size), shape)
    return out


def _flat_boxes(e0: int, e1: int, shape: tuple) -> list:
    """Flat boxes of a row-major `shape` covering elements [e0, e1) exactly."""
    if len(shape) == 1:
        return [(e0, e1)]
    inner = 1
    for n in shape[1:]:
        inner *= n
    whole = tuple(v for n in shape[1:] for v in (0, n))
    r0, r1 = e0 // inner, (e1 - 1) // inner
    if r0 == r1:
        return [(r0, r0 + 1) + b for b in _flat_boxes(e0 - r0 * inner, e1 - r0 * inner,
                                                       shape[1:])]
    out = []
    if e0 % inner:
        out += [(r0, r0 + 1) + b for b in _flat_boxes(e0 % inner, inner, shape[1:])]
        r0 += 1
    if e1 % inner:
        out += [(r1, r1 + 1) + b for b in _flat_boxes(0, e1 - r1 * inner, shape[1:])]
        r1 -= 1
    if r1 >= r0:
        out.append((r0, r1 + 1) + whole)
    return out
