"""T.sin / T.cos (TileLang's TIR math, the eager-jit tutorial's `sincos` macro) and tilelang-ascend's
T.tile.sin / T.tile.cos on UB tiles: the IR calls `sin`/`cos` (NumPy's float32 sin/cos on the
numpy target, LLVM's sin/cos intrinsics on llvm). Kernels in the upstream dialects on both
targets and simulated, against float64 NumPy; and the trace-time form on Python numbers."""
import math

import numpy as np

import tilelang_mini
import tilelang_mini.language as T

from util import close, f64, rand


@T.macro
def sincos(x):
    return T.sin(x), T.cos(x)


@tilelang_mini.jit
def rotate(X, Y, theta_scale: float):
    """(x, y) rotated by the angle theta_scale * i of their index: the sines and cosines from a
    macro returning both, inside T.Parallel."""
    N = T.const("N")
    X: T.Tensor((N,), T.float32)
    Y: T.Tensor((N,), T.float32)
    U = T.empty((N,), T.float32)
    V = T.empty((N,), T.float32)
    with T.Kernel(T.ceildiv(N, 64)) as bx:
        for i in T.Parallel(64):
            s, c = sincos(T.Cast(T.float32, bx * 64 + i) * theta_scale)
            U[bx * 64 + i] = X[bx * 64 + i] * c - Y[bx * 64 + i] * s
            V[bx * 64 + i] = X[bx * 64 + i] * s + Y[bx * 64 + i] * c
    return U, V


def test_sin_cos_in_a_parallel_map(target, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    x, y = rand((192,), seed=1), rand((192,), seed=2)
    th = np.arange(192) * 0.37
    wu = f64(x) * np.cos(th) - f64(y) * np.sin(th)
    wv = f64(x) * np.sin(th) + f64(y) * np.cos(th)
    u, v = rotate(x, y, 0.37)
    close(u, wu, reduce_len=4)
    close(v, wv, reduce_len=4)
    kern, kargs = rotate.kernel_for(x, y, 0.37)
    (su, sv), _ = kern.simulate(*kargs)
    close(su, wu, reduce_len=4)
    close(sv, wv, reduce_len=4)


def test_tile_sin_cos_on_ub(target):
    M, N, BM = 32, 64, 16

    @T.prim_func
    def main(X: T.Tensor((M, N), T.float32), Y: T.Tensor((M, N), T.float32)):
        with T.Kernel(M // BM, is_npu=True) as (cid, vid):
            x = T.alloc_ub((BM // 2, N), "float32")
            s = T.alloc_ub((BM // 2, N), "float32")
            c = T.alloc_ub((BM // 2, N), "float32")
            with T.Scope("V"):
                T.copy(X[cid * BM + vid * (BM // 2), 0], x)
                T.barrier_all()
                T.tile.sin(s, x)
                T.tile.cos(c, x)
                T.pipe_barrier("V")
                T.tile.mul(s, s, c)
                T.barrier_all()
                T.copy(s, Y[cid * BM + vid * (BM // 2), 0])

    x = rand((M, N), seed=3, scale=4.0)
    kernel = tilelang_mini.compile(main, out_idx=[-1], target=target)
    want = np.sin(f64(x)) * np.cos(f64(x))
    close(kernel(x), want)
    close(kernel.simulate(x)[0], want)


def test_sin_cos_of_python_numbers_are_numbers():
    assert T.sin(0.5) == math.sin(0.5) and T.cos(2.0) == math.cos(2.0)
