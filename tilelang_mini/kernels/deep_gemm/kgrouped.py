"""DeepGEMM's k-grouped GEMMs, the MoE weight gradient grouped along K:
`k_grouped_fp8_gemm_tn_contiguous` and `k_grouped_bf16_gemm_tn_contiguous`.

A [sum_k, M], B [sum_k, N] (MN-major: DeepGEMM's tn form): group g owns the K rows
[off_g, off_g + k_g) of A and B (k_g from ks, multiples of 128, zero allowed). FP8: a = (A e4m3,
sfa [sum_k/128, M]), b = (B, sfb [sum_k/128, N]), one scale per 128 K rows and per column (recipe
(1, 1, 128)), group g's scale rows [off_g/128, (off_g + k_g)/128). D [G, M, N] float32 =
C + A_g.T @ B_g per group; `c` may be `d` (in-place, as DeepGEMM's tests call it); a separate C
is copied into D first (one copy launch), then accumulated in place.

One kernel: block (bx, by, g) loops over the group's K blocks (the count and offsets read at run
time: `T.Pipelined(NKB[g], num_stages=2)`, double-buffered like a constant count); the cube
multiplies the MN-major tiles (transpose_A). FP8: the vector unit folds `P * sfa[kb, m] * sfb[kb, n]` into the
accumulator per K block; bf16: the cube accumulates the group's K blocks in L0C and the vector
unit adds C once.

`k_grouped_fp8_gemm_nt_contiguous` (DeepGEMM's SM90 form) stores each group's A as a K-major
[M, k_g] matrix one after the other in a flat buffer (B likewise, [N, k_g]): a tile of group g
is strided by k_g, which a kernel cannot take at run time (T.copy regions have compile-time
strides), but DeepGEMM requires `ks_cpu` for it, so the host knows every k_g: the call views each
group's [M, k_g] / [N, k_g] slice of the flat buffers (no copy) and launches the dense FP8 nt
GEMM kernel on it (recipe (1, 1, 128), `D[g]` in place as its C), one launch per non-empty
group (one compiled kernel per distinct k_g). Scales: sfa [M, sum_k/128], sfb [N, sum_k/128]
(DeepGEMM's tests pass the tn scales transposed, `sf.T`), group g's columns
[off_g/128, (off_g + k_g)/128).
"""
import numpy as np

import tilelang_mini.language as T

from .._core import Plan, as_input, as_output, check_shape, library_function, to_numpy
from ._tiles import (compile_fitting, fp8_cube, fp8_operand_tiles, gemm_kernel, scaled_block_m,
                     store_zeros)

GRAN = 128


def k_grouped_kernel(G, M, N, SK, SKB, zero_c, cube_fp8, block_M=128, block_N=128):
    """The FP8 kernel: D[g] = (0 if zero_c else D[g]) + sum over g's K blocks of
    (A_kb.T @ B_kb) * sfa[kb] (x) sfb[kb]."""
    mma = "float8_e4m3fn" if cube_fp8 else "bfloat16"
    widen = not cube_fp8
    block_M = block_M if cube_fp8 else 64

    @T.prim_func
    def k_grouped_fp8_gemm(A: T.Tensor((SK, M), "float8_e4m3fn"),
                           SFA: T.Tensor((SKB, M), "float32"),
                           B: T.Tensor((SK, N), "float8_e4m3fn"),
                           SFB: T.Tensor((SKB, N), "float32"),
                           D: T.Tensor((G, M, N), "float32"),
                           OFF: T.Tensor((G,), "int32"), KBOFF: T.Tensor((G,), "int32"),
                           NKB: T.Tensor((G,), "int32")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), G) as (bx, by, g):
            a_s, b_s, a_w, b_w = fp8_operand_tiles((GRAN, block_M), (GRAN, block_N), mma)
            P = T.alloc_fragment((block_M, block_N), "float32")
            acc = T.alloc_fragment((block_M, block_N), "float32")
            sa = T.alloc_fragment((1, block_M), "float32")
            sb = T.alloc_fragment((1, block_N), "float32")
            if zero_c:
                T.clear(acc)
            else:
                T.copy(D[g, by * block_M, bx * block_N], acc)
            for kb in T.Pipelined(NKB[g], num_stages=2):
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

    return k_grouped_fp8_gemm


def k_grouped_bf16_kernel(G, M, N, SK, zero_c, block_M=128, block_N=128):
    """The bf16 kernel: D[g] = (0 if zero_c else D[g]) + A_g.T @ B_g, the group's K blocks
    accumulated in L0C."""

    @T.prim_func
    def k_grouped_bf16_gemm(A: T.Tensor((SK, M), "bfloat16"), B: T.Tensor((SK, N), "bfloat16"),
                            D: T.Tensor((G, M, N), "float32"), OFF: T.Tensor((G,), "int32"),
                            NKB: T.Tensor((G,), "int32")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), G) as (bx, by, g):
            a_s = T.alloc_shared((GRAN, block_M), "bfloat16")
            b_s = T.alloc_shared((GRAN, block_N), "bfloat16")
            P = T.alloc_fragment((block_M, block_N), "float32")
            acc = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(P)
            for kb in T.Pipelined(NKB[g], num_stages=2):
                T.copy(A[OFF[g] + kb * GRAN, by * block_M], a_s)
                T.copy(B[OFF[g] + kb * GRAN, bx * block_N], b_s)
                T.gemm(a_s, b_s, P, transpose_A=True)
            if zero_c:
                T.copy(P, acc)
            else:
                T.copy(D[g, by * block_M, bx * block_N], acc)
                for i, j in T.Parallel(block_M, block_N):
                    acc[i, j] = acc[i, j] + P[i, j]
            T.copy(acc, D[g, by * block_M, bx * block_N])

    return k_grouped_bf16_gemm


def copy_kernel(G, M, N, block_M=64, block_N=128):
    """D = C ([G, M, N] float32): a separate C of the k-grouped GEMMs, before the in-place sum."""

    @T.prim_func
    def k_grouped_c_copy(C: T.Tensor((G, M, N), "float32"), D: T.Tensor((G, M, N), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), G) as (bx, by, g):
            t = T.alloc_fragment((block_M, block_N), "float32")
            T.copy(C[g, by * block_M, bx * block_N], t)
            T.copy(t, D[g, by * block_M, bx * block_N])

    return k_grouped_c_copy


def _k_groups(ks_cpu, grouped_layout):
    """(ks, offsets, K blocks per group) from ks_cpu (or grouped_layout)."""
    ks = [int(k) for k in (ks_cpu if ks_cpu is not None else np.asarray(grouped_layout))]
    if any(k % GRAN or k < 0 for k in ks):
        raise ValueError(f"each group's K must be a multiple of {GRAN}: {ks}")
    off = np.concatenate([[0], np.cumsum(ks)[:-1]]).astype(np.int32) if ks else \
        np.zeros(0, np.int32)
    nkb = np.array([k // GRAN for k in ks], np.int32)
    return ks, off, nkb


def _operands(a, b, ks, dtype):
    a_arr, b_arr = as_input(a, dtype, "a"), as_input(b, dtype, "b")
    if a_arr.ndim != 2 or b_arr.ndim != 2:
        raise ValueError(f"a and b must be [sum_k, M] and [sum_k, N], got {a_arr.shape} and "
                         f"{b_arr.shape}")
    if a_arr.shape[0] != sum(ks) or b_arr.shape[0] != sum(ks):
        raise ValueError(f"a {a_arr.shape} and b {b_arr.shape} must have the groups' "
                         f"{sum(ks)} K rows")
    return a_arr, b_arr


def _d_from_c(ctx, plan, c, d, G, M, N):
    """The output array and whether it starts from zero; a separate C is copied into it."""
    d_arr = as_output(plan, d, "d", "float32")
    check_shape(d_arr, (G, M, N), "d")
    if not (M and N):
        raise ValueError(f"d has shape {d_arr.shape}: M and N must be at least 1 (only a "
                         f"group's K may be 0)")
    if c is None:
        return d_arr, True
    if not np.shares_memory(np.asarray(c), d_arr):
        c_arr = as_input(c, "float32", "c")
        check_shape(c_arr, (G, M, N), "c")
        plan.launch(ctx.compile(copy_kernel, G, M, N), c_arr, d_arr)
    return d_arr, False


def _all_groups_empty(ctx, plan, d_arr, zero_c):
    """Every group's K is 0 (no operand rows: no GEMM kernel has a shape): D[g] = C[g], already
    there (c is d, or copied by _d_from_c), or 0 when there is no C."""
    if zero_c and d_arr.size:
        G, M, N = d_arr.shape
        plan.launch(ctx.compile(clear_kernel, G * M, N), d_arr.reshape(G * M, N))
    return plan


@library_function(empty_ok=True)  # groups with no K rows
def k_grouped_fp8_gemm_tn_contiguous(ctx, a, b, d, ks_cpu, grouped_layout=None, c=None,
                                     recipe=(1, 1, 128), **_ignored):
    """D[g] = C[g] + A[K rows of g].T @ B[K rows of g]; see the module doc. `ks_cpu` (or
    `grouped_layout`) lists each group's K (multiples of 128)."""
    plan = Plan()
    if tuple(recipe) != (1, 1, GRAN):
        raise ValueError(f"recipe {recipe!r}: only (1, 1, 128) is supported")
    (a0, sfa), (b0, sfb) = a, b
    ks, off, nkb = _k_groups(ks_cpu, grouped_layout)
    a_arr, b_arr = _operands(a0, b0, ks, "float8_e4m3fn")
    (SK, M), N, G = a_arr.shape, b_arr.shape[1], len(ks)
    SKB = SK // GRAN
    sfa_arr, sfb_arr = as_input(sfa, "float32", "sfa"), as_input(sfb, "float32", "sfb")
    check_shape(sfa_arr, (SKB, M), "sfa")
    check_shape(sfb_arr, (SKB, N), "sfb")
    d_arr, zero_c = _d_from_c(ctx, plan, c, d, G, M, N)
    if SK == 0:
        return _all_groups_empty(ctx, plan, d_arr, zero_c)
    kernel = ctx.compile(k_grouped_kernel, G, M, N, SK, SKB, zero_c, fp8_cube(ctx.chip))
    plan.launch(kernel, a_arr, sfa_arr, b_arr, sfb_arr, d_arr, off, off // GRAN, nkb)
    return plan


@library_function(empty_ok=True)  # groups with no K rows
def k_grouped_bf16_gemm_tn_contiguous(ctx, a, b, d, ks_cpu, grouped_layout=None, c=None,
                                      **_ignored):
    """The bf16 form: A [sum_k, M], B [sum_k, N] bfloat16; D[g] = C[g] + A_g.T @ B_g."""
    plan = Plan()
    ks, off, nkb = _k_groups(ks_cpu, grouped_layout)
    a_arr, b_arr = _operands(a, b, ks, "bfloat16")
    (SK, M), N, G = a_arr.shape, b_arr.shape[1], len(ks)
    d_arr, zero_c = _d_from_c(ctx, plan, c, d, G, M, N)
    if SK == 0:
        return _all_groups_empty(ctx, plan, d_arr, zero_c)
    kernel = ctx.compile(k_grouped_bf16_kernel, G, M, N, SK, zero_c)
    plan.launch(kernel, a_arr, b_arr, d_arr, off, nkb)
    return plan


def clear_kernel(M, N, block_M=64, block_N=128):
    """D = 0 ([M, N] float32): an empty group's D[g] when there is no C."""

    @T.prim_func
    def k_grouped_clear(D: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M)) as (bx, by):
            store_zeros(D[by * block_M, bx * block_N], (block_M, block_N))

    return k_grouped_clear


def _nt_scales(sf, rows, SKB, name):
    """Per-row scales [rows, sum_k/128] (any strides: DeepGEMM passes the tn scales' `.T`); a
    [sum_k/128, rows] array (when not square) is read as that transposed."""
    arr = as_input(sf, "float32", name)
    if arr.shape == (rows, SKB):
        return arr
    if arr.shape == (SKB, rows):
        return np.ascontiguousarray(arr.T)
    raise ValueError(f"{name} has shape {arr.shape}; expected fp32 scales [{rows}, {SKB}] (one per "
                     f"row and 128 K values of the groups' K)")


@library_function(empty_ok=True)  # groups with no K rows
def k_grouped_fp8_gemm_nt_contiguous(ctx, a, b, d, ks_cpu, grouped_layout=None, c=None,
                                     recipe=(1, 1, 128), **_ignored):
    """D[g] = C[g] + A_g @ B_g.T with each group's A_g [M, k_g] and B_g [N, k_g] K-major, one after
    the other in flat buffers (a: sum_k * M values, b: sum_k * N); see the module doc."""
    plan = Plan()
    if tuple(recipe) != (1, 1, GRAN):
        raise ValueError(f"recipe {recipe!r}: only (1, 1, 128) is supported")
    if ks_cpu is None:
        raise ValueError("k_grouped_fp8_gemm_nt_contiguous needs ks_cpu (each group's K, as "
                         "DeepGEMM requires for this layout)")
    (a0, sfa), (b0, sfb) = a, b
    ks, off, nkb = _k_groups(ks_cpu, None)
    d_np = to_numpy(d, "d")
    if d_np.ndim != 3 or d_np.shape[0] != len(ks):
        raise ValueError(f"d must be [G, M, N] float32 with G = len(ks_cpu) = {len(ks)}, got "
                         f"{d_np.shape}")
    G, M, N = d_np.shape
    SK = sum(ks)
    a_flat = as_input(a0, "float8_e4m3fn", "a").reshape(-1)
    b_flat = as_input(b0, "float8_e4m3fn", "b").reshape(-1)
    if a_flat.size != SK * M or b_flat.size != SK * N:
        raise ValueError(f"a and b must hold sum_k * M = {SK * M} and sum_k * N = {SK * N} "
                         f"values (each group's [M, k_g] / [N, k_g] K-major), got {a_flat.size} "
                         f"and {b_flat.size}")
    sfa_arr = _nt_scales(sfa, M, SK // GRAN, "sfa")
    sfb_arr = _nt_scales(sfb, N, SK // GRAN, "sfb")
    d_arr, zero_c = _d_from_c(ctx, plan, c, d, G, M, N)
    cube = fp8_cube(ctx.chip)
    for g, (k, o) in enumerate(zip(ks, off)):
        if k == 0:
            if zero_c:
                plan.launch(ctx.compile(clear_kernel, M, N), d_arr[g])
            continue
        o, kb0 = int(o), int(o) // GRAN
        a_g = a_flat[o * M:(o + k) * M].reshape(M, k)
        b_g = b_flat[o * N:(o + k) * N].reshape(N, k)
        sfa_g = np.ascontiguousarray(sfa_arr[:, kb0:kb0 + k // GRAN])
        sfb_g = np.ascontiguousarray(sfb_arr[:, kb0:kb0 + k // GRAN])
        kernel = compile_fitting(ctx, scaled_block_m(ctx.chip, M), lambda bm, k=k: (
            gemm_kernel, M, N, k, False, False, "float8_e4m3fn", "float32",
            None if zero_c else "inplace", "channel", cube, bm))
        plan.launch(kernel, a_g, sfa_g, b_g, sfb_g, d_arr[g])
    return plan
