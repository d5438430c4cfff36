"""`while` on a run-time condition (TileLang's stream-K GEMM, `while start_iter[0] < last_iter:`,
and the AMD flash attention's `while bx < num_q_blocks:`): an IR `while` loop whose condition is
read before every trip, with tile ops, cube and vector work and flags inside. Both targets and
the simulator, against float64 NumPy references written as the Python loops they mean."""
import numpy as np
import pytest

import tilelang_mini
import tilelang_mini.language as T
from tilelang_mini import CompileError, parse_ir

from util import close, f64, rand


@tilelang_mini.jit
def halvings(X, limit: float):
    """Per element: how many halvings bring X[r] to at most `limit` (a data-dependent count)."""
    M = T.const("M")
    X: T.Tensor((M,), T.float32)
    C = T.empty((M,), T.int32)
    with T.Kernel(1) as _:
        v = T.alloc_var(T.float32)
        n = T.alloc_var(T.int32)
        for r in T.serial(M):
            v = X[r]
            n = 0
            while v > limit:
                v = v * 0.5
                n = n + 1
            C[r] = n
    return C


def halvings_ref(x, limit):
    out = []
    for v in x.astype(np.float64):
        n = 0
        while v > limit:
            v, n = v * 0.5, n + 1
        out.append(n)
    return np.array(out)


def test_data_dependent_count(target, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    x = np.abs(rand((16,), seed=3)) * 4
    want = halvings_ref(x, 1.0)
    assert want.min() == 0 and want.max() >= 4  # some rows loop, some do not
    assert halvings(x, 1.0).tolist() == want.tolist()
    kern, args = halvings.kernel_for(x, 1.0)
    got, report = kern.simulate(*args)
    assert got.tolist() == want.tolist()


def ragged_gemm(M, N, K, bm=16, bn=32, bk=32):
    """Stream-K's shape: each block walks its K range [Lo[bx], Hi[bx]) in chunks of bk with a
    `while` over a variable (a tile GEMM per trip, then a vector epilogue per trip), so the trip
    count is read from data and cube and vector work both sit inside the loop."""
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
             Lo: T.Tensor((M // bm,), "int32"), Hi: T.Tensor((M // bm,), "int32"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(M // bm) as bx:
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            C_f = T.alloc_fragment((bm, bn), "float32")
            acc = T.alloc_fragment((bm, bn), "float32")
            k = T.alloc_var(T.int32)
            for j in T.serial(N // bn):
                T.clear(acc)
                k = Lo[bx]
                while k < Hi[bx]:
                    T.copy(A[bx * bm, k], A_s)
                    T.copy(B[k, j * bn], B_s)
                    T.gemm(A_s, B_s, C_f, clear_accum=True)
                    for i, c in T.Parallel(bm, bn):
                        acc[i, c] += C_f[i, c] * 0.5
                    k = k + bk
                T.copy(acc, C[bx * bm, j * bn])
    return main


def ragged_ref(a, b, lo, hi, bm):
    c = np.zeros((a.shape[0], b.shape[1]))
    for r, (l, h) in enumerate(zip(lo, hi)):
        k = l
        while k < h:
            c[r * bm:(r + 1) * bm] += 0.5 * f64(a[r * bm:(r + 1) * bm, k:k + 32]) @ f64(b[k:k + 32])
            k += 32
    return c


def test_tile_ops_in_the_loop(target):
    M, N, K = 64, 64, 192
    a, b = rand((M, K), "float16", seed=1), rand((K, N), "float16", seed=2)
    lo = np.array([0, 32, 64, 160], np.int32)
    hi = np.array([96, 32, 192, 192], np.int32)   # 3, 0, 4 and 1 trips
    kern = tilelang_mini.compile(ragged_gemm(M, N, K), out_idx=[-1], target=target)
    want = ragged_ref(a, b, lo, hi, 16)
    close(kern(a, b, lo, hi), want, reduce_len=K)
    if target == "numpy":
        got, report = kern.simulate(a, b, lo, hi)
        close(got, want, reduce_len=K)
        assert kern.estimate(args=[a, b, lo, hi, np.zeros((M, N), np.float32)]).time_us > 0
