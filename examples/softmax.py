"""Row softmax: y = exp(x - max(x)) / sum(exp(x - max(x))) along each row.

    python examples/softmax.py [--target numpy|llvm] [--chip ascend910b|ascend950]
                               [--dtype float32|float16|bfloat16] [--shape M N]

One block handles blk_m whole rows: load (casting to float32), T.reduce_max, an exp map
(T.Parallel), T.reduce_sum, a divide map, store (casting back).
"""
import tilelang_mini
import tilelang_mini.language as T

DEFAULT_ARGS = (1000, 300)  # M, N


@T.macro
def softmax_rows(x, e, row_max, row_sum, rows, cols):
    """e = softmax of x's (rows, cols) tile along each row (e may be x), through the row max
    and row sum tiles."""
    T.reduce_max(x, row_max, dim=1)
    for i, j in T.Parallel(rows, cols):
        e[i, j] = T.exp(x[i, j] - row_max[i])
    T.reduce_sum(e, row_sum, dim=1)
    for i, j in T.Parallel(rows, cols):
        e[i, j] = e[i, j] / row_sum[i]


@tilelang_mini.jit(out_idx=[-1])
def softmax(M, N, blk_m=32, dtype="float32"):
    accum = "float32"

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, blk_m)) as bx:
            x = T.alloc_fragment((blk_m, N), accum)
            e = T.alloc_fragment((blk_m, N), accum)
            row_max = T.alloc_fragment((blk_m,), accum)
            row_sum = T.alloc_fragment((blk_m,), accum)
            T.copy(X[bx * blk_m, 0], x)
            softmax_rows(x, e, row_max, row_sum, blk_m, N)
            T.copy(e, Y[bx * blk_m, 0])

    return main


def reference(x):
    """Independent float64 NumPy reference."""
    import numpy as np
    x64 = x.astype(np.float64)
    z = np.exp(x64 - x64.max(axis=1, keepdims=True))
    return z / z.sum(axis=1, keepdims=True)


def main(argv=None):
    from _common import example_args, make_inputs, report, timed, verify
    args = example_args(__doc__, argv, dtype="float32", shape=DEFAULT_ARGS)
    M, N = args.shape
    (x,) = make_inputs(args.seed, [(M, N)], args.dtype)
    kernel = tilelang_mini.compile(softmax.factory(M, N, dtype=args.dtype), out_idx=[-1],
                                   target=args.target, chip=args.chip)
    y, seconds = timed(kernel, x)
    # Entries are about 1/N: compare N * Y so the tolerances are relative to O(1) values.
    ok = verify("N*Y", y.astype("float64") * N, reference(x) * N, args.dtype)
    return report(kernel, seconds, ok, args)


if __name__ == "__main__":
    raise SystemExit(main())
