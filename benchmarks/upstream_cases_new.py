"""Sweep cases added in the dialect2 session: upstream example kernels not in the other case
files (host code and float64 references written here; the kernels are the examples' own, read
from the mirror at run time by upstream_sweep.py)."""
import numpy as np

from upstream_sweep import Check, case, rn

A, TL = "ascend", "tilelang"
f64 = np.float64


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def mm(a, b):
    return a.astype(f64) @ b.astype(f64)


# ------------------------------------------------------------------------------ tilelang-ascend

@case("asc/gemm/pto_developer", A, "examples/gemm/example_gemm_pto_developer.py",
      "expert gemm_v0 with init=(k == 0), AUTO_SYNC flags from the compiler")
def _(m, rng):
    a, b = rn(rng, (256, 128), "float16"), rn(rng, (128, 512), "float16")
    return [Check(m["matmul"](256, 512, 128, 128, 256, 64), [a, b], {0: mm(a, b)}, "float16", 128)]


@case("asc/gemm_aot/example_gemm", A, "examples/gemm_aot/example_gemm.py",
      "a bare prim_func factory (no @jit), compiled by tilelang.compile; barrier_all")
def _(m, rng):
    import tilelang_mini
    a, b = rn(rng, (256, 128), "float16"), rn(rng, (128, 256), "float16")
    k = tilelang_mini.compile(m["matmul"](256, 256, 128, 128, 128, 64), out_idx=[-1])
    return [Check(k, [a, b], {0: mm(a, b)}, "float16", 128)]


@case("asc/autotune/gemm_autotune", A, "examples/autotune/example_gemm_autotune.py",
      "@autotune(configs, ref_prog, supply_prog) over a developer-mode gemm_v0 (no T.Scope)")
def _(m, rng):
    a, b = rn(rng, (256, 256), "float16"), rn(rng, (256, 256), "float16")
    return [Check(m["matmul"](256, 256, 256), [a, b], {0: mm(a, b)}, "float16", 256)]


@case("asc/gemm/fp8_pto", A, "examples/gemm/example_gemm_fp8_pto.py", "FP8 cube operands (A5 only)",
      chip="ascend950")
def _(m, rng):
    import ml_dtypes
    m["input_dtype_str"] = "e4m3_float8"  # module-level host code (argparse) the loader skips
    a = rn(rng, (128, 128)).astype(ml_dtypes.float8_e4m3fn)
    b = rn(rng, (128, 128)).astype(ml_dtypes.float8_e4m3fn)
    return [Check(m["fp8_matmul"](128, 128, 128, 128, 128, 64), [a, b], {0: mm(a, b)}, "float32", 128)]


def softplus(x, beta, threshold):
    bx = beta * x
    return np.where(bx > threshold, x, np.log1p(np.exp(np.minimum(bx, threshold))) / beta)


@case("asc/xllm/fused_gdn_gating", A, "examples/xllm_kernels/fused_gdn_gating.py",
      "T.tile ops (cast/axpy/compare/select/ln/sigmoid), T.If/T.Then/T.Else, scalar params")
def _(m, rng):
    import ml_dtypes
    checks = []
    for nb, nh in ((16, 8), (37, 16)):
        A_log = rn(rng, (nh,))
        dt_bias = rn(rng, (nh,))
        a = rn(rng, (nb, nh)).astype(ml_dtypes.bfloat16)
        b = rn(rng, (nb, nh)).astype(ml_dtypes.bfloat16)
        g = np.zeros((nb, nh), np.float32)
        beta = np.zeros((nb, nh), ml_dtypes.bfloat16)
        x = a.astype(f64) + dt_bias
        want_g = -np.exp(A_log.astype(f64)) * softplus(x, 1.0, 20.0)
        want_b = sigmoid(b.astype(f64))
        k = m["fused_gdn_gating_kernel_jit"](num_batches=nb, compile_max_batch=nb, num_heads=nh)
        checks.append(Check(k, [A_log, a, b, dt_bias, g, beta, nb, 1.0, 20.0],
                            {("arg", 4): want_g}, tol=(1e-4, 1e-4)))
        checks.append(Check(k, [A_log, a, b, dt_bias, g, beta, nb, 1.0, 20.0],
                            {("arg", 5): want_b}, "bfloat16"))
    return checks


def permute_ref(tokens, idx, topk, out_len):
    """npu_moe_token_permute: a stable counting sort of the flat expert ids; flat entry i goes to
    row dest[i] (rows at or past out_len dropped), that row holds token i // topk."""
    order = np.argsort(idx, kind="stable")
    dest = np.empty_like(order)
    dest[order] = np.arange(len(idx))
    out = np.zeros((out_len, tokens.shape[1]))
    for i, d in enumerate(dest):
        if d < out_len:
            out[d] = tokens[i // topk]
    return out, dest


@case("asc/moe/token_permute", A, "examples/moe_token_permute/moe_token_permute.py",
      "expert V scope: per-core expert histogram through a workspace, T.sync_all, scatter rows")
def _(m, rng):
    checks = []
    nt, topk, hid, ne = 16, 4, 32, 4
    for out_len in (nt * topk, 40):
        tokens = rn(rng, (nt, hid), "float16")
        idx = rng.integers(0, ne, nt * topk).astype(np.int32)
        fn, padded = m["_compile_fused"](nt, topk, hid, nt * topk, out_len, ne, NUM_CORES=4,
                                         dtype="float16")
        ip = np.zeros((1, padded), np.int32)
        ip[0, :nt * topk] = idx
        out, dest = permute_ref(tokens.astype(f64), idx, topk, out_len)
        checks.append(Check(fn, [tokens, ip], {0: out, 1: dest[None, :].astype(f64)}, "float16",
                            tol=(0, 0)))
    return checks


# ------------------------------------------------------------------------------ TileLang

@case("tl/gemm/autotune_pass_configs", TL, "examples/gemm/example_gemm_autotune_pass_configs.py",
      "AutoTuner.from_kernel(...).set_compile_args().set_profile_args().run(); per-config pass_configs")
def _(m, rng):
    a, b = rn(rng, (256, 128), "float16"), rn(rng, (256, 128), "float16")
    want = {0: mm(a, b.T)}
    return [Check(m["get_best_config"](256, 256, 128).kernel, [a, b], want, "float16", 128),
            Check(m["matmul_decorator"](256, 256, 128), [a, b], want, "float16", 128)]


def varlen_attn_ref(q, k, v, cu_q, cu_k, causal, group=1):
    """Unpadded attention: batch b's queries q[cu_q[b]:cu_q[b+1]] attend to its keys
    k[cu_k[b]:cu_k[b+1]] (head h reads kv head h // group); causal aligned on the right (query i
    sees key j when i + (len_k - len_q) >= j; a query that sees no key gives 0)."""
    out = np.zeros(q.shape)
    d = q.shape[-1]
    for b in range(len(cu_q) - 1):
        qs, qe, ks, ke = cu_q[b], cu_q[b + 1], cu_k[b], cu_k[b + 1]
        for h in range(q.shape[1]):
            qq = q[qs:qe, h].astype(f64)
            kk, vv = k[ks:ke, h // group].astype(f64), v[ks:ke, h // group].astype(f64)
            s = qq @ kk.T / np.sqrt(d)
            if causal:
                i, j = np.indices(s.shape)
                s = np.where(i + (ke - ks) - (qe - qs) >= j, s, -np.inf)
            mx = np.max(s, 1, keepdims=True)
            p = np.exp(s - np.where(np.isfinite(mx), mx, 0))
            den = p.sum(1, keepdims=True)
            out[qs:qe, h] = np.where(den > 0, (p @ vv) / np.where(den > 0, den, 1), 0)
    return out


def varlen_inputs(rng, lq, lk, heads, kv_heads, dim):
    cu_q = np.concatenate([[0], np.cumsum(lq)]).astype(np.int32)
    cu_k = np.concatenate([[0], np.cumsum(lk)]).astype(np.int32)
    q = rn(rng, (cu_q[-1], heads, dim), "float16")
    k = rn(rng, (cu_k[-1], kv_heads, dim), "float16")
    v = rn(rng, (cu_k[-1], kv_heads, dim), "float16")
    return q, k, v, cu_q, cu_k


@case("tl/flash_attention/mha_fwd_varlen", TL, "examples/flash_attention/example_mha_fwd_varlen.py",
      "scalar parameter max_seqlen_q: T.int32 (the grid extent), cu_seqlens from GM, masked stores")
def _(m, rng):
    return varlen_checks(rng, [50, 77], [90, 64], 2, 2, 154, lambda lq_sum, lk_sum, causal:
                         m["flashattn"](2, lq_sum, lk_sum, 2, 64, causal, block_M=64,
                                        block_N=64, num_stages=1, threads=128))


def varlen_checks(rng, lq, lk, heads, kv_heads, reduce_len, make):
    """Causal and not: `make(total q rows, total k rows, causal)` builds the kernel."""
    checks = []
    for causal in (False, True):
        q, k, v, cu_q, cu_k = varlen_inputs(rng, lq, lk, heads, kv_heads, 64)
        want = varlen_attn_ref(q, k, v, cu_q, cu_k, causal, heads // kv_heads)
        checks.append(Check(make(int(cu_q[-1]), int(cu_k[-1]), causal),
                            [q, k, v, cu_q, cu_k, max(lq)], {0: want}, "float16", reduce_len))
    return checks


@case("tl/flash_attention/gqa_fwd_varlen", TL, "examples/flash_attention/example_gqa_fwd_varlen.py",
      "GQA, scalar parameter max_seqlen_q, cu_seqlens from GM")
def _(m, rng):
    return varlen_checks(rng, [64, 33], [64, 100], 4, 2, 164, lambda lq_sum, lk_sum, causal:
                         m["flashattn"](2, 2, lq_sum, lk_sum, 4, 64, causal, block_M=64,
                                        block_N=64, num_stages=1, threads=128))


def conv_nhwc_ref(a, w, S, D, P):
    """out[n, oh, ow, f] = sum_{kh, kw, c} a_pad[n, oh*S + kh*D, ow*S + kw*D, c] w[kh, kw, c, f]."""
    N, H, W, C = a.shape
    K, F = w.shape[0], w.shape[3]
    OH = (H + 2 * P - D * (K - 1) - 1) // S + 1
    OW = (W + 2 * P - D * (K - 1) - 1) // S + 1
    ap = np.pad(a.astype(f64), ((0, 0), (P, P), (P, P), (0, 0)))
    out = np.zeros((N, OH, OW, F))
    for kh in range(K):
        for kw in range(K):
            patch = ap[:, kh * D: kh * D + S * (OH - 1) + 1: S, kw * D: kw * D + S * (OW - 1) + 1: S]
            out += patch @ w[kh, kw].astype(f64)
    return out


@case("tl/convolution", TL, "examples/convolution/example_convolution.py",
      "eager jit, T.im2col, GM views T.Tensor(shape, dtype, buf.data)")
def _(m, rng):
    checks = []
    for (N, C, H, W, F, K, S, D, P) in ((2, 32, 8, 8, 64, 3, 1, 1, 1), (1, 16, 9, 7, 64, 3, 2, 1, 1)):
        a, w = rn(rng, (N, H, W, C), "float16"), rn(rng, (K, K, C, F), "float16")
        conv = m["convolution"]
        checks.append(Check(lambda a, w, S=S, D=D, P=P: conv(a, w, S, D, P, 64, 64, 32, 2, 128),
                            [a, w], {0: conv_nhwc_ref(a, w, S, D, P)}, "float16", K * K * C))
        checks[-1].fn.kernel_for = lambda a, w, S=S, D=D, P=P: conv.kernel_for(
            a, w, S, D, P, 64, 64, 32, 2, 128)
    return checks


def l2norm(x):
    x64 = x.astype(f64)
    return (x64 / np.sqrt((x64 ** 2).sum(-1, keepdims=True) + 1e-6)).astype(x.dtype)


@case("tl/linear_attention/linear_attn_fwd", TL, "examples/linear_attention/example_linear_attn_fwd.py",
      "chunked causal linear attention, atomic_add into O, final state")
def _(m, rng):
    return linear_attn_fwd_checks(m, rng, 1, 128, 2, 64)


def linear_attn_fwd_checks(m, rng, B, S, H, D):
    """tl_fused_chunk_fwd_kernel(B, S, H, D, D): causal linear attention O (atomic_add into a
    zeroed argument) and the final state, on l2-normalised q, k."""
    q, k = l2norm(rn(rng, (B, S, H, D), "float16")), l2norm(rn(rng, (B, S, H, D), "float16"))
    v = rn(rng, (B, S, H, D), "float16")  # q, k l2-normalised as the example's host code does
    scale = D ** -0.5
    q64, k64, v64 = q.astype(f64) * scale, k.astype(f64), v.astype(f64)
    o = np.zeros((B, S, H, D))
    for b, h in np.ndindex(B, H):
        s = np.tril(q64[b, :, h] @ k64[b, :, h].T)
        o[b, :, h] = s @ v64[b, :, h]
    state = np.einsum("bshk,bshv->bhkv", k64, v64)
    kern = m["tl_fused_chunk_fwd_kernel"](B, S, H, D, D)
    return [Check(kern, [q, k, v, np.zeros((B, S, H, D), np.float32)],
                  {("arg", 3): o, 0: state}, "float16", S)]


@case("tl/gdn/chunk_scaled_dot_kkt", TL, "examples/gdn/example_chunk_scaled_dot_kkt.py",
      "bf16 (K*beta) K^T per chunk, gated strictly-lower mask with T.if_then_else(... and ...)")
def _(m, rng):
    import ml_dtypes
    B, S, H, DK = 1, 128, 2, 64
    K = rn(rng, (B, S, H, DK)).astype(ml_dtypes.bfloat16)
    beta = rn(rng, (B, S, H)).astype(ml_dtypes.bfloat16)
    checks = []
    for use_g in (True, False):
        G = rn(rng, (B, S, H))
        want = np.zeros((B, S, H, 64))
        for c in range(S // 64):
            sl = slice(c * 64, (c + 1) * 64)
            for h in range(H):
                kk = K[0, sl, h].astype(f64)
                # Beta_K_fragment is a bfloat16 tile: the products are rounded to bf16 first
                bk = (kk * beta[0, sl, h].astype(f64)[:, None]).astype(ml_dtypes.bfloat16)
                a = bk.astype(f64) @ kk.T
                i, j = np.indices(a.shape)
                if use_g:
                    g = G[0, sl, h].astype(f64)
                    gd = g[:, None] - g[None, :]
                    a = np.where((gd <= 0) & (i > j), a * np.exp(np.minimum(gd, 0)), 0)
                else:
                    a = np.where(i > j, a, 0)
                want[0, sl, h] = a
        kern = m["tilelang_chunk_scaled_dot_kkt_fwd"](B, S, H, DK, use_g=use_g, threads=128)
        checks.append(Check(kern, [K, beta, G], {0: want}, "bfloat16", DK))
    return checks


@case("tl/mamba/chunk_state", TL, "examples/linear_attention/example_mamba_chunk_state.py",
      "@autotune above an eager @jit (every config given), decay-weighted B^T x per chunk")
def _(m, rng):
    batch, seqlen, cs, ngroups, nheads, headdim, dstate = 1, 128, 64, 1, 2, 64, 64
    nchunks = seqlen // cs
    Bm = rn(rng, (batch, seqlen, ngroups, dstate), "float16")
    x = rn(rng, (batch, seqlen, nheads, headdim), "float16")
    dt = (rng.random((batch, nheads, nchunks, cs)) * 0.5).astype(np.float16)
    dA = np.cumsum(-rng.random((batch, nheads, nchunks, cs)) * 0.05, -1).astype(np.float16)
    want = np.zeros((batch, nchunks, nheads, headdim, dstate))
    for c in range(nchunks):
        for h in range(nheads):
            sl = slice(c * cs, (c + 1) * cs)
            w = np.exp(dA[0, h, c, -1].astype(f64) - dA[0, h, c].astype(f64)) * dt[0, h, c]
            g = h // (nheads // ngroups)
            want[0, c, h] = (x[0, sl, h].astype(f64) * w[:, None]).T @ Bm[0, sl, g].astype(f64)
    fn = m["chunk_state_fwd"]
    kw = dict(block_M=64, block_N=64, block_K=64, num_stages=2)
    chk = Check(lambda *a: fn(*a, **kw), [Bm, x, dt, dA], {0: want}, "float16", cs)
    chk.fn.kernel_for = lambda *a: fn.factory.kernel_for(*a, **kw) if hasattr(fn, "factory") \
        else fn.kernel_for(*a, **kw)
    return [chk]


def block_sparse_inputs(rng, B, H, SQ, SK, blk=64, dim=64):
    """q, k, v (fp16), a causal int8 block mask [B, H, SK/blk, SK/blk] (the first block column
    always on) and the element mask it allows (causal aligned on the right)."""
    ds = SK // blk
    q = rn(rng, (B, H, SQ, dim), "float16")
    k, v = rn(rng, (B, H, SK, dim), "float16"), rn(rng, (B, H, SK, dim), "float16")
    mask = (rng.random((B, H, ds, ds)) < 0.5).astype(np.int8)
    mask[..., 0] = 1
    mask = np.tril(mask)
    i, j = np.indices((SQ, SK))
    allowed = np.kron(mask, np.ones((blk, blk)))[..., :SQ, :SK].astype(bool) & (i + (SK - SQ) >= j)
    return q, k, v, mask, allowed


def masked_attn_ref(q, k, v, allowed, scale=None):
    """softmax(q k^T * scale masked by `allowed`) v over the last two axes, in float64."""
    scale = scale if scale is not None else q.shape[-1] ** -0.5
    s = np.einsum("...sd,...td->...st", q.astype(f64), k.astype(f64)) * scale
    s = np.where(allowed, s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return np.einsum("...st,...td->...sd", p, v.astype(f64))


@case("tl/seer_attention/block_sparse_attn", TL, "examples/seer_attention/block_sparse_attn_tilelang.py",
      "int8 block mask read per kv block (`if block_mask[k] != 0`), causal with past_len")
def _(m, rng):
    checks = []
    for B, H, SQ, SK in ((2, 2, 256, 256), (1, 1, 128, 256)):
        q, k, v, mask, allowed = block_sparse_inputs(rng, B, H, SQ, SK)
        ds = SK // 64
        kern = m["blocksparse_flashattn"](B, H, SQ, SK, 64, ds, is_causal=True)
        checks.append(Check(kern, [q, k, v, mask], {0: masked_attn_ref(q, k, v, allowed)},
                            "float16", SK))
    return checks
