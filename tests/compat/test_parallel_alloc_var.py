"""`T.alloc_var` inside `T.Parallel`: each iteration's own scalar (a GPU thread's register),
set under an if/else and read in the same body; dsa_sparse_finetune's indexer backward keeps
the ReLU derivative this way. On every target and simulated, against NumPy."""
import numpy as np
import pytest

import tilelang_mini as tilelang
import tilelang_mini.language as T

from util import f64, rand


def relu_grad(M, N, with_init):
    @T.prim_func
    def main(X: T.Tensor((M, N), T.float32), W: T.Tensor((N,), T.float32),
             Y: T.Tensor((M, N), T.float32)):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((M, N), T.float32)
            w = T.alloc_fragment((N,), T.float32)
            y = T.alloc_fragment((M, N), T.float32)
            T.copy(X[bx * M, 0], x)
            T.copy(W, w)
            for i, j in T.Parallel(M, N):
                if with_init:
                    d = T.alloc_var(T.float32, init=0.5)
                    if x[i, j] > 0:
                        d = 1.0
                else:
                    d = T.alloc_var(T.float32)
                    if x[i, j] > 0:
                        d = 1.0
                    else:
                        d = 0.0
                d += 0.25
                y[i, j] = d * w[j]
            T.copy(y, Y)
    return main


@pytest.mark.parametrize("with_init", [False, True])
def test_alloc_var_per_iteration(target, with_init):
    M, N = 32, 16
    kernel = tilelang.compile(relu_grad(M, N, with_init), out_idx=[-1], target=target)
    x, w = rand((M, N)), rand((N,), seed=1)
    d = np.where(f64(x) > 0, 1.0, 0.5 if with_init else 0.0) + 0.25
    want = d * f64(w)[None]
    np.testing.assert_allclose(f64(kernel(x, w)), want, rtol=1e-6)
    if target == "numpy":
        np.testing.assert_allclose(f64(kernel.simulate(x, w)[0]), want, rtol=1e-6)
