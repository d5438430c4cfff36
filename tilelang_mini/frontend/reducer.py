"""TileLang's reducers (`T.alloc_reducer` / `T.finalize_reducer`), a KernelBuilder part.

A reducer is a fragment that the threads of a block update together: in a T.Parallel map an
update `r[i] op= v(i, j)` whose indices leave out a loop variable combines every iteration's v
into the element (each thread keeps a private copy, T.finalize_reducer combines the copies).
Here the map runs on one core, so the update is a reduction over the variables it leaves out:
the values go into a tile of the map's shape and a T.reduce_* adds them to the reducer
(`clear=False`: its old value stays in the combination); T.finalize_reducer has nothing left to
combine.

    o = T.alloc_reducer(64, T.float32)            o = alloc_fragment((64,), float32)
    for i, j in T.Parallel(64, 128):       ->     for i, j in Parallel(64, 128): t[i, j] = a[i, j] * x[j]
        o[i] += a[i, j] * x[j]                    reduce_sum(t, o, dim=1, clear=False)
    T.finalize_reducer(o)                         (nothing)

`op="sum"` (the default) takes `r[i] += v` (or `r[i] = r[i] + v`), `"max"` / `"min"` take
`r[i] = T.max(r[i], v)` (`T.min`).
"""
from __future__ import annotations

import ast

from ..ir.nodes import Alloc, BinOp, Buffer, Call, For, Load, Reduce, Region, Store, Var
from .common import show
from .exprs import as_expr, const

_KINDS = {"sum": "sum", "max": "max", "min": "min"}


class Reducers:
    def alloc_reducer(self, name: str, call: ast.Call) -> list:
        """`r = T.alloc_reducer(shape, dtype, op="sum", replication=...)`: a fragment that
        T.Parallel updates reduce into (`replication` is a GPU thread layout: no meaning here)."""
        keep = [k for k in call.keywords if k.arg not in ("op", "replication")]
        ops = [k.value for k in call.keywords if k.arg == "op"]
        args = list(call.args)
        if len(args) > 2:  # T.alloc_reducer(shape, dtype, "sum", ...)
            ops, args = ops or [args[2]], args[:2]
        op = self.eval(ops[0]) if ops else "sum"
        if op not in _KINDS:
            raise self.error(ops[0], f"T.alloc_reducer's op is \"sum\", \"max\" or \"min\", "
                                     f"got {show(op)}")
        plain = ast.Call(func=call.func, args=args, keywords=keep, lineno=call.lineno,
                         col_offset=call.col_offset)
        out = self.alloc(name, "alloc_fragment", plain)
        out = out if isinstance(out, list) else [out]
        self.reducers[out[0].buffer.name] = _KINDS[op]
        return out

    def op_finalize_reducer(self, call):
        """Nothing: the updates were already combined where they were made."""
        if len(call.args) != 1 or call.keywords:
            raise self.error(call, "T.finalize_reducer(reducer) takes the reducer")
        return []

    def reducer_update(self, st, names) -> bool:
        """Is `st` (a statement of a T.Parallel body over `names`) a reducer update?"""
        return (isinstance(st, Store) and st.buffer.name in self.reducers
                and {ix.name for ix in st.indices if isinstance(ix, Var)} != set(names))

    def parallel_reducers(self, names, extents, body, s) -> list:
        """A T.Parallel body holding reducer updates: maps of its other statements and per
        update a map into a tile of the loop's shape plus a T.reduce_* into the reducer."""
        out, plain = [], []

        def flush():
            if plain:
                out.append(For(names, tuple(const(e) for e in extents), "parallel",
                               tuple(plain), 0, self.loc(s)))
                plain.clear()
        for st in body:
            if not self.reducer_update(st, names):
                plain.append(st)
                continue
            flush()
            out += self.reduce_update(st, names, extents, s)
        flush()
        return out

    def reduce_update(self, st: Store, names, extents, s) -> list:
        kind = self.reducers[st.buffer.name]
        rest = [n for n in names if Var(n) not in st.indices]
        kept = [n for n in names if n not in rest]
        if len(rest) != 1 or tuple(Var(n) for n in kept) != tuple(st.indices) or not all(
                isinstance(e, int) for e in extents):
            raise self.error(s, f"a reducer update inside T.Parallel indexes '{st.buffer.name}' "
                                "with the loop's variables in order, leaving out one of them "
                                "(the reduced one)")
        shape = tuple(e for n, e in zip(names, extents) if n in kept)
        if shape != st.buffer.shape:
            raise self.error(s, f"the reducer '{st.buffer.name}' of shape {st.buffer.shape} is "
                                f"updated over loop extents {shape}: they must match")
        value = _operand(st.value, Load(st.buffer, st.indices), kind)
        if value is None:
            want = "r[i] += v" if kind == "sum" else f"r[i] = T.{kind}(r[i], v)"
            raise self.error(s, f"a '{kind}' reducer is updated as {want} inside T.Parallel")
        tile = self.fresh_buffer_name(st.buffer.name + "_part")
        buf = Buffer(tile, tuple(extents), st.buffer.dtype, "fragment")
        full = Region(buf, tuple(const(0) for _ in extents), tuple(extents))
        dst = Region(st.buffer, tuple(const(0) for _ in shape), shape)
        fill = Store(buf, tuple(Var(n) for n in names), as_expr(value), st.loc)
        return [Alloc(buf, None, st.loc),
                For(names, tuple(const(e) for e in extents), "parallel", (fill,), 0, st.loc),
                Reduce(kind, full, dst, names.index(rest[0]), False, st.loc)]


def _operand(value, old, kind):
    """v of `old + v` / `v + old` (sum) or `max(old, v)` / `max(v, old)`, else None."""
    if kind == "sum" and isinstance(value, BinOp) and value.op == "+":
        pair = (value.a, value.b)
    elif kind != "sum" and isinstance(value, Call) and value.fn == kind and len(value.args) == 2:
        pair = value.args
    else:
        return None
    if pair[0] == old:
        return pair[1]
    if pair[1] == old:
        return pair[0]
    return None
