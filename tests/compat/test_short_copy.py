"""T.copy of a GM region shorter than the on-chip tile it fills (TileLang's flash-decoding
split: `T.copy(K[b, s : s + valid_n, h, :], K_shared)` with valid_n < block_N, the kernel masking
the columns past valid_n): the region lands at the tile's head, the rest is zero (or the
pad_value), on every short dimension; a longer region than the tile stays a located error."""
import numpy as np
import pytest

import tilelang_mini
import tilelang_mini.language as T
from tilelang_mini.errors import CompileError


def scores(N, D, valid, block):
    """S[b] = Q @ K[b*valid : (b+1)*valid].T, written into a block-wide score tile whose
    columns past `valid` must come out zero (the K tile's padding)."""
    @T.prim_func
    def main(Q: T.Tensor((16, D), T.float16), K: T.Tensor((N, D), T.float16),
             S: T.Tensor((N // valid, 16, block), T.float32)):
        with T.Kernel(N // valid) as bx:
            q = T.alloc_shared((16, D), T.float16)
            ks = T.alloc_shared((block, D), T.float16)
            acc = T.alloc_fragment((16, block), T.float32)
            T.copy(Q, q)
            T.copy(K[bx * valid:(bx + 1) * valid, :], ks)
            T.clear(acc)
            T.gemm(q, ks, acc, transpose_B=True)
            T.copy(acc, S[bx, :, :])
    return main


def corner(M, N, rows, cols, pad):
    """Y[b] = the rows x cols corner of X's block b, padded to 16 x 32 with `pad`, plus one."""
    @T.prim_func
    def main(X: T.Tensor((M, N), T.float32), Y: T.Tensor((M // rows, 16, 32), T.float32)):
        with T.Kernel(M // rows) as bx:
            t = T.alloc_fragment((16, 32), T.float32)
            T.copy(X[bx * rows:(bx + 1) * rows, 0:cols], t, pad_value=pad)
            for i, j in T.Parallel(16, 32):
                t[i, j] = t[i, j] + 1.0
            T.copy(t, Y[bx, :, :])
    return main


@pytest.mark.parametrize("target", ["numpy", "llvm"])
def test_short_rows_into_gemm_tile(target):
    N, D, valid, block = 64, 32, 16, 64
    rng = np.random.default_rng(0)
    q = rng.standard_normal((16, D)).astype(np.float16)
    k = rng.standard_normal((N, D)).astype(np.float16)
    want = np.zeros((N // valid, 16, block))
    for b in range(N // valid):
        want[b, :, :valid] = q.astype(np.float64) @ k[b * valid:(b + 1) * valid].astype(np.float64).T
    kern = tilelang_mini.compile(scores(N, D, valid, block), target=target)
    s = np.full((N // valid, 16, block), np.nan, np.float32)
    kern(q, k, s)
    np.testing.assert_allclose(s, want, rtol=1e-3, atol=1e-3)
    if target == "numpy":
        s2 = np.full_like(s, np.nan)
        kern.simulate(q, k, s2)
        np.testing.assert_allclose(s2, want, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("target", ["numpy", "llvm"])
@pytest.mark.parametrize("pad", [0.0, -2.5])
def test_short_in_both_dims(target, pad):
    M, N, rows, cols = 40, 24, 10, 20
    x = np.random.default_rng(1).standard_normal((M, N)).astype(np.float32)
    want = np.full((M // rows, 16, 32), pad + 1.0)
    for b in range(M // rows):
        want[b, :rows, :cols] = x[b * rows:(b + 1) * rows, :cols].astype(np.float64) + 1.0
    kern = tilelang_mini.compile(corner(M, N, rows, cols, pad), target=target)
    y = np.full((M // rows, 16, 32), np.nan, np.float32)
    kern(x, y)
    np.testing.assert_allclose(y, want, rtol=1e-6)
    if target == "numpy":
        y2 = np.full_like(y, np.nan)
        kern.simulate(x, y2)
        np.testing.assert_allclose(y2, want, rtol=1e-6)


def test_longer_region_than_tile_is_located():
    with pytest.raises(CompileError, match="copy shapes differ"):
        tilelang_mini.compile(corner(64, 64, 32, 40, 0.0))


@pytest.mark.parametrize("target", ["numpy", "llvm"])
@pytest.mark.parametrize("spell", ["region", "start"])
def test_short_region_crossing_the_tensor_edge_pads_with_the_value(target, spell):
    """A short region whose tail block also crosses the tensor's last row (fuzz family padvar:
    `T.copy(X[bx * 8:(bx + 1) * 8, 0:15], x, pad_value=2.0)` into an (8, 20) tile, M = 38): the
    rows past M read the pad value as the columns past 15 do (before, the short copy's head
    was clipped with zeros)."""
    M, N, bm, bn, pad = 38, 15, 8, 20, 2.0

    @T.prim_func
    def main(X: T.Tensor((M, N), T.float32), S: T.Tensor((5, bm), T.float32)):
        with T.Kernel(5) as bx:
            x = T.alloc_fragment((bm, bn), T.float32)
            s = T.alloc_fragment((bm,), T.float32)
            if spell == "region":
                T.copy(X[bx * bm:(bx + 1) * bm, 0:N], x, pad_value=pad)
            else:
                T.copy(X[bx * bm, 0], x, pad_value=pad)
            T.reduce_sum(x, s, dim=1)
            T.copy(s, S[bx, 0:bm])

    x = np.random.default_rng(3).uniform(-1, 1, (M, N)).astype(np.float32)
    xp = np.full((40, bn), pad)
    xp[:M, :N] = x
    want = xp.sum(1).reshape(5, bm)
    kern = tilelang_mini.compile(main, out_idx=[-1], target=target)
    np.testing.assert_allclose(kern(x), want, rtol=1e-5, atol=1e-5)
    if target == "numpy":
        np.testing.assert_allclose(kern.simulate(x)[0], want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("target", ["numpy", "llvm"])
def test_short_unit_column_and_one_element_pad_value(target):
    """Fuzz family padvar: `T.copy(X[r:r + 4, 0:1], x, pad_value=v)` with x (4, 2) (a region of
    one column, shorter than the tile in that dimension, was refused as of another shape), and
    a one-element tile's `pad_value` copy (its padding map had no loop variable: an internal
    error in the llvm code generator)."""
    M = 7

    @T.prim_func
    def main(X: T.Tensor((M, 1), T.float32), Y: T.Tensor((8, 2), T.float32),
             Z: T.Tensor((8, 1), T.float32)):
        with T.Kernel(2) as bx:
            x = T.alloc_fragment((4, 2), T.float32)
            u = T.alloc_fragment((1, 1), T.float32)
            T.copy(X[bx * 4:(bx + 1) * 4, 0:1], x, pad_value=-1.5)
            T.copy(x, Y[bx * 4, 0])
            for r in T.serial(4):
                T.copy(X[bx * 4 + r, 0], u, pad_value=0.75)
                T.copy(u, Z[bx * 4 + r, 0])

    x = np.random.default_rng(4).uniform(-1, 1, (M, 1)).astype(np.float32)
    want_y = np.full((8, 2), -1.5)
    want_y[:M, 0] = x[:, 0]
    want_z = np.full((8, 1), 0.75)
    want_z[:M] = x
    kern = tilelang_mini.compile(main, out_idx=[1, 2], target=target)
    for got in [kern(x)] + ([kern.simulate(x)[0]] if target == "numpy" else []):
        np.testing.assert_array_equal(got[0], want_y)
        np.testing.assert_array_equal(got[1], want_z)
