"""TileLang's safe memory access inside T.Parallel: an element of a global tensor outside its
shape is not stored, and one read outside it reads 0 (the tail block of a length that is not
a multiple of the block, deepseek mhc_pre's `sqrsum[px * 32 + i] = ...` with T.dynamic
tokens). The frontend masks such accesses where the loop and block ranges show an index may
leave its dimension. Both targets and the simulator, against float64 NumPy references."""
import numpy as np
import pytest

import tilelang_mini
import tilelang_mini.language as T

from util import close, f64, rand


@tilelang_mini.jit
def tail_rows(X, Y, Z):
    n = T.dynamic("n")
    X: T.Tensor((n, 8), T.float32)
    Y: T.Tensor((n,), T.float32)
    Z: T.Tensor((n,), T.float32)
    with T.Kernel(T.ceildiv(n, 32), threads=128) as px:
        t = T.alloc_fragment((32, 8), T.float32)
        s = T.alloc_fragment((32,), T.float32)
        T.copy(X[px * 32, 0], t)
        T.reduce_sum(t, s, dim=1)
        for i in T.Parallel(32):
            Y[px * 32 + i] = s[i]
        # reads past the end read 0: Z[r] = X[r, 0] + X[r + 1, 0] (the last row adds 0)
        for i in T.Parallel(32):
            Z[px * 32 + i] = X[px * 32 + i, 0] + X[px * 32 + i + 1, 0]


@pytest.mark.parametrize("target", ["numpy", "llvm"])
@pytest.mark.parametrize("n", [40, 64, 7])
def test_tail_stores_and_reads(target, n, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    x = rand((n, 8), seed=n)
    nxt = np.concatenate([f64(x)[1:, 0], [0.0]])
    want_y, want_z = f64(x).sum(1), f64(x)[:, 0] + nxt
    y, z = np.zeros(n, np.float32), np.zeros(n, np.float32)
    tail_rows(x, y, z)
    close(y, want_y, reduce_len=8)
    close(z, want_z)
    if target == "numpy":
        kern, args = tail_rows.kernel_for(x, np.zeros(n, np.float32), np.zeros(n, np.float32))
        kern.simulate(*args)
        close(args[1], want_y, reduce_len=8)
        close(args[2], want_z)


@tilelang_mini.jit
def gather_rows(X, I, Y):
    n, k = T.const("n, k")
    X: T.Tensor((n, 16), T.float32)
    I: T.Tensor((k,), T.int32)
    Y: T.Tensor((k, 16), T.float32)
    with T.Kernel(1, threads=128) as bx:
        t = T.alloc_fragment((k, 16), T.float32)
        # rows through an index tensor (sparse MLA's padded indices): the compiler cannot bound
        # I[i], so an index outside X reads 0 ...
        for i, j in T.Parallel(k, 16):
            t[i, j] = X[I[i], j] + 1.0
        T.copy(t, Y)
        # ... and a store through it outside Y is dropped
        for i, j in T.Parallel(k, 16):
            Y[I[i] - 2, j] = t[i, j] * 2.0


@pytest.mark.parametrize("target", ["numpy", "llvm"])
def test_gather_and_scatter_through_index_tensor(target, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    n, k = 12, 8
    x = rand((n, 16), seed=3)
    idx = np.array([3, 12, 0, 40, 7, -5, 9, 1], np.int32)  # 12, 40, -5: outside X
    rows = np.where(((idx >= 0) & (idx < n))[:, None], f64(x)[np.clip(idx, 0, n - 1)], 0.0)
    want = rows + 1.0
    for i, r in enumerate(idx - 2):     # the scatter, in order; rows outside Y dropped
        if 0 <= r < k:
            want[r] = (rows[i] + 1.0) * 2.0
    y = np.zeros((k, 16), np.float32)
    gather_rows(x, idx, y)
    close(y, want)
    if target == "numpy":
        kern, args = gather_rows.kernel_for(x, idx, np.zeros((k, 16), np.float32))
        kern.simulate(*args)
        close(args[2], want)


@pytest.mark.parametrize("guarded", [True, False])
def test_scatter_through_slots_in_a_tail_block(target, guarded):
    """A KV-cache append: rows of k scattered to cache rows slots[t] (-1: skip), 13 tokens in
    blocks of 8. With `if t < n and slots[t] >= 0:` the condition's read of slots is guarded
    (before: slots[13..15] read out of bounds, a KernelRuntimeError); without it the store's
    index reads slots guarded and the store runs only where that read lies inside slots and
    the slot inside the cache (the 0 read past the end does not overwrite cache row 0)."""
    n, S, D, bm = 13, 40, 16, 8

    @T.prim_func
    def main(k: T.Tensor((n, D), T.float32), slots: T.Tensor((n,), T.int32),
             cache: T.Tensor((S, D), T.float32)):
        with T.Kernel(T.ceildiv(n, bm), threads=128) as bx:
            for i, d in T.Parallel(bm, D):
                if guarded:
                    if bx * bm + i < n and slots[bx * bm + i] >= 0:
                        cache[slots[bx * bm + i], d] = k[bx * bm + i, d]
                else:
                    cache[slots[bx * bm + i], d] = k[bx * bm + i, d]

    kernel = tilelang_mini.compile(main, target=target)
    kv = rand((n, D), "float32", 3)
    slots = np.random.default_rng(4).permutation(np.arange(1, S))[:n].astype(np.int32)
    slots[3] = -1
    cache0 = rand((S, D), "float32", 5)
    want = cache0.copy()
    want[slots[slots >= 0]] = kv[slots >= 0]
    for run in (kernel, kernel.simulate):
        cache = cache0.copy()
        run(kv, slots, cache)
        np.testing.assert_array_equal(cache, want)
