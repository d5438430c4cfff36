"""What the code generator carries while it emits: a value with its kind, the Parallel loop
being emitted, and the variables an expression uses."""
from __future__ import annotations

from dataclasses import dataclass

from tilelang_mini.ir.nodes import BinOp, Var, walk

from .irutil import is_vec


@dataclass
class Val:
    v: object        # ir.Value, scalar or <VL x T>
    kind: str        # int (i64) | float (f32) | bool (i1)

    @property
    def vec(self) -> bool:
        return is_vec(self.v)


class Par:
    """The Parallel loop being emitted."""

    def __init__(self, names, extents):
        self.names = names
        self.extents = extents      # i64 scalar values
        self.mask = None            # <VL x i1> of the active lanes (set inside the lane loop)
        self.guarded = False        # mask narrowed by an If on the lanes (parallel.masked_if)


def vars_in(exprs) -> set:
    """The names of the variables the expressions use."""
    out = set()
    for x in exprs:
        for n in walk(x):
            if isinstance(n, Var):
                out.add(n.name)
    return out


def plus_var(x, name) -> bool:
    """x is the variable `name`, or `name + e` / `e + name` with e free of it (consecutive
    values of `name` give consecutive values of x)."""
    if isinstance(x, Var):
        return x.name == name
    return isinstance(x, BinOp) and x.op == "+" and (
        isinstance(x.a, Var) and x.a.name == name and name not in vars_in((x.b,))
        or isinstance(x.b, Var) and x.b.name == name and name not in vars_in((x.a,)))
