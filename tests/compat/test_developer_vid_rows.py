"""tilelang-ascend's developer mode without vid: `with T.Kernel(n, is_npu=True, threads=2) as
(cid):` leaves the vector work of the block to the compiler, which halves each vector tile's
rows over the two AIVs (upstream's vid reduction). A kernel whose cube and vector statements
meet at on-chip hand-offs read before they are written (the gathered key tile the gemm reads at
the top of the loop, sparse_flash_attn_developer_vid_reduce's shape) becomes two concurrent
programs (AUTO_CV_COMBINE); its vector program used to run every row on AIV 0 alone, so a
block of 128 heads overflowed the UB of one AIV. The same kernel in program order (split_cores
lowers it) ran its vector work on AIV 0 too: the gather's UB -> L1 staging writes global memory
from a tile with no rows to split. Now each AIV holds and computes half the
rows; the gather that stages key rows through UB into L1 (no row of a vector tile) is AIV 0's.
Both targets and the simulator, against a float64 NumPy reference."""
import numpy as np
import pytest

import tilelang_mini
import tilelang_mini.language as T
from tilelang_mini.ir.nodes import Alloc, Copy, Scope, Var, walk, walk_statements

from util import close, f64, rand

H, D, BI, NI, BLOCKS, SKV = 16, 32, 16, 2, 2, 64
SCALE = D ** -0.5


@tilelang_mini.jit(out_idx=[3])
def gathered_attention(concurrent: bool):
    @T.prim_func
    def main(Q: T.Tensor((BLOCKS * H, D), T.float16), K: T.Tensor((SKV, D), T.float16),
             Idx: T.Tensor((BLOCKS, NI * BI), T.int32),
             Out: T.Tensor((BLOCKS * H, D), T.float16)):
        with T.Kernel(BLOCKS, threads=2, is_npu=True) as (cid):
            q_l1 = T.alloc_shared([H, D], T.float16)
            k_l1 = T.alloc_shared([BI, D], T.float16)
            p_l1 = T.alloc_shared([H, BI], T.float16)
            s_l0c = T.alloc_fragment([H, BI], "float")
            o_l0c = T.alloc_fragment([H, D], "float")
            idx_ub = T.alloc_shared([BI], T.int32)
            k_ub = T.alloc_shared([D], T.float16)
            s_raw = T.alloc_shared([H, BI], "float")
            s_ub = T.alloc_shared([H, BI], "float")
            p_ub = T.alloc_shared([H, BI], T.float16)
            o_ub = T.alloc_shared([H, D], "float")
            acc = T.alloc_shared([H, D], "float")
            m = T.alloc_shared([H], "float")
            total = T.alloc_shared([H], "float")
            part = T.alloc_shared([H], "float")
            out_ub = T.alloc_shared([H, D], T.float16)

            T.copy(Q[cid * H:(cid + 1) * H, :], q_l1)
            T.tile.fill(acc, 0.0)
            T.tile.fill(total, 0.0)
            for it in T.serial(NI):
                if concurrent:  # the cube reads k_l1 and p_l1 before this iteration writes them
                    T.gemm_v0(q_l1, k_l1, s_l0c, transpose_B=True, init=True)
                    T.copy(s_l0c, s_raw)
                    T.gemm_v0(p_l1, k_l1, o_l0c, init=True)
                    T.copy(o_l0c, o_ub)
                T.copy(Idx[cid, it * BI:(it + 1) * BI], idx_ub)
                for r in range(BI):
                    T.copy(K[idx_ub[r], :], k_ub)
                    T.copy(k_ub, k_l1[r, :])
                if not concurrent:
                    T.gemm_v0(q_l1, k_l1, s_l0c, transpose_B=True, init=True)
                    T.copy(s_l0c, s_raw)
                for i, j in T.Parallel(H, BI):
                    s_ub[i, j] = s_raw[i, j] * SCALE
                T.reduce_max(s_ub, m, dim=-1)
                for i, j in T.Parallel(H, BI):
                    s_ub[i, j] = T.exp(s_ub[i, j] - m[i])
                T.reduce_sum(s_ub, part, dim=-1)
                for i in T.Parallel(H):
                    total[i] += part[i]
                T.copy(s_ub, p_ub)
                T.copy(p_ub, p_l1)
                if not concurrent:
                    T.gemm_v0(p_l1, k_l1, o_l0c, init=True)
                    T.copy(o_l0c, o_ub)
                for i, j in T.Parallel(H, D):
                    acc[i, j] += o_ub[i, j]
            for i, j in T.Parallel(H, D):
                acc[i, j] = acc[i, j] / total[i]
            T.copy(acc, out_ub)
            T.copy(out_ub, Out[cid * H:(cid + 1) * H, :])
    return main


def reference(q, k, idx):
    """Per iteration: the gathered keys, their scores' row softmax numerators (each iteration
    normalised by its own row max, as the kernel does), summed values; divided by the sums."""
    out = np.zeros((BLOCKS * H, D))
    for b in range(BLOCKS):
        acc, total = np.zeros((H, D)), np.zeros(H)
        for it in range(NI):
            kk = f64(k)[idx[b, it * BI:(it + 1) * BI]]
            s = f64(q)[b * H:(b + 1) * H] @ kk.T * SCALE
            p = np.exp(s - s.max(axis=1, keepdims=True))
            total += p.sum(axis=1)
            acc += p @ kk
        out[b * H:(b + 1) * H] = acc / total[:, None]
    return out


def inputs():
    rng = np.random.default_rng(3)
    q = rand((BLOCKS * H, D), "float16", seed=1)
    k = rand((SKV, D), "float16", seed=2)
    idx = np.stack([rng.choice(SKV, NI * BI, replace=False) for _ in range(BLOCKS)])
    return q, k, idx.astype(np.int32)


@pytest.mark.parametrize("concurrent", [True, False])
@pytest.mark.parametrize("target", ["numpy", "llvm"])
def test_rows_split_between_aivs_without_vid(target, concurrent, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    q, k, idx = inputs()
    want = reference(q, k, idx)
    kern = gathered_attention(concurrent)
    close(kern(q, k, idx), want, "float16", NI * BI)
    if target == "numpy":
        out, _report = kern.simulate(q, k, idx)
        close(out, want, "float16", NI * BI)


@pytest.mark.parametrize("concurrent", [True, False])
def test_each_aiv_holds_half_the_rows(concurrent):
    kern = gathered_attention(concurrent)
    ir = kern.compilation.stages["split_cores"]
    assert ir.grid_vars[1] == "vid"
    shapes = {s.buffer.name: s.buffer.shape for s in walk_statements(ir.body)
              if isinstance(s, Alloc) and s.buffer.scope == "UB"}
    for name in ("s_raw", "s_ub", "p_ub", "o_ub", "acc", "out_ub"):
        assert shapes[name][0] == H // 2, (name, shapes[name])
    for name in ("m", "total", "part"):
        assert shapes[name] == (H // 2,), (name, shapes[name])
    assert shapes["idx_ub"] == (BI,) and shapes["k_ub"] == (D,)  # whole: the gather's
    vector = [s for s in walk_statements(ir.body) if isinstance(s, Scope) and s.core == "V"]
    copies = [c for v in vector for c in walk_statements(v.body) if isinstance(c, Copy)]

    def reads_vid(region):
        return any(isinstance(n, Var) and n.name == "vid" for n in walk(region))
    # the hand-offs from the cube and the output: this AIV's H // 2 rows, at vid * H // 2
    row_copies = [c for c in copies if c.dst.buffer.name in ("s_raw", "o_ub")] + [
        c for c in copies if c.dst.buffer.name in ("Out", "p_l1_cv") or c.src.buffer.name ==
        "p_ub"]
    assert len(row_copies) >= 3
    for c in row_copies:
        gm = c.src if c.dst.buffer.scope == "UB" else c.dst
        assert gm.extent[0] == H // 2 and reads_vid(gm), c
