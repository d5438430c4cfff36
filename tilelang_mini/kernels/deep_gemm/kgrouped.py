"""DeepGEMM's `k_grouped_fp8_gemm_tn_contiguous`: the MoE weight gradient, grouped along K.

a = (A [sum_k, M] e4m3, sfa [sum_kb, M]), b = (B [sum_k, N] e4m3, sfb [sum_kb, N]): group g owns
the K rows [off_g, off_g + k_g) of A and B (k_g from ks, multiples of 128, zero allowed) and the
scale rows [kboff_g, kboff_g + k_g / 128) (recipe (1, 1, 128): one scale per 128 K rows and per
column). D [G, M, N] float32 = C + A_g.T @ B_g per group; `c` may be `d` (in-place).

One kernel: block (bx, by, g) loops over the group's K blocks (the count and offsets read at run
time; the loop runs to the largest group and skips the rest); the cube multiplies the MN-major
tiles (transpose_A), the vector unit folds `P * sfa[kb, m] * sfb[kb, n]` into the accumulator.
"""
import numpy as np

import tilelang_mini.language as T

from .._core import Plan, as_input, as_output, ceil_div, check_shape, library_function
from ._tiles import fp8_cube

GRAN = 128


def k_grouped_kernel(G, M, N, SK, SKB, max_kb, c_mode, cube_fp8, block_M=128, block_N=128):
    separate_c = c_mode == "separate"
    zero_c = c_mode == "none"
    mma = "float8_e4m3fn" if cube_fp8 else "bfloat16"
    widen = not cube_fp8
    block_M = block_M if cube_fp8 else 64

    @T.macro
    def body(A, SFA, B, SFB, C, D, OFF, KBOFF, NKB, bx, by, g):
        a_s = T.alloc_shared((GRAN, block_M), "float8_e4m3fn")
        b_s = T.alloc_shared((GRAN, block_N), "float8_e4m3fn")
        a_w = T.alloc_shared((GRAN, block_M), mma)
        b_w = T.alloc_shared((GRAN, block_N), mma)
        P = T.alloc_fragment((block_M, block_N), "float32")
        acc = T.alloc_fragment((block_M, block_N), "float32")
        sa = T.alloc_fragment((1, block_M), "float32")
        sb = T.alloc_fragment((1, block_N), "float32")
        if zero_c:
            T.clear(acc)
        else:
            T.copy(C[g, by * block_M, bx * block_N], acc)
        for kb in T.serial(max_kb):
            if kb < NKB[g]:
                T.copy(A[OFF[g] + kb * GRAN, by * block_M], a_s)
                T.copy(B[OFF[g] + kb * GRAN, bx * block_N], b_s)
                T.copy(SFA[KBOFF[g] + kb, by * block_M], sa)
                T.copy(SFB[KBOFF[g] + kb, bx * block_N], sb)
                if widen:
                    T.copy(a_s, a_w)
                    T.copy(b_s, b_w)
                    T.gemm(a_w, b_w, P, transpose_A=True, clear_accum=True)
                else:
                    T.gemm(a_s, b_s, P, transpose_A=True, clear_accum=True)
                for i, j in T.Parallel(block_M, block_N):
                    acc[i, j] = acc[i, j] + P[i, j] * (sa[0, i] * sb[0, j])
        T.copy(acc, D[g, by * block_M, bx * block_N])

    grid = (T.ceildiv(N, block_N), T.ceildiv(M, block_M), G)
    if separate_c:
        @T.prim_func
        def k_grouped_fp8_gemm_c(A: T.Tensor((SK, M), "float8_e4m3fn"),
                                 SFA: T.Tensor((SKB, M), "float32"),
                                 B: T.Tensor((SK, N), "float8_e4m3fn"),
                                 SFB: T.Tensor((SKB, N), "float32"),
                                 C: T.Tensor((G, M, N), "float32"),
                                 D: T.Tensor((G, M, N), "float32"),
                                 OFF: T.Tensor((G,), "int32"), KBOFF: T.Tensor((G,), "int32"),
                                 NKB: T.Tensor((G,), "int32")):
            with T.Kernel(grid[0], grid[1], grid[2]) as (bx, by, g):
                body(A, SFA, B, SFB, C, D, OFF, KBOFF, NKB, bx, by, g)
        return k_grouped_fp8_gemm_c

    @T.prim_func
    def k_grouped_fp8_gemm(A: T.Tensor((SK, M), "float8_e4m3fn"),
                           SFA: T.Tensor((SKB, M), "float32"),
                           B: T.Tensor((SK, N), "float8_e4m3fn"),
                           SFB: T.Tensor((SKB, N), "float32"),
                           D: T.Tensor((G, M, N), "float32"),
                           OFF: T.Tensor((G,), "int32"), KBOFF: T.Tensor((G,), "int32"),
                           NKB: T.Tensor((G,), "int32")):
        with T.Kernel(grid[0], grid[1], grid[2]) as (bx, by, g):
            body(A, SFA, B, SFB, D, D, OFF, KBOFF, NKB, bx, by, g)
    return k_grouped_fp8_gemm


@library_function
def k_grouped_fp8_gemm_tn_contiguous(ctx, a, b, d, ks_cpu, grouped_layout=None, c=None,
                                     recipe=(1, 1, 128), **_ignored):
    """D[g] = C[g] + A[K rows of g].T @ B[K rows of g]; see the module doc. `ks_cpu` (or
    `grouped_layout`) lists each group's K (multiples of 128)."""
    plan = Plan()
    if tuple(recipe) != (1, 1, GRAN):
        raise ValueError(f"recipe {recipe!r}: only (1, 1, 128) is supported")
    (a0, sfa), (b0, sfb) = a, b
    a_arr, b_arr = as_input(a0, "float8_e4m3fn", "a"), as_input(b0, "float8_e4m3fn", "b")
    ks = [int(k) for k in (ks_cpu if ks_cpu is not None else np.asarray(grouped_layout))]
    if any(k % GRAN or k < 0 for k in ks):
        raise ValueError(f"each group's K must be a multiple of {GRAN}: {ks}")
    G = len(ks)
    SK, M = a_arr.shape
    N = b_arr.shape[1]
    check_shape(b_arr, (sum(ks), N), "b[0]")
    if SK != sum(ks):
        raise ValueError(f"a[0] has {SK} K rows; the groups sum to {sum(ks)}")
    SKB = sum(ks) // GRAN
    sfa_arr, sfb_arr = as_input(sfa, "float32", "sfa"), as_input(sfb, "float32", "sfb")
    check_shape(sfa_arr, (SKB, M), "sfa")
    check_shape(sfb_arr, (SKB, N), "sfb")
    d_arr = as_output(plan, d, "d", "float32")
    check_shape(d_arr, (G, M, N), "d")
    off = np.concatenate([[0], np.cumsum(ks)[:-1]]).astype(np.int32)
    nkb = np.array([k // GRAN for k in ks], np.int32)
    kboff = (off // GRAN).astype(np.int32)
    max_kb = max(1, int(nkb.max()) if G else 1)
    separate = c is not None and not np.shares_memory(np.asarray(c), d_arr)
    mode = "none" if c is None else ("separate" if separate else "inplace")
    kernel = ctx.compile(k_grouped_kernel, G, M, N, SK, SKB, max_kb, mode, fp8_cube(ctx.chip))
    if separate:
        c_arr = as_input(c, "float32", "c")
        check_shape(c_arr, (G, M, N), "c")
        plan.launch(kernel, a_arr, sfa_arr, b_arr, sfb_arr, c_arr, d_arr, off, kboff, nkb)
    else:
        plan.launch(kernel, a_arr, sfa_arr, b_arr, sfb_arr, d_arr, off, kboff, nkb)
    return plan
