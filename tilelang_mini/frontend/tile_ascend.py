"""tilelang-ascend's own statements (a KernelBuilder part): the `T.tile.*` vector operations,
`T.gemm_v0`/`T.mma`, `T.barrier_all`, and GEMMs whose accumulator clear is decided at run time.

A `T.tile` operation on a tile or a region (`acc[h_i, :]`) is an elementwise map over the
destination's extent, the shape TileLang's own `T.Parallel` maps take:

    T.tile.add(c, a[r, :], 1.0)    ->   for t0 in parallel(64):  c[t0] = a[r, t0] + 1.0
    T.tile.broadcast(d, s)         ->   for t0, t1 in parallel(16, 64):  d[t0, t1] = s[t0]
"""
from __future__ import annotations

import ast

from ..ir.nodes import Buffer, Call, Cast, Const, For, Gemm, If, Load, SetFlag, Store, WaitFlag
from ..errors import CompileError
from ..ir import dtypes
from .common import show
from .dialect import round_int, select, sigmoid, tanh
from .exprs import as_expr, binop, const, is_ir
from .tile_brcb import TileBrcb
from .tile_sort import SORT_OPS, TileSort

_BINARY = {"add": "+", "sub": "-", "mul": "*", "div": "/"}
_CMP = {"EQ": "==", "NE": "!=", "GT": ">", "GE": ">=", "LT": "<", "LE": "<="}
_UNARY = {
    "exp": lambda x: Call("exp", (x,)), "ln": lambda x: Call("log", (x,)),
    "abs": lambda x: Call("abs", (x,)), "sqrt": lambda x: Call("sqrt", (x,)),
    "rsqrt": lambda x: Call("rsqrt", (x,)), "relu": lambda x: Call("max", (x, Const(0.0, "float32"))),
    "reciprocal": lambda x: binop("/", 1.0, x), "sigmoid": sigmoid, "tanh": tanh,
    "silu": lambda x: binop("*", x, sigmoid(x)),
    "sin": lambda x: Call("sin", (x,)), "cos": lambda x: Call("cos", (x,)),
}
# The cores' pipes a full barrier orders (T.barrier_all inside a T.Scope).
_CORE_PIPES = {"C": ("MTE2", "MTE1", "M", "FIX", "S"), "V": ("MTE2", "V", "MTE3", "S")}
BARRIER_EVENT = 7  # the event id T.barrier_all uses on each pipe pair (set and waited at once)
GEMM_EVENT = 6  # the event id of the L0 loads a gemm_v0 on L1 operands implies (expert mode)
L0_TILE = 16 * 1024  # bytes of one implied L0A/L0B tile (a quarter of the 64 KiB L0A/L0B)


def full_barrier(core: str, loc) -> list:
    """T.barrier_all in a T.Scope(core): every pipe of the core waits for every other's earlier
    work (a set_flag/wait_flag pair per ordered pipe pair, event BARRIER_EVENT)."""
    pipes = _CORE_PIPES[core]
    return [f(src, dst, BARRIER_EVENT, loc) for src in pipes for dst in pipes if src != dst
            for f in (SetFlag, WaitFlag)]


_UNSUPPORTED = {
    "gatherb": "T.Parallel with loaded indices",
    "sort32": "the kernel library's sort", "init_sort_buf": "the kernel library's sort",
    "transpose": "T.Parallel with swapped indices (d[i, j] = s[j, i])",
    "wholereducemax": "T.reduce_max",
    "wholereducemin": "T.reduce_min", "wholereducesum": "T.reduce_sum",
    "block_reduce_max": "T.reduce_max", "block_reduce_min": "T.reduce_min",
    "block_reduce_sum": "T.reduce_sum",
    "gelu": "T.tile.mul/exp spelled out",
}


_BITWISE = {"bitwise_and": "bitwise_and", "bitwise_or": "bitwise_or",
            "bitwise_xor": "bitwise_xor", "bitwise_not": "bitwise_not",
            "bitwise_lshift": "shift_left", "bitwise_rshift": "shift_right"}


def rint(x):
    """x rounded to the nearest integral value, ties to even (a float expression)."""
    return round_int(x, ties_even=True)


class TileAscend(TileSort, TileBrcb):
    # ----------------------------------------------------------------------------- T.tile.*

    def tile_op(self, name: str, call: ast.Call) -> list:
        if name in _UNSUPPORTED:
            raise self.error(call, f"T.tile.{name} is not supported; write {_UNSUPPORTED[name]}")
        if name in SORT_OPS:
            return self.tile_sort_op(name, call)
        if name in ("atomic_add", "atomic_max", "atomic_min"):  # T.tile.atomic_add(C[..], C_L0)
            return self.atomic(name[len("atomic_"):], call)
        a = call.args
        kw = {k.arg: k.value for k in call.keywords}
        if name in _BINARY or name in ("max", "min", "adds", "muls", "maxs", "mins"):
            self.nargs(call, 3, name)
            op = {"adds": "add", "muls": "mul", "maxs": "max", "mins": "min"}.get(name, name)
            return self.tile_map(a[0], [a[1], a[2]], lambda x, y: self.tile_binary(op, x, y, call),
                                 call, scalar_last=True)
        if name in _UNARY:
            self.nargs(call, 2, name)
            return self.tile_map(a[0], [a[1]], _UNARY[name], call)
        if name == "fill" and len(a) > 1 and self.is_region_node(a[1]):  # from a (1,) tile
            return self.tile_map(a[0], [a[1]], lambda x: x, call, scalar_last=True)
        if name in ("fill", "clear"):
            value = 0 if name == "clear" else self.value_arg(a[1])
            return self.tile_map(a[0], [], lambda: value, call)
        if name == "cast":
            mode = self.eval(a[2]) if len(a) > 2 else kw and self.eval(kw.get("mode")) or "CAST_NONE"
            count = a[3] if len(a) > 3 else (kw or {}).get("count")
            partial = self.cast_prefix(a[0], a[1], count, mode, call)
            if partial is not None:
                return partial
            return self.tile_map(a[0], [a[1]], lambda x: self.rounded(x, mode, a[0], call), call)
        if name == "axpy":  # dst = dst + src * alpha
            self.nargs(call, 3, name)
            alpha = self.value_arg(a[2])
            return self.tile_map(a[0], [a[0], a[1]], lambda d, x: binop("+", d, binop("*", x, alpha)),
                                 call)
        if name == "mul_add_dst":  # dst = src0 * src1 + dst
            return self.tile_map(a[0], [a[0], a[1], a[2]],
                                 lambda d, x, y: binop("+", binop("*", x, y), d), call)
        if name == "leaky_relu":
            alpha = self.value_arg(a[2])
            return self.tile_map(a[0], [a[1]], lambda x: select(
                binop(">=", x, 0.0), x, binop("*", x, alpha)), call)
        if name in ("clamp", "clamp_max", "clamp_min"):
            lo = self.value_arg(a[2]) if name in ("clamp", "clamp_min") else None
            hi = self.value_arg(a[3] if name == "clamp" else a[2]) if name != "clamp_min" else None

            def clamp(x):
                x = Call("max", (x, as_expr(lo))) if lo is not None else x
                return Call("min", (x, as_expr(hi))) if hi is not None else x
            return self.tile_map(a[0], [a[1]], clamp, call)
        if name == "compare":  # dst (bool mask) = src0 <mode> src1
            self.nargs(call, 3, name)
            mode = self.eval(a[3] if len(a) > 3 else kw["mode"])
            if mode not in _CMP:
                raise self.error(call, f"compare mode must be one of {', '.join(_CMP)}, got {mode!r}")
            if self.packed_mask(a[0], a[1]):  # Ascend's form: one bit per element
                return self.compare_packed(a[0], a[1], a[2], _CMP[mode], call)
            return self.tile_map(a[0], [a[1], a[2]], lambda x, y: binop(_CMP[mode], x, y), call,
                                 scalar_last=True)
        if name == "select":  # dst = mask ? src0 : src1
            self.nargs(call, 4, name)
            if self.packed_mask(a[1], a[0]):
                return self.select_packed(a[0], a[1], a[2], a[3], call)
            return self.tile_map(a[0], [a[1], a[2], a[3]], lambda m, x, y: select(
                binop("!=", m, 0) if not self.is_bool(m) else m, x, y), call, scalar_last=True)
        if name in _BITWISE:
            if not dtypes.is_int(self.region(a[0])[0].dtype):
                raise self.error(a[0], f"T.tile.{name} works on integer tiles, got "
                                       f"{self.region(a[0])[0].dtype}")
            fn = _BITWISE[name]
            if name == "bitwise_not":
                return self.tile_map(a[0], [a[1]], lambda x: Call(fn, (as_expr(x),)), call)
            self.nargs(call, 3, name)
            return self.tile_map(a[0], [a[1], a[2]], lambda x, y: Call(fn, (as_expr(x),
                                                                             as_expr(y))),
                                 call, scalar_last=True)
        if name == "round":  # to the nearest integral value, ties to even (AscendC Round)
            return self.tile_map(a[0], [a[1]], rint, call)
        if name in ("createvecindex", "arith_progression"):
            first = self.value_arg(a[1])
            step = self.value_arg(a[2]) if name == "arith_progression" else 1
            return self.tile_index(a[0], first, step, call)
        if name == "broadcast":
            return self.tile_broadcast(a[0], a[1], self.eval(kw["axis"]) if "axis" in kw else None,
                                       call)
        if name in ("brcb", "brcb_experiment"):  # tile_brcb.py
            return self.tile_brcb(call)
        if name.startswith("row_expand_"):  # also the *_experiment forms (tile_brcb.py)
            op = {"mul": "*", "sub": "-", "div": "/"}[name.split("_")[2]]
            return self.tile_row_expand(a[0], a[1], a[2], op, call)
        raise self.error(call, f"T.tile.{name} is not supported")

    # -------------------------------------------------------------- packed compare masks

    def packed_mask(self, mask_node, data_node) -> bool:
        """Whether `mask_node` is a bit mask of `data_node`'s elements, as Ascend's Compare
        writes and Select reads it: an 8-bit integer tile with one bit per element (element
        8*b + k is bit k of byte b, the least significant bit first). A 1-D mask tile may have
        more bytes than the elements need (tilelang-ascend's bench_sfa: a 32-byte mask for 64
        scores, sized for its largest block): only the leading bytes are written and read."""
        if not (self.is_region_node(mask_node) and self.is_region_node(data_node)):
            return False
        mbuf, _, mext, _ = self.tile_dst(mask_node)
        _, _, dext, _ = self.tile_dst(data_node)
        m, n = self.numel(mext), self.numel(dext)
        return mbuf.dtype in ("uint8", "int8") and (
            m * 8 == n or (len(mext) == 1 and n % 8 == 0 and n // 8 < m < n))

    def cast_prefix(self, dst_node, src_node, count_node, mode, call):
        """T.tile.cast(dst, src, mode, count) with tiles of different sizes: the first `count`
        elements (row-major, each tile flattened) are converted (xllm's rope: the 64 gathered
        cos/sin values of a 256-wide staging tile). None when the tiles have one size."""
        if count_node is None or not self.is_region_node(src_node):
            return None
        count = self.eval(count_node)
        _, dn = self.flat_at(dst_node)
        src, sn = self.flat_at(src_node)
        if dn == sn or type(count) is not int:
            return None
        if not 0 < count <= min(dn, sn):
            raise self.error(call, f"T.tile.cast of {count} elements: dst holds {dn} and src "
                                   f"{sn}")
        buf, starts, ext, dims = self.tile_dst(dst_node)
        name = self.fresh_var("t")
        f = self.var(name)
        full, rest = list(starts), f
        for d, e in reversed(list(zip(dims, ext))):
            full[d] = binop("+", starts[d], binop("%", rest, e) if d != dims[0] else rest)
            rest = binop("//", rest, e)
        value = self.rounded(src(f), mode, dst_node, call)
        store = Store(buf, tuple(as_expr(i) for i in full), as_expr(value), self.loc(call))
        return [For((name,), (const(count),), "parallel", (store,), 0, self.loc(call))]

    def flat_at(self, node):
        """(function of a flat element index -> the element, element count) of a region,
        row-major over its non-unit dims."""
        buf, starts, ext, dims = self.tile_dst(node)

        def at(f):
            full, rest = list(starts), f
            for d, e in reversed(list(zip(dims, ext))):
                full[d] = binop("+", starts[d], binop("%", rest, e) if d != dims[0] else rest)
                rest = binop("//", rest, e)
            return Load(buf, tuple(as_expr(i) for i in full))
        return at, self.numel(ext)

    def map_flat_index(self, names, extent):
        flat, stride = 0, 1
        for n, e in reversed(list(zip(names, extent))):
            flat = binop("+", flat, binop("*", self.var(n), stride))
            stride *= e
        return flat

    def compare_packed(self, dst_node, src_node, other_node, op, call) -> list:
        """dst byte b = sum over k < 8 of (src[8b + k] op other[8b + k]) << k.

            T.tile.compare(m, x, 0.5, "GT")  (x: 64 float, m: 8 uint8)  ->
            for t0 in parallel(8):  m[t0] = cast(select(x[t0*8] > 0.5, 1, 0) + ... +
                                                 select(x[t0*8 + 7] > 0.5, 128, 0), "uint8")"""
        buf, starts, extent, dims = self.tile_dst(dst_node)
        src, n = self.flat_at(src_node)
        if self.numel(extent) * 8 > n:  # a longer 1-D mask: its leading bytes
            extent = (n // 8,)
        if self.is_region_node(other_node):
            other, _ = self.flat_at(other_node)
        else:
            v = self.value_arg(other_node)
            other = lambda f: v  # noqa: E731
        names = tuple(self.fresh_var("t") for _ in extent)
        byte = self.map_flat_index(names, extent)
        total = None
        for k in range(8):
            f = binop("+", binop("*", byte, 8), k)
            bit = select(binop(op, src(f), other(f)), const(1 << k), const(0))
            total = bit if total is None else binop("+", total, bit)
        full = list(starts)
        for d, n in zip(dims, names):
            full[d] = binop("+", starts[d], self.var(n))
        store = Store(buf, tuple(as_expr(i) for i in full), Cast(buf.dtype, as_expr(total)),
                      self.loc(call))
        return [For(names, tuple(const(e) for e in extent), "parallel", (store,), 0,
                    self.loc(call))]

    def select_packed(self, dst_node, mask_node, a_node, b_node, call) -> list:
        """dst[i] = a[i] if bit i of the packed mask is set else b[i] (a, b: tiles or scalars)."""
        buf, starts, extent, dims = self.tile_dst(dst_node)
        mask, _ = self.flat_at(mask_node)
        names = tuple(self.fresh_var("t") for _ in extent)
        f = self.map_flat_index(names, extent)
        byte = Cast("int32", as_expr(mask(binop("//", f, 8))))
        bit = Call("bitwise_and", (Call("shift_right", (as_expr(byte), as_expr(binop("%", f, 8)))),
                                   const(1)))
        srcs = []
        for node in (a_node, b_node):
            if self.is_region_node(node):
                srcs.append(self.tile_operand(node, extent, call, False))
            else:
                v = self.value_arg(node)
                srcs.append(lambda idx, v=v: v)
        idx = [self.var(n) for n in names]
        value = select(binop("!=", bit, 0), srcs[0](idx), srcs[1](idx))
        full = list(starts)
        for d, i in zip(dims, idx):
            full[d] = binop("+", starts[d], i)
        store = Store(buf, tuple(as_expr(i) for i in full), as_expr(value), self.loc(call))
        return [For(names, tuple(const(e) for e in extent), "parallel", (store,), 0,
                    self.loc(call))]

    def nargs(self, call, n, name):
        if len(call.args) < n:
            raise self.error(call, f"T.tile.{name} takes {n} arguments, got {len(call.args)}")

    @staticmethod
    def is_bool(e) -> bool:
        return isinstance(e, Load) and e.buffer.dtype == "bool" or \
            hasattr(e, "op") and e.op in ("<", "<=", ">", ">=", "==", "!=")

    def tile_binary(self, op, x, y, call):
        if op in _BINARY:
            return binop(_BINARY[op], x, y)
        return Call(op, (as_expr(x), as_expr(y)))

    def rounded(self, x, mode, node, call):
        """T.tile.cast's rounding modes (the store converts to the destination dtype)."""
        dst = self.region(node)[0]
        if mode in ("CAST_NONE", "CAST_ODD") or dtypes.is_float(dst.dtype) and mode == "CAST_RINT":
            return x
        floor = binop("//", x, 1.0)
        if mode == "CAST_FLOOR":
            r = floor
        elif mode == "CAST_CEIL":
            r = Call("neg", (binop("//", Call("neg", (as_expr(x),)), 1.0),))
        elif mode == "CAST_TRUNC":
            r = Cast("int32", as_expr(x))
        elif mode == "CAST_ROUND":  # half away from zero
            r = round_int(x, ties_even=False)
        elif mode == "CAST_RINT":  # half to even
            r = rint(x)
        else:
            raise self.error(call, f"unknown cast mode {mode!r}")
        return r

    def tile_operand(self, node, extent, call, scalar_ok):
        """A source of a tile map: (function of the loop indices), checking its extent."""
        if scalar_ok and not self.is_region_node(node):
            v = self.value_arg(node)
            return lambda idx: v
        buf, starts, ext = self.region(node)
        dims = [d for d, e in enumerate(ext) if e is None or e != 1] if any(
            e is not None for e in ext) else list(range(len(ext)))
        ext = [buf.shape[d] if e is None else e for d, e in enumerate(ext)]
        shape = [ext[d] for d in dims]
        if shape != list(extent):
            if not shape:  # a one-element tile (`total` of shape (1,)) is a scalar operand
                one = Load(buf, tuple(as_expr(i) for i in starts))
                return lambda idx: one
            if self.numel(shape) == self.numel(extent) and len(shape) == 1 and len(extent) > 1:
                return self.flat_operand(buf, starts, dims[0], extent)
            raise self.error(node, f"this operand's extent {tuple(shape)} differs from the "
                                   f"destination's {tuple(extent)}")

        def at(idx):
            full = list(starts)
            for d, i in zip(dims, idx):
                full[d] = binop("+", starts[d], i)
            return Load(buf, tuple(as_expr(i) for i in full))
        return at

    def flat_operand(self, buf, starts, dim, extent):
        def at(idx):
            flat, stride = 0, 1
            for i, e in reversed(list(zip(idx, extent))):
                flat = binop("+", flat, binop("*", i, stride))
                stride *= e
            full = list(starts)
            full[dim] = binop("+", starts[dim], flat)
            return Load(buf, tuple(as_expr(i) for i in full))
        return at

    @staticmethod
    def numel(shape):
        n = 1
        for s in shape:
            n *= s
        return n

    def is_region_node(self, node) -> bool:
        if isinstance(node, ast.Subscript):
            elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            base = self.eval(node.value)
            return isinstance(base, Buffer) and any(isinstance(e, ast.Slice) for e in elts)
        return isinstance(self.eval(node), Buffer)

    def tile_dst(self, node):
        buf, starts, ext = self.region(node)
        if all(e is None for e in ext):
            raise self.error(node, "the destination of a T.tile operation is a tile or a sliced "
                                   "region (acc[i, :]), not one element")
        dims = [d for d, e in enumerate(ext) if e != 1] or [len(ext) - 1]
        return buf, starts, [ext[d] for d in dims], dims

    def tile_map(self, dst_node, src_nodes, fn, call, scalar_last=False) -> list:
        buf, starts, extent, dims = self.tile_dst(dst_node)
        names = tuple(self.fresh_var("t") for _ in extent)
        idx = [const(0)] * 0 + [self.var(n) for n in names]
        srcs = [self.tile_operand(n, extent, call, scalar_last and k == len(src_nodes) - 1)
                for k, n in enumerate(src_nodes)]
        value = fn(*[s(idx) for s in srcs])
        full = list(starts)
        for d, i in zip(dims, idx):
            full[d] = binop("+", starts[d], i)
        store = Store(buf, tuple(as_expr(i) for i in full), as_expr(value), self.loc(call))
        return [For(names, tuple(const(e) for e in extent), "parallel", (store,), 0, self.loc(call))]

    @staticmethod
    def var(name):
        from ..ir.nodes import Var
        return Var(name)

    def tile_index(self, dst_node, first, step, call) -> list:
        buf, starts, extent, dims = self.tile_dst(dst_node)
        names = tuple(self.fresh_var("t") for _ in extent)
        idx = [self.var(n) for n in names]
        flat, stride = 0, 1
        for i, e in reversed(list(zip(idx, extent))):
            flat = binop("+", flat, binop("*", i, stride))
            stride *= e
        full = list(starts)
        for d, i in zip(dims, idx):
            full[d] = binop("+", starts[d], i)
        value = binop("+", first, binop("*", flat, step))
        store = Store(buf, tuple(as_expr(i) for i in full), as_expr(value), self.loc(call))
        return [For(names, tuple(const(e) for e in extent), "parallel", (store,), 0, self.loc(call))]

    def tile_broadcast(self, dst_node, src_node, axis, call) -> list:
        """dst[m, n] from src: a row vector (axis 0: src[j]) or a column (axis 1: src[i])."""
        buf, starts, extent, dims = self.tile_dst(dst_node)
        sbuf, sstarts, sext = self.region(src_node)
        sext = [sbuf.shape[d] if e is None else e for d, e in enumerate(sext)]
        sdims = [d for d, e in enumerate(sext) if e != 1] or [len(sext) - 1]
        n_src = self.numel([sext[d] for d in sdims])
        if len(extent) != 2:
            return self.tile_map(dst_node, [src_node], lambda x: x, call)
        m, n = extent
        if axis is None:
            axis = 0 if n_src == n and (n_src != m or len(sext) == 1 or sext[0] == 1) else 1
        if (axis == 0 and n_src != n) or (axis == 1 and n_src != m):
            raise self.error(call, f"cannot broadcast {n_src} elements over a {m}x{n} tile "
                                   f"along axis {axis}")
        names = (self.fresh_var("t"), self.fresh_var("t"))
        i, j = self.var(names[0]), self.var(names[1])
        k = j if axis == 0 else i
        sfull = list(sstarts)
        sfull[sdims[-1]] = binop("+", sstarts[sdims[-1]], k)
        full = list(starts)
        full[dims[0]], full[dims[1]] = binop("+", starts[dims[0]], i), binop("+", starts[dims[1]], j)
        store = Store(buf, tuple(as_expr(x) for x in full), Load(sbuf, tuple(as_expr(x) for x in sfull)),
                      self.loc(call))
        return [For(names, (const(m), const(n)), "parallel", (store,), 0, self.loc(call))]

    def tile_row_expand(self, dst_node, src_node, row_node, op, call) -> list:
        """dst[i, j] = src[i, j] op row[i] (one value per row)."""
        buf, starts, extent, dims = self.tile_dst(dst_node)
        if len(extent) < 2:  # a tile of one row or one column, (1, n) or (m, 1): its last two dims
            full = [buf.shape[d] if e is None else e for d, e in enumerate(self.region(dst_node)[2])]
            if len(full) >= 2 and all(e == 1 for e in full[:-2]):
                dims = [len(full) - 2, len(full) - 1]
                extent = [full[d] for d in dims]
        if len(extent) != 2:
            raise self.error(call, "row_expand operations take 2-D tiles")
        src = self.tile_operand(src_node, extent, call, False)
        rbuf, rstarts, rext = self.region(row_node)
        rdims = [d for d, e in enumerate(rext) if e is None or e != 1] or [len(rext) - 1]
        names = (self.fresh_var("t"), self.fresh_var("t"))
        i, j = self.var(names[0]), self.var(names[1])
        rfull = list(rstarts)
        rfull[rdims[0]] = binop("+", rstarts[rdims[0]], i)
        value = binop(op, src([i, j]), Load(rbuf, tuple(as_expr(x) for x in rfull)))
        full = list(starts)
        full[dims[0]], full[dims[1]] = binop("+", starts[dims[0]], i), binop("+", starts[dims[1]], j)
        store = Store(buf, tuple(as_expr(x) for x in full), as_expr(value), self.loc(call))
        return [For(names, tuple(const(e) for e in extent), "parallel", (store,), 0, self.loc(call))]

    # ------------------------------------------------------------------------------ GEMMs

    def gemm_with(self, call, names, flag_names, v0: bool = False) -> list:
        """A GEMM whose clear flag may be a run-time condition (`init=(k == 0)`): one GEMM per
        branch of an if, so each GEMM keeps a constant flag. `v0`: T.gemm_v0 (its flags on
        L1 operands in an expert scope: expert_l1_gemm)."""
        a = self.args(call, names, {n: None for n in names[3:]})
        regs = [self.full_region(a[n]) for n in "ABC"]
        trans = [self.bool_arg(a.get(n), False) for n in flag_names[:2]]
        clear_node = a.get(flag_names[2])
        clear = False if clear_node is None else self.resolved(self.eval(clear_node), clear_node)
        loc = self.loc(call)
        if not is_ir(clear) and (not isinstance(clear, (bool, int)) or isinstance(clear, float)):
            raise self.error(clear_node, f"expected a boolean, got {show(clear)}")
        scales = self.gemm_scales(call, a)
        if getattr(self, "scope_core", None) == "C" and all(
                r.buffer.scope == "L1" for r in regs[:2]):
            if scales:
                raise self.error(call, "a block-scaled T.gemm takes L0A/L0B operands in an "
                                       "expert T.Scope(\"C\") (copy the L1 tiles there first)")
            return self.expert_l1_gemm(regs, trans, clear, loc, v0)
        return [self.gemm_clear(regs, trans, clear, loc, scales)]

    def gemm_scales(self, call, a) -> dict:
        """scale_A / scale_B / scale_gran of a block-scaled (MX) gemm: all three or none."""
        given = [n for n in ("scale_A", "scale_B", "scale_gran") if a.get(n) is not None]
        if not given:
            return {}
        if len(given) != 3:
            raise self.error(call, "a block-scaled T.gemm needs scale_A, scale_B and scale_gran "
                                   f"together; got only {', '.join(given)}")
        gran = self.int_arg(a["scale_gran"])
        if gran <= 0:
            raise self.error(a["scale_gran"], f"scale_gran must be positive, got {gran}")
        return {"scale_a": self.full_region(a["scale_A"]), "scale_b": self.full_region(a["scale_B"]),
                "scale_gran": gran}

    @staticmethod
    def gemm_clear(regs, trans, clear, loc, scales=None):
        scales = scales or {}
        if is_ir(clear):
            return If(clear, (Gemm(*regs, *trans, True, **scales, loc=loc),),
                      (Gemm(*regs, *trans, False, **scales, loc=loc),), loc)
        return Gemm(*regs, *trans, bool(clear), **scales, loc=loc)

    def expert_l1_gemm(self, regs, trans, clear, loc, v0: bool = False) -> list:
        """tilelang-ascend's gemm_v0 on L1 operands in an expert T.Scope("C"): the MTE1 loads
        into L0A/L0B it implies, K chunk by K chunk (each L0 tile at most L0_TILE bytes), each
        ordered by its own flags (event GEMM_EVENT):

            copy(A_L1[:, k0 +: kc], A_l0a); copy(B_L1[k0 +: kc, :], B_l0b); MTE1->M;
            gemm(A_l0a, B_l0b, C, clear_accum=<first chunk and init>); M->MTE1

        `v0` (T.gemm_v0): bracketed as tilelang-ascend's gemm_v0 template is, so that the L1
        loads and L0C reads before it and after it need no flag of the kernel's own: MTE2->MTE1
        and FIX->M before the first chunk, MTE1->MTE2 and M->FIX after the last."""
        from ..ir.nodes import Alloc, Copy, Region
        a, b, c = regs
        # a slice of a stacked tile (`w_l1[pid, :, :]`) is its last two dimensions
        lead = [len(r.extent) - 2 for r in (a, b)]
        if any(n < 0 or any(e != 1 for e in r.extent[:n]) for r, n in zip((a, b), lead)):
            raise CompileError("gemm_v0 operands are matrices: 2-D tiles or one matrix of a "
                               "stacked tile (t[i, :, :])", loc)
        kdim = (lead[0] + (0 if trans[0] else 1), lead[1] + (1 if trans[1] else 0))  # K dims
        K = a.extent[kdim[0]]
        size = [r.extent[2 * n + 1 - d] * dtypes.itemsize(r.buffer.dtype)
                for r, n, d in zip((a, b), lead, kdim)]
        kc = K
        while kc > 16 and max(size) * kc > L0_TILE:
            kc = max(16, (kc // 2 + 15) // 16 * 16)
        out = []
        for k0 in range(0, K, kc):
            n = min(kc, K - k0)
            l0 = []
            for r, d, scope, m in ((a, kdim[0], "L0A", lead[0]), (b, kdim[1], "L0B", lead[1])):
                start = tuple(binop("+", s, k0) if i == d else s for i, s in enumerate(r.start))
                ext = tuple(n if i == d else e for i, e in enumerate(r.extent))
                key = (scope, ext[m:], r.buffer.dtype)
                if key not in self.hoisted_allocs:
                    name = self.fresh_buffer_name(f"{r.buffer.name}_{scope.lower()}")
                    self.hoisted_allocs[key] = Alloc(Buffer(name, ext[m:], r.buffer.dtype, scope),
                                                     None, loc)
                buf = self.hoisted_allocs[key].buffer
                out.append(Copy(Region(r.buffer, tuple(as_expr(x) for x in start), ext),
                                Region.full(buf), loc))
                l0.append(Region.full(buf))
            pre = [SetFlag("MTE1", "M", GEMM_EVENT, loc), WaitFlag("MTE1", "M", GEMM_EVENT, loc)]
            post = [SetFlag("M", "MTE1", GEMM_EVENT, loc), WaitFlag("M", "MTE1", GEMM_EVENT, loc)]
            self.implied_flags.extend(pre + post)
            out += pre
            out.append(self.gemm_clear([*l0, c], trans, clear if k0 == 0 else False, loc))
            out += post
        if v0:
            pairs = (("MTE2", "MTE1"), ("FIX", "M")), (("MTE1", "MTE2"), ("M", "FIX"))
            before, after = ([f(src, dst, GEMM_EVENT, loc) for src, dst in pp
                              for f in (SetFlag, WaitFlag)] for pp in pairs)
            self.implied_flags.extend(before + after)
            out = before + out + after
        return out

    def without_implied_flags(self, body: list) -> list:
        """An expert kernel that writes no intra-core flag or barrier of its own (at most
        cross-core flags) is synchronised by the compiler within each core (tilelang-ascend's
        TL_ASCEND_AUTO_SYNC): the flags its gemm_v0 calls implied go, so that insert_sync
        places every intra-core flag. With a flag of the user's, they stay."""
        from ..ir.nodes import SYNC_OPS, SetCrossFlag, WaitCrossFlag, walk_statements
        implied = {id(f) for f in self.implied_flags}
        if not implied or any(isinstance(s, SYNC_OPS) and id(s) not in implied
                              and not isinstance(s, (SetCrossFlag, WaitCrossFlag))
                              for s in walk_statements(body)):
            return body
        from dataclasses import replace
        from ..ir.nodes import body_fields

        def strip(stmts):
            return [replace(s, **{f: tuple(strip(list(getattr(s, f)))) for f in body_fields(s)})
                    if body_fields(s) else s for s in stmts if id(s) not in implied]
        return strip(body)

    def op_gemm(self, call) -> list:
        names = ["A", "B", "C", "transpose_A", "transpose_B", "clear_accum", "policy", "k_pack",
                 "wg_wait", "mbar", "use_2cta", "scale_A", "scale_B", "scale_gran"]
        out = self.gemm_with(call, names, names[3:6])
        self.record_hint(call, [k for k in call.keywords
                                if k.arg in ("policy", "k_pack", "wg_wait", "mbar", "use_2cta")])
        return out

    def op_gemm_v0(self, call) -> list:
        names = ["A", "B", "C", "transpose_A", "transpose_B", "init"]
        return self.gemm_with(call, names, names[3:6], v0=True)

    def op_mma(self, call) -> list:
        names = ["A", "B", "C", "init", "transpose_A", "transpose_B"]
        return self.gemm_with(call, names, ["transpose_A", "transpose_B", "init"])

    # ---------------------------------------------------------------------------- barriers

    def op_barrier_all(self, call) -> list:
        """A full barrier of the enclosing T.Scope's pipes: each pipe waits for every other's
        earlier work (set_flag/wait_flag pairs, event 7). Outside a scope the compiler
        synchronises, so it is nothing."""
        core = getattr(self, "scope_core", None)
        return [] if core is None else full_barrier(core, self.loc(call))

    def op_sync_all(self, call) -> list:
        """tilelang-ascend's `T.sync_all()` (SyncAll, a barrier of every core of the launch):
        a mark the parser splits the launch at (sync_all.py)."""
        return self._launch_barrier(call, "SYNC_ALL")

    def op_sync_grid(self, call) -> list:
        """TileLang's `T.sync_grid()` (a grid barrier of persistent kernels): the same split."""
        return self._launch_barrier(call, "SYNC_GRID")

    def _launch_barrier(self, call, mark: str) -> list:
        from ..ir.nodes import PipeBarrier
        if call.args or call.keywords:
            raise self.error(call, f"T.{mark.lower()}() takes no arguments")
        return [PipeBarrier(mark, self.loc(call))]

    def op_cumsum(self, call) -> list:
        """T.cumsum(src, dst=None, dim=0, reverse=False): dst = src (a map, unless in place),
        then a serial loop along `dim` whose body maps over the other dimensions (src and dst
        tiles, regions of them, or whole reshaped views: views.element_side):

            for t in serial(n - 1):  for i in parallel(m):  dst[i, t + 1] += dst[i, t]
        """
        a = self.args(call, ["src", "dst", "dim", "reverse"], {"dst": None, "dim": None,
                                                               "reverse": None})
        src = self.element_side(a["src"])
        dst = self.element_side(a["dst"]) if "dst" in a else src
        dim = self.int_arg(a["dim"]) if "dim" in a else 0
        reverse = self.bool_arg(a.get("reverse"), False)
        rank = len(src.extent)
        if not -rank <= dim < rank or src.extent != dst.extent:
            raise self.error(call, f"T.cumsum takes src and dst of one shape and a dim in range, "
                                   f"got {src.extent}, {dst.extent}, dim={dim}")
        dim %= rank
        from ..ir.nodes import Var
        loc = self.loc(call)
        out = []
        if dst.key != src.key:
            names = tuple(self.fresh_var("t") for _ in range(rank))
            idx = tuple(Var(v) for v in names)
            out.append(For(names, tuple(const(e) for e in src.extent), "parallel",
                           tuple(dst.stores(idx, src.load(idx), loc)), 0, loc))
        n = src.extent[dim]
        if n < 2:
            return out
        t = Var(self.fresh_var("t"))
        pos = binop("-", n - 2, t) if reverse else binop("+", t, 1)
        prev = binop("+", pos, 1) if reverse else t
        others = [d for d in range(rank) if d != dim]
        names = tuple(self.fresh_var("t") for _ in others)

        def at(p):
            return tuple(as_expr(p if d == dim else Var(names[others.index(d)]))
                         for d in range(rank))
        stores = tuple(dst.stores(at(pos), binop("+", dst.load(at(pos)), dst.load(at(prev))),
                                  loc))
        inner = (For(names, tuple(const(src.extent[d]) for d in others), "parallel", stores, 0,
                     loc),) if others else stores
        return out + [For((t.name,), (const(n - 1),), "serial", inner, 0, loc)]
