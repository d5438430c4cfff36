"""TileLang's T.atomic_addx2 / T.atomic_addx4 (consecutive elements) and
T.atomic_add(..., return_prev=True) (the old value, on an on-chip tile) in the upstream spelling,
on every target and simulated, against NumPy references."""
import numpy as np
import pytest

import tilelang_mini as tilelang
import tilelang_mini.language as T

from markers import kernel_error
from util import close, f64, rand

TARGETS = ("numpy", "llvm")


def run(kernel, target, *args):
    """Outputs of the kernel on `target`, and the simulator's (numpy target)."""
    k = tilelang.compile(kernel, target=target)
    got = [a.copy() for a in args]
    k(*got)
    sim = None
    if target == "numpy":
        sim = [a.copy() for a in args]
        k.simulate(*sim)
    return got, sim


def pairs_into_gm(width):
    """Four blocks add their (8, 16) tiles into one C, `width` elements per atomic update."""

    @T.prim_func
    def main(X: T.Tensor((32, 16), T.float32), C: T.Tensor((8, 16), T.float32)):
        with T.Kernel(4, threads=64) as bx:
            t = T.alloc_fragment((8, 16), T.float32)
            T.copy(X[bx * 8, 0], t)
            for i in T.serial(8):
                for j in T.serial(16 // width):
                    if width == 2:
                        T.atomic_addx2(C[i, j * 2], t[i, j * 2])
                    else:
                        T.atomic_addx4(C[i, j * 4], t[i, j * 4])
    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("width", [2, 4])
def test_wide_atomic_into_gm(width, target):
    x = rand((32, 16), seed=width)
    c0 = rand((8, 16), seed=9)
    want = f64(c0) + f64(x).reshape(4, 8, 16).sum(0)
    got, sim = run(pairs_into_gm(width), target, x, c0)
    close(got[1], want, reduce_len=4)
    if sim is not None:
        close(sim[1], want, reduce_len=4)


def quads_in_shared():
    """Inside T.Parallel on a shared tile (TileLang's element spelling with a stride-4 index)."""

    @T.prim_func
    def main(X: T.Tensor((32, 16), T.float32), Y: T.Tensor((8, 16), T.float32)):
        with T.Kernel(1) as bx:
            t = T.alloc_shared((32, 16), T.float32)
            acc = T.alloc_shared((8, 16), T.float32)
            T.copy(X, t)
            T.clear(acc)
            for k in T.serial(4):
                for i, j in T.Parallel(8, 4):
                    T.atomic_addx4(acc[i, j * 4], t[k * 8 + i, j * 4])
            T.copy(acc, Y)
    return main


@pytest.mark.parametrize("target", TARGETS)
def test_wide_atomic_in_parallel(target):
    x = rand((32, 16), seed=3)
    want = f64(x).reshape(4, 8, 16).sum(0)
    got, sim = run(quads_in_shared(), target, x, np.zeros((8, 16), np.float32))
    close(got[1], want, reduce_len=4)
    close(sim[1] if sim is not None else got[1], want, reduce_len=4)


N, NB = 64, 8


def ranks(form):
    """Each element's rank among the earlier elements of its bin: `pos = T.atomic_add(hist[b],
    1, return_prev=True)` (topk_selector's bucket compaction), plus the bin counts."""

    @T.prim_func
    def main(Bins: T.Tensor((N,), T.int32), Rank: T.Tensor((N,), T.int32),
             Count: T.Tensor((NB,), T.int32)):
        with T.Kernel(1, threads=128) as bx:
            hist = T.alloc_shared((NB,), T.int32)
            b_s = T.alloc_shared((N,), T.int32)
            r_s = T.alloc_shared((N,), T.int32)
            pos = T.alloc_var(T.int32)
            T.copy(Bins, b_s)
            T.fill(hist, 0)
            for i in T.serial(N):
                if form == "var":
                    pos = T.atomic_add(hist[b_s[i]], 1, return_prev=True)
                    r_s[i] = pos
                else:
                    r_s[i] = T.atomic_add(hist[b_s[i]], 1, return_prev=True) + 100
            T.copy(r_s, Rank)
            T.copy(hist, Count)
    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("form", ["var", "expr"])
def test_return_prev(form, target):
    bins = np.random.default_rng(5).integers(0, NB, N).astype(np.int32)
    want_rank = np.array([np.sum(bins[:i] == bins[i]) for i in range(N)])
    want_rank += 100 if form == "expr" else 0
    want_count = np.bincount(bins, minlength=NB)
    got, sim = run(ranks(form), target, bins, np.zeros(N, np.int32), np.zeros(NB, np.int32))
    for out in (got, sim) if sim is not None else (got,):
        np.testing.assert_array_equal(out[1], want_rank)
        np.testing.assert_array_equal(out[2], want_count)


def test_return_prev_on_gm_is_located():
    @kernel_error
    def err(C: T.Tensor((4,), T.int32), Y: T.Tensor((4,), T.int32)):
        with T.Kernel(1) as bx:
            v = T.alloc_var(T.int32)
            v = T.atomic_add(C[0], 1, return_prev=True)  # GM_PREV
            Y[0] = v
    assert "GM_PREV" in str(err) and "returns nothing" in str(err)
