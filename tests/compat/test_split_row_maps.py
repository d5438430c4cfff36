"""Vector work on a block's rows splits between the two AIVs (half the rows each) also when the
block ends in a masked per-row store to GM (varlen attention's `if bx * bm + i < len:
O[..] = O_s[i, d]`) or a T.Parallel body selects between a row's value and a constant
(`acc[i, j] = 0 if cond else acc[i, j] / l[i]`). Before, either made the whole vector program
run on AIV 0 with the full tiles, so four 128 x 128 float32 tiles (256 KiB) overflowed the
192 KiB UB of one AIV that half of them fit. Both targets and the simulator, against float64
NumPy references; the tails (rows past `L[0]`) stay untouched or zero."""
import numpy as np
import pytest

import tilelang_mini
import tilelang_mini.language as T

from util import close, f64, rand

BM = 128


def four_tiles(A, bx, x, y, z, w):
    T.copy(A[bx * BM, 0], x)
    for i, j in T.Parallel(BM, 128):
        y[i, j] = x[i, j] * 2.0
    for i, j in T.Parallel(BM, 128):
        z[i, j] = y[i, j] - x[i, j] * 0.5
    for i, j in T.Parallel(BM, 128):
        w[i, j] = z[i, j] * y[i, j]


@tilelang_mini.jit
def row_maps(A, L, B, masked_store: bool):
    M = T.const("M")
    A: T.Tensor((M, 128), T.float32)
    L: T.Tensor((1,), T.int32)
    B: T.Tensor((M, 128), T.float32)
    with T.Kernel(T.ceildiv(M, BM), threads=128) as bx:
        x = T.alloc_fragment((BM, 128), T.float32)
        y = T.alloc_fragment((BM, 128), T.float32)
        z = T.alloc_fragment((BM, 128), T.float32)
        w = T.alloc_fragment((BM, 128), T.float32)
        four_tiles(A, bx, x, y, z, w)
        if masked_store:
            for i, j in T.Parallel(BM, 128):
                if bx * BM + i < L[0]:
                    B[bx * BM + i, j] = x[i, j] + y[i, j] + z[i, j] + w[i, j]
        else:
            for i, j in T.Parallel(BM, 128):
                x[i, j] = 0 if bx * BM + i >= L[0] else x[i, j] + y[i, j] + z[i, j] + w[i, j]
            T.copy(x, B[bx * BM, 0])


def reference(a, n):
    x = f64(a)
    y = x * 2.0
    z = y - x * 0.5
    return x + y + z + z * y, np.arange(a.shape[0]) < n


@pytest.mark.parametrize("target", ["numpy", "llvm"])
@pytest.mark.parametrize("masked_store", [True, False])
def test_row_maps_split_between_aivs(target, masked_store, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    M, n = 384, 300   # 3 blocks; rows 300.. are past the length
    a = rand((M, 128), seed=1)
    full, live = reference(a, n)
    # the masked store leaves the rows past the length as they were (here -1); the select
    # writes zeros there
    fill = -1.0 if masked_store else 0.0
    want = np.where(live[:, None], full, fill)
    lens = np.array([n], np.int32)
    b = np.full((M, 128), -1.0, np.float32)
    row_maps(a, lens, b, masked_store)
    close(b, want)
    if target == "numpy":
        kern, args = row_maps.kernel_for(a, lens, np.full((M, 128), -1.0, np.float32),
                                         masked_store)
        kern.simulate(*args)
        close(args[2], want)
