"""Scalar kernel parameters (`n: T.int32`, `alpha: T.float32`: TileLang's varlen attention takes
`max_seqlen_q: T.int32` as its grid extent; tilelang-ascend's xllm kernels take batch counts and
coefficients): the kernel is specialised per value, the parameter keeps its place among the
arguments (out_idx counts it) and the caller passes a number. Both targets and the simulator,
against float64 NumPy references."""
import numpy as np
import pytest

import tilelang_mini
import tilelang_mini.language as T

from util import close, f64, rand


def scaled_rows_func(N, block=32):
    @T.prim_func
    def main(X: T.Tensor((4 * block, N), T.float32), rows: T.int32, alpha: T.float32,
             Y: T.Tensor((4 * block, N), T.float32)):
        # the grid and the trace-time `if` depend on the scalar's value
        with T.Kernel(T.ceildiv(rows, block), threads=128) as bx:
            x = T.alloc_fragment((block, N), T.float32)
            T.copy(X[bx * block, 0], x)
            for i, j in T.Parallel(block, N):
                if bx * block + i < rows:
                    Y[bx * block + i, j] = x[i, j] * alpha
    return main


scaled_rows = tilelang_mini.jit(out_idx=[3])(scaled_rows_func)


@pytest.mark.parametrize("target", ["numpy", "llvm"])
@pytest.mark.parametrize("rows,alpha", [(70, 2.5), (128, -1.0), (5, 0.5)])
def test_scalar_params_specialise(target, rows, alpha):
    x = rand((128, 64), seed=rows)
    kern = tilelang_mini.compile(scaled_rows_func(64), out_idx=[3], target=target)
    want = np.zeros((128, 64))
    want[:rows] = f64(x)[:rows] * alpha
    close(np.asarray(kern(x, rows, alpha)), want)
    if target == "numpy":
        got, _ = kern.simulate(x, rows, alpha)
        close(np.asarray(got), want)


def test_a_kernel_with_scalar_params_prints():
    """repr of the (unspecialised) kernel names its scalar parameters and shape symbols (it
    raised AttributeError on the scalar names: found by the fuzzer's Hypothesis test)."""
    text = repr(scaled_rows_func(64))
    assert text.startswith("<SymbolicPrimFunc main (") and "alpha, rows" in text, text


def test_scalar_param_grid_follows_value():
    kern = scaled_rows(64)
    x = rand((128, 64))
    for rows in (33, 96):  # two values: two specialisations, each its own grid
        want = np.zeros((128, 64))
        want[:rows] = f64(x)[:rows] * 3.0
        close(np.asarray(kern(x, rows, 3.0)), want)


def test_scalar_param_rejects_an_array():
    kern = scaled_rows(64)
    with pytest.raises(tilelang_mini.ArgumentError, match="expected a number"):
        kern(rand((128, 64)), np.array([1, 2], np.int32), 1.0)
