"""A loop that never ends behind a wait that is never satisfied: the cube's scalar unit keeps
dispatching iterations while its FixPipe waits for a vector core that has finished. Hardware
queues are finite, so the simulator stops the scalar unit at a full pipe queue and reports the
deadlock (before: it queued iterations until memory ran out, ~6 GB)."""
import numpy as np
import pytest

import tilelang_mini
import tilelang_mini.language as T
from tilelang_mini.errors import DeadlockError


@T.prim_func
def accumulate(A: T.Tensor((64, 64), T.float16), B: T.Tensor((64, 64), T.float16),
               Lo: T.Tensor((2,), T.int32), Hi: T.Tensor((2,), T.int32),
               C: T.Tensor((64, 64), T.float32)):
    """C[rows of block b] = 0.5 * sum over k in [Lo[b], Hi[b]) step 32 of A[.., k:k+32] @ B[k:k+32]."""
    with T.Kernel(2, is_npu=True) as (cid, vid):
        a = T.alloc_L1((32, 32), T.float16)
        b = T.alloc_L1((32, 64), T.float16)
        c = T.alloc_L0C((32, 64), T.float32)
        y = T.alloc_ub((32, 64), T.float32)
        cu = T.alloc_ub((32, 64), T.float32)
        k = T.alloc_var(T.int32)
        T.tile.fill(y, 0.0)
        k = Lo[cid]
        while k < Hi[cid]:
            T.copy(A[cid * 32, k], a)
            T.copy(B[k, 0], b)
            T.gemm(a, b, c, clear_accum=True)
            T.copy(c, cu)
            T.tile.axpy(y, cu, 0.5)
            k = k + 32
        T.copy(y, C[cid * 32, 0])


def _inputs():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((64, 64)).astype(np.float16)
    b = rng.standard_normal((64, 64)).astype(np.float16)
    return a, b, np.array([0, 32], np.int32), np.array([64, 64], np.int32)


def test_the_kernel_itself_runs():
    a, b, lo, hi = _inputs()
    want = np.zeros((64, 64))
    for blk in range(2):
        for k in range(lo[blk], hi[blk], 32):
            want[blk * 32:(blk + 1) * 32] += 0.5 * (
                a[blk * 32:(blk + 1) * 32, k:k + 32].astype(np.float64) @ b[k:k + 32].astype(np.float64))
    kern = tilelang_mini.compile(accumulate)
    c = np.zeros((64, 64), np.float32)
    kern.simulate(a, b, lo, hi, c)
    np.testing.assert_allclose(c, want, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("chip", ["ascend910b", "ascend950"])
def test_a_loop_that_never_ends_is_a_deadlock(chip):
    kern = tilelang_mini.compile(accumulate, chip=chip)
    text = kern.get_ir("plan_memory")
    lines = [ln for ln in text.splitlines() if "k[0] = k[0] + 32" in ln and "C.S" in ln]
    assert len(lines) == 1, text  # the cube's own copy of the loop counter's update
    runaway = tilelang_mini.compile_ir(text.replace(lines[0], lines[0].replace("+ 32", "- 32")),
                                       chip=chip)
    a, b, lo, hi = _inputs()
    with pytest.raises(DeadlockError, match="wait_cross_flag"):
        runaway.simulate(a, b, lo, hi, np.zeros((64, 64), np.float32))
