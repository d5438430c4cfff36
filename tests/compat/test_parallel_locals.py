"""A name bound inside T.Parallel is a per-iteration (per-thread) local: TileLang's bitonic sort
(dsa_sparse_finetune's indexer_topk_reducesum) swaps pairs with `v = x[i]; x[i] = x[j];
x[j] = v` under `if i < j and ...`. When a later store of the body may change what the name's
expression reads, its value is kept at the binding in a tile indexed by the loop variables.
Against NumPy on every target and simulated."""
import numpy as np

import tilelang_mini as tilelang
import tilelang_mini.language as T

from util import rand

N = 64
STEPS = int(np.log2(N))


def bitonic_sort():
    @T.macro
    def sort_pairs(val: T.SharedBuffer([N], "float32"), idx: T.SharedBuffer([N], "int32")):
        for i1 in T.serial(STEPS):
            for i2 in T.serial(i1 + 1):
                for i in T.Parallel(N):
                    ascending = (i & (1 << (i1 + 1))) != 0
                    j = i ^ (1 << (i1 - i2))
                    if i < j and ((ascending and val[i] > val[j])
                                  or (not ascending and val[i] < val[j])):
                        v = val[i]
                        val[i] = val[j]
                        val[j] = v
                        k = idx[i]
                        idx[i] = idx[j]
                        idx[j] = k

    @T.prim_func
    def main(X: T.Tensor((2, N), "float32"), Y: T.Tensor((2, N), "float32"),
             I: T.Tensor((2, N), "int32")):
        with T.Kernel(2) as b:
            val = T.alloc_shared((N,), "float32")
            idx = T.alloc_shared((N,), "int32")
            T.copy(X[b, :], val)
            for i in T.Parallel(N):
                idx[i] = i
            sort_pairs(val, idx)
            T.copy(val, Y[b, :])
            T.copy(idx, I[b, :])
    return main


def test_parallel_compare_and_swap(target):
    kernel = tilelang.compile(bitonic_sort(), out_idx=[1, 2], target=target)
    x = rand((2, N), seed=11)
    want_i = np.argsort(-x, axis=1, kind="stable")
    want = np.take_along_axis(x, want_i, 1)
    runs = [kernel(x)]
    if target == "numpy":
        runs.append(kernel.simulate(x)[0])
    for y, i in runs:
        np.testing.assert_array_equal(y, want)        # a permutation: exact
        np.testing.assert_array_equal(np.take_along_axis(x, i, 1), want)


def test_parallel_local_swap_of_neighbours(target):
    """The smallest form: each pair of neighbours is put in order."""
    @T.prim_func
    def main(X: T.Tensor((16,), "float32"), Y: T.Tensor((16,), "float32")):
        with T.Kernel(1) as b:
            s = T.alloc_shared((16,), "float32")
            T.copy(X, s)
            for i in T.Parallel(8):
                if s[2 * i] > s[2 * i + 1]:
                    t = s[2 * i]
                    s[2 * i] = s[2 * i + 1]
                    s[2 * i + 1] = t
            T.copy(s, Y)

    x = rand((16,), seed=2)
    want = x.copy()
    for i in range(0, 16, 2):
        if want[i] > want[i + 1]:
            want[i], want[i + 1] = want[i + 1], want[i]
    kernel = tilelang.compile(main, out_idx=[1], target=target)
    np.testing.assert_array_equal(kernel(x), want)
    if target == "numpy":
        np.testing.assert_array_equal(kernel.simulate(x)[0], want)
