"""tilelang-ascend's TL_ASCEND_AUTO_CV_COMBINE style: a developer-mode is_npu kernel whose cube
and vector statements run as two concurrent programs meeting at GM workspaces (a workspace read
before any statement writes it: the other core's write of the same iteration). The compiler
makes it two Scope programs with cross flags (frontend/workspace_order.py); checked on numpy,
llvm and the simulator against float64 references, and unpairable kernels are located errors."""
import numpy as np
import pytest

import tilelang_mini as tilelang
import tilelang_mini.language as T
from tilelang_mini.errors import CompileError

from kernels import cube_tiles
from util import close, f64, rand


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_CACHE_DIR", str(tmp_path / "cache"))


def ping_pong(n_iter, M=32, N=32, reads=1):
    """Per block: for each k the cube writes S = A_b @ B_k to ws_s, then reads P from ws_p
    (written by the vector program below it in the source) and writes P @ B_k to ws_s; the
    vector program turns each S into P = relu(S) (fp16) and sums the P @ B_k into Y.
    `reads=2`: the vector program reads ws_s once more than the cube writes it (unpairable)."""
    @T.prim_func
    def main(A: T.Tensor((2 * M, N), "float16"), B: T.Tensor((n_iter, N, N), "float16"),
             Y: T.Tensor((2 * M, N), "float32"),
             ws_s: T.Tensor((2, M, N), "float32"), ws_p: T.Tensor((2, M, N), "float16")):
        with T.Kernel(2, is_npu=True) as (cid, vid):
            a_l1, b_l1, c_l0 = cube_tiles(M, N, N)
            p_l1 = T.alloc_L1((M, N), "float16")
            s_ub = T.alloc_ub((M, N), "float32")
            p_ub = T.alloc_ub((M, N), "float16")
            acc = T.alloc_ub((M, N), "float32")
            T.copy(A[cid * M, 0], a_l1)
            for k in T.serial(n_iter):
                T.copy(B[k, 0, 0], b_l1)
                T.gemm_v0(a_l1, b_l1, c_l0, init=True)
                T.copy(c_l0, ws_s[cid, 0, 0])
                T.copy(ws_p[cid, 0, 0], p_l1)
                T.gemm_v0(p_l1, b_l1, c_l0, init=True)
                T.copy(c_l0, ws_s[cid, 0, 0])
            T.tile.fill(acc, 0.0)
            for k in T.serial(n_iter):
                T.copy(ws_s[cid, 0, 0], s_ub)
                T.tile.relu(s_ub, s_ub)
                T.copy(s_ub, p_ub)
                T.copy(p_ub, ws_p[cid, 0, 0])
                for _ in T.serial(reads):
                    T.copy(ws_s[cid, 0, 0], s_ub)
                T.tile.add(acc, acc, s_ub)
            T.copy(acc, Y[cid * M, 0])

    return main


def ping_pong_ref(a, b):
    out = np.zeros(a.shape)
    for blk in range(2):
        ab, acc = f64(a[blk * 32:(blk + 1) * 32]), 0
        for bk in f64(b):
            p = f64(np.maximum(ab @ bk, 0).astype(np.float16))
            acc = acc + p @ bk
        out[blk * 32:(blk + 1) * 32] = acc
    return out


@pytest.mark.parametrize("n_iter", [1, 3])
def test_cube_and_vector_programs_meet_at_workspaces(target, n_iter):
    kernel = tilelang.compile(ping_pong(n_iter), out_idx=[2], workspace_idx=[3, 4], target=target)
    a, b = rand((64, 32), "float16", 1, 0.3), rand((n_iter, 32, 32), "float16", 2, 0.3)
    want = ping_pong_ref(a, b)
    close(kernel(a, b), want, "float16", reduce_len=64)
    close(kernel.simulate(a, b)[0], want, "float16", reduce_len=64)
    text = kernel.get_ir()
    assert 'Scope("C")' in text and 'Scope("V")' in text and "wait_cross_flag" in text


def test_a_cache_hit_skips_the_pairing_and_recomputes_it_when_asked(target, monkeypatch):
    """The workspace checks and the pairing into two programs follow from the kernel text,
    workspace_idx and chip (the cache key): a hit runs none of them, and the stages asked of
    the loaded kernel (get_ir, simulate) are the paired kernel's, as after a miss."""
    from tilelang_mini.frontend import workspace_order
    monkeypatch.setenv("TILELANG_MINI_CACHE", "1")
    cold = tilelang.compile(ping_pong(2), out_idx=[2], workspace_idx=[3, 4], target=target)
    calls = []
    real = workspace_order.concurrent_programs
    monkeypatch.setattr(workspace_order, "concurrent_programs",
                        lambda *a: calls.append(a) or real(*a))
    warm = tilelang.compile(ping_pong(2), out_idx=[2], workspace_idx=[3, 4], target=target)
    assert not cold.from_cache and warm.from_cache and calls == []
    a, b = rand((64, 32), "float16", 1, 0.3), rand((2, 32, 32), "float16", 2, 0.3)
    want = ping_pong_ref(a, b)
    close(warm(a, b), want, "float16", reduce_len=64)
    close(warm.simulate(a, b)[0], want, "float16", reduce_len=64)
    assert len(calls) == 1 and warm.get_ir() == cold.get_ir()  # paired when asked, the same
    other = tilelang.compile(ping_pong(2), out_idx=[2], workspace_idx=[3], target=target)
    assert not other.from_cache  # workspace_idx is in the key


def test_unpairable_workspace_reads_are_located():
    with pytest.raises(CompileError) as e:
        tilelang.compile(ping_pong(2, reads=2), out_idx=[2], workspace_idx=[3, 4])
    msg = str(e.value)
    assert "read here before any statement writes it" in msg, msg
    assert "written 4 times by one core and read 6 times by the other" in msg, msg


def gather_loop(n_iter, N, H, cid, vid, a_l1, b_l1, c_l0, idx_ub, row_ub, s_ub, acc, B, idx,
                ws_b, ws_s):
    """gather_gemm's loop (a Python helper: inlined where it is called)."""
    for k in T.serial(n_iter):
        T.copy(ws_b[cid, 0, 0], b_l1)
        T.gemm_v0(a_l1, b_l1, c_l0, init=True)
        T.copy(c_l0, ws_s[cid, 0, 0])
        T.copy(idx[k, 0], idx_ub)
        for r in T.serial(N // 2):
            T.copy(B[idx_ub[r + vid * (N // 2)], 0], row_ub)
            T.copy(row_ub, ws_b[cid, r + vid * (N // 2), 0])
        T.copy(ws_s[cid, vid * H, 0], s_ub)
        T.tile.add(acc, acc, s_ub)


def gather_gemm(n_iter, guarded=False, M=32, N=32, R=64, loop=gather_loop):
    """Per block: for each k the vector cores gather rows idx[k, :] of B into ws_b one row at
    a time (each AIV half of them: N/2 writes per read of the cube), the cube reads the whole
    ws_b at the top of the iteration (before the writes in the source) and writes
    S = A_b @ gathered to ws_s, which each AIV adds into its half of Y. `guarded`: the loop
    sits under `if on[cid] > 0` (a GM scalar both cores read alike; Y stays 0 where off)."""
    H = M // 2

    @T.prim_func
    def main(A: T.Tensor((2 * M, N), "float16"), B: T.Tensor((R, N), "float16"),
             idx: T.Tensor((n_iter, N), "int32"), on: T.Tensor((2,), "int32"),
             Y: T.Tensor((2 * M, N), "float32"),
             ws_b: T.Tensor((2, N, N), "float16"), ws_s: T.Tensor((2, M, N), "float32")):
        with T.Kernel(2, is_npu=True) as (cid, vid):
            a_l1 = T.alloc_L1((M, N), "float16")
            b_l1 = T.alloc_L1((N, N), "float16")
            c_l0 = T.alloc_L0C((M, N), "float32")
            idx_ub = T.alloc_ub((N,), "int32")
            row_ub = T.alloc_ub((N,), "float16")
            s_ub = T.alloc_ub((H, N), "float32")
            acc = T.alloc_ub((H, N), "float32")
            T.copy(A[cid * M, 0], a_l1)
            T.tile.fill(acc, 0.0)
            if guarded:
                if on[cid] > 0:
                    loop(n_iter, N, H, cid, vid, a_l1, b_l1, c_l0, idx_ub, row_ub, s_ub, acc, B,
                         idx, ws_b, ws_s)
            else:
                loop(n_iter, N, H, cid, vid, a_l1, b_l1, c_l0, idx_ub, row_ub, s_ub, acc, B,
                     idx, ws_b, ws_s)
            T.copy(acc, Y[cid * M + vid * H, 0])

    return main


def gather_gemm_ref(a, b, idx, on):
    out = np.zeros(a.shape)
    for blk in range(2):
        if on[blk] > 0:
            ab = f64(a[blk * 32:(blk + 1) * 32])
            out[blk * 32:(blk + 1) * 32] = sum(ab @ f64(b[row]) for row in idx)
    return out


@pytest.mark.parametrize("guarded", [False, True])
def test_gathered_workspace_pairs_per_iteration(target, guarded):
    """Row-by-row writes (N/2 per AIV) against one read per iteration, and the same under a
    data-dependent if: the hand-off is paired per iteration of the loop around it."""
    n_iter = 3
    kernel = tilelang.compile(gather_gemm(n_iter, guarded), out_idx=[4], workspace_idx=[5, 6],
                              target=target)
    rng = np.random.default_rng(7)
    a, b = rand((64, 32), "float16", 1, 0.3), rand((64, 32), "float16", 2, 0.3)
    idx = np.stack([rng.permutation(64)[:32] for _ in range(n_iter)]).astype(np.int32)
    on = np.array([1, 0 if guarded else 1], np.int32)
    want = gather_gemm_ref(a, b, idx, on)
    close(kernel(a, b, idx, on), want, "float32", reduce_len=32 * n_iter)
    close(kernel.simulate(a, b, idx, on)[0], want, "float32", reduce_len=32 * n_iter)


def on_chip_hand_off(in_loop=True):
    """tilelang-ascend's vid_reduce style: the cube's gemm reads an L1 tile that the vector
    core fills (UB -> L1) later in the loop body, and the vector core adds up the cube's
    products it receives (L0C -> UB) after the fill: Y = A @ (B[0] + B[1]). Without the
    loop the read comes before the only write, which no iteration pairs (a located error)."""
    @T.prim_func
    def main(A: T.Tensor((32, 32), "float16"), B: T.Tensor((2, 32, 32), "float16"),
             Y: T.Tensor((32, 32), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a_l1, b_l1, c_l0 = cube_tiles(32, 32, 32)
            b_ub = T.alloc_ub((32, 32), "float16")
            c_ub = T.alloc_ub((32, 32), "float32")
            acc = T.alloc_ub((32, 32), "float32")
            T.copy(A[0, 0], a_l1)
            T.tile.fill(acc, 0.0)
            if in_loop:
                for k in T.serial(2):
                    T.gemm_v0(a_l1, b_l1, c_l0, init=True)
                    T.copy(c_l0, c_ub)
                    T.copy(B[k, 0, 0], b_ub)
                    T.copy(b_ub, b_l1)
                    T.tile.add(acc, acc, c_ub)
            else:
                T.gemm_v0(a_l1, b_l1, c_l0, init=True)
                T.copy(B[0, 0, 0], b_ub)
                T.copy(b_ub, b_l1)
                T.copy(c_l0, c_ub)
                T.tile.add(acc, acc, c_ub)
            T.copy(acc, Y[0, 0])

    return main


def test_on_chip_hand_off_read_before_written_pairs_per_iteration(target):
    """The two concurrent programs meet at compiler-made workspaces: the writer copies into a
    workspace of the tile's shape, the reader loads the tile where its loop body first needs it
    (before: a located error)."""
    k = tilelang.compile(on_chip_hand_off(), out_idx=[2], target=target)
    a, b = rand((32, 32), "float16", 3, 0.3), rand((2, 32, 32), "float16", 4, 0.3)
    want = f64(a) @ (f64(b[0]) + f64(b[1]))
    close(k(a, b), want, "float32", reduce_len=64)
    close(k.simulate(a, b)[0], want, "float32", reduce_len=64)


def test_on_chip_hand_off_read_before_written_is_located():
    with pytest.raises(CompileError) as e:
        tilelang.compile(on_chip_hand_off(in_loop=False), out_idx=[2])
    msg = str(e.value)
    assert "tile 'b_l1' (L1) is read here before any statement writes it" in msg, msg
    assert "workspace_idx tensor" in msg, msg
    assert "T.gemm_v0(a_l1, b_l1" in open(__file__).read().splitlines()[e.value.loc.line - 1]


def test_caller_passed_workspaces_are_hand_offs(target):
    """The same kernel with its workspaces passed in by the caller (not workspace_idx), as
    tilelang-ascend's example_sparse_flash_attn_gqa_pto_developer.py does: ws_b is read by the
    cube before the vector core writes it in the loop, so both tensors are hand-offs."""
    n_iter = 2
    kernel = tilelang.compile(gather_gemm(n_iter), out_idx=[4], target=target)
    rng = np.random.default_rng(8)
    a, b = rand((64, 32), "float16", 3, 0.3), rand((64, 32), "float16", 4, 0.3)
    idx = np.stack([rng.permutation(64)[:32] for _ in range(n_iter)]).astype(np.int32)
    on = np.ones(2, np.int32)
    ws = [np.zeros((2, 32, 32), np.float16), np.zeros((2, 32, 32), np.float32)]
    want = gather_gemm_ref(a, b, idx, on)
    close(kernel(a, b, idx, on, *ws), want, "float32", reduce_len=32 * n_iter)
    close(kernel.simulate(a, b, idx, on, *ws)[0], want, "float32", reduce_len=32 * n_iter)



def split_loop(n_iter, N, H, cid, vid, a_l1, b_l1, c_l0, idx_ub, row_ub, s_ub, acc, B, idx,
               ws_b, ws_s):
    """example_sparse_flash_attn.py's shape of gather_loop: the cube's loop over the blocks
    first, then the vector cores' own loop over the same blocks. The two loops run
    concurrently on the machine, paired per iteration: the k-th cube iteration reads the k-th
    gather."""
    for _ in T.serial(n_iter):
        T.copy(ws_b[cid, 0, 0], b_l1)
        T.gemm_v0(a_l1, b_l1, c_l0, init=True)
        T.copy(c_l0, ws_s[cid, 0, 0])
    for k in range(n_iter):
        T.copy(idx[k, 0], idx_ub)
        for r in range(N // 2):
            T.copy(B[idx_ub[r + vid * (N // 2)], 0], row_ub)
            T.copy(row_ub, ws_b[cid, r + vid * (N // 2), 0])
        T.copy(ws_s[cid, vid * H, 0], s_ub)
        T.tile.add(acc, acc, s_ub)


@pytest.mark.parametrize("n_iter", [1, 3])
def test_a_cube_loop_and_a_vector_loop_pair_per_iteration(target, n_iter):
    """Each workspace's accesses lie in one loop per core (no loop holds both): with equal
    trip counts, the i-th iteration of the writer's loop hands over to the i-th of the
    reader's (before: a located error, the whole vector loop standing for one access)."""
    kernel = tilelang.compile(gather_gemm(n_iter, loop=split_loop), out_idx=[4],
                              workspace_idx=[5, 6], target=target)
    rng = np.random.default_rng(9)
    a, b = rand((64, 32), "float16", 5, 0.3), rand((64, 32), "float16", 6, 0.3)
    idx = np.stack([rng.permutation(64)[:32] for _ in range(n_iter)]).astype(np.int32)
    on = np.ones(2, np.int32)
    want = gather_gemm_ref(a, b, idx, on)
    close(kernel(a, b, idx, on), want, "float32", reduce_len=32 * n_iter)
    close(kernel.simulate(a, b, idx, on)[0], want, "float32", reduce_len=32 * n_iter)
