"""Program order as an interleaving of a block's cores: compiler-made code always is one; a
hand-written kernel that is not is run as coroutines by numpy and rejected by llvm, never
computed wrongly."""
import numpy as np
import pytest

import kernels
import tilelang_mini
import tilelang_mini.language as T
from tilelang_mini.runtime.backends import available_targets


def cube_waits_first():
    @T.prim_func
    def k(X: T.Tensor((16, 16), "float32"), Y: T.Tensor((16, 16), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            with T.Scope("C"):
                T.wait_cross_flag("MTE2", 0)  # WAIT
            with T.Scope("V"):
                x = T.alloc_ub((8, 16), "float32")
                kernels.ub_round_trip(X, Y, x, vid * 8)
                T.set_cross_flag("MTE3", 0)
    return k


def test_numpy_runs_cores_as_coroutines():
    x = np.random.default_rng(0).standard_normal((16, 16)).astype(np.float32)
    kernel = tilelang_mini.compile(cube_waits_first(), out_idx=[-1], target="numpy")
    np.testing.assert_array_equal(kernel(x), x)


@pytest.mark.skipif("llvm" not in available_targets(), reason="llvm backend not installed")
def test_llvm_rejects_an_order_that_breaks_a_cross_core_flag():
    with pytest.raises(tilelang_mini.CompileError) as err:
        tilelang_mini.compile(cube_waits_first(), out_idx=[-1], target="llvm")
    assert "before any matching set_cross_flag" in str(err.value)
    assert err.value.loc.file.endswith("test_order.py") and "# WAIT" in str(err.value)
