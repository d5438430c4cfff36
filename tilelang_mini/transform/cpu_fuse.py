"""fuse_map_reduce, fuse_row_copies (llvm target): statements a CPU runs as one pass over their
elements become a `with fused(kind):` block (ir/nodes.py `Fused`; the code generator emits one
loop for each block).

fuse_map_reduce: a Parallel map whose one store fills (a region of) a tile X that the next
statement (sync instructions aside) reduces along its last dimension, X used nowhere else: the
reduction consumes the map's values as they are computed and X is never written.

    for j in Parallel(64):                            with fused("map_reduce"):
        e[row, j] = exp(x[row, j] - m[row])     ->        for j in Parallel(64):
    pipe_barrier(V)                                           e[row, j] = exp(x[row, j] - m[row])
    reduce_sum(e[row +: 1, 0 +: 64], s[row +: 1], dim=1)      pipe_barrier(V)
                                                          reduce_sum(e[row +: 1, 0 +: 64], s[row +: 1], dim=1)

fuse_row_copies, in the vector cores' programs (after fuse_rows has made loops over rows), one
pass over a row for
* copy_map_reduce: `copy(GM row, X[r +: 1, 0 +: N])` followed (sync aside) by a fused map +
  reduce whose map reads X only at its own element X[r, j]: per vector of the row, load GM,
  store it into X, evaluate the map into the reduction. GM is read once; X holds what the copy
  writes. A copy of that row of X on to a row of GM (a tensor or the block's workspace) right
  after joins: its values are stored as they pass. When X is referenced nowhere but in such
  row passes and has the dtype of that row, X is only a staging tile: the copy-in writes the GM
  row itself and the map reads it there (X is never written).
* map_copy: a row map writing row r of X (reading X at most at the element it writes)
  immediately followed by the copy of that row into a GM tensor the map does not read, X dead
  after the copy: per vector of the row, evaluate and store to GM; X is not written.

    copy(X[cid * 8 + row +: 1, 0 +: 64], x[row +: 1, 0 +: 64])      with fused("copy_map_reduce"):
    with fused("map_reduce"):                                  ->       copy(X[cid * 8 + row +: 1, 0 +: 64], x[row +: 1, 0 +: 64])
        for j in Parallel(64):                                          for j in Parallel(64):
            sq[row, j] = x[row, j] * x[row, j]                              sq[row, j] = x[row, j] * x[row, j]
        reduce_sum(sq[row +: 1, 0 +: 64], s[row +: 1], dim=1)           reduce_sum(sq[row +: 1, 0 +: 64], s[row +: 1], dim=1)

Within a row both orders give the same values: each vector of the second statement reads only
the elements of the row the first has produced for that same vector. map_copy does not store
X as well (that would write the row twice, to X and to GM), so it needs X dead after the copy.
"""
from __future__ import annotations

from dataclasses import replace

from ..ir.analysis import BLOCK_SCOPES, GM_SCOPES, buffer_refs, interval
from ..ir.nodes import (
    Alloc, BinOp, Const, Copy, For, Fused, Kernel, Load, PipeBarrier, Region, Scope, SetFlag, Store,
    Var, WaitFlag, body_fields, transform, walk, walk_statements,
)
from .cpu_rows import map_reduce_pairs

_PER_BLOCK = tuple(s for s in BLOCK_SCOPES if s != "global")
# What a fused block may hold besides its statements: the flags within one core (a CPU runs a
# core's program in order). A cross-core flag between two statements keeps them apart: the llvm
# target may run the cores as coroutines switching at those flags.
CORE_SYNC = (SetFlag, WaitFlag, PipeBarrier)


def _next(stmts, k) -> int:
    """The index of the first statement after k that is not a flag within the core."""
    j = k + 1
    while j < len(stmts) and isinstance(stmts[j], CORE_SYNC):
        j += 1
    return j


def _rewrite(stmts, at, in_v: bool):
    """Statement list `stmts` with `at(stmts, k, in_v)` -> (Fused, end) or None applied from
    left to right; nested bodies first (Parallel maps are left alone)."""
    out, k = [], 0
    while k < len(stmts):
        s = stmts[k]
        if body_fields(s) and not (isinstance(s, For) and s.kind == "parallel"):
            inner = s.core == "V" if isinstance(s, Scope) else in_v
            s = replace(s, **{f: _rewrite(getattr(s, f), at, inner) for f in body_fields(s)})
        hit = at(stmts, k, in_v)
        if hit is None:
            out.append(s)
            k += 1
        else:
            out.append(hit[0])
            k = hit[1]
    return tuple(out)


# -------------------------------------------------------------------------- map + reduce


def fuse_map_reduce(kernel: Kernel) -> Kernel:
    """A map filling a tile and the reduction of that tile right after it -> fused("map_reduce")
    (module docstring)."""
    pairs = map_reduce_pairs(kernel)

    def at(stmts, k, in_v):
        red = pairs.get(id(stmts[k]))
        end = _next(stmts, k)
        if red is None or end == len(stmts) or stmts[end] is not red:
            return None
        end += 1
        return Fused("map_reduce", tuple(stmts[k:end]), stmts[k].loc), end

    return replace(kernel, body=_rewrite(kernel.body, at, False))


# --------------------------------------------------------------------------- row copies


class _RowCopies:
    def __init__(self, kernel: Kernel):
        self.kernel = kernel
        self.params = {p.name for p in kernel.params}
        self.allocs = {s.buffer.name: s for s in walk_statements(kernel.body) if isinstance(s, Alloc)}
        self.refs = buffer_refs(kernel.body)
        self.ranges = _var_ranges(kernel)
        self.covered: dict = {}   # staging tile -> its references inside copy-on row passes
        self.final = False

    def gm_row(self, r: Region, cols: int) -> bool:
        """Region r of a kernel parameter: one row of `cols` elements along its last
        (contiguous) dimension."""
        d = [q for q, x in enumerate(r.extent) if x != 1]
        return (r.buffer.name in self.params and [r.extent[q] for q in d] == [cols]
                and d[-1] == len(r.extent) - 1)

    def tile_row(self, r: Region):
        """The row index expression when r is one whole row of a 2-d per-core on-chip tile of
        two or more rows, else None."""
        shape = r.buffer.shape
        if (r.buffer.name not in self.allocs or r.buffer.scope in _PER_BLOCK
                or len(shape) != 2 or shape[0] < 2 or tuple(r.extent) != (1, shape[1])
                or r.start[1] != Const(0)):
            return None
        return r.start[0]

    def copy_in(self, cp, fused) -> bool:
        """GM -> X row copy followed by a fused map + reduce that reads X at its own elements."""
        if not (isinstance(cp, Copy) and not (cp.atomic or cp.transpose)
                and isinstance(fused, Fused) and fused.kind == "map_reduce"):
            return False
        st = _row_map_store(fused.body[0])
        x = cp.dst.buffer
        row = self.tile_row(cp.dst)
        return (st is not None and row is not None and row == st.indices[0]
                and st.buffer.name != x.name and st.buffer.shape == x.shape
                and self.gm_row(cp.src, x.shape[1])
                and any(isinstance(n, Load) and n.buffer.name == x.name for n in walk(st.value))
                and _reads_only_own(st, x.name))

    def copy_out(self, m, cp) -> bool:
        """Row map m of X followed by the copy of that row to GM, X dead after the copy."""
        st = _row_map_store(m)
        if st is None or not isinstance(cp, Copy) or cp.atomic or cp.transpose:
            return False
        x = st.buffer
        row = self.tile_row(cp.src)
        return (row is not None and cp.src.buffer == x and row == st.indices[0]
                and self.gm_row(cp.dst, x.shape[1]) and _reads_only_own(st, x.name)
                and not any(isinstance(n, Load) and n.buffer.name == cp.dst.buffer.name
                            for n in walk(st))
                and self.dead_after(cp, x.name))

    def dead_after(self, cp, name) -> bool:
        """Nothing can read tile `name` after statement `cp`: no later statement in program
        order references it, the only loop around `cp` is a loop over its rows whose body
        references it at the loop's row only, and every block writes the tile completely before
        reading it (its allocation is `uninit`)."""
        if not self.allocs[name].uninit:
            return False

        def refs(s):
            return any(isinstance(n, (Region, Load, Store)) and n.buffer.name == name
                       for n in walk(s))

        def at_row(n, row) -> bool:
            if isinstance(n, Region):
                return n.start[0] == row and n.extent[0] == 1
            return n.indices[0] == row

        def row_loop(s) -> bool:
            if not (isinstance(s, For) and s.kind == "serial" and len(s.vars) == 1
                    and cp.src.start[0] == Var(s.vars[0])):
                return False
            row = Var(s.vars[0])
            return all(at_row(n, row) for t in s.body for n in walk(t)
                       if isinstance(n, (Region, Load, Store)) and n.buffer.name == name)

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

        return bool(find(self.kernel.body))

    def copy_on(self, cp, out) -> bool:
        """`out` copies the row `cp` copied in (tile row X[r]) on to a row of a GM tensor or
        of the block's workspace, X unchanged in between (only the fused map reads it)."""
        if not isinstance(out, Copy) or out.atomic or out.transpose:
            return False
        x = cp.dst.buffer
        row = self.tile_row(out.src)
        d = [q for q, n in enumerate(out.dst.extent) if n != 1]
        return (out.src.buffer == x and row is not None and row == cp.dst.start[0]
                and out.dst.buffer.scope in GM_SCOPES
                and [out.dst.extent[q] for q in d] == [x.shape[1]]
                and d[-1] == len(out.dst.extent) - 1)

    def inside(self, r: Region) -> bool:
        """Region r lies inside its buffer for every value of the variables (their ranges):
        loads of it need no clipping."""
        for x, n, size in zip(r.start, r.extent, r.buffer.shape):
            rng = interval(self.ranges, x)
            if rng is None or rng[0] < 0 or rng[1] + n > size:
                return False
        return True

    def at(self, stmts, k, in_v):
        if not in_v:
            return None
        s, j = stmts[k], _next(stmts, k)
        t = stmts[j] if j < len(stmts) else None
        if self.copy_in(s, t):
            q = _next(stmts, j)
            if q < len(stmts) and self.copy_on(s, stmts[q]):  # the row also copied on
                body = tuple(stmts[k:j]) + t.body + tuple(stmts[j + 1:q + 1])
                x, on = s.dst.buffer, stmts[q]
                if not self.final:
                    self.covered[x.name] = self.covered.get(x.name, 0) + \
                        buffer_refs(body).get(x.name, 0)
                elif (self.covered.get(x.name) == self.refs.get(x.name)
                      and on.dst.buffer.dtype == x.dtype and self.inside(on.dst)):
                    body = _skip_staging(body, s, on)
                return Fused("copy_map_reduce", body, s.loc), q + 1
            return Fused("copy_map_reduce", tuple(stmts[k:j]) + t.body, s.loc), j + 1
        if k + 1 < len(stmts) and self.copy_out(s, stmts[k + 1]):
            return Fused("map_copy", (s, stmts[k + 1]), s.loc), k + 2
        return None


def fuse_row_copies(kernel: Kernel) -> Kernel:
    """A row's copy-in and the fused map + reduce reading it, or a row map and its copy-out ->
    fused("copy_map_reduce") / fused("map_copy") (module docstring)."""
    rows = _RowCopies(kernel)
    _rewrite(kernel.body, rows.at, False)  # first: which staging tiles only such rows use
    rows.final = True
    return replace(kernel, body=_rewrite(kernel.body, rows.at, False))


def _var_ranges(kernel: Kernel) -> dict:
    """{variable: (lo, hi)} of the grid (or core) variables and of every serial loop with a
    constant extent (a name bound by several loops: the widest range)."""
    out = dict(zip(kernel.grid_vars, ((0, n - 1) for n in kernel.grid)))
    if kernel.is_npu:
        out[kernel.grid_vars[1]] = (0, 1)
    for s in walk_statements(kernel.body):
        if isinstance(s, For) and s.kind != "parallel":
            for name, x in zip(s.vars, s.extents):
                if not (isinstance(x, Const) and type(x.value) is int and x.value > 0):
                    out[name] = None
                elif name not in out or out[name] is not None:
                    out[name] = (0, max(x.value - 1, (out.get(name) or (0, 0))[1]))
    return {k: v for k, v in out.items() if v is not None}


def _skip_staging(body, cp, on):
    """A copy-in to tile row X[r] that is copied on to row W[...] (same dtype), X referenced
    nowhere else: the copy-in writes W's row and the map reads W where it read X."""
    x, w = cp.dst.buffer, on.dst.buffer
    last = len(w.shape) - 1

    def at(idx):
        col = idx[-1]
        start = on.dst.start[last]
        ix = col if start == Const(0) else BinOp("+", start, col)
        return tuple(on.dst.start[:last]) + (ix,)

    def swap(n):
        if isinstance(n, Load) and n.buffer.name == x.name:
            return Load(w, at(n.indices))
        return n

    out = []
    for t in body:
        if t is on:
            continue
        if t is cp:
            t = replace(cp, dst=on.dst)
        elif isinstance(t, For):
            t = transform(t, swap)
        out.append(t)
    return tuple(out)


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
