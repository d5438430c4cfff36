"""infer_live_columns (llvm target): how many leading columns of a gemm's accumulator anything
can observe, recorded as the gemm's `columns` (ir/nodes.py `Gemm`), so a CPU computes no more.

A 2-d accumulator tile C that is only filled, accumulated into by gemms (column j of C depends on
column j of B only) and copied whole into destinations whose bounds drop its last columns has
dead columns. When every such copy lands at a column start that depends on the grid variables
only, the count is an expression of them (the last block column of a GEMM whose N is not a
multiple of the tile keeps N mod tile columns); otherwise it is the constant the starts' lower
bounds allow:

    gemm(A_s, B_s, C_f)                         gemm(A_s, B_s, C_f, columns=136 - bx * 128)
    copy(C_f, C[.., bx * 128 +: 128])     ->    copy(C_f, C[.., bx * 128 +: 128])     C: 136 columns

    gemm(X_s, W_s, D_f)                         gemm(X_s, W_s, D_f, columns=24)
    copy(D_f, D[i * 16 +: 16, 0 +: 32])   ->    copy(D_f, D[i * 16 +: 16, 0 +: 32])   D: 24 columns
"""
from __future__ import annotations

from dataclasses import replace

from ..ir.analysis import interval
from ..ir.nodes import (
    BinOp, Call, Const, Copy, Fill, For, Gemm, Kernel, Load, Region, Store, Var,
    transform_statements, walk, walk_own, walk_statements,
)


def infer_live_columns(kernel: Kernel) -> Kernel:
    """Every gemm into a whole 2-d accumulator with dead columns gets `columns=` (docstring)."""
    counts = live_columns(kernel)
    if not counts:
        return kernel

    def rewrite(node):
        if isinstance(node, Gemm) and node.c.is_full and node.c.buffer.name in counts:
            return replace(node, columns=counts[node.c.buffer.name])
        return node

    return replace(kernel, body=tuple(transform_statements(s, rewrite) for s in kernel.body))


def live_columns(kernel: Kernel) -> dict:
    """{C: expression of the grid variables, or constant} for the accumulators with columns
    nothing can observe (module docstring)."""
    live, bad, landings = _observers(kernel)
    params = {p.name for p in kernel.params}
    grid = set(kernel.grid_vars)
    out = {}
    for name, n in live.items():
        if name in bad or name in params:
            continue
        width = _shape_of(kernel, name)[1]
        marks = landings.get(name, ())
        if marks and all(st is not None and _var_names(st) <= grid for st, _ in marks):
            count = _max([_minus(cols, st) for st, cols in marks])
            if not isinstance(count, Const):
                out[name] = count
                continue
            n = max(0, min(n, count.value))
        if 0 < n < width:
            out[name] = Const(n)
    return out


def _minus(cols: int, start):
    if isinstance(start, Const) and type(start.value) is int:
        return Const(cols - start.value)
    return BinOp("-", Const(cols), start)


def _max(xs):
    if all(isinstance(x, Const) for x in xs):
        return Const(max(x.value for x in xs))
    out = xs[0]
    for x in xs[1:]:
        out = Call("max", (out, x))
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
        if not isinstance(s, For):
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
