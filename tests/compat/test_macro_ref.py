"""`x: T.Ref` on a T.macro parameter (TileLang's eager-jit tutorial): the argument, an element
`A[i]` or a `T.alloc_var` scalar, is passed by reference, so assigning the parameter in the
macro writes it (frontend/tile_ops.inline_function binds it as the element itself). Kernels in
TileLang's dialect on both targets and simulated, against Python/NumPy references."""
import numpy as np
import pytest

import tilelang_mini
import tilelang_mini.language as T
from tilelang_mini import CompileError


@T.macro
def halve_or_triple(x, var: T.Ref):
    """A trace-time recursion on x that rewrites the referenced element at each step."""
    if x == 1:
        pass
    elif x % 2 == 0:
        var = var // 2
        halve_or_triple(x // 2, var)
    else:
        var = var * 3 + 1
        halve_or_triple(x * 3 + 1, var)


@tilelang_mini.jit
def steps(A: T.Tensor[[4], T.int32], n: int, slot: int):
    with T.Kernel(1) as _:
        halve_or_triple(n, A[slot])


def steps_ref(a, n):
    while n != 1:
        a, n = (a // 2, n // 2) if n % 2 == 0 else (a * 3 + 1, n * 3 + 1)
    return a


@pytest.mark.parametrize("n, slot", [(5, 0), (6, 2), (1, 3)])
def test_ref_to_an_element_is_written(target, monkeypatch, n, slot):
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    a = np.array([100, 7, 1000, 3], np.int32)
    want = a.copy()
    want[slot] = steps_ref(int(a[slot]), n)
    got = a.copy()
    steps(got, n, slot)
    np.testing.assert_array_equal(got, want)
    kern, kargs = steps.kernel_for(a.copy(), n, slot)
    kern.simulate(*kargs)
    np.testing.assert_array_equal(kargs[0], want)


@T.macro
def accumulate(acc: T.Ref, v):
    acc = acc + v


@tilelang_mini.jit
def running_sum(X):
    N = T.const("N")
    X: T.Tensor((N,), T.float32)
    Y = T.empty((1,), T.float32)
    with T.Kernel(1) as _:
        s = T.alloc_var(T.float32, 0)
        for i in T.serial(N):
            accumulate(s, X[i] * 2)
        Y[0] = s
    return Y


def test_ref_to_a_scalar_var(target, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    x = np.random.default_rng(1).standard_normal(16).astype(np.float32)
    np.testing.assert_allclose(running_sum(x)[0], 2 * x.astype(np.float64).sum(), rtol=1e-5)


def test_ref_of_a_tile_is_located():
    @T.macro
    def zero(x: T.Ref):
        x += 1

    @tilelang_mini.jit
    def k(X):
        X: T.Tensor((8,), T.float32)
        Y = T.empty((8,), T.float32)
        with T.Kernel(1) as _:
            t = T.alloc_fragment((8,), T.float32)
            T.copy(X, t)
            zero(t)  # AT:tile
            T.copy(t, Y)
        return Y

    with pytest.raises(CompileError, match="is a T.Ref: pass an element") as e:
        k(np.zeros(8, np.float32))
    with open(__file__) as f:
        assert e.value.loc.line == next(i for i, ln in enumerate(f, 1) if "# AT:tile" in ln)
