"""RMSNorm without weight, as in TileLang's rms_norm example: y = x / sqrt(mean(x^2, axis=1) + eps).

    python examples/rmsnorm.py [--target numpy|llvm] [--chip ascend910b|ascend950]
                               [--dtype float32|float16|bfloat16] [--shape M N]

One block normalises blk_m whole rows: load (casting to float32), square (T.Parallel),
row sums (T.reduce_sum), rsqrt of the mean (T.Parallel), scale, store (casting back).
"""
import tilelang_mini
import tilelang_mini.language as T

DEFAULT_ARGS = (1000, 300)  # M, N: M not a multiple of blk_m on purpose
EPS = 1e-6


@tilelang_mini.jit(out_idx=[-1])
def rms_norm(M, N, blk_m=32, dtype="float32", eps=EPS):
    accum = "float32"

    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, blk_m)) as bx:
            A_shared = T.alloc_shared((blk_m, N), dtype)
            A_local = T.alloc_fragment((blk_m, N), accum)
            A_pow_local = T.alloc_fragment((blk_m, N), accum)
            A_powsum = T.alloc_fragment((blk_m,), accum)
            T.copy(A[bx * blk_m:(bx + 1) * blk_m, :], A_shared)
            T.copy(A_shared, A_local)                       # to float32
            for i, j in T.Parallel(blk_m, N):
                A_pow_local[i, j] = A_local[i, j] * A_local[i, j]
            T.reduce_sum(A_pow_local, A_powsum, dim=1)
            for i in T.Parallel(blk_m):
                A_powsum[i] = T.rsqrt(A_powsum[i] / N + eps)
            for i, j in T.Parallel(blk_m, N):
                A_local[i, j] *= A_powsum[i]
            T.copy(A_local, B[bx * blk_m:(bx + 1) * blk_m, :])  # back to dtype

    return main


def reference(x, eps=EPS):
    """Independent float64 NumPy reference."""
    import numpy as np
    x64 = x.astype(np.float64)
    return x64 / np.sqrt(np.mean(x64 * x64, axis=1, keepdims=True) + eps)


def main(argv=None):
    from _common import example_args, make_inputs, report, run_and_verify
    args = example_args(__doc__, argv, dtype="float32", shape=DEFAULT_ARGS)
    M, N = args.shape
    (x,) = make_inputs(args.seed, [(M, N)], args.dtype)
    kernel = tilelang_mini.compile(rms_norm.factory(M, N, dtype=args.dtype), out_idx=[-1],
                                   target=args.target, chip=args.chip)
    ok, seconds = run_and_verify(kernel, (x,), "B", reference(x), args.dtype)
    return report(kernel, seconds, ok, args)


if __name__ == "__main__":
    raise SystemExit(main())
