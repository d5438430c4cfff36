"""mHC (manifold-constrained hyper-connections) pre/post, in the order and semantics of DeepSeek's
TileKernels, as tile kernels.

n residual streams of width C per token. The mixes are ordered (pre [n], post [n], comb [n*n]).

* `mhc_pre(residual [T,n,C] bf16, fn [n(n+2), nC] f32, scale [3], base [n(n+2)], ...)`:
  1. the pre-norm GEMM `mixes = x @ fn.T`, `sqr = sum(x^2)` over x = residual[t] flattened
     (DeepGEMM's tf32_hc_prenorm_gemm, split over K; the splits are summed in step 2);
  2. `mixes *= rsqrt(sqr / (n C) + rms_eps)`, then `mixes * scale[group] + base`;
     `pre = sigmoid(.) + pre_eps`, `post = sigmoid(.) * post_mult`, comb is the n x n rest;
  3. Sinkhorn on comb: softmax over the last axis + eps, divide by column sums + eps, then
     `sinkhorn_repeat - 1` times rows then columns;
  4. `layer_input[t] = sum_k pre[k] * residual[t, k]`, rounded to bfloat16.
  Returns (post [T,n] f32, comb [T,n,n] f32, layer_input [T,C] bf16).
* `mhc_post(x [T,C], residual [T,n,C], post [T,n], comb [T,n,n])`: stream k gets
  `post[k] * x + sum_j comb[j, k] * residual[j]`, as bfloat16 [T,n,C].
* `sinkhorn(x [T,n,n], repeat=20, eps=1e-6)`: step 3 alone.
"""
import numpy as np

import tilelang_mini.language as T

from ._core import Plan, as_input, ceil_div, check_shape, dims, int_arg, library_function
from .deep_gemm.hc import plan_hc_prenorm

BLOCK_T = 16


@T.macro
def sinkhorn_tile(c3, rmax, rsum, csum, bT, n, repeat, eps):
    T.reduce_max(c3, rmax, dim=2)
    for t, i, j in T.Parallel(bT, n, n):
        c3[t, i, j] = T.exp(c3[t, i, j] - rmax[t, i])
    T.reduce_sum(c3, rsum, dim=2)
    for t, i, j in T.Parallel(bT, n, n):
        c3[t, i, j] = c3[t, i, j] / rsum[t, i] + eps
    T.reduce_sum(c3, csum, dim=1)
    for t, i, j in T.Parallel(bT, n, n):
        c3[t, i, j] = c3[t, i, j] / (csum[t, j] + eps)
    for _ in T.serial(repeat - 1):
        T.reduce_sum(c3, rsum, dim=2)
        for t, i, j in T.Parallel(bT, n, n):
            c3[t, i, j] = c3[t, i, j] / (rsum[t, i] + eps)
        T.reduce_sum(c3, csum, dim=1)
        for t, i, j in T.Parallel(bT, n, n):
            c3[t, i, j] = c3[t, i, j] / (csum[t, j] + eps)


def sinkhorn_kernel(Tn, n, repeat, eps, bT=BLOCK_T):
    @T.prim_func
    def sinkhorn_normalize(X: T.Tensor((Tn, n, n), "float32"), Y: T.Tensor((Tn, n, n), "float32")):
        with T.Kernel(T.ceildiv(Tn, bT)) as bx:
            c3 = T.alloc_fragment((bT, n, n), "float32")
            rmax = T.alloc_fragment((bT, n), "float32")
            rsum = T.alloc_fragment((bT, n), "float32")
            csum = T.alloc_fragment((bT, n), "float32")
            T.copy(X[bx * bT, 0, 0], c3)
            sinkhorn_tile(c3, rmax, rsum, csum, bT, n, repeat, eps)
            T.copy(c3, Y[bx * bT, 0, 0])

    return sinkhorn_normalize


def mhc_pre_kernel(Tn, n, C, splits, rms_eps, pre_eps, sinkhorn_eps, post_mult, repeat,
                   bT=BLOCK_T, bC=256):
    N = n * (n + 2)
    inv_k = 1.0 / (n * C)
    bC = min(bC, -(-C // 16) * 16)
    later_streams = list(range(1, n))

    @T.prim_func
    def mhc_pre_mix(D: T.Tensor((splits, Tn, N), "float32"), SQ: T.Tensor((splits, Tn), "float32"),
                    Scale: T.Tensor((3,), "float32"), Base: T.Tensor((N,), "float32"),
                    R: T.Tensor((Tn, n, C), "bfloat16"), Post: T.Tensor((Tn, n), "float32"),
                    Comb: T.Tensor((Tn, n, n), "float32"), Out: T.Tensor((Tn, C), "bfloat16")):
        with T.Kernel(T.ceildiv(Tn, bT)) as bx:
            mix = T.alloc_fragment((bT, N), "float32")
            part = T.alloc_fragment((bT, N), "float32")
            sq = T.alloc_fragment((bT, 1), "float32")
            sqp = T.alloc_fragment((bT, 1), "float32")
            pre = T.alloc_fragment((bT, n), "float32")
            post = T.alloc_fragment((bT, n), "float32")
            c3 = T.alloc_fragment((bT, n, n), "float32")
            rmax = T.alloc_fragment((bT, n), "float32")
            rsum = T.alloc_fragment((bT, n), "float32")
            csum = T.alloc_fragment((bT, n), "float32")
            res = T.alloc_fragment((bT, n, bC), "bfloat16")
            acc = T.alloc_fragment((bT, bC), "float32")
            out = T.alloc_fragment((bT, bC), "bfloat16")
            s_pre = T.alloc_var("float32")
            s_post = T.alloc_var("float32")
            s_comb = T.alloc_var("float32")
            s_pre = Scale[0]
            s_post = Scale[1]
            s_comb = Scale[2]
            # 1-2: sum the K splits, RMS-normalise, scale and shift
            T.clear(mix)
            T.clear(sq)
            for s in T.serial(splits):
                T.copy(D[s, bx * bT:(bx + 1) * bT, :], part)
                T.copy(SQ[s, bx * bT:(bx + 1) * bT], sqp)
                for t, j in T.Parallel(bT, N):
                    mix[t, j] = mix[t, j] + part[t, j]
                for t, j in T.Parallel(bT, 1):
                    sq[t, j] = sq[t, j] + sqp[t, j]
            for t, j in T.Parallel(bT, 1):
                sq[t, j] = T.rsqrt(sq[t, j] * inv_k + rms_eps)
            for t, k in T.Parallel(bT, n):
                pre[t, k] = 1.0 / (1.0 + T.exp(-(mix[t, k] * sq[t, 0] * s_pre + Base[k]))) + pre_eps
            for t, k in T.Parallel(bT, n):
                post[t, k] = post_mult / (1.0 + T.exp(-(mix[t, n + k] * sq[t, 0] * s_post
                                                         + Base[n + k])))
            for t, i, j in T.Parallel(bT, n, n):
                c3[t, i, j] = mix[t, 2 * n + i * n + j] * sq[t, 0] * s_comb + Base[2 * n + i * n + j]
            # 3: Sinkhorn on comb
            sinkhorn_tile(c3, rmax, rsum, csum, bT, n, repeat, sinkhorn_eps)
            T.copy(post, Post[bx * bT, 0])
            T.copy(c3, Comb[bx * bT, 0, 0])
            # 4: the pre-weighted sum of the streams
            for cb in T.serial(T.ceildiv(C, bC)):
                T.copy(R[bx * bT, 0, cb * bC], res)
                for t, c in T.Parallel(bT, bC):
                    acc[t, c] = pre[t, 0] * T.cast(res[t, 0, c], "float32")
                for k in later_streams:  # unrolled while parsing
                    for t, c in T.Parallel(bT, bC):
                        acc[t, c] = acc[t, c] + pre[t, k] * T.cast(res[t, k, c], "float32")
                T.copy(acc, out)
                T.copy(out, Out[bx * bT, cb * bC])

    return mhc_pre_mix


def mhc_post_kernel(Tn, n, C, bT=BLOCK_T, bC=256):
    bC = min(bC, -(-C // 16) * 16)
    streams = list(range(n))

    @T.prim_func
    def mhc_post_mix(X: T.Tensor((Tn, C), "bfloat16"), R: T.Tensor((Tn, n, C), "bfloat16"),
                     Post: T.Tensor((Tn, n), "float32"), Comb: T.Tensor((Tn, n, n), "float32"),
                     Out: T.Tensor((Tn, n, C), "bfloat16")):
        with T.Kernel(T.ceildiv(C, bC), T.ceildiv(Tn, bT)) as (bx, by):
            x = T.alloc_fragment((bT, bC), "bfloat16")
            res = T.alloc_fragment((bT, n, bC), "bfloat16")
            post = T.alloc_fragment((bT, n), "float32")
            comb = T.alloc_fragment((bT, n, n), "float32")
            acc = T.alloc_fragment((bT, n, bC), "float32")
            out = T.alloc_fragment((bT, n, bC), "bfloat16")
            T.copy(X[by * bT, bx * bC], x)
            T.copy(R[by * bT, 0, bx * bC], res)
            T.copy(Post[by * bT, 0], post)
            T.copy(Comb[by * bT, 0, 0], comb)
            for t, k, c in T.Parallel(bT, n, bC):
                acc[t, k, c] = post[t, k] * T.cast(x[t, c], "float32")
            for j in streams:  # unrolled while parsing
                for t, k, c in T.Parallel(bT, n, bC):
                    acc[t, k, c] = acc[t, k, c] + comb[t, j, k] * T.cast(res[t, j, c], "float32")
            T.copy(acc, out)
            T.copy(out, Out[by * bT, 0, bx * bC])

    return mhc_post_mix


@library_function
def mhc_pre(ctx, residual, fn, scale, base, rms_eps=1e-6, pre_eps=1e-6, sinkhorn_eps=1e-6,
            post_mult=2.0, sinkhorn_repeat=20, num_splits=None):
    """-> (post [T,n] f32, comb [T,n,n] f32, layer_input [T,C] bf16); see the module doc."""
    plan = Plan()
    r = as_input(residual, "bfloat16", "residual")
    Tn, n, C = dims(r, "T, n, C", "residual")
    N = n * (n + 2)
    sinkhorn_repeat = int_arg(sinkhorn_repeat, "mhc_pre: sinkhorn_repeat")
    num_splits = None if num_splits is None else int_arg(num_splits, "mhc_pre: num_splits")
    if sinkhorn_repeat < 1 or (num_splits is not None and num_splits < 1):
        raise ValueError(f"mhc_pre needs sinkhorn_repeat >= 1 and num_splits >= 1 (or None), "
                         f"got {sinkhorn_repeat} and {num_splits}")
    fn_arr = as_input(fn, "float32", "fn")
    check_shape(fn_arr, (N, n * C), "fn")
    scale_arr = as_input(scale, "float32", "scale").reshape(-1)
    base_arr = as_input(base, "float32", "base").reshape(-1)
    check_shape(scale_arr, (3,), "scale")
    check_shape(base_arr, (N,), "base")
    splits = num_splits or max(1, min(16, ceil_div(n * C, 4096)))
    d = np.empty((splits, Tn, N), np.float32)     # the split partials (a workspace)
    sq = np.empty((splits, Tn), np.float32)
    plan_hc_prenorm(ctx, plan, r.reshape(Tn, n * C), fn_arr, d, sq, splits)
    post = np.empty((Tn, n), np.float32)
    comb = np.empty((Tn, n, n), np.float32)
    out = np.empty((Tn, C), r.dtype)
    kernel = ctx.compile(mhc_pre_kernel, Tn, n, C, splits, float(rms_eps), float(pre_eps),
                         float(sinkhorn_eps), float(post_mult), int(sinkhorn_repeat))
    plan.launch(kernel, d, sq, scale_arr, base_arr, r, post, comb, out)
    plan.result = (post, comb, out)
    return plan


@library_function
def mhc_post(ctx, x, residual, post, comb):
    """-> [T,n,C] bf16: stream k = post[k] * x + sum_j comb[j, k] * residual[j]."""
    plan = Plan()
    r = as_input(residual, "bfloat16", "residual")
    Tn, n, C = dims(r, "T, n, C", "residual")
    x_arr = as_input(x, "bfloat16", "x")
    check_shape(x_arr, (Tn, C), "x")
    post_arr = as_input(post, "float32", "post")
    if post_arr.size != Tn * n:  # [T, n] or TileKernels' [T, n, 1]
        raise ValueError(f"post has shape {post_arr.shape}; expected [T, n] = {(Tn, n)}")
    post_arr = post_arr.reshape(Tn, n)
    comb_arr = as_input(comb, "float32", "comb")
    check_shape(comb_arr, (Tn, n, n), "comb")
    out = np.empty((Tn, n, C), r.dtype)
    plan.launch(ctx.compile(mhc_post_kernel, Tn, n, C), x_arr, r, post_arr, comb_arr, out)
    plan.result = out
    return plan


@library_function
def sinkhorn(ctx, x, repeat=20, eps=1e-6):
    """Sinkhorn normalisation of each n x n matrix of x [T,n,n] (TileKernels' order)."""
    plan = Plan()
    x_arr = as_input(x, "float32", "x")
    Tn, n, n2 = dims(x_arr, "T, n, n", "x")
    if n != n2:
        raise ValueError(f"sinkhorn takes square matrices, got {x_arr.shape}")
    repeat = int_arg(repeat, "sinkhorn: repeat")
    if repeat < 1:
        raise ValueError(f"sinkhorn needs repeat >= 1, got {repeat}")
    out = np.empty_like(x_arr)
    plan.launch(ctx.compile(sinkhorn_kernel, Tn, n, int(repeat), float(eps)), x_arr, out)
    plan.result = out
    return plan
