"""A single-device MegaMoE expert layer: `bf16_mega_moe` / `fp8_mega_moe`.

    y[t] = sum_j  w[t, j] * FC2_e( swiglu( FC1_e(x[t]) ) ),   e = topk_idx[t, j] (-1: unused)

with DeepGEMM's SwiGLU epilogue: FC1's gate and up halves rounded to bfloat16, gate clamped
above and up clamped to [-clamp, clamp] when `activation_clamp` is given, `silu(gate) * up`
times the token's routing weight, rounded to bfloat16; FC2's output bfloat16; the top-k outputs
summed in float32 into y (bfloat16).

Launches (each a tile kernel): gather the routed rows into an expert-contiguous buffer (rows of
an expert padded to 128, padding rows zero), FC1 as an m-grouped contiguous GEMM, the SwiGLU
kernel, FC2 as an m-grouped contiguous GEMM, and the combine kernel that sums each token's
top-k rows back in token order. The FP8 form quantises the gathered rows and the SwiGLU output
per token ((1, 128) scales, kernels) and runs both GEMMs on FP8 with (128, 128) weight scales.
Which row goes where (a counting sort of topk_idx by expert) is index bookkeeping done on the
host, as a dispatch layout; every arithmetic step runs in the kernels.

Weights: l1 [E, 2I, H] (gate rows 0..I-1, up rows I..2I-1; not interleaved), l2 [E, H, I];
FP8: (weights e4m3, scales [E, 2I/128, H/128]) and ([E, H, I], [E, H/128, I/128]).
"""
import numpy as np

import tilelang_mini.language as T

from .._core import Plan, as_input, as_output, check_shape, dims, library_function
from . import gemm as _gemm
from . import quant as _quant

ALIGN = 128


def gather_kernel(T_, H, MP, dtype, block_H=512):
    block_H = min(block_H, -(-H // 16) * 16)

    @T.prim_func
    def moe_gather(X: T.Tensor((T_, H), dtype), SRC: T.Tensor((MP,), "int32"),
                   A: T.Tensor((MP, H), dtype)):
        with T.Kernel(T.ceildiv(H, block_H), MP // 16) as (bx, by):
            row = T.alloc_fragment((1, block_H), dtype)
            for i in T.serial(16):
                if SRC[by * 16 + i] >= 0:
                    T.copy(X[SRC[by * 16 + i], bx * block_H], row)
                else:
                    T.clear(row)
                T.copy(row, A[by * 16 + i, bx * block_H])

    return moe_gather


def swiglu_kernel(MP, I, clamp, block_M=16, block_I=256):
    block_I = min(block_I, -(-I // 16) * 16)
    clamped = clamp is not None
    cv = float(clamp) if clamped else 0.0

    @T.prim_func
    def moe_swiglu(Hd: T.Tensor((MP, 2 * I), "bfloat16"), W: T.Tensor((MP,), "float32"),
                   Out: T.Tensor((MP, I), "bfloat16")):
        with T.Kernel(T.ceildiv(I, block_I), MP // block_M) as (bx, by):
            g = T.alloc_fragment((block_M, block_I), "float32")
            u = T.alloc_fragment((block_M, block_I), "float32")
            w = T.alloc_fragment((block_M,), "float32")
            o = T.alloc_fragment((block_M, block_I), "bfloat16")
            T.copy(Hd[by * block_M, bx * block_I], g)
            T.copy(Hd[by * block_M, I + bx * block_I], u)
            T.copy(W[by * block_M], w)
            if clamped:
                for i, j in T.Parallel(block_M, block_I):
                    g[i, j] = T.min(g[i, j], cv)
                for i, j in T.Parallel(block_M, block_I):
                    u[i, j] = T.min(T.max(u[i, j], -cv), cv)
            for i, j in T.Parallel(block_M, block_I):
                o[i, j] = T.cast(g[i, j] / (1.0 + T.exp(-g[i, j])) * u[i, j] * w[i], "bfloat16")
            T.copy(o, Out[by * block_M, bx * block_I])

    return moe_swiglu


def combine_kernel(T_, H, MP, K, block_T=8, block_H=512):
    block_H = min(block_H, -(-H // 16) * 16)

    @T.prim_func
    def moe_combine(O: T.Tensor((MP, H), "bfloat16"), POS: T.Tensor((T_, K), "int32"),
                    Y: T.Tensor((T_, H), "bfloat16")):
        with T.Kernel(T.ceildiv(H, block_H), T.ceildiv(T_, block_T)) as (bx, by):
            acc = T.alloc_fragment((block_T, block_H), "float32")
            row = T.alloc_fragment((1, block_H), "float32")
            T.clear(acc)
            for i in T.serial(block_T):
                if by * block_T + i < T_:
                    for j in T.serial(K):
                        if POS[by * block_T + i, j] >= 0:
                            T.copy(O[POS[by * block_T + i, j], bx * block_H], row)
                            for r, c in T.Parallel(1, block_H):
                                acc[i + r, c] = acc[i + r, c] + row[r, c]
            T.copy(acc, Y[by * block_T, bx * block_H])

    return moe_combine


def _routing(topk_idx, topk_weights, E):
    """Expert-contiguous row layout (a counting sort by expert): src token per row (-1 pad),
    the weight per row, the group per row (-1 pad), each (token, j)'s row (-1 unused)."""
    idx = np.asarray(topk_idx).astype(np.int64)
    T_, K = idx.shape
    counts = np.bincount(idx[idx >= 0], minlength=E)
    padded = -(-counts // ALIGN) * ALIGN
    starts = np.concatenate([[0], np.cumsum(padded)[:-1]]).astype(np.int64)
    MP = max(int(padded.sum()), ALIGN)
    src = np.full(MP, -1, np.int32)
    layout = np.full(MP, -1, np.int32)
    weight = np.zeros(MP, np.float32)
    pos = np.full((T_, K), -1, np.int32)
    fill = starts.copy()
    w = np.asarray(topk_weights, np.float32)
    for t in range(T_):
        for j in range(K):
            e = idx[t, j]
            if e >= 0:
                r = fill[e]
                fill[e] += 1
                src[r], layout[r], weight[r], pos[t, j] = t, e, w[t, j], r
    return MP, src, layout, weight, pos


def _mega(ctx, x, topk_idx, topk_weights, l1, l2, y, activation_clamp, fp8):
    plan = Plan()
    xa = as_input(x, "bfloat16", "x")
    T_, H = dims(xa, "T, H", "x")
    if fp8:
        (w1, s1), (w2, s2) = l1, l2
        w1, w2 = as_input(w1, "float8_e4m3fn", "l1"), as_input(w2, "float8_e4m3fn", "l2")
        s1, s2 = as_input(s1, "float32", "l1 scales"), as_input(s2, "float32", "l2 scales")
    else:
        w1, w2 = as_input(l1, "bfloat16", "l1"), as_input(l2, "bfloat16", "l2")
    E, I2, _ = dims(w1, "E, 2I, H", "l1 weights")
    I = I2 // 2
    check_shape(w1, (E, 2 * I, H), "l1 weights")
    check_shape(w2, (E, H, I), "l2 weights")
    idx = as_input(topk_idx, "int32", "topk_idx")
    K = dims(idx, "T, k", "topk_idx")[1]
    check_shape(idx, (T_, K), "topk_idx")
    check_shape(as_input(topk_weights, "float32", "topk_weights"), (T_, K), "topk_weights")
    if np.any(idx >= E):
        raise ValueError(f"topk_idx names an expert >= {E}")
    MP, src, layout, weight, pos = _routing(idx, topk_weights, E)
    y_arr = as_output(plan, y, "y", "bfloat16")
    check_shape(y_arr, (T_, H), "y")
    a = np.empty((MP, H), xa.dtype)
    h1 = np.empty((MP, 2 * I), xa.dtype)
    act = np.empty((MP, I), xa.dtype)
    out = np.empty((MP, H), xa.dtype)
    plan.launch(ctx.compile(gather_kernel, T_, H, MP, "bfloat16"), xa, src, a)
    _then(plan, _fc(ctx, a, w1, s1 if fp8 else None, h1, layout, fp8))
    plan.launch(ctx.compile(swiglu_kernel, MP, I,
                            None if activation_clamp is None else float(activation_clamp)),
                h1, weight, act)
    _then(plan, _fc(ctx, act, w2, s2 if fp8 else None, out, layout, fp8))
    plan.launch(ctx.compile(combine_kernel, T_, H, MP, K), out, pos, y_arr)
    plan.result = y
    return plan


def _fc(ctx, a, w, sw, d, layout, fp8):
    if not fp8:
        return _gemm._grouped(ctx, a, w, d, layout, "contiguous", False)
    q = _quant.per_token_cast_to_fp8.plan(ctx, a, False)
    qa, sa = q.result
    sub = _gemm._grouped(ctx, (qa, sa), (w, sw), d, layout, "contiguous", True)
    sub.launches[:0] = q.launches
    return sub


def _then(plan, sub):
    plan.launches += sub.launches


@library_function
def bf16_mega_moe(ctx, x, topk_idx, topk_weights, l1_weights, l2_weights, y,
                  activation_clamp=None, **_ignored):
    """y [T, H] (bf16, written) = the routed expert layer of x [T, H]; see the module doc."""
    return _mega(ctx, x, topk_idx, topk_weights, l1_weights, l2_weights, y, activation_clamp,
                 False)


@library_function
def fp8_mega_moe(ctx, x, topk_idx, topk_weights, l1_weights, l2_weights, y,
                 activation_clamp=None, **_ignored):
    """The FP8 form: l1_weights = (e4m3 [E, 2I, H], scales [E, 2I/128, H/128]), l2 likewise."""
    return _mega(ctx, x, topk_idx, topk_weights, l1_weights, l2_weights, y, activation_clamp,
                 True)
