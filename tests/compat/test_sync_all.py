"""tilelang-ascend's `T.sync_all()` (SyncAll, a barrier of every core of the launch) at the top
level of a `T.Kernel` body: the launch splits there into two launches over the same grid, so
every block's writes before it are visible to every block after it (xattention's attention
phase then merge phase). Both targets and the simulator, against float64 NumPy references;
an on-chip value crossing the barrier and a nested sync_all are located errors."""
import numpy as np
import pytest

import tilelang_mini as tilelang
import tilelang_mini.language as T

from util import close, f64, rand

B, W = 4, 64


def two_phase(nested=False, keep_on_chip=False):
    """Phase 1: block b writes its row times 2 into workspace row b. Phase 2: block b writes
    the sum of all workspace rows plus its own row (every other block's phase-1 result)."""
    @T.prim_func
    def main(X: T.Tensor((B, W), "float32"), WS: T.Tensor((B, W), "float32"),
             Y: T.Tensor((B, W), "float32")):
        with T.Kernel(B, is_npu=True) as (cid, vid):
            x = T.alloc_ub((1, W), "float32")
            acc = T.alloc_ub((1, W), "float32")
            t = T.alloc_ub((1, W), "float32")
            with T.Scope("V"):
                T.copy(X[cid, 0], x)
                T.set_flag("mte2", "v", 0)
                T.wait_flag("mte2", "v", 0)
                T.tile.mul(t, x, 2.0)
                T.set_flag("v", "mte3", 0)
                T.wait_flag("v", "mte3", 0)
                with T.If(vid == 0), T.Then():
                    T.copy(t, WS[cid, 0])
                if nested:
                    T.sync_all()
            if not nested:
                T.sync_all()
            with T.Scope("V"):
                if keep_on_chip:
                    T.tile.fill(acc, 0.0)
                    T.tile.add(acc, acc, x)  # x from before the barrier
                else:
                    T.copy(X[cid, 0], acc)
                T.set_flag("mte2", "v", 0)
                T.wait_flag("mte2", "v", 0)
                for r in T.serial(B):
                    T.set_flag("v", "mte2", 1)
                    T.wait_flag("v", "mte2", 1)
                    T.copy(WS[r, 0], t)
                    T.set_flag("mte2", "v", 1)
                    T.wait_flag("mte2", "v", 1)
                    T.tile.add(acc, acc, t)
                T.set_flag("v", "mte3", 0)
                T.wait_flag("v", "mte3", 0)
                with T.If(vid == 0), T.Then():
                    T.copy(acc, Y[cid, 0])
    return main


@pytest.mark.parametrize("target", ["numpy", "llvm"])
def test_sync_all_orders_every_block(target):
    x = rand((B, W), seed=4)
    want = f64(x) + 2 * f64(x).sum(0)
    k = tilelang.compile(two_phase(), out_idx=[2], target=target)
    ws = np.zeros((B, W), np.float32)
    close(np.asarray(k(x, ws)), want, reduce_len=B)
    if target == "numpy":
        close(np.asarray(k.simulate(x, np.zeros((B, W), np.float32))[0]), want, reduce_len=B)


@pytest.mark.parametrize("target", ["numpy", "llvm"])
@pytest.mark.parametrize("nested, keep_on_chip", [(True, False), (False, True), (True, True)])
def test_sync_all_in_a_scope_and_ub_tiles_across_it(target, nested, keep_on_chip):
    """tilelang-ascend's form: T.sync_all() at the top level of a T.Scope("V") (the k-th mark of
    each core's scopes is one barrier); a UB tile written before it and read after it keeps its
    value (copied out to a per-core GM slot and back in across the split)."""
    x = rand((B, W), seed=5)
    want = f64(x) + 2 * f64(x).sum(0)
    k = tilelang.compile(two_phase(nested, keep_on_chip), out_idx=[2], target=target)
    close(np.asarray(k(x, np.zeros((B, W), np.float32))), want, reduce_len=B)
    if target == "numpy":
        close(np.asarray(k.simulate(x, np.zeros((B, W), np.float32))[0]), want, reduce_len=B)


def per_aiv_rows():
    """Each AIV loads its own row before the barrier (x differs per vector core) and writes
    it doubled after it: each AIV's UB tile crosses in a slot of its own."""
    @T.prim_func
    def main(X: T.Tensor((2 * B, W), "float32"), Y: T.Tensor((2 * B, W), "float32")):
        with T.Kernel(B, is_npu=True) as (cid, vid):
            x = T.alloc_ub((1, W), "float32")
            with T.Scope("C"):
                T.sync_all()
            with T.Scope("V"):
                T.copy(X[cid * 2 + vid, 0], x)
                T.sync_all()
                T.barrier_all()
                T.tile.mul(x, x, 2.0)
                T.barrier_all()
                T.copy(x, Y[cid * 2 + vid, 0])
    return main


@pytest.mark.parametrize("target", ["numpy", "llvm"])
def test_each_aiv_keeps_its_own_tile_across_sync_all(target):
    x = rand((2 * B, W), seed=7)
    k = tilelang.compile(per_aiv_rows(), out_idx=[1], target=target)
    close(np.asarray(k(x)), 2 * f64(x))
    if target == "numpy":
        close(np.asarray(k.simulate(x)[0]), 2 * f64(x))


def cube_tile_across(in_loop=False):
    """An L1 tile written before the barrier and read after it: the cube cannot copy L1 out to
    GM, so it does not cross (a located error); a T.sync_all in a loop is one too."""
    @T.prim_func
    def main(X: T.Tensor((B * 16, 16), "float16"), Y: T.Tensor((B * 16, 16), "float32")):
        with T.Kernel(B, is_npu=True) as (cid, vid):
            a = T.alloc_L1((16, 16), "float16")
            c = T.alloc_L0C((16, 16), "float32")
            with T.Scope("C"):
                T.copy(X[cid * 16, 0], a)
                if in_loop:
                    for _ in T.serial(2):
                        T.sync_all()
                else:
                    T.sync_all()
                T.barrier_all()
                T.gemm_v0(a, a, c, init=True)
                T.barrier_all()
                T.copy(c, Y[cid * 16, 0])
    return main


def test_sync_all_errors():
    with pytest.raises(tilelang.CompileError, match="top level of the T.Kernel body") as e:
        tilelang.compile(cube_tile_across(in_loop=True), out_idx=[1], target="numpy")
    assert "T.sync_all()" in open(__file__).read().splitlines()[e.value.loc.line - 1]
    with pytest.raises(tilelang.CompileError, match="'a' .* before T.sync_all") as e:
        tilelang.compile(cube_tile_across(), out_idx=[1], target="numpy")
    assert "T.gemm_v0(a, a, c" in open(__file__).read().splitlines()[e.value.loc.line - 1]


def scaled(sync):
    """`T.alloc_var(dtype, init=v)` at the top of a kernel with T.Scope blocks: every core runs
    the init (before: an instruction of no core, an internal error); across a T.sync_all the
    constant init is repeated in the second launch (phase 1: Y = X * k; phase 2: Y = Y + k)."""
    @T.macro
    def phase(src, dst, a, k, cid, vid, add):
        with T.Scope("V"):
            T.copy(src[cid * 16 + vid * 8, 0], a)
            T.set_flag("mte2", "v", 0)
            T.wait_flag("mte2", "v", 0)
            if add:
                T.tile.add(a, a, k)
            else:
                T.tile.mul(a, a, k)
            T.set_flag("v", "mte3", 0)
            T.wait_flag("v", "mte3", 0)
            T.copy(a, dst[cid * 16 + vid * 8, 0])

    @T.prim_func
    def main(X: T.Tensor((B * 16, W), "float32"), Y: T.Tensor((B * 16, W), "float32")):
        with T.Kernel(B, is_npu=True) as (cid, vid):
            a = T.alloc_ub((8, W), "float32")
            k = T.alloc_var("float32", init=2.0)
            phase(X, Y, a, k, cid, vid, False)
            if sync:
                T.sync_all()
                phase(Y, Y, a, k, cid, vid, True)
    return main


@pytest.mark.parametrize("target", ["numpy", "llvm"])
@pytest.mark.parametrize("sync", [False, True])
def test_scalar_init_on_every_core(target, sync):
    x = rand((B * 16, W), seed=6)
    want = 2 * f64(x) + (2 if sync else 0)
    k = tilelang.compile(scaled(sync), out_idx=[1], target=target)
    close(np.asarray(k(x)), want)
    if target == "numpy":
        close(np.asarray(k.simulate(x)[0]), want)
