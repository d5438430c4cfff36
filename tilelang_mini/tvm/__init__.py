"""The small part of TVM that TileLang examples import: `from tvm import DataType, tirx`.

TileLang examples build bit-manipulation helpers (unpacking int4 / fp4 fields, reassembling
float bits) from TVM's TIR expression API. Here those names are markers of the kernel language:
inside a kernel (or a helper inlined into one) they become the same IR expressions as the
matching `T.*` names; there is no TVM underneath. See docs/tilelang_compat.md (TVM names).

    tirx.const(3, "uint16")          -> 3  (a trace-time number; integer arithmetic is exact)
    tirx.Cast("float16", x)          -> T.Cast("float16", x)
    tirx.reinterpret("bfloat16", x)  -> T.reinterpret(x, "bfloat16")
    tirx.Select(c, a, b)             -> T.if_then_else(c, a, b)
    tirx.Min / Max, shift_left, bitwise_and, ... -> the T. names
    x.astype("uint16"), x.dtype      -> T.Cast("uint16", x), the value's dtype
    DataType("float16").bits         -> 16 (`T.dtype`)
    target.Target("hip -mcpu=gfx950") -> a description kept as data (selects nothing)
    @testing.requires_package("bitblas") -> tilelang_mini.testing's marker
"""
from __future__ import annotations

from ..language import dtype as DataType  # noqa: F401  (TVM's spelling)
from . import target, testing, tirx  # noqa: F401

tir = tirx  # TVM's older name of the same namespace

__all__ = ["DataType", "target", "testing", "tirx", "tir"]
