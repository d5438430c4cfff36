"""TileLang's reducers: `T.alloc_reducer` fragments that T.Parallel updates leaving out a loop
variable reduce into (`o[i] += a[i, j] * x[j]`: gemv_alloc_reducer of TileLang's gemv example;
op "max"), `T.finalize_reducer` a no-op. Both targets and the simulator against float64 NumPy
references (rows past M: a tail block), and the located error of an update form that is not
a reduction over one variable."""
import numpy as np
import pytest

import tilelang_mini
import tilelang_mini.language as T

from util import close, f64, rand


@tilelang_mini.jit
def gemv_reducer(a, x, bm=64, bn=64):
    M, N = T.const("M, N")
    a: T.Tensor((M, N), T.float16)
    x: T.Tensor((N,), T.float16)
    o = T.empty((M,), T.float32)
    with T.Kernel(T.ceildiv(M, bm), threads=128) as b:
        r = T.alloc_reducer(bm, T.float32, replication="all")
        T.clear(r)
        for k in T.Pipelined(T.ceildiv(N, bn), num_stages=2):
            af = T.alloc_fragment((bm, bn), T.float16)
            T.copy(a[b * bm, k * bn], af)
            xf = T.alloc_fragment(bn, T.float16)
            T.copy(x[k * bn], xf)
            for i, j in T.Parallel(bm, bn):
                af[i, j] = af[i, j] * 2.0       # a plain statement of the same map, first
                r[i] += af[i, j] * xf[j]
        T.finalize_reducer(r)
        T.copy(r, o[b * bm])
    return o


@tilelang_mini.jit
def col_max(a, bm=32):
    M, N = T.const("M, N")
    a: T.Tensor((M, N), T.float32)
    o = T.empty((N,), T.float32)
    with T.Kernel(1, threads=128) as b:
        r = T.alloc_reducer((N,), T.float32, op="max")
        T.fill(r, -T.infinity(T.float32))
        for k in T.serial(T.ceildiv(M, bm)):
            t = T.alloc_fragment((bm, N), T.float32)
            T.copy(a[k * bm, 0], t, pad_value=-1e30)
            for i, j in T.Parallel(bm, N):
                r[j] = T.max(r[j], t[i, j])
        T.finalize_reducer(r)
        T.copy(r, o[b * N])
    return o


@pytest.mark.parametrize("target", ["numpy", "llvm"])
def test_sum_reducer_gemv(target, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    M, N = 200, 256   # 4 row blocks, the last one a tail
    a, x = rand((M, N), "float16", 1), rand((N,), "float16", 2)
    want = (f64(a) * 2.0) @ f64(x)
    close(np.asarray(gemv_reducer(a, x)), want, "float32", N)
    if target == "numpy":
        kern, args = gemv_reducer.kernel_for(a, x)
        got, _ = kern.simulate(*args)
        close(np.asarray(got), want, "float32", N)


@pytest.mark.parametrize("target", ["numpy", "llvm"])
def test_max_reducer_over_rows(target, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    a = rand((100, 48), seed=3)
    want = f64(a).max(0)
    close(np.asarray(col_max(a)), want)
    if target == "numpy":
        kern, args = col_max.kernel_for(a)
        got, _ = kern.simulate(*args)
        close(np.asarray(got), want)


def test_update_leaving_out_two_variables_is_located():
    @tilelang_mini.jit
    def total(a):
        M, N = T.const("M, N")
        a: T.Tensor((M, N), T.float32)
        o = T.empty((1,), T.float32)
        with T.Kernel(1, threads=128) as b:
            r = T.alloc_reducer((1,), T.float32)
            t = T.alloc_fragment((M, N), T.float32)
            T.copy(a[0, 0], t)
            T.clear(r)
            for i, j in T.Parallel(M, N):
                r[0] += t[i, j]
            T.copy(r, o[b])
        return o
    with pytest.raises(tilelang_mini.CompileError, match="test_reducer.py:.*leaving out one"):
        total(rand((8, 16)))
