"""Independent float64 NumPy references of kernel-library functions that both the tests and the
examples check against (written from the public descriptions: TileKernels' reference functions
for mHC). Nothing here calls the compiler."""
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
