"""T.int4 tensors and tiles (a KernelBuilder part): stored two values a byte along the last dim
(IR dtype int4x2, the even index in the low nibble, as TileLang's and AscendC's packing), indexed
by the kernel with their logical shape.

    A: T.Tensor((M, K), T.int4)            -> param A: [M, K // 2] int4x2 (the caller's packed int8)
    A_s = T.alloc_shared((bm, bk), T.int4) -> A_s: [bm, bk // 2] int4x2
    T.copy(A[by * bm, ko * bk], A_s)       -> copy(A[by * bm +: bm, (ko * bk) // 2 +: bk // 2], A_s)
    T.gemm(A_s, B_s, C, transpose_B=True)  -> gemm on int4x2 tiles (the 910b cube takes int4)
    A_s[i, k]                              -> n - (n & 8) * 2, n = (A_s[i, k // 2] >> (k % 2) * 4) & 15

A store of one element rewrites half a byte: outside T.Parallel it reads, masks and writes the
byte; inside, lanes would share bytes, so it is a located error.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass

from ..ir.nodes import Buffer, Call, Load, Store
from .exprs import as_expr, binop, constant_difference


@dataclass(frozen=True)
class Int4Buffer:
    """A T.int4 buffer: `packed` holds it (int4x2, last dim halved); `shape` is its own."""

    packed: Buffer
    shape: tuple

    @property
    def name(self) -> str:
        return self.packed.name

    @property
    def dtype(self) -> str:
        return "int4"

    @property
    def base(self) -> Buffer:
        """The buffer that holds the values (as a TileView's base: views.view_reduce)."""
        return self.packed

    def byte_and_shift(self, idx: tuple) -> tuple:
        k = idx[-1]
        return (tuple(as_expr(i) for i in idx[:-1]) + (as_expr(binop("//", k, 2)),),
                as_expr(binop("*", binop("%", k, 2), 4)))

    def load(self, idx: tuple):
        at, shift = self.byte_and_shift(idx)
        nib = Call("bitwise_and", (Call("shift_right", (Load(self.packed, at), shift)),
                                   as_expr(15)))
        return binop("-", nib, binop("*", Call("bitwise_and", (nib, as_expr(8))), 2))

    def store(self, idx: tuple, value, loc) -> Store:
        at, shift = self.byte_and_shift(idx)
        keep = Call("bitwise_and", (Load(self.packed, at), Call("bitwise_not", (
            Call("shift_left", (as_expr(15), shift)),))))
        new = Call("shift_left", (Call("bitwise_and", (as_expr(value), as_expr(15))), shift))
        return Store(self.packed, at, Call("bitwise_or", (keep, new)), loc)


# T.* statements that take int4 buffers and regions as their packed bytes (a copy between int4
# buffers, a clear, the int4 gemm; a non-zero fill is check's error). T.reduce_* of a whole int4
# tile reduces its values (a serial loop of maps over nibble reads, views.view_reduce); any other
# statement would compute on the bytes, two values each.
INT4_BYTE_OPS = ("copy", "clear", "fill", "gemm", "gemm_v0")


class Int4s:
    def check_int4_operands(self, op: str, call: ast.Call) -> None:
        """T.<op>(...) names an int4 buffer, or a sliced region of one, that `op` would read
        or write as packed bytes: a located error. Elements (`x[i, k]`) are values."""
        if op in INT4_BYTE_OPS:
            return
        # T.reduce_*'s source may be a whole int4 tile (its values); its destination may not
        source = call.args[0] if call.args else next(
            (k.value for k in call.keywords if k.arg == "buffer"), None)
        for node in [*call.args, *(k.value for k in call.keywords)]:
            sliced = isinstance(node, ast.Subscript) and any(
                isinstance(e, ast.Slice) for e in (
                    node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]))
            base = node.value if sliced else node
            if not isinstance(base, ast.Name):
                continue
            v = next((sc[base.id] for sc in reversed(self.scopes) if base.id in sc), None)
            if not isinstance(v, Int4Buffer) or (
                    node is source and not sliced and op.startswith("reduce_")):
                continue
            raise self.error(node, f"T.{op} on int4 buffer '{v.name}' would compute on its "
                                   "packed bytes (two values each), not its values; convert it "
                                   "element by element into an int8 / int32 tile in T.Parallel "
                                   f"(`t8[i, k] = {v.name}[i, k]`) and use that"
                                   + (" (T.reduce_* also takes a whole int4 tile)"
                                      if op.startswith("reduce_") else ""))

    def int4_buffer(self, name: str, unique: str, shape: tuple, scope: str, node) -> Buffer:
        """The packed buffer of T.int4 buffer `name` of `shape`; `name` is bound to its view."""
        if shape[-1] % 2:
            raise self.error(node, f"an int4 buffer is stored two values a byte along its last "
                                   f"dim, which must be even; got shape {list(shape)}")
        buf = Buffer(unique, tuple(shape[:-1]) + (shape[-1] // 2,), "int4x2", scope)
        self.bind(name, Int4Buffer(buf, tuple(shape)))
        return buf

    def int4_region(self, node: ast.Subscript, view: Int4Buffer, runtime=False):
        """(packed buffer, starts, extents) of a region of an int4 buffer: the last dim's start
        and extent halved (both even: whole bytes)."""
        logical = Buffer(view.packed.name, view.shape, "int4x2", view.packed.scope)
        _, starts, extents = self.region(node, runtime, base=logical)
        start, ext = starts[-1], extents[-1]
        if (ext is not None and not isinstance(ext, int)) or (ext or 0) % 2 or \
                (constant_difference(start, as_expr(0)) or 0) % 2:
            raise self.error(node, f"a region of int4 buffer '{view.name}' covers whole bytes: "
                                   "its last dim starts and extends by even counts")
        starts = tuple(starts[:-1]) + (as_expr(binop("//", start, 2)),)
        extents = list(extents[:-1]) + [None if ext is None else ext // 2]
        return view.packed, starts, extents

    def int4_store(self, target: ast.Subscript, view: Int4Buffer, value, node) -> list:
        if self.parallel_depth:
            raise self.error(target, f"a store into int4 buffer '{view.name}' inside T.Parallel "
                                     "writes half a byte that another lane shares; compute in "
                                     "int8 / int32 tiles, or store in a T.serial loop")
        return [view.store(self.int4_indices(target, view), value, self.loc(node))]

    def int4_indices(self, n: ast.Subscript, view: Int4Buffer) -> tuple:
        return self.element_indices(n, view.shape, f"int4 buffer '{view.name}' "
                                                   f"{list(view.shape)} (outside T.copy/T.gemm)")
