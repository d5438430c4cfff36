"""Analyses of the kernel the code generator reads (its rewrites are passes: transform/cpu_*.py).

`live_columns`/`live_landings`: the columns of a gemm's accumulator anything can observe;
`interval`: bounds of an index expression.
"""
from __future__ import annotations

from tilelang_mini.ir.nodes import (
    BinOp, Call, Const, Copy, Fill, Gemm, Load, Region, Store, Var, walk, walk_own,
    walk_statements,
)


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
