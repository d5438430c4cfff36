"""Sweep cases added in the dialect10 session, third file: upstream example kernels not in the
other case files (host code and float64 references written here; the kernels are the
examples' own, read from the mirror at run time by upstream_sweep.py)."""
import numpy as np

from upstream_sweep import Check, case, rn, with_kwargs
from upstream_cases_new import A, TL, f64, mm, sigmoid  # noqa: F401
from upstream_cases_held import int_operands
from upstream_cases_new4 import pack_int4

# ------------------------------------------------------------------------------ tilelang-ascend


def sigmoid_gating_ref(A_log, a, dt_bias, q, k, v, b, init_vk, slots, cu, scale, sp_beta=1.0):
    """Gated delta rule per sequence and value head, token by token: q, k l2-normalised,
    decay exp(-exp(A_log) * softplus(a + dt_bias)), write strength sigmoid(b);
    state S (dk, dv): S <- decay * S; S += k (v - k S) * strength; out = scale * q S.
    init_vk / final states as (dv, dk)."""
    T_, nk, dk = q.shape
    nv, dv = v.shape[1], v.shape[2]
    out = np.zeros((T_, nv, dv))
    final = np.zeros((len(cu) - 1, nv, dv, dk))
    for s in range(len(cu) - 1):
        for h in range(nv):
            S = init_vk[slots[s], h].astype(f64).T
            kh = h // (nv // nk)
            for t in range(cu[s], cu[s + 1]):
                qt, kt = q[t, kh].astype(f64), k[t, kh].astype(f64)
                qt, kt = qt / np.sqrt((qt * qt).sum() + 1e-12), kt / np.sqrt((kt * kt).sum() + 1e-12)
                x = f64(a[t, h]) + f64(dt_bias[h])
                sp = x if sp_beta * x > 20 else np.log1p(np.exp(sp_beta * x)) / sp_beta
                S = S * np.exp(-np.exp(f64(A_log[h])) * sp)
                S = S + np.outer(kt, (v[t, h].astype(f64) - kt @ S) * sigmoid(f64(b[t, h])))
                out[t, h] = scale * qt @ S
            final[s, h] = S.T
    return out, final


@case("asc/fused_sigmoid_gating_delta_rule/varlen", A,
      "examples/fused_sigmoid_gating_delta_rule/fused_sigmoid_gating_delta_rule_varlen.py",
      "varlen gated delta rule, token by token on the vector cores: own MTE2/V/MTE3 flags "
      "without AUTO_SYNC, fixed core count, state slots read through an index tensor")
def _(m, rng):
    seqlens, nk, nv, dk, dv, pad = (5, 9), 1, 2, 32, 32, 64
    T_ = sum(seqlens)
    cu = np.concatenate([[0], np.cumsum(seqlens)]).astype(np.int32)
    q, k = rn(rng, (T_ + pad, nk, dk), "float16"), rn(rng, (T_ + pad, nk, dk), "float16")
    v = rn(rng, (T_ + pad, nv, dv), "float16")
    a, b = rn(rng, (T_ + pad, nv), "float16"), rn(rng, (T_ + pad, nv), "float16")
    A_log, dt_bias = rn(rng, (nv,), "float16"), rn(rng, (nv,), "float16")
    slots_n = 6
    init_vk = rn(rng, (slots_n, nv, dv, dk), "float16", 0.5)
    slots = np.array([4, 1], np.int32)
    scale = dk ** -0.5
    out, final = sigmoid_gating_ref(A_log, a, dt_bias, q, k, v, b, init_vk, slots, cu, scale)
    want_out = np.zeros((T_ + pad, nv, dv))
    want_out[:T_] = out[:T_]

    def first_tokens(got, want):
        from upstream_sweep import tolerance
        rtol, atol = tolerance("float16", dk)
        g = got[:T_].astype(f64)   # rows past the last token are padding the kernel leaves
        assert np.allclose(g, want[:T_], rtol=rtol, atol=atol), \
            f"out: max abs err {np.abs(g - want[:T_]).max():.3g}"
    kern = m["kernel"](len(seqlens), slots_n, T_ + pad, max(seqlens), nk, nv, dk, dv, 32, scale)
    args = [A_log, a, dt_bias, q, k, v, b, init_vk, slots, cu]
    return [Check(kern, args, {0: want_out}, "float16", dk, compare=first_tokens),
            Check(kern, args, {1: final}, "float16", dk)]


# ------------------------------------------------------------------------------ TileLang


@case("tl/deepseek_v32/sparse_mla_fwd", TL, "examples/deepseek_v32/sparse_mla_fwd.py",
      "eager sparse MLA forward: KV rows gathered by a T.Parallel map through GM indices "
      "(SKV-padded, masked by index <= position), bool mask tile, gemms on Q_shared slices")
def _(m, rng):
    return v32_sparse_checks(m, rng)


def v32_sparse_checks(m, rng, extra=(), topk=64, with_lse=True, H=16, tail=32, S=8, SKV=64,
                      dim=64, **kw):
    """deepseek_v32's eager sparse_mla_fwd(q, kv, indices, *extra, heads=, dim=, tail_dim=,
    topk=, **kw) on one batch of S queries: causal KV positions chosen per query, SKV-padded."""
    import ml_dtypes
    from upstream_cases_cv import sparse_ref
    dq = dim + tail
    q = rn(rng, (1, S, H, dq)).astype(ml_dtypes.bfloat16)
    kv = rn(rng, (1, SKV, 1, dq)).astype(ml_dtypes.bfloat16)
    idx = np.full((1, S, 1, topk), SKV, np.int32)
    for t in range(S):
        sel = rng.permutation(max(1, t))[:topk]
        idx[0, t, 0, :len(sel)] = sel
    want, lse = np.zeros((1, S, H, dim)), np.zeros((1, S, H))
    for t in range(S):
        ids = idx[0, t, 0]
        valid = ids <= t
        rows = kv[0, np.minimum(ids, SKV - 1), 0]
        want[0, t] = sparse_ref(q[0, t], rows, dim, dq ** -0.5, valid)
        s = q[0, t].astype(f64) @ rows.astype(f64).T * dq ** -0.5
        s = np.where(valid[None, :], s, -np.inf)
        mx = s.max(-1)
        lse[0, t] = (np.log(np.exp(s - mx[:, None]).sum(-1)) + mx) / np.log(2)
    fn = with_kwargs(m["sparse_mla_fwd"], heads=H, dim=dim, tail_dim=tail, topk=topk, **kw)
    want = {0: want, 1: lse} if with_lse else {0: want}
    return [Check(fn, [q, kv, idx, *extra], want, "bfloat16", topk)]


@case("tl/gemm_int4/gemm_int4", TL, "examples/gemm_int4/example_tilelang_gemm_int4.py",
      "T.int4 tensors and tiles, gemm on int4 operands, host-packed int8 pairs")
def _(m, rng):
    import tilelang_mini
    M, N, K = 64, 64, 128
    a, b = int_operands(rng, M, N, K, -8, 8)
    pack = lambda t: pack_int4(t).view(np.int8)  # noqa: E731
    kern = tilelang_mini.compile(m["matmul_nt_int4"](M, N, K, 32, 32, 64), out_idx=-1)
    return [Check(kern, [pack(a), pack(b)], {0: a.astype(f64) @ b.astype(f64).T}, "int32",
                  tol=(0, 0))]


@case("asc/xllm/split_qkv_rmsnorm_mrope", A, "examples/xllm_kernels/split_qkv_rmsnorm_mrope.py",
      "xllm: split a fused QKVG row, per-head RMSNorm and multimodal rope (gather of the t/h/w "
      "cos/sin axes by a uint32 byte-offset pattern), T.macro helpers with own flags, scalar "
      "num_tokens/eps parameters")
def _(m, rng):
    import ml_dtypes
    bf = ml_dtypes.bfloat16
    nt, nq, nkv, hs, rd, eps = 4, 2, 1, 256, 64, 1e-6
    m["COMPILE_MAX_TOKENS"] = nt   # host constant: the declared row count of every tensor
    half = rd // 2
    checks = []
    for section, inter in (((11, 11, 10), False), ((11, 11, 10), True)):
        qkv = rn(rng, (nt, (2 * nq + 2 * nkv), hs)).astype(bf)
        qw, kw = rn(rng, (1, hs)).astype(bf), rn(rng, (1, hs)).astype(bf)
        phase = rng.standard_normal((3, nt, half))
        cs = np.concatenate([np.cos(phase), np.sin(phase)], -1).astype(bf)      # (3, nt, rd)
        # which axis (t, h, w) each rotary pair takes its angle from
        axis = np.zeros(half, int)
        t_len, h_len, w_len = section
        for i in range(half):
            if inter:
                axis[i] = 1 if (i % 3 == 1 and i <= 3 * h_len) else 2 if (i % 3 == 2 and i <= 3 * w_len) else 0
            else:
                axis[i] = 0 if i < t_len else 1 if i < t_len + h_len else 2
        pad = -(-3 * rd // 128) * 128
        pat = np.zeros(pad, np.uint32)
        pat[:half] = (axis * rd + np.arange(half)) * 2
        pat[half:rd] = (axis * rd + half + np.arange(half)) * 2
        cos = cs[axis, :, np.arange(half)].T.astype(f64)                        # (nt, half)
        sin = cs[axis, :, half + np.arange(half)].T.astype(f64)

        def norm_rope(x, w):
            x = x.astype(f64)
            x = x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w.astype(f64)[0]
            x1, x2 = x[..., :half].copy(), x[..., half:rd].copy()
            x[..., :half] = x1 * cos[:, None] - x2 * sin[:, None]
            x[..., half:rd] = x2 * cos[:, None] + x1 * sin[:, None]
            return x
        q, gate = qkv[:, :nq], qkv[:, nq:2 * nq]
        k, v = qkv[:, 2 * nq:2 * nq + nkv], qkv[:, 2 * nq + nkv:]
        kern = m["split_qkv_rmsnorm_mrope_kernel_jit"](head_size=hs, rope_dim=rd, num_q_heads=nq,
                                                       num_kv_heads=nkv, vec_core_num=4,
                                                       max_num_tokens=nt)
        outs = [np.zeros((nt, nq, hs), bf), np.zeros((nt, nkv, hs), bf),
                np.zeros((nt, nkv, hs), bf), np.zeros((nt, nq, hs), bf)]
        args = [qkv, qw, kw, cs.transpose(1, 0, 2).reshape(nt, 3 * rd).copy(), pat] + outs + [nt, eps]
        checks.append(Check(kern, args, {("arg", 5): norm_rope(q, qw), ("arg", 6): norm_rope(k, kw),
                                         ("arg", 7): v.astype(f64), ("arg", 8): gate.astype(f64)},
                            "bfloat16", hs))
    return checks
