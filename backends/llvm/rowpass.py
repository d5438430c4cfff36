"""One pass over a row for the two fused row kinds of transform/cpu_fuse.py (`fuse_row_copies`):

* copy_map_reduce: per vector of the row, load GM, store it (converted) into X (and into the
  row X is copied on to, when that copy is fused too), then evaluate the map (whose load of X
  reads what was just stored) into the reduction's accumulators.
* map_copy: per vector of the row, evaluate the map, convert and store (streaming when the copy
  would stream) to GM; X is not written.

A row whose GM part is not inside the tensor (clipping, zero padding) runs the statements one
after the other instead, as without the fusion. Which statements are fused is decided by the
pass, in the IR.
"""
from __future__ import annotations

import llvmlite.ir as ir

from tilelang_mini.ir.analysis import GM_SCOPES

from . import codegen_ops as co
from . import vecmath as vm
from .access import ALL_LANES, all_in_bounds, base_offset, elem_ptr, runs, starts_of
from .irutil import I64, STORAGE, mark_contiguous, vty
from .packing import prefetch_next
from .values import Par

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
        with other:
            plain()


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
        if si.param is not None and g.loops:  # this row of the next tile (the row loop aside)
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
