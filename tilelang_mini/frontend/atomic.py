"""`T.atomic_add` / `T.atomic_max` / `T.atomic_min` (and tilelang-ascend's `T.tile.atomic_add`),
a KernelBuilder part. On GM they become atomic copies (`Copy.atomic`): the Ascend copy-out with
the atomic mode on, which combines a tile into GM commutatively with the other blocks' copies.
On an on-chip tile (one core owns it: no other writer) they are a plain read-modify-write.

    T.atomic_add(C[by * 64, bx * 64], C_local)        -> copy(C_local, C[by * 64 +: 64, ...], atomic_add=True)
    for i, j in T.Parallel(64, 64):                      (element form, TileLang's split-K idiom)
        T.atomic_add(C[by * 64 + i, bx * 64 + j], C_local[i, j])
                                                      -> the same tile copy (C_local read directly)
    for i in T.Parallel(64):
        T.atomic_add(Y[b * 64 + i], x[i] * 2.0)       -> t[i] = x[i] * 2.0 ; copy(t, Y[...], atomic_add=True)
    T.atomic_add(Y[k], v)                             -> t[0] = v ; copy(t, Y[k +: 1], atomic_add=True)
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, replace

from ..ir import dtypes
from ..ir.analysis import GM_SCOPES
from ..ir.nodes import (
    Alloc, BinOp, Buffer, Call, Const, Copy, For, If, Load, Loc, Region, Store, Var, walk,
)
from ..transform.util import substitute
from .common import show
from .exprs import as_expr, binop, const, is_ir, region_dims, region_index

_OPS = {"add": lambda a, b: binop("+", a, b),
        "max": lambda a, b: Call("max", (as_expr(a), as_expr(b))),
        "min": lambda a, b: Call("min", (as_expr(a), as_expr(b)))}
_ARGS = ["dst", "value", "memory_order", "return_prev", "use_tma", "annotations"]


@dataclass(frozen=True)
class ParallelAtomic:
    """An atomic update of one element inside a T.Parallel body, lowered with its loop."""

    kind: str
    buffer: Buffer
    indices: tuple
    value: object
    node: ast.AST
    loc: Loc
    cond: object = None  # under `if c:` in the map: the update happens where c holds


class Atomics:
    def op_atomic_add(self, call):
        return self.atomic("add", call)

    def op_atomic_max(self, call):
        return self.atomic("max", call)

    def op_atomic_min(self, call):
        return self.atomic("min", call)

    def op_atomic_addx2(self, call):
        return self.atomic_wide(2, call)

    def op_atomic_addx4(self, call):
        return self.atomic_wide(4, call)

    def atomic_wide(self, width: int, call: ast.Call) -> list:
        """T.atomic_addx2/x4(dst, src): `width` consecutive elements (last dimension) from
        the element `dst` on, each plus the element of `src` as far along:

            T.atomic_addx2(C[i, j], frag[r, c])  -> copy(frag[r +: 1, c +: 2], C[i +: 1, j +: 2], atomic_add=True)
            inside T.Parallel: `width` element updates (dst[.., j + u] += src[.., c + u])
        """
        a = self.args(call, _ARGS, {n: None for n in _ARGS[2:]})
        if "return_prev" in a and self.eval(a["return_prev"]):
            raise self.error(a["return_prev"], f"T.atomic_addx{width} returns no old value here; "
                                               "write T.atomic_add(x, v, return_prev=True) per "
                                               "element (an on-chip tile)")
        dst, src = self.point(a["dst"], f"addx{width}"), a["value"]
        if not isinstance(src, ast.Subscript):
            raise self.error(src, f"T.atomic_addx{width} adds {width} consecutive elements of a "
                                  "buffer: give its first element, src[i, j]")
        sbuf, sidx = self.point(src, f"addx{width}")
        loc = self.loc(call)
        if self.parallel_depth:
            out = []
            for u in range(width):
                di = dst[1][:-1] + (as_expr(binop("+", dst[1][-1], u)),)
                si = sidx[:-1] + (as_expr(binop("+", sidx[-1], u)),)
                out.append(ParallelAtomic("add", dst[0], di, Load(sbuf, si), call, loc))
            return out
        ext_d = (1,) * (len(dst[1]) - 1) + (width,)
        ext_s = (1,) * (len(sidx) - 1) + (width,)
        if sbuf.scope in GM_SCOPES:
            raise self.error(src, f"T.atomic_addx{width} combines an on-chip tile into GM; copy "
                                  "the GM source into a tile first")
        d_r, s_r = Region(dst[0], dst[1], ext_d), Region(sbuf, sidx, ext_s)
        if dst[0].scope in GM_SCOPES:
            return [Copy(s_r, d_r, loc, atomic="add")]
        return [self.local_update("add", d_r, lambda idx: Load(sbuf, idx), s_r, call)]

    def atomic_value(self, kind: str, call: ast.Call):
        """`old = T.atomic_add(s[k], v, return_prev=True)` on one element of an on-chip tile
        (one core owns it, its updates are in program order): the old value, kept in a hidden
        variable, and the element updated, as statements before the one being read:

            pos = T.atomic_add(hist[b], 1, return_prev=True)
        ->  prev[0] = hist[b]; hist[b] = prev[0] + 1; pos = prev[0]
        """
        a = self.args(call, _ARGS, {n: None for n in _ARGS[2:]})
        if "return_prev" not in a or not self.eval(a["return_prev"]):
            raise self.error(call, f"T.atomic_{kind} is a statement here; as a value it needs "
                                   "return_prev=True")
        if self.parallel_depth or not getattr(self, "open_bodies", None):
            raise self.error(a["return_prev"], f"T.atomic_{kind}(..., return_prev=True) inside "
                                               "T.Parallel: the iterations have no order here; "
                                               "count with T.reduce_sum / T.cumsum over a tile")
        buf, idx = self.point(a["dst"], kind)
        if buf.scope in GM_SCOPES:
            raise self.error(a["return_prev"], f"T.atomic_{kind}(..., return_prev=True) returns "
                                               "the old value: the Ascend atomic copy-out into GM "
                                               "returns nothing; count with T.reduce_sum / "
                                               "T.cumsum over a tile instead")
        if self.simt is not None:  # once per thread of the block (simt.py)
            value = self.cast_value(self.value_arg(a["value"]), buf)
            return self.thread_atomic_value(buf, idx, lambda old: _OPS[kind](old, value), call)
        loc = self.loc(call)
        prev = Buffer(self.fresh_buffer_name("atomic_prev"), (1,), buf.dtype, "var")
        self.hoisted_allocs[prev.name] = Alloc(prev, None, loc)
        old = Load(prev, (const(0),))
        value = self.cast_value(self.value_arg(a["value"]), buf)
        pre = [Store(prev, (const(0),), Load(buf, idx), loc),
               Store(buf, idx, as_expr(_OPS[kind](old, value)), loc)]
        self.open_bodies[-1].extend(pre)
        self.stale_reads_of(pre, call)  # names that read the element see the update
        return old

    def atomic(self, kind: str, call: ast.Call) -> list:
        return self.atomic_stmts(kind, call)

    def atomic_stmts(self, kind: str, call: ast.Call) -> list:
        a = self.args(call, _ARGS, {n: None for n in _ARGS[2:]})
        if "return_prev" in a and self.eval(a["return_prev"]):
            self.atomic_value(kind, call)  # the old value unused: the update alone
            return []
        for k in ("memory_order", "use_tma", "annotations"):  # GPU memory-model / TMA hints
            if k in a and not isinstance(a[k], ast.Dict):
                self.eval(a[k])
        loc = self.loc(call)
        if self.parallel_depth:
            buf, idx = self.point(a["dst"], kind)
            return [ParallelAtomic(kind, buf, idx, self.value_arg(a["value"]), call, loc)]
        if self.is_region_node(a["value"]):
            src = self.region(a["value"])
            dst = self.complete(self.region(a["dst"]), src, a["dst"])
            src = self.complete(src, (dst.buffer, dst.start, list(dst.extent)), a["value"])
            if src.buffer.scope in GM_SCOPES:
                raise self.error(a["value"], f"T.atomic_{kind} combines an on-chip tile into GM; "
                                             "copy the GM source into a tile first")
            if dst.buffer.scope in GM_SCOPES:
                return [Copy(src, dst, loc, atomic=kind)]
            return [self.local_update(kind, dst, lambda idx: Load(src.buffer, idx), src, call)]
        value = self.value_arg(a["value"])
        buf, starts, ext = self.region(a["dst"])
        ext = [1 if e is None else e for e in ext]
        dst = Region(buf, starts, tuple(ext))
        if buf.scope in GM_SCOPES:
            if self.simt is not None and all(e == 1 for e in ext):  # once per thread (simt.py)
                return self.thread_gm_atomic(kind, dst, self.cast_value(value, buf), call)
            tmp = self.temp_tile([e for e in ext if e != 1] or [1], buf.dtype, call)
            return [self.fill_map(Region.full(tmp), self.cast_value(value, buf), call),
                    Copy(Region.full(tmp), dst, loc, atomic=kind)]
        if all(e == 1 for e in ext):
            update = as_expr(_OPS[kind](Load(buf, starts), value))
            if self.simt is not None:  # once per thread of the block (simt.py)
                return self.thread_atomic(kind, buf, starts, update, call)
            return [Store(buf, starts, update, loc)]
        return [self.local_update(kind, dst, lambda idx: value, None, call)]

    def point(self, node, kind):
        """(buffer, indices) of the one element `node` names."""
        if not isinstance(node, ast.Subscript):
            raise self.error(node, f"inside T.Parallel, T.atomic_{kind} updates one element: "
                                   "C[i, j]")
        buf = self.eval(node.value)
        if not isinstance(buf, Buffer):
            raise self.error(node, f"expected a buffer element, got {show(buf)}")
        return buf, self.indices(node, buf)

    def cast_value(self, value, buf):
        if dtypes.is_int(buf.dtype):
            return as_expr(value)
        return as_expr(float(value) if isinstance(value, int) else value)

    def temp_tile(self, shape, dst_dtype: str, call) -> Buffer:
        """A fresh tile for the values of an atomic update, allocated at the top of the kernel."""
        dt = "int32" if dtypes.is_int(dst_dtype) else "float32"
        buf = Buffer(self.fresh_buffer_name("atomic_tile"), tuple(shape), dt, "fragment")
        self.hoisted_allocs[buf.name] = Alloc(buf, None, self.loc(call))
        return buf

    def local_update(self, kind, dst: Region, value_at, src: Region | None, call) -> For:
        """dst op= value over dst's region (an on-chip tile: a T.Parallel map)."""
        names = tuple(self.fresh_var("i") for _ in region_dims(dst))
        didx, extents = region_index(dst, names)
        value = value_at(region_index(src, names)[0] if src is not None else None)
        store = Store(dst.buffer, didx, as_expr(_OPS[kind](Load(dst.buffer, didx), value)),
                      self.loc(call))
        return For(names, extents, "parallel", (store,), 0, self.loc(call))

    # ------------------------------------------------------------------ inside T.Parallel

    def parallel_body(self, names, extents, body, s) -> list:
        """A T.Parallel body holding atomic updates: maps of its plain stores, and per atomic
        update a map into a tile plus an atomic copy (statement by statement, as a map runs)."""
        out, stores = [], []

        def flush():
            if stores:
                out.append(For(names, tuple(const(e) for e in extents), "parallel",
                               tuple(stores), 0, self.loc(s)))
                stores.clear()

        for b in body:
            if isinstance(b, Store):
                stores.append(b)
                continue
            if not isinstance(b, ParallelAtomic):
                raise self.error(s, "a T.Parallel body holds element assignments and atomic "
                                    "updates only")
            flush()
            out += self.parallel_atomic(b, names, extents)
        flush()
        return out

    def parallel_atomic(self, u: ParallelAtomic, names, extents) -> list:
        if u.buffer.scope not in GM_SCOPES:  # one core owns the tile: a read-modify-write map
            old = Load(u.buffer, u.indices)
            return [For(names, tuple(const(e) for e in extents), "parallel",
                        (Store(u.buffer, u.indices, as_expr(_OPS[u.kind](old, u.value)), u.loc),),
                        0, u.loc)]
        if u.cond is not None:
            if not _edge_bounds_only(u.cond, u.indices, u.buffer.shape):
                return self.scatter_atomic(u, names, extents)
            # `if by * bm + i < M: T.atomic_add(C[by * bm + i, j], v)`: the tile's atomic copy
            # clips at C's edge, so the condition is the copy's own (no element-wise scatter)
            u = replace(u, cond=None)
        ext_of = dict(zip(names, extents))
        bases, order = [], []
        for ix in u.indices:
            base, var = _split_index(ix, set(names))
            if base is None or (var is not None and var in order):
                return self.scatter_atomic(u, names, extents)
            bases.append(base)
            if var is not None:
                order.append(var)
        if set(order) != set(names):
            missing = ", ".join(n for n in names if n not in order)
            raise self.error(u.node, f"T.atomic_{u.kind} inside T.Parallel: loop variable(s) "
                                     f"{missing} do not index the destination, so several "
                                     "iterations update one element; reduce them into a tile "
                                     f"with T.reduce_* first, then T.atomic_{u.kind} the tile")
        dst_ext = tuple(ext_of[v] if v is not None else 1
                        for v in (_split_index(ix, set(names))[1] for ix in u.indices))
        dst = Region(u.buffer, tuple(as_expr(b) for b in bases), dst_ext)
        shape = tuple(ext_of[v] for v in order)
        want = tuple(Var(v) for v in order)
        v = u.value
        if (isinstance(v, Load) and v.indices == want and v.buffer.shape == shape
                and v.buffer.scope not in GM_SCOPES + ("var",)):
            return [Copy(Region.full(v.buffer), dst, u.loc, atomic=u.kind)]
        tmp = self.temp_tile(shape, u.buffer.dtype, u.node)
        fill = For(names, tuple(const(e) for e in extents), "parallel",
                   (Store(tmp, want, as_expr(v), u.loc),), 0, u.loc)
        return [fill, Copy(Region.full(tmp), dst, u.loc, atomic=u.kind)]


    def scatter_atomic(self, u: ParallelAtomic, names, extents) -> list:
        """An atomic update inside T.Parallel whose destination index is not `start + i` (a
        row gathered through indices, `C[idx[i], j]`; a strided column, `C[r, 4 * j + k]`):
        the values into a tile by the map, then one element's atomic copy per iteration in a
        serial loop nest. Atomic updates commute, so their order does not matter, and
        iterations that meet at one element add up, as on the GPU; a gathered index outside
        its dimension (a -1 padding of the indices) is not stored. An update under `if c:` in
        the map goes this way too, each copy under c (and the gathered index read only where c
        holds: `if i < n: T.atomic_add(h[x[i]], 1)` reads no x[i] past n):

            for i, j in T.Parallel(R, D):            t[i, j] = v[i, j]           (a map)
                T.atomic_add(C[idx[i], j], v[i, j])  for i_s in serial(R): for j_s in serial(D):
                                                  ->     copy(t[i_s, j_s], C[idx[i_s], j_s], atomic_add=True)
        """
        tmp = self.temp_tile(tuple(extents), u.buffer.dtype, u.node)
        put = (Store(tmp, tuple(Var(n) for n in names), as_expr(u.value), u.loc),)
        if u.cond is not None:  # the value too is read only where the condition holds
            put = (If(u.cond, put, (), u.loc),)
        fill = For(names, tuple(const(e) for e in extents), "parallel", put, 0, u.loc)
        serial = tuple(self.fresh_var(n) for n in names)
        at = {n: Var(v) for n, v in zip(names, serial)}
        pre = []  # scalars read per copy (a gathered row, the condition): hidden variables

        def scalar(e, dtype):
            if not any(isinstance(n, Load) for n in walk(e)):
                return e
            var = Buffer(self.fresh_buffer_name("scatter_at"), (1,), dtype, "var")
            self.hoisted_allocs[var.name] = Alloc(var, None, u.loc)
            pre.append(Store(var, (const(0),), as_expr(e), u.loc))
            return Load(var, (const(0),))
        # the map's condition first: the gathered index is read only where it holds (a tail
        # lane's `idx[i]` lies past the index tensor)
        guard = None if u.cond is None else scalar(substitute(u.cond, at), "bool")
        outer, pre = pre, []
        starts = tuple(scalar(as_expr(substitute(ix, at)), "int32") for ix in u.indices)
        body = (Copy(Region(tmp, tuple(Var(v) for v in serial), (1,) * len(names)),
                     Region(u.buffer, starts, (1,) * len(starts)), u.loc, atomic=u.kind),)
        inside = None
        # a gathered index outside its dimension (a -1 padding): not stored (safe access)
        for ix, gathered, dim in zip(starts, u.indices, u.buffer.shape):
            if isinstance(dim, int) and any(isinstance(n, Load) for n in walk(gathered)):
                for c in (binop(">=", ix, 0), binop("<", ix, dim)):
                    inside = c if inside is None else binop("and", inside, c)
        if inside is not None:
            body = (If(inside, body, (), u.loc),)
        body = (*pre, *body)
        if guard is not None:
            body = (*outer, If(guard, body, (), u.loc))
        for v, e in reversed(list(zip(serial, extents))):
            body = (For((v,), (const(e),), "serial", body, 0, u.loc),)
        return [fill, *body]


def _edge_bounds_only(cond, indices, shape) -> bool:
    """Whether `cond` is a conjunction of `ix < dim` / `ix >= 0` / `0 <= ix` for destination
    indices ix of a dimension dim (a tail guard that clipping at the tensor's edge implies)."""
    if isinstance(cond, BinOp) and cond.op == "and":
        return (_edge_bounds_only(cond.a, indices, shape)
                and _edge_bounds_only(cond.b, indices, shape))
    if not isinstance(cond, BinOp):
        return False
    for ix, dim in zip(indices, shape):
        if cond.op == "<" and cond.a == ix and isinstance(dim, int) and \
                isinstance(cond.b, Const) and cond.b.value == dim:
            return True
        if (cond.op == ">=" and cond.a == ix and isinstance(cond.b, Const) and cond.b.value == 0) \
                or (cond.op == "<=" and cond.b == ix and isinstance(cond.a, Const)
                    and cond.a.value == 0):
            return True
    return False


def _split_index(ix, names: set):
    """(base, loop variable or None) with ix == base + variable and no loop variable in base;
    (None, None) when the index has another form."""
    terms = _terms(ix)
    found = [t for t in terms if isinstance(t, Var) and t.name in names]
    rest = [t for t in terms if not (isinstance(t, Var) and t.name in names)]
    if len(found) > 1 or any(isinstance(n, Var) and n.name in names
                             for t in rest for n in walk(t)):
        return None, None
    base = const(0)
    for t in rest:
        base = binop("+", base, t)
    return base, (found[0].name if found else None)


def _terms(e) -> list:
    if isinstance(e, BinOp) and e.op == "+":
        return _terms(e.a) + _terms(e.b)
    return [e]


__all__ = ["Atomics", "ParallelAtomic", "is_ir", "Const"]
