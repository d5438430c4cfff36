"""One pass over a row for the two fused row kinds of transform/cpu_fuse.py (`fuse_row_copies`):

* copy_map_reduce: per vector of the row, load GM, store it (converted) into X (and into the
  row X is copied on to, when that copy is fused too), then evaluate the map (whose load of X
  reads what was just stored) into the reduction's accumulators.
* map_copy: per vector of the row, evaluate the map, convert and store (streaming when the copy
  would stream) to GM; X is not written. Inside a loop over rows it also prefetches the next
  row of the loop's fused copy-ins (`write_pass_prefetch`).

A row whose GM part is not inside the tensor (clipping, zero padding) runs the statements one
after the other instead, as without the fusion. Which statements are fused is decided by the
pass, in the IR.
"""
from __future__ import annotations

import llvmlite.ir as ir

from tilelang_mini.ir.analysis import GM_SCOPES
from tilelang_mini.ir.nodes import Const, Fused

from . import codegen_ops as co
from . import vecmath as vm
from .access import ALL_LANES, all_in_bounds, base_offset, elem_ptr, runs, starts_of
from .irutil import I64, STORAGE, VL, mark_contiguous, vty
from .packing import next_starts, prefetch_lines, prefetch_next
from .values import Par, plus_var, vars_in

def _in_bounds(g, r):
    starts = starts_of(g, r)
    return all_in_bounds(g, r, starts), starts


def _branch(g, ok, fused, plain):
    if isinstance(ok, ir.Constant):
        (fused if ok.constant else plain)()
        return
    with g.e.b.if_else(ok) as (then, other):
        with then:
            fused()
        with other:  # the row clips: its copies' own in-bounds test is known false here
            g.clipped.append(ok)
            try:
                plain()
            finally:
                g.clipped.pop()


def hand_row_prefetch(g, s) -> set:
    """Before serial row loop `s`: the rows its fused copy-ins (copy_map_reduce) read in the
    next iteration of the enclosing loop go to the next gemm as one descriptor (base of row 0,
    rows, row stride, lines), which spreads their prefetches over its micro-kernel calls; the
    copy-ins then prefetch nothing themselves (g.rows_handed). Prefetched one row at a time
    inside the row loop, the next tile's lines were a burst as long as the row pass: the miss
    buffers overflowed and the stream stalled while the gemm left memory idle::

        for r in serial(64):                          prefetch_desc(A[r0', k0' +: 128] for r in 0..64)
            fused(copy(A[r0 + r, k0 +: 128], X), ...)    -> for r in serial(64): fused(...)
                                                       (gemm: its calls prefetch 64 / calls rows each)

    Only a copy whose row extent is 1, a single contiguous run in the last dimension, and whose
    row start is `e + r` in exactly one dimension. Returns the handed copies' ids (the caller
    removes them from g.rows_handed after the loop)."""
    handed = set()
    if len(s.vars) != 1 or not isinstance(s.extents[0], Const) or not g.loops:
        return handed
    row, rows = s.vars[0], s.extents[0].value
    for t in s.body:
        if not isinstance(t, Fused) or t.kind != "copy_map_reduce":
            continue
        cp = t.body[0]
        si = g.info(cp.src.buffer)
        r = cp.src
        dims = [d for d, x in enumerate(r.extent) if x != 1]
        at = [d for d, x in enumerate(r.start) if row in vars_in((x,))]
        if si.param is None or dims != [len(r.extent) - 1] or len(at) != 1 \
                or not plus_var(r.start[at[0]], row) or si.strides[-1] != 1:
            continue
        saved = {row: (g.vars.get(row), g.ranges.get(row))}
        g.bind(row, ir.Constant(I64, 0), (0, 0))
        try:
            starts = next_starts(g, r)
        finally:
            g.restore(saved)
        if starts is None:
            continue
        esz = STORAGE[si.storage][1]
        lines = -(-r.extent[-1] * esz // 64) + 1
        if lines > 64:
            continue
        base = elem_ptr(g, si, g.buf_ptr(si), base_offset(g, si, starts))
        g.prefetch.append((base, rows, si.strides[at[0]] * esz, lines))
        handed.add(id(cp))
    g.rows_handed |= handed
    return handed


def next_row_reads(g, s) -> list:
    """The fused row copy-ins (copy_map_reduce) of serial row loop `s` whose GM row, a single
    contiguous run, starts at an offset of the loop variable and is not handed to a gemm
    (hand_row_prefetch): a map_copy pass in the same body prefetches their next row
    (`write_pass_prefetch`). The codegen keeps them in g.row_reads while it emits the body."""
    if len(s.vars) != 1:
        return []
    row, found = s.vars[0], []
    for t in s.body:
        if not isinstance(t, Fused) or t.kind != "copy_map_reduce":
            continue
        cp = t.body[0]
        si, r = g.info(cp.src.buffer), cp.src
        if si.param is None or id(cp) in g.rows_handed or si.strides[-1] != 1 \
                or [d for d, x in enumerate(r.extent) if x != 1] != [len(r.extent) - 1] \
                or row not in vars_in(tuple(r.start)):
            continue
        found.append(cp)
    return found


def write_pass_prefetch(g, n):
    """chunk(t0) -> emit the prefetches (into L2) of the next row's GM input that belong to
    the map_copy vector at element t0 of its `n`-element row, or None when there is nothing to
    prefetch. A row loop of a fused read pass and a write pass alternates reading and writing
    memory: while the write pass runs (no load misses to follow) the hardware prefetcher stops,
    and the next read pass starts cold. Spreading the next row's lines over the write pass's
    stores keeps reads and writes in flight together, as a copy loop does::

        for r in serial(R):                                for r in serial(R):
            fused(copy(A[r0 + r, :], X), map, reduce)  ->      fused(copy(A[r0 + r, :], X), ...)
            ...                                                ...
            fused(map X -> Y, copy(Y, B[r0 + r, :]))           fused(map X -> Y, copy(Y, B[...]),
                                                                     prefetch A[r0 + r + 1, :])

    The next row is the copy's region with the row variable plus one; past the last row it is
    whatever follows (a prefetch is a hint: it never faults and changes no result)."""
    if not g.row_reads or not g.loops:
        return None
    e, b = g.e, g.e.b
    row = g.loops[-1]
    plans = []
    for cp in g.row_reads:
        if row not in vars_in(tuple(cp.src.start)):
            continue
        si = g.info(cp.src.buffer)
        starts = next_starts(g, cp.src)
        if starts is None:
            continue
        row_bytes = cp.src.extent[-1] * STORAGE[si.storage][1]
        step = prefetch_step(row_bytes, n)
        base = elem_ptr(g, si, g.buf_ptr(si), base_offset(g, si, starts))
        plans.append((base, step, max(row_bytes - step, 0)))
    if not plans:
        return None

    def chunk(t0):  # vector k of the write pass: bytes [k * step, (k + 1) * step) of each row
        k = b.sdiv(t0, ir.Constant(I64, VL))  # (the last step's bytes again past the row)
        for base, step, last in plans:
            off = e.smin(b.mul(k, ir.Constant(I64, step)), ir.Constant(I64, last))
            prefetch_lines(g, e.gep(base, off), step // 64)
    return chunk


def prefetch_step(row_bytes: int, n: int) -> int:
    """Bytes of the next row that each vector of an `n`-element write pass prefetches: whole
    cache lines, together covering `row_bytes` (less than a line more per vector)."""
    return -(-row_bytes // -(-n // VL) // 64) * 64


def copy_in_map_reduce(g, cp, m, red, on=None):
    """Row copy `cp` fused into the row map `m` + reduce `red` (and into `on`, the copy of the
    same row of X on to GM: the converted values are stored there as well)."""
    si, xi = g.info(cp.src.buffer), g.info(cp.dst.buffer)
    ok, ss = _in_bounds(g, cp.src)
    e, b = g.e, g.e.b
    if on is not None:
        oi = g.info(on.dst.buffer)
        ok_on, os_ = _in_bounds(g, on.dst)
        ok = b.and_(ok, ok_on)
    if cp.dst.buffer.scope in GM_SCOPES:  # a staging tile skipped (cpu_fuse): X is a GM row
        ok = b.and_(ok, _in_bounds(g, cp.dst)[0])

    def fused():
        ds = starts_of(g, cp.dst)
        if si.param is not None and g.loops and id(cp) not in g.rows_handed:
            # this row of the next tile (the row loop aside)
            prefetch_next(g, cp.src, si, [d for d, x in enumerate(cp.src.extent) if x != 1],
                          skip=g.loops[-1:])
        sbase, xbase = g.buf_ptr(si), g.buf_ptr(xi)
        s_off, x_off = base_offset(g, si, ss), base_offset(g, xi, ds)
        rt = STORAGE[si.storage][0]
        exact = si.dtype if si.dtype in vm.FLOATS else None

        targets = [(xi, xbase, x_off)]
        if on is not None:
            targets.append((oi, g.buf_ptr(oi), base_offset(g, oi, os_)))

        def before(t0, mask):
            sp = elem_ptr(g, si, sbase, b.add(s_off, t0))
            raw = (e.load(vty(rt), sp) if mask is None
                   else e.masked_load(vty(rt), sp, mask, ir.Constant(vty(rt), None)))
            val = vm.encode(e, vm.decode(e, raw, si.storage), vm.kind_of(si.dtype), xi.dtype,
                            xi.storage, exact)
            for i, (ti, tbase, t_off) in enumerate(targets):
                if i:  # X's values on to the next buffer (as the copy from X would convert)
                    val = vm.encode(e, vm.decode(e, val, xi.storage), vm.kind_of(xi.dtype),
                                    ti.dtype, ti.storage, xi.dtype if xi.dtype in vm.FLOATS
                                    else None)
                tp = elem_ptr(g, ti, tbase, b.add(t_off, t0))
                if mask is None:
                    e.store(val, tp)
                else:
                    e.masked_store(val, tp, mask)

        g.map_reduce(m, red, before)

    def plain():
        co.copy(g, cp)
        g.map_reduce(m, red)
        if on is not None:
            co.copy(g, on)

    _branch(g, ok, fused, plain)


def map_copy_out(g, m, cp):
    """Row map `m` (one variable j) and its row copy-out `cp`: the map's values go to GM only
    (its tile is dead after the copy)."""
    st = m.body[0]
    xi, di = g.info(st.buffer), g.info(cp.dst.buffer)
    ok, ds = _in_bounds(g, cp.dst)
    e, b = g.e, g.e.b
    (jn,), (jx,) = m.vars, m.extents
    n = int(jx.value)

    def fused():
        dp = elem_ptr(g, di, g.buf_ptr(di), base_offset(g, di, ds))
        dsz = STORAGE[di.storage][1]
        exact = xi.dtype if xi.dtype in vm.FLOATS else None
        saved = {jn: (g.vars.get(jn), g.ranges.get(jn))}
        par = g.par = Par([jn], [ir.Constant(I64, n)])
        g.ranges[jn] = (0, n - 1)
        prev = g.stmt
        g.stmt = st

        def value(t0, mask):
            lane = b.add(e.splat(t0), e.iota())
            mark_contiguous(lane, lambda _b, t0=t0: t0)
            par.mask = ALL_LANES if mask is None else mask
            g.vars[jn] = g.Val(lane, "int")
            v = g.expr(st.value)
            raw = e.splat(vm.encode(e, v.v, v.kind, xi.dtype, xi.storage))
            return vm.encode(e, vm.decode(e, raw, xi.storage), vm.kind_of(xi.dtype), di.dtype,
                             di.storage, exact)

        pf = write_pass_prefetch(g, n)
        if pf is not None:
            compute = value

            def value(t0, mask):
                pf(t0)
                return compute(t0, mask)

        try:
            g.check_map_store(st)
            if co.streams(g, di, n):
                co.stream_run(g, dp, n, value)
            else:
                def chunk(t0, mask):
                    q = e.gep(dp, b.mul(t0, ir.Constant(I64, dsz)))
                    val = value(t0, mask)
                    if mask is None:
                        e.store(val, q)
                    else:
                        e.masked_store(val, q, mask)
                runs(g, ir.Constant(I64, 0), ir.Constant(I64, n), chunk)
        finally:
            g.par = None
            g.stmt = prev
            g.restore(saved)

    def plain():
        g.for_(m)  # the map as usual (not through statement: that would pair it again)
        co.copy(g, cp)

    _branch(g, ok, fused, plain)
