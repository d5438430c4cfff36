"""DeepGEMM's `einsum(expr, a, b, d, c=None)`: the three bfloat16 expressions it supports.

* `"bmk,bnk->mn"`: D[m, n] = sum over s and k of A[s, m, k] * B[s, n, k] (A [S, M, K],
  B [S, N, K]). D float32 accumulates (`c` must be `d`, as DeepGEMM asserts: D += the sum);
  D bfloat16 gets the sum (no `c`).
* `"bhr,hdr->bhd"`: D[b, h, d] = sum_r A[b, h, r] * B[h, d, r] (A [B, H, R], B [H, D, R],
  D [B, H, D] bfloat16).
* `"bhd,hdr->bhr"`: D[b, h, r] = sum_d A[b, h, d] * B[h, d, r] (A [B, H, D], B [H, D, R],
  D [B, H, R] bfloat16).

Each is one GEMM kernel: the first runs its K loop over (s, k) blocks into one L0C
accumulator; the per-head ones are a GEMM per head h (grid z), reading A's rows of head h in
place (`A[b0:b0 + bm, h, k0:k0 + bk]`, a strided tile copy) and B[h] K-major (`hdr->bhd`,
transpose_B) or MN-major (`->bhr`).
"""
import tilelang_mini.language as T

from .._core import Plan, as_input, as_output, check_shape, dtype_of, library_function, to_numpy
from ._tiles import sum_with_c


def bmk_bnk_mn_kernel(S, M, N, K, out_dtype, accumulate, block_M=128, block_N=128, block_K=64):
    KT = T.ceildiv(K, block_K)
    add_c = sum_with_c(block_M, block_N, accumulate)

    @T.prim_func
    def einsum_bmk_bnk_mn(A: T.Tensor((S, M, K), "bfloat16"), B: T.Tensor((S, N, K), "bfloat16"),
                          D: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M)) as (bx, by):
            a_s = T.alloc_shared((block_M, block_K), "bfloat16")
            b_s = T.alloc_shared((block_N, block_K), "bfloat16")
            acc = T.alloc_fragment((block_M, block_N), "float32")
            out = T.alloc_fragment((block_M, block_N), out_dtype)
            T.clear(acc)
            for t in T.Pipelined(S * KT, num_stages=2):
                s = t // KT
                k = t % KT
                T.copy(A[s, by * block_M:(by + 1) * block_M, k * block_K:(k + 1) * block_K], a_s)
                T.copy(B[s, bx * block_N:(bx + 1) * block_N, k * block_K:(k + 1) * block_K], b_s)
                T.gemm(a_s, b_s, acc, transpose_B=True)
            add_c(D, acc, out, bx, by)
            T.copy(out, D[by * block_M, bx * block_N])

    return einsum_bmk_bnk_mn


def per_head_kernel(Bn, H, Kd, Nd, b_k_major, block_M=64, block_N=128, block_K=64):
    """D[b, h, n] = sum_k A[b, h, k] * B'[h][n, k]: B [H, Nd, Kd] when b_k_major (hdr->bhd),
    else [H, Kd, Nd] (hdr->bhr)."""
    b_shape = (H, Nd, Kd) if b_k_major else (H, Kd, Nd)
    b_tile = (block_N, block_K) if b_k_major else (block_K, block_N)

    @T.prim_func
    def einsum_per_head(A: T.Tensor((Bn, H, Kd), "bfloat16"), B: T.Tensor(b_shape, "bfloat16"),
                        D: T.Tensor((Bn, H, Nd), "bfloat16")):
        with T.Kernel(T.ceildiv(Nd, block_N), T.ceildiv(Bn, block_M), H) as (bx, by, h):
            a_s = T.alloc_shared((block_M, block_K), "bfloat16")
            b_s = T.alloc_shared(b_tile, "bfloat16")
            acc = T.alloc_fragment((block_M, block_N), "float32")
            out = T.alloc_fragment((block_M, block_N), "bfloat16")
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(Kd, block_K), num_stages=2):
                T.copy(A[by * block_M:(by + 1) * block_M, h, k * block_K:(k + 1) * block_K], a_s)
                if b_k_major:
                    T.copy(B[h, bx * block_N:(bx + 1) * block_N, k * block_K:(k + 1) * block_K],
                           b_s)
                else:
                    T.copy(B[h, k * block_K:(k + 1) * block_K, bx * block_N:(bx + 1) * block_N],
                           b_s)
                T.gemm(a_s, b_s, acc, transpose_B=b_k_major)
            T.copy(acc, out)
            T.copy(out, D[by * block_M:(by + 1) * block_M, h, bx * block_N:(bx + 1) * block_N])

    return einsum_per_head


EXPRS = ("bmk,bnk->mn", "bhr,hdr->bhd", "bhd,hdr->bhr")


@library_function
def einsum(ctx, expr, a, b, d, c=None, use_cublaslt=False):
    """d (written in place) = einsum(expr, a, b) for DeepGEMM's expressions; see the module
    doc. a and b bfloat16."""
    plan = Plan()
    expr = str(expr).replace(" ", "")
    if expr not in EXPRS:
        raise ValueError(f"einsum {expr!r} is not supported: one of {', '.join(EXPRS)}")
    a_arr, b_arr = as_input(a, "bfloat16", "a"), as_input(b, "bfloat16", "b")
    if a_arr.ndim != 3 or b_arr.ndim != 3:
        raise ValueError(f"einsum {expr}: a and b are 3-D, got {a_arr.shape} and {b_arr.shape}")
    d_np = to_numpy(d, "d")
    out_dtype = dtype_of(d_np)
    if expr == "bmk,bnk->mn":
        (S, M, K), N = a_arr.shape, b_arr.shape[1]
        check_shape(b_arr, (S, N, K), "b")
        check_shape(d_np, (M, N), "d")
        if out_dtype == "float32":
            if c is None or not (c is d or to_numpy(c, "c") is d_np):
                raise ValueError("einsum bmk,bnk->mn with a float32 d accumulates: pass c=d "
                                 "(DeepGEMM's rule)")
        elif out_dtype == "bfloat16":
            if c is not None:
                raise ValueError("einsum bmk,bnk->mn with a bfloat16 d takes no c")
        else:
            raise ValueError(f"d must be float32 or bfloat16, got {d_np.dtype}")
        d_arr = as_output(plan, d_np, "d")
        kernel = ctx.compile(bmk_bnk_mn_kernel, S, M, N, K, out_dtype, out_dtype == "float32")
        plan.launch(kernel, a_arr, b_arr, d_arr)
        return plan
    if c is not None:
        raise ValueError(f"einsum {expr} takes no c")
    if out_dtype != "bfloat16":
        raise ValueError(f"einsum {expr}: d must be bfloat16, got {d_np.dtype}")
    Bn, H, Kd = a_arr.shape
    k_major = expr == "bhr,hdr->bhd"
    Nd = b_arr.shape[1] if k_major else b_arr.shape[2]
    check_shape(b_arr, (H, Nd, Kd) if k_major else (H, Kd, Nd), "b")
    check_shape(d_np, (Bn, H, Nd), "d")
    d_arr = as_output(plan, d_np, "d")
    plan.launch(ctx.compile(per_head_kernel, Bn, H, Kd, Nd, k_major), a_arr, b_arr, d_arr)
    return plan
