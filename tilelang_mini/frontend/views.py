"""GM buffers that are not parameters, views of GM tensors, bit casts of tiles and im2col
(a KernelBuilder part).

    glse = T.alloc_global((b, h, s), "float32")        -> a hidden kernel parameter, zeroed per call
    flat = T.Tensor((K * K * C, F), dt, kernel.data)  -> a hidden parameter: the caller's array
    flat = T.reshape(kernel, (K * K * C, F))             reshaped (same memory, no copy)
    T.reinterpretcast(dst, src, "int32_t")            -> for i, j in Parallel: dst[i, j] = reinterpret(src[i, j])
    T.im2col(data, tile, by, k, KH, S, D, P)          -> for m, k in Parallel: tile[m, k] = select(inside, data[...], 0)

Hidden parameters follow the user's parameters in every launch's `params`; the runtime
(runtime/launches.py) passes a zeroed array for an `alloc_global` and a reshaped view of the
caller's array for a view. Accesses through a view and through its base are not race-checked
against each other by the simulator (they are different buffers in the IR).
"""
from __future__ import annotations

import ast
from dataclasses import dataclass

from .. import language as T_module
from ..ir import dtypes
from ..ir.analysis import GM_SCOPES
from ..ir.nodes import (Alloc, Buffer, Call, Cast, Copy, For, Load, Region, Reinterpret,
                        Store, Var)
from .common import show
from .int4 import Int4Buffer
from .exprs import as_expr, binop, const, region_dims, region_index, reinterpret

# tilelang-ascend's C type spellings in reinterpretcast
_C_TYPES = {"uint32_t": "uint32", "int32_t": "int32", "uint16_t": "uint16", "int16_t": "int16",
            "uint8_t": "uint8", "int8_t": "int8", "float": "float32", "half": "float16",
            "bfloat16_t": "bfloat16", "int64_t": "int64"}


@dataclass(frozen=True)
class BufferData:
    """`buf.data`: the memory of a GM tensor, to view with `T.Tensor(shape, dtype, buf.data)`."""

    buffer: Buffer


_UINT = {1: "uint8", 2: "uint16", 4: "uint32"}


@dataclass(frozen=True)
class TileView:
    """`T.reshape(tile, shape)` / `T.view(tile, shape, dtype)` of an on-chip tile: the tile's
    memory under another shape (and maybe dtype). Element accesses become accesses of `base`
    (so writes through either name are seen through the other, and the sync analysis orders
    them as accesses of one tile); whole-view T.clear/T.fill/T.reduce_* are supported.

    With another `dtype`, view element k is the k-th group of bytes of the tile (row-major,
    little-endian, as the tile's bytes would be): a wider view (bf16 tile as float32) reads two
    tile elements and joins their bits, and a store writes both; a narrower one (float32 tile
    as bfloat16) reads part of an element's bits, and a store rewrites that part of it:

        v = T.view(s, [8, 64], "float32")   (s: [16, 64] bfloat16)
        v[i, j]        ->  reinterpret(u32(bits(s[2i + (2j) // 64, (2j) % 64]))
                                       | u32(bits(s[.., (2j + 1) % 64])) << 16, float32)
        v[i, j] = x    ->  s[.., (2j) % 64] = reinterpret(u16(bits(x) & 65535), bfloat16)
                           s[.., (2j + 1) % 64] = reinterpret(u16(bits(x) >> 16 & 65535), ...)
    """

    base: Buffer
    shape: tuple
    dtype: str | None = None  # None: the base's

    @property
    def elem_dtype(self) -> str:
        return self.dtype or self.base.dtype

    def load(self, idx: tuple):
        """The value of view element `idx`."""
        if self.dtype is None:
            return Load(self.base, self.base_indices(idx))
        vs, bs = dtypes.itemsize(self.dtype), dtypes.itemsize(self.base.dtype)
        if vs > bs:
            bits = 0
            for m, bidx in enumerate(self._wide_parts(idx)):
                part = _bits(Load(self.base, bidx), self.base.dtype)
                bits = binop("|", bits, binop("<<", part, 8 * bs * m) if m else part)
            return _from_bits(bits, self.dtype)
        bidx, shift = self._narrow_part(idx)
        whole = _bits(Load(self.base, bidx), self.base.dtype)
        return _from_bits(binop("&", binop(">>", whole, shift), (1 << 8 * vs) - 1), self.dtype)

    def stores(self, idx: tuple, value, loc) -> list:
        """The stores of `value` into view element `idx` (one per tile element it touches)."""
        if self.dtype is None:
            return [Store(self.base, self.base_indices(idx), as_expr(value), loc)]
        vs, bs = dtypes.itemsize(self.dtype), dtypes.itemsize(self.base.dtype)
        bits = _bits(Cast(self.dtype, as_expr(value)), self.dtype)
        if vs > bs:
            mask = (1 << 8 * bs) - 1
            return [Store(self.base, bidx, _from_bits(binop("&", binop(">>", bits, 8 * bs * m)
                                                            if m else bits, mask),
                                                      self.base.dtype), loc)
                    for m, bidx in enumerate(self._wide_parts(idx))]
        bidx, shift = self._narrow_part(idx)
        old = _bits(Load(self.base, bidx), self.base.dtype)
        keep = binop("&", old, Call("bitwise_not", (as_expr(binop("<<", (1 << 8 * vs) - 1,
                                                                      shift)),)))
        return [Store(self.base, bidx, _from_bits(binop("|", keep, binop("<<", bits, shift)),
                                                  self.base.dtype), loc)]

    def _wide_parts(self, idx: tuple) -> list:
        """Indices into `base` of the tile elements view element `idx` spans, lowest first."""
        r = dtypes.itemsize(self.dtype) // dtypes.itemsize(self.base.dtype)
        unit = TileView(self.base, tuple(self.shape) + (r,))
        return [unit.base_indices(tuple(idx) + (m,)) for m in range(r)]

    def _narrow_part(self, idx: tuple) -> tuple:
        """(indices into `base` of the tile element holding view element `idx`, the bit offset
        of the view element in it)."""
        vs = dtypes.itemsize(self.dtype)
        q = dtypes.itemsize(self.base.dtype) // vs
        if self.shape[-1] % q == 0:
            unit = TileView(self.base, tuple(self.shape[:-1]) + (self.shape[-1] // q,))
            return (unit.base_indices(tuple(idx[:-1]) + (binop("//", idx[-1], q),)),
                    as_expr(binop("*", binop("%", idx[-1], q), 8 * vs)))
        flat = 0
        for d, i in zip(self.shape, idx):
            flat = binop("+", binop("*", flat, d), i)
        unit = TileView(self.base, (self.base.numel,))
        return (unit.base_indices((binop("//", flat, q),)),
                as_expr(binop("*", binop("%", flat, q), 8 * vs)))

    def base_indices(self, idx: tuple) -> tuple:
        """Indices into `base` of view element `idx` (dims grouped where the products agree:
        merged dims are a sum of products, split dims a // and a %)."""
        vs, bs = list(self.shape), list(self.base.shape)
        out, i, j = [], 0, 0
        while i < len(vs) or j < len(bs):
            gi, gj = [i], [j]
            pv, pb = vs[i] if i < len(vs) else 1, bs[j] if j < len(bs) else 1
            i, j = i + 1, j + 1
            while pv != pb:
                if pv < pb:
                    pv *= vs[i]
                    gi.append(i)
                    i += 1
                else:
                    pb *= bs[j]
                    gj.append(j)
                    j += 1
            flat = 0
            for k in gi:
                if k < len(vs):
                    flat = binop("+", binop("*", flat, vs[k]), idx[k])
            inner = pb
            for k in gj:
                if k < len(bs):
                    inner //= bs[k]
                    out.append(binop("%", binop("//", flat, inner), bs[k]) if len(gj) > 1
                               else flat)
        return tuple(as_expr(x) for x in out)




def _bits(value, dtype: str):
    """The bits of a `dtype` value as an unsigned integer."""
    if dtype in dtypes.UNSIGNED_DTYPES:
        return value
    return Reinterpret(_UINT[dtypes.itemsize(dtype)], dtype, as_expr(value))


def _from_bits(bits, dtype: str):
    """The `dtype` value of unsigned integer bits."""
    u = _UINT[dtypes.itemsize(dtype)]
    value = Cast(u, as_expr(bits))
    return value if dtype == u else Reinterpret(dtype, u, value)


class ElementSide:
    """An operand of an element-wise tile operation: its extent, `load(idx)`, `stores(idx,
    value, loc)`, and a key that is equal for the same elements."""

    def __init__(self, extent, load, stores, key):
        self.extent, self.load, self.stores, self.key = extent, load, stores, key


@dataclass(frozen=True)
class Hidden:
    """A GM buffer of the kernel that is not a parameter the caller passes: `base` is None for
    T.alloc_global (zeroed per call), else the parameter it views."""

    buffer: Buffer
    base: Buffer | None = None


class Views:
    def hidden_list(self) -> list:
        """The Hidden GM buffers of the kernel so far (shared with inlined helpers)."""
        if not hasattr(self, "hidden_params"):
            self.hidden_params = []
        return self.hidden_params

    def alloc_global(self, name: str, call: ast.Call) -> list:
        """T.alloc_global(shape, dtype), and TVM's T.alloc_buffer(shape, dtype) in its default
        scope "global" (a GM workspace); alloc_buffer in an on-chip scope is an error."""
        args = [self.eval(a) for a in call.args]
        kw = {k.arg: self.eval(k.value) for k in call.keywords}
        scope = kw.pop("scope", args.pop(2) if len(args) > 2 else "global")
        if scope != "global":
            raise self.error(call, f"T.alloc_buffer in scope {scope!r} is not supported; write "
                                   "T.alloc_shared / T.alloc_fragment for on-chip tiles")
        shape = kw.pop("shape", args[0] if args else None)
        dtype = kw.pop("dtype", args[1] if len(args) > 1 else None)
        if shape is None or dtype is None or kw or len(args) > 2:
            raise self.error(call, "T.alloc_global(shape, dtype) takes a shape and a dtype")
        buf = Buffer(self.fresh_buffer_name(name), self.const_shape(shape, call),
                     self.dtype(dtype, call), "global")
        self.hidden_list().append(Hidden(buf))
        self.bind(name, buf)
        return []

    def kept_tiles(self, grid, names):
        """sync_all.split_launch's `keep` for an is_npu launch: a hidden GM buffer
        [blocks, 2 AIVs, *shape] for a UB tile whose value crosses a T.sync_all."""
        def keep(name, shape, dtype):
            buf = Buffer(self.fresh_buffer_name(f"{name}_across_sync"), (grid[0], 2, *shape),
                         dtype, "global")
            self.hidden_list().append(Hidden(buf))
            return buf
        keep.cid, keep.vid = Var(names[0]), Var(names[1])
        return keep

    def const_shape(self, shape, call) -> tuple:
        shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
        shape = tuple(self.resolved(d, call) for d in shape)
        for d in shape:
            if not isinstance(d, int) or isinstance(d, bool) or d <= 0:
                raise self.error(call, f"shapes must be positive constant ints, got {show(d)}")
        return shape

    def gm_view(self, name: str, base: Buffer, shape, dtype, call) -> list:
        """`name` = a view of GM tensor `base` with another shape (and maybe dtype); of an
        on-chip tile: a TileView (same dtype)."""
        if isinstance(base, TileView):
            base = base.base
        if base.scope not in GM_SCOPES:
            shape = self.const_shape(shape, call)
            dt = self.dtype(dtype, call) if dtype is not None else base.dtype
            self.check_tile_view(base, shape, dt, call)
            self.bind(name, TileView(base, shape, None if dt == base.dtype else dt))
            return []
        for h in self.hidden_list():
            if h.buffer == base:
                if h.base is None:
                    raise self.error(call, "a view of a T.alloc_global buffer is not supported; "
                                           "allocate it with the shape you need")
                base = h.base  # a view of a view views the parameter
        shape = self.const_shape(shape, call)
        dt = self.dtype(dtype if dtype is not None else base.dtype, call)
        n_new = dtypes.itemsize(dt)
        for d in shape:
            n_new *= d
        n_old = base.numel * dtypes.itemsize(base.dtype)
        if n_new != n_old:
            raise self.error(call, f"a view of '{base.name}' {list(base.shape)} {base.dtype} "
                                   f"({n_old} bytes) as {list(shape)} {dt} has {n_new} bytes")
        buf = Buffer(self.fresh_buffer_name(name), shape, dt, "global")
        self.hidden_list().append(Hidden(buf, base))
        self.bind(name, buf)
        return []

    def check_tile_view(self, base: Buffer, shape: tuple, dt: str, call):
        """A view of tile `base` as `shape` `dt` covers its bytes exactly, and a dtype change
        splits or joins whole elements of at most 4 bytes."""
        n = dtypes.itemsize(dt)
        for d in shape:
            n *= d
        have = base.numel * dtypes.itemsize(base.dtype)
        if n != have:
            what = "the element counts differ" if dt == base.dtype else \
                f"{have} bytes as {n} bytes"
            raise self.error(call, f"a view of tile '{base.name}' {list(base.shape)} "
                                   f"{base.dtype} as {list(shape)} {dt}: {what}")
        if dt == base.dtype:
            return
        sizes = sorted((dtypes.itemsize(dt), dtypes.itemsize(base.dtype)))
        if "bool" in (dt, base.dtype) or sizes[1] > 4 or sizes[1] % sizes[0]:
            raise self.error(call, f"a view of tile '{base.name}' ({base.dtype}) as {dt} is "
                                   "not supported: views between dtypes of 1, 2 or 4 bytes "
                                   "(not bool) are; T.cast the values into a tile of the "
                                   "other dtype")

    def view_assign(self, name: str, value, call) -> list | None:
        """`x = T.Tensor(shape, dtype, buf.data)`: a view; None when `value` is not one."""
        if isinstance(value, T_module.TensorType) and isinstance(value.data, BufferData):
            return self.gm_view(name, value.data.buffer, value.shape, value.dtype, call)
        return None

    def reshape_call(self, name: str, call: ast.Call) -> list:
        a = self.args(call, ["buffer", "shape", "dtype"], {"dtype": None})
        base = self.eval(a["buffer"])
        if isinstance(base, Load) and base.buffer.scope == "var":
            base = base.buffer
        if isinstance(base, Int4Buffer):  # a view of its bytes (two values each, packed)
            if "dtype" not in a or self.eval(a["dtype"]) == "int4":
                raise self.error(call, f"a view or reshape of T.int4 buffer '{base.name}' "
                                       f"{list(base.shape)} views its bytes (two values a byte "
                                       f"along the last dim): give a dtype of 1, 2 or 4 bytes, "
                                       f"e.g. T.view({base.name}, {list(base.packed.shape)}, "
                                       f"\"int8\")")
            base = base.packed
        if not isinstance(base, (Buffer, TileView)):
            raise self.error(a["buffer"], f"expected a buffer, got {show(base)}")
        dtype = self.eval(a["dtype"]) if "dtype" in a else None
        return self.gm_view(name, base, self.eval(a["shape"]), dtype, call)

    def inline_view(self, call: ast.Call):
        """`T.reshape(x, shape)` / `T.view(x, shape, dtype)` used as a value
        (`T.copy(T.reshape(y, (bm, g, q)), O3[r, 0, 0])`): the view that `v = T.reshape(...)`
        would name (one per call site: a GM view is one hidden parameter however often the
        expression is evaluated)."""
        made = vars(self).setdefault("inline_views", {})
        if id(call) not in made:
            name = self.fresh_var("view")
            self.reshape_call(name, call)
            made[id(call)] = self.scopes[-1].pop(name)
        return made[id(call)]

    def view_load(self, n: ast.Subscript, view: TileView):
        return view.load(self.view_indices(n, view))

    def view_store(self, target: ast.Subscript, view: TileView, value, node) -> list:
        """`view[i, j] = value`: the stores into the viewed tile. A store into a narrower
        view rewrites part of a tile element, which the lanes of a T.Parallel map would race
        on (two lanes, one element)."""
        if view.dtype is not None and self.parallel_depth and \
                dtypes.itemsize(view.dtype) < dtypes.itemsize(view.base.dtype):
            raise self.error(target, f"a store into '{view.base.name}' ({view.base.dtype}) "
                                     f"through its {view.dtype} view inside T.Parallel writes "
                                     "part of an element, which other lanes share; store "
                                     f"through a view of {view.base.dtype} or a wider dtype, "
                                     "or in a T.serial loop")
        return view.stores(self.view_indices(target, view), value, self.loc(node))

    def view_indices(self, n: ast.Subscript, view: TileView) -> tuple:
        return self.element_indices(n, view.shape, f"a view of tile '{view.base.name}' as "
                                                   f"{list(view.shape)}")

    def element_indices(self, n: ast.Subscript, shape: tuple, what: str) -> tuple:
        """The indices of `x[i, j]` where x (`what`) is accessed element by element only."""
        nodes = n.slice.elts if isinstance(n.slice, ast.Tuple) else [n.slice]
        if any(isinstance(x, ast.Slice) for x in nodes) or len(nodes) != len(shape):
            raise self.error(n, f"{what} is indexed element by element with {len(shape)} "
                                "indices")
        return tuple(self.eval(x) for x in nodes)

    def whole_view(self, node):
        """The TileView a T.copy operand names as a whole, when its shape is not its tile's
        (`x = T.reshape(x3, (bm, g * q))`, then `T.copy(x, O[r, 0])`); else None."""
        if isinstance(node, ast.Subscript):
            return None
        v = self.eval(node)
        if isinstance(v, TileView) and v.dtype is None and tuple(v.shape) != tuple(v.base.shape):
            return v
        return None

    def element_side(self, node) -> "ElementSide":
        """A tile operand accessed element by element (T.cumsum): a whole reshaped view
        through its element accesses, else the region `node` names."""
        view = self.whole_view(node)
        if view is not None:
            return ElementSide(tuple(view.shape), view.load, view.stores, view)
        r = self.full_region(node)

        def at(idx):
            return tuple(as_expr(binop("+", s, i)) for s, i in zip(r.start, idx))
        return ElementSide(tuple(r.extent), lambda idx: Load(r.buffer, at(idx)),
                           lambda idx, v, loc: [Store(r.buffer, at(idx), as_expr(v), loc)], r)

    def view_copy(self, src_node, dst_node, call) -> list:
        """T.copy to or from a whole reshaped tile: a map over the view's elements (they are
        not a box of the tile), the other side a region as in any copy; GM elements outside
        the tensor are neither stored nor read (read as 0), as a clipped copy does:

            x = T.reshape(x3, (4, 24))
            T.copy(x, O[r, 0])        ->   for i, j in Parallel(4, 24):
                                                O[r + i, j] = x3[i, j // 8, j % 8]
        """
        from .safe_access import guard_global
        loc = self.loc(call)
        views = [self.whole_view(src_node), self.whole_view(dst_node)]
        ends = []
        for view, node in zip(views, (src_node, dst_node)):
            if view is None:
                ends.append(self.region(node, True))
            else:
                fake = Buffer(view.base.name, tuple(view.shape), view.base.dtype, view.base.scope)
                ends.append((fake, tuple(const(0) for _ in view.shape), list(view.shape)))
        src = self.complete(ends[0], ends[1], src_node)
        dst = self.complete(ends[1], ends[0], dst_node)
        s_dims = [d for d, e in enumerate(src.extent) if e != 1]
        d_dims = [d for d, e in enumerate(dst.extent) if e != 1]
        if [src.extent[d] for d in s_dims] != [dst.extent[d] for d in d_dims]:
            raise self.error(call, f"T.copy of a reshaped tile needs regions of one shape; "
                                   f"got {list(src.extent)} -> {list(dst.extent)}")
        names = tuple(self.fresh_var("v") for _ in d_dims)

        def at(r, dims):
            pos = {d: Var(n) for d, n in zip(dims, names)}
            return tuple(as_expr(binop("+", x, pos[d]) if d in pos else x)
                         for d, x in enumerate(r.start))

        sidx, didx = at(src, s_dims), at(dst, d_dims)
        value = views[0].load(sidx) if views[0] is not None else Load(src.buffer, sidx)
        if src.buffer.dtype != dst.buffer.dtype:
            value = Cast(dst.buffer.dtype, value)
        ranges = dict(self.var_ranges)
        ranges.update({n: (0, dst.extent[d] - 1) for n, d in zip(names, d_dims)})
        if views[1] is not None:
            stores = views[1].stores(didx, value, loc)
        else:
            stores = [Store(dst.buffer, didx, as_expr(value), loc)]
        stores = tuple(guard_global(st, ranges) for st in stores)
        return [For(names, tuple(const(dst.extent[d]) for d in d_dims), "parallel", stores, 0,
                    loc)]

    def view_reduce(self, kind: str, view: TileView, out_node, dim, clear: bool, call) -> list:
        """T.reduce_*(view, out, dim): a serial loop over the reduced dim of maps over the
        others (the view's elements are not a box of its base)."""
        out = self.full_region(out_node)
        rank = len(view.shape)
        dim %= rank
        keep = [d for d in range(rank) if d != dim]
        if tuple(e for e in out.extent if e != 1) != tuple(view.shape[d] for d in keep
                                                          if view.shape[d] != 1):
            raise self.error(call, f"T.reduce_{kind} of a {list(view.shape)} view along dim "
                                   f"{dim} into {list(out.extent)}")
        # the map runs over the kept dims of more than one element (a dim of one is index 0,
        # so that every map variable indexes the store); over one element if there is none
        loop = [k for k in keep if view.shape[k] != 1] or keep[:1]
        names = tuple(self.fresh_var("i") for _ in loop)
        r = self.fresh_var("r")
        od = [d for d, e in enumerate(out.extent) if e != 1] or [0]
        o_at = {d: Var(n) for d, n in zip(od, names)}
        oidx = tuple(as_expr(binop("+", s, o_at[d]) if d in o_at else s)
                     for d, s in enumerate(out.start))
        vidx = [const(0)] * rank
        for k, n in zip(loop, names):
            vidx[k] = Var(n)
        vidx[dim] = Var(r)
        value = view.load(tuple(vidx))
        if kind in ("abssum", "absmax"):
            value = Call("abs", (value,))
        old = Load(out.buffer, oidx)
        op = {"sum": "+", "abssum": "+"}.get(kind)
        new = binop(op, old, value) if op else Call("max" if "max" in kind else "min",
                                                     (old, as_expr(value)))
        loc = self.loc(call)
        exts = tuple(const(view.shape[k]) for k in loop)
        stmts = []
        if clear:
            init = {"sum": 0.0, "abssum": 0.0, "max": float("-inf"), "absmax": 0.0,
                    "min": float("inf")}[kind]
            if dtypes.is_int(out.buffer.dtype):
                init = {0.0: 0, float("-inf"): -2**31, float("inf"): 2**31 - 1}[init]
            stmts.append(For(names, exts, "parallel",
                             (Store(out.buffer, oidx, as_expr(init), loc),), 0, loc))
        body = For(names, exts, "parallel", (Store(out.buffer, oidx, as_expr(new), loc),), 0, loc)
        stmts.append(For((r,), (const(view.shape[dim]),), "serial", (body,), 0, loc))
        return stmts

    # ---------------------------------------------------------------------------- statements

    def transposed_copy(self, src_node, dst_node, call) -> list:
        """T.copy(src, dst, transpose=True): dst = src^T (2-D tiles, extent-1 dims aside).
        L1 -> L0A/L0B (expert mode) is one MTE1 load with the transpose on (`Copy.transpose`);
        elsewhere a T.Parallel map with swapped indices, GM sides staged through a tile:

            copy(A[r0 +: m, c0 +: n], t)  ;  for i, j in Parallel(n, m): dst[j0 + i, i0 + j] = t[j, i]
        """
        src, dst = self.region(src_node), self.region(dst_node)
        loc = self.loc(call)

        def fill(mine, other, node):
            if all(e is not None for e in mine[2]):
                return Region(mine[0], mine[1], tuple(mine[2]))
            if any(e is None for e in other[2]):
                raise self.error(node, "one side of T.copy must give its extent (a buffer or a "
                                       "slice)")
            sq = list(other[2])  # its last two dims, reversed (a (1, n) row for an (n, 1) tile)
            while len(sq) > 2 and sq[0] == 1:
                sq.pop(0)
            n = len(mine[2])
            if len(sq) != 2 or n < 2:
                raise self.error(node, "T.copy(transpose=True) copies 2-D tiles")
            return Region(mine[0], mine[1], (1,) * (n - 2) + tuple(sq[::-1]))

        s, d = fill(src, dst, src_node), fill(dst, src, dst_node)
        s_sq = tuple(e for e in s.extent if e != 1)
        if len(s_sq) > 2 or tuple(e for e in d.extent if e != 1) != s_sq[::-1]:
            raise self.error(call, f"T.copy(transpose=True) takes a 2-D tile and gives its "
                                   f"transpose; got {list(s.extent)} -> {list(d.extent)}")
        if len(s_sq) < 2:  # a row or a column (or one element): the same elements in order
            return [Copy(s, d, loc)]
        if (s.buffer.scope, d.buffer.scope) in (("L1", "L0A"), ("L1", "L0B")):
            return [Copy(s, d, loc, transpose=True)]
        out = []
        if s.buffer.scope in GM_SCOPES:  # stage the GM region in a tile first
            t = self.stage_tile(s_sq, s.buffer.dtype, call)
            out.append(Copy(s, Region.full(t), loc))
            s = Region.full(t)
        final = None
        if d.buffer.scope in GM_SCOPES:
            t = self.stage_tile(s_sq[::-1], d.buffer.dtype, call)
            final = Copy(Region.full(t), d, loc)
            d = Region.full(t)
        sd = [k for k, e in enumerate(s.extent) if e != 1]
        dd = [k for k, e in enumerate(d.extent) if e != 1]
        i, j = self.fresh_var("i"), self.fresh_var("j")  # i over src rows, j over src columns
        s_at = {sd[0]: Var(i), sd[1]: Var(j)}
        d_at = {dd[0]: Var(j), dd[1]: Var(i)}
        sidx = tuple(as_expr(binop("+", x, s_at[k]) if k in s_at else x)
                     for k, x in enumerate(s.start))
        didx = tuple(as_expr(binop("+", x, d_at[k]) if k in d_at else x)
                     for k, x in enumerate(d.start))
        value = Load(s.buffer, sidx)
        if s.buffer.dtype != d.buffer.dtype:
            value = Cast(d.buffer.dtype, value)
        out.append(For((i, j), (const(s_sq[0]), const(s_sq[1])), "parallel",
                       (Store(d.buffer, didx, value, loc),), 0, loc))
        return out + ([final] if final is not None else [])

    def stage_tile(self, shape, dtype: str, call) -> Buffer:
        buf = Buffer(self.fresh_buffer_name("transpose_tile"), tuple(shape), dtype, "fragment")
        self.hoisted_allocs[buf.name] = Alloc(buf, None, self.loc(call))
        return buf

    def op_reinterpretcast(self, call) -> list:
        """tilelang-ascend's T.reinterpretcast(dst, src, "int32_t"): dst holds src's bits read
        as dst's dtype (a bit copy at this point; the two tiles do not alias afterwards)."""
        a = self.args(call, ["dst", "src", "casttype"], {"casttype": None})
        dst, src = self.full_region(a["dst"]), self.full_region(a["src"])
        if "casttype" in a:
            ct = self.eval(a["casttype"])
            want = _C_TYPES.get(ct, dtypes.canonical(ct) if isinstance(ct, str) else None)
            if want is None or dtypes.itemsize(want) != dtypes.itemsize(dst.buffer.dtype):
                raise self.error(a["casttype"], f"cast type {ct!r} does not match the "
                                                f"destination's {dst.buffer.dtype}")
        if dtypes.itemsize(dst.buffer.dtype) != dtypes.itemsize(src.buffer.dtype) or \
                tuple(e for e in dst.extent if e != 1) != tuple(e for e in src.extent if e != 1):
            raise self.error(call, f"T.reinterpretcast between {src.buffer.dtype} "
                                   f"{list(src.extent)} and {dst.buffer.dtype} "
                                   f"{list(dst.extent)}: only tiles of one shape and element "
                                   "size are supported here; T.cast values, or keep the data "
                                   "in one dtype")
        names = tuple(self.fresh_var("i") for _ in region_dims(dst))
        sidx = region_index(src, names)[0]
        return [self.fill_map(dst, reinterpret(Load(src.buffer, sidx), dst.buffer.dtype, self,
                                               call), call, names)]

    def op_im2col(self, call) -> list:
        """T.im2col(img, col, nhw_step, c_step, kernel, stride, dilation, pad): `col` (M, K) holds
        rows nhw_step*M .. of the NHWC image's patch matrix (row = (n, oh, ow), column =
        (kh, kw, c), c fastest), zeros outside the image (padding) and beyond its rows/columns."""
        a = self.args(call, ["img", "col", "nhw_step", "c_step", "kernel", "stride", "dilation",
                             "pad"], {"stride": None, "dilation": None, "pad": None})
        img, col = self.eval(a["img"]), self.eval(a["col"])
        if not (isinstance(img, Buffer) and len(img.shape) == 4):
            raise self.error(a["img"], "T.im2col takes an NHWC image tensor (4-D)")
        if not (isinstance(col, Buffer) and len(col.shape) == 2):
            raise self.error(a["col"], "T.im2col writes a 2-D tile (rows: output pixels, "
                                       "columns: kernel taps x channels)")
        ks = self.int_arg(a["kernel"])
        s = self.int_arg(a["stride"]) if "stride" in a else 1
        dil = self.int_arg(a["dilation"]) if "dilation" in a else 1
        pad = self.int_arg(a["pad"]) if "pad" in a else 0
        n_img, h, w, c = img.shape
        oh = (h + 2 * pad - dil * (ks - 1) - 1) // s + 1
        ow = (w + 2 * pad - dil * (ks - 1) - 1) // s + 1
        bm, bk = col.shape
        i, j = self.fresh_var("m"), self.fresh_var("k")
        row = binop("+", binop("*", self.eval(a["nhw_step"]), bm), Var(i))
        kk = binop("+", binop("*", self.eval(a["c_step"]), bk), Var(j))
        n = binop("//", row, oh * ow)
        p = binop("%", row, oh * ow)
        y = binop("-", binop("+", binop("*", binop("//", p, ow), s),
                             binop("*", binop("//", kk, ks * c), dil)), pad)
        x = binop("-", binop("+", binop("*", binop("%", p, ow), s),
                             binop("*", binop("%", binop("//", kk, c), ks), dil)), pad)
        ch = binop("%", kk, c)
        inside = binop("and", binop("and", binop("<", row, n_img * oh * ow),
                                    binop("<", kk, ks * ks * c)),
                       binop("and", binop("and", binop(">=", y, 0), binop("<", y, h)),
                             binop("and", binop(">=", x, 0), binop("<", x, w))))
        from .dialect import select
        zero = 0 if dtypes.is_int(col.dtype) else 0.0
        value = select(inside, Load(img, tuple(as_expr(v) for v in (n, y, x, ch))), zero)
        loc = self.loc(call)
        return [For((i, j), (const(bm), const(bk)), "parallel",
                    (Store(col, (Var(i), Var(j)), as_expr(value), loc),), 0, loc)]
