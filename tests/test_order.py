"""Program order as an interleaving of a block's cores: compiler-made code always is one; a
hand-written kernel that is not is run as coroutines by every target, never computed wrongly."""
import numpy as np
import pytest

import kernels
import tilelang_mini
import tilelang_mini.language as T
from tilelang_mini.runtime.backends import available_targets
from kernels import load_for


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
def test_llvm_runs_cores_as_coroutines_when_program_order_breaks_a_flag():
    x = np.random.default_rng(0).standard_normal((16, 16)).astype(np.float32)
    kernel = tilelang_mini.compile(cube_waits_first(), out_idx=[-1], target="llvm")
    assert kernel.artifact.cores
    np.testing.assert_array_equal(kernel(x), x)


def cube_then_vector(gate_on_block: bool):
    """The cube signals the vector cores, which copy X to Y after the wait: program order
    satisfies it. With `gate_on_block` the cube signals from either branch of an `if cid < 1`
    (every block still signals, but the order is no longer proven from block 0 alone)."""
    @T.prim_func
    def k(X: T.Tensor((32, 16), "float32"), Y: T.Tensor((32, 16), "float32")):
        with T.Kernel(2, is_npu=True) as (cid, vid):
            y = T.alloc_ub((8, 16), "float32")
            with T.Scope("C"):
                if gate_on_block:
                    if cid < 1:
                        T.set_cross_flag("FIX", 1)
                    else:
                        T.set_cross_flag("FIX", 1)
                else:
                    T.set_cross_flag("FIX", 1)
            with T.Scope("V"):
                T.wait_cross_flag("FIX", 1)
                load_for("MTE3", X[cid * 16 + vid * 8, 0], y)
                T.copy(y, Y[cid * 16 + vid * 8, 0])
    return k


def test_which_kernels_the_numpy_target_runs_in_program_order():
    """Proven orders run as one ordered pass (run_grid), the others as coroutines; both give
    the kernel's values."""
    from tilelang_mini.semantics.order import program_order_is_valid
    x = np.random.default_rng(1).standard_normal((32, 16)).astype(np.float32)
    cases = ((cube_waits_first(), False), (cube_then_vector(False), True),
             (cube_then_vector(True), False))
    for prim, proven in cases:
        kernel = tilelang_mini.compile(prim, out_idx=[-1], target="numpy")
        assert program_order_is_valid(kernel.ir) is proven
        assert kernel.artifact.cross_core is (not proven)
        want = x if prim.ir.params[0].shape == (32, 16) else x[:16]
        np.testing.assert_array_equal(kernel(np.ascontiguousarray(want)), want)


@pytest.mark.skipif("llvm" not in available_targets(), reason="llvm backend not installed")
def test_which_kernels_the_llvm_target_runs_in_program_order():
    """The same split on llvm: one function over the blocks when the order is proven, one
    function per core kind run as coroutines otherwise; both give the kernel's values."""
    x = np.random.default_rng(2).standard_normal((32, 16)).astype(np.float32)
    for prim, proven in ((cube_then_vector(False), True), (cube_then_vector(True), False)):
        kernel = tilelang_mini.compile(prim, out_idx=[-1], target="llvm")
        assert kernel.artifact.cores is (not proven)
        np.testing.assert_array_equal(kernel(x), x)
