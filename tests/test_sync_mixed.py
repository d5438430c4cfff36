"""Mixed sync (tilelang-ascend's TL_ASCEND_AUTO_SYNC with the kernel's own cross-core flags): an
expert kernel orders its cube and vector cores with set_cross_flag/wait_cross_flag and writes no
intra-core flag; insert_sync adds the flags and barriers between the pipes of each core, keeps
the kernel's cross flags, and check_sync then verifies the whole: a cross-core hand-off the
kernel's flags do not order is still a located race."""
# No `from __future__ import annotations`: kernels need their T.Tensor annotations as objects.
import numpy as np
import pytest

import tilelang_mini
import tilelang_mini.language as T
from markers import Marked
from tilelang_mini import CompileError
from tilelang_mini.ir.nodes import SetCrossFlag, SetFlag, WaitCrossFlag, walk_statements
from kernels import cube_tiles

MARKED = Marked(__file__)
BM, BN, K = 32, 16, 32  # rows per block, columns per trip, reduction length


def cube_then_vector(blocks: int, trips: int, late_wait: bool = False):
    """Y = 2 * (A @ B) + 1, a BN-column tile per trip: the cube writes it to a GM workspace and
    signals; the vector cores wait, read their half rows, map and store. `late_wait`: the
    vector cores read the workspace before waiting (a race the kernel's flags leave)."""
    M, N, half = BM * blocks, BN * trips, BM // 2

    @T.prim_func
    def k(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
          W: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(blocks, is_npu=True) as (cid, vid):
            a_l1, b_l1, c_l0 = cube_tiles(BM, BN, K)
            u = T.alloc_ub((half, BN), "float32")
            y = T.alloc_ub((half, BN), "float32")
            with T.Scope("C"):
                T.copy(A[cid * BM, 0], a_l1)
                for t in T.serial(trips):
                    T.copy(B[0, t * BN], b_l1)
                    T.gemm_v0(a_l1, b_l1, c_l0, init=True)
                    T.copy(c_l0, W[cid * BM, t * BN])  # AT:fixout
                    T.set_cross_flag("FIX", 0)
            with T.Scope("V"):
                for t in T.serial(trips):
                    if not late_wait:
                        T.wait_cross_flag("MTE2", 0)
                    T.copy(W[cid * BM + vid * half, t * BN], u)  # AT:vread
                    if late_wait:
                        T.wait_cross_flag("MTE2", 0)
                    for i, j in T.Parallel(half, BN):
                        y[i, j] = u[i, j] * 2.0 + 1.0
                    T.copy(y, Y[cid * BM + vid * half, t * BN])
    return k, M, N


def both_ways(trips: int):
    """A running sum over trips through one GM workspace per block, flags in both directions
    (as tilelang-ascend's causal linear attention): the cube writes A_t @ B_t to the workspace
    once the vector cores have read the last one (flag 1) and signals (flag 0); the vector
    cores wait, add their half to a running sum, write it to Y_t and signal again."""
    M, N, half = BM, BN, BM // 2

    @T.prim_func
    def k(A: T.Tensor((trips, M, K), "float16"), B: T.Tensor((trips, K, N), "float16"),
          W: T.Tensor((M, N), "float32"), Y: T.Tensor((trips, M, N), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a_l1, b_l1, c_l0 = cube_tiles(M, N, K)
            u = T.alloc_ub((half, N), "float32")
            acc = T.alloc_ub((half, N), "float32")
            with T.Scope("C"):
                for t in T.serial(trips):
                    T.copy(A[t, 0, 0], a_l1)
                    T.copy(B[t, 0, 0], b_l1)
                    T.gemm_v0(a_l1, b_l1, c_l0, init=True)
                    T.wait_cross_flag("FIX", 1)
                    T.copy(c_l0, W)
                    T.set_cross_flag("FIX", 0)
                T.wait_cross_flag("FIX", 1)
            with T.Scope("V"):
                T.set_cross_flag("MTE2", 1)
                T.tile.fill(acc, 0.0)
                for t in T.serial(trips):
                    T.wait_cross_flag("MTE2", 0)
                    T.copy(W[vid * half, 0], u)
                    T.set_cross_flag("MTE2", 1)
                    T.tile.add(acc, acc, u)
                    T.copy(acc, Y[t, vid * half, 0])
    return k


def _operands(M, N, trips=None, seed=0):
    rng = np.random.default_rng(seed)
    lead = () if trips is None else (trips,)
    a = rng.standard_normal(lead + (M, K)).astype(np.float16)
    b = rng.standard_normal(lead + (K, N)).astype(np.float16)
    return a, b


def _flags(kernel):
    return [s for s in walk_statements(kernel.ir.body)
            if isinstance(s, (SetFlag, SetCrossFlag, WaitCrossFlag))]


@pytest.mark.parametrize("blocks,trips", [(1, 2), (2, 5)])
def test_cross_flags_of_the_kernel_intra_core_flags_of_the_compiler(blocks, trips, target):
    prim, M, N = cube_then_vector(blocks, trips)
    a, b = _operands(M, N)
    want = 2.0 * (a.astype(np.float64) @ b.astype(np.float64)) + 1.0
    kernel = tilelang_mini.compile(prim, out_idx=[-1], target=target)
    w = np.zeros((M, N), np.float32)
    np.testing.assert_allclose(kernel(a, b, w), want, rtol=2e-3, atol=2e-3 * np.sqrt(K))
    flags = _flags(kernel)
    assert sum(isinstance(s, SetCrossFlag) for s in flags) == 1  # the kernel's own, kept
    assert any(isinstance(s, SetFlag) for s in flags)            # the compiler's intra-core
    if target == "numpy":
        got, _ = kernel.simulate(a, b, np.zeros((M, N), np.float32))
        np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-3 * np.sqrt(K))


@pytest.mark.parametrize("trips", [1, 3])
def test_cross_flags_both_ways_with_compiler_intra_core_flags(trips):
    """numpy and the simulator (the llvm target runs a block's cores in program order, which
    a kernel with flags in both directions inside a loop does not follow)."""
    a, b = _operands(BM, BN, trips, seed=trips)
    prods = np.einsum("tmk,tkn->tmn", a.astype(np.float64), b.astype(np.float64))
    want = np.cumsum(prods, axis=0)
    kernel = tilelang_mini.compile(both_ways(trips), out_idx=[-1], target="numpy")
    np.testing.assert_allclose(kernel(a, b, np.zeros((BM, BN), np.float32)), want,
                               rtol=2e-3, atol=2e-3 * np.sqrt(K * trips))
    got, _ = kernel.simulate(a, b, np.zeros((BM, BN), np.float32))
    np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-3 * np.sqrt(K * trips))


def test_a_hand_off_the_kernels_cross_flags_leave_unordered_is_a_race():
    prim, _, _ = cube_then_vector(1, 2, late_wait=True)
    with pytest.raises(CompileError) as info:
        tilelang_mini.compile(prim, out_idx=[-1])
    err = info.value
    assert "race on W" in err.message, err.message
    assert err.loc.line in (MARKED.line_of("vread"), MARKED.line_of("fixout")), str(err)
    for tag in ("vread", "fixout"):
        assert f":{MARKED.line_of(tag)}:" in str(err), str(err)


def gemm_v0_between_barriers(M, N, Kt, bm, bn, bk, stages):
    """tilelang-ascend's gemm_v0 brackets itself with flags (its template waits MTE2 -> MTE1 and
    FIX -> M before its L0 loads, and MTE1 -> MTE2, M -> FIX after): an L1 load right before it
    and the L0C copy-out right after it need no flag of the kernel's own (barrier_all only at
    the top and bottom of the K loop, as its pipelined GEMM example writes)."""
    @T.prim_func
    def k(A: T.Tensor((M, Kt), "float16"), B: T.Tensor((Kt, N), "float16"),
          C: T.Tensor((M, N), "float32")):
        with T.Kernel((M // bm) * (N // bn), is_npu=True) as (cid, vid):
            bx = cid // (N // bn)
            by = cid % (N // bn)
            a_l1, b_l1, c_l0 = cube_tiles(bm, bn, bk)
            with T.Scope("C"):
                for kk in T.Pipelined(Kt // bk, num_stages=stages):
                    T.barrier_all()
                    T.copy(A[bx * bm, kk * bk], a_l1)
                    T.copy(B[kk * bk, by * bn], b_l1)
                    if kk == 0:
                        T.gemm_v0(a_l1, b_l1, c_l0, init=True)
                    else:
                        T.gemm_v0(a_l1, b_l1, c_l0)
                    T.barrier_all()
                T.copy(c_l0, C[bx * bm, by * bn])
    return k


@pytest.mark.parametrize("stages", [1, 3])
def test_gemm_v0_orders_the_l1_load_before_it_and_the_copy_out_after_it(stages, target):
    M, N, Kt = 64, 64, 128
    rng = np.random.default_rng(7)
    a = rng.standard_normal((M, Kt)).astype(np.float16)
    b = rng.standard_normal((Kt, N)).astype(np.float16)
    want = a.astype(np.float64) @ b.astype(np.float64)
    kernel = tilelang_mini.compile(gemm_v0_between_barriers(M, N, Kt, 32, 32, 32, stages),
                                   out_idx=[-1], target=target)
    np.testing.assert_allclose(kernel(a, b), want, rtol=2e-3, atol=2e-3 * np.sqrt(Kt))
    if target == "numpy":
        got, _ = kernel.simulate(a, b)
        np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-3 * np.sqrt(Kt))
