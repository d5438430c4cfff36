"""DeepGEMM's `einsum(expr, a, b, d, c=None)`: the three bfloat16 expressions it supports, and
`fp8_einsum` (three FP8 expressions with fp32 scales, one per-head GEMM kernel: see its doc).

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
import numpy as np

import tilelang_mini.language as T

from .._core import Plan, as_input, as_output, check_shape, dtype_of, library_function, to_numpy
from ._tiles import fp8_cube, sum_with_c


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


# ----------------------------------------------------------------------------- fp8_einsum

FP8_EXPRS = ("bhr,hdr->bhd", "bhd,hdr->bhr", "bhd,bhr->hdr")
GRAN = 128


@T.macro
def load_mn_major(X, SFX, k, h, col0, n, block_K, x_s, s_row, s):
    """x_s = the MN-major tile X[K block k, head h, col0:col0 + n] and s[i, 0] = its per-column
    scale SFX[k, h, col0 + i] (read as the row s_row, then transposed)."""
    T.copy(X[k * block_K:(k + 1) * block_K, h, col0:col0 + n], x_s)
    T.copy(SFX[k:k + 1, h, col0:col0 + n], s_row)
    for i, j in T.Parallel(n, 1):
        s[i, j] = s_row[j, i]


def fp8_bmm_kernel(expr, H, M, N, K, out_dtype, c_mode, cube_fp8, block_M=128, block_N=128):
    """One FP8 GEMM per head h (grid z) with fp32 scales folded per 128-wide K step, for the
    three expressions of `fp8_einsum` (see its doc for the shapes). Each K step: the cube
    multiplies the e4m3 tiles (widened to bfloat16 first where the cube has no FP8) into a fresh
    L0C partial P, the vector unit adds `P * sa[m] * sb[n]` into the fp32 accumulator."""
    block_K = GRAN
    widen = not cube_fp8
    mma = "float8_e4m3fn" if cube_fp8 else "bfloat16"
    if widen:  # the widened copies and the fp32 partial share UB with the fp8 tiles
        block_M = 64
    per_head = expr != "bhd,bhr->hdr"   # A/D rows are the batch, read per head in place
    b_k_major = expr == "bhr,hdr->bhd"
    KB, NB = T.ceildiv(K, GRAN), T.ceildiv(N, GRAN)
    if per_head:
        a_shape, sfa_shape = (M, H, K), (M, H, KB)
        b_shape = (H, N, K) if b_k_major else (H, K, N)
        sfb_shape = (H, NB, KB) if b_k_major else (H, KB, NB)
        d_shape = (M, H, N)
    else:
        a_shape, sfa_shape = (K, H, M), (KB, H, M)
        b_shape, sfb_shape = (K, H, N), (KB, H, N)
        d_shape = (H, M, N)
    a_tile = (block_M, block_K) if per_head else (block_K, block_M)
    b_tile = (block_N, block_K) if b_k_major else (block_K, block_N)

    @T.macro
    def body(A, SFA, B, SFB, C, D, bx, by, h):
        A_s = T.alloc_shared(a_tile, "float8_e4m3fn")
        B_s = T.alloc_shared(b_tile, "float8_e4m3fn")
        A_w = T.alloc_shared(a_tile, mma)
        B_w = T.alloc_shared(b_tile, mma)
        P = T.alloc_fragment((block_M, block_N), "float32")
        acc = T.alloc_fragment((block_M, block_N), "float32")
        sa = T.alloc_fragment((block_M, 1), "float32")
        sa_row = T.alloc_fragment((1, block_M), "float32")
        sb = T.alloc_fragment((block_N, 1), "float32")
        sb_row = T.alloc_fragment((1, block_N), "float32")
        s_b = T.alloc_var("float32")
        out = T.alloc_fragment((block_M, block_N), out_dtype)
        T.clear(acc)
        for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=1 if widen else 2):
            if per_head:
                T.copy(A[by * block_M:(by + 1) * block_M, h, k * block_K:(k + 1) * block_K], A_s)
                T.copy(SFA[by * block_M:(by + 1) * block_M, h, k:k + 1], sa)
            else:
                load_mn_major(A, SFA, k, h, by * block_M, block_M, block_K, A_s, sa_row, sa)
            if b_k_major:
                T.copy(B[h, bx * block_N:(bx + 1) * block_N, k * block_K:(k + 1) * block_K], B_s)
                s_b = SFB[h, bx, k]          # one (128, 128) block scale for the whole tile
            elif per_head:
                T.copy(B[h, k * block_K:(k + 1) * block_K, bx * block_N:(bx + 1) * block_N], B_s)
                s_b = SFB[h, k, bx]
            else:
                load_mn_major(B, SFB, k, h, bx * block_N, block_N, block_K, B_s, sb_row, sb)
            if widen:
                T.copy(A_s, A_w)                      # fp8 -> bf16 on the vector unit (exact)
                T.copy(B_s, B_w)
                T.gemm(A_w, B_w, P, transpose_A=not per_head, transpose_B=b_k_major,
                       clear_accum=True)
            else:
                T.gemm(A_s, B_s, P, transpose_A=not per_head, transpose_B=b_k_major,
                       clear_accum=True)
            if per_head:
                for i, j in T.Parallel(block_M, block_N):
                    acc[i, j] = acc[i, j] + P[i, j] * (sa[i, 0] * s_b)
            else:
                for i, j in T.Parallel(block_M, block_N):
                    acc[i, j] = acc[i, j] + P[i, j] * (sa[i, 0] * sb[j, 0])
        if c_mode is not None:
            c_f = T.alloc_fragment((block_M, block_N), "float32")
            if per_head:
                T.copy(C[by * block_M:(by + 1) * block_M, h, bx * block_N:(bx + 1) * block_N],
                       c_f)
            else:
                T.copy(C[h, by * block_M:(by + 1) * block_M, bx * block_N:(bx + 1) * block_N],
                       c_f)
            for i, j in T.Parallel(block_M, block_N):
                out[i, j] = c_f[i, j] + acc[i, j]
        else:
            T.copy(acc, out)
        if per_head:
            T.copy(out, D[by * block_M:(by + 1) * block_M, h, bx * block_N:(bx + 1) * block_N])
        else:
            T.copy(out, D[h, by * block_M:(by + 1) * block_M, bx * block_N:(bx + 1) * block_N])

    gx, gy = T.ceildiv(N, block_N), T.ceildiv(M, block_M)
    if c_mode == "separate":
        @T.prim_func
        def fp8_einsum_c(A: T.Tensor(a_shape, "float8_e4m3fn"), SFA: T.Tensor(sfa_shape, "float32"),
                         B: T.Tensor(b_shape, "float8_e4m3fn"), SFB: T.Tensor(sfb_shape, "float32"),
                         C: T.Tensor(d_shape, "float32"), D: T.Tensor(d_shape, out_dtype)):
            with T.Kernel(gx, gy, H) as (bx, by, h):
                body(A, SFA, B, SFB, C, D, bx, by, h)
        return fp8_einsum_c

    @T.prim_func
    def fp8_einsum(A: T.Tensor(a_shape, "float8_e4m3fn"), SFA: T.Tensor(sfa_shape, "float32"),
                   B: T.Tensor(b_shape, "float8_e4m3fn"), SFB: T.Tensor(sfb_shape, "float32"),
                   D: T.Tensor(d_shape, out_dtype)):
        with T.Kernel(gx, gy, H) as (bx, by, h):
            body(A, SFA, B, SFB, D, D, bx, by, h)
    return fp8_einsum


@library_function
def fp8_einsum(ctx, expr, a, b, d, c=None, recipe=None):
    """d (written in place) = c + einsum(expr, a, b) on e4m3 operands with fp32 scales,
    DeepGEMM's three FP8 expressions; a = (A, sfa), b = (B, sfb):

    * `"bhr,hdr->bhd"`: A [B, H, R] with per-token scales sfa [B, H, ceil(R/128)], B [H, D, R]
      with (128, 128) block scales sfb [H, ceil(D/128), ceil(R/128)]; d [B, H, D].
    * `"bhd,hdr->bhr"`: A [B, H, D], sfa [B, H, ceil(D/128)]; B [H, D, R], sfb
      [H, ceil(D/128), ceil(R/128)]; d [B, H, R].
    * `"bhd,bhr->hdr"` (recipe (1, 1, 128), the weight-gradient form): A [B, H, D], B [B, H, R],
      per-channel scales over 128 batch rows, sfa [ceil(B/128), H, D], sfb [ceil(B/128), H, R];
      d [H, D, R].

    d is bfloat16 or float32; c (float32, d's shape, may be d itself) is added when given (then
    d must be float32)."""
    plan = Plan()
    expr = str(expr).replace(" ", "")
    if expr not in FP8_EXPRS:
        raise ValueError(f"fp8_einsum {expr!r} is not supported: one of {', '.join(FP8_EXPRS)}")
    want_recipe = (1, 1, 128) if expr == "bhd,bhr->hdr" else (1, 128, 128)
    if recipe is not None and tuple(recipe) != want_recipe:
        raise ValueError(f"fp8_einsum {expr}: recipe {tuple(recipe)} is not supported, "
                         f"{want_recipe} only")
    (a0, sfa), (b0, sfb) = a, b
    a_arr, b_arr = as_input(a0, "float8_e4m3fn", "a"), as_input(b0, "float8_e4m3fn", "b")
    if a_arr.ndim != 3 or b_arr.ndim != 3:
        raise ValueError(f"fp8_einsum {expr}: a and b are 3-D, got {a_arr.shape} and "
                         f"{b_arr.shape}")
    d_np = to_numpy(d, "d")
    out_dtype = dtype_of(d_np)
    if out_dtype not in ("bfloat16", "float32"):
        raise ValueError(f"d must be bfloat16 or float32, got {d_np.dtype}")
    cdiv = T.ceildiv
    if expr == "bhd,bhr->hdr":
        Bn, H, M = a_arr.shape
        N = b_arr.shape[2]
        check_shape(b_arr, (Bn, H, N), "b")
        K, d_shape = Bn, (H, M, N)
        sfa_shape, sfb_shape = (cdiv(Bn, GRAN), H, M), (cdiv(Bn, GRAN), H, N)
    else:
        M, H, K = a_arr.shape
        k_major = expr == "bhr,hdr->bhd"
        N = b_arr.shape[1] if k_major else b_arr.shape[2]
        check_shape(b_arr, (H, N, K) if k_major else (H, K, N), "b")
        d_shape = (M, H, N)
        sfa_shape = (M, H, cdiv(K, GRAN))
        sfb_shape = (H, cdiv(N, GRAN), cdiv(K, GRAN)) if k_major else \
            (H, cdiv(K, GRAN), cdiv(N, GRAN))
    sfa_arr, sfb_arr = as_input(sfa, "float32", "sfa"), as_input(sfb, "float32", "sfb")
    check_shape(sfa_arr, sfa_shape, "sfa")
    check_shape(sfb_arr, sfb_shape, "sfb")
    check_shape(d_np, d_shape, "d")
    c_mode, c_args = None, ()
    if c is not None:
        if out_dtype != "float32":
            raise ValueError(f"fp8_einsum {expr}: with c, d must be float32, got {d_np.dtype}")
        c_np = to_numpy(c, "c")
        if c_np is d_np or np.shares_memory(c_np, d_np):
            c_mode = "inplace"
        else:
            c_mode, c_args = "separate", (as_input(c_np, "float32", "c"),)
            check_shape(c_args[0], d_shape, "c")
    d_arr = as_output(plan, d_np, "d")
    kernel = ctx.compile(fp8_bmm_kernel, expr, H, M, N, K, out_dtype, c_mode, fp8_cube(ctx.chip))
    plan.launch(kernel, a_arr, sfa_arr, b_arr, sfb_arr, *c_args, d_arr)
    return plan
