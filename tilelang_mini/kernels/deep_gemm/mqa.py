"""DeepGEMM's `fp8_mqa_logits`: the logits of the sparse-attention indexer.

q [S, H, D] e4m3, kv = (kv [SK, D] e4m3, kv_sf [SK] fp32), weights [S, H] fp32, and per query row
the key window [ks[s], ke[s]) (int32):

    logits[s, t] = sum_h relu((q[s, h] . kv[t]) * kv_sf[t]) * weights[s, h]

and, with clean_logits, -inf outside the window. One kernel: block (bx, by) owns block_M query
rows and block_N keys; for each head the cube computes the (block_M x block_N) scores and the
vector unit folds relu(score * sf) * w into the accumulator. The window is applied as
`+ log(inside)` (log 1 = 0, log 0 = -inf), which needs no select.
"""
import numpy as np

import tilelang_mini.language as T

from .._core import Plan, as_input, as_output, check_shape, library_function
from ._tiles import fp8_cube, fp8_operand_tiles


def mqa_logits_kernel(S, H, D, SK, clean, cube_fp8, block_M=64, block_N=128):
    mma = "float8_e4m3fn" if cube_fp8 else "bfloat16"
    widen = not cube_fp8

    @T.prim_func
    def fp8_mqa_logits(Q: T.Tensor((S, H, D), "float8_e4m3fn"),
                       KV: T.Tensor((SK, D), "float8_e4m3fn"), SF: T.Tensor((SK,), "float32"),
                       W: T.Tensor((S, H), "float32"), KS: T.Tensor((S,), "int32"),
                       KE: T.Tensor((S,), "int32"), L: T.Tensor((S, SK), "float32")):
        with T.Kernel(T.ceildiv(SK, block_N), T.ceildiv(S, block_M)) as (bx, by):
            q_s, k_s, q_w, k_w = fp8_operand_tiles((block_M, D), (block_N, D), mma)
            score = T.alloc_fragment((block_M, block_N), "float32")
            acc = T.alloc_fragment((block_M, block_N), "float32")
            sf = T.alloc_fragment((block_N,), "float32")
            w = T.alloc_fragment((block_M, H), "float32")
            ks = T.alloc_fragment((block_M,), "int32")
            ke = T.alloc_fragment((block_M,), "int32")
            T.copy(KV[bx * block_N, 0], k_s)
            T.copy(SF[bx * block_N], sf)
            T.copy(W[by * block_M, 0], w)
            if widen:
                T.copy(k_s, k_w)
            T.clear(acc)
            for h in T.serial(H):
                T.copy(Q[by * block_M:(by + 1) * block_M, h, :], q_s)
                if widen:
                    T.copy(q_s, q_w)
                    T.gemm(q_w, k_w, score, transpose_B=True, clear_accum=True)
                else:
                    T.gemm(q_s, k_s, score, transpose_B=True, clear_accum=True)
                for i, j in T.Parallel(block_M, block_N):
                    acc[i, j] = acc[i, j] + T.max(score[i, j] * sf[j], 0.0) * w[i, h]
            if clean:
                T.copy(KS[by * block_M], ks)
                T.copy(KE[by * block_M], ke)
                for i, j in T.Parallel(block_M, block_N):
                    acc[i, j] = acc[i, j] + T.log(T.cast(
                        (bx * block_N + j >= ks[i]) and (bx * block_N + j < ke[i]), "float32"))
            T.copy(acc, L[by * block_M, bx * block_N])

    return fp8_mqa_logits


@library_function
def fp8_mqa_logits(ctx, q, kv, weights, cu_seq_len_k_start, cu_seq_len_k_end, clean_logits=True,
                   max_seqlen_k=0, logits=None):
    """-> logits [S, SK] float32 (written into `logits` when given); see the module doc.
    max_seqlen_k: DeepGEMM's narrower logits layout is not supported (0 only)."""
    plan = Plan()
    if int(max_seqlen_k or 0):
        raise ValueError(f"max_seqlen_k={max_seqlen_k}: only the full [S, SK] logits layout "
                         f"(max_seqlen_k=0) is supported")
    q_arr = as_input(q, "float8_e4m3fn", "q")
    S, H, D = q_arr.shape
    kv_arr, sf_arr = as_input(kv[0], "float8_e4m3fn", "kv"), as_input(kv[1], "float32", "kv_sf")
    SK = kv_arr.shape[0]
    check_shape(kv_arr, (SK, D), "kv")
    sf_arr = sf_arr.reshape(-1)
    check_shape(sf_arr, (SK,), "kv_sf")
    w_arr = as_input(weights, "float32", "weights")
    check_shape(w_arr, (S, H), "weights")
    ks = as_input(cu_seq_len_k_start, "int32", "cu_seq_len_k_start").reshape(-1)
    ke = as_input(cu_seq_len_k_end, "int32", "cu_seq_len_k_end").reshape(-1)
    check_shape(ks, (S,), "cu_seq_len_k_start")
    check_shape(ke, (S,), "cu_seq_len_k_end")
    out = np.empty((S, SK), np.float32) if logits is None else as_output(plan, logits, "logits",
                                                                          "float32")
    check_shape(out, (S, SK), "logits")
    kernel = ctx.compile(mqa_logits_kernel, S, H, D, SK, bool(clean_logits), fp8_cube(ctx.chip))
    plan.launch(kernel, q_arr, kv_arr, sf_arr, w_arr, ks, ke, out)
    plan.result = out if logits is None else logits
    return plan


@library_function
def fp8_fp4_mqa_logits(ctx, q, kv, weights, cu_seq_len_k_start, cu_seq_len_k_end,
                       clean_logits=True, max_seqlen_k=0, logits_dtype=None, logits=None):
    """DeepGEMM's newer name: q = (q e4m3, None) or q alone is fp8_mqa_logits; an FP4 q (with
    its scales) is not supported here. Logits are float32."""
    q0, q_sf = q if isinstance(q, tuple) else (q, None)
    if q_sf is not None:
        raise ValueError("fp8_fp4_mqa_logits: FP4 q (q with scales) is not supported; pass an "
                         "e4m3 q (q, None)")
    if logits_dtype not in (None, "float32", np.float32) and str(logits_dtype) not in (
            "torch.float32", "float32"):
        raise ValueError(f"logits_dtype {logits_dtype!r}: only float32 logits are supported")
    return fp8_mqa_logits.plan(ctx, q0, kv, weights, cu_seq_len_k_start, cu_seq_len_k_end,
                               clean_logits, max_seqlen_k, logits)
