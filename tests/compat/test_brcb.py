"""tilelang-ascend's block broadcast and its row_expand experiments (xattention's softmax:
`T.tile.brcb_experiment(buf, m, rows // 8, 1, 8)` then `T.tile.row_expand_sub_experiment(s,
s, buf)` on 64-column slices), `T.set_cross_flag(pipe, flag, 2)`: both targets and the
simulator, against float64 NumPy references."""
import numpy as np
import pytest

import tilelang_mini as tilelang
import tilelang_mini.language as T

from util import close, f64, rand

R, N = 16, 128


def softmax_rows():
    """Row softmax of X written the xattention way: row max, brcb into 8-wide blocks,
    subtract on 64-column slices, exp, row sum, divide by a 1-D row vector through a tmp."""
    @T.prim_func
    def main(X: T.Tensor((2 * R, N), "float32"), Y: T.Tensor((2 * R, N), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            s = T.alloc_ub((R, N), "float32")
            m = T.alloc_ub((R, 1), "float32")
            l = T.alloc_ub((R,), "float32")
            blk = T.alloc_ub((R, 8), "float32")
            tmp = T.alloc_ub((R, 8), "float32")
            with T.Scope("V"):
                T.copy(X[vid * R, 0], s)
                T.set_flag("mte2", "v", 0)
                T.wait_flag("mte2", "v", 0)
                T.reduce_max(s, m, dim=-1)
                T.pipe_barrier("v")
                T.tile.brcb_experiment(blk, m, R // 8, 1, 8)
                T.pipe_barrier("v")
                for c in T.serial(N // 64):
                    T.tile.row_expand_sub_experiment(s[:, c * 64:(c + 1) * 64],
                                                     s[:, c * 64:(c + 1) * 64], blk)
                T.pipe_barrier("v")
                T.tile.exp(s, s)
                T.pipe_barrier("v")
                T.reduce_sum(s, l, dim=-1)
                T.pipe_barrier("v")
                T.tile.row_expand_div_experiment(s, s, l, tmp)
                T.set_flag("v", "mte3", 0)
                T.wait_flag("v", "mte3", 0)
                T.copy(s, Y[vid * R, 0])
    return main


@pytest.mark.parametrize("target", ["numpy", "llvm"])
def test_brcb_row_expand_softmax(target):
    x = rand((2 * R, N), seed=3)
    e = np.exp(f64(x) - f64(x).max(1, keepdims=True))
    want = e / e.sum(1, keepdims=True)
    k = tilelang.compile(softmax_rows(), out_idx=[1], target=target)
    close(np.asarray(k(x)), want, reduce_len=N)
    if target == "numpy":
        close(np.asarray(k.simulate(x)[0]), want, reduce_len=N)


def brcb_strided(blk_stride, rep_stride, dtype, mode=2):
    """Also hands over to the cube core with `T.set_cross_flag("MTE3", 1, mode)`."""
    per = 32 // np.dtype(dtype).itemsize
    @T.prim_func
    def main(S: T.Tensor((16,), dtype), D: T.Tensor((4 * 16 * per,), dtype)):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            src = T.alloc_ub((16,), dtype)
            dst = T.alloc_ub((4 * 16 * per,), dtype)
            with T.Scope("V"):
                T.tile.fill(dst, 0.0)
                T.copy(S, src)
                T.set_flag("mte2", "v", 0)
                T.wait_flag("mte2", "v", 0)
                T.tile.brcb_experiment(dst, src, 2, blk_stride, rep_stride)
                T.set_flag("v", "mte3", 0)
                T.wait_flag("v", "mte3", 0)
                with T.If(vid == 0), T.Then():
                    T.copy(dst, D)
                T.set_cross_flag("MTE3", 1, mode)
            with T.Scope("C"):
                T.wait_cross_flag(1)
    return main


@pytest.mark.parametrize("target", ["numpy", "llvm"])
@pytest.mark.parametrize("blk_stride, rep_stride, dtype", [(1, 8, "float32"), (2, 16, "float32"),
                                                           (1, 8, "float16")])
def test_brcb_strides(target, blk_stride, rep_stride, dtype):
    """Block k of repeat r lands at block r * rep_stride + k * blk_stride (32-byte blocks)."""
    per = 32 // np.dtype(dtype).itemsize
    s = rand((16,), dtype, 5)
    want = np.zeros(4 * 16 * per)
    for r in range(2):
        for kk in range(8):
            b = r * rep_stride + kk * blk_stride
            want[b * per:(b + 1) * per] = s[r * 8 + kk]
    k = tilelang.compile(brcb_strided(blk_stride, rep_stride, dtype), out_idx=[1], target=target)
    close(np.asarray(k(s)), want, dtype)
    if target == "numpy":
        close(np.asarray(k.simulate(s)[0]), want, dtype)


def test_cross_flag_modes():
    """Mode 2 (cube <-> vector cores of the group) is the flag modelled; another mode is a
    located error naming it."""
    with pytest.raises(tilelang.CompileError, match="set_cross_flag mode 0"):
        tilelang.compile(brcb_strided(1, 8, "float32", mode=0), out_idx=[1], target="numpy")
