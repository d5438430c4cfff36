"""A T.Parallel variable that shadows an enclosing loop's (TileLang's nsa_fwd:
`i_s = BlockIndices[b, t, h, i] * BS` under `for i in T.Pipelined(NS)`, then
`for i, j in T.Parallel(G, BS): ... i_s ...`): the name bound to the outer `i` keeps meaning
the outer one inside the inner loop. Both targets and the simulator, float64 reference."""
import numpy as np
import pytest

import tilelang_mini
import tilelang_mini.language as T

from util import close, f64, rand


def gather_blocks(nsel, bs, n, runtime_trips=False):
    """`runtime_trips`: the outer loop's trip count is read at run time, Cnt[0] (TileLang's
    nsa_fwd_varlen: `for i in T.Pipelined(BlockCounts[t, h])`); before, the inner `i` was then
    not renamed and the expression bound to the outer one read the inner variable (a silently
    wrong gather)."""
    @T.prim_func
    def main(X: T.Tensor((n, 16), T.float32), Idx: T.Tensor((nsel,), T.int32),
             Cnt: T.Tensor((1,), T.int32), Y: T.Tensor((nsel * bs, 16), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            x = T.alloc_fragment((bs, 16), T.float32)
            for i in T.Pipelined(Cnt[0] if runtime_trips else nsel, num_stages=1):
                start = Idx[i] * bs
                T.copy(X[start, 0], x)
                for i, j in T.Parallel(bs, 16):   # shadows the outer i
                    x[i, j] = x[i, j] + start
                T.copy(x, Y[i * bs, 0])
    return main


@pytest.mark.parametrize("target", ["numpy", "llvm"])
def test_inner_loop_shadowing_outer_variable(target):
    x = rand((64, 16), seed=9)
    idx = np.array([3, 0, 2], np.int32)
    want = np.concatenate([f64(x)[b * 16:(b + 1) * 16] + b * 16 for b in idx])
    kern = tilelang_mini.compile(gather_blocks(3, 16, 64), out_idx=[-1], target=target)
    cnt = np.array([3], np.int32)
    close(np.asarray(kern(x, idx, cnt)), want)
    if target == "numpy":
        got, _ = kern.simulate(x, idx, cnt)
        close(np.asarray(got), want)


@pytest.mark.parametrize("target", ["numpy", "llvm"])
def test_shadowing_an_outer_loop_with_a_runtime_trip_count(target):
    x = rand((64, 16), seed=10)
    idx = np.array([3, 0, 2], np.int32)
    cnt = np.array([2], np.int32)
    want = np.zeros((48, 16))
    want[:32] = np.concatenate([f64(x)[b * 16:(b + 1) * 16] + b * 16 for b in idx[:2]])
    kern = tilelang_mini.compile(gather_blocks(3, 16, 64, runtime_trips=True), out_idx=[-1],
                                 target=target)
    close(np.asarray(kern(x, idx, cnt)), want)
    if target == "numpy":
        got, _ = kern.simulate(x, idx, cnt)
        close(np.asarray(got), want)
