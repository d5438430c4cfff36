"""The MX dtypes, on every target against references written from their bit layouts:
float8_e8m0fnu (UE8M0): casts from float32 round as ml_dtypes does (the exponent, up when the
mantissa is at least a half; zero, negatives, inf and NaN become NaN), decoding is 2^(e - 127);
e8m0 scale tiles of the block-scaled gemm. float4_e2m1fn (one value per byte; packed data is
two codes per byte, unpacked with shifts and T.reinterpret)."""
import ml_dtypes
import numpy as np
import pytest

import tilelang_mini as tl
import tilelang_mini.language as T
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


def _bits_ref(x):
    """The UE8M0 byte of each float32, from its bits (written from ml_dtypes' behaviour)."""
    u = x.view(np.uint32)
    a = u & 0x7FFFFFFF
    ex, m = a >> 23, a & 0x7FFFFF
    r = np.where(ex == 0, (m > 0x400000).astype(np.uint32), ex + (m >= 0x400000))
    return np.where((r > 254) | (u != a) | (a == 0), 255, r).astype(np.uint8)


def test_e8m0_cast_and_decode(target):
    r = np.random.default_rng(0)
    special = np.array([0.0, -0.0, -1.0, 1.0, 1.5, 1.4999, 3.0, 6.0, 0.75, 1e-40, 2.0 ** -127,
                        2.0 ** -126 * 1.5, np.inf, -np.inf, np.nan, 1.7e38, 2.0 ** 127 * 1.5],
                       np.float32)
    bits = r.integers(0, 2 ** 32, 4000, dtype=np.uint64).astype(np.uint32)
    x = np.concatenate([special, bits.view(np.float32), (r.standard_normal(999) * 100)
                        .astype(np.float32)])
    n = x.size
    q, y = np.zeros(n, E8M0), np.zeros(n, np.float32)
    tl.compile(round_trip(n, "float8_e8m0fnu"), target=target)(x, q, y)
    assert np.array_equal(q.view(np.uint8), _bits_ref(x))
    with np.errstate(invalid="ignore", over="ignore"):
        assert np.array_equal(q.view(np.uint8), x.astype(E8M0).view(np.uint8))  # ml_dtypes too
        e = q.view(np.uint8).astype(np.float64)
        want = (np.where(e == 255, np.nan, 2.0 ** (e - 127)) * 2.0).astype(np.float32)
    np.testing.assert_array_equal(y, want)


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
