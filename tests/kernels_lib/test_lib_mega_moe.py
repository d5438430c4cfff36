"""Single-device MegaMoE (bf16 and fp8): routing with unused slots (-1), an expert nobody picks,
the SwiGLU clamp, against a float64 reference following DeepGEMM's epilogue roundings."""
import numpy as np
import pytest
from refs import BF16, FP8, close, dequant_per_block, dequant_per_token, quant_per_block, \
    quant_per_token, rng

from tilelang_mini.kernels import deep_gemm as dg

T_, H, I, E, K = 13, 256, 128, 4, 2


def bf16(x):
    return np.asarray(x, np.float64).astype(BF16).astype(np.float64)


def moe_ref(x, idx, w, l1, l2, clamp, quant_act=None):
    y = np.zeros((x.shape[0], l2.shape[1]))
    for t in range(x.shape[0]):
        for j in range(idx.shape[1]):
            e = idx[t, j]
            if e < 0:
                continue
            xt = x[t:t + 1] if quant_act is None else quant_act(x[t:t + 1])
            h = bf16(xt @ l1[e].T)[0]
            g, u = h[:I], h[I:]
            if clamp is not None:
                g, u = np.minimum(g, clamp), np.clip(u, -clamp, clamp)
            a = bf16(g / (1 + np.exp(-g)) * u * w[t, j])[None]
            a = a if quant_act is None else quant_act(a)
            y[t] += bf16(a @ l2[e].T)[0]
    return y


def _inputs(seed):
    r = rng(seed)
    x = r.standard_normal((T_, H)).astype(BF16)
    idx = np.stack([r.choice([0, 1, 3], K, replace=False) for _ in range(T_)]).astype(np.int32)
    idx[2, 1] = -1  # an unused slot; expert 2 gets no token
    w = r.uniform(0.1, 1.0, (T_, K)).astype(np.float32)
    l1 = (r.standard_normal((E, 2 * I, H)) / 8).astype(BF16)
    l2 = (r.standard_normal((E, H, I)) / 8).astype(BF16)
    return x, idx, w, l1, l2


@pytest.mark.parametrize("clamp", (None, 0.5))
def test_bf16_mega_moe(target, clamp):
    x, idx, w, l1, l2 = _inputs(60)
    y = np.full((T_, H), np.nan, BF16)
    dg.bf16_mega_moe(x, idx, w, l1, l2, y, activation_clamp=clamp, target=target)
    want = moe_ref(x.astype(np.float64), idx, w, l1.astype(np.float64), l2.astype(np.float64),
                   clamp)
    close(y, want, "bfloat16", scale=max(1.0, np.abs(want).max()))


def test_fp8_mega_moe(target):
    x, idx, w, l1, l2 = _inputs(61)
    q1 = [quant_per_block(l1[e].astype(np.float64)) for e in range(E)]
    q2 = [quant_per_block(l2[e].astype(np.float64)) for e in range(E)]
    w1 = (np.stack([q for q, _ in q1]), np.stack([s for _, s in q1]))
    w2 = (np.stack([q for q, _ in q2]), np.stack([s for _, s in q2]))
    y = np.empty((T_, H), BF16)
    dg.fp8_mega_moe(x, idx, w, w1, w2, y, chip="ascend950", target=target)
    d1 = np.stack([dequant_per_block(q, s) for q, s in q1])
    d2 = np.stack([dequant_per_block(q, s) for q, s in q2])
    want = moe_ref(x.astype(np.float64), idx, w, d1, d2, None,
                   quant_act=lambda a: dequant_per_token(*quant_per_token(a)))
    close(y, want, "bfloat16", scale=max(1.0, np.abs(want).max()))
