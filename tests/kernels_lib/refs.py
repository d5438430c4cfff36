"""Independent NumPy references for the kernel library, written from the public descriptions
(DeepGEMM's README/tests, FlashMLA's README, TileKernels' docs), in float64."""
from __future__ import annotations

import ml_dtypes
import numpy as np

BF16 = ml_dtypes.bfloat16
FP8 = ml_dtypes.float8_e4m3fn
FP8_MAX = 448.0


def rng(seed=0):
    return np.random.default_rng(seed)


def quant_per_token(x, ue8m0=False):
    """(1, 128) groups along K: fp8 values and fp32 scales [M, ceil(K/128)]."""
    m, k = x.shape
    kb = -(-k // 128)
    xp = np.zeros((m, kb * 128))
    xp[:, :k] = x
    amax = np.maximum(np.abs(xp.reshape(m, kb, 128)).max(-1), 1e-4)
    sf = amax / FP8_MAX
    if ue8m0:
        sf = 2.0 ** np.ceil(np.log2(sf))
    q = (xp.reshape(m, kb, 128) / sf[:, :, None]).reshape(m, -1)[:, :k].astype(FP8)
    return q, sf.astype(np.float32)


def quant_per_block(x, ue8m0=False):
    """(128, 128) blocks: fp8 values and fp32 scales [ceil(N/128), ceil(K/128)]."""
    n, k = x.shape
    nb, kb = -(-n // 128), -(-k // 128)
    xp = np.zeros((nb * 128, kb * 128))
    xp[:n, :k] = x
    v = xp.reshape(nb, 128, kb, 128)
    sf = np.maximum(np.abs(v).max(axis=(1, 3)), 1e-4) / FP8_MAX
    if ue8m0:
        sf = 2.0 ** np.ceil(np.log2(sf))
    q = (v / sf[:, None, :, None]).reshape(nb * 128, kb * 128)[:n, :k].astype(FP8)
    return q, sf.astype(np.float32)


def dequant_per_token(q, sf):
    k = q.shape[-1]
    return q.astype(np.float64) * np.repeat(sf.astype(np.float64), 128, axis=-1)[..., :k]


def dequant_per_block(q, sf):
    n, k = q.shape[-2:]
    s = np.repeat(np.repeat(sf.astype(np.float64), 128, axis=-2), 128, axis=-1)
    return q.astype(np.float64) * s[..., :n, :k]


def close(got, want, dtype, scale=None):
    """Compare against a float64 reference, relative to the reference's magnitude."""
    tol = {"float32": 1e-5, "bfloat16": 1e-2, "float8_e4m3fn": 1e-1}[dtype]
    scale = scale if scale is not None else max(1.0, float(np.max(np.abs(want))) if want.size else 1.0)
    err = float(np.max(np.abs(got.astype(np.float64) - want))) if want.size else 0.0
    assert got.shape == want.shape and err <= tol * scale, f"max abs error {err:g} > {tol * scale:g}"
