"""A T.Parallel variable that shadows an enclosing loop's (TileLang's nsa_fwd:
`i_s = BlockIndices[b, t, h, i] * BS` under `for i in T.Pipelined(NS)`, then
`for i, j in T.Parallel(G, BS): ... i_s ...`): the name bound to the outer `i` keeps meaning
the outer one inside the inner loop. Both targets and the simulator, float64 reference."""
import numpy as np
import pytest

import tilelang_mini
import tilelang_mini.language as T

from util import close, f64, rand


def gather_blocks(nsel, bs, n):
    @T.prim_func
    def main(X: T.Tensor((n, 16), T.float32), Idx: T.Tensor((nsel,), T.int32),
             Y: T.Tensor((nsel * bs, 16), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            x = T.alloc_fragment((bs, 16), T.float32)
            for i in T.Pipelined(nsel, num_stages=1):
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
    close(np.asarray(kern(x, idx)), want)
    if target == "numpy":
        got, _ = kern.simulate(x, idx)
        close(np.asarray(got), want)
