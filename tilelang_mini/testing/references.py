"""Independent float64 NumPy references of kernel-library functions that both the tests and the
examples check against (written from the public descriptions: TileKernels' reference functions
for mHC; Random123's Philox4x32-10 for T.rng_rand). Nothing here calls the compiler."""
from __future__ import annotations

import numpy as np


def sinkhorn_ref(x, repeat, eps):
    x = np.exp(x - x.max(-1, keepdims=True))
    x = x / x.sum(-1, keepdims=True) + eps
    x = x / (x.sum(-2, keepdims=True) + eps)
    for _ in range(repeat - 1):
        x = x / (x.sum(-1, keepdims=True) + eps)
        x = x / (x.sum(-2, keepdims=True) + eps)
    return x


def mhc_pre_ref(res, fn, scale, base, repeat, post_mult=2.0, eps=1e-6):
    t, n, c = res.shape
    x = res.astype(np.float64).reshape(t, -1)
    mixes = x @ fn.astype(np.float64).T
    mixes = mixes / np.sqrt((x ** 2).sum(-1) / (n * c) + eps)[:, None]
    sc = np.concatenate([np.full(n, scale[0]), np.full(n, scale[1]), np.full(n * n, scale[2])])
    mixes = mixes * sc + base
    sig = 1 / (1 + np.exp(-mixes))
    pre, post = sig[:, :n] + eps, sig[:, n:2 * n] * post_mult
    comb = sinkhorn_ref(mixes[:, 2 * n:].reshape(t, n, n), repeat, eps)
    return post, comb, (pre[:, :, None] * res.astype(np.float64)).sum(1)


def semi_sparse(rng, rows, cols, dtype="float16"):
    """A random (rows, cols) matrix with 2:4 structure along the columns (1:2 for float32):
    each group keeps values at random distinct positions, zeros elsewhere."""
    group, keep = (2, 1) if np.dtype(dtype).itemsize == 4 else (4, 2)
    a = np.zeros((rows, cols))
    for r in range(rows):
        for g in range(0, cols, group):
            pos = rng.permutation(group)[:keep]
            a[r, g + pos] = rng.standard_normal(keep)
    return a.astype(dtype)


def compress_2to4(dense, meta_dtype="int16"):
    """TileLang's 2:4 compression with natural row-major metadata (examples/gemm_sp): the kept
    values of each group of 4 (2 of 4; for 32-bit A 1 of 2, group 2), and per group a 4-bit
    field, least significant first (bits [1:0] the first kept position, [3:2] the second; for
    32-bit A 0b0100 keeps element 0 of the pair and 0b1110 element 1). A group with fewer
    non-zeros keeps the lowest free positions."""
    rows, cols = dense.shape
    wide = dense.dtype.itemsize == 4
    group, keep = (2, 1) if wide else (4, 2)
    fields = np.dtype(meta_dtype).itemsize * 2
    vals = np.zeros((rows, cols * keep // group), dense.dtype)
    meta = np.zeros((rows, cols // (fields * group)), np.int64)
    for r in range(rows):
        for g in range(cols // group):
            nz = [p for p in range(group) if dense[r, g * group + p] != 0]
            nz = sorted((nz + [p for p in range(group) if p not in nz])[:keep])
            vals[r, g * keep:(g + 1) * keep] = dense[r, g * group + np.array(nz)]
            field = (0b0100 if nz[0] == 0 else 0b1110) if wide else nz[0] | nz[1] << 2
            meta[r, g // fields] |= field << (4 * (g % fields))
    return vals, meta.astype(np.uint64).astype(np.dtype(meta_dtype).str.replace("i", "u")).view(meta_dtype)


_M32 = np.uint64(0xFFFFFFFF)


def philox4x32_10(ctr, key):
    """Philox4x32-10 of counters ctr [n, 4] and key (k0, k1), all uint32 words, in NumPy."""
    c = [np.asarray(ctr, np.uint64)[:, i] for i in range(4)]
    k0, k1 = np.uint64(key[0]), np.uint64(key[1])
    for r in range(10):
        if r:
            k0, k1 = (k0 + np.uint64(0x9E3779B9)) & _M32, (k1 + np.uint64(0xBB67AE85)) & _M32
        p0, p1 = np.uint64(0xD2511F53) * c[0], np.uint64(0xCD9E8D57) * c[2]
        c = [(p1 >> np.uint64(32)) ^ c[1] ^ k0, p1 & _M32, (p0 >> np.uint64(32)) ^ c[3] ^ k1,
             p0 & _M32]
    return np.stack(c, 1).astype(np.uint32)


def philox_stream(seed, seq, off, n):
    """Outputs off .. off + n - 1 of cuRAND's Philox stream (seed, subsequence seq)."""
    g = np.arange(off, off + n, dtype=np.uint64)
    ctr = np.stack([(g >> np.uint64(2)) & _M32, g >> np.uint64(34),
                    np.full_like(g, seq & 0xFFFFFFFF), np.full_like(g, seq >> 32)], 1)
    words = philox4x32_10(ctr, (seed & 0xFFFFFFFF, seed >> 32))
    return words[np.arange(n), (g & np.uint64(3)).astype(np.int64)]
