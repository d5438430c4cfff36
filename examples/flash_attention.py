"""Flash attention forward, O = softmax(Q @ K^T / sqrt(D)) @ V, in the TileLang style.

    python examples/flash_attention.py [--target numpy|llvm] [--chip ascend910b|ascend950]
                                       [--dtype float16|bfloat16] [--shape BH S D] [--no-simulate]

The structure of TileLang's example_mha_fwd: one block computes block_M query rows of one
(batch, head); the loop over key blocks computes the scores on the cube (T.gemm with transpose_B
and clear_accum), runs the online softmax on the vector unit (T.reduce_max, a rescale map,
T.exp map, T.reduce_sum), rescales the running output, casts P to `dtype` into a fragment and
accumulates P @ V on the cube; finally acc_o /= logsum.

S need not be a multiple of block_N: the K/V loads of the last block are zero-padded, and a
`T.Parallel` map subtracts 1e30 from the scores of the keys past the end (the condition
`k * block_N + j >= S` cast to float32), so they get probability 0.
"""
import math

import tilelang_mini
import tilelang_mini.language as T

DEFAULT_ARGS = (2, 200, 64)  # BH, S, D: S is not a multiple of the blocks (masked tail)


@T.macro
def attention_tiles(block_M, block_N, dk, dv, dtype, accum="float32"):
    """`Q_shared, K_shared, V_shared, acc_s, acc_s_cast, acc_o = attention_tiles(...)`: one
    attention step's shared Q (block_M, dk), K (block_N, dk) and V (block_N, dv) tiles, the
    scores acc_s (accum), their probabilities acc_s_cast (`dtype`, the P @ V operand) and the
    output accumulator acc_o (block_M, dv)."""
    Q_shared = T.alloc_shared((block_M, dk), dtype)
    K_shared = T.alloc_shared((block_N, dk), dtype)
    V_shared = T.alloc_shared((block_N, dv), dtype)
    acc_s = T.alloc_fragment((block_M, block_N), accum)
    acc_s_cast = T.alloc_fragment((block_M, block_N), dtype)
    acc_o = T.alloc_fragment((block_M, dv), accum)
    return Q_shared, K_shared, V_shared, acc_s, acc_s_cast, acc_o


@tilelang_mini.jit(out_idx=[-1])
def flash_attention(batch_heads, seq_len, dim, block_M=64, block_N=64, dtype="float16",
                    num_stages=2):
    BH, S, D = batch_heads, seq_len, dim
    scale = 1.0 / math.sqrt(D)
    accum = "float32"
    masked = S % block_N != 0

    @T.prim_func
    def main(Q: T.Tensor((BH, S, D), dtype), K: T.Tensor((BH, S, D), dtype),
             V: T.Tensor((BH, S, D), dtype), Output: T.Tensor((BH, S, D), accum)):
        with T.Kernel(T.ceildiv(S, block_M), BH) as (bx, by):
            Q_shared, K_shared, V_shared, acc_s, acc_s_cast, acc_o = attention_tiles(
                block_M, block_N, D, D, dtype, accum)
            scores_max = T.alloc_fragment((block_M,), accum)
            scores_max_prev = T.alloc_fragment((block_M,), accum)
            scores_scale = T.alloc_fragment((block_M,), accum)
            scores_sum = T.alloc_fragment((block_M,), accum)
            logsum = T.alloc_fragment((block_M,), accum)

            T.copy(Q[by, bx * block_M:(bx + 1) * block_M, :], Q_shared)
            T.fill(acc_o, 0.0)
            T.fill(logsum, 0.0)
            T.fill(scores_max, -1e30)
            for k in T.Pipelined(T.ceildiv(S, block_N), num_stages=num_stages):
                T.copy(K[by, k * block_N:(k + 1) * block_N, :], K_shared)
                T.gemm(Q_shared, K_shared, acc_s, transpose_B=True, clear_accum=True)
                if masked:  # trace time: only when the last key block has a tail
                    for i, j in T.Parallel(block_M, block_N):
                        acc_s[i, j] = acc_s[i, j] - T.cast(k * block_N + j >= S, accum) * 1e30
                T.copy(scores_max, scores_max_prev)
                T.fill(scores_max, -1e30)
                T.reduce_max(acc_s, scores_max, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    scores_scale[i] = T.exp(scores_max_prev[i] * scale - scores_max[i] * scale)
                for i, j in T.Parallel(block_M, D):
                    acc_o[i, j] *= scores_scale[i]
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp(acc_s[i, j] * scale - scores_max[i] * scale)
                T.reduce_sum(acc_s, scores_sum, dim=1)
                for i in T.Parallel(block_M):
                    logsum[i] = logsum[i] * scores_scale[i] + scores_sum[i]
                T.copy(acc_s, acc_s_cast)
                T.copy(V[by, k * block_N:(k + 1) * block_N, :], V_shared)
                T.gemm(acc_s_cast, V_shared, acc_o)
            for i, j in T.Parallel(block_M, D):
                acc_o[i, j] /= logsum[i]
            T.copy(acc_o, Output[by, bx * block_M:(bx + 1) * block_M, :])

    return main


def reference(q, k, v):
    """Independent float64 NumPy softmax attention."""
    import numpy as np
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    s = q @ k.transpose(0, 2, 1) / math.sqrt(q.shape[-1])
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True)) @ v


def main(argv=None):
    from _common import example_args, make_inputs, report, run_and_verify
    args = example_args(__doc__, argv, dtype="float16", shape=DEFAULT_ARGS)
    BH, S, D = args.shape
    q, k, v = make_inputs(args.seed, [(BH, S, D)] * 3, args.dtype)
    kernel = tilelang_mini.compile(flash_attention.factory(BH, S, D, dtype=args.dtype),
                                   out_idx=[-1], target=args.target, chip=args.chip)
    # P is rounded to `dtype` before P @ V: compare with that dtype's tolerances.
    ok, seconds = run_and_verify(kernel, (q, k, v), "O", reference(q, k, v), args.dtype,
                                 simulate=args.simulate)
    return report(kernel, seconds, ok, args)


if __name__ == "__main__":
    raise SystemExit(main())
