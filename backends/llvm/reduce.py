"""Reduce tile op: rows (last-dim reductions) with several vector accumulators, other dims
lane-parallel along the last dimension.

A reduce over the last dim of a tile that a Parallel map has just produced, where nothing else
reads that tile, is fused with the map (`map_reduce`, called by codegen.py): the map's values
are reduced as they are computed and the tile is never written (the values are rounded to the
tile's dtype first, as storing and reloading them would).
"""
from __future__ import annotations

import llvmlite.ir as ir

from tilelang_mini.ir.nodes import (
    Const, Fused, Load, PipeBarrier, Reduce, Region, SetFlag, Store, WaitFlag, walk,
)

from . import vecmath as vm
from .access import (
    base_offset, check_in_bounds, check_reshape, lane_mask, starts_of, vload, vstore,
)
from .irutil import F32, I1, I32, I64, VL, const, constant, vty
from .rowpass import hand_row_prefetch
from .values import plus_var, vars_in

_IDENT = {"sum": 0.0, "abssum": 0.0, "max": float("-inf"), "absmax": float("-inf"),
          "min": float("inf")}
ACCS = 4  # independent accumulators of a row reduction (hides the add latency)
UNROLLED = 4  # rows of at most UNROLLED * ACCS vectors are reduced in straight code (no loop)
GROUPED = VL // 2  # loops of at least this many rows finish VL rows at a time (row_groups)


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


def row_reduce(g, kind, n, value, lanes=False):
    """Scalar reduction of a row of n values; value(t0, mask) -> <VL x float> of the lanes
    t0 + i (mask None: all VL lanes valid); masked-off lanes must hold the identity. With
    `lanes`: the vector whose lanes reduce to it (transpose_reduce finishes VL rows at once)."""
    e, b = g.e, g.e.b
    ident = const(vty(F32), _IDENT[kind])
    nacc = ACCS if n >= ACCS * VL else 1
    main = n // (nacc * VL) * (nacc * VL)
    # accumulators in memory where a loop carries them (LLVM's SROA makes them registers),
    # else SSA values (straight code: no loads and stores for LLVM to remove)
    looped = main > UNROLLED * nacc * VL or n - main >= VL
    accs = [e.alloca(vty(F32)) for _ in range(nacc)] if looped else list(range(nacc))
    vals = [ident] * nacc
    for a in accs if looped else ():
        e.store(ident, a, 4)

    def add(a, v):
        if looped:
            e.store(_combine(e, kind, e.load(vty(F32), a, 4), v), a, 4)
        else:
            vals[a] = _combine(e, kind, vals[a], v)

    if 0 < main <= UNROLLED * nacc * VL:  # a short row in straight code: constant offsets
        for t in range(0, main, nacc * VL):
            for k, a in enumerate(accs):
                add(a, value(ir.Constant(I64, t + k * VL), None))
    elif main:
        with e.loop(0, main, nacc * VL, name="rd") as t0:
            for k, a in enumerate(accs):
                add(a, value(b.add(t0, ir.Constant(I64, k * VL)) if k else t0, None))
    if n - main >= VL:
        with e.loop(main, n // VL * VL, VL, name="rd1") as t0:
            add(accs[0], value(t0, None))
    if n % VL:
        t0 = ir.Constant(I64, n // VL * VL)
        add(accs[-1], value(t0, lane_mask(g, t0, ir.Constant(I64, 0), ir.Constant(I64, n))))
    if looped:
        vals = [e.load(vty(F32), a, 4) for a in accs]
    while len(vals) > 1:
        vals = [_combine(e, kind, vals[i], vals[i + 1]) for i in range(0, len(vals), 2)]
    return vals[0] if lanes else hreduce(e, kind, vals[0])


def transpose_reduce(e, kind, vals):
    """VL vectors -> one vector whose lane j reduces vector j: a tree whose every level pairs
    neighbours, puts both halves of each row's lanes side by side and combines them (two
    shuffles and one combine per pair, VL - 1 pairs in all)."""
    b = e.b
    seg = VL  # lanes per row in every vector
    while len(vals) > 1:
        rows, h = VL // seg, seg // 2
        lo, hi = [], []
        for u in range(2 * rows):  # the first vector's rows, then the second's
            src = (0 if u < rows else VL) + (u % rows) * seg
            lo += range(src, src + h)
            hi += range(src + h, src + seg)
        lo_c, hi_c = (constant(vty(I32), x) for x in (lo, hi))
        vals = [_combine(e, kind, b.shuffle_vector(x, y, lo_c), b.shuffle_vector(x, y, hi_c))
                for x, y in zip(vals[0::2], vals[1::2])]
        seg = h
    return vals[0]


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

        def row_load(s_off, idx):
            if producer is not None:
                def load(t0, mask):
                    return value(producer(idx, t0, mask), mask)
            else:
                def load(t0, mask):
                    raw = vload(g, si, sbase, b.add(s_off, t0), 1,
                                mask if mask is not None else constant(m1, [1] * VL))
                    return value(raw, mask)
            return load

        def nest_a(i, s_off, d_off, idx):
            if i == len(loops) and g.row_group is not None and \
                    any(r is s for r in g.row_group[0]):
                # this row's lanes (row_groups finishes them), after the row's earlier reduces
                v = row_reduce(g, kind, src_ext[dim], row_load(s_off, idx), lanes=True)
                slot = g.row_group[1]
                if g.row_group[0][0] is not s:
                    v = _combine(e, kind, e.load(vty(F32), slot, 4), v)
                e.store(v, slot, 4)
                return
            if i == len(loops):
                r = row_reduce(g, kind, src_ext[dim], row_load(s_off, idx))
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


# ------------------------------------------------------------------ rows finished in groups


def _grouped_reduce(g, s):
    """The Reduces of a serial loop over rows (at least GROUPED trips) whose body is fused
    maps + reduces of row `r` (transform/cpu_fuse.py; several: a pipeline's stages) into
    element `r + c` of a row-major destination, one kind, the same element, which the body
    reads nowhere else; else None."""
    if s.kind != "serial" or len(s.vars) != 1 or not isinstance(s.extents[0], Const) \
            or not isinstance(s.extents[0].value, int) or s.extents[0].value < GROUPED:
        return None
    parts = [t for t in s.body if not isinstance(t, (SetFlag, WaitFlag, PipeBarrier))]
    if not parts or any(not isinstance(t, Fused) or t.kind not in ("map_reduce",
                                                                    "copy_map_reduce")
                        for t in parts):
        return None
    reds = [t.body[-1] for t in parts]
    first, row = reds[0], s.vars[0]
    if not all(isinstance(r, Reduce) and r.kind in _IDENT and r.kind == first.kind
               and r.dst == first.dst for r in reds) or any(r.clear for r in reds[1:]):
        return None
    dst = first.dst
    if any(r.dim % len(r.src.extent) != len(r.src.extent) - 1
           or any(x != 1 for x in r.src.extent[:-1]) for r in reds) \
            or any(x != 1 for x in dst.extent) or g.info(dst.buffer).layout != "row":
        return None

    if not plus_var(dst.start[-1], row) or row in vars_in(tuple(dst.start[:-1])):
        return None
    name = dst.buffer.name
    for t, r in zip(parts, reds):
        for n in walk(t):
            if isinstance(n, (Load, Region, Store)) and n.buffer.name == name \
                    and n is not r.dst:
                return None
    return reds


def row_groups(g, s) -> bool:
    """A loop over rows, each fused maps + reduces into its own element of a 1-d result
    (_grouped_reduce), in groups of VL rows: each row leaves the vector whose lanes reduce to
    its result (its reduces' vectors combined), and one transpose_reduce and one vector
    combine/store finish the group's VL results, instead of a horizontal reduction and a
    scalar store per row and reduce:

        for r in serial(32):                       for r0 in 0, 16:
            with fused(...):                 ->        for j in 0 .. 16: keep[j] = lanes of row r0 + j
                ...                                    ss[r0 +: 16] += transpose_reduce(keep)
                reduce_sum(sq[r +: 1, ...], ss[r +: 1], clear=False)

    False (nothing emitted) when the loop is not of that form."""
    reds = _grouped_reduce(g, s)
    if reds is None:
        return False
    red = reds[0]
    e, b = g.e, g.e.b
    name, rows = s.vars[0], s.extents[0].value
    rng = (0, rows - 1)
    with b.goto_block(e.entry):  # VL vectors, indexed by the row in the group
        b.position_at_start(e.entry)
        keep = b.alloca(vty(F32), size=ir.Constant(I64, VL))

    def slot(j):
        return b.gep(keep, [j if isinstance(j, ir.Value) else ir.Constant(I64, j)])
    ident = const(vty(F32), _IDENT[red.kind])
    saved = {name: (g.vars.get(name), g.ranges.get(name))}

    def group(r0, count):
        for j in range(count, VL):
            e.store(ident, slot(j), 4)
        with e.loop(0, count, name=name) as j:
            g.bind(name, b.add(r0, j), rng)
            g.row_group = (reds, slot(j))
            try:
                g.body_in_context(s.body)
            finally:
                g.row_group = None
        vals = [e.load(vty(F32), slot(j), 4) for j in range(VL)]
        g.bind(name, r0, rng)
        r = transpose_reduce(e, red.kind, vals)
        di = g.info(red.dst.buffer)
        dbase = g.buf_ptr(di)
        d_off = base_offset(g, di, starts_of(g, red.dst))
        mask = constant(ir.VectorType(I1, VL), [1] * count + [0] * (VL - count))
        if not red.clear:
            old = vload(g, di, dbase, d_off, 1, mask)
            r = _combine(e, red.kind, vm.to_float(e, vm.decode(e, old, di.storage),
                                                  vm.kind_of(di.dtype)), r)
        vstore(g, di, dbase, d_off, 1, vm.encode(e, r, "float", di.dtype, di.storage), mask)

    handed = hand_row_prefetch(g, s)
    g.loops.append(name)
    prev, g.stmt = g.stmt, red
    try:
        if rows // VL:
            with e.loop(0, rows // VL * VL, VL, name=f"{name}_g") as r0:
                group(r0, VL)
        if rows % VL:
            group(ir.Constant(I64, rows // VL * VL), rows % VL)
    finally:
        g.stmt = prev
        g.loops.pop()
        g.rows_handed -= handed
        g.restore(saved)
    return True
