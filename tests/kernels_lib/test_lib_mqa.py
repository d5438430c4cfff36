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


def mqa_inputs(r, S, H, D, SK):
    """FP8 q [S,H,D], kv [SK,D] with per-key scales, weights [S,H] and each query's key window
    [ks, ke) (query 2's empty)."""
    q = (r.standard_normal((S, H, D)) * 0.5).astype(FP8)
    kv = (r.standard_normal((SK, D)) * 0.5).astype(FP8)
    sf = r.uniform(0.5, 2.0, SK).astype(np.float32)
    w = r.standard_normal((S, H)).astype(np.float32)
    ks = r.integers(0, SK // 4, S).astype(np.int32)
    ke = np.minimum(ks + r.integers(0, SK - SK // 10, S), SK).astype(np.int32)
    ke[2] = ks[2]  # an empty window
    return q, kv, sf, w, ks, ke


@pytest.mark.parametrize("chip", ("ascend910b", "ascend950"))
def test_fp8_mqa_logits(target, chip):
    S, H, D, SK = 37, 3, 64, 200
    q, kv, sf, w, ks, ke = mqa_inputs(rng(30), S, H, D, SK)
    for clean in (True, False):
        got = dg.fp8_mqa_logits(q, (kv, sf), w, ks, ke, clean_logits=clean, target=target,
                                chip=chip)
        want = mqa_ref(q, kv, sf, w, ks, ke, clean)
        finite = np.isfinite(want)
        assert np.array_equal(np.isneginf(got), ~finite)
        close(got[finite], want[finite], "float32", scale=np.sqrt(D * H) * 4)


def kv_cache_bytes(kv):
    """DeepGEMM's paged FP8 KV layout: per block, the e4m3 rows then their fp32 scales."""
    nb, bkv, _, d = kv.shape
    sf = (np.maximum(np.abs(kv).max(-1, keepdims=True), 1e-4) / 448).astype(np.float32)
    q = (kv / sf).astype(FP8)
    out = np.empty((nb, bkv * (d + 4)), np.uint8)
    out[:, :bkv * d] = q.reshape(nb, -1).view(np.uint8)
    out[:, bkv * d:] = sf.reshape(nb, bkv).view(np.uint8)
    return out.reshape(nb, bkv, 1, d + 4), q.astype(np.float64) * sf


@pytest.mark.parametrize("chip", ("ascend910b", "ascend950"))
def test_fp8_paged_mqa_logits(target, chip):
    r = rng(31)
    B, NN, H, D, BKV, MAXB, NB, L = 3, 2, 2, 32, 16, 4, 13, 60
    lens = np.array([37, 2, 64], np.int32)  # a tail page, fewer keys than a page, a full table
    kv, kv64 = kv_cache_bytes(r.standard_normal((NB, BKV, 1, D)))
    q = (r.standard_normal((B, NN, H, D)) * 0.5).astype(FP8)
    w = r.standard_normal((B * NN, H)).astype(np.float32)
    bt = r.permutation(NB)[:B * MAXB].reshape(B, MAXB).astype(np.int32)
    meta = dg.get_paged_mqa_logits_metadata(lens, BKV, 4)
    got = dg.fp8_paged_mqa_logits(q, kv, w, lens, bt, meta, L, target=target, chip=chip)
    check_logits(got, paged_ref(q, kv64, w, lens, bt, L), D, H)


def paged_ref(q, kv64, w, lens, bt, L):
    """float64 paged logits [B * NN, L]: query i of batch b (position lens[b] - NN + i) over the
    keys of its page table, -inf past its position (causal) and past L."""
    B, NN = q.shape[:2]
    want = np.full((B * NN, L), -np.inf)
    for b in range(B):
        keys = np.concatenate([kv64[bt[b, p], :, 0] for p in range(bt.shape[1])])
        for i in range(NN):
            pos = lens[b] - NN + i
            s = np.maximum(np.einsum("hd,td->ht", q[b, i].astype(np.float64), keys), 0)
            logit = (s * w[b * NN + i, :, None]).sum(0)
            n = min(pos + 1, L)
            if n > 0:
                want[b * NN + i, :n] = logit[:n]
    return want


def check_logits(got, want, D, H):
    """-inf exactly where the reference has it, the finite logits close."""
    finite = np.isfinite(want)
    assert np.array_equal(np.isneginf(got), ~finite)
    close(got[finite], want[finite], "float32", scale=np.sqrt(D * H) * 4)


def meta_ref(lens, block_kv, num_sms):
    """DeepGEMM's schedule: the pages of all batches split evenly over the SMs; row s is the
    (batch, page offset) of SM s's first page, (B, 0) past the end."""
    pages = [-(-int(n) // block_kv) for n in lens]
    total = sum(pages)
    per = -(-total // num_sms) if total else 0
    out = []
    for s in range(num_sms + 1):
        g, start = min(s * per, total), 0
        for b, p in enumerate(pages):
            if g < start + p:
                out.append((b, g - start))
                break
            start += p
        else:
            out.append((len(pages), 0))
    return np.array(out, np.int32)


@pytest.mark.parametrize("lens,nsm", [([70, 0, 5, 300], 4), ([0, 0], 3), ([1], 24),
                                      ([640, 64, 0, 65], 5)])
def test_paged_mqa_metadata_kernel(target, lens, nsm):
    lens = np.array(lens, np.int32)
    got = dg.get_paged_mqa_logits_metadata(lens, 64, nsm, target=target)
    assert np.array_equal(got, meta_ref(lens, 64, nsm))
    assert dg.get_paged_mqa_logits_metadata.estimate(lens, 64, nsm).time_us > 0
