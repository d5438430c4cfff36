"""A T.macro that allocates tiles and returns them (`x = m(...)`, `a, b = m(...)`): the caller
names the macro's tiles. Each call allocates its own tiles; NumPy (float64) is the reference on
every target and in `simulate`; returning anything but tiles after kernel operations is a
CompileError at the macro's `return`."""
# No `from __future__ import annotations`: kernels need their T.Tensor annotations as objects.
import numpy as np

import tilelang_mini as tl
import tilelang_mini.language as T
from tilelang_mini.ir.nodes import Alloc

from kernels import load_for
from markers import Marked, kernel_error

MARKED = Marked(__file__, prefix="ERR:")
M, N = 8, 32


@T.macro
def loaded(src, rows, cols):
    """A fragment holding `src[0:rows, 0:cols]`."""
    t = T.alloc_fragment((rows, cols), "float32")
    T.copy(src, t)
    return t


@T.macro
def row_stats(t, rows, cols):
    """(row max, row sum of exp(t - max)): two tiles allocated and filled here."""
    mx = T.alloc_fragment((rows,), "float32")
    s = T.alloc_fragment((rows,), "float32")
    T.reduce_max(t, mx, dim=1)
    for i, j in T.Parallel(rows, cols):
        t[i, j] = T.exp(t[i, j] - mx[i])
    T.reduce_sum(t, s, dim=1)
    return mx, s


@T.prim_func
def softmax_stats(X: T.Tensor((M, N), "float32"), Z: T.Tensor((M, N), "float32"),
                  Y: T.Tensor((M, N), "float32"), L: T.Tensor((M,), "float32")):
    with T.Kernel(1) as bx:
        x = loaded(X, M, N)
        z = loaded(Z, M, N)  # a second call: tiles of its own
        mx, s = row_stats(x, M, N)
        lse = T.alloc_fragment((M,), "float32")
        for i, j in T.Parallel(M, N):
            x[i, j] = x[i, j] / s[i] + z[i, j]
        for i in T.Parallel(M):
            lse[i] = mx[i] + T.log(s[i])
        T.copy(x, Y)
        T.copy(lse, L)


def reference(x, z):
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=1, keepdims=True))
    s = e.sum(axis=1, keepdims=True)
    return e / s + z, x64.max(axis=1) + np.log(s[:, 0])


def data():
    rng = np.random.default_rng(9)
    return rng.standard_normal((M, N)).astype(np.float32), rng.standard_normal((M, N)).astype(np.float32)


def test_macro_returns_its_tiles(target):
    x, z = data()
    y, lse = tl.compile(softmax_stats, out_idx=[2, 3], target=target)(x, z)
    want_y, want_lse = reference(x, z)
    np.testing.assert_allclose(y, want_y, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(lse, want_lse, rtol=1e-5, atol=1e-6)


def test_each_call_allocates_its_own_tiles():
    names = [s.buffer.name for s in softmax_stats.ir.body if isinstance(s, Alloc)]
    assert len(names) == len(set(names)) == 5  # x, z (both from `loaded`), mx, s, lse


def test_simulate_macro_tiles():
    x, z = data()
    (y, lse), report = tl.compile(softmax_stats, out_idx=[2, 3], target="numpy").simulate(x, z)
    want_y, want_lse = reference(x, z)
    np.testing.assert_allclose(y, want_y, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(lse, want_lse, rtol=1e-5, atol=1e-6)
    assert report.cycles > 0


@T.macro
def first_element(src, n):
    t = T.alloc_fragment((n,), "float32")
    T.copy(src, t)
    return t[0] * 2.0  # ERR:value


@T.macro
def fills(t):
    T.fill(t, 1.0)


def test_returning_a_value_after_kernel_operations_is_located():
    @kernel_error
    def err(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1) as bx:
            v = first_element(X, N)
            t = T.alloc_fragment((N,), "float32")
            T.fill(t, v)
            T.copy(t, Y)
    MARKED.located(err, "value")
    assert "must be tiles" in str(err) and "first_element" in str(err)


def test_assigning_a_macro_that_returns_nothing_is_located():
    @kernel_error
    def err(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1) as bx:
            t = T.alloc_fragment((N,), "float32")
            u = fills(t)  # ERR:nothing
            T.copy(t, Y)
    MARKED.located(err, "nothing")
    assert "returns nothing" in str(err)


def test_a_start_corner_passes_through_a_macro(target):
    """`X[i, j]` as a macro argument is the region starting there (tests/kernels.py's
    load_for: copy, then the vector pipe waits for MTE2)."""
    @T.prim_func
    def k(X: T.Tensor((16, 16), "float32"), Y: T.Tensor((16, 16), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_ub((8, 16), "float32")
            with T.Scope("V"):
                load_for("V", X[vid * 8, 0], x)
                for i, j in T.Parallel(8, 16):
                    x[i, j] = x[i, j] * 3.0 + 1.0
                T.set_flag("V", "MTE3", 0)
                T.wait_flag("V", "MTE3", 0)
                T.copy(x, Y[(1 - vid) * 8, 0])  # halves swapped

    x = np.random.default_rng(3).standard_normal((16, 16)).astype(np.float32)
    want = np.concatenate([x[8:], x[:8]]).astype(np.float64) * 3.0 + 1.0
    kernel = tl.compile(k, out_idx=[-1], target=target)
    np.testing.assert_allclose(kernel(x), want, rtol=1e-5, atol=1e-6)
    if target == "numpy":
        got, _ = kernel.simulate(x)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
