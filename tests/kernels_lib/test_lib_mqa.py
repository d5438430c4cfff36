"""DeepGEMM's fp8_mqa_logits: per-row key windows (one empty), relu of the scaled scores weighted
over heads, -inf outside the window when clean, on every target and both chips."""
import numpy as np
import pytest
from refs import FP8, close, rng

from tilelang_mini.kernels import deep_gemm as dg


def mqa_ref(q, kv, sf, w, ks, ke, clean):
    score = np.einsum("shd,td->sht", q.astype(np.float64), kv.astype(np.float64))
    score = np.maximum(score * sf.astype(np.float64)[None, None, :], 0)
    logits = np.einsum("sht,sh->st", score, w.astype(np.float64))
    if clean:
        t = np.arange(kv.shape[0])
        inside = (t[None, :] >= ks[:, None]) & (t[None, :] < ke[:, None])
        logits = np.where(inside, logits, -np.inf)
    return logits


@pytest.mark.parametrize("chip", ("ascend910b", "ascend950"))
def test_fp8_mqa_logits(target, chip):
    r = rng(30)
    S, H, D, SK = 37, 3, 64, 200
    q = (r.standard_normal((S, H, D)) * 0.5).astype(FP8)
    kv = (r.standard_normal((SK, D)) * 0.5).astype(FP8)
    sf = r.uniform(0.5, 2.0, SK).astype(np.float32)
    w = r.standard_normal((S, H)).astype(np.float32)
    ks = r.integers(0, 50, S).astype(np.int32)
    ke = np.minimum(ks + r.integers(0, 180, S), SK).astype(np.int32)
    ke[3] = ks[3]  # an empty window
    for clean in (True, False):
        got = dg.fp8_mqa_logits(q, (kv, sf), w, ks, ke, clean_logits=clean, target=target,
                                chip=chip)
        want = mqa_ref(q, kv, sf, w, ks, ke, clean)
        finite = np.isfinite(want)
        assert np.array_equal(np.isneginf(got), ~finite)
        close(got[finite], want[finite], "float32", scale=np.sqrt(D * H) * 4)
