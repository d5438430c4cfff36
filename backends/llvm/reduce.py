"""Reduce tile op: rows (last-dim reductions) with several vector accumulators, other dims
lane-parallel along the last dimension.

A reduce over the last dim of a tile that a Parallel map has just produced, where nothing else
reads that tile, is fused with the map (`map_reduce`, called by codegen.py): the map's values
are reduced as they are computed and the tile is never written (the values are rounded to the
tile's dtype first, as storing and reloading them would).
"""
from __future__ import annotations

import llvmlite.ir as ir

from . import vecmath as vm
from .access import (
    base_offset, check_in_bounds, check_reshape, lane_mask, starts_of, vload, vstore,
)
from .irutil import F32, I1, I32, I64, VL, const, constant, vty

_IDENT = {"sum": 0.0, "abssum": 0.0, "max": float("-inf"), "absmax": float("-inf"),
          "min": float("inf")}
ACCS = 4  # independent accumulators of a row reduction (hides the add latency)


def _combine(e, kind, a, c):
    if kind in ("sum", "abssum"):
        return e.b.fadd(a, c)
    if kind in ("max", "absmax"):
        return vm.fmax(e, a, c)
    return vm.fmin(e, a, c)


def hreduce(e, kind, v):
    n = v.type.count
    while n > 1:
        h = n // 2
        lo = e.b.shuffle_vector(v, v, constant(vty(I32, h), list(range(h))))
        hi = e.b.shuffle_vector(v, v, constant(vty(I32, h), list(range(h, n))))
        v = _combine(e, kind, lo, hi)
        n = h
    return e.b.extract_element(v, ir.Constant(I32, 0))


def row_reduce(g, kind, n, value):
    """Scalar reduction of a row of n values; value(t0, mask) -> <VL x float> of the lanes
    t0 + i (mask None: all VL lanes valid); masked-off lanes must hold the identity."""
    e, b = g.e, g.e.b
    ident = const(vty(F32), _IDENT[kind])
    nacc = ACCS if n >= ACCS * VL else 1
    accs = [e.alloca(vty(F32)) for _ in range(nacc)]
    for a in accs:
        e.store(ident, a, 4)

    def add(a, v):
        e.store(_combine(e, kind, e.load(vty(F32), a, 4), v), a, 4)

    main = n // (nacc * VL) * (nacc * VL)
    if main:
        with e.loop(0, main, nacc * VL, name="rd") as t0:
            for k, a in enumerate(accs):
                add(a, value(b.add(t0, ir.Constant(I64, k * VL)) if k else t0, None))
    if n - main >= VL:
        with e.loop(main, n // VL * VL, VL, name="rd1") as t0:
            add(accs[0], value(t0, None))
    if n % VL:
        t0 = ir.Constant(I64, n // VL * VL)
        add(accs[-1], value(t0, lane_mask(g, t0, ir.Constant(I64, 0), ir.Constant(I64, n))))
    vals = [e.load(vty(F32), a, 4) for a in accs]
    while len(vals) > 1:
        vals = [_combine(e, kind, vals[i], vals[i + 1]) for i in range(0, len(vals), 2)]
    return hreduce(e, kind, vals[0])


def reduce(g, s, producer=None):
    """Reduce statement `s`; `producer(outer_indices, t0, mask)` (last-dim reductions only)
    supplies the source values as float32 vectors instead of loads from the source tile."""
    if s.kind not in _IDENT:
        raise g.fail(f"unknown reduction {s.kind!r}")
    ndim = len(s.src.extent)
    if not -ndim <= s.dim < ndim:
        raise g.fail(f"reduce dim {s.dim} out of range for a {ndim}-d source")
    dim = s.dim % ndim
    src_ext = s.src.extent
    out_ext = src_ext[:dim] + src_ext[dim + 1:]
    check_reshape(out_ext, s.dst.extent, s, f"reduce_{s.kind} result")
    si, di = g.info(s.src.buffer), g.info(s.dst.buffer)
    if si.layout != "row" or di.layout != "row":
        raise g.fail("internal: reduce of a packed buffer")
    ss, ds = starts_of(g, s.src), starts_of(g, s.dst)
    check_in_bounds(g, s.src, ss)
    check_in_bounds(g, s.dst, ds)
    e, b = g.e, g.e.b
    sbase, dbase = (None if producer else g.buf_ptr(si)), g.buf_ptr(di)
    s_off0, d_off0 = base_offset(g, si, ss), base_offset(g, di, ds)
    out_dims = [q for q in range(ndim) if q != dim]
    d_dims = [d for d, x in enumerate(s.dst.extent) if x != 1]
    dmap, it = {}, iter(d_dims)
    for q in out_dims:  # source dim -> dst stride (0 for extent-1 dims)
        dmap[q] = di.strides[next(it)] if src_ext[q] != 1 else 0
    kind = s.kind
    skind = vm.kind_of(si.dtype)
    ident = const(vty(F32), _IDENT[kind])

    def value(raw, mask):
        f = vm.to_float(e, vm.decode(e, raw, si.storage), skind)
        if kind.startswith("abs"):
            f = e.unary("fabs", f)
        return f if mask is None else b.select(mask, f, ident)

    def finish(r, d_off, dstride, mask):
        """Combine with the old dst value (clear=False) and store; r is a VL vector."""
        if not s.clear:
            old = vload(g, di, dbase, d_off, dstride, mask)
            r = _combine(e, kind, vm.to_float(e, vm.decode(e, old, di.storage),
                                              vm.kind_of(di.dtype)), r)
        raw = vm.encode(e, r, "float", di.dtype, di.storage)
        vstore(g, di, dbase, d_off, dstride, raw, mask)

    m1 = ir.VectorType(I1, VL)
    lane0 = constant(m1, [1] + [0] * (VL - 1))
    last = ndim - 1
    if dim == last:
        loops = list(range(last))

        def nest_a(i, s_off, d_off, idx):
            if i == len(loops):
                if producer is not None:
                    def load(t0, mask):
                        return value(producer(idx, t0, mask), mask)
                else:
                    def load(t0, mask):
                        raw = vload(g, si, sbase, b.add(s_off, t0), 1,
                                    mask if mask is not None else constant(m1, [1] * VL))
                        return value(raw, mask)
                r = row_reduce(g, kind, src_ext[dim], load)
                finish(e.splat(r), d_off, 1, lane0)
                return
            q = loops[i]
            with e.loop(0, src_ext[q], name=f"ro{q}") as t:
                nest_a(i + 1, b.add(s_off, b.mul(t, ir.Constant(I64, si.strides[q]))),
                       b.add(d_off, b.mul(t, ir.Constant(I64, dmap[q]))), idx + [t])

        nest_a(0, s_off0, d_off0, [])
        return
    if producer is not None:
        raise g.fail("internal: fused reduce over a dimension other than the last")
    loops = [q for q in range(last) if q != dim]
    n_last = src_ext[last]
    dstride = dmap[last] if dmap[last] else 1

    def nest_b(i, s_off, d_off):
        if i == len(loops):
            with e.loop(0, n_last, VL, name="rl") as t0:
                mask = lane_mask(g, t0, ir.Constant(I64, 0), ir.Constant(I64, n_last))
                acc = e.alloca(vty(F32))
                e.store(ident, acc, 4)
                with e.loop(0, src_ext[dim], name="rr") as r:
                    off = b.add(b.add(s_off, t0), b.mul(r, ir.Constant(I64, si.strides[dim])))
                    raw = vload(g, si, sbase, off, 1, mask)
                    e.store(_combine(e, kind, e.load(vty(F32), acc, 4), value(raw, mask)), acc, 4)
                finish(e.load(vty(F32), acc, 4),
                       b.add(d_off, b.mul(t0, ir.Constant(I64, dstride))), dstride, mask)
            return
        q = loops[i]
        with e.loop(0, src_ext[q], name=f"ro{q}") as t:
            nest_b(i + 1, b.add(s_off, b.mul(t, ir.Constant(I64, si.strides[q]))),
                   b.add(d_off, b.mul(t, ir.Constant(I64, dmap[q]))))

    nest_b(0, s_off0, d_off0)
