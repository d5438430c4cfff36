"""tilelang-ascend's TL_ASCEND_AUTO_SYNC on an expert kernel that also places flags and
barriers of its own (the xllm fused_gdn_gating and moe_token_unpermute examples: a
`pipe_barrier("v")` between a vector op and the MTE3 copy of its result, or none at all between
an MTE2 copy and the op reading it): with the pass config the compiler places the flags between
the pipes of each core (the kernel's own intra-core ones are replaced); without it the kernel's
flags are taken as written and the unordered hand-off is a located race. Both targets and the
simulator, against float64 NumPy references."""
import numpy as np
import pytest

import tilelang_mini as tilelang
import tilelang_mini.language as T
from tilelang_mini.errors import RaceError, TileLangMiniError

from util import close, f64, rand

AUTO = {tilelang.PassConfigKey.TL_ASCEND_AUTO_SYNC: True}


def exp_rows(n, rows):
    @T.prim_func
    def main(X: T.Tensor((2 * rows, n), "float32"), Y: T.Tensor((2 * rows, n), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_ub((rows, n), "float32")
            y = T.alloc_ub((rows, n), "float32")
            with T.Scope("V"):
                for r in T.serial(2):
                    T.copy(X[vid * rows + r * 0, 0], x)      # no flag before the exp
                    T.tile.exp(y, x)
                    T.tile.mul(y, y, 0.5)
                    T.pipe_barrier("v")                       # orders V only, not V -> MTE3
                    T.copy(y, Y[vid * rows, 0])
                    T.barrier_all()
    return main


@pytest.mark.parametrize("target", ["numpy", "llvm"])
def test_auto_sync_places_the_missing_flags(target):
    kern = tilelang.compile(exp_rows(64, 8), out_idx=[1], target=target, pass_configs=AUTO)
    x = rand((16, 64), "float32", 3)
    want = np.exp(f64(x)) * 0.5
    close(np.asarray(kern(x)), want)
    if target == "numpy":
        got, _ = kern.simulate(x)
        close(np.asarray(got), want)


def test_auto_sync_from_jit_pass_configs():
    @tilelang.jit(out_idx=[1], pass_configs={"tl.ascend_auto_sync": True})
    def factory(n):
        return exp_rows(n, 8)

    x = rand((16, 32), "float32", 4)
    close(np.asarray(factory(32)(x)), np.exp(f64(x)) * 0.5)


def test_without_auto_sync_the_kernel_flags_are_checked():
    with pytest.raises(TileLangMiniError) as e:
        tilelang.compile(exp_rows(64, 8), out_idx=[1], target="numpy")
    assert "race" in str(e.value) and "test_auto_sync_own_flags.py:" in str(e.value), str(e.value)
