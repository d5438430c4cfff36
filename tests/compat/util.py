"""Shared helpers of the compat tests: random inputs and dtype-aware comparisons."""
import numpy as np

from tilelang_mini.ir import dtypes


def rand(shape, dtype="float32", seed=0, scale=1.0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * scale).astype(dtypes.to_numpy(dtype))


def close(got, want, dtype="float32", reduce_len=1):
    rtol, atol = dtypes.tolerance(dtype)
    atol *= max(1.0, np.sqrt(reduce_len) / 4)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(np.asarray(got).astype(np.float64), want, rtol=rtol, atol=atol)


def f64(x):
    return np.asarray(x).astype(np.float64)


def simulated(kernel, *args):
    """The kernel's outputs on the pipe-level simulator (a race or deadlock raises)."""
    out, _ = kernel.simulate(*args)
    return out
