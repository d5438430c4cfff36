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
from tilelang_mini.errors import RaceError
from kernels import load_for

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
                load_for("MTE3", X[cid * R + vid * (R // 2), 0], x)
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


def indexed(blocks: int, mode: str):
    """Each block copies its (R, N) tile of X to the rows of Y its mode names; modes that map two
    blocks other than block 0 onto common rows race (every pair of blocks is compared)."""
    @T.prim_func
    def k(X: T.Tensor((blocks * R, N), "float32"), Y: T.Tensor(((blocks + 2) * R, N), "float32")):
        with T.Kernel(blocks, is_npu=True) as (cid, vid):
            x = T.alloc_ub((R // 2, N), "float32")
            with T.Scope("V"):
                load_for("MTE3", X[cid * R + vid * (R // 2), 0], x)
                if mode == "perm":  # a permutation of the blocks: no race
                    T.copy(x, Y[(cid * 3) % blocks * R + vid * (R // 2), 0])
                if mode == "mod":  # (cid * 3) % 4 on 5 blocks: blocks 0 and 4 meet
                    T.copy(x, Y[(cid * 3) % 4 * R + vid * (R // 2), 0])  # AT:mod
                if mode == "min":  # blocks 3 and 4 both write tile 3
                    T.copy(x, Y[T.min(cid, 3) * R + vid * (R // 2), 0])  # AT:min
                if mode == "branch":  # blocks 3, 4 write tiles 1, 2 (those of blocks 1, 2)
                    if cid < 3:
                        T.copy(x, Y[cid * R + vid * (R // 2), 0])
                    else:
                        T.copy(x, Y[(cid - 2) * R + vid * (R // 2), 0])  # AT:branch
                if mode == "loop":  # blocks from 4 on also write the next block's tile
                    for t in T.serial(1 + cid // 4):
                        T.copy(x, Y[(cid + t) * R + vid * (R // 2), 0])  # AT:loop
    return k


@pytest.mark.parametrize("blocks,mode,pair", [
    (5, "mod", (0, 4)), (5, "min", (3, 4)), (5, "branch", (1, 3)), (6, "loop", (4, 5))])
def test_two_blocks_other_than_block_0_meeting_are_a_located_race(blocks, mode, pair):
    with pytest.raises(CompileError) as info:
        tilelang_mini.compile(indexed(blocks, mode), out_idx=[-1])
    err = info.value
    MARKED.located(err, mode)
    a, b = pair
    assert f"block {a} " in err.message and f"block {b} " in err.message, err.message
    assert "race between blocks on Y[" in err.message, err.message


def expected_perm(x, blocks):
    want = np.zeros(((blocks + 2) * R, N))
    for b in range(blocks):
        d = (b * 3) % blocks
        want[d * R:(d + 1) * R] = x[b * R:(b + 1) * R]
    return want


@pytest.mark.parametrize("blocks", [4, 5, 7])
def test_blocks_writing_a_permutation_compile_and_run(blocks, target):
    x = np.random.default_rng(2).standard_normal((blocks * R, N)).astype(np.float32)
    kernel = tilelang_mini.compile(indexed(blocks, "perm"), out_idx=[-1], target=target)
    want = expected_perm(x, blocks)
    got = kernel(x)
    np.testing.assert_allclose(got[:blocks * R], want[:blocks * R], rtol=1e-6, atol=1e-6)
    if target == "numpy":
        got, _ = kernel.simulate(x)
        np.testing.assert_allclose(got[:blocks * R], want[:blocks * R], rtol=1e-6, atol=1e-6)


def test_a_large_grid_is_checked_whole():
    """2000 blocks: all pairs are compared (the permutation compiles; two blocks far from block
    0 meeting are found)."""
    kernel = tilelang_mini.compile(indexed(2000, "perm"), out_idx=[-1])
    assert kernel is not None

    @T.prim_func
    def k(X: T.Tensor((2000 * R, N), "float32"), Y: T.Tensor((2000 * R, N), "float32")):
        with T.Kernel(2000, is_npu=True) as (cid, vid):
            x = T.alloc_ub((R // 2, N), "float32")
            with T.Scope("V"):
                load_for("MTE3", X[cid * R + vid * (R // 2), 0], x)
                T.copy(x, Y[(cid - cid // 1500) * R + vid * (R // 2), 0])  # AT:large
    with pytest.raises(CompileError) as info:
        tilelang_mini.compile(k, out_idx=[-1])
    MARKED.located(info.value, "large")
    assert "block 1499 " in info.value.message and "block 1500 " in info.value.message


def strided_and_guarded(mode: str):
    """Expert kernel, 2 blocks x 2 AIVs: each AIV writes 8 elements of Y (64,) interleaved with
    the other three (`Y[4 * i + 2 * cid + vid]`: bounding boxes overlap, elements do not), or
    only where its mask is set (`if m[i] > 0:` around the store: the box is an upper bound);
    `clash` makes both AIVs of a block write the same strided elements (a real race, not
    provable from the boxes at compile time: simulate finds it from the elements)."""
    @T.prim_func
    def k(X: T.Tensor((64,), "float32"), M: T.Tensor((64,), "int32"),
          Y: T.Tensor((64,), "float32")):
        with T.Kernel(2, is_npu=True) as (cid, vid):
            x = T.alloc_ub((8,), "float32")
            m = T.alloc_ub((8,), "int32")
            with T.Scope("V"):
                T.copy(X[cid * 16 + vid * 8], x)
                T.copy(M[cid * 16 + vid * 8], m)
                T.set_flag("MTE2", "V", 0)
                T.wait_flag("MTE2", "V", 0)
                T.set_flag("MTE2", "S", 0)
                T.wait_flag("MTE2", "S", 0)
                if mode == "strided":
                    for i in T.Parallel(8):
                        Y[4 * i + 2 * cid + vid] = x[i] * 2.0
                if mode == "clash":  # both AIVs write the same strided elements
                    for i in T.Parallel(8):
                        Y[4 * i + 2 * cid] = x[i]
                if mode == "guarded":
                    for i in T.Parallel(8):
                        if m[i] > 0:
                            Y[i * 4 + 2 * cid + vid] = x[i]
    return k


@pytest.mark.parametrize("mode", ["strided", "guarded"])
def test_strided_or_guarded_maps_of_different_blocks_compile(mode, target):
    """check_blocks uses a map's box only where it is exactly the elements touched
    (analysis.exact_boxes): these kernels are race-free and must compile, run and simulate."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal(64).astype(np.float32)
    m = rng.integers(0, 2, 64).astype(np.int32)
    src = np.arange(32)  # element e = cid * 16 + vid * 8 + i lands at 4 * i + 2 * cid + vid
    cid, vid, i = src // 16, src // 8 % 2, src % 8
    dst = 4 * i + 2 * cid + vid
    want = np.zeros(64)
    if mode == "strided":
        want[dst] = 2.0 * x[src].astype(np.float64)
    else:
        keep = m[src] > 0
        want[dst[keep]] = x[src[keep]]
    kernel = tilelang_mini.compile(strided_and_guarded(mode), target=target)
    y = np.zeros(64, np.float32)
    kernel(x, m, y)
    np.testing.assert_allclose(y, want, rtol=1e-6)
    y = np.zeros(64, np.float32)
    tilelang_mini.compile(strided_and_guarded(mode)).simulate(x, m, y)
    np.testing.assert_allclose(y, want, rtol=1e-6)


def test_strided_map_of_both_aivs_on_common_elements_races_in_simulate():
    rng = np.random.default_rng(6)
    x = rng.standard_normal(64).astype(np.float32)
    m = np.ones(64, np.int32)
    kernel = tilelang_mini.compile(strided_and_guarded("clash"))
    with pytest.raises(RaceError) as err:
        kernel.simulate(x, m, np.zeros(64, np.float32))
    assert "data race on global buffer Y" in str(err.value)
