"""Fewer passes over a row inside a RowRun (rowfuse.py): a tile op pair becomes one loop.

* copy-in + map + reduce: `copy(GM rows, X)` immediately followed (sync instructions aside) by
  a Parallel map fused with the last-dim reduction of its tile (dataflow.map_reduce_pairs) that
  reads X only at its own element X[i, j]: per vector of row r, load GM, store it (converted)
  into X, then evaluate the map (whose load of X reads what was just stored) into the
  accumulators. GM is read once; X holds exactly what the copy writes.
* map + copy-out: a Parallel map writing every element of X (and reading X at most at the
  element it writes) immediately followed by the copy of the whole of X into a GM tensor the map
  does not read, X dead after the copy (`dead_after`): per vector of row r, evaluate, convert
  and store (streaming when the copy would stream) to GM; X is not written. (Storing into X as
  well made rmsnorm 16384x2048 ~4 ms slower than the two passes, measured: X stays unpaired
  when anything may read it later.)

Within row r both orders give the same values: each vector of the pair's second statement
reads only the elements of row r its first statement has produced for that same vector. A row
whose GM part is not inside the tensor (clipping, zero padding) runs the two statements one
after the other, as without the pairing.
"""
from __future__ import annotations

import llvmlite.ir as ir

from tilelang_mini.ir.analysis import SYNC_OPS
from tilelang_mini.ir.nodes import Copy, For, Load, Region, Store, Var, body_fields, walk

from . import vecmath as vm
from .dataflow import full_map_store
from .irutil import I1, I64, STORAGE, VL, vty

_ALL = ir.Constant(ir.VectorType(I1, VL), [1] * VL)


def _dims(ext):
    return [d for d, x in enumerate(ext) if x != 1]


def _gm_rows(g, r, rows, cols) -> bool:
    """Region r of a GM tensor: extents (rows, cols) after dropping extent-1 dims, the columns
    along the tensor's last (contiguous) dimension."""
    info = g.plan.infos.get(r.buffer.name)
    d = _dims(r.extent)
    return (info is not None and info.param is not None and info.layout == "row"
            and [r.extent[q] for q in d] == [rows, cols] and d[-1] == len(r.extent) - 1)


def _tile(g, buf):
    """(R, N) of a 2-d per-core on-chip row-layout tile, or None."""
    from .rowfuse import _kind
    if _kind(g, buf) != "vec" or len(buf.shape) != 2 or buf.shape[0] < 2:
        return None
    return buf.shape


def _map_store(s):
    """The Store of a 2-variable Parallel map with one statement writing all of its tile."""
    if (isinstance(s, For) and s.kind == "parallel" and len(s.vars) == 2 and len(s.body) == 1
            and full_map_store(s.body[0], s)):
        return s.body[0]
    return None


def _reads_only_own(st: Store, name) -> bool:
    """Every load of buffer `name` in the store reads the element the store writes."""
    return all(n.indices == st.indices for n in walk(st.value)
               if isinstance(n, Load) and n.buffer.name == name)


def copy_in_pairs(g, stmts) -> dict:
    """{id(copy): map} for GM -> X copies immediately followed (sync aside) by a fused
    map + reduce reading X at its own elements only."""
    out = {}
    for k, cp in enumerate(stmts):
        if (not isinstance(cp, Copy) or cp.atomic or cp.transpose or id(cp) in g.plan.skip
                or not cp.dst.is_full):
            continue
        shape = _tile(g, cp.dst.buffer)
        if shape is None or not _gm_rows(g, cp.src, *shape):
            continue
        j = k + 1
        while j < len(stmts) and isinstance(stmts[j], SYNC_OPS):
            j += 1
        m = stmts[j] if j < len(stmts) else None
        st = _map_store(m)
        if (st is None or id(m) not in g.fused or st.buffer.shape != shape
                or st.buffer.name == cp.dst.buffer.name):
            continue
        x = cp.dst.buffer.name
        loads = [n for n in walk(st.value) if isinstance(n, Load) and n.buffer.name == x]
        if loads and all(len(n.indices) == 2 and all(isinstance(ix, Var) and ix.name == v
                                                     for ix, v in zip(n.indices, m.vars))
                         for n in loads):
            out[id(cp)] = m
    return out


def copy_out_of(g, m, cp) -> bool:
    """Map m (not fused with a reduction) followed by copy cp of the whole of its tile to GM."""
    st = _map_store(m)
    if (st is None or id(m) in g.fused or not isinstance(cp, Copy) or cp.atomic
            or cp.transpose or id(cp) in g.plan.skip):
        return False
    x = st.buffer
    shape = _tile(g, x)
    return (shape is not None and cp.src.buffer == x and cp.src.is_full
            and _gm_rows(g, cp.dst, *shape) and _reads_only_own(st, x.name)
            and not any(isinstance(n, Load) and n.buffer.name == cp.dst.buffer.name
                        for n in walk(st))
            and dead_after(g, cp, x.name))


def dead_after(g, cp, name) -> bool:
    """Nothing can read tile `name` (or a buffer sharing its storage) after statement `cp`:
    no later statement in program order references it, `cp` is in no loop, and every block
    writes the tile completely before reading it (it is not zeroed, dataflow.py)."""
    info = g.plan.infos.get(name)
    names = {n for n, i in g.plan.infos.items() if i is info}
    if names & g.plan.zeroed:
        return False

    def refs(s):
        return any(isinstance(n, (Region, Load, Store)) and n.buffer.name in names
                   for n in walk(s))

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
                found = found and not isinstance(s, For)
            return found and not any(refs(t) for t in stmts[k + 1:])
        return None

    return bool(find(g.kernel.body))


def _in_bounds(g, r):
    from .codegen_ops import all_in_bounds, starts_of
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
    """Row ROW of `cp` fused into the (row-restricted) map `m` + reduce `red`."""
    from . import codegen_ops as co
    si, xi = g.info(cp.src.buffer), g.info(cp.dst.buffer)
    ok, ss = _in_bounds(g, cp.src)
    e, b = g.e, g.e.b

    def fused():
        ds = co.starts_of(g, cp.dst)
        sbase, xbase = g.buf_ptr(si), g.buf_ptr(xi)
        s_off, x_off = co.base_offset(g, si, ss), co.base_offset(g, xi, ds)
        rt = STORAGE[si.storage][0]
        exact = si.dtype if si.dtype in vm.FLOATS else None

        def before(t0, mask):
            sp = co.elem_ptr(g, si, sbase, b.add(s_off, t0))
            xp = co.elem_ptr(g, xi, xbase, b.add(x_off, t0))
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
    """Row-restricted map `m` (one variable j left) and row ROW of its copy-out `cp`: the map's
    values go to GM only (its tile is dead after the copy)."""
    from . import codegen_ops as co
    from .codegen import _Par
    st = m.body[0]
    xi, di = g.info(st.buffer), g.info(cp.dst.buffer)
    ok, ds = _in_bounds(g, cp.dst)
    e, b = g.e, g.e.b
    (jn,), (jx,) = m.vars, m.extents
    n = int(jx.value)

    def fused():
        dp = co.elem_ptr(g, di, g.buf_ptr(di), co.base_offset(g, di, ds))
        dsz = STORAGE[di.storage][1]
        exact = xi.dtype if xi.dtype in vm.FLOATS else None
        saved = {jn: (g.vars.get(jn), g.ranges.get(jn))}
        par = g.par = _Par([jn], [ir.Constant(I64, n)])
        g.ranges[jn] = (0, n - 1)
        prev = g.stmt
        g.stmt = st

        def value(t0, mask):
            lane = b.add(e.splat(t0), e.iota())
            lane._tlm_contig = True
            par.mask = _ALL if mask is None else mask
            g.vars[jn] = g.Val(lane, "int")
            v = g.expr(st.value)
            raw = e.splat(vm.encode(e, v.v, v.kind, xi.dtype, xi.storage))
            return vm.encode(e, vm.decode(e, raw, xi.storage), vm.kind_of(xi.dtype), di.dtype,
                             di.storage, exact)

        try:
            g._check_map_store(st)
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
                co._runs(g, ir.Constant(I64, 0), ir.Constant(I64, n), chunk)
        finally:
            g.par = None
            g.stmt = prev
            g._restore(saved)

    def plain():
        g.statement(m)
        co.copy(g, cp)

    _branch(g, ok, fused, plain)
