"""FlashMLA's sparse decode on an FP8 KV cache (is_fp8_kvcache=True, indices=): the cache bytes
laid out here from FlashMLA's interface description (per token 512 e4m3, 4 fp32 scales, 64 bf16
RoPE values), the reference in float64 from its public reference semantics (invalid index -1,
topk_length, attn_sink, a query without keys -> out 0, lse +inf); both targets, simulate."""
import math

import ml_dtypes
import numpy as np
import pytest
from refs import BF16, FP8, close, rng

from tilelang_mini.kernels import flash_mla

BLOCK = 64


def fp8_cache(kv):
    """kv [T, 576] float -> (bytes [T, 656] uint8, float64 values the cache stands for)."""
    t = kv.shape[0]
    nope, rope = kv[:, :512], kv[:, 512:].astype(BF16)
    tiles = nope.reshape(t, 4, 128)
    sf = 2.0 ** np.ceil(np.log2(np.maximum(np.abs(tiles).max(-1), 1e-4) / 448.0))
    q8 = (tiles / sf[:, :, None]).astype(FP8)
    out = np.zeros((t, 656), np.uint8)
    out[:, :512] = q8.reshape(t, 512).view(np.uint8)
    out[:, 512:528] = sf.astype(np.float32).view(np.uint8).reshape(t, 16)
    out[:, 528:] = rope.view(np.uint8).reshape(t, 128)
    vals = np.concatenate([(q8.astype(np.float64) * sf[:, :, None]).reshape(t, 512),
                           rope.astype(np.float64)], axis=1)
    return out, vals


def attend(q, k, scale, sink):
    """One query's float64 attention over keys k [n, 512 + rope] (values: the first 512
    columns): (output [hq, 512], log-sum-exp [hq]), divided by 1 + exp(sink - lse) with a sink."""
    s = q.astype(np.float64) @ k.T * scale   # [hq, n]
    m = s.max(-1, keepdims=True)
    l = np.log(np.exp(s - m).sum(-1)) + m[:, 0]
    o = np.exp(s - l[:, None]) @ k[:, :512]
    if sink is not None:
        o = o / (1 + np.exp(sink.astype(np.float64) - l))[:, None]
    return o, l


def sparse_ref(q, kv, indices, topk_length, sink, scale):
    """Float64 attention over each query's kept indices; V is a key row's first 512 columns
    (NoPE for the 576-wide V32 rows, the whole row for MODEL1's 512-wide ones)."""
    b, sq, hq, _ = q.shape
    nt, topk = kv.shape[0], indices.shape[-1]
    out = np.zeros((b, sq, hq, 512))
    lse = np.full((b, hq, sq), np.inf)
    for bi in range(b):
        for si in range(sq):
            ids = indices[bi, si].astype(np.int64)
            keep = (ids >= 0) & (ids < nt) & (np.arange(topk) < topk_length[bi])
            if not keep.any():
                continue
            out[bi, si], lse[bi, :, si] = attend(q[bi, si], kv[ids[keep]], scale, sink)
    return out, lse


@pytest.mark.parametrize("B,SQ,HQ,topk,sink", [(2, 1, 16, 70, False), (1, 2, 40, 600, True)])
def test_sparse_fp8_decode(target, B, SQ, HQ, topk, sink):
    r = rng(41)
    nb = 5
    nt = nb * BLOCK
    raw, vals = fp8_cache(r.standard_normal((nt, 576)) * 2)
    raw[7, :512] = 0x7F  # a NaN token (e4m3 0x7f): only ever named by an invalid slot
    q = r.standard_normal((B, SQ, HQ, 576)).astype(BF16)
    indices = r.integers(0, nt, (B, SQ, topk)).astype(np.int32)
    indices[indices == 7] = 8
    indices[0, 0, ::5] = -1                       # invalid slots
    indices[0, 0, 3] = nt + 9                     # past the cache: invalid too
    if B > 1:
        indices[1, 0, :] = -1                     # a query without any key
    tl_len = np.array([topk - 3] + [topk] * (B - 1), np.int32)  # the first batch keeps fewer
    sink_arr = r.standard_normal(HQ).astype(np.float32) if sink else None
    if sink:
        sink_arr[0] = np.inf                      # +inf: that head's output is 0
    meta, _ = flash_mla.get_mla_metadata()
    out, lse = flash_mla.flash_mla_with_kvcache(
        q, raw.reshape(nb, BLOCK, 1, 656), None, None, 512, meta, None,
        is_fp8_kvcache=True, indices=indices, attn_sink=sink_arr, topk_length=tl_len,
        target=target)
    want_o, want_l = sparse_ref(q, vals, indices, tl_len, sink_arr, 1 / math.sqrt(576))
    close(out, want_o, "bfloat16")  # relative to the largest output (values up to ~4)
    finite = np.isfinite(want_l)
    assert np.array_equal(np.isfinite(lse), finite) and np.all(lse[~finite] == np.inf)
    close(lse[finite], want_l[finite], "float32", scale=10.0)


def test_sparse_fp8_decode_simulates():
    r = rng(42)
    nt = 2 * BLOCK
    raw, vals = fp8_cache(r.standard_normal((nt, 576)))
    q = r.standard_normal((1, 1, 8, 576)).astype(BF16)
    indices = r.integers(-1, nt, (1, 1, 40)).astype(np.int32)
    launches = flash_mla.flash_mla_with_kvcache.launches(
        q, raw.reshape(2, BLOCK, 1, 656), None, None, 512, None, None, is_fp8_kvcache=True,
        indices=indices, target="numpy")
    assert len(launches) == 2
    for kernel, arrays in launches:
        _, report = kernel.simulate(*arrays)
        assert report.cycles > 0
    out = launches[1][1][-2]
    want_o, _ = sparse_ref(q, vals, indices, [40], None, 1 / math.sqrt(576))
    close(out, want_o, "bfloat16", scale=1.0)


def model1_cache(kv, page, pad_to=576):
    """MODEL1's layout from FlashMLA's description: per block, each token's 448 e4m3 values and
    64 bf16 RoPE values (576 bytes), then each token's 7 UE8M0 scales (one per 64 values) and a
    pad byte; blocks padded to a multiple of 576 bytes. -> (the [blocks, page, 1, 584] view of
    the padded buffer, float64 values [T, 512] the cache stands for)."""
    t = kv.shape[0]
    nb = t // page
    nope, rope = kv[:, :448], kv[:, 448:].astype(BF16)
    tiles = nope.reshape(t, 7, 64)
    sf = 2.0 ** np.ceil(np.log2(np.maximum(np.abs(tiles).max(-1), 1e-4) / 448.0))
    q8 = (tiles / sf[:, :, None]).astype(FP8)
    block = page * 584
    padded = -(-block // pad_to) * pad_to
    buf = np.full((nb, padded), 0xAB, np.uint8)           # pad bytes: garbage
    data = np.concatenate([q8.reshape(t, 448).view(np.uint8),
                           rope.view(np.uint8).reshape(t, 128)], axis=1).reshape(nb, page * 576)
    buf[:, :page * 576] = data
    scales = np.zeros((t, 8), np.uint8)
    scales[:, :7] = (np.log2(sf).astype(np.int64) + 127).astype(np.uint8)
    buf[:, page * 576:page * 584] = scales.reshape(nb, page * 8)
    view = np.lib.stride_tricks.as_strided(buf, (nb, page, 1, 584), (padded, 584, 584, 1))
    vals = np.concatenate([(q8.astype(np.float64) * sf[:, :, None]).reshape(t, 448),
                           rope.astype(np.float64)], axis=1)
    return view, vals


@pytest.mark.parametrize("B,SQ,HQ,page,topk,sink", [(2, 1, 16, 64, 45, False),
                                                     (1, 2, 24, 8, 300, True)])
def test_sparse_decode_model1_layout(target, B, SQ, HQ, page, topk, sink):
    """MODEL1 (q head_dim 512, blocks of `page` tokens padded apart, UE8M0 scales per 64):
    invalid and out-of-cache slots, topk_length, a query without keys, the sink."""
    r = rng(44)
    nb = 6
    nt = nb * page
    kc, vals = model1_cache(r.standard_normal((nt, 512)) * 2, page)
    q = r.standard_normal((B, SQ, HQ, 512)).astype(BF16)
    indices = r.integers(0, nt, (B, SQ, topk)).astype(np.int32)
    indices[0, 0, ::4] = -1
    indices[0, -1, 1] = nt + 3
    if SQ > 1:
        indices[0, 1, :] = -1                     # a query without any key
    tl_len = np.array([topk - 5] + [topk] * (B - 1), np.int32)
    sink_arr = r.standard_normal(HQ).astype(np.float32) if sink else None
    meta, _ = flash_mla.get_mla_metadata()
    out, lse = flash_mla.flash_mla_with_kvcache(
        q, kc, None, None, 512, meta, None, is_fp8_kvcache=True, indices=indices,
        attn_sink=sink_arr, topk_length=tl_len, target=target)
    want_o, want_l = sparse_ref(q, vals, indices, tl_len, sink_arr, 1 / math.sqrt(512))
    close(out, want_o, "bfloat16")
    assert np.array_equal(np.isinf(lse), np.isinf(want_l))
    finite = np.isfinite(want_l)
    close(lse[finite], want_l[finite], "float32", scale=10)
    if target == "numpy" and B == 2:
        for kernel, arrays in flash_mla.flash_mla_with_kvcache.launches(
                q, kc, None, None, 512, meta, None, is_fp8_kvcache=True, indices=indices,
                topk_length=tl_len, target="numpy"):
            _, report = kernel.simulate(*arrays)
            assert report.cycles > 0
    with pytest.raises(ValueError, match="one KV head"):
        flash_mla.flash_mla_with_kvcache(q, np.zeros((nb, page, 2, 584), np.uint8), None, None,
                                         512, meta, None, is_fp8_kvcache=True, indices=indices)


def sparse_ref_lists(q, lists, sink, scale):
    """Float64 attention of each query over the kept tokens of several (values [T, d], indices
    [B, s_q, topk], topk_length [B] or None) lists at once: FlashMLA's extra_k_cache tokens join
    the main top-k tokens in one softmax (its reference concatenates the gathered rows)."""
    b, sq, hq, _ = q.shape
    out = np.zeros((b, sq, hq, 512))
    lse = np.full((b, hq, sq), np.inf)
    for bi in range(b):
        for si in range(sq):
            rows = []
            for vals, ind, length in lists:
                ids = ind[bi, si].astype(np.int64)
                n = ind.shape[-1] if length is None else length[bi]
                keep = (ids >= 0) & (ids < vals.shape[0]) & (np.arange(ids.size) < n)
                rows.append(vals[ids[keep]])
            k = np.concatenate(rows)
            if not len(k):
                continue
            out[bi, si], lse[bi, :, si] = attend(q[bi, si], k, scale, sink)
    return out, lse


@pytest.mark.parametrize("layout,B,SQ,HQ,topk,extra_topk,with_len,sink", [
    ("v32", 2, 2, 16, 70, 40, True, False),
    ("model1", 2, 1, 24, 45, 600, True, True),
    ("model1", 1, 2, 8, 530, 33, False, False),
])
def test_sparse_decode_with_extra_k_cache(target, layout, B, SQ, HQ, topk, extra_topk,
                                          with_len, sink):
    """extra_k_cache / extra_indices_in_kvcache / extra_topk_length (FlashMLA's interface):
    a second cache of the same layout with its own page size, whose named tokens join the
    main list's in one softmax; invalid and out-of-cache slots in both lists, a query whose
    main list is empty (the extra tokens alone), a query with no token at all (out 0, lse
    +inf), extra_topk_length shorter than the extra list, the sink."""
    r = rng(46)
    d = 576 if layout == "v32" else 512
    if layout == "v32":
        nb, nbx = 5, 3
        raw, vals = fp8_cache(r.standard_normal((nb * BLOCK, 576)) * 2)
        xraw, xvals = fp8_cache(r.standard_normal((nbx * BLOCK, 576)) * 2)
        kc, xkc = raw.reshape(nb, BLOCK, 1, 656), xraw.reshape(nbx, BLOCK, 1, 656)
    else:
        kc, vals = model1_cache(r.standard_normal((6 * 16, 512)) * 2, 16)
        xkc, xvals = model1_cache(r.standard_normal((5 * 8, 512)) * 2, 8)   # another page size
    nt, xnt = vals.shape[0], xvals.shape[0]
    q = r.standard_normal((B, SQ, HQ, d)).astype(BF16)
    ind = r.integers(0, nt, (B, SQ, topk)).astype(np.int32)
    xind = r.integers(0, xnt, (B, SQ, extra_topk)).astype(np.int32)
    ind[0, 0, ::3] = -1
    xind[0, 0, ::4] = -1
    xind[0, -1, 2] = xnt + 1                      # past the extra cache: invalid
    ind[-1, -1, :] = -1                           # main list empty: the extra tokens alone
    if SQ > 1:
        ind[0, 1, :] = -1
        xind[0, 1, :] = -1                        # nothing at all
    tl_len = np.array([topk - 2] + [topk] * (B - 1), np.int32) if with_len else None
    xl_len = np.array([extra_topk - 5] + [max(1, extra_topk // 2)] * (B - 1), np.int32) \
        if with_len else None
    sink_arr = r.standard_normal(HQ).astype(np.float32) if sink else None
    args = (q, kc, None, None, 512, flash_mla.get_mla_metadata()[0], None)
    kw = dict(is_fp8_kvcache=True, indices=ind, topk_length=tl_len, attn_sink=sink_arr,
              extra_k_cache=xkc, extra_indices_in_kvcache=xind, extra_topk_length=xl_len)
    out, lse = flash_mla.flash_mla_with_kvcache(*args, **kw, target=target)
    want_o, want_l = sparse_ref_lists(q, [(vals, ind, tl_len), (xvals, xind, xl_len)], sink_arr,
                                      1 / math.sqrt(d))
    close(out, want_o, "bfloat16")
    assert np.array_equal(np.isinf(lse), np.isinf(want_l)) and np.all(lse[np.isinf(lse)] > 0)
    finite = np.isfinite(want_l)
    close(lse[finite], want_l[finite], "float32", scale=10)
    # the extra tokens change the answer: the main list alone gives other numbers
    alone, _ = sparse_ref_lists(q, [(vals, ind, tl_len)], sink_arr, 1 / math.sqrt(d))
    assert np.max(np.abs(alone - want_o)) > 0.05
    if target == "numpy" and B * SQ * HQ <= 32:
        launches = flash_mla.flash_mla_with_kvcache.launches(*args, **kw, target="numpy")
        assert len(launches) == 3   # the main list's splits, the extra list's, the combine
        for kernel, arrays in launches:
            _, report = kernel.simulate(*arrays)
            assert report.cycles > 0
        close(launches[-1][1][-2], want_o, "bfloat16")


Q_ERR = np.zeros((1, 1, 8, 576), BF16)           # the argument-error calls' operands
CACHE_ERR = np.zeros((1, BLOCK, 1, 656), np.uint8)
IND_ERR = np.zeros((1, 1, 4), np.int32)
FP8_ERR = dict(is_fp8_kvcache=True, indices=IND_ERR)


def _call(cache=CACHE_ERR, table=None, seqlens=None, **kwargs):
    """A flash_mla_with_kvcache call on the operands above, made when the test runs."""
    return lambda: flash_mla.flash_mla_with_kvcache(Q_ERR, cache, table, seqlens, 512, None,
                                                    None, **kwargs)


ARGUMENT_ERRORS = [
    ("is_fp8_kvcache=True", _call(indices=IND_ERR)),
    ("causal must be False", _call(causal=True, **FP8_ERR)),
    ("pass indices=", _call(table=np.zeros((1, 1), np.int32), seqlens=np.zeros(1, np.int32),
                            is_fp8_kvcache=True)),
    ("656", _call(np.zeros((1, BLOCK, 1, 576), np.uint8), **FP8_ERR)),
    ("come together", _call(extra_k_cache=CACHE_ERR, **FP8_ERR)),
    ("come together", _call(extra_topk_length=np.ones(1, np.int32), **FP8_ERR)),
    ("extra_k_cache must be", _call(extra_k_cache=np.zeros((1, BLOCK, 1, 584), np.uint8),
                                    extra_indices_in_kvcache=IND_ERR, **FP8_ERR)),
    ("extra_indices_in_kvcache must be",
     _call(extra_k_cache=CACHE_ERR, extra_indices_in_kvcache=np.zeros((2, 1, 4), np.int32),
           **FP8_ERR)),
]


@pytest.mark.parametrize("match, call", ARGUMENT_ERRORS,
                         ids=[f"{n}-{m}" for n, (m, _) in enumerate(ARGUMENT_ERRORS)])
def test_sparse_argument_errors(match, call):
    with pytest.raises(ValueError, match=match):
        call()


def test_extra_k_cache_needs_sparse_attention():
    with pytest.raises(ValueError, match="take sparse attention"):
        flash_mla.flash_mla_with_kvcache(
            Q_ERR, np.zeros((1, 64, 1, 576), BF16), np.zeros((1, 1), np.int32),
            np.ones(1, np.int32), 512, *flash_mla.get_mla_metadata(np.ones(1, np.int32), 8, 1),
            extra_k_cache=CACHE_ERR)
