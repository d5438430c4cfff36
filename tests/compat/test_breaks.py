"""`break` in a kernel loop (frontend/breaks.py): a flag set by the break guards the rest of the
body and the later iterations; a nested loop's break is its own. On both targets and simulated,
against NumPy references written as the Python loops they mean."""
import numpy as np
import pytest

import tilelang_mini
import tilelang_mini.language as T
from tilelang_mini import CompileError

from util import close, rand


@tilelang_mini.jit
def prefix_until(X, limit: float):
    """Per row: sum X[r, j] over j until the sum passes `limit` (then stop), and count the
    terms; the inner loop's break leaves the outer loop running."""
    M, N = T.const("M, N")
    X: T.Tensor((M, N), T.float32)
    S = T.empty((M,), T.float32)
    C = T.empty((M,), T.int32)
    with T.Kernel(1) as _:
        s = T.alloc_var(T.float32)
        n = T.alloc_var(T.int32)
        for r in T.serial(M):
            s = 0.0
            n = 0
            for j in T.serial(N):
                if s > limit:
                    break
                s = s + X[r, j]
                n = n + 1
            S[r] = s
            C[r] = n
    return S, C


def prefix_ref(x, limit):
    sums, counts = [], []
    for row in x.astype(np.float64):
        s, n = 0.0, 0
        for v in row:
            if s > limit:
                break
            s, n = s + v, n + 1
        sums.append(s)
        counts.append(n)
    return np.array(sums), np.array(counts)


def test_break_guards_the_rest(target, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    x = np.abs(rand((6, 16), seed=8))
    want_s, want_c = prefix_ref(x, 3.0)
    assert 0 < want_c.min() and want_c.max() < 16  # the break is taken, not in the first term
    s, c = prefix_until(x, 3.0)
    close(s, want_s, reduce_len=16)
    assert c.tolist() == want_c.tolist()
    kern, args = prefix_until.kernel_for(x, 3.0)
    (ss, cs), _ = kern.simulate(*args)
    close(ss, want_s, reduce_len=16)
    assert cs.tolist() == want_c.tolist()


def test_break_in_parallel_is_a_located_error():
    def kernel(X):
        N = T.const("N")
        X: T.Tensor((N,), T.float32)
        Y = T.empty((N,), T.float32)
        with T.Kernel(1) as _:
            for i in T.Parallel(N):
                if X[i] > 0:
                    break
                Y[i] = X[i]
        return Y
    with pytest.raises(CompileError) as info:
        tilelang_mini.jit(kernel)(np.zeros(16, np.float32))
    err = info.value
    assert err.loc.file == __file__ and "for i in T.Parallel(N):" in str(err).split("\n")[1]
    assert "`break` in a T.Parallel body" in err.message
