"""tilelang-ascend spellings from its xllm split_qkv_rmsnorm_mrope kernel: the one-statement
`with T.If(c), T.Then(): ...` (an `if c:` without else), and `T.tile.cast(dst, src, mode,
count)` with tiles of different sizes (the first `count` elements, each tile flattened
row-major). Both targets and the simulator, against float64 NumPy references."""
import numpy as np
import pytest

import tilelang_mini as tilelang
import tilelang_mini.language as T

from util import close, f64, rand


def kernel():
    @T.prim_func
    def main(X: T.Tensor((4, 256), "float16"), Y: T.Tensor((4, 64), "float32")):
        with T.Kernel(2, is_npu=True) as (cid, vid):
            wide = T.alloc_ub((1, 256), "float16")
            narrow = T.alloc_ub((1, 64), "float32")
            with T.Scope("V"):
                row = cid * 2 + vid
                T.copy(X[row, 0], wide)
                T.tile.cast(narrow, wide, "CAST_NONE", 64)       # the first 64 of 256
                with T.If(row > 1), T.Then():
                    T.tile.mul(narrow, narrow, 2.0)
                T.copy(narrow, Y[row, 0])
    return main


@pytest.mark.parametrize("target", ["numpy", "llvm"])
def test_if_then_statement_and_prefix_cast(target):
    x = rand((4, 256), "float16", 21)
    want = f64(x)[:, :64] * np.array([1, 1, 2, 2])[:, None]
    k = tilelang.compile(kernel(), out_idx=[1], target=target)
    close(np.asarray(k(x)), want, "float16")
    if target == "numpy":
        close(np.asarray(k.simulate(x)[0]), want, "float16")
