"""`tilelang.language.fp8`'s host-code helpers (TileLang's fp8 GEMM examples import them):
the dtype they choose feeds a kernel factory, here a cast to FP8 and back, on every target and
simulated, against ml_dtypes' rounding."""
import ml_dtypes
import numpy as np
import pytest

import tilelang_mini as tilelang
import tilelang_mini.language as T
from tilelang_mini.language.fp8 import determine_fp8_type, determine_torch_fp8_type

from util import f64, rand


def test_formats():
    assert determine_fp8_type() == T.float8_e4m3fn == "float8_e4m3fn"
    assert determine_fp8_type("e5m2") == T.float8_e5m2
    with pytest.raises(ValueError, match="e4m3"):
        determine_fp8_type("e3m4")
    want = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2}
    for fmt, np_type in want.items():
        got = determine_torch_fp8_type(fmt)
        assert got == np.dtype(np_type) or str(got).endswith(determine_fp8_type(fmt))


@tilelang.jit(out_idx=[-1])
def fp8_round_trip(M, N, block_M):
    fp8 = determine_fp8_type("e5m2" if N > 64 else "e4m3")

    @T.prim_func
    def main(X: T.Tensor((M, N), T.float32), Y: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            x = T.alloc_fragment((block_M, N), T.float32)
            q = T.alloc_fragment((block_M, N), fp8)
            T.copy(X[bx * block_M, 0], x)
            for i, j in T.Parallel(block_M, N):
                q[i, j] = T.cast(x[i, j], fp8)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = T.cast(q[i, j], T.float32)
            T.copy(x, Y[bx * block_M, 0])
    return main


@pytest.mark.parametrize("N,np_type", [(64, ml_dtypes.float8_e4m3fn), (128, ml_dtypes.float8_e5m2)])
def test_factory_dtype_round_trip(target, monkeypatch, N, np_type):
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    x = rand((32, N), scale=8.0)
    want = f64(x.astype(np_type))
    kernel = fp8_round_trip(32, N, 16)
    assert kernel.target == target
    np.testing.assert_array_equal(f64(kernel(x)), want)
    if target == "numpy":
        np.testing.assert_array_equal(f64(kernel.simulate(x)[0]), want)
