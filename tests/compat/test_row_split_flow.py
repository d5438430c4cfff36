"""The vector row split (transform/split_rows.py) halves the tiles that hold the block's rows,
chosen by the data flow: tiles exchanged whole with memory whose rows they hold (the cube's
result, the block's rows of a tensor) and those tied to them row for row. Before, the tiles
were those of the most common first dimension: a kernel with more gather-staging tiles (one
key row per tile row, `copy(K[idx[r], ...], k_ub[r, ...])`) than score tiles split neither
(its whole vector program on AIV 0), and a bias vector whose length happened to equal the
block's rows was taken for a row tile (the map reads it by column), which split nothing either.
Both targets and the simulator, against float64 NumPy references."""
import numpy as np
import pytest

import tilelang_mini
import tilelang_mini.language as T
from tilelang_mini.ir.nodes import Alloc, walk_statements

from kernels import scale_bias
from util import close, f64, rand

H, BI, D, DT, SKV, BLOCKS = 16, 32, 32, 16, 64, 2


def gathered_scores(Q, K, KS, V, Idx, Out, cid):
    """Per block: the BI key/value rows Idx selects (key in two column parts, a per-key scale)
    are gathered on the vector core into (BI, ...) tiles and handed to the cube; the cube's
    scores S = Q Kg^T come back to UB, are scaled per key and handed back (fp16); the cube's
    O = S' Vg is the output. Four (BI, ...) staging tiles, three (H, ...) row tiles."""
    q_l1 = T.alloc_L1((H, D + DT), T.float16)
    k_l1 = T.alloc_L1((BI, D + DT), T.float16)
    v_l1 = T.alloc_L1((BI, D), T.float16)
    p_l1 = T.alloc_L1((H, BI), T.float16)
    s_l0 = T.alloc_L0C((H, BI), T.float32)
    o_l0 = T.alloc_L0C((H, D), T.float32)
    idx_ub = T.alloc_ub((BI,), T.int32)
    k_ub = T.alloc_ub((BI, D), T.float16)
    kt_ub = T.alloc_ub((BI, DT), T.float16)
    v_ub = T.alloc_ub((BI, D), T.float16)
    ks_ub = T.alloc_ub((BI, 1), T.float32)
    s_ub = T.alloc_ub((H, BI), T.float32)
    p_ub = T.alloc_ub((H, BI), T.float16)
    o_ub = T.alloc_ub((H, D), T.float32)
    T.copy(Q[cid * H, 0], q_l1)
    T.copy(Idx[cid, 0], idx_ub)
    for r in T.serial(BI):
        T.copy(K[idx_ub[r], 0:D], k_ub[r, :])
        T.copy(K[idx_ub[r], D:D + DT], kt_ub[r, :])
        T.copy(V[idx_ub[r], 0], v_ub[r, :])
        T.copy(KS[idx_ub[r], 0], ks_ub[r, :])
    T.copy(k_ub, k_l1[:, 0:D])
    T.copy(kt_ub, k_l1[:, D:D + DT])
    T.copy(v_ub, v_l1)
    T.gemm_v0(q_l1, k_l1, s_l0, transpose_B=True, init=True)
    T.copy(s_l0, s_ub)
    for i, j in T.Parallel(H, BI):
        s_ub[i, j] = s_ub[i, j] * ks_ub[j, 0]
    T.copy(s_ub, p_ub)
    T.copy(p_ub, p_l1)
    T.gemm_v0(p_l1, v_l1, o_l0, init=True)
    T.copy(o_l0, o_ub)
    T.copy(o_ub, Out[cid * H, 0])


@T.prim_func
def gather_kernel(Q: T.Tensor((BLOCKS * H, D + DT), T.float16),
                  K: T.Tensor((SKV, D + DT), T.float16), KS: T.Tensor((SKV, 1), T.float32),
                  V: T.Tensor((SKV, D), T.float16), Idx: T.Tensor((BLOCKS, BI), T.int32),
                  Out: T.Tensor((BLOCKS * H, D), T.float32)):
    with T.Kernel(BLOCKS, is_npu=True, threads=2) as (cid):
        gathered_scores(Q, K, KS, V, Idx, Out, cid)


def gather_reference(q, k, ks, v, idx):
    out = np.zeros((BLOCKS * H, D))
    for b in range(BLOCKS):
        rows = idx[b]
        s = f64(q[b * H:(b + 1) * H]) @ f64(k[rows]).T * f64(ks[rows, 0])[None, :]
        s = s.astype(np.float16).astype(np.float64)  # handed back to the cube in fp16
        out[b * H:(b + 1) * H] = s @ f64(v[rows])
    return out


def ub_shapes(kernel):
    ir = kernel.compilation.stages["split_cores"]
    return {s.buffer.name: s.buffer.shape for s in walk_statements(ir.body)
            if isinstance(s, Alloc) and s.buffer.scope == "UB"}


@pytest.mark.parametrize("chip", ["ascend910b", "ascend950"])
def test_score_rows_split_though_staging_tiles_outnumber_them(target, chip):
    rng = np.random.default_rng(5)
    q = rand((BLOCKS * H, D + DT), "float16", 1, 0.5)
    k = rand((SKV, D + DT), "float16", 2, 0.5)
    ks = rand((SKV, 1), "float32", 3)
    v = rand((SKV, D), "float16", 4)
    idx = np.stack([rng.choice(SKV, BI, replace=False) for _ in range(BLOCKS)]).astype(np.int32)
    want = gather_reference(q, k, ks, v, idx)
    kernel = tilelang_mini.compile(gather_kernel, out_idx=[5], target=target, chip=chip)
    shapes = ub_shapes(kernel)
    for name in ("s_ub", "p_ub", "o_ub"):
        assert shapes[name][0] == H // 2, (name, shapes[name])
    for name in ("k_ub", "kt_ub", "v_ub", "ks_ub"):
        assert shapes[name][0] == BI, (name, shapes[name])  # whole: staging, not rows
    close(kernel(q, k, ks, v, idx), want, "float16", BI)
    if target == "numpy":
        close(kernel.simulate(q, k, ks, v, idx)[0], want, "float16", BI)


def test_a_bias_as_long_as_the_block_is_not_a_row_tile(target):
    M, N, bm = 96, 32, 32
    x, b, s = rand((M, N), seed=6), rand((N,), seed=7), np.array([1.5], np.float32)
    kernel = tilelang_mini.compile(scale_bias(M, N, bm), out_idx=[3], target=target)
    shapes = ub_shapes(kernel)
    assert shapes["x"] == (bm // 2, N), shapes
    assert shapes["b"] == (N,), shapes  # whole on each AIV: every row reads all of it
    want = f64(x) * 1.5 + f64(b)
    close(kernel(x, b, s), want)
    if target == "numpy":
        close(kernel.simulate(x, b, s)[0], want)


@pytest.mark.parametrize("reverse", [True, False])
def test_gm_written_then_read_at_other_rows_is_not_split(target, reverse):
    """A block writes its rows of a scratch tensor, then reads them back in another order
    (`ws[bx * 8 + 7 - i, j]`). Split by rows, AIV 0 would read rows AIV 1 wrote with no order
    between the two vector cores (before: wrong numbers on both targets, a RaceError in the
    simulator); such work is not split. Read back at the rows it wrote, it still splits."""
    M, N, bm = 16, 32, 8

    @T.prim_func
    def main(x: T.Tensor((M, N), T.float32), ws: T.Tensor((M, N), T.float32),
             y: T.Tensor((M, N), T.float32)):
        with T.Kernel(M // bm, threads=128) as bx:
            t = T.alloc_fragment((bm, N), T.float32)
            u = T.alloc_fragment((bm, N), T.float32)
            T.copy(x[bx * bm, 0], t)
            for i, j in T.Parallel(bm, N):
                t[i, j] = t[i, j] * 2.0
            T.copy(t, ws[bx * bm, 0])
            if reverse:
                for i, j in T.Parallel(bm, N):
                    u[i, j] = ws[bx * bm + bm - 1 - i, j] + 1.0
            else:
                T.copy(ws[bx * bm, 0], u)
                for i, j in T.Parallel(bm, N):
                    u[i, j] = u[i, j] + 1.0
            T.copy(u, y[bx * bm, 0])

    kernel = tilelang_mini.compile(main, out_idx=[-1], target=target)
    x = rand((M, N), "float32", 3)
    rows = 2 * f64(x).reshape(M // bm, bm, N)
    want = (rows[:, ::-1] if reverse else rows).reshape(M, N) + 1
    lowered = kernel.get_ir(list(kernel.compilation.stages)[-1])
    assert ("vid * 4" in lowered) == (not reverse)
    for run in (kernel, lambda *a: kernel.simulate(*a)[0]):
        close(run(x, np.zeros((M, N), np.float32)), want, "float32")
