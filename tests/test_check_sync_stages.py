"""check_sync on expert kernels with ping-pong stages chosen at run time (`stage = (t + 1) % S`
in buffer indices and event ids), as tilelang-ascend's pipelined examples write them: the
flag chain V -> MTE3 -> MTE2 orders every reuse of a stage, so the kernel compiles (no false
race on the map's element box, no false deadlock when a long loop is cut for the check), runs
right on every target and simulates clean; a stage reused without that chain is a race."""
# No `from __future__ import annotations`: kernels need their T.Tensor annotations as objects.
import numpy as np
import pytest

import tilelang_mini
import tilelang_mini.language as T
from markers import Marked
from tilelang_mini import CompileError

MARKED = Marked(__file__)
N = 16
ROWS = 16  # rows per trip of a block, split between the two vector cores


def staged(trips: int, stages: int, load_stage=None):
    """Y = 2 * X + 1 through `stages` UB buffers per vector core: the load of trip t + 1 overlaps
    the map of trip t. `load_stage` (a constant) loads every trip into one stage: a race."""
    half = ROWS // 2
    M = ROWS * trips * 2

    @T.prim_func
    def k(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(2, is_npu=True) as (cid, vid):
            xs = T.alloc_ub((stages, half, N), "float32")
            ys = T.alloc_ub((stages, half, N), "float32")
            base = cid * ROWS * trips + vid * half
            with T.Scope("V"):
                T.set_flag("mte3", "mte2", 0)
                T.set_flag("mte3", "mte2", 1)
                if stages == 3:
                    T.set_flag("mte3", "mte2", 2)
                T.wait_flag("mte3", "mte2", 0)
                T.copy(X[base, 0], xs[0, :, :])
                T.set_flag("mte2", "v", 0)
                for t in T.serial(trips):
                    now = t % stages
                    nxt = (t + 1) % stages
                    if t < trips - 1:
                        T.wait_flag("mte3", "mte2", nxt)
                        into = nxt if load_stage is None else load_stage
                        T.copy(X[base + (t + 1) * ROWS, 0], xs[into, :, :])  # AT:load
                        T.set_flag("mte2", "v", nxt)
                    T.wait_flag("mte2", "v", now)
                    for i, j in T.Parallel(half, N):  # AT:map
                        ys[now, i, j] = xs[now, i, j] * 2.0 + 1.0
                    T.set_flag("v", "mte3", now)
                    T.wait_flag("v", "mte3", now)
                    T.copy(ys[now, :, :], Y[base + t * ROWS, 0])
                    T.set_flag("mte3", "mte2", now)
                T.wait_flag("mte3", "mte2", 0)
                T.wait_flag("mte3", "mte2", 1)
                if stages == 3:
                    T.wait_flag("mte3", "mte2", 2)
    return k, M


# trips 4: the check walks every trip; 65 (odd) and 64: the loop is cut to its first and last
# trips, a whole number of stage periods skipped between them
@pytest.mark.parametrize("trips,stages", [(4, 2), (64, 2), (65, 2), (7, 3), (65, 3)])
def test_run_time_stages_compile_run_and_simulate(trips, stages, target):
    prim, M = staged(trips, stages)
    x = np.random.default_rng(trips).standard_normal((M, N)).astype(np.float32)
    want = x.astype(np.float64) * 2.0 + 1.0
    kernel = tilelang_mini.compile(prim, out_idx=[-1], target=target)
    np.testing.assert_allclose(kernel(x), want, rtol=1e-6, atol=1e-6)
    if target == "numpy":
        got, _ = kernel.simulate(x)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("trips", [4, 65])
def test_a_stage_reused_while_the_map_reads_it_is_a_race(trips):
    prim, _ = staged(trips, 2, load_stage=0)
    with pytest.raises(CompileError) as info:
        tilelang_mini.compile(prim, out_idx=[-1])
    err = info.value
    MARKED.located(err, "map")
    assert "race on xs" in err.message and f":{MARKED.line_of('load')}:" in err.message
