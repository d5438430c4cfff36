"""`T.parallel` (TVM script's parallel loop, which TileLang re-exports) nested one dimension per
loop, with a run-time `if` inside: dsa_hisa's block mean pooling zeroes the rows past a tile's
valid length this way; nested T.Parallel loops likewise. The same meaning as
`T.Parallel(M, N)`, on every target and simulated."""
import numpy as np

import tilelang_mini as tilelang
import tilelang_mini.language as T

from util import f64, rand


def zero_tail_rows(M, N, block_M):
    @T.prim_func
    def main(X: T.Tensor((M, N), T.float32), Valid: T.Tensor((1,), T.int32),
             Y: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            x = T.alloc_fragment((block_M, N), T.float32)
            T.copy(X[bx * block_M, 0], x)
            rows = Valid[0] - bx * block_M
            for i in T.parallel(block_M):
                for j in T.parallel(N):
                    if i >= rows:
                        x[i, j] = T.cast(0, T.float32)
            for i in T.Parallel(block_M):   # the same with TileLang's T.Parallel
                for j in T.Parallel(N):
                    x[i, j] = x[i, j] * 2.0
            T.copy(x, Y[bx * block_M, 0])
    return main


def test_nested_lowercase_parallel_with_runtime_if(target):
    M, N = 64, 32
    kernel = tilelang.compile(zero_tail_rows(M, N, 16), out_idx=[-1], target=target)
    x = rand((M, N))
    for valid in (0, 21, 64):
        want = f64(x) * 2
        want[valid:] = 0
        v = np.array([valid], np.int32)
        np.testing.assert_allclose(f64(kernel(x, v)), want, rtol=1e-6)
        if target == "numpy":
            np.testing.assert_allclose(f64(kernel.simulate(x, v)[0]), want, rtol=1e-6)
