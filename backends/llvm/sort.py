"""Sort tile op: each row of the values tile sorted in place with its indices tile, as a
bottom-up merge sort between the tile and a scratch copy (log2(n) passes, unrolled at compile
time: n is the tile's constant row length).

    for row:                                   # element offset row * n
        for width in 1, 2, 4, ... < n:         # (compile time) src -> dst, then swap
            for lo in range(0, n, 2 * width):
                i, j = lo, mid                 # mid = min(lo + width, n), hi = min(lo + 2w, n)
                for k in range(lo, hi):
                    take the left run's head if the right run is empty, or it comes first
        copy back when the last pass wrote the scratch copy

"Comes first": a larger value when descending (smaller when ascending); on equal values the
smaller index. Values compare as float32 (float tiles) or as integers (integer tiles).
"""
from __future__ import annotations

import llvmlite.ir as ir

from tilelang_mini.ir import dtypes
from tilelang_mini.ir.nodes import Sort

from .access import elem_ptr
from .irutil import I64, STORAGE


def sort(g, s: Sort) -> None:
    e, b = g.e, g.e.b
    vi, ii = g.info(s.values.buffer), g.info(s.indices.buffer)
    if vi.layout != "row" or ii.layout != "row":
        raise g.fail("internal: sort of a packed buffer")
    shape = s.values.extent
    n = shape[-1]
    rows = 1
    for d in shape[:-1]:
        rows *= d
    if n <= 1:
        return
    vt, vsize = STORAGE[vi.storage]
    it, isize = STORAGE[ii.storage]
    is_float = dtypes.is_float(vi.dtype) and vi.storage == "float32"
    if dtypes.is_float(vi.dtype) and not is_float:
        raise g.fail(f"sort of {vi.dtype} values kept as {vi.storage} is not supported by the "
                     "llvm target; sort a float32 tile")
    tmp_v = g.temp(n * vsize + n * isize + 64)
    tmp_i = e.gep(tmp_v, ir.Constant(I64, (n * vsize + 63) // 64 * 64))
    vbase, ibase = g.buf_ptr(vi), g.buf_ptr(ii)
    i_slot, j_slot = e.alloca(I64), e.alloca(I64)

    def load(info, base, off, t):
        return e.load(t, elem_ptr(g, info, base, off))

    def first(va, xa, vb, xb):
        """(va, xa) before (vb, xb)?"""
        if is_float:
            better = b.fcmp_ordered(">" if s.descending else "<", va, vb)
            same = b.fcmp_ordered("==", va, vb)
        else:
            better = b.icmp_signed(">" if s.descending else "<", va, vb)
            same = b.icmp_signed("==", va, vb)
        return b.or_(better, b.and_(same, b.icmp_signed("<", xa, xb)))

    with e.loop(0, rows, name="srow") as row:
        row_off = b.mul(row, ir.Constant(I64, n))
        rv, ri = (vbase, row_off), (ibase, row_off)   # (base, element offset) of this row
        tv, ti = (tmp_v, ir.Constant(I64, 0)), (tmp_i, ir.Constant(I64, 0))
        src, dst = (rv, ri), (tv, ti)
        width = 1
        while width < n:
            (sv, sx), (dv, dx) = src, dst
            with e.loop(0, n, 2 * width, name="slo") as lo:
                mid = e.smin(b.add(lo, ir.Constant(I64, width)), ir.Constant(I64, n))
                hi = e.smin(b.add(lo, ir.Constant(I64, 2 * width)), ir.Constant(I64, n))
                e.store(lo, i_slot)
                e.store(mid, j_slot)
                with e.loop(lo, hi, name="sk") as k:
                    i, j = e.load(I64, i_slot), e.load(I64, j_slot)
                    ic = e.smin(i, b.sub(mid, ir.Constant(I64, 1)))
                    jc = e.smin(j, b.sub(hi, ir.Constant(I64, 1)))
                    a_v = load(vi, sv[0], b.add(sv[1], ic), vt)
                    a_x = load(ii, sx[0], b.add(sx[1], ic), it)
                    c_v = load(vi, sv[0], b.add(sv[1], jc), vt)
                    c_x = load(ii, sx[0], b.add(sx[1], jc), it)
                    left_ok = b.icmp_signed("<", i, mid)
                    right_ok = b.icmp_signed("<", j, hi)
                    take = b.and_(left_ok, b.or_(b.not_(right_ok), first(a_v, a_x, c_v, c_x)))
                    e.store(b.select(take, a_v, c_v), elem_ptr(g, vi, dv[0], b.add(dv[1], k)))
                    e.store(b.select(take, a_x, c_x), elem_ptr(g, ii, dx[0], b.add(dx[1], k)))
                    step = b.zext(take, I64)
                    e.store(b.add(i, step), i_slot)
                    e.store(b.add(j, b.sub(ir.Constant(I64, 1), step)), j_slot)
            src, dst = dst, src
            width *= 2
        if src[0] is not rv:  # the sorted row is in the scratch copy
            for info, (sb, so), (db, do), size in ((vi, src[0], rv, vsize), (ii, src[1], ri, isize)):
                e.memcpy(elem_ptr(g, info, db, do), elem_ptr(g, info, sb, so),
                         ir.Constant(I64, n * size))

