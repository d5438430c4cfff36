"""T.truncdiv / T.truncmod (C's integer `/` and `%`: the quotient rounded toward zero, the
remainder with the dividend's sign), T.round (TVM's tir.round, C roundf: ties away from zero),
T.trunc, T.nearbyint (ties to even), T.isnan/isinf/isfinite and T.tan, in TileLang's spelling: element maps in T.Parallel, integer scalars and trace-time
numbers, on both targets and simulated, against NumPy references in int64 / float64 built from
the definitions (not from the kernel's own formulas)."""
import numpy as np

import tilelang_mini as tilelang
import tilelang_mini.language as T


def c_divmod(a, b):
    a, b = a.astype(np.int64), b.astype(np.int64)
    q = np.sign(a) * np.sign(b) * (np.abs(a) // np.abs(b))
    return q, a - b * q


def ties_away(x):
    x = x.astype(np.float64)
    return np.copysign(np.floor(np.abs(x) + 0.5), x)  # exact in float64 for float32/16 inputs


@tilelang.jit(out_idx=[-4, -3, -2, -1])
def int_divmod(N, block, k):
    @T.prim_func
    def main(A: T.Tensor((N,), T.int32), B: T.Tensor((N,), T.int32),
             Q: T.Tensor((N,), T.int32), R: T.Tensor((N,), T.int32),
             QK: T.Tensor((N,), T.int32), RK: T.Tensor((N,), T.int32)):
        with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
            a_s = T.alloc_shared((block,), T.int32)
            T.copy(A[bx * block], a_s)
            for i in T.Parallel(block):
                Q[bx * block + i] = T.truncdiv(a_s[i], B[bx * block + i])
                R[bx * block + i] = T.truncmod(a_s[i], B[bx * block + i])
                QK[bx * block + i] = T.truncdiv(a_s[i], k)
                RK[bx * block + i] = T.truncmod(a_s[i], k)
    return main


def _operands(n, seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(-1000, 1000, n).astype(np.int32)
    b = rng.integers(1, 40, n).astype(np.int32) * rng.choice([-1, 1], n).astype(np.int32)
    a[:8] = [-7, 7, -7, 7, 0, -1, -6, 6]
    b[:8] = [2, 2, -2, -2, 3, 5, -3, -3]
    return a, b


def test_truncdiv_truncmod_in_parallel_maps(target, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    n = 200
    a, b = _operands(n, 1)
    for k in (3, -4):
        kern = int_divmod(n, 64, k)
        q, r = c_divmod(a, b)
        qk, rk = c_divmod(a, np.full(n, k))
        for got in (kern(a, b), kern.simulate(a, b)[0]):
            for g, w in zip(got, (q, r, qk, rk)):
                assert g.dtype == np.int32
                np.testing.assert_array_equal(g, w)


@tilelang.jit(out_idx=[-1])
def scalar_divmod(N, k):
    @T.prim_func
    def main(A: T.Tensor((N,), T.int32), B: T.Tensor((N,), T.int32),
             Out: T.Tensor((N, 4), T.int32)):
        with T.Kernel(1) as bx:
            for i in T.serial(N):
                a = T.alloc_var(T.int32)
                a = A[i]
                Out[i, 0] = T.truncdiv(a, B[i])
                Out[i, 1] = T.truncmod(a, B[i]) + T.truncmod(bx - 7, 2)  # -1 at trace time
                Out[i, 2] = T.truncdiv(a, k)
                Out[i, 3] = T.truncmod(a, k)
    return main


def test_truncdiv_truncmod_on_scalars(target, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    n = 40
    a, b = _operands(n, 2)
    kern = scalar_divmod(n, -3)
    q, r = c_divmod(a, b)
    qk, rk = c_divmod(a, np.full(n, -3))
    want = np.stack([q, r - 1, qk, rk], axis=1)
    np.testing.assert_array_equal(kern(a, b), want)
    np.testing.assert_array_equal(kern.simulate(a, b)[0], want)


def test_trace_time_numbers():
    @T.prim_func
    def main(Out: T.Tensor((9,), T.float32)):
        with T.Kernel(1):
            Out[0] = T.truncdiv(-7, 2) * 1.0
            Out[1] = T.truncmod(-7, 2) * 1.0
            Out[2] = T.truncmod(7, -2) * 1.0
            Out[3] = T.round(-2.5)
            Out[4] = T.round(0.49999999999999994)
            Out[5] = T.trunc(-3.75)
            Out[6] = T.nearbyint(2.5)
            Out[7] = T.nearbyint(-3.5)
            Out[8] = T.if_then_else(T.isinf(-1e400) and not T.isfinite(1e400), 1.0, 0.0)

    got = tilelang.compile(main, out_idx=[-1], target="numpy")()
    np.testing.assert_array_equal(got, [-3.0, -1.0, 1.0, -3.0, 0.0, -3.0, 2.0, -4.0, 1.0])


@tilelang.jit(out_idx=[-2, -1])
def round_map(N, block, dtype):
    @T.prim_func
    def main(X: T.Tensor((N,), dtype), Y: T.Tensor((N,), dtype), Z: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
            x_f = T.alloc_fragment((block,), dtype)
            y_f = T.alloc_fragment((block,), dtype)
            T.copy(X[bx * block], x_f)
            for i in T.Parallel(block):
                y_f[i] = T.round(x_f[i])
                Z[bx * block + i] = T.trunc(x_f[i])
            T.copy(y_f, Y[bx * block])
    return main


_EDGES = [0.49999997, -0.49999997, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 0.50000006, -0.50000006,
          8388607.5, -8388607.5, 4194303.5, 8388608.0, -8388609.0, 1e10, -1e10, 0.0, -0.0,
          -0.3, 0.3, 1.4999999, -1.4999999, 3.4e38, -3.4e38, np.inf, -np.inf, np.nan]


def _check_round(kern, x):
    want_r, want_t = ties_away(x), np.trunc(x.astype(np.float64))
    outs = [kern(x), kern.simulate(x)[0]]
    for y, z in outs:
        for g, w in ((y, want_r), (z, want_t)):
            assert g.dtype == x.dtype
            np.testing.assert_array_equal(g.astype(np.float64), w.astype(x.dtype).astype(np.float64))
            # the sign of zero too: C roundf(-0.3) is -0.0
            fin = np.isfinite(w) & (w == 0)
            np.testing.assert_array_equal(np.signbit(g[fin]), np.signbit(w[fin]))
    return outs


def test_round_float32_edges_and_random(target, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(256) * 4).astype(np.float32)
    x[: len(_EDGES)] = np.array(_EDGES, np.float32)
    x[40:60] = np.round(x[40:60] * 2) / 2  # exact ties
    _check_round(round_map(256, 64, T.float32), x)


def test_round_float16(target, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    rng = np.random.default_rng(4)
    x = (rng.standard_normal(128) * 8).astype(np.float16)
    x[:10] = np.array([0.4998, -0.4998, 0.5, -0.5, 2.5, -3.5, 1024.5, -1023.5, 60000, -0.0],
                      np.float16)
    _check_round(round_map(128, 64, T.float16), x)


def test_numpy_and_llvm_agree_bit_for_bit(monkeypatch):
    rng = np.random.default_rng(5)
    x = (rng.standard_normal(256) * 3).astype(np.float32)
    x[: len(_EDGES)] = np.array(_EDGES, np.float32)
    a, b = _operands(256, 6)
    outs = {}
    for t in ("numpy", "llvm"):
        monkeypatch.setenv("TILELANG_MINI_TARGET", t)
        outs[t] = [o.view(np.uint32) for o in round_map(256, 64, T.float32)(x)]
        outs[t] += [o.view(np.uint32) for o in int_divmod(256, 64, -5)(a, b)]
        outs[t] += [o.view(np.uint32) for o in more_math(256, T.float32)(x)]
    for p, q in zip(outs["numpy"], outs["llvm"]):
        np.testing.assert_array_equal(p, q)


@tilelang.jit(out_idx=[-2, -1])
def more_math(N, dtype):
    @T.prim_func
    def main(X: T.Tensor((N,), dtype), Y: T.Tensor((N,), dtype), F: T.Tensor((N, 3), T.int32)):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(N):
                Y[i] = T.nearbyint(X[i])
                F[i, 0] = T.if_then_else(T.isnan(X[i]), 1, 0)
                F[i, 1] = T.if_then_else(T.isinf(X[i]), 1, 0)
                F[i, 2] = T.if_then_else(T.isfinite(X[i]), 1, 0)
    return main


def test_nearbyint_and_float_classes(target, monkeypatch):
    """nearbyint rounds ties to even (NumPy's rint is that rounding); isnan/isinf/isfinite."""
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    rng = np.random.default_rng(7)
    for dt in (np.float32, np.float16):
        x = (rng.standard_normal(128) * 6).astype(dt)
        with np.errstate(over="ignore"):  # 1e10 and 3.4e38 are inf in float16
            x[: len(_EDGES)] = np.array(_EDGES, np.float32).astype(dt)
        x[40:70] = np.arange(-15, 15) + 0.5  # ties both ways
        kern = more_math(128, T.float32 if dt is np.float32 else T.float16)
        want_f = np.stack([np.isnan(x), np.isinf(x), np.isfinite(x)], axis=1).astype(np.int32)
        want_y = np.rint(x.astype(np.float64))
        for y, f in (kern(x), kern.simulate(x)[0]):
            np.testing.assert_array_equal(y.astype(np.float64), want_y)
            np.testing.assert_array_equal(np.signbit(y[want_y == 0]), np.signbit(want_y[want_y == 0]))
            np.testing.assert_array_equal(f, want_f)


@tilelang.jit(out_idx=[-1])
def tangent(N):
    @T.prim_func
    def main(X: T.Tensor((N,), T.float32), Y: T.Tensor((N,), T.float32)):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(N):
                Y[i] = T.tan(X[i])
    return main


def test_tan(target, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    x = np.random.default_rng(8).uniform(-1.5, 1.5, 256).astype(np.float32)
    want = np.tan(x.astype(np.float64))
    kern = tangent(256)
    for y in (kern(x), kern.simulate(x)[0]):
        np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)
