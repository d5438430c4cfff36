"""FlashMLA decode on tilelang_mini: get_mla_metadata + flash_mla_with_kvcache (paged KV through a
block table, variable sequence lengths, split KV and the combine kernel), checked against a
float64 softmax attention and estimated on both chips for a DeepSeek decode batch.

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


def main(argv=None):
    from _common import ESTIMATE_CHIPS, example_args, library_run, verdict, verify
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
    Bb, L = 64, 4096
    big_seq = np.full(Bb, L, np.int32)
    big_meta, big_splits = flash_mla.get_mla_metadata(big_seq, 128, 1)
    big = (np.empty((Bb, 1, 128, D), bfloat16), np.empty((Bb * L // PAGE, PAGE, 1, D), bfloat16),
           np.arange(Bb * L // PAGE, dtype=np.int32).reshape(Bb, -1), big_seq, DV, big_meta,
           big_splits)
    for chip in ESTIMATE_CHIPS:
        est = flash_mla.flash_mla_with_kvcache.estimate(*big, chip=chip)
        print(f"estimate flash_mla_with_kvcache (B={Bb}, h_q=128, seqlen {L}) on {chip}: "
              f"{est.time_us:.1f} us")
    return verdict("flash_mla", ok)


if __name__ == "__main__":
    raise SystemExit(main())
