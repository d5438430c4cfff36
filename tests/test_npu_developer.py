"""The tilelang-ascend developer idiom: `T.Kernel(n, is_npu=True) as (cid, vid)` with block
indices computed from cid, developer or chip allocations and no T.Scope. The compiler splits it
into cube and vector programs and synchronises them, as for a grid kernel (issue 8)."""
import numpy as np
import pytest

import tilelang_mini
import tilelang_mini.language as T
from tilelang_mini import CompileError

from kernels import cube_tiles, example_module, gemm_tiles

softmax_rows = example_module("softmax").softmax_rows

CHIPS = ["ascend910b", "ascend950"]
RNG = np.random.default_rng(4)


def matmul_add(M, N, K, bm=32, bn=32, bk=32, alloc="developer"):
    m_num, n_num = M // bm, N // bn

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
             D: T.Tensor((M, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(m_num * n_num, is_npu=True) as (cid, vid):
            bx = cid // n_num
            by = cid % n_num
            if alloc == "developer":
                A_L1, B_L1, C_L0 = gemm_tiles(bm, bn, bk)
                d_ub = T.alloc_shared((bm, bn), "float32")
                c_ub = T.alloc_shared((bm, bn), "float32")
            else:
                A_L1, B_L1, C_L0 = cube_tiles(bm, bn, bk)
                d_ub = T.alloc_ub((bm, bn), "float32")
                c_ub = T.alloc_ub((bm, bn), "float32")
            T.clear(C_L0)
            for k in T.Pipelined(K // bk, num_stages=2):
                T.copy(A[bx * bm, k * bk], A_L1)
                T.copy(B[k * bk, by * bn], B_L1)
                T.gemm(A_L1, B_L1, C_L0)
            T.copy(C_L0, c_ub)
            T.copy(D[bx * bm, by * bn], d_ub)
            for i, j in T.Parallel(bm, bn):
                c_ub[i, j] = c_ub[i, j] + d_ub[i, j]
            T.copy(c_ub, C[bx * bm, by * bn])
    return main


def row_softmax(M, N, bm=16):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(M // bm, is_npu=True) as (cid, vid):
            x = T.alloc_ub((bm, N), "float32")
            m = T.alloc_ub((bm,), "float32")
            s = T.alloc_ub((bm,), "float32")
            T.copy(X[cid * bm, 0], x)
            softmax_rows(x, x, m, s, bm, N)  # examples/softmax.py's, in place on UB tiles
            T.copy(x, Y[cid * bm, 0])
    return main


@pytest.mark.parametrize("alloc", ["developer", "chip"])
def test_is_npu_kernel_without_scopes_is_split_and_synchronised(target, alloc):
    a, b = RNG.standard_normal((64, 96)).astype("float16"), RNG.standard_normal((96, 64)).astype("float16")
    d = RNG.standard_normal((64, 64)).astype("float32")
    ref = a.astype(np.float64) @ b.astype(np.float64) + d
    prim = matmul_add(64, 64, 96, alloc=alloc)
    out = tilelang_mini.compile(prim, out_idx=[-1], target=target)(a, b, d)
    np.testing.assert_allclose(out, ref, rtol=1e-3, atol=1e-3)
    for chip in CHIPS:
        simulated, _ = tilelang_mini.compile(prim, out_idx=[-1], chip=chip).simulate(a, b, d)
        np.testing.assert_allclose(simulated, ref, rtol=1e-3, atol=1e-3)


def test_is_npu_vector_kernel_without_scopes(target):
    x = RNG.standard_normal((48, 40)).astype("float32")
    e = np.exp(x.astype(np.float64) - x.max(1, keepdims=True))
    ref = e / e.sum(1, keepdims=True)
    prim = row_softmax(48, 40)
    out = tilelang_mini.compile(prim, out_idx=[-1], target=target)(x)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)
    for chip in CHIPS:
        simulated, _ = tilelang_mini.compile(prim, out_idx=[-1], chip=chip).simulate(x)
        np.testing.assert_allclose(simulated, ref, rtol=1e-5, atol=1e-6)


def test_vid_in_a_kernel_without_scopes_is_the_aiv_of_one_block(target):
    """tilelang-ascend developer mode spells the vector half with vid (no T.Scope): one block
    per cid, each vector instruction run by both AIVs with its own vid (split_cores)."""
    @T.prim_func
    def main(X: T.Tensor((32, 8), "float32"), Y: T.Tensor((32, 8), "float32")):
        with T.Kernel(2, is_npu=True) as (cid, vid):
            x = T.alloc_ub((8, 8), "float32")
            T.copy(X[cid * 16 + vid * 8, 0], x)
            T.copy(x, Y[cid * 16 + vid * 8, 0])
    kernel = tilelang_mini.compile(main, out_idx=[-1], target=target)
    x = np.arange(256, dtype=np.float32).reshape(32, 8)
    np.testing.assert_array_equal(kernel(x), x)
    assert kernel.ir.grid == (2,)