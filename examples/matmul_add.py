"""GEMM with an added matrix, C = A @ B + D: the cube computes A @ B, the vector cores add D.

    python examples/matmul_add.py [--target numpy|llvm] [--chip ascend910b|ascend950]
                                  [--dtype float16|bfloat16|float32] [--shape M N K] [--no-simulate]

A and B are `dtype`, D and C float32. The K loop is the GEMM of examples/gemm.py; after it the
accumulator is updated on the vector unit by a T.Parallel map that reads a D tile, so the
compiler hands C_f from the cube (L0C) to the vector cores (UB) before the store.
"""
import tilelang_mini
import tilelang_mini.language as T
from gemm import gemm_k_loop  # examples/gemm.py (this file's directory is on sys.path)

DEFAULT_ARGS = (300, 200, 130)  # M, N, K: tails in every dimension


@tilelang_mini.jit(out_idx=[-1])
def matmul_add(M, N, K, block_M=128, block_N=128, block_K=64, num_stages=2, dtype="float16",
               accum_dtype="float32"):
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype),
             D: T.Tensor((M, N), accum_dtype), C: T.Tensor((M, N), accum_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M)) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), dtype)
            B_s = T.alloc_shared((block_K, block_N), dtype)
            C_f = T.alloc_fragment((block_M, block_N), accum_dtype)
            D_f = T.alloc_fragment((block_M, block_N), accum_dtype)
            gemm_k_loop(A, B, A_s, B_s, C_f, bx, by, num_stages)
            T.copy(D[by * block_M, bx * block_N], D_f)
            for i, j in T.Parallel(block_M, block_N):
                C_f[i, j] = C_f[i, j] + D_f[i, j]
            T.copy(C_f, C[by * block_M, bx * block_N])

    return main


def reference(a, b, d):
    """Independent float64 NumPy reference."""
    import numpy as np
    return a.astype(np.float64) @ b.astype(np.float64) + d.astype(np.float64)


def main(argv=None):
    from _common import example_args, make_inputs, report, run_and_verify
    args = example_args(__doc__, argv, dtype="float16", shape=DEFAULT_ARGS)
    M, N, K = args.shape
    a, b = make_inputs(args.seed, [(M, K), (K, N)], args.dtype)
    (d,) = make_inputs(args.seed + 1, [(M, N)], "float32")
    kernel = tilelang_mini.compile(matmul_add.factory(M, N, K, dtype=args.dtype), out_idx=[-1],
                                   target=args.target, chip=args.chip)
    ok, seconds = run_and_verify(kernel, (a, b, d), "C", reference(a, b, d), "float32",
                                 reduce_len=K, simulate=args.simulate)
    return report(kernel, seconds, ok, args)


if __name__ == "__main__":
    raise SystemExit(main())
