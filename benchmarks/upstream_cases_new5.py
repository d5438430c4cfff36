"""Sweep cases added in the dialect10 session, third file: upstream example kernels not in the
other case files (host code and float64 references written here; the kernels are the
examples' own, read from the mirror at run time by upstream_sweep.py)."""
import numpy as np

from upstream_sweep import Check, case, rn
from upstream_cases_new import A, TL, f64, mm, sigmoid  # noqa: F401

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
    import ml_dtypes
    from upstream_cases_cv import sparse_ref
    S, SKV, H, dim, tail, topk = 8, 64, 16, 64, 32, 64
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
    f = m["sparse_mla_fwd"]
    args = dict(heads=H, dim=dim, tail_dim=tail, topk=topk)
    fn = lambda q, kv, i: f(q, kv, i, **args)  # noqa: E731
    fn.kernel_for = lambda q, kv, i: f.kernel_for(q, kv, i, **args)
    return [Check(fn, [q, kv, idx], {0: want, 1: lse}, "bfloat16", topk)]


@case("tl/gemm_int4/gemm_int4", TL, "examples/gemm_int4/example_tilelang_gemm_int4.py",
      "T.int4 tensors and tiles, gemm on int4 operands, host-packed int8 pairs")
def _(m, rng):
    import tilelang_mini
    M, N, K = 64, 64, 128
    a = rng.integers(-8, 8, (M, K)).astype(np.int8)
    b = rng.integers(-8, 8, (N, K)).astype(np.int8)
    pack = lambda t: ((t[:, 0::2].astype(np.int16) & 0xF) | ((t[:, 1::2].astype(np.int16) & 0xF) << 4)).astype(np.uint8).view(np.int8)  # noqa: E731
    kern = tilelang_mini.compile(m["matmul_nt_int4"](M, N, K, 32, 32, 64), out_idx=-1)
    return [Check(kern, [pack(a), pack(b)], {0: a.astype(f64) @ b.astype(f64).T}, "int32",
                  tol=(0, 0))]
