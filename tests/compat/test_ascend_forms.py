"""tilelang-ascend spellings from its xllm split_qkv_rmsnorm_mrope kernel: the one-statement
`with T.If(c), T.Then(): ...` (an `if c:` without else), and `T.tile.cast(dst, src, mode,
count)` with tiles of different sizes (the first `count` elements, each tile flattened
row-major). Both targets and the simulator, against float64 NumPy references."""
import numpy as np
import pytest

import tilelang_mini as tilelang
import tilelang_mini.language as T

from util import close, f64, rand


def kernel():
    @T.prim_func
    def main(X: T.Tensor((4, 256), "float16"), Y: T.Tensor((4, 64), "float32")):
        with T.Kernel(2, is_npu=True) as (cid, vid):
            wide = T.alloc_ub((1, 256), "float16")
            narrow = T.alloc_ub((1, 64), "float32")
            with T.Scope("V"):
                row = cid * 2 + vid
                T.copy(X[row, 0], wide)
                T.tile.cast(narrow, wide, "CAST_NONE", 64)       # the first 64 of 256
                with T.If(row > 1), T.Then():
                    T.tile.mul(narrow, narrow, 2.0)
                T.copy(narrow, Y[row, 0])
    return main


@pytest.mark.parametrize("target", ["numpy", "llvm"])
def test_if_then_statement_and_prefix_cast(target):
    x = rand((4, 256), "float16", 21)
    want = f64(x)[:, :64] * np.array([1, 1, 2, 2])[:, None]
    k = tilelang.compile(kernel(), out_idx=[1], target=target)
    close(np.asarray(k(x)), want, "float16")
    if target == "numpy":
        close(np.asarray(k.simulate(x)[0]), want, "float16")


def stacked_gemm(P=2, M=32, K=64, N=32):
    """expert_chunk_gated_delta_rule's `T.gemm_v0(w_l1[pid, :, :], h_l1[j, :, :], wh[j, :, :])`:
    gemm_v0 on one matrix of stacked L1/L0C tiles, the index a loop variable (before: the L0
    tiles were sized from the whole slice, rows taken for K)."""
    @T.prim_func
    def main(A: T.Tensor((P, M, K), "float16"), B: T.Tensor((P, K, N), "float16"),
             Y: T.Tensor((P, M, N), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_L1((P, M, K), "float16")
            b = T.alloc_L1((P, K, N), "float16")
            c = T.alloc_L0C((P, M, N), "float32")
            with T.Scope("C"):
                for p in T.serial(P):
                    T.copy(A[p, 0, 0], a[p, :, :])
                    T.copy(B[p, 0, 0], b[p, :, :])
                    T.barrier_all()
                    T.gemm_v0(a[p, :, :], b[p, :, :], c[p, :, :], init=True)
                    T.barrier_all()
                    T.copy(c[p, :, :], Y[p, 0, 0])
                    T.barrier_all()
    return main


@pytest.mark.parametrize("target", ["numpy", "llvm"])
def test_gemm_v0_on_stacked_tiles(target):
    a, b = rand((2, 32, 64), "float16", 14, 0.3), rand((2, 64, 32), "float16", 15, 0.3)
    want = np.stack([f64(a[p]) @ f64(b[p]) for p in range(2)])
    k = tilelang.compile(stacked_gemm(), out_idx=[2], target=target)
    close(k(a, b), want, "float32", reduce_len=64)
    if target == "numpy":
        close(k.simulate(a, b)[0], want, "float32", reduce_len=64)
