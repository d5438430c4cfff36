"""DeepGEMM's `tf32_hc_prenorm_gemm`: the GEMM of mHC's pre-norm with the row sums of squares.

`D = float(A) @ B.T` and `sqr_sum = sum(float(A)^2, axis=1)` for A [M, K] bfloat16 and B [N, K]
float32 (N small: 24 for 4 streams). With `num_splits=S`, K is split into S parts and D [S, M, N],
sqr_sum [S, M] receive the partial results (the caller sums them, as DeepGEMM's users do).
One kernel: block (bx, s) owns block_M rows and split s's K blocks; each K step feeds the cube
(tf32 GEMM on the float32-widened tile) and the vector unit (square and row-sum).

`atomic_reduce=True` is the Ascend port's in-kernel reduction: D [M, N] and sqr_sum [M] get the
full sums, the S splits' blocks adding their partials into them with atomic adds (after a kernel
that clears them; the order of the adds, hence the last bits of float32, may differ from the
caller's sum of partials).
"""
import tilelang_mini.language as T

from .._core import Plan, as_input, as_output, ceil_div, check_shape, dims, int_arg, library_function
from ._tiles import store_zeros


def hc_clear_kernel(M, N, block_M=64):
    """D [M, N] = 0 and SQ [M] = 0: the accumulators of the atomic form."""

    @T.prim_func
    def hc_prenorm_clear(D: T.Tensor((M, N), "float32"), SQ: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            store_zeros(D[bx * block_M, 0], (block_M, N))
            store_zeros(SQ[bx * block_M], (block_M,))

    return hc_prenorm_clear


@T.macro
def prenorm_block(A, B, row0, k0, n_k, block_M, block_N, block_K, num_stages=2):
    """`D_f, ss = prenorm_block(...)`: D_f (block_M, block_N) = float(A) @ B.T and ss (block_M,)
    = the row sums of float(A)^2 over A's rows [row0, row0 + block_M) and K blocks
    [k0, k0 + n_k) (all of B's N rows in one tile). Each K step casts the A tile to float32 (a
    casting T.copy) for the cube's tf32 GEMM and, as a separate vector op, squares it and
    accumulates the row sums."""
    A_s = T.alloc_shared((block_M, block_K), "bfloat16")
    A_f = T.alloc_shared((block_M, block_K), "float32")
    B_s = T.alloc_shared((block_N, block_K), "float32")
    D_f = T.alloc_fragment((block_M, block_N), "float32")
    sq = T.alloc_fragment((block_M, block_K), "float32")
    ss = T.alloc_fragment((block_M,), "float32")
    T.clear(D_f)
    T.clear(ss)
    for kk in T.Pipelined(n_k, num_stages=num_stages):
        # K blocks past the end load as zeros (clipped copies), adding nothing
        T.copy(A[row0, (k0 + kk) * block_K], A_s)
        T.copy(A_s, A_f)                                   # bfloat16 -> float32
        T.copy(B[0, (k0 + kk) * block_K], B_s)
        T.gemm(A_f, B_s, D_f, transpose_B=True)            # cube: tf32 GEMM
        for i, j in T.Parallel(block_M, block_K):          # vector: square ...
            sq[i, j] = A_f[i, j] * A_f[i, j]
        T.reduce_sum(sq, ss, dim=1, clear=False)           # ... and accumulate rows
    return D_f, ss


def hc_prenorm_kernel(M, N, K, splits, block_M=64, block_K=128, atomic=False):
    block_N = max(16, -(-N // 16) * 16)
    k_blocks = ceil_div(K, block_K)
    per_split = ceil_div(k_blocks, splits)

    @T.macro
    def body(A, B, D, SQ, bx, s):
        D_f, ss = prenorm_block(A, B, bx * block_M, s * per_split, per_split,
                                block_M, block_N, block_K)
        if atomic:  # every split adds its partial sums into the one result
            T.atomic_add(D[bx * block_M:(bx + 1) * block_M, :], D_f[:, 0:N])
            T.atomic_add(SQ[bx * block_M:(bx + 1) * block_M], ss)
        else:
            T.copy(D_f[:, 0:N], D[s, bx * block_M:(bx + 1) * block_M, :])
            T.copy(ss, SQ[s, bx * block_M])

    if atomic:
        @T.prim_func
        def tf32_hc_prenorm_atomic(A: T.Tensor((M, K), "bfloat16"),
                                   B: T.Tensor((N, K), "float32"),
                                   D: T.Tensor((M, N), "float32"), SQ: T.Tensor((M,), "float32")):
            with T.Kernel(T.ceildiv(M, block_M), splits) as (bx, s):
                body(A, B, D, SQ, bx, s)
        return tf32_hc_prenorm_atomic

    @T.prim_func
    def tf32_hc_prenorm(A: T.Tensor((M, K), "bfloat16"), B: T.Tensor((N, K), "float32"),
                        D: T.Tensor((splits, M, N), "float32"),
                        SQ: T.Tensor((splits, M), "float32")):
        with T.Kernel(T.ceildiv(M, block_M), splits) as (bx, s):
            body(A, B, D, SQ, bx, s)

    return tf32_hc_prenorm


def plan_hc_prenorm(ctx, plan, a, b, d, sqr_sum, num_splits, atomic_reduce=False):
    a_arr, b_arr = as_input(a, "bfloat16", "a"), as_input(b, "float32", "b")
    M, K = dims(a_arr, "M, K", "a")
    N = dims(b_arr, "N, K", "b")[0]
    check_shape(b_arr, (N, K), "b")
    splits = 1 if num_splits is None else int_arg(num_splits, "num_splits")
    if splits < 1:
        raise ValueError(f"num_splits must be at least 1, got {num_splits}")
    partials = num_splits is not None and not atomic_reduce
    want_d = (splits, M, N) if partials else (M, N)
    want_s = (splits, M) if partials else (M,)
    d_arr = as_output(plan, d, "d", "float32")
    s_arr = as_output(plan, sqr_sum, "sqr_sum", "float32")
    check_shape(d_arr, want_d, "d")
    check_shape(s_arr, want_s, "sqr_sum")
    if atomic_reduce:
        plan.launch(ctx.compile(hc_clear_kernel, M, N), d_arr, s_arr)
        plan.launch(ctx.compile(hc_prenorm_kernel, M, N, K, splits, 64, 128, True), a_arr, b_arr,
                    d_arr, s_arr)
        return
    kernel = ctx.compile(hc_prenorm_kernel, M, N, K, splits)
    plan.launch(kernel, a_arr, b_arr, d_arr.reshape(splits, M, N), s_arr.reshape(splits, M))


@library_function
def tf32_hc_prenorm_gemm(ctx, a, b, d, sqr_sum, num_splits=None, atomic_reduce=False):
    """D (= [M, N], or [S, M, N] partials) = float(A) @ B.T and sqr_sum ([M] or [S, M]) =
    sum(float(A)^2) per row; A [M, K] bfloat16, B [N, K] float32; written in place.
    atomic_reduce=True: the S splits add into D [M, N] and sqr_sum [M] in the kernel."""
    plan = Plan()
    plan_hc_prenorm(ctx, plan, a, b, d, sqr_sum, num_splits, bool(atomic_reduce))
    return plan
