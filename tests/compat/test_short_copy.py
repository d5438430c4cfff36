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
