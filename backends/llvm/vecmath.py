"""Vectorised float math and dtype conversions, written as plain LLVM IR on scalars or vectors.

Conversions match NumPy / ml_dtypes bit for bit: float16 through the hardware conversion
(round-to-nearest-even), bfloat16 round-to-nearest-even with quiet NaNs (`sign | 0x7fc0`),
float8_e4m3fn (no infinities: overflow and inf become NaN `sign | 0x7f`) and float8_e5m2
(overflow becomes inf, NaN is `sign | 0x7e`), subnormals included; float8_e8m0fnu follows
our own rule (dtypes.to_e8m0: the nearest power of two), which ml_dtypes 0.7 shares and 0.6
does not for float32 subnormals.

exp/exp2/log are Cephes-style polynomial approximations (about 1-2 ulp), NaN/inf/zero/subnormal
inputs handled like NumPy; sqrt is the IEEE instruction and rsqrt is `1 / sqrt(x)` as NumPy does.
"""
from __future__ import annotations

import math

from tilelang_mini.ir.dtypes import FLOAT_DTYPES, exact_in

from .irutil import (F16, F32, I8, I16, I32, I64, STORAGE, UNSIGNED, Emitter, const, elem_type,
                     like)

INT_STORAGE = ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64",
               "float4_e2m1fn_x2", "int4x2")  # packed FP4 codes: the byte as an unsigned integer

FLOATS = FLOAT_DTYPES


# ------------------------------------------------------------------------------ numpy max/min


def fmax(e: Emitter, a, c):
    """np.maximum: NaN propagates; equal values give `a`."""
    a, c = e.match(a, c)
    b = e.b
    take_a = b.or_(b.fcmp_ordered(">=", a, c), b.fcmp_unordered("uno", a, a))
    return b.select(take_a, a, c)


def fmin(e: Emitter, a, c):
    a, c = e.match(a, c)
    b = e.b
    take_a = b.or_(b.fcmp_ordered("<=", a, c), b.fcmp_unordered("uno", a, a))
    return b.select(take_a, a, c)


# ------------------------------------------------------------------------------ transcendental

_EXP_P = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2,
          1.6666665459e-1, 5.0000001201e-1)
_LOG_P = (7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1,
          1.4249322787e-1, -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1,
          3.3333331174e-1)


def _fc(x, v):
    return const(x.type, float(v))


def _poly(e, r, coeffs):
    b = e.b
    y = _fc(r, coeffs[0])
    for c in coeffs[1:]:
        y = fma(e, y, r, _fc(r, c))
    return y


def fma(e, a, x, c):
    return e.intr("fma", a.type, [a, x, c])


def _ldexp(e, y, n):
    """y * 2**n for integer-valued float n in [-300, 300] (two exact power-of-two factors)."""
    b = e.b
    it = like(y.type, I32)
    ni = b.fptosi(n, it)
    n1 = b.ashr(ni, const(it, 1))
    n2 = b.sub(ni, n1)

    def pow2(k):
        return b.bitcast(b.shl(b.add(k, const(it, 127)), const(it, 23)), y.type)

    return b.fmul(b.fmul(y, pow2(n1)), pow2(n2))


def _exp_core(e, x, n):
    """exp(x) where n = round(x / ln2) (float); Cephes expf reduction and polynomial."""
    b = e.b
    r = fma(e, n, _fc(x, -0.693359375), x)
    r = fma(e, n, _fc(x, 2.12194440e-4), r)
    z = b.fmul(r, r)
    y = fma(e, _poly(e, r, _EXP_P), z, b.fadd(r, _fc(x, 1.0)))
    return _ldexp(e, y, n)


def _keep_nan(e, x, y):
    return e.b.select(e.b.fcmp_unordered("uno", x, x), x, y)


def exp(e: Emitter, x):
    b = e.b
    xc = e.intr("minnum", x.type, [e.intr("maxnum", x.type, [x, _fc(x, -104.0)]), _fc(x, 89.0)])
    n = e.unary("roundeven", b.fmul(xc, _fc(x, 1.4426950408889634)))
    return _keep_nan(e, x, _exp_core(e, xc, n))


def exp2(e: Emitter, x):
    b = e.b
    xc = e.intr("minnum", x.type, [e.intr("maxnum", x.type, [x, _fc(x, -151.0)]), _fc(x, 129.0)])
    n = e.unary("roundeven", xc)
    r = b.fmul(b.fsub(xc, n), _fc(x, math.log(2.0)))  # |r| <= ln2 / 2
    z = b.fmul(r, r)
    y = fma(e, _poly(e, r, _EXP_P), z, b.fadd(r, _fc(x, 1.0)))
    return _keep_nan(e, x, _ldexp(e, y, n))


def log(e: Emitter, x):
    b = e.b
    t = x.type
    it = like(t, I32)
    tiny = b.fcmp_ordered("<", x, _fc(x, 1.1754943508222875e-38))
    xs = b.select(tiny, b.fmul(x, _fc(x, 8388608.0)), x)  # normalise subnormals
    bits = b.bitcast(xs, it)
    ex = b.sub(b.and_(b.lshr(bits, const(it, 23)), const(it, 0xFF)), const(it, 126))
    ex = b.select(tiny, b.sub(ex, const(it, 23)), ex)
    m = b.bitcast(b.or_(b.and_(bits, const(it, 0x7FFFFF)), const(it, 0x3F000000)), t)
    small = b.fcmp_ordered("<", m, _fc(x, 0.707106781186547524))
    ex = b.select(small, b.sub(ex, const(it, 1)), ex)
    m = b.fsub(b.select(small, b.fadd(m, m), m), _fc(x, 1.0))
    fe = b.sitofp(ex, t)
    z = b.fmul(m, m)
    y = b.fmul(b.fmul(_poly(e, m, _LOG_P), m), z)
    y = fma(e, fe, _fc(x, -2.12194440e-4), y)
    y = fma(e, z, _fc(x, -0.5), y)
    r = fma(e, fe, _fc(x, 0.693359375), b.fadd(m, y))
    r = b.select(b.fcmp_ordered("==", x, _fc(x, 0.0)), _fc(x, -math.inf), r)
    r = b.select(b.fcmp_ordered("==", x, _fc(x, math.inf)), x, r)
    r = b.select(b.fcmp_unordered("ult", x, _fc(x, 0.0)), _fc(x, math.nan), r)  # x < 0 or NaN
    return r


def sqrt(e: Emitter, x):
    return e.unary("sqrt", x)


def rsqrt(e: Emitter, x):
    return e.b.fdiv(_fc(x, 1.0), e.unary("sqrt", x))


def sin(e: Emitter, x):
    return e.unary("sin", x)


def cos(e: Emitter, x):
    return e.unary("cos", x)


def floordiv_f(e: Emitter, a, c):
    """NumPy float floor division (npy_divmod) on float32 values."""
    b = e.b
    a, c = e.match(a, c)
    zero = _fc(a, 0.0)
    mod = b.frem(a, c)
    div = b.fdiv(b.fsub(a, mod), c)
    fix = b.and_(b.fcmp_unordered("une", mod, zero),
                 b.xor(b.fcmp_ordered("<", c, zero), b.fcmp_ordered("<", mod, zero)))
    div = b.select(fix, b.fsub(div, _fc(a, 1.0)), div)
    fl = e.unary("floor", div)
    fl = b.select(b.fcmp_ordered(">", b.fsub(div, fl), _fc(a, 0.5)), b.fadd(fl, _fc(a, 1.0)), fl)
    q = b.fdiv(a, c)
    res = b.select(b.fcmp_unordered("une", div, zero), fl, e.intr("copysign", a.type, [zero, q]))
    return b.select(b.fcmp_ordered("==", c, zero), q, res)


def mod_f(e: Emitter, a, c):
    """NumPy float remainder (sign of the divisor)."""
    b = e.b
    a, c = e.match(a, c)
    zero = _fc(a, 0.0)
    mod = b.frem(a, c)
    fix = b.and_(b.fcmp_unordered("une", mod, zero),
                 b.xor(b.fcmp_ordered("<", c, zero), b.fcmp_ordered("<", mod, zero)))
    mod = b.select(fix, b.fadd(mod, c), mod)
    return b.select(b.fcmp_ordered("==", mod, zero), e.intr("copysign", a.type, [zero, c]), mod)


# ----------------------------------------------------------------------------- conversions


def decode(e: Emitter, raw, storage: str):
    """Raw storage bits (as loaded) -> float32 / i64 / i1 value."""
    b = e.b
    t = raw.type
    if storage == "float32":
        return raw
    if storage == "float16":
        return b.fpext(b.bitcast(raw, like(t, F16)), like(t, F32))
    if storage == "bfloat16":
        w = b.shl(b.zext(raw, like(t, I32)), const(like(t, I32), 16))
        return b.bitcast(w, like(t, F32))
    if storage == "float8_e5m2":
        h = b.shl(b.zext(raw, like(t, I16)), const(like(t, I16), 8))
        return b.fpext(b.bitcast(h, like(t, F16)), like(t, F32))
    if storage == "float8_e4m3fn":
        it = like(t, I32)
        x = b.zext(raw, it)
        sign = b.shl(b.and_(x, const(it, 0x80)), const(it, 24))
        mag = b.and_(x, const(it, 0x7F))
        f = b.fmul(b.bitcast(b.shl(mag, const(it, 20)), like(t, F32)),
                   const(like(t, F32), 2.0 ** 120))
        f = b.select(b.icmp_unsigned("==", mag, const(it, 0x7F)), const(like(t, F32), math.nan), f)
        return b.bitcast(b.or_(b.bitcast(f, it), sign), like(t, F32))
    if storage == "float8_e8m0fnu":  # 2^(e - 127): e << 23, 2^-127 (subnormal) for 0, NaN for 255
        it = like(t, I32)
        x = b.zext(raw, it)
        w = b.select(b.icmp_unsigned("==", x, const(it, 0)), const(it, 0x00400000),
                     b.select(b.icmp_unsigned("==", x, const(it, 255)), const(it, 0x7FC00000),
                              b.shl(x, const(it, 23))))
        return b.bitcast(w, like(t, F32))
    if storage == "float4_e2m1fn":  # code s e e m (low nibble): 0 .5 1 1.5 2 3 4 6
        it = like(t, I32)
        x = b.zext(raw, it)
        ex = b.and_(b.lshr(x, const(it, 1)), const(it, 3))
        m = b.and_(x, const(it, 1))
        normal = b.or_(b.shl(b.add(ex, const(it, 126)), const(it, 23)), b.shl(m, const(it, 22)))
        w = b.select(b.icmp_unsigned("==", ex, const(it, 0)), b.mul(m, const(it, 0x3F000000)),
                     normal)
        return b.bitcast(b.or_(w, b.shl(b.and_(x, const(it, 8)), const(it, 28))), like(t, F32))
    if storage in INT_STORAGE:
        if elem_type(t).width == 64:
            return raw
        return (b.zext if storage in UNSIGNED else b.sext)(raw, like(t, I64))
    if storage == "bool":
        return b.icmp_unsigned("!=", raw, const(t, 0))
    raise ValueError(storage)


def _encode_fp8(e: Emitter, f, mant: int, bias: int, e4m3: bool):
    b = e.b
    it = like(f.type, I32)
    u = b.bitcast(f, it)
    sign = b.and_(u, const(it, 0x80000000))
    a = b.xor(u, sign)
    shift = 23 - mant
    odd = b.and_(b.lshr(a, const(it, shift)), const(it, 1))
    n = b.add(a, const(it, ((bias - 127) << 23) + (1 << (shift - 1)) - 1))
    n = b.lshr(b.add(n, odd), const(it, shift))
    magic = (127 - bias + shift + 1) << 23
    s = b.sub(b.bitcast(b.fadd(b.bitcast(a, f.type), b.bitcast(const(it, magic), f.type)), it),
              const(it, magic))
    o = b.select(b.icmp_unsigned("<", a, const(it, (128 - bias) << 23)), s, n)
    if e4m3:
        o = b.select(b.icmp_unsigned(">", o, const(it, 0x7E)), const(it, 0x7F), o)
        o = b.select(b.icmp_unsigned(">=", a, const(it, 0x7F800000)), const(it, 0x7F), o)
    else:
        o = b.select(b.icmp_unsigned(">=", a, const(it, (127 + 16) << 23)), const(it, 0x7C), o)
        o = b.select(b.icmp_unsigned(">", a, const(it, 0x7F800000)), const(it, 0x7E), o)
    o = b.or_(o, b.lshr(sign, const(it, 24)))
    return b.trunc(o, like(f.type, I8))


def _encode_e8m0(e: Emitter, f):
    """dtypes.to_e8m0's rule (the nearest power of two, ties up): the exponent, plus one when
    the mantissa is at least a half; a subnormal gives code 0 (2^-127), or code 1 (2^-126) from
    mantissa 0x600000 (1.5 * 2^-127, the midpoint) on; zero, negatives, inf, NaN and values
    rounding past 2^127 give 255 (NaN)."""
    b = e.b
    it = like(f.type, I32)
    u = b.bitcast(f, it)
    a = b.and_(u, const(it, 0x7FFFFFFF))
    ex = b.lshr(a, const(it, 23))
    m = b.and_(a, const(it, 0x7FFFFF))
    up = b.zext(b.icmp_unsigned(">=", m, const(it, 0x400000)), it)
    sub = b.zext(b.icmp_unsigned(">=", m, const(it, 0x600000)), it)
    r = b.select(b.icmp_unsigned("==", ex, const(it, 0)), sub, b.add(ex, up))
    bad = b.or_(b.icmp_unsigned(">", r, const(it, 254)),
                b.or_(b.icmp_unsigned("!=", u, a), b.icmp_unsigned("==", a, const(it, 0))))
    return b.trunc(b.select(bad, const(it, 255), r), like(f.type, I8))


def _encode_e2m1(e: Emitter, f):
    """As ml_dtypes: round to nearest even among 0 .5 1 1.5 2 3 4 6, saturating at 6 (inf
    too); the sign in bit 3; a NaN gives -0 (8), or +0 when its sign bit is set."""
    b = e.b
    it = like(f.type, I32)
    ft = f.type
    u = b.bitcast(f, it)
    a = b.bitcast(b.and_(u, const(it, 0x7FFFFFFF)), ft)
    code = const(it, 0)
    for bound, strict in ((0.25, True), (0.75, False), (1.25, True), (1.75, False), (2.5, True),
                          (3.5, False), (5.0, True)):  # ties go to the even code
        passed = b.fcmp_ordered(">" if strict else ">=", a, const(ft, bound))
        code = b.add(code, b.zext(passed, it))
    code = b.or_(code, b.and_(b.lshr(u, const(it, 28)), const(it, 8)))
    nan = b.xor(b.and_(b.lshr(u, const(it, 28)), const(it, 8)), const(it, 8))
    code = b.select(b.fcmp_unordered("uno", f, f), nan, code)
    return b.trunc(code, like(f.type, I8))


def _encode_bf16(e: Emitter, f):
    b = e.b
    it = like(f.type, I32)
    u = b.bitcast(f, it)
    lsb = b.and_(b.lshr(u, const(it, 16)), const(it, 1))
    r = b.lshr(b.add(b.add(u, const(it, 0x7FFF)), lsb), const(it, 16))
    nan = b.or_(b.and_(b.lshr(u, const(it, 16)), const(it, 0x8000)), const(it, 0x7FC0))
    is_nan = b.icmp_unsigned(">", b.and_(u, const(it, 0x7FFFFFFF)), const(it, 0x7F800000))
    return b.trunc(b.select(is_nan, nan, r), like(f.type, I16))


def encode_float(e: Emitter, f, storage: str):
    """float32 value -> raw bits of a float storage dtype (rounding to nearest even)."""
    b = e.b
    if storage == "float32":
        return f
    if storage == "float16":
        return b.bitcast(b.fptrunc(f, like(f.type, F16)), like(f.type, I16))
    if storage == "bfloat16":
        return _encode_bf16(e, f)
    if storage == "float8_e4m3fn":
        return _encode_fp8(e, f, 3, 7, True)
    if storage == "float8_e5m2":
        return _encode_fp8(e, f, 2, 15, False)
    if storage == "float8_e8m0fnu":
        return _encode_e8m0(e, f)
    if storage == "float4_e2m1fn":
        return _encode_e2m1(e, f)
    raise ValueError(storage)


def round_to(e: Emitter, f, dtype: str):
    """float32 -> the nearest value of `dtype`, as float32."""
    if dtype == "float32":
        return f
    if dtype == "bfloat16":  # keep the rounded high half
        b = e.b
        it = like(f.type, I32)
        r = b.zext(_encode_bf16(e, f), it)
        return b.bitcast(b.shl(r, const(it, 16)), f.type)
    return decode(e, encode_float(e, f, dtype), dtype)


def to_float(e: Emitter, v, kind: str):
    """Value of kind int/bool/float -> float32 (NumPy's to_f32)."""
    if kind == "float":
        return v
    t = like(v.type, F32)
    return e.b.uitofp(v, t) if kind == "bool" else e.b.sitofp(v, t)


def to_int(e: Emitter, v, kind: str):
    """-> i64 (NumPy's to_int: floats truncate through int32)."""
    b = e.b
    if kind == "int":
        return v
    if kind == "bool":
        return b.zext(v, like(v.type, I64))
    return b.sext(b.fptosi(v, like(v.type, I32)), like(v.type, I64))


def to_bool(e: Emitter, v, kind: str):
    b = e.b
    if kind == "bool":
        return v
    if kind == "float":
        return b.fcmp_unordered("une", v, const(v.type, 0.0))
    return b.icmp_signed("!=", v, const(v.type, 0))


def encode(e: Emitter, v, kind: str, dtype: str, storage: str, exact_from: str | None = None):
    """Assign a value (kind int/float/bool) to an element of declared `dtype` kept as `storage`:
    NumPy's assignment cast. `exact_from` names the value's own dtype when it is known to be
    exactly representable (skips the rounding)."""
    b = e.b
    if dtype in FLOATS:
        f = to_float(e, v, kind)
        if storage == dtype:
            if exact_from is not None and exact_in(exact_from, dtype):
                if dtype == "float32":
                    return f
                if dtype == "bfloat16":  # exact: the high half is the value (NaNs keep theirs)
                    it = like(f.type, I32)
                    return b.trunc(b.lshr(b.bitcast(f, it), const(it, 16)), like(f.type, I16))
            return encode_float(e, f, storage)
        if exact_from is None or not exact_in(exact_from, dtype):
            f = round_to(e, f, dtype)
        return encode_float(e, f, storage)
    if dtype in INT_STORAGE:
        it = STORAGE[dtype][0]
        if kind == "float":
            return b.trunc(b.fptosi(v, like(v.type, I64)), like(v.type, it)) if it.width < 64 \
                else b.fptosi(v, like(v.type, it))
        if kind == "bool":
            return b.zext(v, like(v.type, it))
        w = elem_type(v.type).width
        return b.trunc(v, like(v.type, it)) if w > it.width else (
            b.sext(v, like(v.type, it)) if w < it.width else v)
    if dtype == "bool":
        return b.zext(to_bool(e, v, kind), like(v.type, I8))
    raise ValueError(dtype)


def kind_of(dtype: str) -> str:
    if dtype in FLOATS:
        return "float"
    return "bool" if dtype == "bool" else "int"


def raw_type(storage: str):
    return STORAGE[storage][0]


__all__ = ["fmax", "fmin", "exp", "exp2", "log", "sqrt", "rsqrt", "sin", "cos", "floordiv_f", "mod_f", "decode",
           "encode", "encode_float", "round_to", "to_float", "to_int", "to_bool", "kind_of",
           "exact_in", "raw_type"]
