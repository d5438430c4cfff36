"""Every test kernel on every target against an independent float64 NumPy reference."""
from __future__ import annotations

import numpy as np
import pytest

import kernels
from tilelang_mini.ir import dtypes

GEMM_SHAPES = [(70, 45, 33), (1, 1, 1), (129, 257, 65)]
LOW_PRECISION = ("float16", "bfloat16", "float8_e4m3fn", "float8_e5m2")


def rand(shape, dtype, seed=0, scale=1.0):
    """Random values already rounded to `dtype`, so the reference sees exactly the inputs."""
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * scale).astype(dtypes.to_numpy(dtype))


def assert_close(got, want, dtype, reduce_len=1):
    """Compare with the tolerance of the dtype the result is stored in; a sum of `reduce_len`
    rounded terms gets an absolute tolerance growing like sqrt(reduce_len)."""
    rtol, atol = dtypes.tolerance(dtype)
    atol *= max(1.0, np.sqrt(reduce_len) / 4)
    assert got.shape == want.shape
    assert got.dtype == dtypes.to_numpy(dtype)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=rtol, atol=atol)


def f64(x):
    return x.astype(np.float64)


@pytest.mark.parametrize("shape", GEMM_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dtype", ("float32", *LOW_PRECISION))
def test_gemm_dtypes(target, dtype, shape):
    M, N, K = shape
    scale = 0.5 if dtype.startswith("float8") else 1.0
    a, b = rand((M, K), dtype, 1, scale), rand((K, N), dtype, 2, scale)
    chip = "ascend950" if dtype.startswith("float8") else None  # the 910b cube has no FP8
    c = kernels.build(kernels.gemm, M, N, K, dtype=dtype, target=target, chip=chip)(a, b)
    assert_close(c, f64(a) @ f64(b), "float32", reduce_len=K)


@pytest.mark.parametrize("shape", GEMM_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("trans_A,trans_B", [(False, True), (True, False), (True, True)])
@pytest.mark.parametrize("dtype", ("float32", "bfloat16"))
def test_gemm_transposes(target, dtype, trans_A, trans_B, shape):
    M, N, K = shape
    a = rand((K, M) if trans_A else (M, K), dtype, 3)
    b = rand((N, K) if trans_B else (K, N), dtype, 4)
    kernel = kernels.build(kernels.gemm, M, N, K, dtype=dtype, trans_A=trans_A,
                           trans_B=trans_B, target=target)
    want = (f64(a).T if trans_A else f64(a)) @ (f64(b).T if trans_B else f64(b))
    assert_close(kernel(a, b), want, "float32", reduce_len=K)


@pytest.mark.parametrize("dtype", ("float16", "bfloat16"))
def test_gemm_low_precision_output(target, dtype):
    """Accumulate in float32, store C in the input dtype (a casting copy)."""
    M, N, K = 70, 45, 33
    a, b = rand((M, K), dtype, 5), rand((K, N), dtype, 6)
    c = kernels.build(kernels.gemm, M, N, K, dtype=dtype, out_dtype=dtype, target=target)(a, b)
    assert_close(c, f64(a) @ f64(b), dtype, reduce_len=K)


def test_gemm_tiles_one_stage(target):
    M, N, K = 65, 33, 100
    a, b = rand((M, K), "float32", 7), rand((K, N), "float32", 8)
    c = kernels.build(kernels.gemm, M, N, K, block_M=64, block_N=16, block_K=32, num_stages=1,
                      target=target)(a, b)
    assert_close(c, f64(a) @ f64(b), "float32", reduce_len=K)


@pytest.mark.parametrize("shape", [(70, 45, 33), (1, 1, 1)], ids=lambda s: "x".join(map(str, s)))
def test_matmul_add(target, shape):
    M, N, K = shape
    a, b, d = rand((M, K), "float16", 9), rand((K, N), "float16", 10), rand((M, N), "float32", 11)
    c = kernels.build(kernels.matmul_add, M, N, K, target=target)(a, b, d)
    assert_close(c, f64(a) @ f64(b) + f64(d), "float32", reduce_len=K)


@pytest.mark.parametrize("shape", [(70, 24, 100), (33, 32, 65), (1, 1, 1)],
                         ids=lambda s: "x".join(map(str, s)))
def test_prenorm(target, shape):
    M, N, K = shape
    a, b = rand((M, K), "bfloat16", 12), rand((N, K), "float32", 13)
    d, s = kernels.build(kernels.prenorm, M, N, K, target=target)(a, b)
    assert_close(d, f64(a) @ f64(b).T, "float32", reduce_len=K)
    assert_close(s, np.sum(f64(a) ** 2, axis=1), "float32", reduce_len=K)


@pytest.mark.parametrize("dtype", ("float32", "float16", "bfloat16"))
@pytest.mark.parametrize("shape", [(37, 50), (1, 7), (16, 128)], ids=lambda s: "x".join(map(str, s)))
def test_rmsnorm(target, dtype, shape):
    M, N = shape
    x = rand((M, N), dtype, 14)
    y = kernels.build(kernels.rmsnorm, M, N, dtype=dtype, target=target)(x)
    want = f64(x) / np.sqrt(np.mean(f64(x) ** 2, axis=1, keepdims=True) + 1e-6)
    assert_close(y, want, dtype)


@pytest.mark.parametrize("dtype", ("float32", "float16", "bfloat16"))
@pytest.mark.parametrize("shape", [(37, 45), (1, 1), (16, 128)], ids=lambda s: "x".join(map(str, s)))
def test_softmax(target, dtype, shape):
    M, N = shape
    x = rand((M, N), dtype, 15, scale=3.0)
    y = kernels.build(kernels.softmax, M, N, dtype=dtype, target=target)(x)
    z = np.exp(f64(x) - f64(x).max(axis=1, keepdims=True))
    want = z / z.sum(axis=1, keepdims=True)
    # entries are about 1/N: compare N * y so the tolerance is relative to O(1) values
    rtol, atol = dtypes.tolerance(dtype)
    np.testing.assert_allclose(f64(y) * N, want * N, rtol=rtol, atol=atol)
    assert y.dtype == dtypes.to_numpy(dtype)


def test_reference_would_fail(target):
    """The checks above can fail: a wrong reference is caught."""
    M, N, K = 70, 45, 33
    a, b = rand((M, K), "float32", 1), rand((K, N), "float32", 2)
    c = kernels.build(kernels.gemm, M, N, K, target=target)(a, b)
    wrong = f64(a) @ f64(b)
    wrong[M - 1, N - 1] += 1e-2  # one element of the last, clipped tile
    with pytest.raises(AssertionError):
        assert_close(c, wrong, "float32", reduce_len=K)
