"""uint32 arithmetic as TileLang (TVM) types it and CUDA computes it: `h * c`, `h + c`,
`h << k` and `~h` of a uint32 value are uint32, wrapping at 32 bits before the next operation
reads them (a murmur / xorshift hash: `h = h * 2654435761; h ^= h >> 16`). Before, the
product stayed a 64-bit value, so `h >> 16` read bits past 32, and the numpy and llvm targets
differed from each other and from CUDA. Other integer arithmetic is exact (64-bit) and wraps
where stored (docs/language.md)."""
import numpy as np

import tilelang_mini as tilelang
import tilelang_mini.language as T

N = 128


def hash_ref(x, seed):
    with np.errstate(over="ignore"):
        h = (x ^ np.uint32(seed)) * np.uint32(0x9E3779B1)
        h = h ^ (h >> np.uint32(15))
        h = (h + np.uint32(0x7F4A7C15)) * np.uint32(2246822519)
        h = h ^ (h << np.uint32(7)) ^ ~h
        return h ^ (h >> np.uint32(13))


@tilelang.jit(out_idx=[-1])
def hasher(n, seed, block=64):
    @T.prim_func
    def main(x: T.Tensor((n,), T.uint32), y: T.Tensor((n,), T.uint32)):
        with T.Kernel(T.ceildiv(n, block), threads=128) as bx:
            t = T.alloc_fragment((block,), T.uint32)
            T.copy(x[bx * block], t)
            for i in T.Parallel(block):
                h = (t[i] ^ T.uint32(seed)) * T.uint32(0x9E3779B1)
                h = h ^ (h >> 15)
                h = (h + T.uint32(0x7F4A7C15)) * T.uint32(2246822519)
                h = h ^ (h << 7) ^ ~h
                t[i] = h ^ (h >> 13)
            T.copy(t, y[bx * block])
    return main


@tilelang.jit(out_idx=[-1])
def dropout(n, seed, p, block=64):
    """A counter-based dropout mask from the element index (a cast of an int32 index)."""

    @T.prim_func
    def main(x: T.Tensor((n,), T.float32), y: T.Tensor((n,), T.float32)):
        with T.Kernel(T.ceildiv(n, block), threads=128) as bx:
            for i in T.Parallel(block):
                idx = T.cast(bx * block + i, T.uint32)
                h = (idx ^ T.uint32(seed)) * T.uint32(0x9E3779B1)
                h = h ^ (h >> 15)
                u = T.cast(h & T.uint32(0xFFFFFF), T.float32) / 16777216.0
                y[bx * block + i] = T.if_then_else(u >= p, x[bx * block + i] / (1 - p), 0.0)
    return main


def test_uint32_hash_wraps_like_cuda(target, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    x = np.random.default_rng(1).integers(0, 2 ** 32, N, dtype=np.uint64).astype(np.uint32)
    want = hash_ref(x, 12345)
    k = hasher(N, 12345)
    np.testing.assert_array_equal(k(x), want)
    np.testing.assert_array_equal(k.simulate(x)[0], want)


def test_counter_hash_dropout(target, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    x = np.random.default_rng(2).standard_normal(N * 2).astype(np.float32)
    idx = np.arange(N * 2, dtype=np.uint32)
    with np.errstate(over="ignore"):
        h = (idx ^ np.uint32(7)) * np.uint32(0x9E3779B1)
    h = h ^ (h >> np.uint32(15))
    u = (h & np.uint32(0xFFFFFF)).astype(np.float64) / 16777216.0
    want = np.where(u >= 0.3, x.astype(np.float64) / 0.7, 0.0)
    k = dropout(N * 2, 7, 0.3)
    np.testing.assert_allclose(k(x), want, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(k.simulate(x)[0], want, rtol=1e-6, atol=1e-6)
