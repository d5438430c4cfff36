"""T.reduce_sum over a slice of a 3-D tile (`t[p, :, :]`, tilelang-ascend's rms_norm backward
with ping-pong tiles): a region of the tile, reduced on every target and simulated."""
import numpy as np
import pytest

import tilelang_mini as tl
import tilelang_mini.language as T

TARGETS = ("numpy", "llvm")


def row_sums(M=8, N=16, bm=4):
    @T.prim_func
    def k(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M,), "float32")):
        with T.Kernel(M // bm) as bx:
            t = T.alloc_shared((2, bm, N), "float32")
            out = T.alloc_fragment((bm,), "float32")
            T.copy(X[bx * bm, 0], t[bx % 2, :, :])
            T.reduce_sum(t[bx % 2, :, :], out, dim=-1)
            T.copy(out, Y[bx * bm])
    return k


@pytest.mark.parametrize("target", TARGETS)
def test_reduce_over_a_slice_of_a_3d_tile(target):
    x = np.random.default_rng(3).standard_normal((8, 16)).astype(np.float32)
    y = np.zeros(8, np.float32)
    kernel = tl.compile(row_sums(), target=target)
    kernel(x, y)
    np.testing.assert_allclose(y, x.astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-5)
    y2 = np.zeros(8, np.float32)
    kernel.simulate(x, y2)
    np.testing.assert_allclose(y2, x.astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-5)
