"""A T.Parallel map writing one value to every element of an L0C tile in a cube scope
(tilelang-ascend's grouped_gemm_bwd: `for i, j in T.Parallel(bm, bn): C_L0[i, j] = 0`) is the
cube's L0C fill (M pipe), then accumulating gemms: both targets and the simulator against a
float64 reference. A map that reads L0C stays a located error (the vector unit cannot reach it)."""
import numpy as np
import pytest

import tilelang_mini as tilelang
import tilelang_mini.language as T
from tilelang_mini import CompileError
from tilelang_mini.ir.nodes import Fill, walk_statements

from util import close, f64, rand
from kernels import cube_tiles

M, N, K, BK = 32, 32, 64, 32


def filled_gemm(value=0, read_back=False):
    @T.prim_func
    def main(A: T.Tensor((K, M), "float16"), B: T.Tensor((K, N), "float16"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, _):
            a_l1, b_l1, c_l0 = cube_tiles(M, N, BK, trans_A=True)
            with T.Scope("C"):
                for i, j in T.Parallel(M, N):
                    if read_back:
                        c_l0[i, j] = c_l0[i, j] * 2
                    else:
                        c_l0[i, j] = value
                T.barrier_all()
                for k in T.serial(K // BK):
                    T.copy(A[k * BK, 0], a_l1)
                    T.copy(B[k * BK, 0], b_l1)
                    T.barrier_all()
                    T.gemm_v0(a_l1, b_l1, c_l0, transpose_A=True)
                    T.barrier_all()
                T.copy(c_l0, C[0, 0])
    return main


@pytest.mark.parametrize("target", ["numpy", "llvm"])
@pytest.mark.parametrize("value", [0, 1.5])
def test_parallel_fill_of_l0c_then_accumulate(target, value):
    a, b = rand((K, M), "float16", 1), rand((K, N), "float16", 2)
    want = value + f64(a).T @ f64(b)
    kern = tilelang.compile(filled_gemm(value), target=target)
    c = np.full((M, N), -9.0, np.float32)
    kern(a, b, c)
    close(c, want, "float16", K)
    if target == "numpy":
        assert any(isinstance(s, Fill) for s in walk_statements(kern.compilation.stages["frontend"].body))
        c2 = np.full((M, N), -9.0, np.float32)
        kern.simulate(a, b, c2)
        close(c2, want, "float16", K)


def test_parallel_map_reading_l0c_is_located():
    with pytest.raises(CompileError) as err:
        tilelang.compile(filled_gemm(read_back=True), target="numpy")
    assert "L0C tile" in str(err.value) and "test_parallel_l0c_fill.py" in str(err.value)
