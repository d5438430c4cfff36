"""Shared helpers of the compat tests: random inputs and dtype-aware comparisons."""
import numpy as np

import tilelang_mini as tilelang
from tilelang_mini.ir import dtypes

CHIPS = ("ascend910b", "ascend950")


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


def run_all(target, prim, out_idx, args, wants, dts, reduce_len=1, sim=True, ws=None):
    """Run `prim` on `target` and compare each output with its float64 reference; on the numpy
    target also simulate it compiled for each chip (a race or deadlock raises)."""
    kernel = tilelang.compile(prim, out_idx=out_idx, target=target, workspace_idx=ws)
    runs = [kernel(*args)]
    if sim and target == "numpy":
        for chip in CHIPS:
            runs.append(tilelang.compile(prim, out_idx=out_idx, chip=chip, workspace_idx=ws)
                        .simulate(*args)[0])
    for got in runs:
        got = got if isinstance(got, (list, tuple)) else [got]
        assert len(got) == len(wants)
        for g, w, dt in zip(got, wants, dts):
            close(np.asarray(g), w, dt, reduce_len)


def simulated(kernel, *args):
    """The kernel's outputs on the pipe-level simulator (a race or deadlock raises)."""
    out, _ = kernel.simulate(*args)
    return out
