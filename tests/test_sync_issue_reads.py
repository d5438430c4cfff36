"""Element reads the scalar unit makes as it issues an instruction (analysis.issue_loads): the
row ids of a gather `T.copy(K[ids[i], 0], k)` read from a UB tile, an if condition, a loop
bound. The scalar unit reads them before any pipe runs the instruction, so the pipe that wrote
the tile (MTE2 for a load, V for a vector op) needs a flag to S first: insert_sync places it,
check_sync wants it in expert kernels, and the simulator reports the read as a race without it.
Every kernel runs on both targets and the simulator against a NumPy reference."""
# No `from __future__ import annotations`: kernels need their T.Tensor annotations as objects.
import numpy as np
import pytest

import tilelang_mini
import tilelang_mini.language as T
from tilelang_mini.ir.printer import print_ir
from markers import Marked
from tilelang_mini import CompileError
from tilelang_mini.arch import get_chip
from tilelang_mini.errors import RaceError
from tilelang_mini.sim.simulator import simulate_kernel

MARKED = Marked(__file__)
BLOCKS, N, R, W = 2, 4, 16, 32
RNG = np.random.default_rng(11)
CHIP = get_chip("ascend910b")


def gather(mode: str):
    """Y[b * N + i] = K[Ids[b * N + i]]: in developer mode ("developer"; "shift": the ids + 1,
    computed on the vector unit), or in expert mode with the flag that orders the load of the
    ids before the scalar unit reads them for the gather's address ("flag") or without it
    ("expert")."""
    @T.prim_func
    def main(Ids: T.Tensor((BLOCKS * N,), "int32"), K: T.Tensor((R, W), "float32"),
             Y: T.Tensor((BLOCKS * N, W), "float32")):
        with T.Kernel(BLOCKS, is_npu=True) as (cid, vid):
            ids = T.alloc_ub((N,), "int32")
            k = T.alloc_ub((1, W), "float32")
            if mode in ("developer", "shift"):
                T.copy(Ids[cid * N], ids)
                if mode == "shift":
                    for i in T.Parallel(N):
                        ids[i] = ids[i] + 1
                for i in T.serial(N):
                    T.copy(K[ids[i], 0], k)
                    T.copy(k, Y[cid * N + i, 0])
            else:
                with T.Scope("V"):
                    T.copy(Ids[cid * N], ids)
                    if mode == "flag":
                        T.set_flag("mte2", "s", 0)
                        T.wait_flag("mte2", "s", 0)
                    for i in T.serial(N):
                        T.copy(K[ids[i], 0], k)  # AT:gather
                        T.set_flag("mte2", "mte3", 0)
                        T.wait_flag("mte2", "mte3", 0)
                        T.copy(k, Y[cid * N + i, 0])
                        T.set_flag("mte3", "mte2", 0)
                        T.wait_flag("mte3", "mte2", 0)
    return main


def gather_args():
    ids = RNG.integers(0, R - 1, BLOCKS * N).astype(np.int32)
    return ids, RNG.standard_normal((R, W)).astype(np.float32)


@pytest.mark.parametrize("shift, writer", [(False, "MTE2"), (True, "V")])
def test_developer_gather_waits_on_the_scalar_unit(target, shift, writer):
    ids, k = gather_args()
    want = k.astype(np.float64)[ids + int(shift)]
    kernel = tilelang_mini.compile(gather("shift" if shift else "developer"), out_idx=[2],
                                   target=target)
    src = print_ir(kernel.ir)
    wait = f"wait_flag({writer}, S, "
    assert wait in src, src
    # the wait comes before the gather loop, the set after the write of the ids
    assert src.index(wait) < src.index("copy(K[ids[i]"), src
    np.testing.assert_allclose(kernel(ids, k), want, rtol=1e-6)
    np.testing.assert_allclose(kernel.simulate(ids, k)[0], want, rtol=1e-6)


def test_expert_gather_needs_its_flag_to_the_scalar_unit(target):
    ids, k = gather_args()
    want = k.astype(np.float64)[ids]
    kernel = tilelang_mini.compile(gather("flag"), out_idx=[2], target=target)
    np.testing.assert_allclose(kernel(ids, k), want, rtol=1e-6)
    np.testing.assert_allclose(kernel.simulate(ids, k)[0], want, rtol=1e-6)
    with pytest.raises(CompileError) as e:
        tilelang_mini.compile(gather("expert"), out_idx=[2], target=target)
    MARKED.located(e.value, "gather")
    assert "V0.MTE2" in str(e.value) and "V0.S" in str(e.value)
    assert "set_flag/wait_flag(MTE2, S, id)" in str(e.value)


def expert_branch(use: str, flag: bool):
    """Rows i of K with M[i] > 0 (`use` "cond") or the first M[0] rows ("bound") go to Y; M is
    loaded into a UB tile that the scalar unit then reads."""
    @T.prim_func
    def main(M: T.Tensor((N,), "int32"), K: T.Tensor((N, W), "float32"),
             Y: T.Tensor((N, W), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            m = T.alloc_ub((N,), "int32")
            k = T.alloc_ub((1, W), "float32")
            with T.Scope("V"):
                T.copy(M[0], m)
                if flag:
                    T.set_flag("mte2", "s", 0)
                    T.wait_flag("mte2", "s", 0)
                for i in T.serial(N if use == "cond" else m[0]):
                    if use == "bound" or m[i] > 0:
                        T.copy(K[i, 0], k)
                        T.set_flag("mte2", "mte3", 0)
                        T.wait_flag("mte2", "mte3", 0)
                        T.copy(k, Y[i, 0])
                        T.set_flag("mte3", "mte2", 0)
                        T.wait_flag("mte3", "mte2", 0)
    return main


@pytest.mark.parametrize("use", ["address", "cond", "bound"])
def test_simulator_reports_a_scalar_read_of_a_tile_in_flight(use):
    """The hand-written kernels as they are (no check_sync): the simulator itself reports the
    scalar unit's read while the load of the tile is in flight, and is clean with the flag."""
    if use == "address":
        ids, k = gather_args()
        args, want, read = [ids, k], k.astype(np.float64)[ids], "copy(K[ids[i]"
        make = lambda flag: gather("flag" if flag else "expert")  # noqa: E731
    else:
        m = np.array([3, 0, 2, 1], np.int32)
        k = RNG.standard_normal((N, W)).astype(np.float32)
        keep = m > 0 if use == "cond" else np.arange(N) < m[0]
        args, want = [m, k], k.astype(np.float64) * keep[:, None]
        read = "if m[i] > 0:" if use == "cond" else "for i in serial(m[0]):"
        make = lambda flag: expert_branch(use, flag)  # noqa: E731
    y = np.zeros(want.shape, np.float32)
    simulate_kernel(make(True).ir, args + [y], CHIP)
    np.testing.assert_allclose(y, want, rtol=1e-6)
    with pytest.raises(RaceError) as e:
        simulate_kernel(make(False).ir, args + [np.zeros_like(y)], CHIP)
    msg = str(e.value)
    assert f"V0.S `{read}" in msg and "V0.MTE2 `copy(" in msg, msg
