"""TileLang's `tilelang.utils.tensor` host helpers, on NumPy (or anything `np.asarray` reads)."""
from __future__ import annotations

import enum

import numpy as np


def torch_assert_close(actual, expected, rtol=1e-2, atol=1e-2, max_mismatched_ratio=0.001,
                       **_ignored):
    """Compare two arrays or torch tensors (any dtype, bf16 and FP8 included) in float64, with
    TileLang's rule: at most `max_mismatched_ratio` of the elements may differ."""
    from ..profiler import assert_close
    assert_close(actual, expected, rtol, atol, max_mismatched_ratio, "tensor")


class TensorSupplyType(enum.Enum):
    Integer = 1
    Uniform = 2
    Normal = 3
    Randn = 4
    Zero = 5
    One = 6
    Auto = 7


def get_tensor_supply(supply_type=TensorSupplyType.Auto):
    """A function making a random array for a buffer-like `(shape, dtype)` parameter."""
    rng = np.random.default_rng(0)

    def supply(param):
        from ..ir import dtypes
        dt = dtypes.to_numpy(dtypes.canonical(param.dtype) or "float32")
        if supply_type in (TensorSupplyType.Zero,):
            return np.zeros(param.shape, dt)
        if supply_type in (TensorSupplyType.One,):
            return np.ones(param.shape, dt)
        if np.issubdtype(dt, np.integer):
            return rng.integers(-2, 3, param.shape).astype(dt)
        return rng.standard_normal(param.shape).astype(np.float32).astype(dt)

    return supply
