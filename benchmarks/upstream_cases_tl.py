"""Sweep cases: TileLang (GPU dialect) example kernels (host code and float64 references written
here; the kernels are the examples' own, read from the mirror at run time by upstream_sweep.py)."""
import numpy as np

from upstream_sweep import Check, blocksparse_ref, case, rn

TL = "tilelang"
f64 = np.float64


@case("tl/gemm/example_gemm", TL, "examples/gemm/example_gemm.py", "eager jit, .compile")
def _(m, rng):
    a, b = rn(rng, (128, 96), "float16"), rn(rng, (96, 192), "float16")
    k = m["matmul"].compile(M=128, N=192, K=96, block_M=64, block_N=64, block_K=32)
    want = a.astype(f64) @ b
    return [Check(k, [a, b], {0: want}, "float16", 96),
            Check(m["matmul"], [a, b, 64, 64, 32], {0: want}, "float16", 96)]


@case("tl/quickstart", TL, "examples/quickstart.py", "gemm + relu")
def _(m, rng):
    a, b = rn(rng, (128, 64), "float16"), rn(rng, (64, 128), "float16")
    k = m["matmul"].compile(M=128, N=128, K=64, block_M=64, block_N=64, block_K=32)
    return [Check(k, [a, b], {0: np.maximum(a.astype(f64) @ b, 0)}, "float16", 64)]


@case("tl/elementwise/add", TL, "examples/elementwise/example_elementwise_add.py")
def _(m, rng):
    a, b = rn(rng, (128, 96)), rn(rng, (128, 96))
    return [Check(m["elementwise_add"], [a, b, 32, 32, "float32", "float32", 128],
                  {0: a.astype(f64) + b})]


@case("tl/norm/rms_norm", TL, "examples/norm/rms_norm.py", "both kernels")
def _(m, rng):
    return rms_norm_checks(m, rn(rng, (64, 256)), 8, 64)


def rms_norm_checks(m, a, blk_m, blk_k):
    """rms_norm(a, blk_m) and rms_norm_splitk(a, blk_m, blk_k): rows over their RMS (eps 1e-12)."""
    x = a.astype(f64)
    want = x / np.sqrt((x * x).mean(1, keepdims=True) + 1e-12)
    return [Check(m["rms_norm"], [a, blk_m], {0: want}, tol=(1e-4, 1e-5)),
            Check(m["rms_norm_splitk"], [a, blk_m, blk_k], {0: want}, tol=(1e-4, 1e-5))]


@case("tl/norm/layernorm", TL, "examples/norm/layernorm.py", "fwd (bf16)")
def _(m, rng):
    import ml_dtypes
    N, D = 64, 256
    x = rn(rng, (N, D)).astype(ml_dtypes.bfloat16)
    g, b = rn(rng, (D,)).astype(ml_dtypes.bfloat16), rn(rng, (D,)).astype(ml_dtypes.bfloat16)
    xf = x.astype(f64)
    mu, var = xf.mean(1, keepdims=True), xf.var(1, keepdims=True)
    rstd = 1 / np.sqrt(var + 1e-5)
    y = (xf - mu) * rstd * g.astype(f64) + b.astype(f64)
    k = m["_layernorm_fwd"](N, D, blk_m=4)
    return [Check(k, [x, g, b], {0: y, 1: mu[:, 0], 2: rstd[:, 0]}, "bfloat16")]


@case("tl/online_softmax", TL, "examples/online_softmax/online_softmax.py", "module-level M, N")
def _(m, rng):
    m["M"], m["N"] = 16, 512  # module globals the kernel reads (host code)
    x = rn(rng, (16, 512), "float16")
    xf = x.astype(f64)
    e = np.exp(xf - xf.max(1, keepdims=True))
    return [Check(m["softmax_kernel"], [x, 4, 128], {0: e / e.sum(1, keepdims=True)}, "float16")]


@case("tl/topk", TL, "examples/topk/example_topk.py", "autotune + eager")
def _(m, rng):
    x = rng.permutation(64 * 32).reshape(64, 32).astype(np.float32) / 2048
    idx = np.argsort(-x, 1, kind="stable")[:, :4]
    return [Check(m["tl_topk"], [x, 4, 16, 128], {0: np.take_along_axis(x, idx, 1).astype(f64),
                                             1: idx.astype(f64)}, tol=(0, 0))]


@case("tl/cast/per_token_fp8", TL, "examples/cast/example_per_token_cast_to_fp8.py")
def _(m, rng):
    return per_token_fp8_checks(m, rng, 16, 256, 8)


def per_token_fp8_checks(m, rng, M, N, blk_m):
    """per_token_cast_to_fp8(x, blk_m): e4m3 values and scales per (row, 128 columns); the last
    group of a row may be short (N not a multiple of 128)."""
    import ml_dtypes
    x = rn(rng, (M, N), scale=3.0)
    G = -(-N // 128)
    xv = np.zeros((M, G * 128))
    xv[:, :N] = x
    xv = xv.reshape(M, G, 128)
    amax = np.maximum(np.abs(xv).max(2), 1e-4)
    s = amax / 448.0
    q = np.clip(xv / s[:, :, None], -448, 448).reshape(M, G * 128)[:, :N]
    q8 = q.astype(np.float32).astype(ml_dtypes.float8_e4m3fn).astype(f64)

    def cmp_q(got, want):
        g = got.astype(np.float32).astype(f64)
        assert np.allclose(g, want, rtol=0.07, atol=1e-3), "fp8 values differ"
    return [Check(m["per_token_cast_to_fp8"], [x, blk_m], {0: q8}, compare=cmp_q),
            Check(m["per_token_cast_to_fp8"], [x, blk_m], {1: s}, tol=(1e-6, 1e-9))]


@case("tl/dynamic_shape", TL, "examples/dynamic_shape/example_dynamic.py", "T.dynamic")
def _(m, rng):
    out = []
    for (M, N, K, tb) in ((96, 80, 72, False), (64, 64, 64, False), (64, 80, 96, True)):
        a = rn(rng, (M, K), "float16")
        b = rn(rng, (N, K) if tb else (K, N), "float16")
        bb = b.astype(f64).T if tb else b.astype(f64)
        out.append(Check(m["matmul_dynamic_mnk"], [a, b, 32, 32, 32, False, tb, "float16",
                                                   "float16", "float32", 2, 128],
                         {0: a.astype(f64) @ bb}, "float16", K))
    return out


@case("tl/gemv/naive", TL, "examples/gemv/example_gemv.py", "naive + splitk gemv")
def _(m, rng):
    x, a = rn(rng, (256,), "float16"), rn(rng, (128, 256), "float16")
    want = a.astype(f64) @ x
    # the example's own block sizes: naive_gemv runs TileLang's default 128 threads, one per
    # row of its BLOCK_N tile
    return [Check(m["naive_gemv"], [x, a, 128, 128], {0: want}, "float16", 256),
            Check(m["naive_splitk_gemv"], [x, a, 32, 32], {0: want}, "float16", 256)]


@case("tl/blocksparse_gemm", TL, "examples/blocksparse_gemm/example_blocksparse_gemm.py")
def _(m, rng):
    a, b = rn(rng, (128, 128), "float16"), rn(rng, (128, 128), "float16")
    mask = rng.random((2, 2, 4)) > 0.4
    want = blocksparse_ref(a, b, mask, 64, 64, 32)
    return [Check(m["blocksparse_matmul"], [a, b, mask, 64, 64, 32, 2, 128, False], {0: want},
                  "float16", 128)]


@case("tl/gemm_splitk", TL, "examples/gemm_splitk/example_tilelang_gemm_splitk.py", "atomic_add")
def _(m, rng):
    a, b = rn(rng, (128, 256), "float16"), rn(rng, (256, 128), "float16")
    c = np.zeros((128, 128), np.float32)
    return [Check(m["matmul"], [a, b, c, 64, 64, 32, 4], {("arg", 2): a.astype(f64) @ b},
                  reduce_len=256)]


def attn(q, k, v, causal=False, layout="bshd"):
    q, k, v = (t.astype(f64) for t in (q, k, v))
    if layout == "bshd":
        q, k, v = (t.transpose(0, 2, 1, 3) for t in (q, k, v))
    if k.shape[1] != q.shape[1]:
        g = q.shape[1] // k.shape[1]
        k, v = np.repeat(k, g, 1), np.repeat(v, g, 1)
    s = np.einsum("bhsd,bhkd->bhsk", q, k) / np.sqrt(q.shape[-1])
    if causal:
        sq, sk = s.shape[-2:]
        s = np.where(np.arange(sk)[None, :] <= np.arange(sq)[:, None] + (sk - sq), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    o = np.einsum("bhsk,bhkd->bhsd", p / p.sum(-1, keepdims=True), v)
    return o.transpose(0, 2, 1, 3) if layout == "bshd" else o


@case("tl/flash_attention/mha_fwd_bshd", TL, "examples/flash_attention/example_mha_fwd_bshd.py")
def _(m, rng):
    q, k, v = (rn(rng, (1, 128, 2, 64), "float16") for _ in range(3))
    out = []
    for causal in (False, True):
        kern = m["flashattn"](1, 2, 128, 64, causal, block_M=64, block_N=64, num_stages=1,
                              threads=128)
        out.append(Check(kern, [q, k, v], {0: attn(q, k, v, causal)}, "float16", 128))
    return out


@case("tl/flash_attention/mha_fwd_bhsd", TL, "examples/flash_attention/example_mha_fwd_bhsd.py")
def _(m, rng):
    q = rn(rng, (1, 2, 64, 64), "float16")
    k, v = rn(rng, (1, 2, 128, 64), "float16"), rn(rng, (1, 2, 128, 64), "float16")
    out = []
    for causal in (False, True):
        kern = m["flashattn"](1, 2, 64, 128, 64, causal, block_M=64, block_N=64, num_stages=1,
                              threads=128)
        out.append(Check(kern, [q, k, v], {0: attn(q, k, v, causal, "bhsd")}, "float16", 128))
    return out


@case("tl/flash_attention/gqa_fwd_bshd", TL, "examples/flash_attention/example_gqa_fwd_bshd.py")
def _(m, rng):
    q = rn(rng, (1, 128, 4, 64), "float16")
    k, v = rn(rng, (1, 128, 2, 64), "float16"), rn(rng, (1, 128, 2, 64), "float16")
    kern = m["flashattn"](1, 4, 128, 64, True, groups=2, block_M=64, block_N=64, num_stages=1,
                          threads=128)
    return [Check(kern, [q, k, v], {0: attn(q, k, v, True)}, "float16", 128)]


@case("tl/flash_decoding/mha_inference", TL, "examples/flash_decoding/example_mha_inference.py")
def _(m, rng):
    q = rn(rng, (1, 64, 2, 64), "float16")
    k, v = rn(rng, (1, 256, 2, 64), "float16"), rn(rng, (1, 256, 2, 64), "float16")
    kern = m["flashattn"](1, 2, 64, 256, 64, False, 64, 64)
    return [Check(kern, [q, k, v], {0: attn(q, k, v)}, "float16", 256)]


def mla_decode_checks(m, rng, B, H, S, D, P, block_n, splits, scale_arg, scratch):
    """The deepseek_mla decode examples' flashattn(B, H, kv_groups=1, S, D, P, block_n, 16,
    split[, scale]) for each split: queries q/qp [B, H, D/P] against one KV head kv/kp
    [B, S, 1, D/P], scores over the D + P columns scaled (D + P)^-0.5, values the D columns.
    scratch: the split partials (lse, output) are arguments, not T.alloc_global."""
    from upstream_cases_cv import sparse_ref
    q, qp = rn(rng, (B, H, D), "float16"), rn(rng, (B, H, P), "float16")
    kv, kp = rn(rng, (B, S, 1, D), "float16"), rn(rng, (B, S, 1, P), "float16")
    want = sparse_ref(np.concatenate([q, qp], -1), np.concatenate([kv[:, :, 0], kp[:, :, 0]], -1),
                      D, (D + P) ** -0.5)
    checks = []
    for split in splits:
        kern = m["flashattn"](B, H, 1, S, D, P, block_n, 16, split,
                              *([(D + P) ** -0.5] if scale_arg else []))
        scr = [np.zeros((B, H, split), np.float16), np.zeros((B, H, split, D), np.float16)]
        checks.append(Check(kern, [q, qp, kv, kp] + (scr if scratch else []), {0: want},
                            "float16", S))
    return checks


@case("tl/deepseek_mla/mla_decode", TL, "examples/deepseek_mla/example_mla_decode.py")
def _(m, rng):
    return mla_decode_checks(m, rng, 1, 16, 128, 64, 32, 32, (1, 2), scale_arg=True, scratch=False)


@case("tl/gemm/persistent", TL, "examples/gemm/example_gemm_persistent.py", "T.Persistent")
def _(m, rng):
    a, b = rn(rng, (128, 64), "float16"), rn(rng, (64, 192), "float16")
    want = a.astype(f64) @ b
    return [Check(m["matmul_non_persistent"], [a, b, 64, 64, 32, 128, 2], {0: want}, "float16", 64),
            Check(m["matmul_persistent"], [a, b, 64, 64, 32, 128, 2, "float16", "float32", False],
                  {0: want}, "float16", 64)]


@case("tl/gemm_fp8", TL, "examples/gemm_fp8/example_tilelang_gemm_fp8.py", "fp8 e4m3 gemm",
      chip="ascend950")
def _(m, rng):
    import ml_dtypes
    a = rn(rng, (64, 128)).astype(ml_dtypes.float8_e4m3fn)
    b = rn(rng, (64, 128)).astype(ml_dtypes.float8_e4m3fn)
    want = a.astype(f64) @ b.astype(f64).T

    def cmp(got, want):
        g = got.astype(np.float32).astype(f64)
        assert np.allclose(g, want, rtol=0.07, atol=0.05 * np.sqrt(128)), "fp8 gemm differs"
    return [Check(m["matmul"], [a, b, 64, 64, 64, "float8_e4m3fn"], {0: want}, compare=cmp)]


@case("tl/linear_attention/retention_fwd", TL, "examples/linear_attention/example_retention_fwd.py")
def _(m, rng):
    B, S, H, D = 1, 128, 2, 64
    q, k, v = (rn(rng, (B, S, H, D), "float16", 0.5) for _ in range(3))
    qf, kf, vf = (t.astype(f64) for t in (q, k, v))
    o = np.zeros((1, B, S, H, D))
    for h in range(H):
        g = np.log2(1 - 2.0 ** (-5.0 - h))
        i, j = np.arange(S)[:, None], np.arange(S)[None, :]
        dec = np.where(i >= j, 2.0 ** ((i - j) * g), 0.0)
        s = (qf[0, :, h] * D ** -0.5) @ kf[0, :, h].T * dec
        o[0, 0, :, h] = s @ vf[0, :, h]
    return [Check(m["chunk_retention_fwd_kernel"](B, S, H, D, D), [q, k, v], {0: o}, "float16", S)]


@case("tl/attention_sink/mha_sink_fwd_bhsd", TL, "examples/attention_sink/example_mha_sink_fwd_bhsd.py")
def _(m, rng):
    q, k, v = (rn(rng, (1, 2, 128, 64), "float16") for _ in range(3))
    sinks = rn(rng, (2,), "float16")
    qf, kf, vf = (t.astype(f64) for t in (q, k, v))
    s = np.einsum("bhqd,bhkd->bhqk", qf, kf) / 8.0
    s = np.where(np.tril(np.ones((128, 128), bool)), s, -np.inf)
    mx = np.maximum(s.max(-1, keepdims=True), sinks.astype(f64)[None, :, None, None])
    e = np.exp(s - mx)
    den = e.sum(-1, keepdims=True) + np.exp(sinks.astype(f64)[None, :, None, None] - mx)
    o = np.einsum("bhqk,bhkd->bhqd", e / den, vf)
    kern = m["flashattn"](1, 2, 128, 128, 64, None, block_M=64, block_N=64, num_stages=1, threads=128)
    return [Check(kern, [q, k, v, sinks], {0: o}, "float16", 128)]


@case("tl/grouped_gemm_fwd", TL, "examples/grouped_gemm/example_grouped_gemm_fwd.py")
def _(m, rng):
    sizes, K, N, bm = [40, 64, 24], 64, 64, 32
    a, b = rn(rng, (sum(sizes), K), "float16"), rn(rng, (3, K, N), "float16")
    offs = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int32)
    pads = np.concatenate([[0], np.cumsum([-(-s // bm) * bm for s in sizes])[:-1]]).astype(np.int32)
    want = np.concatenate([a[o:o + s].astype(f64) @ b[i] for i, (o, s) in enumerate(zip(offs, sizes))])
    return [Check(m["grouped_gemm"], [a, b, np.array(sizes, np.int32), offs, pads, sizes, bm, 64, 32],
                  {0: want}, "float16", K)]


@case("tl/gdn/cumsum", TL, "examples/gdn/example_cumsum.py")
def _(m, rng):
    g = rn(rng, (2, 128, 4), "float16")
    want = np.cumsum(g.astype(f64).reshape(2, 2, 64, 4), 2).reshape(2, 128, 4)
    return [Check(m["tilelang_chunk_local_cumsum_scalar"](2, 128, 4, 64), [g], {0: want},
                  reduce_len=64)]


@case("tl/blocksparse_attention", TL, "examples/blocksparse_attention/example_tilelang_block_sparse_attn.py")
def _(m, rng):
    S, D, blk = 256, 64, 64
    q, k, v = (rn(rng, (1, 1, S, D), "float16") for _ in range(3))
    mask = rng.random((1, 1, 4, 4)) > 0.5
    mask[..., 0] = True
    full = np.kron(mask[0, 0], np.ones((blk, blk), bool)) & np.tril(np.ones((S, S), bool))
    s = np.einsum("qd,kd->qk", q[0, 0].astype(f64), k[0, 0].astype(f64)) / np.sqrt(D)
    s = np.where(full, s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    o = (p / p.sum(-1, keepdims=True)) @ v[0, 0].astype(f64)
    kern = m["blocksparse_flashattn"](1, 1, S, D, 4, True)
    return [Check(kern, [q, k, v, mask], {0: o[None, None]}, "float16", S)]


@case("tl/deepseek_v32/topk_selector", TL, "examples/deepseek_v32/topk_selector.py", "radix select")
def _(m, rng):
    B, N, K = 2, 512, 32
    x = rng.standard_normal((B, N)).astype(np.float32)
    starts = np.zeros(B, np.int32)
    ends = np.array([N, N - 100], np.int32)
    idx = np.zeros((B, K), np.int32)

    def cmp(got, want):
        for r in range(B):
            ref = set(np.argsort(-x[r, :ends[r]], kind="stable")[:K].tolist())
            assert set(got[r].tolist()) == ref, f"row {r}: a different top-{K} set"
    return [Check(m["tl_topk_impl"], [x, idx, starts, ends], {("arg", 1): np.zeros((B, K))},
                  compare=cmp)]


@case("tl/cast/group_per_split_token_fp8", TL, "examples/cast/example_group_per_split_token_cast_to_fp8.py")
def _(m, rng):
    return group_fp8_checks(m, rng, [24, 40], 256, 8, 128)


def group_fp8_checks(m, rng, sizes, N, blk, M_max):
    """group_per_split_token_cast_to_fp8 on groups of `sizes` rows of width N (128-wide
    scale groups), blk_m `blk`, groups padded to M_max rows: the fp8 values (to one e4m3 step)
    and the scales of each group's rows."""
    import ml_dtypes
    sizes = np.array(sizes, np.int32)
    M, G = int(sizes.sum()), N // 128
    x = rn(rng, (M, N), scale=2.0).astype(ml_dtypes.bfloat16)  # the module's dtype
    xv = x.astype(f64).reshape(M, G, 128)
    amax = np.maximum(np.abs(xv).max(2), 1e-4)
    s = amax / 448.0
    q = np.clip(xv / s[:, :, None], -448, 448).reshape(M, N)
    qg, sg = np.zeros((len(sizes), M_max, N)), np.zeros((len(sizes), M_max, G))
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


@case("tl/gemm_streamk", TL, "examples/gemm_streamk/example_tilelang_gemm_streamk.py",
      "stream-K: run-time while loop over a local var, atomic_add of partial tiles")
def _(m, rng):
    # host code: the example derives its schedule at module level from torch tensors and the
    # GPU's SM count; the same arithmetic for small shapes and 6 "SMs" (so that 2 tiles are
    # split over programs, some at a tile's start, some in its middle, and 6 are whole)
    return [streamk_check(m, rng, 64, 256, 128, 16, 128, 32, 6)]


def streamk_check(m, rng, M, N, K, bm, bn, bk, sms, uniform=False):
    """tl_matmul_streamk on M x N x K with bm x bn x bk blocks over `sms` programs, the
    example's module-level schedule computed for them (host code); `uniform`: the script's
    inputs, uniform in [-1, 1) (else normal)."""
    total_tiles = -(-M // bm) * -(-N // bn)
    iters = -(-K // bk)
    sk_tiles = total_tiles % sms
    if total_tiles - sk_tiles > sms:
        sk_tiles += sms
    sk_iters = sk_tiles * iters
    m.update(total_sm=sms, streamk_programs=sms, iters_per_tile=iters,
             streamk_full_tiles=sk_iters // sms, streamk_partial_tiles=sk_iters % sms,
             sm_patition_factor=max((total_tiles - sk_tiles) // sms, 1))
    if uniform:
        a = (rng.random((M, K)) * 2 - 1).astype(np.float16)
        b = (rng.random((N, K)) * 2 - 1).astype(np.float16)
    else:
        a, b = rn(rng, (M, K), "float16"), rn(rng, (N, K), "float16")
    c = np.zeros((M, N), np.float32)
    args = [a, b, c, sk_tiles, bm, bn, bk, False, True, "float16", "float32", "float32", 2, 64]
    return Check(m["tl_matmul_streamk"], args, {("arg", 2): a.astype(f64) @ b.astype(f64).T},
                 "float32", K, tol=(2e-3, 2e-3))
