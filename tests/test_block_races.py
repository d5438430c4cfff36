"""`simulate` reports races between blocks on global tensors (sim/block_races.py):
two blocks that write common elements with different values, or one that reads elements
another writes where the value read depends on which block runs first. The CPU targets run
blocks in an order (or on threads) and cannot tell; the hardware runs them concurrently.
Same-value writes, atomic adds and accesses whose box over-approximates the elements touched
(a strided or guarded map: analysis.exact_boxes) are not reported."""
import numpy as np
import pytest

import tilelang_mini
import tilelang_mini.language as T
from tilelang_mini.errors import RaceError
from tilelang_mini.ir.analysis import exact_boxes
from tilelang_mini.ir.nodes import For, walk_statements

CHIPS = ["ascend910b", "ascend950"]
RNG = np.random.default_rng(12)


def overlapping_rows(same: bool):
    """Every block writes Y[0:8]: row 0 of X (same values) or its own row (different ones)."""
    @T.prim_func
    def main(X: T.Tensor((4, 8), "float32"), Y: T.Tensor((8,), "float32")):
        with T.Kernel(4) as (bx,):
            x = T.alloc_fragment((8,), "float32")
            T.copy(X[0 if same else bx, 0], x)
            T.copy(x, Y[0])
    return main


@pytest.mark.parametrize("chip", CHIPS)
def test_blocks_writing_different_values_to_common_elements_race(chip):
    x = RNG.standard_normal((4, 8)).astype(np.float32)
    kernel = tilelang_mini.compile(overlapping_rows(False), out_idx=[-1], chip=chip)
    with pytest.raises(RaceError) as err:
        kernel.simulate(x)
    msg = str(err.value)
    assert "race between blocks on global buffer Y" in msg and "different values" in msg
    assert "block 0" in msg and "block 1" in msg
    assert err.value.loc is not None and err.value.loc.line > 0


@pytest.mark.parametrize("chip", CHIPS)
def test_blocks_writing_the_same_values_do_not_race(chip, target):
    x = RNG.standard_normal((4, 8)).astype(np.float32)
    y, _ = tilelang_mini.compile(overlapping_rows(True), out_idx=[-1], chip=chip).simulate(x)
    np.testing.assert_array_equal(y, x[0])
    out = tilelang_mini.compile(overlapping_rows(True), out_idx=[-1], target=target)(x)
    np.testing.assert_array_equal(out, x[0])


def chain():
    """Block b reads row b of Y and writes row b + 1: what block b reads depends on whether
    block b - 1 ran before it."""
    @T.prim_func
    def main(Y: T.Tensor((5, 8), "float32")):
        with T.Kernel(4) as (bx,):
            t = T.alloc_fragment((8,), "float32")
            T.copy(Y[bx, 0], t)
            for i in T.Parallel(8):
                t[i] = t[i] + 1.0
            T.copy(t, Y[bx + 1, 0])
    return main


def test_a_read_that_depends_on_block_order_races():
    y = np.zeros((5, 8), np.float32)
    with pytest.raises(RaceError) as err:
        tilelang_mini.compile(chain()).simulate(y)
    assert "race between blocks on global buffer Y" in str(err.value)
    assert "the read sees the write or not" in str(err.value)


def atomic_sum(blocks=4, n=16):
    @T.prim_func
    def main(X: T.Tensor((blocks, n), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(blocks) as (bx,):
            x = T.alloc_fragment((n,), "float32")
            T.copy(X[bx, 0], x)
            T.atomic_add(Y[0:n], x)
    return main


def test_atomic_adds_of_all_blocks_do_not_race(target):
    x = RNG.standard_normal((4, 16)).astype(np.float32)
    want = x.astype(np.float64).sum(0)
    y = np.zeros(16, np.float32)
    tilelang_mini.compile(atomic_sum(), target=target)(x, y)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)
    y = np.zeros(16, np.float32)
    tilelang_mini.compile(atomic_sum()).simulate(x, y)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)


def interleaved(blocks=2, n=8):
    """Block b writes Y[2 * i + b]: the blocks' bounding boxes overlap, their elements do not."""
    @T.prim_func
    def main(X: T.Tensor((blocks * n,), "float32"), Y: T.Tensor((blocks * n,), "float32")):
        with T.Kernel(blocks) as (bx,):
            x = T.alloc_fragment((n,), "float32")
            for i in T.Parallel(n):
                x[i] = X[2 * i + bx] * 2.0
            for i in T.Parallel(n):
                Y[2 * i + bx] = x[i]
    return main


def test_strided_stores_of_different_blocks_are_not_a_race(target):
    x = RNG.standard_normal(16).astype(np.float32)
    np.testing.assert_allclose(tilelang_mini.compile(interleaved(), out_idx=[-1],
                                                     target=target)(x), 2 * x.astype(np.float64))
    for chip in CHIPS:
        y, _ = tilelang_mini.compile(interleaved(), out_idx=[-1], chip=chip).simulate(x)
        np.testing.assert_allclose(y, 2 * x.astype(np.float64))


def _maps(prim):
    ir = tilelang_mini.compile(prim, out_idx=[-1]).compilation.stages["frontend"]
    return [s for s in walk_statements(ir.body) if isinstance(s, For) and s.kind == "parallel"]


def test_exact_boxes_of_maps():
    """Strided indices and guarded stores are not exact; shifted indices and whole regions are."""
    @T.prim_func
    def main(X: T.Tensor((16,), "float32"), M: T.Tensor((8,), "int32"),
             Y: T.Tensor((16,), "float32")):
        with T.Kernel(2) as (bx,):
            m = T.alloc_fragment((8,), "int32")
            T.copy(M[0], m)
            for i in T.Parallel(8):
                Y[bx * 8 + i] = X[2 * i]
            for i in T.Parallel(8):
                if m[i] > 0:
                    Y[i + bx * 8] = 1.0
    plain, guarded = _maps(main)[:2]
    # operands: reads first, then the store
    assert exact_boxes(plain) == [False, True]       # X[2 * i] strided; Y[bx * 8 + i] exact
    flags = exact_boxes(guarded)
    assert flags[0] is True and flags[-1] is False   # the condition's m[i]; the guarded store
