"""fuse_rows (llvm target): runs of row-local vector tile ops become one loop over the rows.

On the NPU each vector instruction streams a whole tile through UB. A CPU does better with a
working set of one row: a maximal run of consecutive statements of a Scope("V") body (sync
instructions aside) that are all row-local over the same R rows becomes
one serial loop over a fresh row variable, every statement restricted to that row (the sync
instructions met inside the run follow the loop, in their order: on the llvm target they only
mark the program order of the cores, which sets no earlier than before keep; a wait for another
core (wait_cross_flag) goes before the loop instead, as the statements after it must wait
for it, and waiting earlier is safe while no set of this core is passed: a set then a wait
end the run):

    copy(X[r0 +: 4, 0 +: 64], x)                     copy(X[r0 +: 4, 0 +: 64], x)
    reduce_max(x, m, dim=1)                          for row in serial(4):
    pipe_barrier(V)                           ->         reduce_max(x[row +: 1, 0 +: 64], m[row +: 1], dim=1)
    for i, j in Parallel(4, 64):                         for j in Parallel(64):
        e[i, j] = exp(x[i, j] - m[i])                        e[row, j] = exp(x[row, j] - m[row])
    copy(e, Y[r0 +: 4, 0 +: 64])                         copy(e[row +: 1, 0 +: 64], Y[r0 + row +: 1, 0 +: 64])
                                                     pipe_barrier(V)

Row-local statements (R >= 2), restricted to row `row`:
* a copy from an on-chip tile (to a tile, a GM tensor or the block's GM workspace): its
  first non-unit source and destination dims (which
  correspond: the shapes agree once extent-1 dims are dropped) have extent R; both regions start
  `row` further there with extent 1 (clipping and zero padding are elementwise). A copy from GM
  joins the run only when the next statement is a map fused with its reduction that reads the
  copied tile at its own elements (one pass over the row reads GM and feeds the reduction);
  otherwise it stays a whole-tile copy before the run (one long read keeps memory busier);
* a reduce along the last dim of a 2-d tile, rows [0, R) into per-row values;
* a fill of rows [0, R) of a tile;
* a Parallel map `for i, ... in Parallel(R, ...)` of stores only: i becomes `row` and the map
  runs over the other variables (a one-variable map becomes its stores).
A "row access" touches row `row` (dim 0) of a per-core on-chip buffer of R rows only: a region
of rows [0, R), a load or store whose first index is the map's first variable (no other index
uses it). The run is valid when every on-chip buffer it writes is accessed by row accesses
only and every GM tensor it writes is written by one statement and not read by the run: then
statement k at row r reads exactly what it reads in program order, so results are identical.
A map whose reduction (`map_reduce_pairs`) is not in the same run keeps the run from including
it. A run of fewer than two working statements is left alone.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..ir.analysis import BLOCK_SCOPES, GM_SCOPES, SYNC_OPS, buffer_refs
from ..ir.nodes import (
    Alloc, BinOp, Const, Copy, Fill, For, Kernel, Load, Reduce, Region, Scope, SetCrossFlag,
    Store, Var, WaitCrossFlag, body_fields, walk,
)
from .util import substitute


# ------------------------------------------------------------------------------ map + reduce


def _map_store_of(s):
    """The only statement of Parallel map `s` when it is a Store, else None."""
    if isinstance(s, For) and s.kind == "parallel" and len(s.body) == 1 \
            and isinstance(s.body[0], Store):
        return s.body[0]
    return None


def _uses(exprs, names) -> bool:
    return any(isinstance(n, Var) and n.name in names for x in exprs for n in walk(x))


def stores_region(loop, st: Store, r: Region) -> bool:
    """Map `loop`'s store `st` writes exactly region `r` of its buffer, each element once: its
    trailing indices are the loop's variables over whole dimensions, its leading indices are
    the region's starts (extent 1) and use no loop variable."""
    x, n = st.buffer, len(loop.vars)
    k = len(x.shape) - n
    if r.buffer != x or k < 0 or len(st.indices) != len(x.shape) or len(loop.extents) != n:
        return False
    for q, v in enumerate(loop.vars):
        ix, ext, d = st.indices[k + q], loop.extents[q], k + q
        if not (isinstance(ix, Var) and ix.name == v and isinstance(ext, Const)
                and type(ext.value) is int and ext.value == x.shape[d] == r.extent[d]
                and isinstance(r.start[d], Const) and r.start[d].value == 0):
            return False
    return all(r.extent[d] == 1 and st.indices[d] == r.start[d]
               and not _uses((st.indices[d],), set(loop.vars)) for d in range(k))


def map_reduce_pairs(kernel: Kernel) -> dict:
    """{id(map): reduce} for a Parallel map whose one store fills (a region of) a tile X that
    the next statement (sync instructions aside) reduces along its last dimension, X being used
    nowhere else (every reference to X is the store or the reduction of such a pair: a
    pipelined loop's prologue, body and epilogue each hold one): the reduction can consume the
    map's values without X being written."""
    refs = buffer_refs(kernel.body)
    params = {p.name for p in kernel.params}
    found: dict = {}

    def scan(stmts):
        for i, s in enumerate(stmts):
            for f in body_fields(s):
                scan(getattr(s, f))
            st = _map_store_of(s)
            if st is None:
                continue
            x = st.buffer
            j = i + 1
            while j < len(stmts) and isinstance(stmts[j], SYNC_OPS):
                j += 1
            if j == len(stmts) or x.name in params:
                continue
            r = stmts[j]
            if (isinstance(r, Reduce) and r.dim % len(x.shape) == len(x.shape) - 1
                    and r.dst.buffer.name != x.name and stores_region(s, st, r.src)
                    and buffer_refs([s, r]).get(x.name) == 2):
                found.setdefault(x.name, []).append((s, r))

    scan(kernel.body)
    return {id(s): r for name, pairs in found.items() if refs.get(name) == 2 * len(pairs)
            for s, r in pairs}


# -------------------------------------------------------------------------------- the pass


@dataclass
class _Acc:
    rows: int
    row: set = field(default_factory=set)       # buffers accessed at row r only
    writes: set = field(default_factory=set)    # on-chip buffers written (row accesses)
    gm_writes: set = field(default_factory=set)
    reads: set = field(default_factory=set)     # buffers read anywhere ("any" accesses)


def _first(ext):
    return next((d for d, x in enumerate(ext) if x != 1), None)


def _zero(x) -> bool:
    return isinstance(x, Const) and type(x.value) is int and x.value == 0


class _Rows:
    def __init__(self, kernel: Kernel):
        self.params = {p.name for p in kernel.params}
        self.fused = map_reduce_pairs(kernel)
        taken = set(kernel.grid_vars) | {p.name for p in kernel.params}
        for n in walk(kernel):
            if isinstance(n, Var):
                taken.add(n.name)
            elif isinstance(n, For):
                taken |= set(n.vars)
            elif isinstance(n, Alloc):
                taken.add(n.buffer.name)
        self.row = next(f"row{k or ''}" for k in range(len(taken) + 1)
                        if f"row{k or ''}" not in taken)

    # -- classification
    def kind(self, buf):
        """"gm" (a kernel parameter or a block's GM workspace), "vec" (a per-core on-chip
        buffer) or None."""
        if buf.name in self.params or buf.scope in GM_SCOPES:
            return "gm"
        return None if buf.scope in BLOCK_SCOPES else "vec"

    def row_region(self, r, rows) -> bool:
        shape = r.buffer.shape
        return (self.kind(r.buffer) == "vec" and len(shape) >= 1 and shape[0] == rows
                and r.extent[0] == rows and _zero(r.start[0]) and _first(r.extent) == 0)

    @staticmethod
    def start_reads(acc, *regions):
        for r in regions:
            acc.reads |= {n.buffer.name for x in r.start for n in walk(x) if isinstance(n, Load)}

    def classify(self, s, copy_in=False):
        if isinstance(s, Copy) and (s.atomic or s.transpose):  # emitted on their own
            return None
        if isinstance(s, Copy):
            return self.classify_copy(s, copy_in)
        if isinstance(s, Reduce):
            src, dst = s.src, s.dst
            if (len(src.extent) != 2 or s.dim not in (1, -1)
                    or not self.row_region(src, src.extent[0])
                    or not self.row_region(dst, src.extent[0])
                    or [x for x in dst.extent if x != 1] != [src.extent[0]]):
                return None
            acc = _Acc(src.extent[0], row={src.buffer.name, dst.buffer.name},
                       writes={dst.buffer.name})
            self.start_reads(acc, src, dst)
            return acc
        if isinstance(s, Fill):
            if not s.dst.extent or not self.row_region(s.dst, s.dst.extent[0]):
                return None
            acc = _Acc(s.dst.extent[0], row={s.dst.buffer.name}, writes={s.dst.buffer.name})
            self.start_reads(acc, s.dst)
            acc.reads |= {n.buffer.name for n in walk(s.value) if isinstance(n, Load)}
            return acc
        if isinstance(s, For):
            return self.classify_map(s)
        return None

    def classify_copy(self, s, copy_in):
        src, dst = s.src, s.dst
        ds, dd = _first(src.extent), _first(dst.extent)
        if ds is None or dd is None or src.extent[ds] != dst.extent[dd]:
            return None
        if [x for x in src.extent if x != 1] != [x for x in dst.extent if x != 1]:
            return None
        acc = _Acc(src.extent[ds])
        self.start_reads(acc, src, dst)
        ks, kd = self.kind(src.buffer), self.kind(dst.buffer)
        if ks is None or kd is None or (ks == "gm" and not copy_in):
            return None
        if ks != "gm" and self.row_region(src, acc.rows):
            acc.row.add(src.buffer.name)
        else:
            acc.reads.add(src.buffer.name)
        if kd == "gm":
            acc.gm_writes.add(dst.buffer.name)
        elif self.row_region(dst, acc.rows):
            acc.row.add(dst.buffer.name)
            acc.writes.add(dst.buffer.name)
        else:
            return None
        return acc

    def classify_map(self, s):
        if (s.kind != "parallel" or not s.vars or len(s.vars) != len(s.extents)
                or self.row in s.vars or not isinstance(s.extents[0], Const)
                or type(s.extents[0].value) is not int or not s.body):
            return None
        i, rows = s.vars[0], s.extents[0].value
        if _uses(s.extents, set(s.vars)):
            return None
        acc = _Acc(rows)

        def row_access(node) -> bool:
            shape = node.buffer.shape
            return (self.kind(node.buffer) == "vec" and len(shape) >= 1 and shape[0] == rows
                    and len(node.indices) == len(shape) and isinstance(node.indices[0], Var)
                    and node.indices[0].name == i and not _uses(node.indices[1:], {i}))

        for st in s.body:
            if not isinstance(st, Store) or not row_access(st):
                return None
            acc.row.add(st.buffer.name)
            acc.writes.add(st.buffer.name)
            for n in walk(st):
                if isinstance(n, Load):
                    if self.kind(n.buffer) is None:
                        return None
                    (acc.row if row_access(n) else acc.reads).add(n.buffer.name)
        return acc

    @staticmethod
    def valid(accs) -> bool:
        rows = accs[0].rows
        if rows < 2 or any(a.rows != rows for a in accs):
            return False
        writes = set().union(*(a.writes for a in accs))
        reads = set().union(*(a.reads for a in accs))
        if writes & reads:
            return False
        gm: set = set()
        for a in accs:
            if a.gm_writes & gm:
                return False
            gm |= a.gm_writes
        return not gm & (reads | set().union(*(a.row for a in accs)))

    def copy_ins(self, stmts) -> dict:
        """{id(copy): map} for GM -> tile copies immediately followed (sync aside) by a map
        fused with its reduction that reads the tile at its own elements only."""
        out = {}
        for k, cp in enumerate(stmts):
            if (not isinstance(cp, Copy) or cp.atomic or cp.transpose or not cp.dst.is_full
                    or self.kind(cp.dst.buffer) != "vec"
                    or self.kind(cp.src.buffer) != "gm" or len(cp.dst.buffer.shape) != 2
                    or cp.dst.buffer.shape[0] < 2):
                continue
            j = k + 1
            while j < len(stmts) and isinstance(stmts[j], SYNC_OPS):
                j += 1
            m = stmts[j] if j < len(stmts) else None
            st = _map_store_of(m)
            if st is None or id(m) not in self.fused or len(m.vars) != 2:
                continue
            x, shape = cp.dst.buffer.name, cp.dst.buffer.shape
            dims = [d for d, n in enumerate(cp.src.extent) if n != 1]
            if (st.buffer.name != x and st.buffer.shape == shape and own_loads(st, x)
                    and [cp.src.extent[d] for d in dims] == list(shape)
                    and dims[-1] == len(cp.src.extent) - 1):
                out[id(cp)] = m
        return out

    # -- the rewrite
    def body(self, stmts, in_v: bool) -> list:
        out = []
        for s in stmts:
            if isinstance(s, Scope):
                s = replace(s, body=tuple(self.body(s.body, s.core == "V")))
            elif isinstance(s, For) and s.kind == "parallel":
                pass
            elif body_fields(s):
                s = replace(s, **{f: tuple(self.body(getattr(s, f), in_v))
                                  for f in body_fields(s)})
            out.append(s)
        return self.runs(out) if in_v else out

    def runs(self, stmts) -> list:
        ins = self.copy_ins(stmts)
        out: list = []
        cur: list = []
        accs: list = []

        def flush():
            run = list(cur)
            # a map whose reduction is outside the run runs as usual, and so does a copy-in
            # whose map is not the next statement of the run
            for k, s in enumerate(run):
                red = self.fused.get(id(s))
                if id(s) in ins:
                    ok = k + 1 < len(run) and run[k + 1] is ins[id(s)]
                else:
                    ok = red is None or any(t is red for t in run[k + 1:])
                if not ok:
                    out.extend(self.loop(run[:k], accs))
                    out.extend(run[k:])
                    return
            out.extend(self.loop(run, accs))

        syncs: list = []  # met inside the current run: they follow it, in their order
        for s in stmts:
            if isinstance(s, SYNC_OPS):
                if cur and isinstance(s, WaitCrossFlag):
                    if not any(isinstance(t, SetCrossFlag) for t in syncs):
                        out.append(s)  # waits earlier, before the run: nothing it waits for
                        continue       # can need the run (no set of this core in between)
                    flush()            # a set then a wait of this core: the run ends here
                    out.extend(syncs)
                    syncs, cur, accs = [], [], []
                    out.append(s)
                    continue
                (syncs if cur else out).append(s)
                continue
            acc = self.classify(s, id(s) in ins)
            if acc is not None and self.valid(accs + [acc]):
                cur.append(s)
                accs.append(acc)
                continue
            flush()
            out.extend(syncs)
            syncs = []
            cur, accs = ([s], [acc]) if acc is not None else ([], [])
            if acc is None:
                out.append(s)
        flush()
        return out + syncs

    def loop(self, run, accs) -> list:
        """[for row in serial(R): the run restricted to row] when two or more statements do
        work (a reduction fused with its map does none of its own), else the run."""
        fused_away = {id(r) for r in self.fused.values()}
        if len([s for s in run if id(s) not in fused_away]) < 2:
            return run
        body = []
        for s in run:
            body.extend(self.restrict(s))
        return [For((self.row,), (Const(accs[0].rows),), "serial", tuple(body), loc=run[0].loc)]

    def restrict(self, s) -> list:
        row = Var(self.row)
        if isinstance(s, Copy):
            return [Copy(_restrict(s.src, _first(s.src.extent), row),
                         _restrict(s.dst, _first(s.dst.extent), row), s.loc)]
        if isinstance(s, Reduce):
            return [replace(s, src=_restrict(s.src, 0, row), dst=_restrict(s.dst, 0, row))]
        if isinstance(s, Fill):
            return [replace(s, dst=_restrict(s.dst, 0, row))]
        body = tuple(substitute(st, {s.vars[0]: row}) for st in s.body)
        if len(s.vars) == 1:
            return list(body)
        return [replace(s, vars=s.vars[1:], extents=s.extents[1:], body=body)]


def own_loads(st: Store, name: str) -> bool:
    """The store's value loads buffer `name`, and only at the element the store writes."""
    loads = [n for n in walk(st.value) if isinstance(n, Load) and n.buffer.name == name]
    return bool(loads) and all(n.indices == st.indices for n in loads)


def _restrict(r: Region, d: int, row: Var) -> Region:
    """Row `row` of region `r` along its dimension d."""
    start = list(r.start)
    start[d] = row if _zero(start[d]) else BinOp("+", start[d], row)
    ext = list(r.extent)
    ext[d] = 1
    return Region(r.buffer, tuple(start), tuple(ext))


def fuse_rows(kernel: Kernel) -> Kernel:
    """Runs of row-local vector statements -> one serial loop over their rows (module
    docstring)."""
    rows = _Rows(kernel)
    return replace(kernel, body=tuple(rows.body(kernel.body, False)))
