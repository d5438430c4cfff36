"""T.round (TVM's round: ties away from zero, CUDA roundf) and T.nearbyint (ties to even) on
kernel values and trace-time numbers, and tilelang-ascend's T.tile.cast rounding modes, at the
values a floor(x + 0.5) formula gets wrong (0.49999997: x + 0.5 rounds up to 1.0 in float32).
Before: T.round was a located error (an int8 quantisation kernel could not be written)."""
import numpy as np
import pytest

import tilelang_mini as tilelang
import tilelang_mini.language as T

from util import f64

N = 32


def values():
    x = np.linspace(-6.0, 6.0, N).astype(np.float32)
    below_half = np.nextafter(np.float32(0.5), np.float32(0))
    x[:12] = [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, below_half, -below_half, 0.0, -0.0,
              8388607.5, -8388609.0]
    return x


def away(x):
    x = f64(x)
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


@tilelang.jit(out_idx=[1, 2])
def rounders(n, scale=1.5):
    @T.prim_func
    def main(X: T.Tensor((n,), T.float32), R: T.Tensor((n,), T.float32),
             E: T.Tensor((n,), T.int32)):
        with T.Kernel(1, threads=128) as _:
            x = T.alloc_fragment((n,), T.float32)
            r = T.alloc_fragment((n,), T.float32)
            e = T.alloc_fragment((n,), T.int32)
            T.copy(X, x)
            for i in T.Parallel(n):
                r[i] = T.round(x[i]) + T.round(scale) * 0.0
                e[i] = T.cast(T.nearbyint(x[i]), T.int32)
            T.copy(r, R)
            T.copy(e, E)
    return main


def test_round_and_nearbyint(target, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    x = values()
    k = rounders(N)
    for r, e in (k(x), k.simulate(x)[0]):
        np.testing.assert_array_equal(r, away(x))
        small = np.abs(x) < 2 ** 22
        np.testing.assert_array_equal(e[small], np.rint(x[small]).astype(np.int32))


def test_round_on_numbers_at_trace_time():
    @T.prim_func
    def main(Y: T.Tensor((4,), T.float32)):
        with T.Kernel(1) as _:
            for i in T.Parallel(4):
                Y[i] = T.round(2.5) + T.round(-0.5) * 10.0 + T.nearbyint(2.5) * 100.0 + i * 0.0

    y = tilelang.compile(main, out_idx=[-1])()
    np.testing.assert_array_equal(y, np.full(4, 3.0 - 10.0 + 200.0, np.float32))


@pytest.mark.parametrize("mode", ["CAST_ROUND", "CAST_RINT"])
def test_tile_cast_round_modes(target, mode):
    @T.prim_func
    def main(X: T.Tensor((N,), T.float32), Y: T.Tensor((N,), T.int32)):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_ub((N,), T.float32)
            y = T.alloc_ub((N,), T.int32)
            T.copy(X, x)
            T.tile.cast(y, x, mode, N)
            T.copy(y, Y)

    k = tilelang.compile(main, out_idx=[-1], target=target)
    x = values()
    small = np.abs(x) < 2 ** 22
    want = away(x) if mode == "CAST_ROUND" else np.rint(f64(x))
    np.testing.assert_array_equal(k(x)[small], want[small].astype(np.int32))
