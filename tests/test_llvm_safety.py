"""The llvm target never touches memory outside its buffers: row tails of narrow dtypes, clipped
blocks, several threads (outputs are views into larger arrays whose other bytes are checked)."""
# No `from __future__ import annotations`: the frontend reads T.Tensor annotations as objects.
import ml_dtypes
import numpy as np
import pytest

import tilelang_mini

import kernels

CANARY = 9.0


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_CACHE_DIR", str(tmp_path / "cache"))


def scale_rows(M, N, bm, dtype):
    """B = A * 2 through a float32 tile, bm rows a block."""
    return kernels.scale_rows(M, 2.0, cols=N, block=bm, dtype=dtype)


def run_with_canary(kernel, x, dtype):
    """Call with the output a view at the front of a larger array; return (out, tail)."""
    M, N = x.shape
    big = np.full(M * N + 48, CANARY, dtypes_np(dtype))
    out = big[:M * N].reshape(M, N)
    kernel(x, out)
    return out, big[M * N:]


def dtypes_np(dtype):
    return {"bfloat16": ml_dtypes.bfloat16, "float16": np.float16,
            "float8_e4m3fn": ml_dtypes.float8_e4m3fn}[dtype]


@pytest.mark.parametrize("threads", ["1", "2"])
@pytest.mark.parametrize("n", range(1, 41))
def test_narrow_stores_stay_inside_their_rows(n, threads, monkeypatch):
    """bfloat16 rows of every length 1..40 (a tail of 1 mod 16 once wrote 4 bytes for a 2-byte
    element): 5 rows in blocks of 2 (the last block clipped), 1 and 2 threads."""
    monkeypatch.setenv("TILELANG_MINI_NUM_THREADS", threads)
    M = 5
    k = tilelang_mini.compile(scale_rows(M, n, 2, "bfloat16"), target="llvm")
    x = (np.arange(M * n).reshape(M, n) % 7 + 1).astype(ml_dtypes.bfloat16)
    for _ in range(3):
        out, tail = run_with_canary(k, x, "bfloat16")
        np.testing.assert_array_equal(out.astype(np.float64), x.astype(np.float64) * 2)
        assert (tail.astype(np.float64) == CANARY).all()


@pytest.mark.parametrize("dtype", ["float16", "float8_e4m3fn", "bfloat16"])
@pytest.mark.parametrize("n", [1, 17, 33])
def test_one_and_two_byte_tails_on_every_target(dtype, n, target):
    M = 3
    k = tilelang_mini.compile(scale_rows(M, n, 2, dtype), target=target)
    x = (np.arange(M * n).reshape(M, n) % 3 + 1).astype(dtypes_np(dtype))
    out, tail = run_with_canary(k, x, dtype)
    np.testing.assert_array_equal(out.astype(np.float64), x.astype(np.float64) * 2)
    assert (tail.astype(np.float64) == CANARY).all()
