"""The sparse-attention indexer on tilelang_mini: DeepGEMM's fp8_mqa_logits (contiguous keys with
per-query windows, FP8 and FP4) and fp8_paged_mqa_logits (a paged FP8 cache through a block
table), then the top-k of each row of logits, checked against float64 NumPy and estimated on both chips at a
DeepSeek-sized shape.

    python examples/indexer.py [--target numpy|llvm] [--chip ascend910b|ascend950] [--shape S SK]
"""
import numpy as np

from tilelang_mini.kernels import deep_gemm, topk

DEFAULT_ARGS = (37, 300)  # query rows, keys (neither a multiple of a tile)
H, D, BLOCK_KV = 8, 128, 64


def mqa_reference(q, kv, sf, w, ks, ke):
    """logits[s, t] = sum_h relu(q[s, h] . kv[t] * sf[t]) * w[s, h]; -inf outside [ks, ke)."""
    score = np.einsum("shd,td->sht", q.astype(np.float64), kv.astype(np.float64)) * sf
    out = (np.maximum(score, 0) * w[:, :, None]).sum(1)
    t = np.arange(kv.shape[0])
    return np.where((t >= ks[:, None]) & (t < ke[:, None]), out, -np.inf)


def fp8_rows(rng, n):
    from ml_dtypes import float8_e4m3fn
    x = rng.standard_normal((n, D))
    sf = (np.abs(x).max(1) / 448.0).astype(np.float32)
    return (x / sf[:, None]).astype(float8_e4m3fn), sf


def fp4_values(packed, sf):
    """float64 values of packed e2m1 codes (low nibble first) times 2^(e - 127) of their group's
    UE8M0 byte (four bytes a row in an int32, group j in byte j)."""
    u = packed.view(np.uint8)
    codes = np.stack([u & 15, u >> 4], -1).reshape(u.shape[0], -1)
    mag = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6])[codes & 7]
    exps = sf.reshape(u.shape[0], -1).astype("<i4").view(np.uint8).astype(np.float64)
    scale = np.repeat(2.0 ** (exps - 127), 32, axis=1)[:, :codes.shape[1]]
    return np.where(codes & 8, -mag, mag) * scale


def main(argv=None):
    from _common import example_args, library_run, print_estimates, verdict, verify
    from ml_dtypes import float8_e4m3fn
    args = example_args(__doc__, argv, dtype="float32", shape=DEFAULT_ARGS)
    S, SK = args.shape
    run, rng = library_run(args)
    q = (rng.standard_normal((S, H, D)) * 0.5).astype(float8_e4m3fn)
    kv, sf = fp8_rows(rng, SK)
    w = rng.uniform(0, 1, (S, H)).astype(np.float32)
    ks = rng.integers(0, SK // 2, S).astype(np.int32)
    ke = np.minimum(ks + rng.integers(1, SK, S), SK).astype(np.int32)
    logits = deep_gemm.fp8_mqa_logits(q, (kv, sf), w, ks, ke, **run)
    want = mqa_reference(q, kv, sf, w, ks, ke)
    inside = np.isfinite(want)
    ok = bool(np.array_equal(np.isfinite(logits), inside))
    ok &= verify("fp8_mqa_logits", logits[inside], want[inside], "float32", reduce_len=H * D)

    # the paged form: two batches, next_n = 2, pages through a shuffled block table
    B, NN = 2, 2
    lens = np.array([SK, SK // 3 + 1], np.int32)
    pages = -(-SK // BLOCK_KV)
    table = rng.permutation(B * pages).reshape(B, pages).astype(np.int32)
    cache = np.zeros((B * pages, BLOCK_KV, 1, D + 4), np.uint8)
    keys = []
    for b in range(B):
        kb, sb = fp8_rows(rng, pages * BLOCK_KV)
        keys.append((kb, sb))
        for p in range(pages):
            blk = cache[table[b, p]].reshape(-1)  # the page's e4m3 rows, then their fp32 scales
            blk[:BLOCK_KV * D] = kb[p * BLOCK_KV:(p + 1) * BLOCK_KV].view(np.uint8).reshape(-1)
            blk[BLOCK_KV * D:] = sb[p * BLOCK_KV:(p + 1) * BLOCK_KV].view(np.uint8)
    qp = (rng.standard_normal((B, NN, H, D)) * 0.5).astype(float8_e4m3fn)
    wp = rng.uniform(0, 1, (B * NN, H)).astype(np.float32)
    meta = deep_gemm.get_paged_mqa_logits_metadata(lens, BLOCK_KV, 4)
    paged = deep_gemm.fp8_paged_mqa_logits(qp, cache, wp, lens, table, meta, SK, **run)
    for b in range(B):
        for i in range(NN):  # query i sees keys up to its position lens[b] - NN + i
            row = mqa_reference(qp[b, i][None], *keys[b], wp[b * NN + i][None],
                                np.zeros(1, np.int32), np.array([lens[b] - NN + i + 1]))[0, :SK]
            got = paged[b * NN + i]
            fin = np.isfinite(row)
            ok &= bool(np.array_equal(np.isfinite(got), fin))
            ok &= verify(f"fp8_paged_mqa_logits b{b} q{i}", got[fin], row[fin], "float32",
                         reduce_len=H * D)

    # FP4 q and kv (e2m1 codes two a byte, UE8M0 scales per 32 values packed four to an int32),
    # quantised by DeepGEMM's helper; the reference uses the values the codes stand for
    q4, q4_sf = deep_gemm.per_token_cast_to_fp4(q.astype(np.float32).reshape(S * H, D), True,
                                                gran_k=32, use_packed_ue8m0=True, **run)
    k4, k4_sf = deep_gemm.per_token_cast_to_fp4(kv.astype(np.float32) * sf[:, None], True,
                                                gran_k=32, use_packed_ue8m0=True, **run)
    logits4 = deep_gemm.fp8_fp4_mqa_logits((q4.reshape(S, H, D // 2), q4_sf.reshape(S, H)),
                                           (k4, k4_sf.reshape(SK)), w, ks, ke, **run)
    q4v, k4v = fp4_values(q4, q4_sf).reshape(S, H, D), fp4_values(k4, k4_sf)
    want4 = mqa_reference(q4v, k4v, np.ones(SK), w, ks, ke)
    ok &= bool(np.array_equal(np.isfinite(logits4), inside))
    ok &= verify("fp8_fp4_mqa_logits (FP4 q and kv)", logits4[inside], want4[inside], "float32",
                 reduce_len=H * D)

    k = min(2048, SK // 2)
    vals, idx = topk(logits, k, **run)
    order = np.argsort(-want, axis=1, kind="stable")[:, :k]
    ok &= bool(np.array_equal(np.take_along_axis(want, idx.astype(np.int64), 1) > -np.inf,
                              np.take_along_axis(want, order, 1) > -np.inf))
    ok &= verify("topk of the logits", vals[np.isfinite(vals)],
                 np.take_along_axis(want, order, 1)[np.isfinite(vals)], "float32",
                 reduce_len=H * D)

    big_s, big_sk = 4096, 8192
    big = (np.empty((big_s, 64, D), float8_e4m3fn),
           (np.empty((big_sk, D), float8_e4m3fn), np.empty(big_sk, np.float32)),
           np.empty((big_s, 64), np.float32), np.zeros(big_s, np.int32),
           np.full(big_s, big_sk, np.int32))
    print_estimates(f"fp8_mqa_logits (S {big_s}, H 64, SK {big_sk})",
                    deep_gemm.fp8_mqa_logits.estimate, *big)
    big4 = ((np.empty((big_s, 64, D // 2), np.int8), np.full((big_s, 64), 0x7F7F7F7F, np.int32)),
            (np.empty((big_sk, D // 2), np.int8), np.full(big_sk, 0x7F7F7F7F, np.int32)),
            *big[2:])
    print_estimates(f"fp8_fp4_mqa_logits, FP4 q and kv (S {big_s}, H 64, SK {big_sk})",
                    deep_gemm.fp8_fp4_mqa_logits.estimate, *big4)
    return verdict("indexer", ok)


if __name__ == "__main__":
    raise SystemExit(main())
