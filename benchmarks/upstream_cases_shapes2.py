"""Sweep cases: more shape variants of passing TileLang (GPU-dialect) cases ("<case>@shapes2"),
of the examples upstream_cases_shapes.py does not vary: attention (fwd bhsd, varlen, sinks,
block-causal, block-sparse, decoding, paged / persistent MLA, NSA), norms and softmax, casts,
stream-K / split-K / persistent / grouped / dynamic GEMMs, gemv, convolution, chunked linear
attention (retention, GDN, KDA, Mamba) and the fused MoE. As there, each variant uses the
example's own `main()` defaults where they run in reasonable time here, or else larger / odd
shapes the example's kernel supports (tails, batch > 1, more blocks than cores, the dtypes the
example parametrises). References are the original cases' helpers where they take a shape."""
import numpy as np

from upstream_sweep import Check, blocksparse_ref, case, rn, with_kwargs
from upstream_cases_tl import TL, attn

f64 = np.float64


def bf16(x):
    import ml_dtypes
    return x.astype(ml_dtypes.bfloat16)


def as_dtype(x, dtype):
    return bf16(x) if str(dtype) == "bfloat16" else x.astype(str(dtype))


# ---------------------------------------------------------------- attention

@case("tl/flash_attention/mha_fwd_bhsd@shapes2", TL, "examples/flash_attention/example_mha_fwd_bhsd.py",
      "the autotune config's 128x128 blocks, 2 stages, 256 threads, dim 128 (the script: 8 x 32 "
      "heads x 4096): batch 2, 3 heads, seq_q 256 < seq_kv 384 (past_len 128), causal and not")
def _(m, rng):
    B, H, SQ, SK, D = 2, 3, 256, 384, 128
    q = rn(rng, (B, H, SQ, D), "float16")
    k, v = rn(rng, (B, H, SK, D), "float16"), rn(rng, (B, H, SK, D), "float16")
    return [Check(m["flashattn"](B, H, SQ, SK, D, causal, block_M=128, block_N=128, num_stages=2,
                                 threads=256), [q, k, v], {0: attn(q, k, v, causal, "bhsd")},
                  "float16", SK) for causal in (False, True)]


def varlen_checks_dim(rng, lq, lk, heads, kv_heads, dim, make):
    """varlen_checks of upstream_cases_new at head dim `dim`: causal and not."""
    from upstream_cases_new import varlen_attn_ref, varlen_inputs
    checks = []
    for causal in (False, True):
        q, k, v, cu_q, cu_k = varlen_inputs(rng, lq, lk, heads, kv_heads, dim)
        want = varlen_attn_ref(q, k, v, cu_q, cu_k, causal, heads // kv_heads)
        checks.append(Check(make(int(cu_q[-1]), int(cu_k[-1]), causal),
                            [q, k, v, cu_q, cu_k, max(lq)], {0: want}, "float16", max(lk)))
    return checks


@case("tl/flash_attention/mha_fwd_varlen@shapes2", TL, "examples/flash_attention/example_mha_fwd_varlen.py",
      "dim 128, 128x128 blocks; 3 sequences of 300, 77, 129 queries (tails of every size) "
      "against 300, 200, 129 keys, 4 heads")
def _(m, rng):
    lq, lk = [300, 77, 129], [300, 200, 129]
    return varlen_checks_dim(rng, lq, lk, 4, 4, 128, lambda uq, uk, causal: m["flashattn"](
        len(lq), uq, uk, 4, 128, causal, block_M=128, block_N=128, num_stages=2, threads=256))


@case("tl/flash_attention/gqa_fwd_varlen@shapes2", TL, "examples/flash_attention/example_gqa_fwd_varlen.py",
      "groups 4 (8 query heads over 2 KV heads), dim 128, 64x64 blocks; 3 sequences with "
      "tails")
def _(m, rng):
    lq, lk = [130, 64, 95], [130, 190, 95]
    return varlen_checks_dim(rng, lq, lk, 8, 2, 128, lambda uq, uk, causal: m["flashattn"](
        len(lq), 4, uq, uk, 8, 128, causal, block_M=64, block_N=64, num_stages=1, threads=128))


@case("tl/flash_attention/mha_bwd_bhsd@shapes2", TL, "examples/flash_attention/example_mha_bwd_bhsd.py",
      "main()'s dim 64 (the script: 8 x 32 heads x 1024): batch 2, 4 heads, seq 256")
def _(m, rng):
    from upstream_cases_new2 import mha_bwd_checks
    return mha_bwd_checks(m, rng, bshd=False, dims=(2, 4, 256, 64))


@case("tl/flash_decoding/mha_inference@shapes2", TL, "examples/flash_decoding/example_mha_inference.py",
      "main()'s BLOCK_M 128, BLOCK_N 64, Q_CTX 128, D_HEAD 128 (the script: 32 heads, KV_CTX "
      "8192): batch 2, 4 heads, KV_CTX 1024")
def _(m, rng):
    B, H, SQ, SK, D = 2, 4, 128, 1024, 128
    q = rn(rng, (B, SQ, H, D), "float16")
    k, v = rn(rng, (B, SK, H, D), "float16"), rn(rng, (B, SK, H, D), "float16")
    return [Check(m["flashattn"](B, H, SQ, SK, D, False, 128, 64), [q, k, v], {0: attn(q, k, v)},
                  "float16", SK)]


def sink_ref(q, k, v, sinks, window=None):
    """Attention with a per-head sink logit joining the softmax denominator, causal aligned on
    the right; `window`: keys older than window - 1 positions before the query masked."""
    qf, kf, vf = (t.astype(f64) for t in (q, k, v))
    sq, sk, d = q.shape[2], k.shape[2], q.shape[3]
    s = np.einsum("bhqd,bhkd->bhqk", qf, kf) / np.sqrt(d)
    pos_q, pos_k = np.arange(sq)[:, None] + (sk - sq), np.arange(sk)[None, :]
    ok = pos_k <= pos_q
    if window:
        ok &= pos_k >= pos_q - window + 1
    s = np.where(ok, s, -np.inf)
    sk_ = sinks.astype(f64)[None, :, None, None]
    mx = np.maximum(s.max(-1, keepdims=True), sk_)
    e = np.exp(s - mx)
    den = e.sum(-1, keepdims=True) + np.exp(sk_ - mx)
    return np.einsum("bhqk,bhkd->bhqd", e / den, vf)


@case("tl/attention_sink/mha_sink_fwd_bhsd@shapes2", TL, "examples/attention_sink/example_mha_sink_fwd_bhsd.py",
      "main()'s 128x128 blocks, 2 stages, 256 threads, dim 128 (the script: 8 x 32 heads x "
      "4096): batch 2, 2 heads, seq 384, float16 and bfloat16; and a 128-key sliding window")
def _(m, rng):
    B, H, S, D = 2, 2, 384, 128
    out = []
    for dt, win in (("float16", None), ("bfloat16", None), ("float16", 128)):
        q, k, v = (as_dtype(rn(rng, (B, H, S, D)), dt) for _ in range(3))
        sinks = as_dtype(rn(rng, (H,)), dt)
        kern = m["flashattn"](B, H, S, S, D, win, block_M=128, block_N=128, num_stages=2,
                              threads=256, dtype=dt)
        out.append(Check(kern, [q, k, v, sinks], {0: sink_ref(q, k, v, sinks, win)}, dt, S))
    return out


@case("tl/block_causal_attention/fwd@shapes2", TL, "examples/block_causal_attention/block_causal_attention.py",
      "the script's block_size 64 and dim 128: batch 2, 2 heads, seq 512; and dLLM block 32")
def _(m, rng):
    from upstream_cases_held import block_causal_mask
    out = []
    for B, S, H, D, d in ((2, 512, 2, 128, 64), (1, 256, 3, 64, 32)):
        scale = D ** -0.5
        q, k, v = (rn(rng, (B, S, H, D), "float16") for _ in range(3))
        s = np.einsum("bqhd,bkhd->bhqk", q.astype(f64), k.astype(f64)) * scale
        s = np.where(block_causal_mask(S, d), s, -np.inf)
        mx = s.max(-1, keepdims=True)
        p = np.exp(s - mx)
        o = np.einsum("bhqk,bkhd->bqhd", p / p.sum(-1, keepdims=True), v.astype(f64))
        lse = (np.log(p.sum(-1)) + mx[..., 0]) / np.log(2)
        kern = m["_fwd_template"](B, H, S, D, d, scale, dtype="float16")
        out.append(Check(kern, [q, k, v], {0: o, 1: lse}, "float16", S))
    return out


@case("tl/blocksparse_attention@shapes2", TL,
      "examples/blocksparse_attention/example_tilelang_block_sparse_attn.py",
      "run_regression_perf's seq 256, dim 64, block 64, top-2 block mask (the script: 32 "
      "heads): batch 2, 8 heads; and seq 512")
def _(m, rng):
    out = []
    for B, H, S in ((2, 8, 256), (1, 2, 512)):
        D, blk = 64, 64
        nb = S // blk
        q, k, v = (rn(rng, (B, H, S, D), "float16") for _ in range(3))
        x = rng.standard_normal((B, H, nb, nb))
        x[..., 0] = 100
        top = np.argsort(-x, -1, kind="stable")[..., :2]
        mask = np.zeros((B, H, nb, nb), bool)
        np.put_along_axis(mask, top, True, -1)
        full = np.kron(mask, np.ones((blk, blk), bool)) & np.tril(np.ones((S, S), bool))
        s = np.einsum("bhqd,bhkd->bhqk", q.astype(f64), k.astype(f64)) / np.sqrt(D)
        s = np.where(full, s, -np.inf)
        p = np.exp(s - s.max(-1, keepdims=True))
        o = np.einsum("bhqk,bhkd->bhqd", p / p.sum(-1, keepdims=True), v.astype(f64))
        out.append(Check(m["blocksparse_flashattn"](B, H, S, D, nb, True), [q, k, v, mask],
                         {0: o}, "float16", S))
    return out


@case("tl/seer_attention/block_sparse_attn@shapes2", TL, "examples/seer_attention/block_sparse_attn_tilelang.py",
      "main()'s dim 64, block 64: batch 4, 4 heads, seq 512; and q_len 192 < k_len 448 "
      "(past_len 256)")
def _(m, rng):
    from upstream_cases_new import block_sparse_inputs, masked_attn_ref
    checks = []
    for B, H, SQ, SK in ((4, 4, 512, 512), (1, 2, 192, 448)):
        q, k, v, mask, allowed = block_sparse_inputs(rng, B, H, SQ, SK)
        kern = m["blocksparse_flashattn"](B, H, SQ, SK, 64, SK // 64, is_causal=True)
        checks.append(Check(kern, [q, k, v, mask], {0: masked_attn_ref(q, k, v, allowed)},
                            "float16", SK))
    return checks


@case("tl/deepseek_mla/mla_decode_paged@shapes2", TL, "examples/deepseek_mla/example_mla_decode_paged.py",
      "dv 512, dpe 64 (the script's), block size 64, 32 heads, batch 3 with cache lengths 256, "
      "300 and 511 (full pages, tails), splits 1 and 4 (the split kernel needs a KV block per "
      "split: an empty split's partial is 0 / 0, as on the GPU)")
def _(m, rng):
    b, hq, dv, dpe, bs, pad = 3, 32, 512, 64, 64, 512
    lens = np.array([256, 300, 511], np.int32)
    nb = pad // bs
    table = rng.permutation(b * nb).reshape(b, nb).astype(np.int32)
    q = rn(rng, (b, hq, dv + dpe), "float16")
    kv = rn(rng, (b * pad, 1, dv + dpe), "float16")
    want = np.zeros((b, hq, dv))
    for i in range(b):
        rows = np.concatenate([table[i, p] * bs + np.arange(bs) for p in range(nb)])[:lens[i]]
        keys = kv[rows, 0].astype(f64)
        s = q[i].astype(f64) @ keys.T * (dv + dpe) ** -0.5
        p = np.exp(s - s.max(-1, keepdims=True))
        want[i] = (p / p.sum(-1, keepdims=True)) @ keys[:, :dv]
    qn, qp = np.ascontiguousarray(q[..., :dv]), np.ascontiguousarray(q[..., dv:])
    kn, kp = np.ascontiguousarray(kv[..., :dv]), np.ascontiguousarray(kv[..., dv:])
    checks = []
    for split in (1, 4):
        kern = m["mla_decode_tilelang"](b, hq, 1, pad, dv, dpe, 64, 16, split, bs,
                                        (dv + dpe) ** -0.5)
        args = [qn, qp, kn, kp, table, lens, np.zeros((b, hq, split), np.float16),
                np.zeros((b, hq, split, dv), np.float16)]
        checks.append(Check(kern, args, {0: want}, "float16", int(lens.max())))
    return checks


@case("tl/deepseek_mla/mla_decode_persistent@shapes2", TL,
      "examples/deepseek_mla/example_mla_decode_persistent.py",
      "the script's dim 512, pe_dim 64, BLOCK_N 64: batch 3, 32 heads, kv_ctx 512, split 4 "
      "(more tiles than cores)")
def _(m, rng):
    from upstream_cases_tl import mla_decode_checks
    return mla_decode_checks(m, rng, 3, 32, 512, 512, 64, 64, (4,), scale_arg=False, scratch=True)


@case("tl/deepseek_nsa/nsa_fwd@shapes2", TL, "examples/deepseek_nsa/example_tilelang_nsa_fwd.py",
      "the script's block_size 32 and dim 128... here dim 64, 16 query heads per KV head: batch "
      "2, seq 256, 2 KV heads, 4 selected blocks")
def _(m, rng):
    B, L, H, HQ, D, S, bs, scale = 2, 256, 2, 32, 64, 4, 32, 0.1
    G = HQ // H
    q = rn(rng, (B, L, HQ, D), "float16")
    k, v = rn(rng, (B, L, H, D), "float16"), rn(rng, (B, L, H, D), "float16")
    nb = L // bs
    idx = np.zeros((B, L, H, S), np.int32)
    for b, t, h in np.ndindex(B, L, H):  # the query's own block first, then others
        own = t // bs
        idx[b, t, h] = [own] + [x for x in rng.permutation(nb) if x != own][:S - 1]
    want = np.zeros((B, L, HQ, D))
    for b, t, h in np.ndindex(B, L, H):
        keys = [blk * bs + j for blk in idx[b, t, h] if blk * bs <= t
                for j in range(bs) if t >= blk * bs + j]
        kk, vv = k[b, keys, h].astype(f64), v[b, keys, h].astype(f64)
        s = q[b, t, h * G:(h + 1) * G].astype(f64) @ kk.T * scale
        p = np.exp(s - s.max(-1, keepdims=True))
        want[b, t, h * G:(h + 1) * G] = (p / p.sum(-1, keepdims=True)) @ vv
    fn = with_kwargs(m["native_sparse_attention"], dim=D, is_causal=True,
                     scale=scale, block_size=bs, groups=G, selected_blocks=S)
    return [Check(fn, [q, k, v, idx], {0: want}, "float16", S * bs)]


# ---------------------------------------------------------------- norms, softmax, casts

@case("tl/norm/layernorm@shapes2", TL, "examples/norm/layernorm.py",
      "the script's D 8192 in bfloat16 (N 4096 there): N 256 with blk_m 1 (TileLang's "
      "default); and N 1000, D 1024, blk_m 8")
def _(m, rng):
    out = []
    for N, D, blk in ((256, 8192, 1), (1000, 1024, 8)):
        x = bf16(rn(rng, (N, D)))
        g, b = bf16(rn(rng, (D,))), bf16(rn(rng, (D,)))
        xf = x.astype(f64)
        mu, var = xf.mean(1, keepdims=True), xf.var(1, keepdims=True)
        rstd = 1 / np.sqrt(var + 1e-5)
        y = (xf - mu) * rstd * g.astype(f64) + b.astype(f64)
        out.append(Check(m["_layernorm_fwd"](N, D, blk_m=blk), [x, g, b],
                         {0: y, 1: mu[:, 0], 2: rstd[:, 0]}, "bfloat16", D))
    return out


@case("tl/online_softmax@shapes2", TL, "examples/online_softmax/online_softmax.py",
      "the script's BLOCK_N 8192 default (M = N = 8192 there): 64 x 16384 (two column blocks), "
      "BLOCK_M 1; and 100 x 1024 with BLOCK_M 4")
def _(m, rng):
    out = []
    for M, N, bm, bn in ((64, 16384, 1, 8192), (100, 1024, 4, 256)):
        x = rn(rng, (M, N), "float16")
        xf = x.astype(f64)
        e = np.exp(xf - xf.max(1, keepdims=True))
        want = e / e.sum(1, keepdims=True)

        def fn(x, M=M, N=N, bm=bm, bn=bn):
            m["M"], m["N"] = M, N  # module globals the kernel reads (host code)
            return m["softmax_kernel"](x, bm, bn)

        def kernel_for(x, M=M, N=N, bm=bm, bn=bn):
            m["M"], m["N"] = M, N
            return m["softmax_kernel"].kernel_for(x, bm, bn)
        fn.kernel_for = kernel_for
        out.append(Check(fn, [x], {0: want}, "float16", N))
    return out


@case("tl/cast/group_per_split_token_fp8@shapes2", TL,
      "examples/cast/example_group_per_split_token_cast_to_fp8.py",
      "main()'s blk_m 8, BG 2 (the script: 8192 x 8192): 512 x 1024 split in groups of 200 "
      "and 312 (not multiples of blk_m), M_max 320")
def _(m, rng):
    import ml_dtypes
    sizes = np.array([200, 312], np.int32)
    M, N, blk, M_max = int(sizes.sum()), 1024, 8, 320
    G = N // 128
    x = bf16(rn(rng, (M, N), scale=2.0))
    xv = x.astype(f64).reshape(M, G, 128)
    amax = np.maximum(np.abs(xv).max(2), 1e-4)
    s = amax / 448.0
    q = np.clip(xv / s[:, :, None], -448, 448).reshape(M, N)
    qg, sg = np.zeros((2, M_max, N)), np.zeros((2, M_max, G))
    o = 0
    for gi, sz in enumerate(sizes):
        qg[gi, :sz], sg[gi, :sz] = q[o:o + sz], s[o:o + sz]
        o += sz
    q8 = qg.astype(np.float32).astype(ml_dtypes.float8_e4m3fn).astype(f64)

    def cmp_q(got, want):
        g = got.astype(np.float32).astype(f64)
        for gi, sz in enumerate(sizes):
            # one e4m3 step (3 mantissa bits: up to 1/8 of the value): y / s in float32 and
            # the float64 reference may round to neighbouring fp8 values
            assert np.allclose(g[gi, :sz], want[gi, :sz], rtol=0.13, atol=1e-3), "fp8 differs"

    def cmp_s(got, want):
        for gi, sz in enumerate(sizes):
            assert np.allclose(got[gi, :sz], want[gi, :sz], rtol=1e-6, atol=1e-9), "scales differ"
    f = m["group_per_split_token_cast_to_fp8"]
    return [Check(f, [x, sizes, M_max, blk], {0: q8}, compare=cmp_q),
            Check(f, [x, sizes, M_max, blk], {1: sg}, compare=cmp_s)]


# ---------------------------------------------------------------- GEMMs, gemv

@case("tl/gemm_streamk@shapes2", TL, "examples/gemm_streamk/example_tilelang_gemm_streamk.py",
      "the script's m, n, k = 256, 1024, 512 and 16x128x32 blocks, with 24 programs (this "
      "machine's cube cores; the script: 108 SMs): 128 tiles, 8 stream-K tiles split over the "
      "programs, the rest whole")
def _(m, rng):
    M, N, K, bm, bn, bk, sms = 256, 1024, 512, 16, 128, 32, 24
    total_tiles = -(-M // bm) * -(-N // bn)
    iters = -(-K // bk)
    sk_tiles = total_tiles % sms
    if total_tiles - sk_tiles > sms:
        sk_tiles += sms
    sk_iters = sk_tiles * iters
    m.update(total_sm=sms, streamk_programs=sms, iters_per_tile=iters,
             streamk_full_tiles=sk_iters // sms, streamk_partial_tiles=sk_iters % sms,
             sm_patition_factor=max((total_tiles - sk_tiles) // sms, 1))
    a = (rng.random((M, K)) * 2 - 1).astype(np.float16)
    b = (rng.random((N, K)) * 2 - 1).astype(np.float16)
    c = np.zeros((M, N), np.float32)
    args = [a, b, c, sk_tiles, bm, bn, bk, False, True, "float16", "float32", "float32", 2, 64]
    return [Check(m["tl_matmul_streamk"], args, {("arg", 2): a.astype(f64) @ b.astype(f64).T},
                  "float32", K, tol=(2e-3, 2e-3))]


@case("tl/gemm_splitk/vectorize_atomicadd@shapes2", TL,
      "examples/gemm_splitk/example_tilelang_gemm_splitk_vectorize_atomicadd.py",
      "main()'s 128x128x32 blocks, split 4 (the script: 1024^3): 512 x 384 x 1024")
def _(m, rng):
    M, N, K = 512, 384, 1024
    a, b = rn(rng, (M, K), "float16"), rn(rng, (K, N), "float16")
    c = np.zeros((M, N), np.float32)
    return [Check(m["matmul"], [a, b, c, 128, 128, 32, 4], {("arg", 2): a.astype(f64) @ b},
                  "float16", K)]


@case("tl/gemm/persistent@shapes2", TL, "examples/gemm/example_gemm_persistent.py",
      "the script's 128x256x64 blocks... here 128x128x64, 3 stages: 1000 x 1024 x 512 (a row "
      "tail, 64 tiles over the cores in waves)")
def _(m, rng):
    M, N, K = 1000, 1024, 512
    a, b = rn(rng, (M, K), "float16"), rn(rng, (K, N), "float16")
    want = a.astype(f64) @ b
    return [Check(m["matmul_non_persistent"], [a, b, 128, 128, 64, 256, 3], {0: want},
                  "float16", K),
            Check(m["matmul_persistent"], [a, b, 128, 128, 64, 256, 3, "float16", "float32",
                                           False], {0: want}, "float16", K)]


@case("tl/dynamic_shape@shapes2", TL, "examples/dynamic_shape/example_dynamic.py",
      "main()'s 128x128x32 blocks, 3 stages: dynamic M, N, K = 1000, 520, 300 (tails on every "
      "axis) and 256^3, one compiled kernel")
def _(m, rng):
    out = []
    for M, N, K in ((1000, 520, 300), (256, 256, 256)):
        a, b = rn(rng, (M, K), "float16"), rn(rng, (K, N), "float16")
        out.append(Check(m["matmul_dynamic_mnk"], [a, b, 128, 128, 32, False, False, "float16",
                                                   "float16", "float32", 3, 128],
                         {0: a.astype(f64) @ b}, "float16", K))
    return out


@case("tl/grouped_gemm_fwd@shapes2", TL, "examples/grouped_gemm/example_grouped_gemm_fwd.py",
      "the script's 64x128x64 blocks, 2 stages, 256 threads and batch sizes 64, 128 (K = M = "
      "8192 there): K 512, N 384; and 4 groups of 1, 100, 64, 130 rows")
def _(m, rng):
    out = []
    for sizes in ([64, 128], [1, 100, 64, 130]):
        K, N, bm = 512, 384, 64
        G = len(sizes)
        a, b = rn(rng, (sum(sizes), K), "float16"), rn(rng, (G, K, N), "float16")
        offs = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int32)
        pads = np.concatenate([[0], np.cumsum([-(-s // bm) * bm for s in sizes])[:-1]]).astype(np.int32)
        want = np.concatenate([a[o:o + s].astype(f64) @ b[i]
                               for i, (o, s) in enumerate(zip(offs, sizes))])
        out.append(Check(m["grouped_gemm"], [a, b, np.array(sizes, np.int32), offs, pads,
                                             tuple(sizes), bm, 128, 64, False, 2, 256],
                         {0: want}, "float16", K))
    return out


@case("tl/blocksparse_gemm@shapes2", TL, "examples/blocksparse_gemm/example_blocksparse_gemm.py",
      "main()'s M = N = K = 1024, sparsity 0.5, the default 128x128x32 blocks, 2 stages")
def _(m, rng):
    M = N = K = 1024
    a, b = rn(rng, (M, K), "float16"), rn(rng, (K, N), "float16")
    mask = rng.random((M // 128, N // 128, K // 32)) > 0.5
    want = blocksparse_ref(a, b, mask, 128, 128, 32)
    return [Check(m["blocksparse_matmul"], [a, b, mask, 128, 128, 32, 2, 128, True], {0: want},
                  "float16", K)]


@case("tl/gemv/naive@shapes2", TL, "examples/gemv/example_gemv.py",
      "main()'s N = K = 1024 with its blocks (naive 128 x 128, naive split-K 32 x 32, "
      "compiled by .compile(N=, K=, ...))")
def _(m, rng):
    N = K = 1024
    x, a = rn(rng, (K,), "float16"), rn(rng, (N, K), "float16")
    want = a.astype(f64) @ x
    return [Check(m["naive_gemv"].compile(N=N, K=K, BLOCK_N=128, BLOCK_K=128), [x, a], {0: want},
                  "float16", K),
            Check(m["naive_splitk_gemv"].compile(N=N, K=K, BLOCK_N=32, BLOCK_K=32), [x, a],
                  {0: want}, "float16", K)]


@case("tl/gemv/splitk@shapes2", TL, "examples/gemv/example_gemv.py",
      "main()'s N = K = 1024: splitk_gemv (32 x 32, reduce_threads 32) and "
      "splitk_gemv_vectorized (BLOCK_N 2, reduce_threads 32)")
def _(m, rng):
    N = K = 1024
    x, a = rn(rng, (K,), "float16"), rn(rng, (N, K), "float16")
    want = a.astype(f64) @ x
    return [Check(m["splitk_gemv"].compile(N=N, K=K, BLOCK_N=32, BLOCK_K=32, reduce_threads=32),
                  [x, a], {0: want}, "float16", K),
            Check(m["splitk_gemv_vectorized"].compile(N=N, K=K, BLOCK_N=2, reduce_threads=32),
                  [x, a], {0: want}, "float16", K)]


@case("tl/gemv/alloc_reducer@shapes2", TL, "examples/gemv/example_gemv.py",
      "main()'s gemv_alloc_reducer.compile(M=1024, N=1024, block_M=128, block_N=128) under "
      "@autotune (every config given): T.alloc_reducer, a reduction inside T.Parallel")
def _(m, rng):
    N = K = 1024
    x, a = rn(rng, (K,), "float16"), rn(rng, (N, K), "float16")
    return [Check(m["gemv_alloc_reducer"].compile(M=N, N=K, block_M=128, block_N=128),
                  [a, x], {0: a.astype(f64) @ x}, "float16", K)]


@case("tl/convolution/convolution_autotune@shapes2", TL,
      "examples/convolution/example_convolution_autotune.py",
      "128x128x64 blocks... here 64x128x32, 2 stages: batch 2, 64 -> 128 channels, 14 x 10 "
      "images (tails), 3x3 stride 1 pad 1; and 1x1 stride 2")
def _(m, rng):
    from upstream_cases_new8 import conv_checks
    return conv_checks(lambda S, D, P: with_kwargs(
        m["convolution"], S=S, D=D, P=P, block_M=64, block_N=128, block_K=32, num_stages=2,
        thread_num=256, enable_rasteration=True),
        ((2, 64, 14, 10, 128, 3, 1, 1, 1), (2, 64, 14, 10, 128, 1, 2, 1, 0)), rng)


@case("tl/hadamard_transform/hadamard@shapes2", TL, "examples/hadamard_transform/example_hadamard.py",
      "main()'s batch 64 (dim 32768 there): dim 1024 and dim 256, float32")
def _(m, rng):
    out = []
    for bt, n in ((64, 1024), (8, 256)):
        x = rn(rng, (bt, n))
        h = np.array([[1.0]])
        while h.shape[0] < n:
            h = np.block([[h, h], [h, -h]])
        out.append(Check(m["hadamard"], [x, n, "float32"], {0: x.astype(f64) @ h},
                         reduce_len=n))
    return out


# ---------------------------------------------------------------- linear attention, GDN, KDA

@case("tl/linear_attention/retention_fwd@shapes2", TL, "examples/linear_attention/example_retention_fwd.py",
      "dim 128 (two 64-wide BK and BV blocks), batch 2, seq 256, 4 heads")
def _(m, rng):
    B, S, H, D = 2, 256, 4, 128
    q, k, v = (rn(rng, (B, S, H, D), "float16", 0.5) for _ in range(3))
    qf, kf, vf = (t.astype(f64) for t in (q, k, v))
    o = np.zeros((D // 64, B, S, H, D))
    i, j = np.arange(S)[:, None], np.arange(S)[None, :]
    for b, h in np.ndindex(B, H):
        g = np.log2(1 - 2.0 ** (-5.0 - h))
        dec = np.where(i >= j, 2.0 ** ((i - j) * g), 0.0)
        for ik in range(D // 64):  # partial outputs over the 64-wide key blocks
            ks = slice(ik * 64, (ik + 1) * 64)
            s = (qf[b, :, h, ks] * D ** -0.5) @ kf[b, :, h, ks].T * dec
            o[ik, b, :, h] = s @ vf[b, :, h]
    return [Check(m["chunk_retention_fwd_kernel"](B, S, H, D, D), [q, k, v], {0: o}, "float16", S)]


@case("tl/gdn/cumsum@shapes2", TL, "examples/gdn/example_cumsum.py",
      "main()'s float32, chunk 64, reverse, threads 256 (S 32768 and 32 heads there): batch 2, "
      "S 1024, 8 heads, reverse and not")
def _(m, rng):
    B, S, H, C = 2, 1024, 8, 64
    out = []
    for rev in (True, False):
        g = rn(rng, (B, S, H))
        gc = g.astype(f64).reshape(B, S // C, C, H)
        want = (np.flip(np.cumsum(np.flip(gc, 2), 2), 2) if rev else np.cumsum(gc, 2))
        kern = m["tilelang_chunk_local_cumsum_scalar"](B, S, H, C, reverse=rev, head_first=False,
                                                       input_dtype="float32",
                                                       output_dtype="float32", threads=256)
        out.append(Check(kern, [g], {0: want.reshape(B, S, H)}, reduce_len=C))
    return out


@case("tl/gdn/chunk_o@shapes2", TL, "examples/gdn/example_chunk_o.py",
      "main()'s bfloat16, DK = DV = 128 with 128-wide blocks, chunk 64 (S 32768 x 32 heads "
      "there): batch 2, S 256, 3 heads, gated and not")
def _(m, rng):
    from upstream_cases_new3 import chunk_rows, gdn_gates
    B, S, H, DK, DV, BS = 2, 256, 3, 128, 128, 64
    checks = []
    for use_g in (True, False):
        q, k, v = (bf16(rn(rng, (B, S, H, d), scale=0.3)) for d in (DK, DK, DV))
        hid = bf16(rn(rng, (B, S // BS, H, DK, DV), scale=0.3))
        g = gdn_gates(rng, B, S, H)
        scale = DK ** -0.5
        want = np.zeros((B, S, H, DV))
        for b, h in np.ndindex(B, H):
            for c, r in chunk_rows(S, BS):
                qc, kc, vc = (x[b, r, h].astype(f64) for x in (q, k, v))
                o = qc @ hid[b, c, h].astype(f64)
                a = qc @ kc.T
                if use_g:
                    gc = g[b, r, h].astype(f64)
                    o = o * np.exp(gc)[:, None]
                    d = gc[:, None] - gc[None, :]
                    a = np.where(d <= 0, a * np.exp(d), 0)
                want[b, r, h] = (o + np.tril(a) @ vc) * scale
        kern = m["tilelang_chunk_fwd_o"](B, S, H, DK, DV, "bfloat16", "bfloat16", "float32",
                                         "float32", BS, scale, use_g, BS, 128, 128, 128, 1)
        checks.append(Check(kern, [q, k, v, hid, g], {0: want}, "bfloat16", DK + BS))
    return checks


@case("tl/gdn/chunk_scaled_dot_kkt@shapes2", TL, "examples/gdn/example_chunk_scaled_dot_kkt.py",
      "main()'s bfloat16, DK 128, block_DK 64, 2 stages (S 32768 x 32 heads there): batch 2, "
      "S 256, 3 heads, gated and not")
def _(m, rng):
    import ml_dtypes
    B, S, H, DK = 2, 256, 3, 128
    K = bf16(rn(rng, (B, S, H, DK)))
    beta = bf16(rn(rng, (B, S, H)))
    checks = []
    for use_g in (True, False):
        G = rn(rng, (B, S, H))
        want = np.zeros((B, S, H, 64))
        i, j = np.indices((64, 64))
        for b, h, c in np.ndindex(B, H, S // 64):
            sl = slice(c * 64, (c + 1) * 64)
            kk = K[b, sl, h].astype(f64)
            # Beta_K_fragment is a bfloat16 tile: the products are rounded to bf16 first
            bk = (kk * beta[b, sl, h].astype(f64)[:, None]).astype(ml_dtypes.bfloat16)
            a = bk.astype(f64) @ kk.T
            if use_g:
                gg = G[b, sl, h].astype(f64)
                gd = gg[:, None] - gg[None, :]
                a = np.where((gd <= 0) & (i > j), a * np.exp(np.minimum(gd, 0)), 0)
            else:
                a = np.where(i > j, a, 0)
            want[b, sl, h] = a
        kern = m["tilelang_chunk_scaled_dot_kkt_fwd"](B, S, H, DK, use_g=use_g, block_DK=64,
                                                      threads=128, num_stages=2)
        checks.append(Check(kern, [K, beta, G], {0: want}, "bfloat16", DK))
    return checks


@case("tl/kda/chunk_o@shapes2", TL, "examples/kda/chunk_o.py",
      "main()'s bfloat16, DK = DV = 128 with 32-wide blocks, chunk 64 (S 8192 x 64 heads "
      "there): batch 2, S 256, 3 heads")
def _(m, rng):
    from upstream_cases_new3 import chunk_matrix, per_chunk
    from upstream_cases_new7 import kda_gates
    B, S, H, DK, DV, BS = 2, 256, 3, 128, 128, 64
    q, v = bf16(rn(rng, (B, S, H, DK), scale=0.5)), bf16(rn(rng, (B, S, H, DV), scale=0.5))
    a = bf16(chunk_matrix(rng, B, S, H, BS).astype(np.float32))
    hid = bf16(rn(rng, (B, S // BS, H, DK, DV), scale=0.3))
    g = kda_gates(rng, B, S, H, DK, BS)
    scale = DK ** -0.5

    def rows(b, h, c, r):
        gq = q[b, r, h].astype(f64) * scale * np.exp2(g[b, r, h].astype(f64))
        return gq @ hid[b, c, h].astype(f64) + np.tril(a[b, r, h].astype(f64)) @ v[b, r, h].astype(f64)
    want = per_chunk((B, S, H, DV), BS, rows)
    kern = m["tilelang_chunk_fwd_o"](B, S, H, DK, DV, "bfloat16", "bfloat16", "float32",
                                     "float32", BS, scale, BS, 32, 32, 128, 1)
    return [Check(kern, [q, v, g, a, hid], {0: want}, "bfloat16", DK + BS)]


def mamba_inputs(rng, batch, seqlen, cs, nheads):
    nc = seqlen // cs
    dt = (rng.random((batch, nheads, nc, cs)) * 0.5).astype(np.float16)
    dA = np.cumsum(-rng.random((batch, nheads, nc, cs)) * 0.05 * 64 / cs, -1).astype(np.float16)
    return nc, dt, dA


@case("tl/mamba/chunk_state@shapes2", TL, "examples/linear_attention/example_mamba_chunk_state.py",
      "the script's chunk 256, dim 64, dstate 128, groups 1 (batch 8, 80 heads, seq 4096 there): "
      "batch 2, 4 heads, seq 512")
def _(m, rng):
    batch, seqlen, cs, ngroups, nheads, headdim, dstate = 2, 512, 256, 1, 4, 64, 128
    nc, dt, dA = mamba_inputs(rng, batch, seqlen, cs, nheads)
    Bm = rn(rng, (batch, seqlen, ngroups, dstate), "float16")
    x = rn(rng, (batch, seqlen, nheads, headdim), "float16")
    want = np.zeros((batch, nc, nheads, headdim, dstate))
    for b, c, h in np.ndindex(batch, nc, nheads):
        sl = slice(c * cs, (c + 1) * cs)
        w = np.exp(dA[b, h, c, -1].astype(f64) - dA[b, h, c].astype(f64)) * dt[b, h, c]
        g = h // (nheads // ngroups)
        want[b, c, h] = (x[b, sl, h].astype(f64) * w[:, None]).T @ Bm[b, sl, g].astype(f64)
    fn = with_kwargs(m["chunk_state_fwd"], block_M=64, block_N=128, block_K=64, num_stages=2)
    return [Check(fn, [Bm, x, dt, dA], {0: want}, "float16", cs)]


@case("tl/mamba/chunk_scan@shapes2", TL, "examples/linear_attention/example_mamba_chunk_scan.py",
      "the script's chunk 256, dim 64, dstate 128, groups 1 (batch 8, 80 heads, seq 4096 there): "
      "batch 2, 4 heads, seq 512")
def _(m, rng):
    batch, seqlen, cs, ngroups, nheads, hd, dstate = 2, 512, 256, 1, 4, 64, 128
    nc, dt, dA = mamba_inputs(rng, batch, seqlen, cs, nheads)
    cb = rn(rng, (batch, nc, ngroups, cs, cs), "float16", 0.1)
    x = rn(rng, (batch, seqlen, nheads, hd), "float16")
    C = rn(rng, (batch, seqlen, ngroups, dstate), "float16", 0.2)
    prev = rn(rng, (batch, nc, nheads, hd, dstate), "float16", 0.2)
    D = rn(rng, (nheads,), "float16")
    want = np.zeros((batch, seqlen, nheads, hd))
    tri = np.tril(np.ones((cs, cs), bool))
    for b, c, h in np.ndindex(batch, nc, nheads):
        sl = slice(c * cs, (c + 1) * cs)
        g = h // (nheads // ngroups)
        a = dA[b, h, c].astype(f64)
        sc = np.where(tri, cb[b, c, g].astype(f64) * np.exp(a[:, None] - a[None, :]), 0)
        intra = (sc * dt[b, h, c].astype(f64)[None, :]) @ x[b, sl, h].astype(f64)
        inter = (C[b, sl, g].astype(f64) @ prev[b, c, h].astype(f64).T) * np.exp(a)[:, None]
        want[b, sl, h] = intra + inter + x[b, sl, h].astype(f64) * float(D[h])
    fn = with_kwargs(m["chunk_scan_fwd"], block_M=64, block_N=64, block_K=64, block_Dstate=128,
                     num_stages=2)
    return [Check(fn, [cb, x, dt, dA, C, prev, D], {0: want}, "float16", cs)]


# ---------------------------------------------------------------- fused MoE

@case("tl/fusedmoe/shared_and_routed@shapes2", TL, "examples/fusedmoe/example_fusedmoe_tilelang.py",
      "the routed kernel's block_token 128 and the shared one's: 200 tokens (a tail), d_hidden "
      "256, d_expert 256, 8 experts, top-2 (uneven groups, one empty)")
def _(m, rng):
    from upstream_cases_new import mm
    from upstream_cases_new2 import silu
    T_, D, E, NE, TOPK, bt = 200, 256, 256, 8, 2, 128
    x = rn(rng, (T_, D), "float16")
    wg, wu, wd = rn(rng, (E, D), "float16", 0.1), rn(rng, (E, D), "float16", 0.1), \
        rn(rng, (D, E), "float16", 0.1)
    up = silu(mm(x, wg.T)) * mm(x, wu.T)
    shared = Check(m["moe_forward_tilelang_shared"],
                   [x, wg, wu, wd, np.zeros((T_, E), np.float16), np.zeros((T_, D), np.float16),
                    "float16"],
                   {("arg", 4): up, ("arg", 5): mm(up.astype(np.float16), wd.T)}, "float16", D)
    idx = rng.choice([0, 1, 2, 3, 4, 6, 7], T_ * TOPK, p=[.3, .1, .1, .2, .1, .1, .1])  # 5 empty
    order = np.argsort(idx, kind="stable")
    counts = np.bincount(idx, minlength=NE)
    xs = x[order // TOPK]
    wts = (rng.random(T_ * TOPK) + 0.5).astype(np.float16)
    rg, ru, rd = (rn(rng, (NE, E, D), "float16", 0.1), rn(rng, (NE, E, D), "float16", 0.1),
                  rn(rng, (NE, D, E), "float16", 0.1))
    offs = (np.cumsum(counts) - counts).astype(np.int32)
    padded = np.zeros(NE, np.int64)
    for i in range(1, NE):
        padded[i] = padded[i - 1] + -(-(counts[i - 1] + 1) // bt) * bt
    M = -(-(T_ * TOPK) // bt) + NE
    gidx = np.array([max(i for i in range(NE) if b * bt >= padded[i]) for b in range(M)], np.int32)
    g_of_row = np.repeat(np.arange(NE), counts)
    up_r = np.stack([silu(mm(xs[r], rg[g].T)) * mm(xs[r], ru[g].T) for r, g in enumerate(g_of_row)])
    out_r = np.stack([mm(up_r[r].astype(np.float16), rd[g].T) * wts[r]
                      for r, g in enumerate(g_of_row)])
    routed = Check(m["moe_forward_tilelang_routed"],
                   [xs, rg, ru, rd, wts, counts.astype(np.int32), offs, padded.astype(np.int32),
                    gidx, np.zeros((T_ * TOPK, E), np.float16),
                    np.zeros((T_ * TOPK, D), np.float16), "float16", T_ * TOPK, NE],
                   {("arg", 9): up_r, ("arg", 10): out_r}, "float16", D)
    return [shared, routed]



# ---------------------------------------------------------------- more: decode, NSA, backward

@case("tl/flash_decoding/gqa_decode_varlen_logits@shapes2", TL,
      "examples/flash_decoding/example_gqa_decode_varlen_logits.py",
      "main()'s 32 query heads over 8 KV heads, head_size 128, block_size 128, with and without "
      "the sink (k_seqlen 8192 there): batch 3 of 100, 300 and 513 keys (tails)")
def _(m, rng):
    B, H, HK, D, bn = 3, 32, 8, 128, 128
    lens = np.array([100, 300, 513])
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    total, maxlen = int(cu[-1]), int(lens.max())
    nblk = -(-maxlen // bn)
    q = rn(rng, (B, H, D), "float16")
    k, v = rn(rng, (total, HK, D), "float16"), rn(rng, (total, HK, D), "float16")
    g = H // HK
    checks = []
    for sink in (False, True):
        aux = (rng.random(H) * 2).astype(np.float32)
        o_want, s_want = np.zeros((B, H, D)), np.zeros((B, H, nblk))
        for b, h in np.ndindex(B, H):
            kk = k[cu[b]:cu[b + 1], h // g].astype(f64)
            s = q[b, h].astype(f64) @ kk.T / np.sqrt(D)
            nb = -(-lens[b] // bn)
            mx = s[(nb - 1) * bn:].max()  # the kernel's reference max: the last block's
            e = np.exp(s - mx)
            den = e.sum() + (aux[h] if sink else 0.0)
            o_want[b, h] = e @ v[cu[b]:cu[b + 1], h // g].astype(f64) / den
            for j in range(nb):
                s_want[b, h, j] = np.exp(s[j * bn:(j + 1) * bn].max() - mx) / den

        def first_blocks(got, want, lens=lens):
            from upstream_sweep import tolerance
            rtol, atol = tolerance("float16", 1)
            for b in range(B):   # blocks past a sequence's end are never written by the kernel
                nb = -(-lens[b] // bn)
                assert np.allclose(got[b, :, :nb].astype(f64), want[b, :, :nb], rtol=rtol,
                                   atol=atol), f"S of batch {b}"
        kern = m["flashattn"](B, H, HK, maxlen, total, D, sink, block_N=bn, block_H=64)
        args = [q, k, v, cu, aux]
        checks.append(Check(kern, args, {0: o_want}, "float16", maxlen))
        checks.append(Check(kern, args, {1: s_want}, "float16", compare=first_blocks))
    return checks


@case("tl/deepseek_nsa/nsa_fwd_varlen@shapes2", TL,
      "examples/deepseek_nsa/example_tilelang_nsa_fwd_varlen.py",
      "3 sequences of 100, 33 and 150 tokens, 2 KV heads x 16 query heads, dim 64, block 32, "
      "4 selected blocks")
def _(m, rng):
    lens, HK, G, D, BS, NSEL = (100, 33, 150), 2, 16, 64, 32, 4
    offs = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    tok = np.array([(b, s) for b, n in enumerate(lens) for s in range(n)], np.int32)
    T_ = int(offs[-1])
    q = rn(rng, (T_, HK * G, D), "float16")
    k, v = rn(rng, (T_, HK, D), "float16"), rn(rng, (T_, HK, D), "float16")
    idx = np.full((T_, HK, NSEL), -1, np.int32)
    counts = np.full((T_, HK), NSEL, np.int32)
    want = np.zeros((T_, HK * G, D))
    for t, (b, s) in enumerate(tok):
        for h in range(HK):
            # block 0 always, then other blocks of the sequence (a future one is skipped)
            blocks = [0] + list(rng.permutation(np.arange(1, -(-lens[b] // BS)))[:NSEL - 1])
            idx[t, h, :len(blocks)] = blocks
            keys = np.array([j for blk in blocks if blk * BS <= s
                             for j in range(blk * BS, min(blk * BS + BS, s + 1))])
            rows = offs[b] + keys
            sc = q[t, h * G:(h + 1) * G].astype(f64) @ k[rows, h].astype(f64).T * D ** -0.5
            p = np.exp(sc - sc.max(1, keepdims=True))
            want[t, h * G:(h + 1) * G] = (p / p.sum(1, keepdims=True)) @ v[rows, h].astype(f64)
    fn = with_kwargs(m["native_sparse_attention_varlen"], batch=len(lens), dim=D, is_causal=True,
                     block_size=BS, groups=G, selected_blocks=NSEL)
    out = np.zeros((T_, HK * G, D), np.float16)
    return [Check(fn, [q, k, v, out, idx, counts, offs, tok], {("arg", 3): want}, "float16",
                  NSEL * BS)]


@case("tl/linear_attention/linear_attn_bwd@shapes2", TL,
      "examples/linear_attention/example_linear_attn_bwd.py",
      "main()'s D 128 (B 1, S 1024, 16 heads there): batch 2, S 256, 3 heads")
def _(m, rng):
    B, S, H, D = 2, 256, 3, 128
    q, k, v, do = (rn(rng, (B, S, H, D), "float16", 0.5) for _ in range(4))
    scale = D ** -0.5
    dq, dk, dv = (np.zeros((B, S, H, D)) for _ in range(3))
    mask = np.tril(np.ones((S, S)))
    for b, h in np.ndindex(B, H):
        qq, kk, vv, oo = (x[b, :, h].astype(f64) for x in (q, k, v, do))
        ds = (oo @ vv.T) * mask
        dq[b, :, h] = scale * ds @ kk
        dk[b, :, h] = scale * ds.T @ qq
        dv[b, :, h] = scale * ((qq @ kk.T) * mask).T @ oo
    kern = m["tl_fused_chunk_bwd_kernel"](B, S, H, D, D)
    zeros = [np.zeros((B, S, H, D), np.float32) for _ in range(3)]
    return [Check(kern, [q, k, v, do] + zeros, {("arg", 4): dq, ("arg", 5): dk, ("arg", 6): dv},
                  "float16", S)]


@case("tl/gdn/wy_fast@shapes2", TL, "examples/gdn/example_wy_fast.py",
      "main()'s bfloat16, DK = DV = 128, chunk 64, block_DK 64, block_DV 32, 3 stages (S 32768 "
      "x 32 heads there): batch 2, S 256, 3 heads")
def _(m, rng):
    from upstream_cases_new3 import gdn_gates, wy_inputs, wy_ref
    B, S, H, DK, DV, BS = 2, 256, 3, 128, 128, 64
    k, v, beta, g, a = wy_inputs(rng, gdn_gates(rng, B, S, H), DK, DV, BS)
    k, v, beta, a = (bf16(x.astype(np.float32)) for x in (k, v, beta, a))
    w, u = wy_ref(k.astype(f64), v.astype(f64), beta, a, BS,
                  lambda b, h, r: np.exp(g[b, r, h].astype(f64))[:, None])
    kern = m["tilelang_recompute_w_u_fwd"](B, S, H, DK, DV, "bfloat16", "bfloat16", "float32",
                                           "float32", BS, BS, 64, 32, 128, 3)
    return [Check(kern, [k, v, beta, g, a], {0: w, 1: u}, "bfloat16", BS)]


@case("tl/grouped_gemm_bwd@shapes2", TL, "examples/grouped_gemm/example_grouped_gemm_bwd.py",
      "64x64x32 blocks, 2 stages: 4 groups of 32, 224, 128 and 64 rows, M 256, N 192 (the "
      "kernel masks `i < batch_sizes[bz]`, not the row within the group: a group size that is "
      "not a multiple of block_K reads the next group's rows, on the GPU too)")
def _(m, rng):
    sizes, M, N = [32, 224, 128, 64], 256, 192
    a, b = rn(rng, (sum(sizes), M), "float16"), rn(rng, (sum(sizes), N), "float16")
    offs = np.cumsum([0] + sizes)
    want = np.stack([a[offs[g]:offs[g + 1]].astype(f64).T @ b[offs[g]:offs[g + 1]]
                     for g in range(len(sizes))])
    bs, bo = np.array(sizes, np.int32), np.array(offs[:-1], np.int32)
    return [Check(m["grouped_gemm_bwd"], [a, b, bs, bo, 64, 64, 32, 2, 128], {0: want},
                  "float16", max(sizes))]
