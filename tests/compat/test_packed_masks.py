"""tilelang-ascend's packed compare masks: `T.tile.compare` into a uint8 tile of n/8 bytes writes
one bit per element (element 8*b + k is bit k of byte b), `T.tile.bitwise_and` combines two
masks byte-wise, and `T.tile.select` with such a mask picks element i by bit i (the HISA
sparse-attention kernel's range mask). On every target and simulated, against NumPy's
packbits/unpackbits (bitorder="little")."""
import numpy as np
import pytest

import tilelang_mini as tilelang
import tilelang_mini.language as T

from util import close, f64, rand

ROWS, N = 4, 64


def range_mask_kernel(lo, hi, mode_lo="GE", mode_hi="LT"):
    @T.prim_func
    def main(X: T.Tensor((ROWS, N), "float32"), L: T.Tensor((ROWS, N), "float32"),
             Y: T.Tensor((ROWS, N), "float32"), Mout: T.Tensor((ROWS, N // 8), "uint8")):
        with T.Kernel(ROWS, is_npu=True) as (cid, vid):
            x = T.alloc_ub([N], "float")
            logits = T.alloc_ub([1, N], "float")
            m1 = T.alloc_ub([N // 8], "uint8")
            m2 = T.alloc_ub([N // 8], "uint8")
            T.copy(X[cid, 0], x)
            T.copy(L[cid, 0], logits)
            T.tile.compare(m1, x, T.float32(lo), mode_lo)
            T.tile.compare(m2, x, hi, mode_hi)
            T.tile.bitwise_and(m1, m1, m2)
            T.tile.select(logits[0, :], m1, logits[0, :], -T.infinity("float32"),
                          "VSEL_TENSOR_SCALAR_MODE")
            T.copy(logits, Y[cid, 0])
            T.copy(m1, Mout[cid, 0])
    return main


OPS = {"GE": np.greater_equal, "GT": np.greater, "LT": np.less, "LE": np.less_equal,
       "EQ": np.equal, "NE": np.not_equal}


@pytest.mark.parametrize("mode_lo, mode_hi", [("GE", "LT"), ("GT", "LE"), ("NE", "NE")])
def test_range_mask_select(target, mode_lo, mode_hi):
    rng = np.random.default_rng(7)
    x = rng.integers(-6, 7, (ROWS, N)).astype(np.float32)  # ties at the bounds
    logits = rand((ROWS, N), seed=8)
    lo, hi = -2.0, 3.0
    keep = OPS[mode_lo](f64(x), lo) & OPS[mode_hi](f64(x), hi)
    want_mask = np.packbits(keep, axis=1, bitorder="little")
    want = np.where(keep, f64(logits), -np.inf)
    kernel = tilelang.compile(range_mask_kernel(lo, hi, mode_lo, mode_hi), out_idx=[2, 3],
                              target=target)
    y, m = kernel(x, logits)
    assert m.dtype == np.uint8 and np.array_equal(m, want_mask)
    np.testing.assert_array_equal(y, want.astype(np.float32))
    if target == "numpy":
        (ys, ms), _ = kernel.simulate(x, logits)
        assert np.array_equal(ms, want_mask)
        np.testing.assert_array_equal(ys, want.astype(np.float32))


def test_packed_compare_of_two_tiles_and_a_2d_source(target):
    """Tile against tile, the source a 2-D (4, 16) tile flattened row-major into 64 bits."""
    @T.prim_func
    def main(A: T.Tensor((4, 16), "float16"), B: T.Tensor((4, 16), "float16"),
             Mout: T.Tensor((8,), "uint8"), Y: T.Tensor((4, 16), "float16")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub((4, 16), "float16")
            b = T.alloc_ub((4, 16), "float16")
            y = T.alloc_ub((4, 16), "float16")
            m = T.alloc_ub((8,), "uint8")
            T.copy(A, a)
            T.copy(B, b)
            T.tile.compare(m, a, b, "GT")
            T.tile.select(y, m, a, b, "VSEL_TENSOR_TENSOR_MODE")  # the larger of the two
            T.copy(m, Mout)
            T.copy(y, Y)

    a, b = rand((4, 16), "float16", 9), rand((4, 16), "float16", 10)
    b[0, :4] = a[0, :4]  # equal elements: bit clear
    kernel = tilelang.compile(main, out_idx=[2, 3], target=target)
    m, y = kernel(a, b)
    gt = f64(a) > f64(b)
    assert np.array_equal(m, np.packbits(gt.reshape(-1), bitorder="little"))
    close(y, np.where(gt, f64(a), f64(b)), "float16")
    if target == "numpy":
        (ms, ys), _ = kernel.simulate(a, b)
        assert np.array_equal(ms, np.packbits(gt.reshape(-1), bitorder="little"))
        close(ys, np.maximum(f64(a), f64(b)), "float16")


def test_longer_mask_tile_uses_its_leading_bytes(target):
    """A 1-D mask tile with more bytes than the compare needs (tilelang-ascend's bench_sfa: a
    32-byte mask sized for 256 keys, used for 64): compare writes bytes 0-7 only (the rest
    keep their value) and select reads bits 0-63."""
    @T.prim_func
    def main(X: T.Tensor((64,), "float32"), M0: T.Tensor((32,), "uint8"),
             Y: T.Tensor((64,), "float32"), Mout: T.Tensor((32,), "uint8")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_ub([64], "float")
            y = T.alloc_ub([64], "float")
            m = T.alloc_ub([32], "uint8")
            T.copy(X, x)
            T.copy(M0, m)
            T.tile.compare(m, x, T.float32(0.25), "LE")
            T.tile.select(y, m, x, -T.infinity("float32"), "VSEL_TENSOR_SCALAR_MODE")
            T.copy(y, Y)
            T.copy(m, Mout)

    x = rand((64,), seed=12)
    m0 = np.arange(32, dtype=np.uint8) * 7
    keep = f64(x) <= 0.25
    want_m = m0.copy()
    want_m[:8] = np.packbits(keep, bitorder="little")
    want_y = np.where(keep, f64(x), -np.inf).astype(np.float32)
    kernel = tilelang.compile(main, out_idx=[2, 3], target=target)
    y, m = kernel(x, m0)
    assert np.array_equal(m, want_m)
    np.testing.assert_array_equal(y, want_y)
    if target == "numpy":
        (ys, ms), _ = kernel.simulate(x, m0)
        assert np.array_equal(ms, want_m)
        np.testing.assert_array_equal(ys, want_y)
