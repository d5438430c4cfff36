"""TileLang's safe global accesses inside T.Parallel (the frontend's guard on stores and reads
of global tensors whose indices the loop and block ranges cannot keep in bounds)."""
from __future__ import annotations

from dataclasses import replace

from ..ir import dtypes
from ..ir.analysis import interval
from ..ir.nodes import GLOBAL_SCOPES, If, Load, Store, transform, walk
from .dialect import select
from .exprs import binop, const


def _bound(buf, indices, var_ranges):
    """The condition that `indices` lie inside `buf` where the loop and block ranges cannot
    show it (None: proven in range)."""
    conds = []
    for ix, dim in zip(indices, buf.shape):
        if not isinstance(dim, int):
            continue
        iv = interval(var_ranges, ix)  # None: data-dependent or not analysed
        if iv is None or iv[0] < 0:
            conds.append(binop(">=", ix, 0))
        if iv is None or iv[1] >= dim:
            conds.append(binop("<", ix, dim))
    return _all(conds)


def _all(conds):
    cond = None
    for c in conds:
        if c is not None:
            cond = c if cond is None else binop("and", cond, c)
    return cond


def guard_reads(e, var_ranges):
    """`e` with every global read whose index may leave its tensor a select with clamped
    indices that reads 0 outside (an `if` condition in a map, a gathered store index)."""

    def guarded(n):
        if isinstance(n, Load) and n.buffer.scope in GLOBAL_SCOPES:
            c = _bound(n.buffer, n.indices, var_ranges)
            if c is not None:
                return select(c, n, const(0.0 if dtypes.is_float(n.buffer.dtype) else 0))
        return n
    return transform(e, guarded)


def guard_global(st: Store, var_ranges):
    """TileLang's safe memory access: inside T.Parallel, an element of a global tensor
    outside its shape (a tail block of `y[bx * 32 + i] = s[i]` when the length is not a
    multiple of 32) is not stored, and one read outside it reads 0. Where the loop and block
    ranges show an index may leave its dimension, or cannot bound it (a gather through an
    index tensor: sparse MLA's KV rows padded with an out-of-range index), the store goes
    under the map's `if` (it runs only where its condition holds) and the read becomes a
    select with clamped indices; accesses proven in range stay as written:

        y[bx * 32 + i] = x[bx * 32 + i + 1]   ->   if bx * 32 + i < n:
                                                      y[...] = select(bx * 32 + i + 1 < n,
                                                                      x[clamped], 0)

    A store index that itself reads a global tensor (a scatter through slots,
    `cache[slots[bx * 8 + i], d] = ...` in a tail block) reads it guarded too, and the store
    runs only where that read lies inside its tensor (not at the 0 it reads outside).
    """
    result = replace(st, value=guard_reads(st.value, var_ranges))
    if st.buffer.scope in GLOBAL_SCOPES:
        inner = _all([_bound(n.buffer, n.indices, var_ranges) for ix in st.indices
                      for n in walk(ix) if isinstance(n, Load) and n.buffer.scope in GLOBAL_SCOPES])
        indices = tuple(guard_reads(ix, var_ranges) for ix in st.indices)
        cond = _all([inner, _bound(st.buffer, indices, var_ranges)])
        result = replace(result, indices=indices)
        if cond is not None:
            result = If(cond, (result,), (), st.loc)
    return result
