"""Data types: the names the DSL accepts, their NumPy types (via ml_dtypes) and sizes."""
from __future__ import annotations

import ml_dtypes
import numpy as np

_NUMPY = {
    "float32": np.dtype(np.float32),
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "float8_e4m3fn": np.dtype(ml_dtypes.float8_e4m3fn),
    "float8_e5m2": np.dtype(ml_dtypes.float8_e5m2),
    "float8_e8m0fnu": np.dtype(ml_dtypes.float8_e8m0fnu),
    "float4_e2m1fn": np.dtype(ml_dtypes.float4_e2m1fn),  # one value per byte, the low nibble
    "int8": np.dtype(np.int8),
    "uint8": np.dtype(np.uint8),
    "int16": np.dtype(np.int16),
    "uint16": np.dtype(np.uint16),
    "int32": np.dtype(np.int32),
    "uint32": np.dtype(np.uint32),
    "int64": np.dtype(np.int64),
    # two e2m1 codes in one byte (the even K index in the low nibble): a packed FP4 operand of a
    # block-scaled gemm; elementwise code sees the byte as an unsigned integer (torch's
    # float4_e2m1fn_x2 viewed as uint8)
    "float4_e2m1fn_x2": np.dtype(np.uint8),
    # two int4 values in one byte (the even index of the last dim in the low nibble, as
    # AscendC's int4x2_t and TileLang's packing): the storage of a T.int4 buffer, whose last
    # dim the frontend halves; elementwise code sees the byte as an int8
    "int4x2": np.dtype(np.int8),
    "bool": np.dtype(np.bool_),
}

# Spellings users write that mean one of the names above.
ALIASES = {
    "float": "float32", "fp32": "float32", "half": "float16", "fp16": "float16",
    "bf16": "bfloat16", "fp8_e4m3": "float8_e4m3fn", "float8_e4m3": "float8_e4m3fn",
    "fp8_e5m2": "float8_e5m2", "int": "int32", "e8m0": "float8_e8m0fnu",
    "float8_e8m0": "float8_e8m0fnu", "fp4_e2m1": "float4_e2m1fn", "float4_e2m1": "float4_e2m1fn",
    "fp4_e2m1x2": "float4_e2m1fn_x2", "float4_e2m1x2": "float4_e2m1fn_x2",
    # TVM's older fp8 spellings (tilelang-ascend's example_gemm_fp8_pto)
    "e4m3_float8": "float8_e4m3fn", "e5m2_float8": "float8_e5m2",
}

DTYPES = tuple(_NUMPY)
FLOAT_DTYPES = ("float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu",
                "float4_e2m1fn")
# Integer dtypes: values compute as 64-bit integers and wrap to the element type when stored.
INT_DTYPES = ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "float4_e2m1fn_x2",
              "int4x2")
UNSIGNED_DTYPES = ("uint8", "uint16", "uint32", "float4_e2m1fn_x2")
# values per stored element along K of a gemm operand (packed FP4: two e2m1 codes per byte)
PACKED_K = {"float4_e2m1fn_x2": 2, "int4x2": 2}


def canonical(name) -> str | None:
    """The canonical dtype name for a user spelling (str, NumPy dtype, torch dtype: TileLang
    takes `T.Tensor(shape, torch.float16)`), or None if unsupported."""
    if type(name).__module__ == "torch" and not isinstance(name, str):  # torch.dtype, no import
        name = str(name).removeprefix("torch.")
    if not isinstance(name, str):
        try:
            dt = np.dtype(name)
        except TypeError:
            return None
        for key, value in _NUMPY.items():
            if value == dt:
                return key
        return None
    name = ALIASES.get(name, name)
    return name if name in _NUMPY else None


def to_numpy(name: str) -> np.dtype:
    return _NUMPY[name]


def itemsize(name: str) -> int:
    return _NUMPY[name].itemsize


def is_float(name: str) -> bool:
    return name in FLOAT_DTYPES


def is_int(name: str) -> bool:
    return name in INT_DTYPES


# value sets: a <= b when every value of dtype a is exactly a value of dtype b
_EXACT_IN = {
    "float8_e4m3fn": {"float16", "bfloat16", "float32"},
    "float8_e5m2": {"float16", "bfloat16", "float32"},
    "float8_e8m0fnu": {"float32"},
    "float4_e2m1fn": {"float16", "bfloat16", "float32"},
    "float16": {"float32"}, "bfloat16": {"float32"}, "float32": set(),
}


def exact_in(src: str, dst: str) -> bool:
    """Every value of float dtype `src` is exactly a value of `dst` (converting is exact)."""
    return src == dst or dst in _EXACT_IN.get(src, set())


E8M0 = _NUMPY["float8_e8m0fnu"]


def to_e8m0(x) -> np.ndarray:
    """Values -> float8_e8m0fnu (UE8M0) by our own rule, whatever ml_dtypes' version does: the
    value as float32 (the DSL's value type), then the nearest power of two 2^(e - 127),
    e in 0..254, ties up. For a normal 2^E * (1 + m / 2^23) that is 2^E, or 2^(E + 1) when
    m >= 0x400000 (half the mantissa range); a float32 subnormal m * 2^-149 becomes code 0
    (2^-127), or code 1 (2^-126) from m >= 0x600000 (1.5 * 2^-127, the midpoint). Zero,
    negatives, inf, NaN and values rounding past 2^127 give 255 (NaN). An e8m0 input is
    returned as it is."""
    a = np.asarray(x)
    if a.dtype == E8M0:
        return a
    with np.errstate(invalid="ignore", over="ignore"):
        u = np.asarray(a, np.float32).view(np.uint32)
    mag = u & np.uint32(0x7FFFFFFF)
    ex, m = mag >> np.uint32(23), mag & np.uint32(0x7FFFFF)
    code = np.where(ex == 0, (m >= 0x600000).astype(np.uint32), ex + (m >= 0x400000))
    code = np.where((code > 254) | (u != mag) | (mag == 0), 255, code).astype(np.uint8)
    return code.view(E8M0)


def store_rounding(name: str):
    """The function a target applies to values before writing them into a `name` element
    (NumPy's own cast by assignment for every other dtype): to_e8m0 for float8_e8m0fnu,
    else None."""
    return to_e8m0 if name == "float8_e8m0fnu" else None


def cast_array(a, name: str) -> np.ndarray:
    """`a` converted to dtype `name` (a new array): NumPy's cast, to_e8m0 for float8_e8m0fnu."""
    if name == "float8_e8m0fnu":
        return np.array(to_e8m0(a))
    return np.asarray(a).astype(_NUMPY[name])


def tolerance(name: str) -> tuple[float, float]:
    """(rtol, atol) to compare a result stored in `name` against a float64 reference."""
    return {
        "float32": (1e-4, 1e-4),
        "float16": (1e-2, 1e-2),
        "bfloat16": (2e-2, 2e-2),
        "float8_e4m3fn": (1.3e-1, 1e-1),
        "float8_e5m2": (2.6e-1, 2e-1),
        "float8_e8m0fnu": (5e-1, 0),
        "float4_e2m1fn": (2.5e-1, 2.5e-1),  # powers of two: a value is within a factor 1.5 of its own
        "bool": (0, 0),
    }.get(name, (0, 0))  # integer dtypes compare exactly
