"""Atomic updates inside `T.Parallel` whose destination row is gathered through an index tensor
(`C[Idx[i], j]`) or whose column is strided (`T.atomic_addx4(C[r, j * 4], v[i, j * 4])`): the
scatter of deepseek_v32's sparse MLA backward (dKV rows through the top-k indices) and
dsa_sparse_finetune's indexer backward. Repeated rows add up; several blocks add into one C;
rows outside C (a -1 padding) are not stored.
On every target and simulated, against np.add.at."""
import numpy as np
import pytest

import tilelang_mini as tilelang
import tilelang_mini.language as T
from tilelang_mini.ir.parser import parse_ir
from tilelang_mini.ir.printer import print_ir

from util import f64, rand


def scatter_rows(N, R, D, blocks, wide):
    @T.prim_func
    def main(Idx: T.Tensor((blocks, R), T.int32), V: T.Tensor((blocks, R, D), T.float32),
             C: T.Tensor((N, D), T.float32)):
        with T.Kernel(blocks) as bx:
            v = T.alloc_fragment((R, D), T.float32)
            T.copy(V[bx, :, :], v)
            if wide:
                for i, j in T.Parallel(R, D // 4):
                    T.atomic_addx4(C[Idx[bx, i], j * 4], v[i, j * 4])
            else:
                for i, j in T.Parallel(R, D):
                    T.atomic_add(C[Idx[bx, i], j], v[i, j] * 2.0)
    return main


@pytest.mark.parametrize("wide", [False, True])
def test_scatter_through_indices(target, wide):
    N, R, D, blocks = 24, 8, 16, 2
    kernel = tilelang.compile(scatter_rows(N, R, D, blocks, wide), target=target)
    rng = np.random.default_rng(3)
    idx = rng.integers(0, N, (blocks, R)).astype(np.int32)
    idx[0, 1] = idx[0, 0]                  # a row twice in one block
    idx[1, 0] = idx[0, 0]                  # and again from the other block
    idx[1, 3], idx[0, 5] = -1, N           # padding outside C: not stored (safe access)
    v = rand((blocks, R, D), seed=4)
    c0 = rand((N, D), seed=5)
    want = f64(c0).copy()
    keep = (idx >= 0) & (idx < N)
    np.add.at(want, idx[keep], f64(v)[keep] * (1.0 if wide else 2.0))
    c = c0.copy()
    kernel(idx, v, c)
    np.testing.assert_allclose(f64(c), want, rtol=1e-5, atol=1e-5)
    assert parse_ir(print_ir(kernel.ir)) == kernel.ir
    if target == "numpy":
        c = c0.copy()
        kernel.simulate(idx, v, c)   # C in place
        np.testing.assert_allclose(f64(c), want, rtol=1e-5, atol=1e-5)


def masked_updates(N, R, D, blocks):
    @T.prim_func
    def main(Idx: T.Tensor((blocks, R), T.int32), V: T.Tensor((blocks, R, D), T.float32),
             C: T.Tensor((N, D), T.float32), P: T.Tensor((blocks * R, D), T.float32)):
        with T.Kernel(blocks) as bx:
            v = T.alloc_fragment((R, D), T.float32)
            rows = T.alloc_shared((R,), T.int32)
            T.copy(V[bx, :, :], v)
            T.copy(Idx[bx, :], rows)
            for i, j in T.Parallel(R, D):
                pos = rows[i]
                if (pos > -1) & (pos < N - 2):   # indexer_bwd's guard on a gathered row
                    T.atomic_add(C[pos, j], v[i, j])
            for i, j in T.Parallel(R, D):
                if v[i, j] > 0:                  # an affine destination under a data condition
                    T.atomic_add(P[bx * R + i, j], v[i, j])
    return main


def test_atomic_under_if_in_parallel(target):
    N, R, D, blocks = 24, 8, 16, 2
    kernel = tilelang.compile(masked_updates(N, R, D, blocks), target=target)
    rng = np.random.default_rng(6)
    idx = rng.integers(-1, N, (blocks, R)).astype(np.int32)
    idx[0, :2] = [-1, N - 1]
    v = rand((blocks, R, D), seed=7)
    c0, p0 = rand((N, D), seed=8), rand((blocks * R, D), seed=9)
    want_c = f64(c0).copy()
    keep = (idx > -1) & (idx < N - 2)
    np.add.at(want_c, idx[keep], f64(v)[keep])
    want_p = f64(p0) + np.maximum(f64(v).reshape(blocks * R, D), 0)
    runs = [lambda c, p: kernel(idx, v, c, p)]
    if target == "numpy":
        runs.append(lambda c, p: kernel.simulate(idx, v, c, p))
    for run in runs:
        c, p = c0.copy(), p0.copy()
        run(c, p)
        np.testing.assert_allclose(f64(c), want_c, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(f64(p), want_p, rtol=1e-5, atol=1e-5)


def test_guarded_scatter_reads_no_index_past_the_tail(target):
    """A weighted histogram over a length that is not a multiple of the block: the gathered
    destination `h[x[i]]` and the value `w[i]` are read only where `if i < N` holds (before,
    the tail lanes read x[100] and w[100]: an out-of-bounds KernelRuntimeError)."""
    N, B, bm = 100, 10, 32

    @T.prim_func
    def main(x: T.Tensor((N,), T.int32), w: T.Tensor((N,), T.float32),
             h: T.Tensor((B,), T.float32), c: T.Tensor((B,), T.int32)):
        with T.Kernel(T.ceildiv(N, bm), threads=128) as bx:
            for i in T.Parallel(bm):
                if bx * bm + i < N:
                    T.atomic_add(h[x[bx * bm + i]], w[bx * bm + i] * 2.0)
                    T.atomic_add(c[x[bx * bm + i]], 1)

    kernel = tilelang.compile(main, target=target)
    rng = np.random.default_rng(5)
    x = rng.integers(0, B, N).astype(np.int32)
    w = rng.random(N).astype(np.float32)
    want = np.bincount(x, weights=2 * f64(w), minlength=B)
    for run in (kernel, kernel.simulate):
        h, c = np.zeros(B, np.float32), np.zeros(B, np.int32)
        run(x, w, h, c)
        np.testing.assert_allclose(h, want, rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(c, np.bincount(x, minlength=B))


def test_scatter_under_a_data_dependent_guard_simulates(target):
    """A fused-MoE epilogue: rows of an expert's segment scattered into C through token ids,
    weighted by w[ids[..]], under `if row < count` with the count read from a tensor. The
    simulator's race check found the map's access boxes over every lane, reading ids past its
    end (a KernelRuntimeError of the simulation only); it now takes each access over the
    iterations where the map's ifs hold, as the run does."""
    N, R, D, start, cnt = 12, 8, 16, 3, 11

    @T.prim_func
    def main(ids: T.Tensor((start + cnt,), T.int32), off: T.Tensor((2,), T.int32),
             w: T.Tensor((start + cnt,), T.float32), V: T.Tensor((2 * R, D), T.float32),
             C: T.Tensor((N, D), T.float32)):
        with T.Kernel(2, threads=128) as bx:
            v = T.alloc_fragment((R, D), T.float32)
            T.copy(V[bx * R, 0], v)
            s = off[0]
            n = off[1] - s
            for i, j in T.Parallel(R, D):
                if bx * R + i < n:
                    T.atomic_add(C[ids[s + bx * R + i], j], v[i, j] * w[s + bx * R + i])

    kernel = tilelang.compile(main, target=target)
    rng = np.random.default_rng(6)
    ids = rng.integers(0, N, start + cnt).astype(np.int32)
    w = rng.random(start + cnt).astype(np.float32)
    vals = rng.standard_normal((2 * R, D)).astype(np.float32)
    off = np.array([start, start + cnt], np.int32)
    want = np.zeros((N, D))
    np.add.at(want, ids[start:], f64(vals[:cnt]) * f64(w[start:])[:, None])
    for run in (kernel, kernel.simulate):
        c = np.zeros((N, D), np.float32)
        run(ids, off, w, vals, c)
        np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-5)
