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


@out_idx(-1)
def flash_attention(BH, S, D, block_M=32, block_N=32, dtype="float16", num_stages=1):
    """O = softmax(Q @ K^T / sqrt(D)) @ V (TileLang's example_mha_fwd): Q, K, V (BH, S, D),
    O float32. Keys past S in the last block (zero-padded loads) are masked by a map that
    subtracts 1e30 where `k * block_N + j >= S`."""
    scale = 1.0 / D ** 0.5
    masked = S % block_N != 0

    @T.prim_func
    def main(Q: T.Tensor((BH, S, D), dtype), K: T.Tensor((BH, S, D), dtype),
             V: T.Tensor((BH, S, D), dtype), O: T.Tensor((BH, S, D), "float32")):
        with T.Kernel(T.ceildiv(S, block_M), BH) as (bx, by):
            Q_s = T.alloc_shared((block_M, D), dtype)
            K_s = T.alloc_shared((block_N, D), dtype)
            V_s = T.alloc_shared((block_N, D), dtype)
            acc_s = T.alloc_fragment((block_M, block_N), "float32")
            acc_s_cast = T.alloc_fragment((block_M, block_N), dtype)
            acc_o = T.alloc_fragment((block_M, D), "float32")
            m = T.alloc_fragment((block_M,), "float32")
            m_prev = T.alloc_fragment((block_M,), "float32")
            scale_i = T.alloc_fragment((block_M,), "float32")
            row_sum = T.alloc_fragment((block_M,), "float32")
            logsum = T.alloc_fragment((block_M,), "float32")
            T.copy(Q[by, bx * block_M:(bx + 1) * block_M, :], Q_s)
            T.fill(acc_o, 0.0)
            T.fill(logsum, 0.0)
            T.fill(m, -1e30)
            for k in T.Pipelined(T.ceildiv(S, block_N), num_stages=num_stages):
                T.copy(K[by, k * block_N:(k + 1) * block_N, :], K_s)
                T.gemm(Q_s, K_s, acc_s, transpose_B=True, clear_accum=True)
                if masked:
                    for i, j in T.Parallel(block_M, block_N):
                        acc_s[i, j] = acc_s[i, j] - T.cast(k * block_N + j >= S, "float32") * 1e30
                T.copy(m, m_prev)
                T.fill(m, -1e30)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    scale_i[i] = T.exp(m_prev[i] * scale - m[i] * scale)
                for i, j in T.Parallel(block_M, D):
                    acc_o[i, j] *= scale_i[i]
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp(acc_s[i, j] * scale - m[i] * scale)
                T.reduce_sum(acc_s, row_sum, dim=1)
                for i in T.Parallel(block_M):
                    logsum[i] = logsum[i] * scale_i[i] + row_sum[i]
                T.copy(acc_s, acc_s_cast)
                T.copy(V[by, k * block_N:(k + 1) * block_N, :], V_s)
                T.gemm(acc_s_cast, V_s, acc_o)
            for i, j in T.Parallel(block_M, D):
                acc_o[i, j] /= logsum[i]
            T.copy(acc_o, O[by, bx * block_M:(bx + 1) * block_M, :])

    return main


@out_idx(-1)
def gemm_expert(M, N, K, bm=64, bn=64, bk=32, dtype="float16"):
    """Expert mode: C = A @ B on the cube core with two ping-pong L1/L0 buffer sets and
    hand-placed flags (MTE2->MTE1, MTE1->M, the WAR channels M->MTE1 and MTE1->MTE2 primed
    before the K loop and drained after it, M->FIX). M, N, K multiples of bm, bn, 2 * bk."""
    assert M % bm == 0 and N % bn == 0 and K % (2 * bk) == 0
    nbn = N // bn

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel((M // bm) * nbn, is_npu=True) as (cid, vid):
            A_L1_0 = T.alloc_L1((bm, bk), dtype)
            A_L1_1 = T.alloc_L1((bm, bk), dtype)
            B_L1_0 = T.alloc_L1((bk, bn), dtype)
            B_L1_1 = T.alloc_L1((bk, bn), dtype)
            A_L0_0 = T.alloc_L0A((bm, bk), dtype)
            A_L0_1 = T.alloc_L0A((bm, bk), dtype)
            B_L0_0 = T.alloc_L0B((bk, bn), dtype)
            B_L0_1 = T.alloc_L0B((bk, bn), dtype)
            C_L0 = T.alloc_L0C((bm, bn), "float32")
            sets = ((0, A_L1_0, B_L1_0, A_L0_0, B_L0_0), (1, A_L1_1, B_L1_1, A_L0_1, B_L0_1))
            with T.Scope("C"):
                for s in [0, 1]:
                    T.set_flag("MTE1", "MTE2", s)
                    T.set_flag("M", "MTE1", s)
                T.clear(C_L0)
                for ko in T.serial(K // bk // 2):
                    for s, a_l1, b_l1, a_l0, b_l0 in sets:
                        T.wait_flag("MTE1", "MTE2", s)
                        T.copy(A[cid // nbn * bm, (ko * 2 + s) * bk], a_l1)
                        T.copy(B[(ko * 2 + s) * bk, cid % nbn * bn], b_l1)
                        T.set_flag("MTE2", "MTE1", s)
                        T.wait_flag("MTE2", "MTE1", s)
                        T.wait_flag("M", "MTE1", s)
                        T.copy(a_l1, a_l0)
                        T.copy(b_l1, b_l0)
                        T.set_flag("MTE1", "MTE2", s)
                        T.set_flag("MTE1", "M", s)
                        T.wait_flag("MTE1", "M", s)
                        T.gemm(a_l0, b_l0, C_L0)
                        T.set_flag("M", "MTE1", s)
                T.set_flag("M", "FIX", 0)
                T.wait_flag("M", "FIX", 0)
                T.copy(C_L0, C[cid // nbn * bm, cid % nbn * bn])
                for s in [0, 1]:
                    T.wait_flag("MTE1", "MTE2", s)
                    T.wait_flag("M", "MTE1", s)

    return main
