"""Bytes shared by buffers that plan_memory placed on common memory (its reuse of dead space).

The simulator race-checks each buffer by element boxes. An access to buffer `b` also touches
every buffer `y` planned on some of `b`'s bytes, but only on the bytes it really touches: the
access's element box becomes byte ranges of the scope (one per row of a strided 2-D box, one for
a box of whole rows), and those become element boxes of `y`:

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
    """Element boxes of `y` (placed at `offset`) covering the given byte ranges: exact for 1-D
    and 2-D `y` (a partial first row, whole middle rows, a partial last row), the whole of `y`
    for more dimensions."""
    size = dtypes.itemsize(y.dtype)
    end = offset + y.numel * size
    out = []
    for lo, hi in ranges:
        lo, hi = max(lo, offset), min(hi, end)
        if hi <= lo:
            continue
        e0, e1 = (lo - offset) // size, -(-(hi - offset) // size)
        if len(y.shape) == 1:
            out.append((e0, e1))
        elif len(y.shape) == 2:
            cols = y.shape[1]
            r0, r1 = e0 // cols, (e1 - 1) // cols
            if r0 == r1:
                out.append((r0, r0 + 1, e0 % cols, (e1 - 1) % cols + 1))
                continue
            if e0 % cols:
                out.append((r0, r0 + 1, e0 % cols, cols))
                r0 += 1
            last = (e1 - 1) % cols + 1
            if last != cols:
                out.append((r1, r1 + 1, 0, last))
                r1 -= 1
            if r1 >= r0:
                out.append((r0, r1 + 1, 0, cols))
        else:
            return [tuple(v for n in y.shape for v in (0, n))]
    return out
