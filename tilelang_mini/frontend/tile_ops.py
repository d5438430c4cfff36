"""Tile operations and their buffer regions, as the frontend parses them (a KernelBuilder part):
T.copy / T.gemm / T.fill / T.clear / T.reduce_*, flags and barriers, T.macro calls."""
from __future__ import annotations

import ast
import inspect
from dataclasses import dataclass

from .. import language as T_module
from ..errors import CompileError
from ..ir import dtypes
from ..ir.nodes import (
    Call, Const, For, If, Load, Store, Var,
    Buffer, Copy, Fill, PipeBarrier, Reduce, Region, SetCrossFlag, Sort, SetFlag, WaitCrossFlag,
    WaitFlag, PIPES,
)
from ..language.hints import HINT_NAMES, TRACE_EVENTS
from .bindings import LaneVar
from .common import Marker, ThreadIndex, is_docstring, show
from .exprs import as_expr, binop, const, constant_difference, is_ir


MAX_MACRO_DEPTH = 32  # nested T.macro expansions (each inlines the macro's source)


@dataclass(frozen=True)
class RunTime:
    """The extent of a slice whose length is a run-time value (`count`), at AST node `node`."""
    count: object
    node: object


class TileOps:
    # ------------------------------------------------------------------------- tile operations

    def call_stmt(self, call: ast.Call) -> list:
        fn = self.eval_callee(call.func)
        if isinstance(fn, T_module.Macro):
            return self.inline_macro(fn, call)
        if fn is print:  # Python's print in a kernel function: trace-time output, a hint
            return self.hint_stmt("print", call)
        if not isinstance(fn, Marker) and self.is_python_function(fn):
            return self.inline_function(fn, call)[0]  # a plain helper: inlined like T.macro
        if not isinstance(fn, Marker):
            raise self.error(call, "expected a T. operation or a T.macro call")
        if fn.name in HINT_NAMES or fn.name in TRACE_EVENTS:
            return self.hint_stmt(fn.name, call)
        self.check_int4_operands(fn.name, call)
        if fn.name.startswith("tile."):
            return self.tile_op(fn.name[len("tile."):], call)
        handler = getattr(self, "op_" + fn.name, None)
        if fn.name.startswith("reduce_"):
            out = self.op_reduce(fn.name[len("reduce_"):], call)
            return out if isinstance(out, list) else [out]
        if handler is None:
            raise self.error(call, f"T.{fn.name} is not a statement")
        out = handler(call)
        return out if isinstance(out, list) else [out]

    def args(self, call, names, defaults=None):
        """Bind positional and keyword arguments of `call` to `names` (AST nodes, not values)."""
        defaults = defaults or {}
        bound = {}
        if len(call.args) > len(names):
            raise self.error(call, f"expected at most {len(names)} arguments, got {len(call.args)}")
        for n, a in zip(names, call.args):
            bound[n] = a
        for kw in call.keywords:
            if kw.arg not in names:
                raise self.error(kw, f"unexpected argument '{kw.arg}'; expected {', '.join(names)}")
            bound[kw.arg] = kw.value
        for n in names:
            if n not in bound and n not in defaults:
                raise self.error(call, f"missing argument '{n}'")
        return bound

    def op_copy(self, call) -> Copy:
        names = ["src", "dst", "pad_value", "transpose", "disable_tma", "coalesced_width",
                 "eviction_policy", "annotations", "loop_layout", "src_coord", "dst_coord"]
        relu_kw = next((k for k in call.keywords if k.arg == "enable_relu"), None)
        relu = relu_kw is not None and self.bool_arg(relu_kw.value, False)
        call = ast.Call(call.func, call.args, [k for k in call.keywords if k is not relu_kw],
                        lineno=call.lineno, col_offset=call.col_offset)
        a = self.args(call, names, {n: None for n in names[2:]})
        pad = self.eval(a["pad_value"]) if "pad_value" in a else 0
        if "transpose" in a and self.bool_arg(a["transpose"], False):
            if is_ir(pad) or pad != 0:
                raise self.error(a["pad_value"], "T.copy(transpose=True) pads with zeros; fill "
                                                 "the tile first for another pad value")
            return self.transposed_copy(a["src"], a["dst"], call)
        self.record_hint(call, [k for k in call.keywords if k.arg in (
            "disable_tma", "coalesced_width", "eviction_policy", "annotations", "loop_layout")])
        if self.whole_view(a["src"]) or self.whole_view(a["dst"]):
            if relu or "pad_value" in a:
                raise self.error(call, "T.copy of a reshaped tile takes no pad_value or "
                                       "enable_relu; copy the tile itself")
            return self.view_copy(a["src"], a["dst"], call)
        src, dst = self.region(a["src"], True), self.region(a["dst"], True)
        if any(isinstance(e, RunTime) for e in (*src[2], *dst[2])):
            if relu or "pad_value" in a:
                raise self.error(call, "T.copy of a run-time row count takes no pad_value or "
                                       "enable_relu")
            return self.runtime_rows(src, dst, a["src"], call)
        src, dst = self.first_rows(src, dst), self.first_rows(dst, src)
        src_r, dst_r = self.complete(src, dst, a["src"]), self.complete(dst, src, a["dst"])
        if relu:  # tilelang-ascend's FixPipe relu on the L0C copy-out: max(C, 0)
            if src_r.buffer.scope not in ("L0C", "fragment"):
                raise self.error(relu_kw, "T.copy(..., enable_relu=True) is the FixPipe's relu "
                                          "on an accumulator's copy-out; the source must be an "
                                          f"L0C/fragment tile, got '{src_r.buffer.name}' "
                                          f"({src_r.buffer.scope}); for other tiles write "
                                          "T.tile.relu (or T.max(x, 0) in T.Parallel)")
            return Copy(src_r, dst_r, self.loc(call), atomic="relu")
        short = self.short_vector(src_r, dst_r, pad, a.get("pad_value"), call)
        if short is not None:
            return short
        copy = Copy(src_r, dst_r, self.loc(call))
        if is_ir(pad) or pad != 0:
            return [copy, self.pad_clipped(src_r, dst_r, pad, a["pad_value"], call)]
        return copy

    def runtime_rows(self, src, dst, node, call) -> For:
        """T.copy with a slice of run-time length n (varlen chunks, `w[bos : bos + n, h, :]`):
        its rows one at a time, those below n; the other side's rows past n are left as they
        are (the DMA moves n rows). The other side's matching dimension is its k-th of more
        than one element where the run-time one is the k-th of its side:

            copy(W[bos : bos + n, h, :], w_l1[0, :, :])  ->  for r in serial(64):
                                                                 if r < n:
                                                                     copy(W[bos + r, h, :], w_l1[0, r, :])"""
        def long_dims(ext):
            return [d for d, e in enumerate(ext) if isinstance(e, RunTime) or e not in (None, 1)]
        sides = [src, dst]
        marks = [(i, d, e) for i, (_, _, ext) in enumerate(sides) for d, e in enumerate(ext)
                 if isinstance(e, RunTime)]
        i0, d0, n = marks[0]
        if len(marks) > 2 or len(marks) == 2 and (marks[1][0] == i0 or constant_difference(
                as_expr(marks[1][2].count), as_expr(n.count)) != 0):
            raise self.error(marks[1][2].node, "T.copy takes one run-time slice length (one "
                                               "dimension, the same on both sides)")
        k = long_dims(sides[i0][2]).index(d0)
        row = self.fresh_var("row")
        r, bounds = Var(row), []
        for i, (buf, starts, ext) in enumerate(sides):
            own = [d for j, d, _ in marks if j == i]
            dims = long_dims(ext)
            if not own and k >= len(dims):
                raise self.error(node, "T.copy of a run-time row count: the other side has no "
                                       "dimension to match it")
            d = own[0] if own else dims[k]
            lo = starts[d]
            bounds.append(ext[d] if not own else buf.shape[d] - lo.value
                          if isinstance(lo, Const) else buf.shape[d])
            starts, ext = list(starts), list(ext)
            starts[d], ext[d] = binop("+", lo, r), 1
            sides[i] = (buf, tuple(starts), ext)
        self.var_ranges[row] = (0, min(bounds) - 1)
        (s_, d_), loc = sides, self.loc(call)
        copy = Copy(self.complete(s_, d_, node), self.complete(d_, s_, node), loc)
        return For((row,), (const(min(bounds)),), "serial",
                   (If(binop("<", r, n.count), (copy,), (), loc),), 0, loc)

    def short_vector(self, src: Region, dst: Region, pad, pad_node, call):
        """A GM region shorter than the on-chip tile it is copied into, dimension by dimension
        (tilelang-ascend's `T.copy(gamma[g, 0:cpg], gamma_raw, pad_value=0.0)` with gamma_raw
        (cpg_padded, 1); TileLang's `T.copy(K[b, s : s + valid_n, h, :], K_shared)` with
        valid_n < block_N): the elements land at the tile's head, the rest hold the pad value
        (zero unless given), one fill per short dimension; where the region itself may cross
        the tensor's edge (a tail block), a non-zero pad also goes to its clipped elements
        (`pad_clipped` on the head):

            copy(G[g +: 1, 0 +: 8], t[0 +: 8, 0 +: 1]); fill(t[8 +: 8, 0 +: 1], pad)
            copy(K[s +: 16, 0 +: 64], k[0 +: 16, 0 +: 64]); fill(k[16 +: 112, 0 +: 64], 0)
        """
        if src.buffer.scope != "global" or dst.buffer.scope == "global":
            return None
        if not all(isinstance(e, int) for e in (*src.extent, *dst.extent)):
            return None
        s_dims = [d for d, e in enumerate(src.extent) if e != 1]
        d_dims = [d for d, e in enumerate(dst.extent) if e != 1]
        pairs = [(src.extent[sd], dst.extent[dd], dd) for sd, dd in zip(s_dims, d_dims)]
        if len(src.extent) == len(dst.extent) and all(
                n <= m for n, m in zip(src.extent, dst.extent)):
            # dimension by dimension where it fits (X[r:r + 4, 0:1] into a (4, 2) tile)
            s_dims = d_dims = [d for d, (n, m) in enumerate(zip(src.extent, dst.extent))
                               if (n, m) != (1, 1)]
            pairs = [(src.extent[d], dst.extent[d], d) for d in d_dims]
        elif len(s_dims) != len(d_dims):
            return None
        if not pairs or any(n > m for n, m, _ in pairs) or all(n == m for n, m, _ in pairs):
            return None
        value = as_expr(pad if is_ir(pad) or dtypes.is_int(dst.buffer.dtype) else float(pad))
        loc = self.loc(call)
        head = list(dst.extent)
        for n, _, d in pairs:
            head[d] = n
        out = [Copy(src, Region(dst.buffer, dst.start, tuple(head)), loc)]
        inside = all(isinstance(a, Const) and isinstance(dim, int) and 0 <= a.value <= dim - n
                     for a, n, dim in zip(src.start, src.extent, src.buffer.shape))
        if (is_ir(pad) or pad != 0) and not inside:
            out.append(self.pad_clipped(src, Region(dst.buffer, dst.start, tuple(head)), pad,
                                        pad_node, call))
        for i, (n, m, d) in enumerate(pairs):
            if n == m:
                continue
            start, ext = list(dst.start), list(dst.extent)
            for n0, _, d0 in pairs[:i]:
                ext[d0] = n0  # the earlier dimensions' tails are filled already
            start[d], ext[d] = binop("+", dst.start[d], n), m - n
            out.append(Fill(Region(dst.buffer, tuple(as_expr(x) for x in start), tuple(ext)),
                            value, loc))
        return out

    def pad_clipped(self, src: Region, dst: Region, pad, node, call) -> For:
        """T.copy(..., pad_value=v): the copy pads clipped elements with zeros; a map after it
        writes v where the source element lies outside the tensor:

            copy(X[r +: 4, c +: 8], x); for t0, t1 in parallel(4, 8):
                x[t0, t1] = select(r + t0 < M and c + t1 < N, x[t0, t1], v)
        """
        if dst.buffer.scope not in ("shared", "fragment", "local", "ub", "UB", "shared.dyn"):
            raise self.error(node, f"T.copy(pad_value=...) into '{dst.buffer.name}' "
                                   f"({dst.buffer.scope}): the padding is a vector map, so the "
                                   "destination must be a vector-unit tile (UB/fragment); copy "
                                   "into a UB tile, or pad with zeros")
        s_dims = [d for d, e in enumerate(src.extent) if e != 1]
        d_dims = [d for d, e in enumerate(dst.extent) if e != 1]
        if [src.extent[d] for d in s_dims] != [dst.extent[d] for d in d_dims]:
            raise self.error(node, "T.copy(pad_value=...) needs the source and destination "
                                   "regions to have the same shape")
        if not d_dims:  # one element: a map of extent 1 (a map needs a variable)
            s_dims, d_dims = [len(src.extent) - 1], [len(dst.extent) - 1]
        names = tuple(self.fresh_var("p") for _ in d_dims)
        idx = {d: Var(n) for d, n in zip(d_dims, names)}
        conds = None
        for k, d in enumerate(range(len(src.extent))):
            i = binop("+", src.start[d], Var(names[s_dims.index(d)])) if d in s_dims \
                else src.start[d]
            c = binop("and", binop(">=", i, 0), binop("<", i, src.buffer.shape[d]))
            conds = c if conds is None else binop("and", conds, c)
        at = tuple(binop("+", dst.start[d], idx[d]) if d in idx else dst.start[d]
                   for d in range(len(dst.extent)))
        here = Load(dst.buffer, tuple(as_expr(i) for i in at))
        value = pad if is_ir(pad) else (pad if dtypes.is_int(dst.buffer.dtype) else float(pad))
        store = Store(dst.buffer, tuple(as_expr(i) for i in at),
                      Call("select", (as_expr(conds), here, as_expr(value))), self.loc(call))
        return For(names, tuple(const(dst.extent[d]) for d in d_dims), "parallel", (store,), 0,
                   self.loc(call))

    def var_target(self, node):
        """The `alloc_var` buffer that `node` names, or None (T.clear/T.fill of a scalar)."""
        from ..ir.nodes import Load
        if isinstance(node, ast.Name):
            v = self.eval(node)
            if isinstance(v, Load) and self.is_scalar(v.buffer):
                return v.buffer
        return None

    def op_clear(self, call) -> Fill:
        a = self.args(call, ["buffer"])
        var = self.var_target(a["buffer"])
        if var is not None:  # T.clear(x) of an alloc_var: x = 0
            from ..ir.nodes import Store
            zero = const(0) if dtypes.is_int(var.dtype) else const(0.0)
            return Store(var, self.scalar_index(var), zero, self.loc(call))
        from .views import TileView
        view = None if isinstance(a["buffer"], ast.Subscript) else self.eval(a["buffer"])
        # all-zero bits: T.clear of a view, of any dtype, clears its tile
        r = Region.full(view.base) if isinstance(view, TileView) else \
            self.full_region(a["buffer"], point_ok=True)
        zero = const(0) if dtypes.is_int(r.buffer.dtype) else const(0.0)
        return Fill(r, zero, self.loc(call))

    def op_fill(self, call) -> Fill:
        a = self.args(call, ["buffer", "value"])
        value = self.eval(a["value"])
        if not (is_ir(value) or isinstance(value, (int, float))):
            raise self.error(a["value"], f"fill value must be a number or expression, got {show(value)}")
        var = self.var_target(a["buffer"])
        if var is not None:  # T.fill(x, v) of an alloc_var: x = v
            from ..ir.nodes import Store
            if isinstance(value, int) and not dtypes.is_int(var.dtype):
                value = float(value)
            return Store(var, self.scalar_index(var), as_expr(value), self.loc(call))
        if isinstance(value, int) and not isinstance(value, bool):
            r0 = self.full_region(a["buffer"], point_ok=True)
            value = value if dtypes.is_int(r0.buffer.dtype) else float(value)
        r = self.full_region(a["buffer"], point_ok=True)
        from ..ir.nodes import Load, walk
        if is_ir(value) and any(isinstance(n, Load) and n.buffer.scope not in ("var", "global")
                                for n in walk(value)):
            return self.fill_map(r, value, call)  # T.fill(t, s[0]): reads a tile element
        return Fill(r, as_expr(value), self.loc(call))

    def fill_map(self, r, value, call, names=None):
        """region = value as a T.Parallel map over the region (a fill whose value reads a tile:
        the compiler places and splits maps by what they read); `value` may use the loop
        variables `names` (fresh ones by default)."""
        from ..ir.nodes import For, Store
        from .exprs import region_dims, region_index
        names = names or tuple(self.fresh_var("i") for _ in region_dims(r))
        idx, extents = region_index(r, names)
        loc = self.loc(call)
        return For(names, extents, "parallel", (Store(r.buffer, idx, as_expr(value), loc),), 0,
                   loc)

    def op_reduce(self, kind, call) -> Reduce:
        a = self.args(call, ["buffer", "out", "dim", "clear", "real_shape"],
                      {"dim": None, "clear": None, "real_shape": None})
        dim = self.eval(a["dim"]) if "dim" in a else -1
        if not isinstance(dim, int):
            raise self.error(a["dim"], "dim must be a constant int")
        from .int4 import Int4Buffer
        from .views import TileView
        # a slice `s[p, :, :]` is a region of a tile, never a view: not evaluated as a value
        view = None if isinstance(a["buffer"], ast.Subscript) else self.eval(a["buffer"])
        if isinstance(view, (TileView, Int4Buffer)):  # T.reduce_sum(T.reshape(s, ...), out, dim);
            # an int4 tile: its values, read nibble by nibble
            if not -len(view.shape) <= dim < len(view.shape):
                raise self.error(a.get("dim", call), f"dim {dim} is out of range")
            return self.view_reduce(kind, view, a["out"], dim,
                                    self.bool_arg(a.get("clear"), True), call)
        src, dst = self.full_region(a["buffer"]), self.full_region(a["out"])
        rank = len(src.extent)
        if not -rank <= dim < rank:
            raise self.error(a.get("dim", call), f"dim {dim} is out of range for a {rank}-D buffer")
        clear = self.bool_arg(a.get("clear"), True)
        if "real_shape" in a:
            src, dst = self.real_shape(src, dst, dim % rank, a["real_shape"])
        dst = _leading_part(src, dst, dim % rank)
        return Reduce(kind, src, dst, dim % rank, clear, self.loc(call))

    def real_shape(self, src: Region, dst: Region, dim: int, node):
        """tilelang-ascend's `T.reduce_max(x, out, dim, real_shape=[r, c])`: the reduction reads
        the leading [r, c] box of x; its results fill out's first elements (out may be longer,
        e.g. (1, 8) for 4 row maxima):

            reduce_max(x (4, 8), out (1, 8), dim=1, real_shape=[4, 4])
        ->  reduce_max(x[0 +: 4, 0 +: 4], out[0 +: 1, 0 +: 4], dim=1)
        """
        shape = self.eval(node)
        if not isinstance(shape, (list, tuple)) or len(shape) != len(src.extent) or any(
                not isinstance(e, int) or not 0 < e <= s for e, s in zip(shape, src.extent)):
            raise self.error(node, f"real_shape must list {len(src.extent)} constant extents "
                                   f"within the source's {tuple(src.extent)}")
        src = Region(src.buffer, src.start, tuple(shape))
        want = [e for d, e in enumerate(shape) if d != dim and e != 1]
        have = [e for e in dst.extent if e != 1]
        if have == want:
            return src, dst
        dims = [d for d, e in enumerate(dst.extent) if e != 1]
        if len(want) > 1 or len(dims) != 1 or (want and dst.extent[dims[0]] < want[0]):
            raise self.error(node, f"real_shape {list(shape)} reduces to {tuple(want)} values, "
                                   f"which do not fit the destination {tuple(dst.extent)}")
        ext = list(dst.extent)
        ext[dims[0]] = want[0] if want else 1
        return src, Region(dst.buffer, dst.start, tuple(ext))

    def op_sort(self, call) -> Sort:
        """T.sort(values, indices, descending=True): sort each row of `values` (whole tiles) in
        place, carrying `indices` along."""
        a = self.args(call, ["values", "indices", "descending"], {"descending": None})
        values, indices = self.full_region(a["values"]), self.full_region(a["indices"])
        descending = self.bool_arg(a.get("descending"), True)
        return Sort(values, indices, descending, self.loc(call))

    def op_set_flag(self, call):
        return self.flag(call, SetFlag)

    def op_wait_flag(self, call):
        return self.flag(call, WaitFlag)

    def flag(self, call, cls):
        a = self.args(call, ["src", "dst", "event"])
        src, dst = self.pipe(a["src"]), self.pipe(a["dst"])
        return self.flag_id(a["event"], lambda e: cls(src, dst, e, self.loc(call)), self.loc(call))

    MAX_FLAG_CASES = 16

    def flag_id(self, node, make, loc):
        """`make(id)` for a flag id that is a constant, or one flag per value of a run-time id
        with a small known range (loop and block variables, `vid`, `x % k`), chosen by an if
        chain, since flag ids are constants in the IR:

            T.set_cross_flag("FIX", 2 + vid)   ->   if 2 + vid == 2: set_cross_flag(FIX, 2)
                                                     else: set_cross_flag(FIX, 3)
        """
        from ..ir.analysis import interval
        from ..ir.nodes import BinOp, Const, If
        event = self.resolved(self.eval(node), node)
        if not is_ir(event):
            return make(self.int_arg(node))
        span = interval(self.var_ranges, event)
        if span is None and isinstance(event, BinOp) and event.op == "%" \
                and isinstance(event.b, Const) and type(event.b.value) is int and event.b.value > 0:
            span = (0, event.b.value - 1)  # ping-pong buffers: `x % k` of any x (floor modulo)
        if span is None or span[0] < 0 or span[1] - span[0] >= self.MAX_FLAG_CASES:
            raise self.error(node, f"a flag id must be a constant int or an integer expression "
                                   f"of loop/block variables with at most {self.MAX_FLAG_CASES} "
                                   f"non-negative values (such as `k % 2` or `base + vid`), got "
                                   f"{show(event)}" + ("" if span is None else f" in {list(span)}"))
        out = [make(span[1])]
        for k in range(span[1] - 1, span[0] - 1, -1):
            out = [If(BinOp("==", event, Const(k)), (make(k),), tuple(out), loc)]
        return out

    def op_pipe_barrier(self, call):
        a = self.args(call, ["pipe"])
        name = self.eval(a["pipe"])
        if isinstance(name, str) and name.upper() == "ALL":  # tilelang-ascend's T.barrier_all()
            return self.op_barrier_all(call)                 # is pipe_barrier("ALL")
        return PipeBarrier(self.pipe(a["pipe"]), self.loc(call))

    def op_set_cross_flag(self, call):
        """`T.set_cross_flag(pipe, flag[, mode])`: tilelang-ascend's mode 2 (the default: between
        the cube core and the vector cores of one group) is the flag modelled here; modes 0 (all
        AICs or all AIVs of the launch) and 1 (the AIVs of one group) are located errors."""
        a = self.args(call, ["pipe", "flag", "mode"], {"mode": None})
        if a.get("mode") is not None and self.int_arg(a["mode"]) != 2:
            raise self.error(a["mode"], f"set_cross_flag mode {self.int_arg(a['mode'])} (a flag "
                                        f"among all AICs/AIVs, or between the AIVs of a group) "
                                        f"is not modelled; mode 2 (cube <-> vector cores of the "
                                        f"group, the default) is: order the vector cores through "
                                        f"the cube core, or leave the mode out")
        pipe, loc = self.pipe(a["pipe"]), self.loc(call)
        return self.flag_id(a["flag"], lambda f: SetCrossFlag(pipe, f, loc), loc)

    def op_wait_cross_flag(self, call):
        if len(call.args) == 1 and not call.keywords:
            a = {"flag": call.args[0], "pipe": None}
        else:
            a = self.args(call, ["pipe", "flag"])
            if len(call.args) == 2 and not isinstance(self.eval(call.args[0]), str):
                a = {"flag": call.args[0], "pipe": call.args[1]}  # wait_cross_flag(flag, "MTE2")
        pipe, loc = "S" if a["pipe"] is None else self.pipe(a["pipe"]), self.loc(call)
        return self.flag_id(a["flag"], lambda f: WaitCrossFlag(pipe, f, loc), loc)

    def pipe(self, node) -> str:
        v = self.eval(node)
        name = v.upper() if isinstance(v, str) else None
        if name not in PIPES:
            raise self.error(node, f"unknown pipe {show(v)}; expected one of {', '.join(PIPES)}")
        return name

    def int_arg(self, node) -> int:
        v = self.eval(node)
        if not isinstance(v, int) or isinstance(v, bool):
            raise self.error(node, f"expected a constant int, got {show(v)}")
        return v

    def bool_arg(self, node, default: bool) -> bool:
        if node is None:
            return default
        v = self.eval(node)
        if not isinstance(v, bool):
            raise self.error(node, f"expected True or False, got {show(v)}")
        return v

    def kwarg_bool(self, call, name, default):
        for kw in call.keywords:
            if kw.arg == name:
                return self.bool_arg(kw.value, default)
        return default

    def inline_macro(self, macro, call) -> list:
        return self.inline_function(macro.fn, call)[0]

    def assign_macro(self, call: ast.Call):
        """`x = m(...)` / `a, b = m(...)` with `m` a T.macro: (its inlined statements, the value to
        bind). A macro that issues kernel operations (e.g. allocates tiles) may return tiles: a
        tile or a tuple of tiles, which the caller then names; anything else it returns after
        kernel operations is a CompileError at its `return`."""
        return self.inline_function(self.eval_callee(call.func).fn, call, returns_tiles=True)

    @staticmethod
    def is_tiles(value) -> bool:
        """A tile (an on-chip buffer or a view of one) or a non-empty (nested) tuple of tiles."""
        from .views import TileView
        if isinstance(value, (tuple, list)):
            return len(value) > 0 and all(TileOps.is_tiles(v) for v in value)
        return isinstance(value, TileView) or (isinstance(value, Buffer) and value.scope != "global")

    @staticmethod
    def is_python_function(fn) -> bool:
        """A user's Python function whose source can be inlined into the kernel."""
        if not inspect.isfunction(fn) or fn.__module__ is None:
            return False
        module = fn.__module__
        return not (module.startswith("tilelang_mini") or module.startswith("numpy"))

    def inline_function(self, fn, call, returns_tiles=False) -> tuple[list, object]:
        """Inline a T.macro or a plain Python helper at `call`: (statements, returned value).
        Its source is parsed with this kernel's names; the arguments are bound as values.
        With `returns_tiles`, a value returned after kernel operations must be tiles."""
        depth = getattr(self, "macro_depth", 0) + 1
        if depth > MAX_MACRO_DEPTH:
            raise self.error(call, f"{fn.__name__} is inlined more than {MAX_MACRO_DEPTH} "
                                   f"levels deep: a T.macro or helper that calls itself "
                                   f"(directly or through others) needs a trace-time condition "
                                   f"that ends the recursion")
        try:
            sub = type(self)(fn, symbols=self.symbols)  # the function's own source
        except (CompileError, SyntaxError):
            raise self.error(call, f"cannot read the source of {fn.__name__} to inline it; "
                                   "define it in a file (or decorate it with T.macro)") from None
        sub.macro_depth = depth
        sub.buffer_names = self.buffer_names
        sub.parallel_depth = self.parallel_depth
        sub.simt = self.simt
        sub.scope_core = getattr(self, "scope_core", None)
        sub.block_names = getattr(self, "block_names", ())
        sub.hints = self.hints
        sub.hidden_params = self.hidden_list()
        sub.hoisted_allocs = getattr(self, "hoisted_allocs", {})
        sub.var_ranges = dict(self.var_ranges)
        sub.loop_names = list(self.loop_names)
        sub.n_fresh = self.n_fresh + 1000
        sig = inspect.signature(fn)
        try:
            bound = sig.bind(*[self.eval(a) for a in call.args],
                             **{k.arg: self.eval(k.value) for k in call.keywords})
        except TypeError as e:
            raise self.error(call, f"{fn.__name__}: {e}") from None
        bound.apply_defaults()
        args = dict(bound.arguments)
        for name, p in sig.parameters.items():  # `x: T.Ref`: the element itself (reads, writes)
            if p.annotation is T_module.Ref or str(p.annotation).rsplit(".", 1)[-1] == "Ref":
                if not isinstance(args[name], Load):
                    raise self.error(call, f"{fn.__name__}: parameter {name} is a T.Ref: pass "
                                           "an element (A[i]) or a T.alloc_var scalar")
                args[name] = LaneVar(args[name].buffer, args[name].indices)
        sub.scopes = [*sub.scopes, args]
        sub.inline_result = []
        fdef = sub.tree.body[0]
        if not isinstance(fdef, ast.FunctionDef):
            raise self.error(call, f"cannot inline {fn.__name__}: not a function definition")
        stmts = sub.body([s for s in fdef.body if not is_docstring(s)])
        self.n_fresh = sub.n_fresh
        value = sub.inline_result[0] if sub.inline_result else None
        if returns_tiles and stmts and not self.is_tiles(value):
            where = getattr(sub, "return_node", None)
            raise (sub.error(where, f"{fn.__name__} issues kernel operations, so what it returns "
                                    f"to an assignment must be tiles it allocates (a tile or a "
                                    f"tuple of tiles), got {show(value)}") if where is not None
                   else self.error(call, f"{fn.__name__} issues kernel operations and returns "
                                         f"nothing; call it as a statement"))
        return stmts, value

    def inline_value(self, fn, n):
        stmts, value = self.inline_function(fn, n)
        if stmts:
            raise self.error(n, f"{fn.__name__} issues kernel operations; call it as a "
                                "statement, not inside an expression")
        return value

    # ------------------------------------------------------------------------------- regions

    def full_region(self, node, point_ok=False) -> Region:
        """The region `node` names; with `point_ok`, one element (`s[0]`) is a region of
        extent 1 (T.fill / T.clear of one element)."""
        r = self.region(node)
        if point_ok and all(e is None for e in r[2]):
            return Region(r[0], r[1], tuple(1 for _ in r[2]))
        if any(e is None for e in r[2]):
            raise self.error(node, "expected a buffer or a sliced region of one")
        return Region(r[0], r[1], tuple(r[2]))

    def region(self, node, runtime=False, base=None):
        """(buffer, starts, extents-with-None-for-points) of a buffer, A[i, j] or A[a:b, c:d];
        with `runtime`, a slice of run-time length has a RunTime extent (T.copy's rows); `base`:
        the buffer the subscript's base stands for (an int4 buffer's logical shape)."""
        from .int4 import Int4Buffer
        if isinstance(node, ast.Subscript):
            buf = self.eval(node.value) if base is None else base
            if isinstance(buf, Int4Buffer):
                return self.int4_region(node, buf, runtime)
            if not isinstance(buf, Buffer):
                raise self.error(node, f"expected a buffer region, got {show(buf)}")
            elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            if len(elts) != len(buf.shape):
                raise self.error(node, f"'{buf.name}' has {len(buf.shape)} dimensions, "
                                       f"got {len(elts)} indices")
            points = not any(isinstance(e, ast.Slice) for e in elts)
            starts, extents = [], []
            for d, e in enumerate(elts):
                if isinstance(e, ast.Slice):
                    if e.step is not None:
                        raise self.error(e, "region slices take no step")
                    lo = self.eval(e.lower) if e.lower is not None else 0
                    hi = self.eval(e.upper) if e.upper is not None else buf.shape[d]
                    n = constant_difference(as_expr(hi), as_expr(lo))
                    if n is None and runtime:
                        n = RunTime(binop("-", hi, lo), e)
                    elif n is None or n <= 0:
                        raise self.error(e, "a region slice must have a constant positive extent"
                                         + ("" if n is not None else " (a run-time row count "
                                            "is taken by T.copy)"))
                    starts.append(as_expr(lo))
                    extents.append(n)
                else:
                    v = self.eval(e)
                    if isinstance(v, ThreadIndex):
                        raise self.simt_use(e)
                    if not (is_ir(v) or isinstance(v, int)) or isinstance(v, bool):
                        raise self.error(e, f"an index must be an integer expression, got {show(v)}")
                    starts.append(as_expr(v))
                    extents.append(None if points else 1)
            return buf, tuple(starts), extents
        v = self.eval(node)
        from .views import TileView
        if isinstance(v, Int4Buffer):  # all of an int4 buffer: all its bytes
            v = v.packed
        if isinstance(v, TileView):  # a whole view is its whole base (T.clear, T.fill)
            if v.dtype is not None:
                raise self.error(node, f"'{v.base.name}' viewed as {v.dtype} is read and "
                                       "written element by element (in T.Parallel); tile "
                                       "ops other than T.clear take the tile itself")
            v = v.base
        if isinstance(v, Load) and len(v.indices) == len(v.buffer.shape):
            # `X[i, j]` reaching here through a name (a T.macro argument): its start corner
            return v.buffer, tuple(v.indices), [None] * len(v.indices)
        if not isinstance(v, Buffer):
            raise self.error(node, f"expected a buffer or region, got {show(v)}")
        return v, tuple(const(0) for _ in v.shape), list(v.shape)

    @staticmethod
    def first_rows(tile, other):
        """A lower-rank GM start corner against an on-chip tile (tilelang-ascend's
        `T.copy(x[k * bk], x_L1)` with x 1-D and x_L1 (16, bk)): the tile's leading index 0,
        i.e. its first row, is what moves; the other rows keep their values."""
        buf, starts, ext = tile
        obuf, _, oext = other
        if buf.scope == "global" or obuf.scope != "global" or any(e is None for e in ext) \
                or not any(e is None for e in oext):
            return tile
        ext = list(ext)
        while len(ext) > len(oext) and ext[0] == 1:
            ext.pop(0)
        if len(ext) <= len(oext):
            return tile
        n = len(tile[2]) - len(oext)
        return buf, starts, [1] * n + list(tile[2][n:])

    def complete(self, mine, other, node) -> Region:
        """Fill a start-corner region's extents from the other side (aligned at trailing dims)."""
        buf, starts, extents = mine
        if all(e is not None for e in extents):
            return Region(buf, starts, tuple(extents))
        if any(e is None for e in other[2]):
            raise self.error(node, "one side of T.copy must give its extent (a buffer or a slice)")
        src_ext = [e for e in other[2]]
        while len(src_ext) > len(extents) and src_ext[0] == 1:
            src_ext.pop(0)
        if len(src_ext) > len(extents):
            raise self.error(node, f"a {len(other[2])}-D tile does not fit a {len(extents)}-D region")
        full = [1] * (len(extents) - len(src_ext)) + src_ext
        return Region(buf, starts, tuple(full))


def _leading_part(src, dst, dim):
    """A whole-tile reduce destination longer than the result (tilelang-ascend pads row
    statistics to 32 bytes: `m_i = T.alloc_ub([max(8, v_block)], ...)`, then
    `T.reduce_max(acc_s_ub, m_i, dim=-1)` with v_block rows) takes the result in its leading
    part, as on the device; the other elements are left as they are:

        reduce_max(s[2, 64], m[8])   ->   reduce_max(s, m[0 +: 2])
    """
    from ..ir.nodes import Region
    want = tuple(e for d, e in enumerate(src.extent) if d != dim)
    ext = tuple(dst.extent)
    if not dst.is_full or ext == want or len(ext) != len(want) or not all(
            isinstance(d, int) and isinstance(w, int) and d >= w for d, w in zip(ext, want)):
        return dst
    return Region(dst.buffer, dst.start, want)
