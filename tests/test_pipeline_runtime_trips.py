"""`T.Pipelined(n, num_stages=s)` with a trip count read at run time (issue: the pipeline pass
left such loops one buffer version). The loop is unrolled by s with s buffer versions, the
n % s iterations left run under guards on the run-time count: a GEMM whose K-loop count is
read from a tensor, per block, is right for every count (0..5, odd and even, blocks with
different counts) on both targets against a float64 NumPy reference, and simulates without a
race, a deadlock or an unbalanced flag on both chips."""
import numpy as np
import pytest

import tilelang_mini
import tilelang_mini.language as T
from tilelang_mini.ir.nodes import Alloc, For, If, walk_statements

from goldens import check_golden
from kernels import gemm_tiles

CHIPS = ["ascend910b", "ascend950"]
BM, BN, BK = 16, 16, 32


def runtime_gemm(M, N, K, stages=2, vector=False, BM=BM, BN=BN, BK=BK):
    """C[rows of block by] = A[:, :NK[by] * BK] @ B[:NK[by] * BK]. `vector`: each K step's
    product goes to a fragment the vector cores add into the accumulator (cube -> vector
    flags in every iteration) weighted by the step count the vector cores keep (a tile set
    before the loop, read first thing in its body and after its update, as attention's running
    max): C = sum over steps k of (k + 1) * A_k @ B_k, plus max(NK, 0)."""

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
             NK: T.Tensor((M // BM,), "int32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(N // BN, M // BM) as (bx, by):
            A_s, B_s, C_f = gemm_tiles(BM, BN, BK)
            T.clear(C_f)
            if vector:
                P = T.alloc_fragment((BM, BN), "float32")
                steps = T.alloc_fragment((BM,), "float32")
                before = T.alloc_fragment((BM,), "float32")
                T.fill(steps, 0.0)
                for k in T.Pipelined(NK[by], num_stages=stages):
                    T.copy(steps, before)
                    T.copy(A[by * BM, k * BK], A_s)
                    T.copy(B[k * BK, bx * BN], B_s)
                    T.gemm(A_s, B_s, P, clear_accum=True)
                    for i in T.Parallel(BM):
                        steps[i] = before[i] + 1.0
                    for i, j in T.Parallel(BM, BN):
                        C_f[i, j] = C_f[i, j] + P[i, j] * steps[i]
                for i, j in T.Parallel(BM, BN):
                    C_f[i, j] = C_f[i, j] + steps[i]
            else:
                for k in T.Pipelined(NK[by], num_stages=stages):
                    T.copy(A[by * BM, k * BK], A_s)
                    T.copy(B[k * BK, bx * BN], B_s)
                    T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C[by * BM, bx * BN])

    return main


def inputs(M, N, counts, seed=0):
    rng = np.random.default_rng(seed)
    K = BK * max(max(counts), 1)
    a = rng.standard_normal((M, K)).astype("float16")
    b = rng.standard_normal((K, N)).astype("float16")
    return a, b, np.array(counts, np.int32)


def reference(a, b, nk, counted=False):
    out = np.zeros((a.shape[0], b.shape[1]))
    for blk, n in enumerate(nk):
        rows = slice(blk * BM, (blk + 1) * BM)
        for k in range(max(int(n), 0)):
            cols = slice(k * BK, (k + 1) * BK)
            w = k + 1 if counted else 1
            out[rows] += w * (a[rows, cols].astype(np.float64) @ b[cols].astype(np.float64))
        out[rows] += max(int(n), 0) if counted else 0
    return out


def check(prim, args, target, counted=False):
    ref = reference(*args, counted)
    out = tilelang_mini.compile(prim, out_idx=[-1], target=target)(*args)
    np.testing.assert_allclose(out, ref, rtol=1e-3, atol=1e-3)
    for chip in CHIPS:  # RaceError, DeadlockError or SyncError fail the test
        simulated, _ = tilelang_mini.compile(prim, out_idx=[-1], chip=chip).simulate(*args)
        np.testing.assert_allclose(simulated, ref, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("trips", [0, 1, 2, 3, 4, 5])
@pytest.mark.parametrize("stages", [2, 3])
@pytest.mark.parametrize("vector", [False, True])
def test_every_trip_count_is_right_and_simulates_clean(target, trips, stages, vector):
    args = inputs(BM, BN, [trips], seed=trips)
    check(runtime_gemm(BM, BN, args[0].shape[1], stages, vector), args, target,
          counted=vector)


@pytest.mark.parametrize("stages", [2, 3])
@pytest.mark.parametrize("vector", [False, True])
def test_blocks_with_different_counts(target, stages, vector):
    counts = [0, 1, 2, 3, 4, 5, -1]  # a negative count runs no iteration, like range(-1)
    args = inputs(BM * len(counts), 2 * BN, counts, seed=stages)
    check(runtime_gemm(BM * len(counts), 2 * BN, args[0].shape[1], stages, vector), args,
          target, counted=vector)


def test_two_buffer_versions_a_guarded_loop_and_tail():
    prim = runtime_gemm(BM, BN, 4 * BK)
    kernel = tilelang_mini.compile(prim, out_idx=[-1], chip="ascend910b")
    text = kernel.get_ir("pipeline")
    check_golden("pipeline.runtime_trips.ascend910b", text)
    ir = kernel.compilation.stages["pipeline"]
    names = {s.buffer.name for s in walk_statements(ir.body) if isinstance(s, Alloc)}
    assert {"A_s", "A_s_1", "B_s", "B_s_1"} <= names
    loops = [s for s in walk_statements(ir.body) if isinstance(s, For) and s.kind != "parallel"]
    assert len(loops) == 1 and "NK" in text and "// 2" in text
    assert sum(isinstance(s, If) for s in walk_statements(ir.body)) == 2  # loop, tail


@pytest.mark.parametrize("chip", CHIPS)
def test_the_overlap_shows_in_the_estimate(chip):
    """Two buffer versions let the loads and MMADs of one K step run under the previous step's
    vector work: the run-time count estimates below the same loop left serial (num_stages=1)."""
    M = N = 128
    bk, n = 64, 16
    K = n * bk
    args = (np.zeros((M, K), np.float16), np.zeros((K, N), np.float16), np.array([n], np.int32),
            np.zeros((M, N), np.float32))
    times = [tilelang_mini.compile(runtime_gemm(M, N, K, stages, True, M, N, bk), out_idx=[-1],
                                   chip=chip).estimate(args=args).time_us for stages in (1, 2)]
    assert times[1] < times[0], times


def var_count_gemm(M, N, K, changed):
    """The count in a scalar variable; `changed`: the loop body counts it down as it goes (the
    loop still runs the count it started with, as `range`)."""

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
             NK: T.Tensor((M // BM,), "int32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(N // BN, M // BM) as (bx, by):
            A_s, B_s, C_f = gemm_tiles(BM, BN, BK)
            n = T.alloc_var("int32")
            n = NK[by]
            T.clear(C_f)
            for k in T.Pipelined(n, num_stages=2):
                T.copy(A[by * BM, k * BK], A_s)
                T.copy(B[k * BK, bx * BN], B_s)
                T.gemm(A_s, B_s, C_f)
                if changed:
                    n = n - 1
            T.copy(C_f, C[by * BM, bx * BN])

    return main


@pytest.mark.parametrize("changed", [False, True])
def test_a_count_the_loop_changes_keeps_one_version(target, changed):
    counts = [0, 1, 2, 3, 5]
    args = inputs(BM * len(counts), BN, counts, seed=7)
    prim = var_count_gemm(BM * len(counts), BN, args[0].shape[1], changed)
    check(prim, args, target)
    ir = tilelang_mini.compile(prim, out_idx=[-1], chip="ascend910b").compilation.stages[
        "pipeline"]
    names = {s.buffer.name for s in walk_statements(ir.body) if isinstance(s, Alloc)}
    assert ("A_s_1" in names) == (not changed), names


def window_gemm(M, N, K, stages):
    """Block by multiplies the K window [KS[by], KE[by]): a count computed from two loads."""

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
             KS: T.Tensor((M // BM,), "int32"), KE: T.Tensor((M // BM,), "int32"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(N // BN, M // BM) as (bx, by):
            A_s, B_s, C_f = gemm_tiles(BM, BN, BK)
            T.clear(C_f)
            for k in T.Pipelined(T.ceildiv(KE[by] - KS[by], BK), num_stages=stages):
                T.copy(A[by * BM, KS[by] + k * BK], A_s)
                T.copy(B[KS[by] + k * BK, bx * BN], B_s)
                T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C[by * BM, bx * BN])

    return main


@pytest.mark.parametrize("stages", [2, 3])
def test_a_count_from_two_loads(target, stages):
    windows = [(0, 0), (1, 2), (0, 2), (2, 5), (1, 5), (0, 6)]  # in K blocks: 0..5 trips
    M, K = BM * len(windows), 6 * BK
    rng = np.random.default_rng(stages)
    a = rng.standard_normal((M, K)).astype("float16")
    b = rng.standard_normal((K, BN)).astype("float16")
    ks = np.array([s * BK for s, _ in windows], np.int32)
    ke = np.array([e * BK for _, e in windows], np.int32)
    ref = np.zeros((M, BN))
    for blk, (s, e) in enumerate(zip(ks, ke)):
        rows = slice(blk * BM, (blk + 1) * BM)
        ref[rows] = a[rows, s:e].astype(np.float64) @ b[s:e].astype(np.float64)
    prim = window_gemm(M, BN, K, stages)
    out = tilelang_mini.compile(prim, out_idx=[-1], target=target)(a, b, ks, ke)
    np.testing.assert_allclose(out, ref, rtol=1e-3, atol=1e-3)
    for chip in CHIPS:
        kernel = tilelang_mini.compile(prim, out_idx=[-1], chip=chip)
        simulated, _ = kernel.simulate(a, b, ks, ke)
        np.testing.assert_allclose(simulated, ref, rtol=1e-3, atol=1e-3)
    names = {s.buffer.name for s in walk_statements(kernel.compilation.stages["pipeline"].body)
             if isinstance(s, Alloc)}
    assert {"A_s_1", "B_s_1"} <= names
