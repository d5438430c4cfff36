"""Fewer passes over a row inside a row loop (transform/cpu_rows.py `fuse_rows`): a pair of
row-restricted statements becomes one loop over the row's vectors.

* copy-in + map + reduce: `copy(GM row, X[row +: 1, 0 +: N])` immediately followed (sync
  instructions aside) by a Parallel map fused with the last-dim reduction of its tile
  (cpu_rows.map_reduce_pairs) that reads X only at its own element X[row, j]: per vector of the
  row, load GM, store it (converted) into X, then evaluate the map (whose load of X reads what
  was just stored) into the accumulators. GM is read once; X holds exactly what the copy writes.
* map + copy-out: a Parallel map writing row `row` of X (and reading X at most at the element it
  writes) immediately followed by the copy of that row into a GM tensor the map does not read,
  X dead after the copy (`dead_after`): per vector of the row, evaluate, convert and store
  (streaming when the copy would stream) to GM; X is not written. (Storing into X as well made
  a large rmsnorm slower than the two passes, measured: X stays unpaired when anything may read
  it later.)

Within the row both orders give the same values: each vector of the pair's second statement
reads only the elements of the row its first statement has produced for that same vector. A row
whose GM part is not inside the tensor (clipping, zero padding) runs the two statements one
after the other, as without the pairing. These are the code generator's two fused emitters;
which statements form a row loop is decided by the pass, in the IR.
"""
from __future__ import annotations

import llvmlite.ir as ir

from tilelang_mini.ir.analysis import SYNC_OPS
from tilelang_mini.ir.nodes import (
    Const, Copy, For, Load, Region, Scope, Store, Var, body_fields, walk,
)

from . import vecmath as vm
from . import codegen_ops as co
from .access import all_in_bounds, base_offset, elem_ptr, runs, starts_of
from .irutil import I1, I64, STORAGE, VL, mark_contiguous, vty
from .layout import PER_BLOCK
from .values import Par

ALL_LANES = ir.Constant(ir.VectorType(I1, VL), [1] * VL)


def _gm_row(g, r, cols) -> bool:
    """Region r of a GM tensor: one row of `cols` elements along the tensor's last
    (contiguous) dimension."""
    info = g.plan.infos.get(r.buffer.name)
    d = [q for q, x in enumerate(r.extent) if x != 1]
    return (info is not None and info.param is not None and info.layout == "row"
            and [r.extent[q] for q in d] == [cols] and d[-1] == len(r.extent) - 1)


def _tile_row(g, r: Region):
    """The row index expression when region r is one whole row of a 2-d per-core on-chip
    row-layout tile of two or more rows, else None."""
    info = g.plan.infos.get(r.buffer.name)
    shape = r.buffer.shape
    if (info is None or info.param is not None or r.buffer.scope in PER_BLOCK
            or info.layout != "row" or len(shape) != 2 or shape[0] < 2
            or tuple(r.extent) != (1, shape[1]) or r.start[1] != Const(0)):
        return None
    return r.start[0]


def _row_map_store(m):
    """The Store of a one-variable Parallel map over a whole row `X[row, j]`, or None."""
    st = m.body[0] if isinstance(m, For) and m.kind == "parallel" and len(m.body) == 1 else None
    if (not isinstance(st, Store) or len(m.vars) != 1 or len(st.indices) != 2
            or st.indices[1] != Var(m.vars[0]) or m.extents[0] != Const(st.buffer.shape[1])
            or any(isinstance(n, Var) and n.name == m.vars[0] for n in walk(st.indices[0]))):
        return None
    return st


def _reads_only_own(st: Store, name) -> bool:
    """Every load of buffer `name` in the store reads the element the store writes."""
    return all(n.indices == st.indices for n in walk(st.value)
               if isinstance(n, Load) and n.buffer.name == name)


def row_pairs(g) -> dict:
    """{id(first): (kind, second)} for the pairs of the kernel's vector-core statement lists
    emitted as one pass over a row: kind "in" (a copy-in and the fused map after it) or "out"
    (a map and its copy-out)."""
    out: dict = {}

    def scan(stmts, in_v):
        for k, s in enumerate(stmts):
            if not (isinstance(s, For) and s.kind == "parallel"):  # not inside a map
                for f in body_fields(s):
                    scan(getattr(s, f), s.core == "V" if isinstance(s, Scope) else in_v)
            if not in_v:
                continue
            j = k + 1
            while j < len(stmts) and isinstance(stmts[j], SYNC_OPS):
                j += 1
            t = stmts[j] if j < len(stmts) else None
            if isinstance(s, Copy) and not (s.atomic or s.transpose) and _copy_in(g, s, t):
                out[id(s)] = ("in", t)
            elif k + 1 < len(stmts) and _copy_out(g, s, stmts[k + 1]):
                out[id(s)] = ("out", stmts[k + 1])

    scan(g.kernel.body, False)
    return out


def _copy_in(g, cp: Copy, m) -> bool:
    """GM -> X row copy followed by a fused map + reduce that reads X at its own elements."""
    st = _row_map_store(m)
    if st is None or id(m) not in g.fused:
        return False
    x = cp.dst.buffer
    row = _tile_row(g, cp.dst)
    return (row is not None and row == st.indices[0] and st.buffer.name != x.name
            and st.buffer.shape == x.shape and _gm_row(g, cp.src, x.shape[1])
            and any(isinstance(n, Load) and n.buffer.name == x.name for n in walk(st.value))
            and _reads_only_own(st, x.name))


def _copy_out(g, m, cp) -> bool:
    """Map m (not fused with a reduction) of a row of X followed by the copy of that row to
    GM, X dead after the copy."""
    st = _row_map_store(m)
    if st is None or id(m) in g.fused or not isinstance(cp, Copy) or cp.atomic or cp.transpose:
        return False
    x = st.buffer
    row = _tile_row(g, cp.src)
    return (row is not None and cp.src.buffer == x and row == st.indices[0]
            and _gm_row(g, cp.dst, x.shape[1]) and _reads_only_own(st, x.name)
            and not any(isinstance(n, Load) and n.buffer.name == cp.dst.buffer.name
                        for n in walk(st))
            and dead_after(g, cp, x.name))


def dead_after(g, cp, name) -> bool:
    """Nothing can read tile `name` (or a buffer sharing its storage) after statement `cp`:
    no later statement in program order references it, the only loop around `cp` is a loop over
    its rows whose body references it at the loop's row only, and every block writes the tile
    completely before reading it (it is not zeroed)."""
    info = g.plan.infos.get(name)
    names = {n for n, i in g.plan.infos.items() if i is info}
    if names & g.plan.zeroed:
        return False

    def refs(s):
        return any(isinstance(n, (Region, Load, Store)) and n.buffer.name in names
                   for n in walk(s))

    def at_row(n, row) -> bool:
        if isinstance(n, Region):
            return n.start[0] == row and n.extent[0] == 1
        return n.indices[0] == row

    def row_loop(s) -> bool:
        """A loop over the rows of the tile in which every reference to it is at the loop's
        row: eliding the map's write of row r changes what only `cp` would read."""
        if not (isinstance(s, For) and s.kind == "serial" and len(s.vars) == 1
                and cp.src.start[0] == Var(s.vars[0])):
            return False
        row = Var(s.vars[0])
        return all(at_row(n, row) for t in s.body for n in walk(t)
                   if isinstance(n, (Region, Load, Store)) and n.buffer.name in names)

    def find(stmts):
        """None: cp is not in stmts; else whether the tile is dead after it."""
        for k, s in enumerate(stmts):
            if s is cp:
                found = True
            else:
                inner = [find(getattr(s, f)) for f in body_fields(s)]
                found = next((r for r in inner if r is not None), None)
                if found is None:
                    continue
                found = found and (not isinstance(s, For) or row_loop(s))
            return found and not any(refs(t) for t in stmts[k + 1:])
        return None

    return bool(find(g.kernel.body))


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


def copy_in_map_reduce(g, cp: Copy, m, red):
    """Row copy `cp` fused into the row map `m` + reduce `red`."""
    si, xi = g.info(cp.src.buffer), g.info(cp.dst.buffer)
    ok, ss = _in_bounds(g, cp.src)
    e, b = g.e, g.e.b

    def fused():
        ds = starts_of(g, cp.dst)
        sbase, xbase = g.buf_ptr(si), g.buf_ptr(xi)
        s_off, x_off = base_offset(g, si, ss), base_offset(g, xi, ds)
        rt = STORAGE[si.storage][0]
        exact = si.dtype if si.dtype in vm.FLOATS else None

        def before(t0, mask):
            sp = elem_ptr(g, si, sbase, b.add(s_off, t0))
            xp = elem_ptr(g, xi, xbase, b.add(x_off, t0))
            raw = (e.load(vty(rt), sp) if mask is None
                   else e.masked_load(vty(rt), sp, mask, ir.Constant(vty(rt), None)))
            val = vm.encode(e, vm.decode(e, raw, si.storage), vm.kind_of(si.dtype), xi.dtype,
                            xi.storage, exact)
            if mask is None:
                e.store(val, xp)
            else:
                e.masked_store(val, xp, mask)

        g.map_reduce(m, red, before)

    def plain():
        co.copy(g, cp)
        g.map_reduce(m, red)

    _branch(g, ok, fused, plain)


def map_copy_out(g, m, cp: Copy):
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
            mark_contiguous(lane)
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
