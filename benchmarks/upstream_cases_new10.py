"""Sweep cases added in the cases session, second part: the DeepSeek-V3.2 indexers, top-k and
quantisation kernels, the Blackwell (sm100) examples (located errors expected) and the other
examples without a case (first part: upstream_cases_new8.py). Host code and float64 references
are written here from each operation's meaning; the kernels are the examples' own, read from the
mirror at run time by upstream_sweep.py."""
import numpy as np

from upstream_sweep import Check, case, rn
from upstream_cases_new import TL, f64
from upstream_cases_new8 import blockscaled_fp8, fp8_cmp, mm_nt

# ------------------------------------------------------------------ indexers, top-k, quantisation

V32 = "examples/deepseek_v32/"


def relu_weighted_logits(q, k, w, kscale):
    """The lightning indexer's logits: sum_h relu(q_h . k_j) * w_h, times k's scale, float64.
    q [..., H, D], k [..., N, D], w [..., H], kscale [..., N] -> [..., N]."""
    s = np.einsum("...hd,...nd->...hn", q.astype(f64), k.astype(f64))
    return (np.maximum(s, 0) * w.astype(f64)[..., None]).sum(-2) * kscale.astype(f64)


def indexer_windows(rng, S, SKV, H, D):
    """fp8 indexer inputs (queries (S*H, D), keys (SKV, D), key scales, weights (S, H)) and
    per-query KV windows [ks, ke) inside [0, 192) (no block of 64 from a window's start runs
    past SKV = 256); the logits with -inf outside each window and the window mask."""
    import ml_dtypes
    q = rn(rng, (S * H, D)).astype(ml_dtypes.float8_e4m3fn)
    kv = rn(rng, (SKV, D)).astype(ml_dtypes.float8_e4m3fn)
    kscale = (rng.random(SKV) + 0.5).astype(np.float32)
    w = rn(rng, (S, H), "float32")
    ks = rng.integers(0, 64, S).astype(np.int32)
    ke = np.minimum(ks + rng.integers(1, 128, S), 192).astype(np.int32)
    full = relu_weighted_logits(q.reshape(S, H, D), kv[None], w, kscale[None])
    assert full.shape == (S, SKV), full.shape  # one row of logits per query
    inside = (np.arange(SKV)[None] >= ks[:, None]) & (np.arange(SKV)[None] < ke[:, None])
    return (q, kv, kscale, w, ks, ke), full, np.where(inside, full, -np.inf), inside


@case("tl/deepseek_v32/fp8_lighting_indexer", TL, V32 + "fp8_lighting_indexer.py",
      "fp8 lightning indexer: per-query KV windows (min/max over the block by T.serial on "
      "alloc_vars), T.dynamic sizes, a run-time trip count, T.reshape of a fragment to 3-D, "
      "reduce_sum over the heads", chip="ascend950")
def _(m, rng):
    from upstream_sweep import with_kwargs
    S, SKV, H, D = 64, 256, 8, 64
    args, _, want, inside = indexer_windows(rng, S, SKV, H, D)

    def in_windows(got, want):   # the kernel writes whole blocks of 64 columns from a start
        from upstream_sweep import tolerance
        rtol, atol = tolerance("float32", D * H)
        g = got.astype(f64)
        ok = np.isclose(g, want, rtol=rtol, atol=atol * 4)
        assert ok[inside].all(), f"logits: {int((~ok[inside]).sum())} differ in the windows, " \
            f"max abs err {np.abs(g - want)[inside].max():.3g}"
    fn = with_kwargs(m["mqa_attn_return_logits"], block_N=64, num_stages=1, threads=128)
    return [Check(fn, list(args), {0: want}, compare=in_windows)]


@case("tl/deepseek_v32/fp8_lighting_indexer_clean_logits", TL, V32 + "fp8_lighting_indexer.py",
      "the indexer's clean_logits_: -inf outside each query's KV window, per thread by "
      "T.thread_binding(threadIdx.x) in T.serial steps, GM scalars in Python names")
def _(m, rng):
    from upstream_sweep import with_kwargs
    S, SKV = 64, 256
    (*_, ks, ke), full, want, inside = indexer_windows(rng, S, SKV, 8, 64)
    garbage = np.where(inside, full, 7.0).astype(np.float32)
    clean = with_kwargs(m["clean_logits_"], threads=64, block_K=SKV)   # SKV a multiple of it
    return [Check(clean, [garbage, ks, ke], {("arg", 0): want}, "float32")]


INF = V32 + "inference/kernel.py"


@case("tl/deepseek_v32/inference_act_quant", TL, INF,
      "DeepSeek-V3.2 inference act_quant: reduce_absmax per 128-group, power-of-two scales by "
      "Python helpers issuing T.reinterpret and bit ops (round_scale) or a plain division, "
      "clamp, cast to fp8, a 1-trip Pipelined loop, T.dynamic M")
def _(m, rng):
    return v32_act_quant_checks(m, rng, 64, 256)


def v32_act_quant_checks(m, rng, M, N):
    """act_quant_kernel(N, bf16, e4m3, float32, round_scale) on an (M, N) input, both scale
    roundings: e4m3 values and scales per (row, 128 columns)."""
    import ml_dtypes
    checks = []
    for rs in (False, True):
        x = rn(rng, (M, N), scale=3.0).astype(ml_dtypes.bfloat16)
        g = x.astype(f64).reshape(M, N // 128, 128)
        amax = np.maximum(np.abs(g).max(-1), 1e-4).astype(np.float32)
        s32 = amax * np.float32(1 / 448.0)
        s = 2.0 ** np.ceil(np.log2(s32.astype(f64))) if rs else s32.astype(f64)
        want_q = np.clip(g / s[..., None], -448, 448).reshape(M, N).astype(
            ml_dtypes.float8_e4m3fn).astype(f64)
        kern = m["act_quant_kernel"](N, "bfloat16", "float8_e4m3fn", "float32", rs)
        y, sc = np.zeros((M, N), ml_dtypes.float8_e4m3fn), np.zeros((M, N // 128), np.float32)
        checks.append(Check(kern, [x, y, sc], {("arg", 1): want_q, ("arg", 2): s},
                            tol=(0.07, 2 ** -9)))
    return checks


@case("tl/deepseek_v32/inference_fp8_gemm", TL, INF,
      "DeepSeek-V3.2 inference fp8 GEMM: per-(row, 128-K group) x per-(128x128 block) scales "
      "folded into a shared column per step, 2xAcc promotion, T.dynamic M, C an argument",
      chip="ascend950")
def _(m, rng):
    return [v32_fp8_gemm_check(m, rng, 64, 256, 384)]


def v32_fp8_gemm_check(m, rng, M, N, K):
    """fp8_gemm_kernel(N, K, float32) on block-scaled e4m3 inputs, C an argument."""
    a, b, sa, sb, want = blockscaled_fp8(rng, M, N, K)
    kern = m["fp8_gemm_kernel"](N, K, "float32")
    return Check(kern, [a, b, np.zeros((M, N), np.float32), sa, sb], {("arg", 2): want},
                 compare=fp8_cmp(K))


def fp8_index_check(m, rng, B, Mq, N, H, D):
    """DeepSeek-V3.2 inference fp8 index scores for B x Mq queries of H heads on N keys."""
    import ml_dtypes
    q = rn(rng, (B, Mq, H, D)).astype(ml_dtypes.float8_e4m3fn)
    qs = rn(rng, (B, Mq, H), "float32")
    k = rn(rng, (B, N, D)).astype(ml_dtypes.float8_e4m3fn)
    ks = (rng.random((B, N)) + 0.5).astype(np.float32)
    want = relu_weighted_logits(q, k[:, None], qs, ks[:, None])
    return [Check(m["fp8_index_kernel"](H, D), [q, qs, k, ks], {0: want}, "float32", D * H)]


@case("tl/deepseek_v32/inference_fp8_index", TL, INF,
      "DeepSeek-V3.2 inference fp8 index scores: relu(k . q_h) * q_s summed over heads, times "
      "k_s; three T.dynamic sizes, allocations inside a Pipelined body, transpose_B gemm",
      chip="ascend950")
def _(m, rng):
    return fp8_index_check(m, rng, 1, 3, 512, 16, 64)


# ------------------------------------------------------------------ Blackwell (sm100) examples

SM100 = "examples/flash_attention_sm100/"
TC = "examples/gemm_tcgen05/"


def bf16(rng, shape):
    import ml_dtypes
    return rn(rng, shape).astype(ml_dtypes.bfloat16)


@case("tl/flash_attention_sm100/mha_fwd_bshd", TL, SM100 + "mha_fwd_bshd.py",
      "Blackwell flash attention: scores and output in tensor memory (T.alloc_tmem), mma_ss "
      "and mma_ts variants (GPU-only: located errors expected)")
def _(m, rng):
    from upstream_cases_tl import attn
    q, k, v = (bf16(rng, (1, 128, 2, 64)) for _ in range(3))
    return [Check(m["flashattn"](1, 2, 128, 64, causal, 64, 64, "ss"), [q, k, v],
                  {0: attn(q, k, v, causal)}, "bfloat16", 128) for causal in (False, True)]


@case("tl/flash_attention_sm100/gqa_fwd_bshd", TL, SM100 + "gqa_fwd_bshd.py",
      "Blackwell GQA flash attention in tensor memory (GPU-only: located expected)")
def _(m, rng):
    from upstream_cases_tl import attn
    q = bf16(rng, (1, 128, 4, 64))
    k, v = bf16(rng, (1, 128, 2, 64)), bf16(rng, (1, 128, 2, 64))
    return [Check(m["flashattn"](1, 4, 128, 64, True, 2, 64, 64, "ss"), [q, k, v],
                  {0: attn(q, k, v, True)}, "bfloat16", 128)]


def sm100_bwd_checks(m, rng, groups):
    """The Blackwell backward examples (no tensor memory in them): fwd (O, log2 lse),
    preprocess (Delta), bwd (dQ by atomic_add into float32; dK/dV bf16 for MHA, float32
    atomics for GQA), postprocess; bf16 B,S,H,D tensors, causal and not."""
    from upstream_cases_new3 import bshd_grads
    B, H, S, D = 1, 4, 128, 64
    HK = H // groups
    gq = dict(groups=groups) if groups > 1 else {}
    kv_dtype = np.float32 if groups > 1 else None
    checks = []
    for causal in (False, True):
        q, do = bf16(rng, (B, S, H, D)), bf16(rng, (B, S, H, D))
        k, v = bf16(rng, (B, S, HK, D)), bf16(rng, (B, S, HK, D))
        o, lse, delta, dq, dk, dv = bshd_grads(q, k, v, do, causal)
        checks.append(Check(m["flashattn_fwd"](B, H, S, D, causal, 64, 64, **gq), [q, k, v],
                            {0: o, 1: lse}, "bfloat16", S))
        o16 = o.astype(q.dtype)
        pre = np.swapaxes((o16.astype(f64) * do.astype(f64)).sum(-1), 1, 2)
        checks.append(Check(m["flashattn_bwd_preprocess"](B, H, S, D), [o16, do], {0: pre},
                            "float32", D, tol=(1e-2, 1e-2)))
        kvz = [np.zeros(k.shape, kv_dtype or k.dtype) for _ in range(2)]
        args = [q, k, v, do, lse.astype(np.float32), delta.astype(np.float32),
                np.zeros(q.shape, np.float32)] + kvz
        checks.append(Check(m["flashattn_bwd"](B, H, S, D, causal, 64, 64, **gq), args,
                            {("arg", 6): dq, ("arg", 7): dk, ("arg", 8): dv}, "bfloat16", S))
    dq32 = rn(rng, (B, S, H, D), "float32")
    checks.append(Check(m["flashattn_bwd_postprocess"](B, H, S, D), [dq32],
                        {0: dq32.astype(f64)}, "bfloat16"))
    return checks


@case("tl/flash_attention_sm100/mha_bwd_bshd", TL, SM100 + "mha_bwd_bshd.py",
      "Blackwell MHA backward: exp2/log2 lse, dQ by atomic_add, T.annotate_layout in the "
      "postprocess; bf16")
def _(m, rng):
    return sm100_bwd_checks(m, rng, 1)


@case("tl/flash_attention_sm100/gqa_bwd_bshd", TL, SM100 + "gqa_bwd_bshd.py",
      "Blackwell GQA backward: K/V heads by bx // groups, dK/dV by float32 atomic_add; bf16")
def _(m, rng):
    return sm100_bwd_checks(m, rng, 2)


@case("tl/gemm_tcgen05/gemm_mma", TL, TC + "gemm_mma.py",
      "eager GEMM with TMA lowering and warp specialisation disabled by pass_configs; module "
      "code that runs the kernel at import (skipped as host code)")
def _(m, rng):
    a, b = rn(rng, (128, 64), "float16"), rn(rng, (128, 64), "float16")
    return [Check(m["matmul"], [a, b, 64, 64, 32], {0: mm_nt(a, b)}, "float16", 64)]


@case("tl/gemm_tcgen05/gemm_tcgen5mma", TL, TC + "gemm_tcgen5mma.py",
      "eager GEMM accumulating in tensor memory (T.alloc_tmem, tcgen5 mma): GPU-only, located "
      "expected")
def _(m, rng):
    a, b = bf16(rng, (128, 64)), bf16(rng, (128, 64))
    return [Check(m["matmul"], [a, b, 64, 64, 32, False, True, "bfloat16", "bfloat16",
                                "float32", 2, 128], {0: mm_nt(a, b)}, "bfloat16", 64)]


@case("tl/gemm_tcgen05/gemm_tcgen5mma_ws", TL, TC + "gemm_tcgen5mma_ws.py",
      "warp-specialised tcgen5 GEMM, 1 and 2 CTAs (GPU-only: located expected)")
def _(m, rng):
    a, b = bf16(rng, (128, 64)), bf16(rng, (64, 128))   # B as (K, N)
    return [Check(m[name], [a, b, 64, 64, 32, "bfloat16", "bfloat16", "float32", 2],
                  {0: a.astype(f64) @ b.astype(f64)}, "bfloat16", 64)
            for name in ("gemm", "gemm_2cta")]


HISA = "examples/dsa_hisa/"


@case("tl/dsa_hisa/clean_and_maintain_logits", TL, HISA + "clean_and_maintain_logits.py",
      "logits masked per query window in place: -inf outside [ks, ke), +inf at ks and ke - 1; "
      "per thread by T.thread_binding (GPU-only: located expected)")
def _(m, rng):
    from upstream_sweep import with_kwargs
    S, SKV = 16, 256
    logits = rn(rng, (S, SKV), "float32")
    ks = rng.integers(0, 100, S).astype(np.int32)
    ke = (ks + rng.integers(1, 100, S)).astype(np.int32)
    want = logits.astype(f64)
    cols = np.arange(SKV)[None]
    want = np.where((cols < ks[:, None]) | (cols >= ke[:, None]), -np.inf, want)
    want[np.arange(S), ks] = np.inf
    want[np.arange(S), ke - 1] = np.inf
    fn = with_kwargs(m["clean_and_maintain_logits_"], threads=64, block_K=SKV)
    return [Check(fn, [logits, ks, ke], {("arg", 0): want}, "float32")]


@case("tl/dsa_hisa/fp8_block_mean_pooling", TL, HISA + "fp8_block_mean_pooling.py",
      "mean of fp8 keys times per-token scales over blocks of 128 tokens (a ragged last block: "
      "clipped copies, rows past it zeroed by nested T.parallel with an if), reduce_sum over "
      "dim 0, reduce_absmax, re-quantised to fp8 with a per-block scale; two T.empty outputs")
def _(m, rng):
    import ml_dtypes
    from upstream_sweep import with_kwargs
    N, D, P, BN = 300, 128, 128, 64
    k = rn(rng, (N, D)).astype(ml_dtypes.float8_e4m3fn)
    ks = (rng.random(N) + 0.5).astype(np.float32)
    # the kernel scales in its fp8 tile: products rounded to fp8, then summed in float32
    prod = (k.astype(np.float32) * ks[:, None]).astype(ml_dtypes.float8_e4m3fn).astype(f64)
    nb = -(-N // P)
    mean = np.stack([prod[b * P:min(N, (b + 1) * P)].mean(0) for b in range(nb)])
    scale = np.maximum(np.abs(mean).max(1) / 448.0, 1e-10)
    want_k = (mean / scale[:, None]).astype(np.float32).astype(ml_dtypes.float8_e4m3fn)

    def fp8_close(got, want):
        g = got.astype(np.float32).astype(f64)
        assert np.allclose(g, want.astype(f64), rtol=0.07, atol=1e-3), \
            f"pooled fp8 keys: max abs err {np.abs(g - want.astype(f64)).max():.3g}"
    fn = with_kwargs(m["fp8_native_block_mean_pooling"], dim=D, pooling_block_size=P,
                     block_N=BN, num_stages=1, threads=128)
    return [Check(fn, [k, ks], {0: want_k}, compare=fp8_close),
            Check(fn, [k, ks], {1: scale}, "float32", P)]


def sparse_mla_grads(q, kv, do, idx, dim, scale):
    """Sparse MLA attention (one KV group) forward and backward, float64: query t of head h
    attends kv rows idx[t] that are <= t (others masked), scores over all dim + tail columns
    scaled by `scale`, values the first `dim` columns. Returns O, lse (log2 units), Delta,
    dQ and dKV (summed over heads and selections)."""
    B, S, H, DQ = q.shape
    o, lse, delta = np.zeros((B, S, H, dim)), np.zeros((B, S, H)), np.zeros((B, S, H))
    dq, dkv = np.zeros(q.shape), np.zeros(kv.shape)
    for b, t in np.ndindex(B, S):
        ids = idx[b, t, 0]
        valid = ids <= t
        rows = kv[b, np.minimum(ids, kv.shape[1] - 1), 0].astype(f64)
        qq, dd = q[b, t].astype(f64), do[b, t].astype(f64)
        s = np.where(valid[None], qq @ rows.T * scale, -np.inf)
        mx = s.max(-1, keepdims=True)
        p = np.exp(s - mx)
        den = p.sum(-1, keepdims=True)
        p /= den
        o[b, t] = p @ rows[:, :dim]
        lse[b, t] = (np.log(den[:, 0]) + mx[:, 0]) / np.log(2)
        delta[b, t] = (o[b, t] * dd).sum(-1)
        ds = p * (dd @ rows[:, :dim].T - delta[b, t][:, None]) * scale
        dq[b, t] = ds @ rows
        g = ds.T @ qq
        g[:, :dim] += p.T @ dd
        np.add.at(dkv[b, :, 0], np.minimum(ids, kv.shape[1] - 1), g)
    return o, lse, delta, dq, dkv


@case("tl/deepseek_v32/sparse_mla_bwd", TL, V32 + "sparse_mla_bwd.py",
      "sparse MLA backward: eager preprocess (Delta), bwd with a bool mask tile, KV rows "
      "gathered through indices in T.Parallel, dQ as T.empty, dKV by atomic_addx4 scattered "
      "through the indices in two split stores, postprocess copy")
def _(m, rng):
    import ml_dtypes
    bf = ml_dtypes.bfloat16
    S, SKV, H, dim, tail, topk = 8, 64, 16, 64, 32, 64
    from upstream_cases_new4 import causal_sparse_inputs
    q, kv, idx = causal_sparse_inputs(rng, S, SKV, H, dim + tail, topk, "float32")
    idx = np.where(idx == SKV, SKV - 1, idx).astype(np.int32)   # padding: a later (masked) row
    q, kv = q.astype(bf), kv.astype(bf)
    do = rn(rng, (1, S, H, dim)).astype(bf)
    scale = (dim + tail) ** -0.5
    o, lse, delta, dq, dkv = sparse_mla_grads(q, kv, do, idx, dim, scale)
    o16 = o.astype(bf)
    pre = (o16.astype(f64) * do.astype(f64)).sum(-1)
    lse32, delta32 = lse.astype(np.float32), delta.astype(np.float32)
    dkv32 = rn(rng, kv.shape, "float32")
    return [Check(m["preprocess"], [o16, do], {0: pre}, "float32", dim, tol=(1e-2, 1e-2)),
            Check(m["bwd"], [q, kv, do, idx, lse32, delta32, np.zeros(kv.shape, np.float32),
                             H, dim, tail, topk],
                  {0: dq, ("arg", 6): dkv}, "bfloat16", topk),
            Check(m["postprocess"], [dkv32, dim, tail], {0: dkv32.astype(f64)}, "bfloat16")]


@case("tl/dsa_sparse_finetune/indexer_bwd", TL, "examples/dsa_sparse_finetune/indexer_bwd.py",
      "varlen lightning-indexer backward: gradients of sum_j (index_j - attn_j) sum_h w_h "
      "relu(scale q_h . k_j) over each token's top-k keys (-1 and future ones masked): "
      "alloc_var inside T.Parallel, reduce_sum over dim 0, three T.empty outputs, dK by "
      "element atomic_add through the indices")
def _(m, rng):
    import ml_dtypes
    from upstream_sweep import with_kwargs
    from upstream_cases_new7 import dsa_inputs
    lens, H, D, topk = (20, 45), 8, 64, 32
    bf = ml_dtypes.bfloat16
    q, kv, idx, offs, tok, valid, *_ = dsa_inputs(rng, lens, H, D, topk, bf)
    k, idx = kv[:, 0], idx[:, 0]
    w = rn(rng, (len(tok), H)).astype(bf)
    attn, index = (rng.random((len(tok), topk)).astype(np.float32) for _ in range(2))
    scale = D ** -0.5
    dq, dw, dk = np.zeros(q.shape), np.zeros(w.shape), np.zeros(k.shape)
    for t, (b, s) in enumerate(tok):
        ok = valid[t]
        rows = offs[b] + np.maximum(idx[t], 0)
        kk = np.where(ok[:, None], k[rows].astype(f64), 0)
        qs = q[t].astype(f64) * scale
        logit = kk @ qs.T                                   # [topk, H]
        d = (index[t] - attn[t]).astype(f64)[:, None]
        dw[t] = (d * np.maximum(logit, 0)).sum(0)
        dl = d * (logit > 0) * w[t].astype(f64)[None]
        dq[t] = scale * dl.T @ kk
        np.add.at(dk, rows[ok], (dl @ qs)[ok])
    fn = with_kwargs(m["tl_indexer_bwd_impl"], heads=H, dim=D, topk=topk)
    return [Check(fn, [q, w, k, attn, index, idx, offs, tok], {0: dq, 1: dw, 2: dk},
                  "bfloat16", topk * H)]


@case("tl/dsa_sparse_finetune/sparse_mla_bwd", TL, "examples/dsa_sparse_finetune/sparse_mla_bwd.py",
      "varlen sparse MLA backward: per-token sequence offsets, relative top-k indices with -1 "
      "padding (masked, their dKV rows outside or zero), natural-log LSE, T.view of a shared "
      "tile as float32, dKV (T.empty) by element atomic_add scattered through the indices")
def _(m, rng):
    import ml_dtypes
    from upstream_cases_new7 import dsa_inputs
    bf = ml_dtypes.bfloat16
    lens, H, dim, tail, topk = (5, 11), 16, 64, 32, 32
    q, kv, idx, offs, tok, valid, rows, s, lse = dsa_inputs(rng, lens, H, dim + tail, topk, bf)
    T_ = len(tok)
    do = rn(rng, (T_, H, dim)).astype(bf)
    scale = (dim + tail) ** -0.5
    p = np.exp(s - lse[..., None])                                   # [T, H, topk]
    r64 = rows.astype(f64)
    o = np.einsum("thk,tkd->thd", p, r64[..., :dim])
    delta = (o * do.astype(f64)).sum(-1)
    ds = p * (np.einsum("thd,tkd->thk", do.astype(f64), r64[..., :dim]) - delta[..., None]) * scale
    dq = np.einsum("thk,tkd->thd", ds, r64)
    g = np.einsum("thk,thd->tkd", ds, q.astype(f64))
    g[..., :dim] += np.einsum("thk,thd->tkd", p, do.astype(f64))
    dkv = np.zeros(kv.shape)
    for t, (b, _) in enumerate(tok):
        ok = valid[t]
        np.add.at(dkv[:, 0], offs[b] + idx[t, 0][ok], g[t][ok])
    o16 = o.astype(bf)
    pre = (o16.astype(f64) * do.astype(f64)).sum(-1)
    dkv32 = rn(rng, kv.shape, "float32")
    return [Check(m["preprocess"], [o16, do], {0: pre}, "float32", dim, tol=(1e-2, 1e-2)),
            Check(m["bwd"], [q, kv, do, idx, lse.astype(np.float32), delta.astype(np.float32),
                             offs, tok, H, dim, tail, topk], {0: dq, 1: dkv}, "bfloat16", topk),
            Check(m["postprocess"], [dkv32, dim, tail], {0: dkv32.astype(f64)}, "bfloat16")]


@case("tl/flash_attention/gqa_bwd_tma_reduce_varlen", TL,
      "examples/flash_attention/example_gqa_bwd_tma_reduce_varlen.py",
      "varlen GQA attention (dim_v != dim_qk): fwd with masked element copies and log2 lse "
      "(padding rows 0), preprocess over cu_seqlens, bwd with atomic_add of dQ/dK/dV into "
      "float32, postprocess with two T.Kernel launches and T.annotate_layout")
def _(m, rng):
    from upstream_cases_new7 import varlen_gqa_problem
    lens, H, HK, DQK, DV, NC = (40, 56), 4, 2, 64, 32, 64
    g, B, U = H // HK, len(lens), sum(lens)
    checks = []
    for causal in (False, True):
        cu, q, k, v, do, grads = varlen_gqa_problem(rng, lens, H, HK, DQK, DV, NC, causal)
        o, dq, dk, dv, (lse, delta) = grads
        args = (B, U, U, NC, H, max(lens), DQK, DV, causal)
        checks.append(Check(m["flashattn_fwd"](*args, 32, 32, groups=g), [q, k, v, cu, cu],
                            {0: o, 1: lse}, "float16", NC))
        o16 = o.astype(np.float16)
        pre = np.zeros((B, H, NC))
        for b, L in enumerate(lens):
            r = slice(cu[b], cu[b + 1])
            pre[b, :, :L] = (o16[r].astype(f64) * do[r]).sum(-1).T
        checks.append(Check(m["flashattn_bwd_preprocess"](B, H, U, NC, max(lens), DV),
                            [o16, do, cu], {0: pre}, "float32", DV))
        zeros = [np.zeros((U, H, DQK), np.float32), np.zeros((U, HK, DQK), np.float32),
                 np.zeros((U, HK, DV), np.float32)]
        bwd = m["flashattn_bwd_atomic_add"](*args, 32, 32, threads=128, num_stages=1, groups=g)
        checks.append(Check(bwd, [q, k, v, do, lse.astype(np.float32), delta.astype(np.float32),
                                  cu, cu] + zeros,
                            {("arg", 8): dq, ("arg", 9): dk, ("arg", 10): dv}, "float16", NC))
    d32 = [rn(rng, s, "float32") for s in ((U, H, DQK), (U, HK, DQK), (U, HK, DV))]
    checks.append(Check(m["flashattn_bwd_postprocess"](U, U, H, HK, DQK, DV), d32,
                        {i: x.astype(f64) for i, x in enumerate(d32)}, "float16"))
    return checks


@case("tl/gemm_tcgen05/gemm_tcgen5mma_ws_persistent", TL, TC + "gemm_tcgen5mma_ws_persistent.py",
      "persistent warp-specialised tcgen5 GEMM over driver.get_num_sms() blocks, tensor memory "
      "double-buffered (GPU-only: located expected)")
def _(m, rng):
    a, b = bf16(rng, (128, 64)), bf16(rng, (64, 128))
    return [Check(m["gemm_persistent"], [a, b, 64, 64, 32, 32, "bfloat16", "bfloat16", "float32",
                                         2, 1, True], {0: a.astype(f64) @ b.astype(f64)},
                  "bfloat16", 64)]


DEQ = "examples/dequantize_gemm/"


def int4_pairs(rng, N, K):
    """Signed int4 values (N, K) and their packing two per uint8 (low nibble first)."""
    v = rng.integers(-8, 8, (N, K)).astype(np.int8)
    u = (v & 0xF).astype(np.uint8)
    return v, (u[:, 0::2] | (u[:, 1::2] << 4)).astype(np.uint8)


@case("tl/dequantize_gemm/dequant_gemm_w4a8", TL, DEQ + "example_dequant_gemm_w4a8.py",
      "int8 x int4 GEMM: int4 pairs unpacked from uint8 by a Python helper issuing tvm.tirx "
      "bit ops (a host import of TVM), transposed int32 output; and the unpacking kernel alone")
def _(m, rng):
    M, N, K = 64, 64, 256
    a = rng.integers(-8, 8, (M, K)).astype(np.int8)
    b, packed = int4_pairs(rng, N, K)
    want = (a.astype(f64) @ b.astype(f64).T).T
    conv = m["_convert_test"](N, K, 32, 128, "int8")
    gemm = m["matmul_int8xint4"](M, N, K, "int8", "int32", "int32", 4, 32, 32, 128, 1, 128)
    return [Check(conv, [packed], {0: b.astype(f64)}, "int32", tol=(0, 0)),
            Check(gemm, [a, packed], {0: want}, "int32", tol=(0, 0))]
