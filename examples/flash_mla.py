"""FlashMLA decode on tilelang_mini: get_mla_metadata + flash_mla_with_kvcache (paged KV through a
block table, variable sequence lengths, split KV and the combine kernel) and the sparse decode
on FlashMLA's FP8 cache (indices), checked against a float64 softmax attention and estimated on
both chips for a DeepSeek decode batch.

    python examples/flash_mla.py [--target numpy|llvm] [--chip ascend910b|ascend950] [--shape B H]
"""
import math

import numpy as np

from tilelang_mini.kernels import flash_mla

DEFAULT_ARGS = (2, 16)  # batch, query heads (s_q = 1, one KV head, d = 576, dv = 512)
D, DV, PAGE = 576, 512, 64


def reference(q, kc, bt, seqlens):
    b_, _, hq, d = q.shape
    out = np.zeros((b_, 1, hq, DV))
    for b in range(b_):
        keys = np.concatenate([kc[p, :, 0] for p in bt[b]])[:seqlens[b]].astype(np.float64)
        s = q[b, 0].astype(np.float64) @ keys.T / math.sqrt(d)
        p = np.exp(s - s.max(-1, keepdims=True))
        out[b, 0] = (p / p.sum(-1, keepdims=True)) @ keys[:, :DV]
    return out


def fp8_cache(kv):
    """kv [T, 576] -> (FlashMLA's FP8 sparse layout [T, 656] uint8, the values it stands for):
    512 e4m3 values, 4 fp32 power-of-two scales (one per 128), 64 bf16 RoPE values."""
    from ml_dtypes import bfloat16, float8_e4m3fn
    t = kv.shape[0]
    tiles = kv[:, :512].reshape(t, 4, 128)
    sf = 2.0 ** np.ceil(np.log2(np.maximum(np.abs(tiles).max(-1), 1e-4) / 448))
    q8 = (tiles / sf[:, :, None]).astype(float8_e4m3fn)
    rope = kv[:, 512:].astype(bfloat16)
    raw = np.concatenate([q8.reshape(t, 512).view(np.uint8),
                          sf.astype(np.float32).view(np.uint8).reshape(t, 16),
                          rope.view(np.uint8).reshape(t, 128)], axis=1)
    return raw, np.concatenate([(q8.astype(np.float64) * sf[:, :, None]).reshape(t, 512),
                                rope.astype(np.float64)], axis=1)


def sparse_reference(q, kv, ind):
    out = np.zeros((q.shape[0], 1, q.shape[2], DV))
    for b in range(q.shape[0]):
        keys = kv[ind[b, 0][ind[b, 0] >= 0]]
        if len(keys):
            s = q[b, 0].astype(np.float64) @ keys.T / math.sqrt(D)
            p = np.exp(s - s.max(-1, keepdims=True))
            out[b, 0] = (p / p.sum(-1, keepdims=True)) @ keys[:, :DV]
    return out


def main(argv=None):
    from _common import example_args, library_run, print_estimates, verdict, verify
    from ml_dtypes import bfloat16
    args = example_args(__doc__, argv, dtype="bfloat16", shape=DEFAULT_ARGS)
    B, HQ = args.shape
    run, rng = library_run(args)
    seqlens = rng.integers(1, 3 * PAGE, B).astype(np.int32)
    max_blocks = 3
    kc = rng.standard_normal((B * max_blocks, PAGE, 1, D)).astype(bfloat16)
    bt = rng.permutation(B * max_blocks).reshape(B, max_blocks).astype(np.int32)
    q = rng.standard_normal((B, 1, HQ, D)).astype(bfloat16)
    meta, splits = flash_mla.get_mla_metadata(seqlens, HQ, 1, num_parts=4)
    out, lse = flash_mla.flash_mla_with_kvcache(q, kc, bt, seqlens, DV, meta, splits, **run)
    ok = verify("out", out, reference(q, kc, bt, seqlens), "bfloat16")

    # sparse decoding on FlashMLA's FP8 cache: 656 bytes a token, tokens named by indices
    raw, vals = fp8_cache(kc.reshape(-1, D).astype(np.float64))
    topk = 40
    ind = rng.integers(-1, raw.shape[0], (B, 1, topk)).astype(np.int32)   # -1: no token
    sout, _ = flash_mla.flash_mla_with_kvcache(
        q, raw.reshape(kc.shape[0], PAGE, 1, 656), None, None, DV, flash_mla.get_mla_metadata()[0],
        None, is_fp8_kvcache=True, indices=ind, **run)
    ok &= verify("sparse FP8 out", sout, sparse_reference(q, vals, ind), "bfloat16")
    Bb, L = 64, 4096
    big_seq = np.full(Bb, L, np.int32)
    big_meta, big_splits = flash_mla.get_mla_metadata(big_seq, 128, 1)
    big = (np.empty((Bb, 1, 128, D), bfloat16), np.empty((Bb * L // PAGE, PAGE, 1, D), bfloat16),
           np.arange(Bb * L // PAGE, dtype=np.int32).reshape(Bb, -1), big_seq, DV, big_meta,
           big_splits)
    print_estimates(f"flash_mla_with_kvcache (B={Bb}, h_q=128, seqlen {L})",
                    flash_mla.flash_mla_with_kvcache.estimate, *big)
    topk = 2048
    sparse_big = (big[0], np.empty((Bb * L // PAGE, PAGE, 1, 656), np.uint8), None, None, DV,
                  None, None)
    big_ind = (np.arange(Bb * topk) % (Bb * L)).astype(np.int32).reshape(Bb, 1, topk)
    print_estimates(f"flash_mla_with_kvcache sparse FP8 (B={Bb}, h_q=128, topk {topk})",
                    flash_mla.flash_mla_with_kvcache.estimate, *sparse_big, is_fp8_kvcache=True,
                    indices=big_ind)
    return verdict("flash_mla", ok)


if __name__ == "__main__":
    raise SystemExit(main())
