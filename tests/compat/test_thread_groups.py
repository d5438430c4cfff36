"""`if T.get_thread_binding() < c:` splitting a block's threads into two groups, each running
its branch's tile work (TileLang's deepseek mhc_pre: one warp normalises the mixing matrix while
the others apply the pre-mix). This machine has no threads: both branches run, the lower
group's first; a group with no threads runs nothing. Per-thread code inside such a branch
(`Y[0] = X[0]` outside a map) stays the SIMT error (tests/compat/test_thread_binding.py).
Both targets and the simulator, against float64 NumPy references."""
import numpy as np
import pytest

import tilelang_mini
import tilelang_mini.language as T

from util import close, f64, rand


def split_kernel(form, c):
    """Rows of X: S = row sums (threads below the split, or above for `>=`), Y = X * 2 (the
    other group)."""
    @T.macro
    def sums(x, S, bx):
        s = T.alloc_fragment((8,), T.float32)
        T.reduce_sum(x, s, dim=1)
        for i in T.Parallel(8):
            S[bx * 8 + i] = s[i]

    @T.macro
    def doubles(x, Y, bx, N):
        for i, j in T.Parallel(8, N):
            Y[bx * 8 + i, j] = x[i, j] * 2.0

    @tilelang_mini.jit
    def groups(X):
        M, N = T.const("M, N")
        X: T.Tensor((M, N), T.float32)
        S = T.empty((M,), T.float32)
        Y = T.empty((M, N), T.float32)
        with T.Kernel(M // 8, threads=96) as bx:
            x = T.alloc_shared((8, N), T.float32)
            T.copy(X[bx * 8, 0], x)
            tx = T.get_thread_binding()
            if form == "lt":
                if tx < c:
                    sums(x, S, bx)
                else:
                    doubles(x, Y, bx, N)
            elif form == "gt_reversed":
                if c > tx:
                    sums(x, S, bx)
                else:
                    doubles(x, Y, bx, N)
            elif form == "ge":
                if T.get_thread_binding(0) >= c:
                    doubles(x, Y, bx, N)
                else:
                    sums(x, S, bx)
            else:
                if tx <= c:
                    sums(x, S, bx)
                else:
                    doubles(x, Y, bx, N)
        return S, Y
    return groups


# (form, c, the sums' group has threads, the doubles' group has threads) with threads=96
CASES = [("lt", 32, True, True), ("gt_reversed", 32, True, True), ("ge", 64, True, True),
         ("le", 95, True, False), ("lt", 0, False, True)]


@pytest.mark.parametrize("target", ["numpy", "llvm"])
@pytest.mark.parametrize("form, c, sums, doubles", CASES)
def test_both_groups_run(target, form, c, sums, doubles, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    x = rand((16, 32), seed=3)
    f = split_kernel(form, c)
    # a group with no threads leaves its output as T.empty made it: compare only what runs
    s, y = f(x)
    if sums:
        close(s, f64(x).sum(1), reduce_len=32)
    if doubles:
        close(y, f64(x) * 2)
    if target == "numpy":
        kern, args = f.kernel_for(x)
        (ss, ys), _ = kern.simulate(*args)
        if sums:
            close(ss, f64(x).sum(1), reduce_len=32)
        if doubles:
            close(ys, f64(x) * 2)
