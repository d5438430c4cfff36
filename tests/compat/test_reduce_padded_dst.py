"""A reduce into a destination longer than its result (tilelang-ascend pads row statistics to
32 bytes: `ub_len = max(8, v_block)`, then `T.reduce_max(acc_s_ub, m_i, dim=-1)`): the result
lands in the leading part and the rest is left as it was, as on the device; written with the
leading part explicitly (`m[0:2]`) it is the same (numpy, llvm, simulate vs float64)."""
import numpy as np
import pytest

import tilelang_mini as tilelang
import tilelang_mini.language as T
from tilelang_mini.errors import CompileError

from util import close, f64, rand


def row_max(leading, rows=2, length=8):
    """Y = the row maxima of X (rows, 64) reduced into a UB vector of `length` filled with -1
    first (into its leading `rows` elements, written `m[0:rows]`, when `leading`)."""
    @T.prim_func
    def main(X: T.Tensor((rows, 64), "float32"), Y: T.Tensor((length,), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_ub((rows, 64), "float32")
            m = T.alloc_ub((length,), "float32")
            T.copy(X[0, 0], x)
            T.tile.fill(m, -1.0)
            if leading:
                T.reduce_max(x, m[0:rows], dim=-1)
            else:
                T.reduce_max(x, m, dim=-1)
            T.copy(m, Y[0])

    return main


@pytest.mark.parametrize("leading, seed", [(False, 7), (True, 7), (True, 5)])
def test_longer_destination_takes_the_leading_part(target, leading, seed):
    kernel = tilelang.compile(row_max(leading), out_idx=[1], target=target)
    x = rand((2, 64), "float32", seed)
    want = np.full(8, -1.0)
    want[:2] = f64(x).max(1)
    close(kernel(x), want)
    close(kernel.simulate(x)[0], want)


def test_shorter_destination_is_located():
    with pytest.raises(CompileError) as e:
        tilelang.compile(row_max(False, rows=4, length=2), out_idx=[1])
    assert "gives (4,); the destination is (2,)" in str(e.value)
