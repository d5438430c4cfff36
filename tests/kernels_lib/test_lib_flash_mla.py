"""FlashMLA decode: paged KV through a shuffled block table, variable lengths (one empty), split
KV with the combine, causal with s_q = 2, against a float64 reference written from FlashMLA's
README/test description, on every target; the kernels simulate cleanly."""
import math

import numpy as np
import pytest
from refs import BF16, close, rng

from tilelang_mini.kernels import flash_mla as fm

B, SQ, HQ, D, DV, MAXB, NB = 3, 2, 20, 576, 512, 8, 26


def mla_ref(q, kc, bt, seqlens, dv, causal):
    b_, sq, hq, d = q.shape
    hk = kc.shape[2]
    out, lse = np.zeros((b_, sq, hq, dv)), np.zeros((b_, hq, sq))
    for b in range(b_):
        n = int(seqlens[b])
        allowed = np.ones((sq, n), bool)
        if causal:
            allowed = np.tril(allowed, k=n - sq)
        for h in range(hq):  # query head h reads KV head h // (hq / hk)
            keys = np.concatenate([kc[bt[b, p], :, h // (hq // hk), :]
                                   for p in range(bt.shape[1])], 0)[:n].astype(np.float64)
            s = np.einsum("qd,kd->qk", q[b, :, h].astype(np.float64), keys) / math.sqrt(d)
            for i in range(sq):
                row = s[i][allowed[i]]
                if row.size == 0:  # no key: out 0, lse +inf
                    lse[b, h, i] = np.inf
                    continue
                m = row.max()
                lse[b, h, i] = m + np.log(np.exp(row - m).sum())
                p = np.exp(row - lse[b, h, i])
                out[b, i, h] = p @ keys[allowed[i]][:, :dv]
    return out, lse


@pytest.mark.parametrize("causal", (False, True))
def test_flash_mla_decode(target, causal):
    r = rng(20)
    seqlens = np.array([450, 0, 1], np.int32)  # a tail page, an empty sequence, a single key
    kc = r.standard_normal((NB, 64, 1, D)).astype(BF16)
    bt = r.permutation(NB)[:B * MAXB].reshape(B, MAXB).astype(np.int32)
    q = r.standard_normal((B, SQ, HQ, D)).astype(BF16)
    meta, splits = fm.get_mla_metadata(seqlens, SQ * HQ, 1, num_parts=4)
    assert splits[-1] > B  # the long sequence is split
    out, lse = fm.flash_mla_with_kvcache(q, kc, bt, seqlens, DV, meta, splits, causal=causal,
                                         target=target)
    want_out, want_lse = mla_ref(q, kc, bt, seqlens, DV, causal)
    assert out.shape == (B, SQ, HQ, DV) and lse.shape == (B, HQ, SQ)
    close(out, want_out, "bfloat16", scale=1)
    assert np.array_equal(np.isinf(lse), np.isinf(want_lse))
    finite = np.isfinite(want_lse)
    close(lse[finite], want_lse[finite], "float32", scale=10)


def test_flash_mla_simulates():
    r = rng(21)
    b, sq, hq, maxb, nb = 1, 1, 16, 2, 2
    seqlens = np.array([100], np.int32)
    kc = r.standard_normal((nb, 64, 1, D)).astype(BF16)
    q = r.standard_normal((b, sq, hq, D)).astype(BF16)
    bt = np.array([[1, 0]], np.int32)
    meta, splits = fm.get_mla_metadata(seqlens, hq, 1, num_parts=2)
    launches = fm.flash_mla_with_kvcache.launches(q, kc, bt, seqlens, DV, meta, splits,
                                                  target="numpy")
    assert len(launches) == 2
    for kernel, arrays in launches:
        _, report = kernel.simulate(*arrays)
        assert report.cycles > 0
    out = launches[1][1][2]
    keys = np.concatenate([kc[1, :, 0], kc[0, :, 0]])[:100].astype(np.float64)
    s = q[0, 0].astype(np.float64) @ keys.T / math.sqrt(D)
    p = np.exp(s - s.max(-1, keepdims=True))
    close(out[0, 0], (p / p.sum(-1, keepdims=True)) @ keys[:, :DV], "bfloat16", scale=1)
    est = fm.flash_mla_with_kvcache.estimate(q, kc, bt, seqlens, DV, meta, splits,
                                             chip="ascend950")
    assert est.time_us > kc.nbytes * 100 / 128 / 4e12 * 1e6  # at least the keys read once


def test_flash_mla_950_wide_head_blocks(target):
    """On the 950 (256 KiB L0C) a block takes 64 heads; 70 heads leave a partial block."""
    r = rng(22)
    seqlens = np.array([150, 5], np.int32)
    kc = r.standard_normal((NB, 64, 1, D)).astype(BF16)
    bt = r.permutation(NB)[:2 * MAXB].reshape(2, MAXB).astype(np.int32)
    q = r.standard_normal((2, 1, 70, D)).astype(BF16)
    meta, splits = fm.get_mla_metadata(seqlens, 70, 1, num_parts=3)
    out, lse = fm.flash_mla_with_kvcache(q, kc, bt, seqlens, DV, meta, splits, target=target,
                                         chip="ascend950")
    want_out, want_lse = mla_ref(q, kc, bt, seqlens, DV, False)
    close(out, want_out, "bfloat16", scale=1)
    close(lse, want_lse, "float32", scale=10)


@pytest.mark.parametrize("hq", (59, 7))
def test_flash_mla_950_odd_head_count(target, hq):
    """An odd number of heads below the 950's 64-head block: the block takes one more (a
    clipped tail row) so that the two vector cores split its rows; with 59 rows on one core
    the two 59 x 512 fp32 accumulators overflowed its UB (a BufferOverflowError for a legal
    call; fuzz library:f6a-1019)."""
    r = rng(23)
    seqlens = np.array([150, 5], np.int32)
    kc = r.standard_normal((NB, 64, 1, D)).astype(BF16)
    bt = r.permutation(NB)[:2 * MAXB].reshape(2, MAXB).astype(np.int32)
    q = r.standard_normal((2, 2, hq, D)).astype(BF16)
    meta, splits = fm.get_mla_metadata(seqlens, 2 * hq, 1, num_parts=3)
    out, lse = fm.flash_mla_with_kvcache(q, kc, bt, seqlens, DV, meta, splits, target=target,
                                         chip="ascend950", causal=True)
    want_out, want_lse = mla_ref(q, kc, bt, seqlens, DV, True)
    close(out, want_out, "bfloat16", scale=1)
    close(lse, want_lse, "float32", scale=10)


@pytest.mark.parametrize("hk", (2, 3))
def test_flash_mla_several_kv_heads(target, hk):
    """h_k > 1 (grouped-query): query head h reads KV head h // (h_q / h_k); 12 query heads
    over 2 or 3 KV heads (blocks of 6 or 4 heads, each within one KV head's group)."""
    r = rng(23 + hk)
    hq, seqlens = 12, np.array([70, 129], np.int32)
    kc = r.standard_normal((NB, 64, hk, D)).astype(BF16)
    bt = r.permutation(NB)[:2 * MAXB].reshape(2, MAXB).astype(np.int32)
    q = r.standard_normal((2, 1, hq, D)).astype(BF16)
    meta, splits = fm.get_mla_metadata(seqlens, hq // hk, hk, num_parts=3)
    out, lse = fm.flash_mla_with_kvcache(q, kc, bt, seqlens, DV, meta, splits, causal=True,
                                         target=target)
    want_out, want_lse = mla_ref(q, kc, bt, seqlens, DV, True)
    close(out, want_out, "bfloat16", scale=1)
    close(lse, want_lse, "float32", scale=10)
    with pytest.raises(ValueError, match="h_k dividing"):
        fm.flash_mla_with_kvcache(q, np.zeros((NB, 64, 5, D), BF16), bt, seqlens, DV, meta,
                                  splits, target=target)


def mla_meta_ref(seqlens, parts):
    """FlashMLA's tile scheduler, from its description: each batch costs its pages plus 5, a
    part's budget is max(ceil(total / parts) + 5, 10); batches are handed out in order, whole
    while they fit, else cut (a new split) when more than the 5 of overhead is left. Written as
    a list of (batch, first page, end page) pieces per part, then encoded as FlashMLA's rows."""
    pages = [-(-int(x) // 64) for x in seqlens]
    budget = max(-(-sum(p + 5 for p in pages) // parts) + 5, 10)
    pieces = [[] for _ in range(parts)]
    b, done = 0, 0
    for p in range(parts):
        room = budget
        while b < len(pages):
            need = pages[b] - done + 5
            if room >= need:
                pieces[p].append((b, done, pages[b]))
                room -= need
                b, done = b + 1, 0
                continue
            if room > 5:
                pieces[p].append((b, done, done + room - 5))
                done += room - 5
            break
    assert b == len(pages)
    splits = np.zeros(len(pages), int)
    meta = np.zeros((parts, 8), np.int32)
    nxt = (0, 0, 0)  # (batch, first key, split) where the next part starts
    for p in range(parts):
        meta[p, [0, 1, 4]] = nxt
        for (bi, lo, hi) in pieces[p]:
            splits[bi] += 1
        if pieces[p]:
            bi, lo, hi = pieces[p][-1]
            end = hi * 64 if hi < pages[bi] else int(seqlens[bi])
            meta[p, 2:4] = (bi, end)
            nxt = (bi, hi * 64, splits[bi]) if hi < pages[bi] else (bi + 1, 0, 0)
        else:  # nothing left: FlashMLA's rows for an idle part (last batch, its length)
            meta[p, 2:4] = (nxt[0] - 1, int(seqlens[nxt[0] - 1]))
    return meta, np.concatenate([[0], np.cumsum(splits)]).astype(np.int32)


@pytest.mark.parametrize("seqlens,parts", [([1], 24), ([0], 3), ([130, 0, 1], 4),
                                           ([4096, 65, 0, 7, 1000], 24), ([0, 0, 0], 2),
                                           ([8192], 7), ([64, 128, 63, 0, 5000, 1], 5),
                                           ([700, 640, 641, 0], 6), ([320, 321], 20)])
def test_mla_metadata_kernel(target, seqlens, parts):
    """get_mla_metadata is a one-block scalar kernel: batch 1, empty sequences, uneven lengths,
    more parts than items and many splits of one long sequence."""
    seqlens = np.array(seqlens, np.int32)
    meta, splits = fm.get_mla_metadata(seqlens, 64, 1, num_parts=parts, target=target)
    want_meta, want_splits = mla_meta_ref(seqlens, parts)
    assert np.array_equal(splits, want_splits) and np.array_equal(meta, want_meta)
    assert fm.get_mla_metadata.estimate(seqlens, 64, 1, num_parts=parts).time_us > 0
    assert [k.ir.name for k in fm.get_mla_metadata.kernels(seqlens, 64, 1)] == ["mla_metadata"]


def test_mla_metadata_without_arguments():
    meta, splits = fm.get_mla_metadata()
    assert splits is None and meta.shape == (24, 8) and not meta.any()
    assert fm.get_mla_metadata.kernels() == []
    assert fm.get_mla_metadata(num_parts=3)[0].shape == (3, 8)
