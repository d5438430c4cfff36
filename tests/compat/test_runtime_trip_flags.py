"""Hand-set flags in a loop whose trip count is read at run time (tilelang-ascend's fused
sigmoid-gating delta rule: `for t in T.serial(seq_len)` with `seq_len` from cu_seqlens, the
next token prefetched under `if t + 1 < seq_len` with its own set_flag). check_sync walks such
a loop as two trips, the second the last, and decides conditions on the trip count the same
way (before: each branch choice applied to both trips, so one choice left a set never waited
for and the other a wait never set: a false deadlock). Both targets and the simulator,
against float64 NumPy sums."""
import numpy as np
import pytest

import tilelang_mini as tilelang
import tilelang_mini.language as T

from util import close, f64, rand

TMAX, W = 6, 64


def prefetch_sum():
    @T.prim_func
    def main(X: T.Tensor((2, TMAX, W), "float32"), N: T.Tensor((1,), "int32"),
             Y: T.Tensor((2, W), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            buf = T.alloc_ub([W], "float32")
            acc = T.alloc_ub([W], "float32")
            with T.Scope("V"):
                n = N[0]
                T.tile.fill(acc, 0.0)
                T.copy(X[vid, 0, :], buf)
                T.set_flag("mte2", "v", 0)
                for t in T.serial(n):
                    T.wait_flag("mte2", "v", 0)
                    T.tile.add(acc, acc, buf)
                    T.set_flag("v", "mte2", 1)
                    if t + 1 < n:
                        T.wait_flag("v", "mte2", 1)
                        T.copy(X[vid, t + 1, :], buf)
                        T.set_flag("mte2", "v", 0)
                T.wait_flag("v", "mte2", 1)
                T.set_flag("v", "mte3", 2)
                T.wait_flag("v", "mte3", 2)
                T.copy(acc, Y[vid, :])
    return main


@pytest.mark.parametrize("target", ["numpy", "llvm"])
@pytest.mark.parametrize("n", [1, 2, 5])
def test_prefetch_under_trip_count_condition(target, n):
    x = rand((2, TMAX, W), seed=n)
    want = f64(x)[:, :n].sum(1)
    kernel = tilelang.compile(prefetch_sum(), out_idx=[2], target=target)
    close(np.asarray(kernel(x, np.array([n], np.int32))), want, reduce_len=n)
    if target == "numpy":
        got, _ = kernel.simulate(x, np.array([n], np.int32))
        close(np.asarray(got), want, reduce_len=n)
