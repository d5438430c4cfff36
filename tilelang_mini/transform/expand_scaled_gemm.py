"""expand_scaled_gemm: a block-scaled (MX) gemm -> two scaling maps and a plain float32 gemm.

For CPU targets, whose GEMM micro-kernel has no scale operands. The cube applies the scales
inside its MMAD (semantics/ops.py defines the result); here each operand is scaled into a float32
tile first (a UE8M0 byte e is 2^(e - 127): the bits e << 23 of a float32, 0x00400000 for e = 0,
a NaN for e = 255), which gives the same products, since multiplying by a power of two is exact:

    gemm(a, b, c, transpose_B=True, scale_A=sa, scale_B=sb, scale_gran=128)
->  for i, j in parallel(32, 256):
        a_mx[i, j] = cast(a[i, j], "float32") * reinterpret(<UE8M0 of sa[(j // 128) // 2, i]>)
    for i, j in parallel(48, 256):
        b_mx[i, j] = cast(b[i, j], "float32") * reinterpret(<UE8M0 of sb[(j // 128) // 2, i]>)
    gemm(a_mx, b_mx, c, transpose_B=True)

The scaled tiles live in the operands' scopes (float32); everything else is unchanged. A packed
FP4 operand (float4_e2m1fn_x2, two e2m1 codes a byte along K) gives a tile twice as long in K:
element k is the nibble `(byte[k // 2] >> (k % 2) * 4) & 15` read as a float4_e2m1fn value.

A gemm on packed int4 operands (int4x2, two values a byte along K, which the 910b cube takes
as they are) becomes the same way an int8 gemm on unpacked tiles, the nibbles sign-extended:

    gemm(a4, b4, c, transpose_B=True)   (a4: [32, 64] int4x2, i.e. 32 x 128 int4)
->  for i, k in parallel(32, 128):
        a4_i8[i, k] = n - (n & 8) * 2   where n = (a4[i, k // 2] >> (k % 2) * 4) & 15
    ... (b4 likewise)
    gemm(a4_i8, b4_i8, c, transpose_B=True)
"""
from __future__ import annotations

from dataclasses import replace

from ..ir.nodes import (
    Alloc, BinOp, Buffer, Call, Cast, Const, For, Gemm, Kernel, Load, Region, Reinterpret, Store,
    Var, walk,
)
from .util import fresh_name, map_bodies


def expand_scaled_gemm(kernel: Kernel) -> Kernel:
    """Every scaled Gemm of `kernel` as scaling maps + a float32 gemm (see the module doc)."""
    if not any(isinstance(n, Gemm) and (n.scale_gran or n.a.buffer.dtype == "int4x2")
               for s in kernel.body for n in walk(s)):
        return kernel
    names = {n.name for s in kernel.body for n in walk(s) if isinstance(n, Buffer)}
    names |= {p.name for p in kernel.params}
    new_allocs: list[Alloc] = []

    def fresh(base: str) -> str:
        return fresh_name(base, names)

    def scaled(r: Region, s: Region, mn_first: bool, gran: int, loc) -> Region:
        rows, cols = r.extent[-2], r.extent[-1]
        packed = r.buffer.dtype == "float4_e2m1fn_x2"  # K values two a byte: K doubles
        if packed:
            rows, cols = (rows, 2 * cols) if mn_first else (2 * rows, cols)
        buf = Buffer(fresh(f"{r.buffer.name}_mx"), (rows, cols), "float32", r.buffer.scope)
        new_allocs.append(Alloc(buf, None, loc))
        iv, jv = fresh("mx_i"), fresh("mx_j")
        i, j = Var(iv), Var(jv)
        mn, k = (i, j) if mn_first else (j, i)
        if packed:
            half = BinOp("//", k, Const(2))
            byte = Load(r.buffer, _at(r, i, half) if mn_first else _at(r, half, j))
            code = Call("bitwise_and", (Call("shift_right", (
                byte, BinOp("*", BinOp("%", k, Const(2)), Const(4)))), Const(15)))
            element = Cast("float32", Reinterpret("float4_e2m1fn", "uint8", code))
        else:
            element = Cast("float32", Load(r.buffer, _at(r, i, j)))
        value = BinOp("*", element, _scale(s, mn, BinOp("//", k, Const(gran))))
        store = Store(buf, (i, j), value, loc)
        return Region.full(buf), For((iv, jv), (Const(rows), Const(cols)), "parallel",
                                     (store,), 0, loc)

    def unpacked(r: Region, loc) -> tuple:
        """An int8 tile of int4x2 operand `r` unpacked along its last dim, and its map."""
        rows, cols = r.extent[-2], 2 * r.extent[-1]
        buf = Buffer(fresh(f"{r.buffer.name}_i8"), (rows, cols), "int8", r.buffer.scope)
        new_allocs.append(Alloc(buf, None, loc))
        iv, jv = fresh("i4_i"), fresh("i4_k")
        i, k = Var(iv), Var(jv)
        byte = Load(r.buffer, _at(r, i, BinOp("//", k, Const(2))))
        nib = Call("bitwise_and", (Call("shift_right", (
            byte, BinOp("*", BinOp("%", k, Const(2)), Const(4)))), Const(15)))
        value = BinOp("-", nib, BinOp("*", Call("bitwise_and", (nib, Const(8))), Const(2)))
        return Region.full(buf), For((iv, jv), (Const(rows), Const(cols)), "parallel",
                                     (Store(buf, (i, k), value, loc),), 0, loc)

    def rewrite(stmts) -> list:
        out = []
        for s in stmts:
            if isinstance(s, Gemm) and not s.scale_gran and s.a.buffer.dtype == "int4x2":
                a, map_a = unpacked(s.a, s.loc)
                b, map_b = unpacked(s.b, s.loc)
                out += [map_a, map_b, replace(s, a=a, b=b)]
            elif isinstance(s, Gemm) and s.scale_gran:
                a, map_a = scaled(s.a, s.scale_a, not s.transpose_a, s.scale_gran, s.loc)
                b, map_b = scaled(s.b, s.scale_b, s.transpose_b, s.scale_gran, s.loc)
                out += [map_a, map_b, replace(s, a=a, b=b, scale_a=None, scale_b=None,
                                              scale_gran=0)]
            else:
                out.append(map_bodies(s, rewrite))
        return out

    body = rewrite(list(kernel.body))
    return replace(kernel, body=tuple(new_allocs) + tuple(body))


def _at(r: Region, i, j) -> tuple:
    """The index of element (i, j) of the 2-D tile `r` (its last two dimensions)."""
    n = len(r.start)
    return tuple(BinOp("+", st, (i if d == n - 2 else j)) if d >= n - 2 else st
                 for d, st in enumerate(r.start))


def _scale(s: Region, mn, group):
    """float32 scale of row/column `mn`, K group `group` of the scale tile `s`."""
    if s.buffer.dtype == "uint16":  # pairs, MN-major: [group // 2, mn], byte group % 2
        word = Load(s.buffer, _at(s, BinOp("//", group, Const(2)), mn))
        shift = BinOp("*", BinOp("%", group, Const(2)), Const(8))
        e = Call("bitwise_and", (Call("shift_right", (word, shift)), Const(255)))
    else:
        e = Reinterpret("uint8", s.buffer.dtype, Load(s.buffer, _at(s, mn, group)))
    bits = Call("select", (BinOp("==", e, Const(0)), Const(0x00400000),
                           Call("select", (BinOp("==", e, Const(255)), Const(0x7FC00000),
                                           Call("shift_left", (e, Const(23)))))))
    return Reinterpret("float32", "int32", bits)
