"""The MX dtypes, on every target against references written from their definitions:
float8_e8m0fnu (UE8M0): casts from float32 round to the nearest power of two 2^(e - 127),
e in 0..254, ties up (our rule, dtypes.to_e8m0, whatever the installed ml_dtypes does: 0.6 and
0.7 differ on float32 subnormals); zero, negatives, inf and NaN become NaN; decoding is
2^(e - 127). e8m0 scale tiles of the block-scaled gemm. float4_e2m1fn (one value per byte;
packed data is two codes per byte, unpacked with shifts and T.reinterpret)."""
import ml_dtypes
import numpy as np
import pytest

import tilelang_mini as tl
import tilelang_mini.language as T
from tilelang_mini.ir import dtypes
import kernels

E8M0 = ml_dtypes.float8_e8m0fnu


def round_trip(n, dt):
    @T.prim_func
    def mx_cast(X: T.Tensor((n,), "float32"), Q: T.Tensor((n,), dt),
                Y: T.Tensor((n,), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((n,), "float32")
            q = T.alloc_fragment((n,), dt)
            y = T.alloc_fragment((n,), "float32")
            T.copy(X, x)
            for i in T.Parallel(n):
                q[i] = T.cast(x[i], dt)
            for i in T.Parallel(n):
                y[i] = T.cast(q[i], "float32") * 2.0
            T.copy(q, Q)
            T.copy(y, Y)

    return mx_cast


def _nearest_ref(x):
    """The UE8M0 byte of each float32 by the nearest-value rule, in float64 from the value (not
    its bits, not ml_dtypes): x = f * 2^k with f in [0.5, 1) (frexp, exact) lies between
    2^(k-1) and 2^k, their midpoint is f = 0.75 (ties go up); below 2^-127 the only candidate
    is 2^-127 (code 0); a code past 254, zero, negatives, inf and NaN give 255."""
    with np.errstate(invalid="ignore"):
        v = x.astype(np.float64)
    ok = np.isfinite(v) & (v > 0)
    f, k = np.frexp(np.where(ok, v, 1.0))
    code = np.maximum(k - 1 + 127 + (f >= 0.75), 0)
    return np.where(ok & (code <= 254), code, 255).astype(np.uint8)


def _e8m0_inputs():
    """Special values, both sides of every exponent's midpoint 1.5 * 2^e (exact, one ulp
    below, one above), the float32 subnormals around 2^-127 and 1.5 * 2^-127, random bit
    patterns and random normals."""
    r = np.random.default_rng(0)
    special = np.array([0.0, -0.0, -1.0, 1.0, 1.5, 1.4999, 3.0, 6.0, 0.75, 1e-40, 2.0 ** -127,
                        2.0 ** -126 * 1.5, 2.0 ** -127 * 1.5, 2.0 ** -127 * 1.25, 2.0 ** -128,
                        2.0 ** -149, np.inf, -np.inf, np.nan, 1.7e38, 2.0 ** 127 * 1.5,
                        np.finfo(np.float32).max], np.float32)
    mid = (1.5 * 2.0 ** np.arange(-126, 128)).astype(np.float32)
    sub = np.array([0x3FFFFF, 0x400000, 0x400001, 0x500000, 0x5FFFFF, 0x600000, 0x600001,
                    0x7FFFFF], np.uint32).view(np.float32)
    bits = r.integers(0, 2 ** 32, 4000, dtype=np.uint64).astype(np.uint32)
    return np.concatenate([special, mid, np.nextafter(mid, 0), np.nextafter(mid, np.inf), sub,
                           bits.view(np.float32),
                           (r.standard_normal(999) * 100).astype(np.float32)])


def test_e8m0_reference_rule():
    """The reference itself on hand-derived codes, and to_e8m0 against it on every 97th
    float32 bit pattern (all exponents, both signs, subnormals)."""
    x = np.array([1.0, 1.5, np.nextafter(np.float32(1.5), 0), 2.0 ** -127 * 1.5,
                  np.nextafter(np.float32(2.0 ** -127 * 1.5), 0), 2.0 ** -127, 2.0 ** -149,
                  2.0 ** 127, 2.0 ** 127 * 1.5, 0.0, -2.0], np.float32)
    assert list(_nearest_ref(x)) == [127, 128, 127, 1, 0, 0, 0, 254, 255, 255, 255]
    every = np.arange(0, 2 ** 32, 97, dtype=np.uint64).astype(np.uint32).view(np.float32)
    assert np.array_equal(dtypes.to_e8m0(every).view(np.uint8), _nearest_ref(every))


def test_e8m0_cast_and_decode(target):
    x = _e8m0_inputs()
    n = x.size
    q, y = np.zeros(n, E8M0), np.zeros(n, np.float32)
    tl.compile(round_trip(n, "float8_e8m0fnu"), target=target)(x, q, y)
    assert np.array_equal(q.view(np.uint8), _nearest_ref(x))
    e = q.view(np.uint8).astype(np.float64)
    with np.errstate(over="ignore"):
        want = (np.where(e == 255, np.nan, 2.0 ** (e - 127)) * 2.0).astype(np.float32)
    np.testing.assert_array_equal(y, want)


def test_e8m0_implicit_casts(target):
    """Stores, copies, fills and reductions into e8m0 tiles round by the same rule as T.cast."""
    x = _e8m0_inputs()[:4096].reshape(64, 64)
    R, C = x.shape

    @T.prim_func
    def implicit(X: T.Tensor((R, C), "float32"), Q: T.Tensor((R, C), "float8_e8m0fnu"),
                 P: T.Tensor((R, C), "float8_e8m0fnu"), F: T.Tensor((R, C), "float8_e8m0fnu"),
                 Y: T.Tensor((R, C), "float32"), M: T.Tensor((R,), "float8_e8m0fnu")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((R, C), "float32")
            e = T.alloc_fragment((R, C), "float8_e8m0fnu")  # each way in, then copied out
            y = T.alloc_fragment((R, C), "float32")
            m = T.alloc_fragment((R,), "float8_e8m0fnu")
            T.copy(X, x)
            T.copy(Y, y)
            for i, j in T.Parallel(R, C):
                e[i, j] = x[i, j]
            T.copy(e, Q)
            T.copy(x, e)
            T.copy(e, P)
            T.fill(e, x[0, 5])
            T.copy(e, F)
            T.reduce_min(y, m, dim=1)
            T.copy(m, M)

    # each row's minimum in column 3: subnormals and exponent midpoints, ulp either side
    mid = (1.5 * 2.0 ** np.arange(-126, 126, 14)).astype(np.float32)
    low = np.concatenate([np.array([0x3FFFFF, 0x400000, 0x400001, 0x5FFFFF, 0x600000, 0x600001],
                                   np.uint32).view(np.float32),
                          mid, np.nextafter(mid, 0), np.nextafter(mid, np.inf)])[:R]
    pos = np.full((R, C), 2.0 ** 100, np.float32)
    pos[:, 3] = np.resize(low, R)
    outs = [np.zeros((R, C), E8M0) for _ in range(3)] + [np.zeros(R, E8M0)]
    tl.compile(implicit, target=target)(x, *outs[:3], pos, outs[3])
    want = _nearest_ref(x)
    for got in outs[:2]:
        assert np.array_equal(got.view(np.uint8), want)
    assert np.array_equal(outs[2].view(np.uint8), np.full((R, C), want[0, 5]))
    assert np.array_equal(outs[3].view(np.uint8), _nearest_ref(pos.min(axis=1)))
    assert len(set(outs[3].view(np.uint8))) > 15


def test_e8m0_scale_tiles_in_a_scaled_gemm(target):
    M, N, K, g = 24, 16, 160, 32
    G = K // g

    mx = kernels.scaled_gemm(M, N, K, g, False, True, scales="e8m0")

    r = np.random.default_rng(1)
    a = r.standard_normal((M, K)).astype(ml_dtypes.float8_e4m3fn)
    b = r.standard_normal((N, K)).astype(ml_dtypes.float8_e4m3fn)
    ea, eb = r.integers(117, 137, (M, G)).astype(np.uint8), r.integers(117, 137, (N, G)).astype(
        np.uint8)
    kg = np.arange(K) // g
    want = (a.astype(np.float64) * 2.0 ** (ea[:, kg] - 127.0)) @ (
        b.astype(np.float64) * 2.0 ** (eb[:, kg] - 127.0)).T
    c = np.full((M, N), np.nan, np.float32)
    k = tl.compile(mx, target=target, chip="ascend950")
    k(a, ea.view(E8M0), b, eb.view(E8M0), c)
    assert np.max(np.abs(c - want)) <= 1e-5 * np.abs(want).max()
    if target == "numpy":
        c2 = np.zeros((M, N), np.float32)
        k.simulate(a, ea.view(E8M0), b, eb.view(E8M0), c2)
        assert np.max(np.abs(c2 - want)) <= 1e-5 * np.abs(want).max()


def test_e8m0_is_not_a_gemm_operand():
    bad = kernels.gemm(16, 16, 16, block_M=16, block_N=16, block_K=16, dtype="float8_e8m0fnu")
    with pytest.raises(tl.CompileError, match="scale format"):
        tl.compile(bad, target="numpy", chip="ascend950")


FP4 = ml_dtypes.float4_e2m1fn
FP4_VALUES = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6])


def _fp4_ref(x):
    """e2m1 code of each float32: nearest of the 8 magnitudes, ties to the even code,
    saturating at 6; sign in bit 3 (also for -0); NaN -> 8, or 0 with its sign bit set."""
    a = np.abs(x.astype(np.float64))
    code = np.zeros(x.shape, np.int64)
    for bound, strict in ((0.25, True), (0.75, False), (1.25, True), (1.75, False), (2.5, True),
                          (3.5, False), (5.0, True)):
        code += (a > bound) if strict else (a >= bound)
    code |= np.signbit(x).astype(np.int64) << 3
    return np.where(np.isnan(x), 8 - 8 * np.signbit(x), code).astype(np.uint8)


def test_fp4_cast_and_decode(target):
    r = np.random.default_rng(2)
    edges = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 6.0, 7.0, 1e30, np.inf, np.nan,
                      0.0, 1e-30, 0.2500001, 4.9999], np.float32)
    x = np.concatenate([edges, -edges, (r.standard_normal(2000) * 3).astype(np.float32)])
    n = x.size
    q, y = np.zeros(n, FP4), np.zeros(n, np.float32)
    tl.compile(round_trip(n, "float4_e2m1fn"), target=target)(x, q, y)
    assert np.array_equal(q.view(np.uint8), _fp4_ref(x))
    assert np.array_equal(q.view(np.uint8), x.astype(FP4).view(np.uint8))  # ml_dtypes too
    c = q.view(np.uint8).astype(np.int64)
    want = np.where(c & 8, -1.0, 1.0) * FP4_VALUES[c & 7] * 2.0
    np.testing.assert_array_equal(y, want.astype(np.float32))


def test_fp4_unpacked_from_bytes(target):
    """DeepGEMM's packing (two codes per byte, the even index in the low nibble) read with
    shifts and T.reinterpret(code, "float4_e2m1fn")."""
    R, C = 5, 34

    @T.prim_func
    def unpack(P: T.Tensor((R, C // 2), "uint8"), Y: T.Tensor((R, C), "float32")):
        with T.Kernel(1) as bx:
            p = T.alloc_fragment((R, C // 2), "uint8")
            y = T.alloc_fragment((R, C), "float32")
            T.copy(P, p)
            for i, j in T.Parallel(R, C):
                y[i, j] = T.cast(T.reinterpret(T.cast((p[i, j // 2] >> ((j % 2) * 4)) & 15,
                                                      "uint8"), "float4_e2m1fn"), "float32")
            T.copy(y, Y)

    codes = np.random.default_rng(3).integers(0, 16, (R, C))
    packed = (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8)
    y = np.zeros((R, C), np.float32)
    tl.compile(unpack, target=target)(packed, y)
    np.testing.assert_array_equal(y, np.where(codes & 8, -1.0, 1.0) * FP4_VALUES[codes & 7])
