"""Program-order analyses of a kernel body for the buffer plan (layout.py).

`zeroed_buffers`: the on-chip buffers a block may read before it has written them completely.
Only those need the zeroing every grid block starts with (the NumPy interpreter allocates them
zeroed); a buffer whose first use is a whole-buffer write (a copy, fill, clearing reduce or
gemm, or a Parallel map storing every element) is left as it is.
"""
from __future__ import annotations

from tilelang_mini.ir.analysis import SYNC_OPS, written_names
from tilelang_mini.ir.nodes import (
    Alloc, BinOp, Call, Const, Copy, Fill, For, Gemm, If, Load, Reduce, Region, Scope, Store, Var,
    body_fields, walk, walk_own, walk_statements,
)



def buffer_refs(kernel) -> dict:
    """{buffer name: how many regions, loads and stores in `kernel` name it}."""
    refs: dict = {}
    for s in kernel.body:
        for n in walk(s):
            if isinstance(n, (Region, Load, Store)):
                refs[n.buffer.name] = refs.get(n.buffer.name, 0) + 1
    return refs


def _const_positive(x) -> bool:
    return type(x).__name__ == "Const" and isinstance(x.value, int) and x.value > 0


def zeroed_buffers(kernel, alias: dict, skip, per_block) -> set:
    """Names (after forwarding `alias`) of the allocated buffers that must start zeroed."""
    params = {p.name for p in kernel.params}
    need: set = set()

    def key(buf, ctx):
        name = alias.get(buf.name, buf.name)
        return name, ("block" if buf.scope in per_block else ctx)

    def read(buf, ctx, defined):
        if buf.name in params:
            return
        k = key(buf, ctx)
        if k not in defined:
            need.add(k[0])

    def loads(node, ctx, defined):
        for n in walk_own(node) if isinstance(node, Fill) else walk(node):
            if isinstance(n, Load):
                read(n.buffer, ctx, defined)

    def region_reads(r: Region, ctx, defined):
        for x in r.start:
            loads(x, ctx, defined)
        read(r.buffer, ctx, defined)

    def starts(r: Region, ctx, defined):
        for x in r.start:
            loads(x, ctx, defined)

    def visit(stmts, ctx, defined: set) -> set:
        for s in stmts:
            if isinstance(s, (*SYNC_OPS, Alloc)):
                continue
            if isinstance(s, Scope):
                defined = visit(s.body, s.core, defined)
            elif isinstance(s, For):
                for x in s.extents:
                    loads(x, ctx, defined)
                if s.kind == "parallel":
                    for t in s.body:
                        for n in walk(t):
                            if isinstance(n, Load):
                                read(n.buffer, ctx, defined)
                        if isinstance(t, Store) and full_map_store(t, s):
                            defined = defined | {key(t.buffer, ctx)}
                    continue
                inner = visit(s.body, ctx, set(defined))
                if all(_const_positive(x) for x in s.extents):
                    defined = inner
            elif isinstance(s, If):
                loads(s.cond, ctx, defined)
                d1 = visit(s.then_body, ctx, set(defined))
                d2 = visit(s.else_body, ctx, set(defined))
                defined = d1 & d2
            elif isinstance(s, Copy):
                if id(s) in skip:
                    continue
                region_reads(s.src, ctx, defined)
                starts(s.dst, ctx, defined)
                dual = ctx == "C" and s.src.buffer.scope == "L0C" and s.dst.buffer.scope == "UB"
                if s.dst.is_full:
                    defined = defined | {key(s.dst.buffer, "V" if dual else ctx)}
            elif isinstance(s, Fill):
                loads(s, ctx, defined)
                if s.dst.is_full:
                    defined = defined | {key(s.dst.buffer, ctx)}
            elif isinstance(s, (Reduce, Gemm)):  # reads its sources, accumulates into dst
                srcs, dst, clear = (((s.src,), s.dst, s.clear) if isinstance(s, Reduce) else
                                    ((s.a, s.b), s.c, s.clear_accum))
                for r in srcs:
                    region_reads(r, ctx, defined)
                if clear:
                    starts(dst, ctx, defined)
                else:
                    region_reads(dst, ctx, defined)
                if clear and dst.is_full:
                    defined = defined | {key(dst.buffer, ctx)}
            else:  # Store and anything else: reads only
                for n in walk(s):
                    if isinstance(n, Load):
                        read(n.buffer, ctx, defined)
        return defined

    visit(kernel.body, "top", set())
    return need


# ------------------------------------------------------------------------- copy chains


def _composes(s_dtype: str, x_dtype: str, y_dtype: str) -> bool:
    """copy S -> X -> Y gives what copy S -> Y gives: the first conversion is exact, or the
    second is the identity."""
    from .vecmath import FLOATS, exact_in
    if s_dtype == x_dtype or x_dtype == y_dtype:
        return True
    return s_dtype in FLOATS and x_dtype in FLOATS and exact_in(s_dtype, x_dtype)


def fuse_copy_chains(kernel):
    """Rewrite `copy(S, X); copy(X, Y)` (only sync instructions between them, X a whole
    on-chip staging buffer used nowhere else) into `copy(S, Y)`: the lowered GM -> UB -> UB
    staging of a casting copy moves the data once instead of twice."""
    from dataclasses import replace
    refs = buffer_refs(kernel)
    params = {p.name for p in kernel.params}

    def pairs(stmts):
        out = []
        for i, s in enumerate(stmts):
            if not isinstance(s, Copy) or not s.dst.is_full or s.atomic or s.transpose:
                continue
            x = s.dst.buffer
            if x.name in params or "L0C" in (x.scope, s.src.buffer.scope):
                continue
            j = i + 1
            while j < len(stmts) and isinstance(stmts[j], SYNC_OPS):
                j += 1
            if j == len(stmts):
                continue
            t = stmts[j]
            if (isinstance(t, Copy) and t.src.is_full and t.src.buffer == x and not t.transpose
                    and t.dst.buffer.name != x.name and t.src.buffer.name != s.src.buffer.name
                    and _composes(s.src.buffer.dtype, x.dtype, t.dst.buffer.dtype)):
                out.append((i, j, x.name))
        return out

    found: dict = {}

    def scan(stmts):
        for i, j, name in pairs(stmts):
            found[name] = found.get(name, 0) + 1
        for s in stmts:
            for f in body_fields(s):
                scan(getattr(s, f))

    scan(kernel.body)
    ok = {n for n, c in found.items() if refs.get(n) == 2 * c}
    if not ok:
        return kernel

    def rewrite(stmts):
        stmts = list(stmts)
        drop = set()
        for i, j, name in pairs(stmts):
            if name in ok and i not in drop:
                stmts[i] = Copy(stmts[i].src, stmts[j].dst, stmts[i].loc, stmts[j].atomic)
                drop.add(j)
        out = []
        for k, s in enumerate(stmts):
            if k in drop:
                continue
            fields = {f: rewrite(getattr(s, f)) for f in body_fields(s)}
            out.append(replace(s, **fields) if fields else s)
        return tuple(out)

    return replace(kernel, body=rewrite(kernel.body))


# ------------------------------------------------------------------------ map + reduce


def full_map_store(s, loop) -> bool:
    """Store `s` of Parallel loop `loop` writes every element of its buffer exactly once."""
    return (isinstance(s, Store) and len(s.indices) == len(loop.vars) == len(s.buffer.shape)
            and all(isinstance(ix, Var) and ix.name == n for ix, n in zip(s.indices, loop.vars))
            and all(_const_positive(x) and x.value == n
                    for x, n in zip(loop.extents, s.buffer.shape)))


def map_reduce_pairs(kernel) -> dict:
    """{id(map): reduce} for a Parallel map whose only statement fills a tile X that the next
    statement (sync instructions aside) reduces along its last dimension, X being used nowhere
    else: the reduction consumes the map's values directly (reduce.py)."""
    refs = buffer_refs(kernel)
    params = {p.name for p in kernel.params}
    out: dict = {}

    def scan(stmts):
        for i, s in enumerate(stmts):
            for f in body_fields(s):
                scan(getattr(s, f))
            if not (isinstance(s, For) and s.kind == "parallel" and len(s.body) == 1
                    and full_map_store(s.body[0], s)):
                continue
            x = s.body[0].buffer
            j = i + 1
            while j < len(stmts) and isinstance(stmts[j], SYNC_OPS):
                j += 1
            if j == len(stmts) or x.name in params or refs.get(x.name) != 2:
                continue
            r = stmts[j]
            if (isinstance(r, Reduce) and r.src.buffer == x and r.src.is_full
                    and r.dim % len(x.shape) == len(x.shape) - 1 and r.dst.buffer.name != x.name):
                out[id(s)] = r

    scan(kernel.body)
    return out


# ---------------------------------------------------------------------------- forwarding


def _reads_of(s, name) -> int:
    return sum(1 for n in walk(s) if isinstance(n, (Region, Load)) and n.buffer.name == name
               and not (isinstance(s, Copy) and n is s.dst))


def _find_forward(kernel, per_block, storage_of):
    """One buffer Y whose every write is a whole-buffer copy from the same buffer X (both
    per-block on-chip or workspace buffers of the same shape, dtype and storage) and whose
    every read follows such a copy in the same statement list, X unchanged in between:
    (Y, X, ids of those copies), or None."""
    refs = buffer_refs(kernel)
    writers: dict = {}
    lists = []

    def collect(stmts):
        lists.append(stmts)
        for s in stmts:
            if not body_fields(s):
                for name in written_names(s):
                    writers.setdefault(name, []).append(s)
            for f in body_fields(s):
                collect(getattr(s, f))

    collect(kernel.body)
    for yname, ws in writers.items():
        w0 = ws[0]
        if not isinstance(w0, Copy):
            continue
        x, y = w0.src.buffer, w0.dst.buffer
        if (x.scope not in per_block or y.scope not in per_block or x.name == y.name
                or x.shape != y.shape or x.dtype != y.dtype or storage_of(x) != storage_of(y)
                or not all(isinstance(w, Copy) and w.src.is_full and w.dst.is_full
                           and not w.transpose
                           and w.src.buffer == x for w in ws)):
            continue
        ids = {id(w) for w in ws}
        seen, ok = 0, True
        for stmts in lists:
            for i, s in enumerate(stmts):
                if id(s) not in ids:
                    continue
                last = -1
                for j in range(i + 1, len(stmts)):
                    if id(stmts[j]) in ids or yname in written_names(stmts[j]):
                        break
                    c = _reads_of(stmts[j], yname)
                    if c:
                        seen += c
                        last = j
                if any(x.name in written_names(t) for t in stmts[i + 1:last + 1]):
                    ok = False
        if ok and seen + len(ws) == refs.get(yname, 0):
            return y, x, ids
    return None


def forward_copies(kernel, per_block, storage_of):
    """Read the source of whole-buffer copies between on-chip buffers in place (the lowered
    workspace -> L1 -> L0A/L0B staging), buffer by buffer, until none is left."""
    from dataclasses import replace

    from tilelang_mini.ir.nodes import Buffer, transform
    for _ in range(64):
        found = _find_forward(kernel, per_block, storage_of)
        if found is None:
            break
        y, x, ids = found

        def drop(stmts):
            out = []
            for s in stmts:
                if id(s) in ids:
                    continue
                fields = {f: drop(getattr(s, f)) for f in body_fields(s)}
                out.append(replace(s, **fields) if fields else s)
            return tuple(out)

        kernel = replace(kernel, body=drop(kernel.body))
        kernel = transform(kernel, lambda n: x if isinstance(n, Buffer) and n == y else n)
    return kernel


# -------------------------------------------------------------------------- live columns


def live_columns(kernel) -> dict:
    """{C: n} for 2-d accumulator tiles whose columns >= n can never be observed: C is only
    filled, accumulated into by gemms (column j of C depends on column j only) and copied
    whole into destinations whose bounds (statically) drop those columns. A gemm into C then
    computes n columns (the lowered prenorm: D_f is 32 wide, D has 24 columns)."""
    live, bad, _ = _observers(kernel)
    params = {p.name for p in kernel.params}
    return {k: n for k, n in live.items()
            if k not in bad and k not in params and 0 < n < _shape_of(kernel, k)[1]}


def live_landings(kernel) -> dict:
    """{C: ((start, columns), ...)} for the accumulator tiles of `live_columns` (and those whose
    every column may be live) whose observers are whole-tile copies to a column `start` that
    depends only on the grid variables: at run time a block's gemm need not compute the columns
    past `max(columns - start)` (the last block column of a GEMM whose N is not a multiple of
    the tile: `C[.., bx * 128 +: 128]` of a 136-column C keeps 8 columns in block bx = 1)."""
    live, bad, landings = _observers(kernel)
    params = {p.name for p in kernel.params}
    grid = set(kernel.grid_vars)
    out = {}
    for k in live:
        marks = landings.get(k, ())
        if k in bad or k in params or not marks or any(
                st is None or not _var_names(st) <= grid for st, _ in marks):
            continue
        out[k] = tuple(marks)
    return out


def _var_names(x) -> set:
    return {n.name for n in walk(x) if isinstance(n, Var)}


def _observers(kernel):
    """(live columns, buffers observed otherwise, landing (start, columns) of whole copies)."""
    live: dict = {}
    bad: set = set()
    landings: dict = {}
    ranges = _var_ranges(kernel)

    def use(name, n):
        live[name] = max(live.get(name, 0), n)

    for s in walk_statements(kernel.body):
        own = list(walk_own(s))
        if isinstance(s, Gemm):
            c = s.c.buffer
            if len(c.shape) == 2 and s.c.is_full and c.name not in (
                    s.a.buffer.name, s.b.buffer.name):
                use(c.name, 0)
                own = [n for n in own if n is not s.c]
        elif isinstance(s, Fill) and s.dst.is_full:
            own = [n for n in own if n is not s.dst]
        elif isinstance(s, Copy) and s.src.is_full and len(s.src.buffer.shape) == 2:
            n = _landing_columns(s, ranges)
            if n is not None:
                use(s.src.buffer.name, n)
                own = [n for n in own if n is not s.src]
                d = [d for d, x in enumerate(s.dst.extent) if x != 1][-1]
                landings.setdefault(s.src.buffer.name, []).append(
                    (s.dst.start[d], s.dst.buffer.shape[d]))
        for n in own:
            if isinstance(n, (Region, Load, Store)):
                bad.add(n.buffer.name)
    return live, bad, landings


def _landing_columns(s, ranges):
    """Columns [0, n) of the whole-tile source of copy `s` that can land inside the destination
    (its last dimension starts at >= 0 for every value of the variables), or None. The start's
    lower bound decides: `C[cid * 128 +: 128, cid % 1 * 128 +: 128]` of an 8-column C keeps
    8 columns of a 128-wide tile."""
    src, dst = s.src, s.dst
    if src.extent[1] == 1:
        return None
    dims = [d for d, x in enumerate(dst.extent) if x != 1]
    if not dims or dst.extent[dims[-1]] != src.extent[1]:
        return None
    d = dims[-1]
    iv = interval(ranges, dst.start[d])
    if iv is None or iv[0] < 0:
        return None
    return max(0, min(src.extent[1], dst.buffer.shape[d] - iv[0]))


def _var_ranges(kernel) -> dict:
    """name -> (lo, hi) of the grid variables and of every loop variable with constant
    extents (a name bound by several loops gets the union: a lower start is the safe side)."""
    if kernel.is_npu:
        out = {kernel.grid_vars[0]: (0, max(0, kernel.grid[0] - 1))}
        if len(kernel.grid_vars) > 1:
            out[kernel.grid_vars[1]] = (0, 1)
    else:
        out = {v: (0, max(0, n - 1)) for v, n in zip(kernel.grid_vars, kernel.grid)}
    bad = set()
    for s in walk_statements(kernel.body):
        if type(s).__name__ != "For":
            continue
        for v, e in zip(s.vars, s.extents):
            if isinstance(e, Const) and isinstance(e.value, int) and not isinstance(e.value, bool):
                lo, hi = out.get(v, (0, max(0, e.value - 1)))
                out[v] = (min(lo, 0), max(hi, e.value - 1))
            else:
                bad.add(v)
    for v in bad:
        out.pop(v, None)
    return out


def _shape_of(kernel, name):
    for s in walk_statements(kernel.body):
        for n in walk_own(s):
            if isinstance(n, (Region, Load, Store)) and n.buffer.name == name:
                return n.buffer.shape
    return (0, 0)


def interval(ranges, x):
    """(lo, hi) bounds of an integer expression under variable ranges, or None."""
    if isinstance(x, Const):
        if isinstance(x.value, bool) or not isinstance(x.value, int):
            return None
        return (x.value, x.value)
    if isinstance(x, Var):
        return ranges.get(x.name)
    if isinstance(x, BinOp) and x.op in ("+", "-", "*", "//", "%"):
        a, c = interval(ranges, x.a), interval(ranges, x.b)
        if a is None or c is None:
            return None
        if x.op == "+":
            return (a[0] + c[0], a[1] + c[1])
        if x.op == "-":
            return (a[0] - c[1], a[1] - c[0])
        if x.op == "*":
            ps = [p * q for p in a for q in c]
            return (min(ps), max(ps))
        if c[0] != c[1] or c[0] <= 0:
            return None
        d = c[0]
        if x.op == "//":
            return (a[0] // d, a[1] // d)
        return (a[0], a[1]) if a[0] >= 0 and a[1] < d else (0, d - 1)
    if isinstance(x, Call) and x.fn in ("max", "min") and len(x.args) == 2:
        a, c = interval(ranges, x.args[0]), interval(ranges, x.args[1])
        if a is None or c is None:
            return None
        f = max if x.fn == "max" else min
        return (f(a[0], c[0]), f(a[1], c[1]))
    return None
