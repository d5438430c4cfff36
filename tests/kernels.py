"""The kernels the tests run, as factories returning a `T.prim_func` (tests do not import examples).

`build(factory, *args, target=..., **kw)` compiles one with the factory's `out_idx`."""
# No `from __future__ import annotations` here: the frontend reads T.Tensor annotations as objects.

import tilelang_mini
import tilelang_mini.language as T


def out_idx(*idx):
    def mark(factory):
        factory.out_idx = list(idx)
        return factory
    return mark


def build(factory, *args, target=None, chip=None, **kwargs):
    return tilelang_mini.compile(factory(*args, **kwargs), out_idx=factory.out_idx,
                                 target=target, chip=chip)


@out_idx(-1)
def gemm(M, N, K, block_M=32, block_N=32, block_K=16, dtype="float32", accum_dtype="float32",
         out_dtype="float32", trans_A=False, trans_B=False, num_stages=2):
    """C = op(A) @ op(B); A is (K, M) when trans_A, B is (N, K) when trans_B."""
    a_shape = (K, M) if trans_A else (M, K)
    b_shape = (N, K) if trans_B else (K, N)
    a_tile = (block_K, block_M) if trans_A else (block_M, block_K)
    b_tile = (block_N, block_K) if trans_B else (block_K, block_N)

    @T.prim_func
    def main(A: T.Tensor(a_shape, dtype), B: T.Tensor(b_shape, dtype),
             C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M)) as (bx, by):
            A_s = T.alloc_shared(a_tile, dtype)
            B_s = T.alloc_shared(b_tile, dtype)
            C_f = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_f)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                if trans_A:
                    T.copy(A[k * block_K, by * block_M], A_s)
                else:
                    T.copy(A[by * block_M, k * block_K], A_s)
                if trans_B:
                    T.copy(B[bx * block_N, k * block_K], B_s)
                else:
                    T.copy(B[k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_f, transpose_A=trans_A, transpose_B=trans_B)
            T.copy(C_f, C[by * block_M, bx * block_N])

    return main


@out_idx(-1)
def matmul_add(M, N, K, block_M=32, block_N=32, block_K=32, dtype="float16"):
    """C = A @ B + D (D float32, added in a Parallel map after the K loop)."""

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype),
             D: T.Tensor((M, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M)) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), dtype)
            B_s = T.alloc_shared((block_K, block_N), dtype)
            C_f = T.alloc_fragment((block_M, block_N), "float32")
            D_f = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(C_f)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_f)
            T.copy(D[by * block_M, bx * block_N], D_f)
            for i, j in T.Parallel(block_M, block_N):
                C_f[i, j] = C_f[i, j] + D_f[i, j]
            T.copy(C_f, C[by * block_M, bx * block_N])

    return main


@out_idx(-2, -1)
def prenorm(M, N, K, block_M=32, block_N=32, block_K=32, num_stages=2):
    """mHC prenorm: D = float(A) @ B.T, sqr_sum = sum(float(A)^2, axis=1); A bf16, B fp32."""
    assert N <= block_N

    @T.prim_func
    def main(A: T.Tensor((M, K), "bfloat16"), B: T.Tensor((N, K), "float32"),
             D: T.Tensor((M, N), "float32"), S: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            A_s = T.alloc_shared((block_M, block_K), "bfloat16")
            A_f = T.alloc_shared((block_M, block_K), "float32")
            B_s = T.alloc_shared((block_N, block_K), "float32")
            D_f = T.alloc_fragment((block_M, block_N), "float32")
            sq = T.alloc_fragment((block_M, block_K), "float32")
            ss = T.alloc_fragment((block_M,), "float32")
            T.clear(D_f)
            T.clear(ss)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[bx * block_M, k * block_K], A_s)
                T.copy(A_s, A_f)
                T.copy(B[0, k * block_K], B_s)
                T.gemm(A_f, B_s, D_f, transpose_B=True)
                for i, j in T.Parallel(block_M, block_K):
                    sq[i, j] = A_f[i, j] * A_f[i, j]
                T.reduce_sum(sq, ss, dim=1, clear=False)
            T.copy(D_f, D[bx * block_M, 0])
            T.copy(ss, S[bx * block_M])

    return main


@out_idx(-1)
def rmsnorm(M, N, blk_m=16, dtype="float32", eps=1e-6):
    """y = x / sqrt(mean(x^2, axis=1) + eps), computed in float32."""

    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, blk_m)) as bx:
            x = T.alloc_fragment((blk_m, N), "float32")
            sq = T.alloc_fragment((blk_m, N), "float32")
            s = T.alloc_fragment((blk_m,), "float32")
            T.copy(A[bx * blk_m:(bx + 1) * blk_m, :], x)
            for i, j in T.Parallel(blk_m, N):
                sq[i, j] = x[i, j] * x[i, j]
            T.reduce_sum(sq, s, dim=1)
            for i in T.Parallel(blk_m):
                s[i] = T.rsqrt(s[i] / N + eps)
            for i, j in T.Parallel(blk_m, N):
                x[i, j] *= s[i]
            T.copy(x, B[bx * blk_m:(bx + 1) * blk_m, :])

    return main


@out_idx(-1)
def softmax(M, N, blk_m=16, dtype="float32"):
    """Row softmax in float32: reduce_max, exp map, reduce_sum, divide."""

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, blk_m)) as bx:
            x = T.alloc_fragment((blk_m, N), "float32")
            mx = T.alloc_fragment((blk_m,), "float32")
            sm = T.alloc_fragment((blk_m,), "float32")
            T.copy(X[bx * blk_m, 0], x)
            T.reduce_max(x, mx, dim=1)
            for i, j in T.Parallel(blk_m, N):
                x[i, j] = T.exp(x[i, j] - mx[i])
            T.reduce_sum(x, sm, dim=1)
            for i, j in T.Parallel(blk_m, N):
                x[i, j] = x[i, j] / sm[i]
            T.copy(x, Y[bx * blk_m, 0])

    return main
