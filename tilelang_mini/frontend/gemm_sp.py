"""`T.gemm_sp(A_sparse, E, B, C, ...)`: TileLang's 2:4 structured-sparse GEMM.

A_sparse holds the kept values of A (each group of `group` consecutive K elements keeps
`elem`: 2 of 4 for 8/16-bit A, 1 of 2 for 32-bit A), E their positions in TileLang's natural
row-major metadata (examples/gemm_sp's compressor, tilelang/cuda/intrinsics/sparse_layout): one
4-bit field per group, least significant first, E's dtype holding bits/4 of them; field bits
[1:0] the first kept position in the group (0-3), [3:2] the second (32-bit A: 0b0100 keeps
element 0 of its pair, 0b1110 element 1). The cube has no sparse mode, so the GEMM runs dense:
a vector map rebuilds A (zeros where nothing is kept) into a hidden tile, then a T.gemm:

    T.gemm_sp(A_s, E_s, B_s, C)     ->   for i, k in T.Parallel(bm, bk):
                                             f = (E_s[i, k // ef] >> 4 * (k // g % (ef // g))) & 15
                                             A_dense[i, k] = A_s[i, k // g * e + 0] if k % g == f & 3
                                                        else A_s[i, k // g * e + 1] if k % g == f >> 2
                                                        else 0
                                         T.gemm(A_dense, B_s, C)

(32-bit A: `A_dense[i, k] = A_s[i, k // 2] if k % 2 == (f & 3) // 2 else 0`.)
"""
from __future__ import annotations

from ..ir import dtypes
from ..ir.nodes import Alloc, Buffer, For, Load, Region, Store, Var
from .common import show
from .exprs import as_expr, binop, const

_GEMM_SP_ARGS = ["A_sparse", "E", "B", "C", "transpose_A", "transpose_E", "transpose_B",
                 "policy", "clear_accum", "k_pack", "wg_wait", "annotations"]


class GemmSparse:
    def op_gemm_sp(self, call) -> list:
        a = self.args(call, _GEMM_SP_ARGS, {n: None for n in _GEMM_SP_ARGS[4:]})
        regs = {n: self.full_region(a[n]) for n in ("A_sparse", "E", "B", "C")}
        for flag in ("transpose_A", "transpose_E"):
            if self.bool_arg(a.get(flag), False):
                raise self.error(a[flag], f"T.gemm_sp with {flag}=True is not supported: pass "
                                          "A_sparse as (M, K/2) rows and E as (M, K/e_factor) "
                                          "rows (the compressor's natural layout)")
        sp, meta = regs["A_sparse"], regs["E"]
        bits = dtypes.itemsize(sp.buffer.dtype) * 8
        group, elem = (2, 1) if bits == 32 else (4, 2)
        if not dtypes.is_int(meta.buffer.dtype) or len(sp.extent) != 2 or len(meta.extent) != 2:
            raise self.error(call, "T.gemm_sp takes 2-D A_sparse and integer metadata E tiles, "
                                   f"got {show(sp.buffer.dtype)} / {show(meta.buffer.dtype)}")
        fields = dtypes.itemsize(meta.buffer.dtype) * 2         # 4-bit fields per E element
        e_factor = fields * group                               # K elements per E element
        rows, kept = sp.extent
        K = kept * group // elem
        if meta.extent != (rows, K // e_factor):
            raise self.error(a["E"], f"T.gemm_sp metadata for A_sparse {sp.extent} of "
                                     f"{sp.buffer.dtype} is ({rows}, {K // e_factor}) of "
                                     f"{meta.buffer.dtype}; got {meta.extent}")
        loc = self.loc(call)
        dense = Buffer(self.fresh_buffer_name(f"{sp.buffer.name}_dense"), (rows, K),
                       sp.buffer.dtype, "fragment")
        self.hoisted_allocs[dense.name] = Alloc(dense, None, loc)
        i, k = Var(self.fresh_var("i")), Var(self.fresh_var("k"))

        def at(r, *idx):
            return Load(r.buffer, tuple(as_expr(binop("+", s, x)) for s, x in zip(r.start, idx)))

        from .dialect import select
        g = binop("//", k, group)
        shift = binop("*", binop("%", g, fields), 4)
        field = binop("&", binop(">>", at(meta, i, binop("//", k, e_factor)), shift), 15)
        pos = binop("%", k, group)
        zero = 0 if dtypes.is_int(sp.buffer.dtype) else 0.0
        if elem == 1:
            value = select(binop("==", pos, binop("//", binop("&", field, 3), 2)),
                           at(sp, i, g), zero)
        else:
            first = at(sp, i, binop("*", g, 2))
            second = at(sp, i, binop("+", binop("*", g, 2), 1))
            value = select(binop("==", pos, binop("&", field, 3)), first,
                           select(binop("==", pos, binop(">>", field, 2)), second, zero))
        rebuild = For((i.name, k.name), (const(rows), const(K)), "parallel",
                      (Store(dense, (i, k), as_expr(value), loc),), 0, loc)
        clear_node = a.get("clear_accum")
        clear = False if clear_node is None else self.resolved(self.eval(clear_node), clear_node)
        trans_b = self.bool_arg(a.get("transpose_B"), False)
        self.record_hint(call, [kw for kw in call.keywords
                                if kw.arg in ("policy", "k_pack", "wg_wait", "annotations")])
        gemm = self.gemm_clear([Region.full(dense), regs["B"], regs["C"]], [False, trans_b],
                               clear, loc)
        return [rebuild, gemm]
