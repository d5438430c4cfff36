"""Tiled GEMM, C = A @ B, in the TileLang style: the flagship example.

    python examples/gemm.py [--target numpy|llvm] [--chip ascend910b|ascend950] [--dtype float16]
"""
import tilelang_mini
import tilelang_mini.language as T

DEFAULT_ARGS = (1000, 520, 300)  # M, N, K: what `tilelang-mini ir` builds, and main's shape


@T.macro
def gemm_k_loop(A, B, A_s, B_s, C_f, bx, by, num_stages):
    """C_f = the product of A's rows of block `by` and B's columns of block `bx`: the tiled
    GEMM's K loop through the tiles A_s (block_M, block_K) and B_s (block_K, block_N)."""
    block_M, block_K = A_s.shape
    block_N = B_s.shape[1]
    T.clear(C_f)
    for k in T.Pipelined(T.ceildiv(A.shape[1], block_K), num_stages=num_stages):
        T.copy(A[by * block_M, k * block_K], A_s)
        T.copy(B[k * block_K, bx * block_N], B_s)
        T.gemm(A_s, B_s, C_f)


@tilelang_mini.jit(out_idx=[-1])
def matmul(M, N, K, block_M=128, block_N=128, block_K=64, num_stages=2, dtype="float16",
           accum_dtype="float32"):
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype),
             C: T.Tensor((M, N), accum_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M)) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), dtype)
            B_s = T.alloc_shared((block_K, block_N), dtype)
            C_f = T.alloc_fragment((block_M, block_N), accum_dtype)
            gemm_k_loop(A, B, A_s, B_s, C_f, bx, by, num_stages)
            T.copy(C_f, C[by * block_M, bx * block_N])

    return main


def reference(a, b):
    """Independent reference: float64 NumPy matmul of the inputs as given."""
    import numpy as np
    return a.astype(np.float64) @ b.astype(np.float64)


def main(argv=None):
    from _common import gemm_main
    return gemm_main(__doc__, argv, DEFAULT_ARGS,
                     lambda M, N, K, dtype: matmul(M, N, K, dtype=dtype).prim_func, reference)


if __name__ == "__main__":
    raise SystemExit(main())
