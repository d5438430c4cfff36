"""Data types as plain Python values: `T.float16 == "float16"`, usable in factory defaults, host
code and kernels alike; inside a kernel `T.float32(x)` converts `x` (a cast)."""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np

# TileLang's dtype names -> the name the dtype is known by ("float" is float32, as in TileLang).
_SPELLINGS = {
    "float16": "float16", "float32": "float32", "float64": "float64", "bfloat16": "bfloat16",
    "float": "float32", "half": "float16", "double": "float64",
    "float8_e4m3fn": "float8_e4m3fn", "float8_e4m3": "float8_e4m3fn", "float8_e5m2": "float8_e5m2",
    "float8_e4m3fnuz": "float8_e4m3fnuz", "float8_e5m2fnuz": "float8_e5m2fnuz",
    "float8_e8m0fnu": "float8_e8m0fnu", "float4_e2m1fn": "float4_e2m1fn",
    "float4_e2m1fn_x2": "float4_e2m1fn_x2", "tfloat32": "float32",
    "float4_e2m1_unpacked": "float4_e2m1fn",  # TileLang: fp4 stored one per byte (a layout)
    "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64", "int4": "int4",
    "uint8": "uint8", "uint16": "uint16", "uint32": "uint32", "uint64": "uint64",
    "int": "int32", "uint": "uint32", "bool": "bool",
    # tilelang-ascend spellings
    "fp16": "float16", "fp32": "float32", "bf16": "bfloat16",
    # TileLang's device-pointer element (`T.Tensor([n], T.ptr)` tables): a value, so that
    # annotations evaluate; a buffer of it is a located GPU-only error
    "ptr": "ptr",
}
DTYPE_NAMES = tuple(_SPELLINGS)


class dtype(str):  # noqa: N801 (TileLang's spelling)
    """A dtype name that is also a `str` (compares equal to "float16" etc.).

    `T.dtype("float16")`, `T.float16`, `T.float` (float32). Inside a kernel, calling it converts
    a value: `T.float32(x)` is `T.cast(x, "float32")`; outside, it makes a NumPy scalar."""

    def __new__(cls, name="float32"):
        if isinstance(name, dtype):
            return name
        if not isinstance(name, str):  # a NumPy dtype or type, a torch dtype
            name = str(name).removeprefix("torch.") if type(name).__module__ == "torch" \
                else np.dtype(name).name
        return super().__new__(cls, _SPELLINGS.get(name, name))

    @property
    def bits(self) -> int:
        return 4 if self in ("int4", "float4_e2m1fn") else self.as_numpy().itemsize * 8

    @property
    def itemsize(self) -> int:
        return max(1, self.bits // 8)

    def as_numpy(self) -> np.dtype:
        if self == "float4_e2m1fn_x2":  # two packed e2m1 codes: stored as a byte
            return np.dtype(np.uint8)
        return np.dtype(getattr(ml_dtypes, self, None) or self)

    def as_torch(self):
        """The torch dtype of this dtype (TileLang's `dtype.as_torch()`; needs torch)."""
        import torch
        found = getattr(torch, str(self), None)
        if not isinstance(found, torch.dtype):
            raise TypeError(f"torch has no dtype {str(self)!r}")
        return found

    def __call__(self, value=0):
        return self.as_numpy().type(value)

    def __repr__(self) -> str:
        return f"dtype({str(self)!r})"


for _spelling in _SPELLINGS:
    globals()[_spelling] = dtype(_spelling)
del _spelling


def _info(d):
    d = dtype(d)
    np_dt = d.as_numpy()
    if d in ("float32", "float16", "bfloat16", "float64") or d.startswith("float"):
        return ml_dtypes.finfo(np_dt)
    return np.iinfo(np_dt)


def infinity(d="float32") -> float:
    """+inf of a float dtype (a Python float at trace time; `-T.infinity(dt)` is -inf)."""
    if not str(dtype(d)).startswith("float"):
        raise TypeError(f"T.infinity takes a float dtype, got {d!r}")
    return math.inf


def max_value(d="float32"):
    """The largest finite value of `d` (a Python number)."""
    info = _info(d)
    return float(info.max) if isinstance(info, ml_dtypes.finfo) else int(info.max)


def min_value(d="float32"):
    """The lowest finite value of `d` (most negative; a Python number)."""
    info = _info(d)
    return float(info.min) if isinstance(info, ml_dtypes.finfo) else int(info.min)


def _torch_maps() -> dict:
    """TileLang's `_TORCH_DTYPE_TO_STR` / `_STR_TO_TORCH_DTYPE` (examples' host helpers import
    them: gemm_sp's sparse_utils), built from torch's dtypes on first use; torch stays optional."""
    import torch
    to_str = {t: str(t).removeprefix("torch.") for t in vars(torch).values()
              if isinstance(t, torch.dtype) and str(t).removeprefix("torch.") in _SPELLINGS}
    return {"_TORCH_DTYPE_TO_STR": to_str,
            "_STR_TO_TORCH_DTYPE": {v: k for k, v in to_str.items()}}


def __getattr__(name):
    if name in ("_TORCH_DTYPE_TO_STR", "_STR_TO_TORCH_DTYPE"):
        return _torch_maps()[name]   # without torch: an ImportError (torch is not installed)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
