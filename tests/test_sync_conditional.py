"""insert_sync with data-dependent ifs (issue 8): a block-sparse GEMM skips copies and MMADs
by a mask read in the K loop. The flags the compiler places must balance on both paths of
every if (a set after the if on a pipe with nothing to wait for in the skipped path set the
flag a second time before the first was waited for: SyncError in simulate, a hang on
hardware). Each kernel runs on every target and simulates clean on both chips, against a
float64 reference, with masks that take and skip blocks in every pattern."""
import numpy as np
import pytest

import tilelang_mini
import tilelang_mini.language as T

import kernels

CHIPS = ["ascend910b", "ascend950"]


def block_sparse_gemm(variant, M, N, K, bm=32, bn=32, bk=64, stages=2):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
             Mask: T.Tensor((M // bm, N // bn, K // bk), "int32"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(N // bn, M // bm) as (bx, by):
            A_s, B_s, C_f = kernels.gemm_tiles(bm, bn, bk)
            C_o = T.alloc_fragment((bm, bn), "float32")
            T.clear(C_f)
            for k in T.Pipelined(K // bk, num_stages=stages):
                if variant == "gemm_only":
                    T.copy(A[by * bm, k * bk], A_s)
                    T.copy(B[k * bk, bx * bn], B_s)
                    if Mask[by, bx, k]:
                        T.gemm(A_s, B_s, C_f)
                elif variant == "if_else":
                    if Mask[by, bx, k] > 0:
                        T.copy(A[by * bm, k * bk], A_s)
                        T.copy(B[k * bk, bx * bn], B_s)
                        T.gemm(A_s, B_s, C_f)
                    else:
                        T.copy(A[by * bm, k * bk], A_s)
                else:
                    if Mask[by, bx, k]:
                        T.copy(A[by * bm, k * bk], A_s)
                        T.copy(B[k * bk, bx * bn], B_s)
                        T.gemm(A_s, B_s, C_f)
            for i, j in T.Parallel(bm, bn):
                C_o[i, j] = C_f[i, j] * 2.0
            T.copy(C_o, C[by * bm, bx * bn])
    return main


@pytest.mark.parametrize("variant,stages", [
    ("gemm_only", 1), ("gemm_only", 2), ("gemm_only", 3), ("if_else", 1), ("if_else", 2),
    ("whole_step", 1), ("whole_step", 2), ("whole_step", 3)])
def test_block_sparse_gemm_flags_balance_on_both_paths(target, variant, stages):
    M, N, K, bm, bn, bk = 64, 64, 256, 32, 32, 64
    rng = np.random.default_rng(6)
    a = rng.standard_normal((M, K)).astype("float16")
    b = rng.standard_normal((K, N)).astype("float16")
    mask = np.array([[[1, 0, 0, 1], [0, 0, 0, 0]], [[1, 1, 1, 1], [0, 1, 1, 0]]], np.int32)
    ref = np.zeros((M, N))
    for y in range(M // bm):
        for x in range(N // bn):
            for k in range(K // bk):
                if mask[y, x, k]:
                    ref[y * bm:(y + 1) * bm, x * bn:(x + 1) * bn] += (
                        a[y * bm:(y + 1) * bm, k * bk:(k + 1) * bk].astype(np.float64)
                        @ b[k * bk:(k + 1) * bk, x * bn:(x + 1) * bn].astype(np.float64))
    ref *= 2.0
    prim = block_sparse_gemm(variant, M, N, K, bm, bn, bk, stages)
    out = tilelang_mini.compile(prim, out_idx=[-1], target=target)(a, b, mask)
    np.testing.assert_allclose(out, ref, rtol=1e-3, atol=1e-3)
    for chip in CHIPS:
        simulated, _ = tilelang_mini.compile(prim, out_idx=[-1], chip=chip).simulate(a, b, mask)
        np.testing.assert_allclose(simulated, ref, rtol=1e-3, atol=1e-3)


def branch_maps(M, N, bm=16):
    """Vector maps in both branches of an if on the block index, after another map."""
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), O: T.Tensor((M, N), "float32")):
        with T.Kernel(M // bm) as bx:
            x = T.alloc_fragment((bm, N), "float32")
            T.copy(X[bx * bm, 0], x)
            for i, j in T.Parallel(bm, N):
                x[i, j] = x[i, j] * 2.0
            if bx == 0:
                for i, j in T.Parallel(bm, N):
                    x[i, j] = x[i, j] + 1.0
            else:
                for i, j in T.Parallel(bm, N):
                    x[i, j] = x[i, j] - 0.5
            T.copy(x, O[bx * bm, 0])
    return main


def test_each_branch_of_an_if_is_ordered_after_the_code_before_it(target):
    x = np.random.default_rng(7).standard_normal((64, 32)).astype("float32")
    ref = x.astype(np.float64) * 2.0
    ref[:16] += 1.0
    ref[16:] -= 0.5
    prim = branch_maps(64, 32)
    np.testing.assert_allclose(tilelang_mini.compile(prim, out_idx=[-1], target=target)(x), ref)
    for chip in CHIPS:
        simulated, _ = tilelang_mini.compile(prim, out_idx=[-1], chip=chip).simulate(x)
        np.testing.assert_allclose(simulated, ref)


def test_untaken_if_around_cube_and_vector_work_simulates_clean(target):
    M, N, K, G = 64, 32, 64, 3
    rng = np.random.default_rng(8)
    a, b = rng.standard_normal((M, K)).astype("float16"), rng.standard_normal((G, K, N)).astype("float16")
    w = rng.standard_normal((G,)).astype("float32")
    mi = np.repeat(np.array([2, -1, 0, 1], np.int32), 16)
    ref = np.zeros((M, N))
    for r in range(M):
        if mi[r] >= 0:
            ref[r] = (a[r].astype(np.float64) @ b[mi[r]].astype(np.float64)) * w[mi[r]] + 1.0
    prim = kernels.grouped_gemm(M, N, K, G, guarded_epilogue=True)  # K loop + epilogue in the if
    out = tilelang_mini.compile(prim, out_idx=[-1], target=target)(a, b, mi, w)
    np.testing.assert_allclose(out, ref, rtol=1e-3, atol=1e-3)
    for chip in CHIPS:
        simulated, _ = tilelang_mini.compile(prim, out_idx=[-1], chip=chip).simulate(a, b, mi, w)
        np.testing.assert_allclose(simulated, ref, rtol=1e-3, atol=1e-3)


def scatter_twice(dt, wide_rows, guard):
    """Two atomic scatters through an index tensor (fuzz family scatter): each a map into a
    hidden tile, then per (row, column) an `if` on the gathered row around the atomic copy; the
    second scatter's tile shares the first's bytes (plan_memory)."""
    R, D, N = 3, 4 if wide_rows else 1, 6

    @T.prim_func
    def main(Idx: T.Tensor((2, R), "int32"), V: T.Tensor((2, R, D), "float32"),
             C: T.Tensor((N, D), dt), E: T.Tensor((N, D), "float32")):
        with T.Kernel(2) as bx:
            v = T.alloc_fragment((R, D), "float32")
            rows = T.alloc_shared((R,), "int32")
            T.copy(V[bx, :, :], v)
            T.copy(Idx[bx, :], rows)
            if guard:
                for i, j in T.Parallel(R, D):
                    pos = rows[i]
                    if (pos > -1) & (pos < N - 2):
                        T.atomic_add(C[pos, j], v[i, j] * 2.0)
            else:  # rows outside C are not stored (safe access: an if on the gathered row)
                for i, j in T.Parallel(R, D):
                    T.atomic_add(C[Idx[bx, i], j], v[i, j] * 2.0)
            for i, j in T.Parallel(R, D):
                T.atomic_max(E[Idx[bx, i], j], v[i, j])
    return main


@pytest.mark.parametrize("chip", CHIPS)
@pytest.mark.parametrize("dt, wide, guard", [("float16", False, False), ("float32", True, True),
                                             ("bfloat16", True, True), ("float16", True, False)])
def test_scatter_branches_in_loops(chip, dt, wide, guard):
    """A producer in an if inside the scatter's column loop inside its row loop: the set of its
    flag went after the column loop and ran in row trips whose branch did not (the flag set
    twice: SyncError), and a flag primed around the row loop drained with the clock of the set
    in the branch (the second scatter's map went without the pipe_barrier(V) its shared bytes
    need: RaceError) — when some rows fall outside C."""
    kern = tilelang_mini.compile(scatter_twice(dt, wide, guard), out_idx=[2, 3], target="numpy",
                                 chip=chip)
    D = 4 if wide else 1
    v = np.random.default_rng(5).uniform(-1, 1, (2, 3, D)).astype(np.float32)
    for idx in ([[-1, 5, 6], [-1, -1, -1]], [[0, -1, 3], [2, 5, 1]], [[1, 1, 1], [-1, 0, 7]]):
        idx = np.array(idx, np.int32)
        want_c, want_e = np.zeros((6, D)), np.zeros((6, D))
        for b in range(2):
            for i in range(3):
                if 0 <= idx[b, i] < (4 if guard else 6):
                    want_c[idx[b, i]] += 2.0 * v[b, i]
                if 0 <= idx[b, i] < 6:
                    want_e[idx[b, i]] = np.maximum(want_e[idx[b, i]], v[b, i])
        (c, e), _ = kern.simulate(idx, v)
        np.testing.assert_allclose(np.asarray(c, np.float64), want_c, rtol=1e-2, atol=1e-2)
        np.testing.assert_allclose(np.asarray(e, np.float64), want_e, rtol=1e-6)


def gemm_clear_first(M, N, K, bk=16):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            A_L1 = T.alloc_shared((M, bk), "float16")
            B_L1 = T.alloc_shared((bk, N), "float16")
            C_L0 = T.alloc_L0C((M, N), "float32")
            c_ub = T.alloc_ub((M, N), "float32")
            for k in T.serial(K // bk):
                T.copy(A[0, k * bk], A_L1)
                T.copy(B[k * bk, 0], B_L1)
                T.gemm(A_L1, B_L1, C_L0, clear_accum=(k == 0))
            T.copy(C_L0, c_ub)
            T.tile.muls(c_ub, c_ub, 0.5)
            T.copy(c_ub, C[0, 0])
    return main


@pytest.mark.parametrize("chip", CHIPS)
def test_branch_producer_with_consumer_after_its_loop(chip):
    """The MMAD sits in both branches of `clear_accum=(k == 0)` inside the K loop and its
    consumer (the L0C copy-out) after the loop: the M -> FIX flag is set and waited once after
    the loop. Set and waited inside each branch, M could set it again in the next trip before
    FIX waited (nothing orders FIX before the next MMAD): check_sync rejected the printed IR
    when compiled again (fuzz mutation:1841-52's round trip)."""
    kern = tilelang_mini.compile(gemm_clear_first(32, 32, 64), out_idx=[-1], target="numpy",
                                 chip=chip)
    again = tilelang_mini.compile_ir(kern.get_ir("insert_sync"), out_idx=[-1], target="numpy",
                                     chip=chip)
    rng = np.random.default_rng(3)
    a = rng.uniform(-1, 1, (32, 64)).astype(np.float16)
    b = rng.uniform(-1, 1, (64, 32)).astype(np.float16)
    want = 0.5 * (a.astype(np.float64) @ b.astype(np.float64))
    for k in (kern, again):
        np.testing.assert_allclose(k(a, b), want, rtol=1e-3, atol=1e-3)
    c, _ = again.simulate(a, b)
    np.testing.assert_allclose(c, want, rtol=1e-3, atol=1e-3)


def vector_branch_below_inner_loop(I, J, n=32):
    """An expert vector kernel with flags of its own (insert_sync adds only what Ascend C
    adds: V -> V barriers and V -> S flags). In each (i, j) trip a uniform if writes `idx` by
    the scalar unit (createvecindex) and the vector unit reads it (copy to `f`): the scalar
    write of the next trip must wait for that vector read."""
    @T.prim_func
    def main(Start: T.Tensor((I * J,), "int32"), Y: T.Tensor((I * J, n), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            idx = T.alloc_ub((n,), "int32")
            f = T.alloc_ub((n,), "float32")
            with T.Scope("V"):
                T.set_flag("MTE3", "V", 0)
                T.set_flag("V", "MTE2", 0)  # a vector-pipe instruction before the loops
                for i in T.serial(I):
                    for j in T.serial(J):
                        if (i * J + j) % 3 != 1:
                            T.tile.createvecindex(idx, Start[i * J + j])
                            T.wait_flag("MTE3", "V", 0)
                            T.copy(idx, f)
                            T.set_flag("V", "MTE3", 0)
                            T.wait_flag("V", "MTE3", 0)
                            T.copy(f, Y[i * J + j, :])
                            T.set_flag("MTE3", "V", 0)
                T.wait_flag("MTE3", "V", 0)
                T.wait_flag("V", "MTE2", 0)
    return main


@pytest.mark.parametrize("chip", CHIPS)
@pytest.mark.parametrize("I,J", [(2, 1), (2, 2), (3, 1)])
def test_branch_set_and_wait_known_in_a_later_outer_trip(target, chip, I, J):
    """The V -> S flag is set and waited right after the copy in the if branch (below the j
    loop). The next i trip's scalar write is ordered by that wait on every path where the copy
    ran: insert_sync looks it up in the branch's exit state. It compared only the branch's own
    level of the two occurrences' ancestors (equal: the same if, branch and j trip), not the
    whole path (the i trips differ), so it missed that exit state and raised an internal error
    ("the channels no longer cover the dependencies"; tilelang-ascend's HISA
    block_sparse_mqa_attn_expert)."""
    kern = tilelang_mini.compile(vector_branch_below_inner_loop(I, J), target=target, chip=chip)
    start = (np.arange(I * J) * 100 + 7).astype(np.int32)
    take = np.arange(I * J) % 3 != 1
    want = np.where(take[:, None], start[:, None].astype(np.float64) + np.arange(32), 0.0)
    y = np.zeros((I * J, 32), np.float32)
    kern(start, y)
    np.testing.assert_array_equal(y, want)
    y = np.zeros((I * J, 32), np.float32)
    kern.simulate(start, y)
    np.testing.assert_array_equal(y, want)
