"""Forms of tilelang-ascend's moe_token_permute (expert mode, target="pto"): a copy whose GM row
is a UB scalar the scalar unit stores (`wp_ub[0] = ...`, read as the copy is dispatched), both
vector cores writing the same values to the same GM (the work not split by vid), and flag ids
the PTO code generator ignores. Both targets and the simulator, against NumPy references."""
import numpy as np
import pytest

import tilelang_mini as tilelang
import tilelang_mini.language as T

from util import close, f64, rand

R, W = 8, 32


def scatter_rows(split_by_vid=True):
    """Row r of X goes to row P[r] of Y (of Y[vid] when `split_by_vid`, else both AIVs write
    Y[0] alike). The row index is stored by the scalar unit into a one-element UB tile right
    before each copy: the copy-outs run after the next stores, but use the index as dispatched."""
    @T.prim_func
    def main(X: T.Tensor((R, W), "float32"), P: T.Tensor((R,), "int32"),
             Y: T.Tensor((2, R, W), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_ub((R, W), "float32")
            p = T.alloc_ub((R,), "int32")
            pos = T.alloc_ub((1,), "int32")
            with T.Scope("V"):
                T.copy(X[0, 0], x)
                T.copy(P[0], p)
                T.set_flag("mte2", "s", 0)
                T.wait_flag("mte2", "s", 0)
                T.set_flag("mte2", "mte3", 0)
                T.wait_flag("mte2", "mte3", 0)
                for r in T.serial(R):
                    pos[0] = p[r]
                    T.copy(x[r, :], Y[vid if split_by_vid else 0, pos[0], 0])
    return main


@pytest.mark.parametrize("split_by_vid", [True, False])
def test_copy_row_picked_by_a_scalar_store(target, split_by_vid):
    x = rand((R, W), seed=3)
    perm = np.random.default_rng(4).permutation(R).astype(np.int32)
    want = np.zeros((2, R, W))
    for v in (0, 1) if split_by_vid else (0,):
        want[v, perm] = f64(x)
    k = tilelang.compile(scatter_rows(split_by_vid), out_idx=[2], target=target)
    close(k(x, perm), want)
    close(k.simulate(x, perm)[0], want)


def doubled(per_vid_input=False):
    """Each AIV loads X[cid] (or its own row X[2 * cid + vid]), doubles it and writes Y[cid]:
    without vid in the data, both write the same bytes, in either order (no race); with it, the
    two writes differ and nothing orders them (a located race)."""
    @T.prim_func
    def main(X: T.Tensor((4, W), "float32"), Y: T.Tensor((2, W), "float32")):
        with T.Kernel(2, is_npu=True) as (cid, vid):
            x = T.alloc_ub((1, W), "float32")
            with T.Scope("V"):
                T.copy(X[2 * cid + vid if per_vid_input else cid, 0], x)
                T.set_flag("mte2", "v", 0)
                T.wait_flag("mte2", "v", 0)
                T.tile.mul(x, x, 2.0)
                T.set_flag("v", "mte3", 0)
                T.wait_flag("v", "mte3", 0)
                T.copy(x, Y[cid, 0])
    return main


def test_both_aivs_writing_the_same_values_is_no_race(target):
    x = rand((4, W), seed=8)
    k = tilelang.compile(doubled(), out_idx=[1], target=target)
    close(k(x), 2 * f64(x[:2]))
    close(k.simulate(x)[0], 2 * f64(x[:2]))
    with pytest.raises(tilelang.CompileError, match="race on Y: V0.MTE3 .* V1.MTE3") as e:
        tilelang.compile(doubled(per_vid_input=True), out_idx=[1], target=target)
    assert "T.copy(x, Y[cid, 0])" in open(__file__).read().splitlines()[e.value.loc.line - 1]


def pto_flags():
    """moe_token_permute's extra flag pair set_flag/wait_flag(MTE2, MTE3, 10): an id the PTO
    templates skip (they act on 0-7 only); the kernel's own flag 0 orders the copies."""
    @T.prim_func
    def main(X: T.Tensor((2, W), "float32"), Y: T.Tensor((2, W), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_ub((2, W), "float32")
            with T.Scope("V"):
                T.copy(X[0, 0], x)
                T.set_flag("mte2", "mte3", 10)
                T.set_flag("mte2", "mte3", 0)
                T.wait_flag("mte2", "mte3", 0)
                T.wait_flag("mte2", "mte3", 10)
                T.copy(x, Y[0, 0])
    return main


def test_pto_target_skips_flag_ids_past_seven(target, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    x = rand((2, W), seed=9)
    k = tilelang.jit(out_idx=[1], target="pto")(pto_flags)()
    close(k(x), f64(x))
    close(k.simulate(x)[0], f64(x))
    with pytest.raises(tilelang.CompileError, match="event id 10 is out of range"):
        tilelang.jit(out_idx=[1])(pto_flags)()
