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
    from upstream_cases_held import block_causal_check
    return [block_causal_check(m, rng, *dims) for dims in ((2, 512, 2, 128, 64),
                                                            (1, 256, 3, 64, 32))]


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
    from upstream_cases_new2 import mla_paged_checks
    return mla_paged_checks(m, rng, 3, 32, 512, 64, 64, 512, [256, 300, 511], (1, 4))


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
    from upstream_cases_new2 import nsa_fwd_check
    return [nsa_fwd_check(m, rng, 2, 256, 2, 32, 64, 4, 32, 0.1)]


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
    from upstream_cases_tl import group_fp8_checks
    return group_fp8_checks(m, rng, [200, 312], 1024, 8, 320)


# ---------------------------------------------------------------- GEMMs, gemv

@case("tl/gemm_streamk@shapes2", TL, "examples/gemm_streamk/example_tilelang_gemm_streamk.py",
      "the script's m, n, k = 256, 1024, 512 and 16x128x32 blocks, with 24 programs (this "
      "machine's cube cores; the script: 108 SMs): 128 tiles, 8 stream-K tiles split over the "
      "programs, the rest whole")
def _(m, rng):
    from upstream_cases_tl import streamk_check
    return [streamk_check(m, rng, 256, 1024, 512, 16, 128, 32, 24, uniform=True)]


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
    from upstream_cases_new3 import gdn_chunk_o_checks
    return gdn_chunk_o_checks(m, rng, (2, 256, 3, 128, 128, 64), "bfloat16", (128, 128))


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
    from upstream_cases_new2 import fusedmoe_checks
    probs = [.3, .1, .1, .2, .1, 0, .1, .1]  # expert 5 gets no tokens
    return fusedmoe_checks(m, rng, 200, 256, 256, 8, 2, 128, probs)



# ---------------------------------------------------------------- more: decode, NSA, backward

@case("tl/flash_decoding/gqa_decode_varlen_logits@shapes2", TL,
      "examples/flash_decoding/example_gqa_decode_varlen_logits.py",
      "main()'s 32 query heads over 8 KV heads, head_size 128, block_size 128, with and without "
      "the sink (k_seqlen 8192 there): batch 3 of 100, 300 and 513 keys (tails)")
def _(m, rng):
    from upstream_cases_new4 import varlen_logits_checks
    return varlen_logits_checks(m, rng, 3, 32, 8, 128, 128, [100, 300, 513])


@case("tl/deepseek_nsa/nsa_fwd_varlen@shapes2", TL,
      "examples/deepseek_nsa/example_tilelang_nsa_fwd_varlen.py",
      "3 sequences of 100, 33 and 150 tokens, 2 KV heads x 16 query heads, dim 64, block 32, "
      "4 selected blocks")
def _(m, rng):
    from upstream_cases_new7 import nsa_varlen_check
    return [nsa_varlen_check(m, rng, (100, 33, 150), 2, 16, 64, 32, 4, NSEL_less=1)]


@case("tl/linear_attention/linear_attn_bwd@shapes2", TL,
      "examples/linear_attention/example_linear_attn_bwd.py",
      "main()'s D 128 (B 1, S 1024, 16 heads there): batch 2, S 256, 3 heads")
def _(m, rng):
    from upstream_cases_new3 import linear_attn_bwd_check
    return [linear_attn_bwd_check(m, rng, 2, 256, 3, 128)]


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
