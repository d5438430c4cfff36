"""Row interleaving of row-local vector-core tile ops (called by codegen.py `body`).

A maximal run of consecutive statements of a Scope("V") body (sync instructions aside) that
are all row-local over the same R rows is emitted as ONE loop over the rows r, every statement
restricted to row r inside it: copy row r in, reduce it, map it, stream it out, with a working
set of one row instead of a whole tile (which fills L1 and costs an extra pass per tile op).

Row-local statements (R >= 2):
* Copy from an on-chip tile: its first non-unit source and destination dims (which correspond:
  shapes are equal after dropping extent-1 dims) have extent R; restricted to row r, both
  regions start r further there with extent 1 (clipping and zero padding are elementwise, so
  row by row). Copies from GM stay whole-tile copies before the run: one long contiguous read
  keeps the memory busier than a row at a time between computations (measured: copying rmsnorm's
  8 KB rows in inside the run made it ~0.9 ms slower, keeping the tile copy ~0.8 ms faster).
  Except a copy from GM whose tile the next statement, a map fused with its reduction, reads:
  it joins the run and is read in the map's pass over the row (rowpass.py), as a copy-out is
  written in the pass of the map producing its tile when nothing reads the tile afterwards.
* Reduce along the last dim of a 2-d tile rows [0, R) into per-row values (dst rows [0, R)).
* Fill of rows [0, R) of a tile.
* Parallel map `for i, ... in T.Parallel(R, ...)` of Stores only: restricted to row r, i is
  bound to r and the map runs over the other variables (a one-variable map is scalar stores).
A "row access" touches row r (dim 0) of a per-core on-chip buffer of R rows only: a region
rows [0, R), a Load/Store whose first index is the map's first variable (no other index uses
it). Every other access is "any" (restricted to row r, it may touch any element).

The run is valid when every buffer it writes on chip is accessed by row accesses only, and
every GM tensor it writes is written by one statement and not read by the run: then statement
k at row r reads exactly what it reads in program order (rows r' != r of the written buffers
are neither read nor written in iteration r), so results are bit-identical.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from tilelang_mini.ir.analysis import SYNC_OPS
from tilelang_mini.ir.nodes import (
    BinOp, Const, Copy, Fill, For, Load, Reduce, Region, Store, Var, walk,
)

from .layout import PER_BLOCK

ROW = "__row"   # the row loop variable (a name no kernel uses)


@dataclass
class _Acc:
    rows: int
    row: set = field(default_factory=set)       # buffers accessed at row r only
    writes: set = field(default_factory=set)    # on-chip buffers written (row accesses)
    gm_writes: set = field(default_factory=set)
    reads: set = field(default_factory=set)     # buffers read anywhere ("any" accesses)


class RowRun:
    """Statements emitted row by row in one loop over `rows` rows."""

    def __init__(self, rows: int, stmts: list, g=None):
        self.rows, self.stmts = rows, stmts
        # {id(map): copy} of the pairs emitted as one pass over a row (rowpass.py)
        self.copy_in, self.copy_out = {}, {}
        if g is not None:
            from .rowpass import copy_in_pairs, copy_out_of
            for k, s in enumerate(stmts[:-1]):
                t = stmts[k + 1]
                if isinstance(s, Copy) and copy_in_pairs(g, [s, t]):
                    self.copy_in[id(t)] = s
                elif copy_out_of(g, s, t):
                    self.copy_out[id(s)] = t
        self.paired = {id(c) for c in (*self.copy_in.values(), *self.copy_out.values())}

    def emit(self, g):
        from . import codegen_ops
        saved = (g.vars.get(ROW), g.ranges.get(ROW))
        prev = g.stmt
        try:
            with g.e.loop(0, self.rows, name="row") as r:
                g.bind(ROW, r, (0, self.rows - 1))
                for s in self.stmts:
                    if id(s) in g.fused_away or id(s) in g.plan.skip or id(s) in self.paired:
                        continue
                    g.stmt = s
                    if isinstance(s, For):
                        self._map(g, s, r)
                    elif isinstance(s, Copy):
                        codegen_ops.copy(g, _restrict_copy(s))
                    elif isinstance(s, Reduce):
                        codegen_ops.reduce(g, _restrict_reduce(s))
                    else:
                        codegen_ops.fill(g, Fill(_restrict(s.dst, 0), s.value, s.loc))
        finally:
            g.stmt = prev
            g._restore({ROW: saved})

    def _map(self, g, s, r):
        i = s.vars[0]
        saved = {i: (g.vars.get(i), g.ranges.get(i))}
        g.bind(i, r, (0, self.rows - 1))
        try:
            from . import rowpass
            if id(s) in self.copy_in:
                cp = self.copy_in[id(s)]
                rowpass.copy_in_map_reduce(g, _restrict_copy(cp), _restrict_map(s),
                                           _restrict_reduce(g.fused[id(s)]))
            elif id(s) in self.copy_out:
                rowpass.map_copy_out(g, _restrict_map(s), _restrict_copy(self.copy_out[id(s)]))
            elif id(s) in g.fused:
                g.map_reduce(_restrict_map(s), _restrict_reduce(g.fused[id(s)]))
            elif len(s.vars) > 1:
                g.statement(_restrict_map(s))
            else:
                for st in s.body:
                    g.statement(st)
        finally:
            g._restore(saved)


def row_runs(g, stmts):
    """`stmts` with the valid runs of two or more row-local statements replaced by RowRuns
    (Scope("V") bodies only)."""
    if g.ctx != "V" or g.par is not None:
        return stmts
    from .rowpass import copy_in_pairs
    ins = copy_in_pairs(g, stmts)   # GM -> tile copies read in one pass with their map
    out: list = []
    cur: list = []
    accs: list = []

    def flush():
        run = list(cur)
        # a map whose reduction (the next statement) is outside the run runs as usual, and
        # so does a copy-in whose map is not the next statement of the run
        for k, s in enumerate(run):
            red = g.fused.get(id(s))
            if id(s) in ins:
                ok = k + 1 < len(run) and run[k + 1] is ins[id(s)]
            else:
                ok = red is None or any(t is red for t in run[k + 1:])
            if not ok:
                out.extend(_plain(g, run[:k], accs))
                out.extend(run[k:])
                return
        out.extend(_plain(g, run, accs))

    for s in stmts:
        if isinstance(s, SYNC_OPS):
            if not cur:
                out.append(s)
            continue        # no-ops: dropped inside a run
        acc = _classify(g, s, id(s) in ins)
        if acc is not None and _valid(accs + [acc]):
            cur.append(s)
            accs.append(acc)
            continue
        flush()
        cur, accs = ([s], [acc]) if acc is not None else ([], [])
        if acc is None:
            out.append(s)
    flush()
    return out


def _plain(g, run, accs):
    """[RowRun(run)] when it does some work in two or more statements, else run."""
    work = [s for s in run if id(s) not in g.fused_away and id(s) not in g.plan.skip]
    if len(work) < 2:
        return run
    return [RowRun(accs[0].rows, run, g)]


def _valid(accs) -> bool:
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
    touched = reads | set().union(*(a.row for a in accs))
    return not gm & touched


# ---------------------------------------------------------------------------- classification


def _first(ext):
    return next((d for d, x in enumerate(ext) if x != 1), None)


def _zero(x) -> bool:
    return isinstance(x, Const) and not isinstance(x.value, bool) and x.value == 0


def _kind(g, buf):
    """"gm" (a kernel parameter), "vec" (a per-core on-chip buffer) or None (anything else)."""
    info = g.plan.infos.get(buf.name)
    if info is None:
        return None
    if info.param is not None:
        return "gm"
    if buf.scope in PER_BLOCK or info.layout != "row":
        return None
    return "vec"


def _row_region(g, r, rows) -> bool:
    shape = r.buffer.shape
    return (_kind(g, r.buffer) == "vec" and len(shape) >= 1 and shape[0] == rows
            and r.extent[0] == rows and _zero(r.start[0]) and _first(r.extent) == 0)


def _start_reads(acc, *regions):
    for r in regions:
        for x in r.start:
            acc.reads |= {n.buffer.name for n in walk(x) if isinstance(n, Load)}


def _classify(g, s, copy_in=False):
    """_Acc of a row-local statement, or None; copy_in: a copy from GM read in one pass with
    the map after it (rowpass.py)."""
    if isinstance(s, Copy) and (s.atomic or s.transpose):  # emitted on their own
        return None
    if isinstance(s, Copy):
        src, dst = s.src, s.dst
        ds, dd = _first(src.extent), _first(dst.extent)
        if ds is None or dd is None or src.extent[ds] != dst.extent[dd]:
            return None
        if [x for x in src.extent if x != 1] != [x for x in dst.extent if x != 1]:
            return None
        acc = _Acc(src.extent[ds])
        _start_reads(acc, src, dst)
        ks, kd = _kind(g, src.buffer), _kind(g, dst.buffer)
        if ks is None or kd is None or (ks == "gm" and not copy_in):
            return None
        if ks != "gm" and _row_region(g, src, acc.rows):
            acc.row.add(src.buffer.name)
        else:
            acc.reads.add(src.buffer.name)
        if kd == "gm":
            acc.gm_writes.add(dst.buffer.name)
        elif _row_region(g, dst, acc.rows):
            acc.row.add(dst.buffer.name)
            acc.writes.add(dst.buffer.name)
        else:
            return None
        return acc
    if isinstance(s, Reduce):
        src, dst = s.src, s.dst
        if (len(src.extent) != 2 or s.dim not in (1, -1) or not _row_region(g, src, src.extent[0])
                or not _row_region(g, dst, src.extent[0])
                or [x for x in dst.extent if x != 1] != [src.extent[0]]):
            return None
        acc = _Acc(src.extent[0], row={src.buffer.name, dst.buffer.name},
                   writes={dst.buffer.name})
        _start_reads(acc, src, dst)
        return acc
    if isinstance(s, Fill):
        if not s.dst.extent or not _row_region(g, s.dst, s.dst.extent[0]):
            return None
        acc = _Acc(s.dst.extent[0], row={s.dst.buffer.name}, writes={s.dst.buffer.name})
        _start_reads(acc, s.dst)
        acc.reads |= {n.buffer.name for n in walk(s.value) if isinstance(n, Load)}
        return acc
    if isinstance(s, For):
        return _classify_map(g, s)
    return None


def _uses(exprs, name) -> bool:
    return any(isinstance(n, Var) and n.name == name for x in exprs for n in walk(x))


def _classify_map(g, s):
    if (s.kind != "parallel" or not s.vars or len(s.vars) != len(s.extents) or ROW in s.vars
            or not isinstance(s.extents[0], Const) or isinstance(s.extents[0].value, bool)
            or not isinstance(s.extents[0].value, int) or not s.body):
        return None
    i, rows = s.vars[0], s.extents[0].value
    if any(_uses((x,), v) for x in s.extents for v in s.vars):
        return None
    acc = _Acc(rows)

    def row_access(node) -> bool:
        shape = node.buffer.shape
        return (_kind(g, node.buffer) == "vec" and len(shape) >= 1 and shape[0] == rows
                and len(node.indices) == len(shape) and isinstance(node.indices[0], Var)
                and node.indices[0].name == i and not _uses(node.indices[1:], i))

    for st in s.body:
        if not isinstance(st, Store) or not row_access(st):
            return None
        acc.row.add(st.buffer.name)
        acc.writes.add(st.buffer.name)
        for n in walk(st):
            if isinstance(n, Load):
                if _kind(g, n.buffer) is None:
                    return None
                (acc.row if row_access(n) else acc.reads).add(n.buffer.name)
    return acc


# ------------------------------------------------------------------------------ restriction


def _restrict(r: Region, d: int) -> Region:
    """Row ROW of region `r` along its dimension d."""
    start = list(r.start)
    start[d] = Var(ROW) if _zero(start[d]) else BinOp("+", start[d], Var(ROW))
    ext = list(r.extent)
    ext[d] = 1
    return Region(r.buffer, tuple(start), tuple(ext))


def _restrict_copy(s: Copy) -> Copy:
    return Copy(_restrict(s.src, _first(s.src.extent)), _restrict(s.dst, _first(s.dst.extent)),
                s.loc)


def _restrict_reduce(s: Reduce) -> Reduce:
    return replace(s, src=_restrict(s.src, 0), dst=_restrict(s.dst, 0))


def _restrict_map(s: For) -> For:
    return replace(s, vars=s.vars[1:], extents=s.extents[1:])
