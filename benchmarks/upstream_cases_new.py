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


@case("asc/gemm/fp8_pto", A, "examples/gemm/example_gemm_fp8_pto.py", "FP8 cube operands (A5 only)")
def _(m, rng):
    import ml_dtypes
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
    checks = []
    lq, lk = [50, 77], [90, 64]
    for causal in (False, True):
        q, k, v, cu_q, cu_k = varlen_inputs(rng, lq, lk, 2, 2, 64)
        kern = m["flashattn"](2, int(cu_q[-1]), int(cu_k[-1]), 2, 64, causal, block_M=64,
                              block_N=64, num_stages=1, threads=128)
        checks.append(Check(kern, [q, k, v, cu_q, cu_k, max(lq)],
                            {0: varlen_attn_ref(q, k, v, cu_q, cu_k, causal)}, "float16", 154))
    return checks


@case("tl/flash_attention/gqa_fwd_varlen", TL, "examples/flash_attention/example_gqa_fwd_varlen.py",
      "GQA, scalar parameter max_seqlen_q, cu_seqlens from GM")
def _(m, rng):
    checks = []
    lq, lk = [64, 33], [64, 100]
    for causal in (False, True):
        q, k, v, cu_q, cu_k = varlen_inputs(rng, lq, lk, 4, 2, 64)
        kern = m["flashattn"](2, 2, int(cu_q[-1]), int(cu_k[-1]), 4, 64, causal, block_M=64,
                              block_N=64, num_stages=1, threads=128)
        checks.append(Check(kern, [q, k, v, cu_q, cu_k, max(lq)],
                            {0: varlen_attn_ref(q, k, v, cu_q, cu_k, causal, 2)}, "float16", 164))
    return checks
