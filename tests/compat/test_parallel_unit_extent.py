"""A T.Parallel variable of extent 1 used only on the right of a store (upstream layernorm's
backward: `for i, j in T.Parallel(1, D): acc[j] += dy[j] * x_hat[i, j]`) is the constant 0, not a
reduction over i: every target accepts it and agrees with NumPy. A variable of extent > 1 used
that way stays a located error on the LLVM target."""
import numpy as np
import pytest

import tilelang_mini as tilelang
import tilelang_mini.language as T

from util import close, f64, rand

TARGETS = ("numpy", "llvm")


def row_accumulate(rows, d, ext=1):
    """acc[j] = sum over rows of dy[r, j] * x[r, j], each row staged in a (ext, d) tile."""

    @T.prim_func
    def main(DY: T.Tensor((rows, d), T.float32), X: T.Tensor((rows, d), T.float32),
             Acc: T.Tensor((d,), T.float32)):
        with T.Kernel(1, threads=64) as bx:
            x_s = T.alloc_shared((ext, d), T.float32)
            dy_s = T.alloc_shared((ext, d), T.float32)
            acc = T.alloc_fragment((d,), T.float32)
            T.clear(acc)
            for r in T.serial(rows):
                T.copy(X[r + bx, 0], x_s)
                T.copy(DY[r, 0], dy_s)
                for i, j in T.Parallel(ext, d):
                    acc[j] += dy_s[i, j] * x_s[i, j]
            T.copy(acc, Acc)
    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("rows,d", [(4, 64), (3, 40)])
def test_unit_extent_parallel_var_on_the_right(target, rows, d):
    dy, x = rand((rows, d), seed=1), rand((rows, d), seed=2)
    acc = np.zeros(d, np.float32)
    k = tilelang.compile(row_accumulate(rows, d), target=target)
    k(dy, x, acc)
    close(acc, (f64(dy) * f64(x)).sum(0), reduce_len=rows)


def test_wider_extent_is_still_a_located_reduction_error():
    with pytest.raises(tilelang.CompileError, match="would be a reduction"):
        tilelang.compile(row_accumulate(4, 64, ext=2), target="llvm")
