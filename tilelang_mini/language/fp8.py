"""`tilelang.language.fp8`: the FP8 dtype choice TileLang's fp8 examples make in host code
(`dtype = determine_fp8_type()` in a kernel factory, `determine_torch_fp8_type()` for inputs).

This machine has one FP8 flavour per format, the OCP one CUDA uses (float8_e4m3fn, float8_e5m2);
the fnuz variants TileLang picks on ROCm GPUs never apply. Whether a tile op takes FP8 operands
is the target's business (ascend910b's cube has none: a located error names it)."""
from __future__ import annotations

_NAMES = {"e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2"}


def determine_fp8_type(fp8_format: str = "e4m3") -> str:
    """The FP8 dtype of `fp8_format` ("e4m3" or "e5m2"), as the dtype string T.* uses."""
    if fp8_format not in _NAMES:
        raise ValueError(f"unsupported FP8 format {fp8_format!r}: expected 'e4m3' or 'e5m2'")
    return _NAMES[fp8_format]


def determine_torch_fp8_type(fp8_format: str = "e4m3"):
    """The torch dtype of determine_fp8_type(fp8_format) when torch is installed, else the
    NumPy (ml_dtypes) dtype: inputs built with it run on either."""
    name = determine_fp8_type(fp8_format)
    try:
        import torch
        return getattr(torch, name)
    except ImportError:
        from ..ir.dtypes import to_numpy
        return to_numpy(name)
