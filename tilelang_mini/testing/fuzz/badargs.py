"""Arguments a user may pass to a compiled kernel instead of the right arrays: the `args` family.

Layout variants (non-contiguous, negative strides, Fortran order, read-only, lists, other float
dtypes) must give the right result (copied or converted) or an ArgumentError, never a wrong
number or a crash; wrong shapes, wrong counts, 0-d arrays and scalars must be rejected."""
from __future__ import annotations

import numpy as np

LAYOUT = ("noncontig", "negstride", "fortran", "readonly", "list", "float64", "array_like")
MUST_REJECT = ("wrong_shape", "too_few", "too_many", "zero_d", "scalar", "empty")
KINDS = LAYOUT + MUST_REJECT


class _ArrayLike:
    """An object with only `__array__` (as many array libraries offer)."""

    def __init__(self, a):
        self._a = a

    def __array__(self, dtype=None, copy=None):
        return self._a if dtype is None else self._a.astype(dtype)


def bad_args(kind: str, args: list, index: int) -> list:
    """`args` with argument `index` replaced (or the list changed) as `kind` says."""
    args = list(args)
    a = args[index]
    if kind == "noncontig":
        big = np.zeros(a.shape[:-1] + (a.shape[-1] * 2,), a.dtype)
        big[..., ::2] = a
        args[index] = big[..., ::2]
    elif kind == "negstride":
        args[index] = np.flip(np.flip(a, 0).copy(), 0)
    elif kind == "fortran":
        args[index] = np.asfortranarray(a)
    elif kind == "readonly":
        b = a.copy()
        b.flags.writeable = False
        args[index] = b
    elif kind == "list":
        args[index] = a.tolist() if a.dtype.kind in "fi" and a.dtype.itemsize >= 4 else a
    elif kind == "float64":
        args[index] = a.astype(np.float64) if a.dtype.kind == "f" else a
    elif kind == "array_like":
        args[index] = _ArrayLike(a)
    elif kind == "wrong_shape":
        args[index] = np.zeros(a.shape[:-1] + (a.shape[-1] + 1,), a.dtype)
    elif kind == "too_few":
        del args[index]
    elif kind == "too_many":
        args.append(a.copy())
    elif kind == "zero_d":
        args[index] = np.array(1.0, a.dtype)
    elif kind == "scalar":
        args[index] = 1.5
    elif kind == "empty":
        args[index] = np.zeros((0,) + a.shape[1:], a.dtype)
    return args
