"""check_sync across blocks (check_blocks): blocks run concurrently with nothing between them, so
an expert kernel whose blocks write common elements of a global tensor (or one reads what
another writes) does not compile: a located error naming both instructions. Blocks with their
own parts of the tensor, atomic accumulation, and data-dependent indices compile and run."""
# No `from __future__ import annotations`: kernels need their T.Tensor annotations as objects.
import numpy as np
import pytest

import tilelang_mini
import tilelang_mini.language as T
from markers import Marked
from tilelang_mini import CompileError

MARKED = Marked(__file__)
R, N, NX, NY = 16, 32, 2, 3  # rows and columns per block, blocks along columns and rows


def tiles(mode: str):
    """Y = X + 1 in (R, N) tiles, block cid = (bx, by) with bx = cid // NX, by = cid % NX;
    `mode` spells the output index: right, or missing bx / by (blocks collide)."""
    @T.prim_func
    def k(X: T.Tensor((NY * R, NX * N), "float32"), Y: T.Tensor((NY * R, NX * N), "float32")):
        with T.Kernel(NY * NX, is_npu=True) as (cid, vid):
            bx = cid // NX
            by = cid % NX
            x = T.alloc_ub((R // 2, N), "float32")
            with T.Scope("V"):
                T.copy(X[bx * R + vid * (R // 2), by * N], x)  # AT:load
                T.set_flag("MTE2", "V", 0)
                T.wait_flag("MTE2", "V", 0)
                T.tile.add(x, x, 1.0)
                T.set_flag("V", "MTE3", 0)
                T.wait_flag("V", "MTE3", 0)
                if mode == "right":
                    T.copy(x, Y[bx * R + vid * (R // 2), by * N])
                if mode == "no_bx":
                    T.copy(x, Y[vid * (R // 2), by * N])  # AT:no_bx
                if mode == "no_by":
                    T.copy(x, Y[bx * R + vid * (R // 2), 0])  # AT:no_by
                if mode == "in_place":  # writes the next block's rows, which that block reads
                    T.copy(x, X[(bx + 1) * R + vid * (R // 2), by * N])  # AT:in_place
    return k


def test_blocks_with_their_own_tiles_compile_and_run(target):
    x = np.random.default_rng(0).standard_normal((NY * R, NX * N)).astype(np.float32)
    kernel = tilelang_mini.compile(tiles("right"), out_idx=[-1], target=target)
    np.testing.assert_allclose(kernel(x), x.astype(np.float64) + 1.0, rtol=1e-6, atol=1e-6)
    if target == "numpy":
        got, _ = kernel.simulate(x)
        np.testing.assert_allclose(got, x.astype(np.float64) + 1.0, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("mode,tag,what", [
    ("no_bx", "no_bx", "writes it"), ("no_by", "no_by", "writes it"),
    ("in_place", "load", "reads it")])
def test_blocks_touching_common_elements_are_a_located_race(mode, tag, what):
    with pytest.raises(CompileError) as info:
        tilelang_mini.compile(tiles(mode), out_idx=[-1])
    err = info.value
    MARKED.located(err, tag)
    assert "race between blocks" in err.message and what in err.message, err.message
    if mode == "in_place":  # located at the read, naming the other block's write
        assert f":{MARKED.line_of('in_place')}:" in err.message, err.message


def accumulate(atomic: bool, data_index: bool):
    """Every block adds its tile into one (R, N) output: atomically (commutes), or through an
    index read from a tensor (left to simulate: nothing known at compile time)."""
    @T.prim_func
    def k(X: T.Tensor((NY * R, N), "float32"), I: T.Tensor((NY,), "int32"),
          Y: T.Tensor((NY * R, N), "float32")):
        with T.Kernel(NY, is_npu=True) as (cid, vid):
            x = T.alloc_ub((R // 2, N), "float32")
            with T.Scope("V"):
                T.copy(X[cid * R + vid * (R // 2), 0], x)
                T.set_flag("MTE2", "MTE3", 0)
                T.wait_flag("MTE2", "MTE3", 0)
                if atomic:
                    T.atomic_add(Y[vid * (R // 2), 0], x)
                if data_index:
                    T.copy(x, Y[I[cid] * R + vid * (R // 2), 0])
    return k


@pytest.mark.parametrize("atomic,data_index", [(True, False), (False, True)])
def test_atomic_or_data_dependent_outputs_compile(atomic, data_index, target):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((NY * R, N)).astype(np.float32)
    perm = rng.permutation(NY).astype(np.int32)
    want = np.zeros((NY * R, N))
    for b in range(NY):
        tile = x[b * R:(b + 1) * R].astype(np.float64)
        if atomic:
            want[:R] += tile
        else:
            want[perm[b] * R:(perm[b] + 1) * R] = tile
    kernel = tilelang_mini.compile(accumulate(atomic, data_index), out_idx=[-1], target=target)
    np.testing.assert_allclose(kernel(x, perm), want, rtol=1e-5, atol=1e-5)
    if target == "numpy":
        got, _ = kernel.simulate(x, perm)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
