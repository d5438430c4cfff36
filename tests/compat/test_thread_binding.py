"""`T.get_thread_binding()`: this machine has no GPU threads (a core's scalar unit runs the code
once), so the one-thread guard `if tx == 0:` keeps its meaning (it holds, once per core) and
`tx != 0` is false; any per-thread (SIMT) use, as an index, in arithmetic or another
comparison, is a CompileError at that use saying what to write instead (a T.Parallel map).
Also T.fill / T.clear of one element (`T.fill(s[0], 0)`, TileLang's topk_selector)."""
import numpy as np
import pytest

import tilelang_mini
import tilelang_mini.language as T
from tilelang_mini import CompileError

from util import close, f64, rand


@tilelang_mini.jit
def guarded_rowsum(X):
    M, N = T.const("M, N")
    X: T.Tensor((M, N), T.float32)
    S = T.empty((M,), T.float32)
    C = T.empty((M // 8,), T.int32)
    with T.Kernel(M // 8, threads=128) as bx:
        x = T.alloc_fragment((8, N), T.float32)
        s = T.alloc_fragment((8,), T.float32)
        count = T.alloc_fragment((1,), T.int32)
        T.clear(count[0])
        T.fill(count[0], 5)
        T.copy(X[bx * 8, 0], x)
        T.reduce_sum(x, s, dim=1)
        tx = T.get_thread_binding()
        if tx == 0:  # one thread writes the block's results
            for i in T.serial(8):
                S[bx * 8 + i] = s[i]
            count[0] = count[0] + 1
        if T.get_thread_binding(0) != 0:  # the other threads: none here
            S[bx * 8] = -1.0
            count[0] = count[0] + 100
        C[bx] = count[0]
    return S, C


def test_one_thread_guard_holds_once(target, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    x = rand((32, 16), seed=11)
    s, c = guarded_rowsum(x)
    close(s, f64(x).sum(1), reduce_len=16)
    assert c.tolist() == [6] * 4
    kern, args = guarded_rowsum.kernel_for(x)
    (ss, cs), _ = kern.simulate(*args)
    close(ss, f64(x).sum(1), reduce_len=16)
    assert cs.tolist() == [6] * 4


def simt_kernels():
    def as_index(X):
        N = T.const("N")
        X: T.Tensor((N,), T.float32)
        Y = T.empty((N,), T.float32)
        with T.Kernel(1, threads=N) as bx:
            tx = T.get_thread_binding(0)
            Y[tx] = X[tx] * 2.0
        return Y

    def in_arithmetic(X):
        N = T.const("N")
        X: T.Tensor((N,), T.float32)
        Y = T.empty((N,), T.float32)
        with T.Kernel(N // 4, threads=4) as bx:
            tx = T.get_thread_binding()
            Y[bx * 4 + tx] = X[bx * 4 + tx]
        return Y

    def in_a_comparison(X):
        N = T.const("N")
        X: T.Tensor((N,), T.float32)
        Y = T.empty((N,), T.float32)
        with T.Kernel(1, threads=N) as bx:
            tx = T.get_thread_binding()
            if tx < 4:
                Y[0] = X[0]
        return Y

    def in_a_region(X):
        N = T.const("N")
        X: T.Tensor((N, 8), T.float32)
        Y = T.empty((N, 8), T.float32)
        with T.Kernel(1, threads=N) as bx:
            tx = T.get_thread_binding()
            t = T.alloc_fragment((8,), T.float32)
            T.copy(X[tx, :], t)
            T.copy(t, Y[0, :])
        return Y

    return [(as_index, "Y[tx]"), (in_arithmetic, "bx * 4 + tx"), (in_a_comparison, "tx < 4"),
            (in_a_region, "X[tx, :]")]


@pytest.mark.parametrize("fn, where", simt_kernels(), ids=lambda v: getattr(v, "__name__", ""))
def test_per_thread_use_is_a_located_error_with_advice(fn, where):
    f = tilelang_mini.jit(fn)
    x = np.zeros((16,) if fn.__name__ != "in_a_region" else (16, 8), np.float32)
    with pytest.raises(CompileError) as info:
        f(x)
    err = info.value
    assert err.loc.file == __file__, str(err)
    assert where in str(err).split("\n")[1]
    assert "T.Parallel" in err.message and "== 0" in err.message and "SIMT" in err.message
