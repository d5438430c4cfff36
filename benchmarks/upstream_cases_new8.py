"""Sweep cases added in the cases session: the TileLang GDN/KDA backward kernels no other case
file read (state gradient over chunks, intra-chunk score gradients, chunk-output gradients, the
split WY backward), then GEMM and attention examples without a case (the rest of the session's
cases: upstream_cases_new10.py). Host code and float64 references are written here from each
operation's meaning (backward references from the forward math by hand, checked against finite
differences of the forward); the kernels are the examples' own, read from the mirror at run
time by upstream_sweep.py."""
import numpy as np

from upstream_sweep import Check, case, rn
from upstream_cases_new import TL, f64
from upstream_cases_new3 import CHUNK_DIMS, chunk_rows, gdn_gates, wy_inputs
from upstream_cases_new7 import KDA, kda_gates


# ------------------------------------------------------------------ GDN / KDA backward kernels


def dhu_ref(q, k, w, do, dv, dht, BS, scale, gates):
    """Gradients through the delta-rule state recurrence of a chunked linear attention, float64.
    Per chunk c (rows r) the forward reads the state h_c in o_r = scale * (q_r * qgate) h_c and
    v_new_r = u_r - w_r h_c, and writes h_{c+1} = h_c * decay + k_r^T (v_new_r * vgate); the loss
    adds <dO, o>, <dv, v_new> (the intra-chunk paths) and <dht, h_final>. Walking back:
    dv2_r = dv_r + vgate * (k_r dh_{c+1}), dh_c = dh_{c+1} * decay + scale (q * qgate)^T dO_r
    - w_r^T dv2_r. `gates(b, h, r)` -> (qgate [BS, 1|DK], vgate [BS, 1], decay [DK, 1]).
    Returns (dh_{c+1} per chunk, dh_0, dv2)."""
    (B, S, H, DK), DV = k.shape, do.shape[-1]
    dh, dv2, dh0 = np.zeros((B, S // BS, H, DK, DV)), np.zeros(dv.shape), np.zeros(dht.shape)
    for b, h in np.ndindex(B, H):
        st = dht[b, h].astype(f64)
        for c, r in reversed(chunk_rows(S, BS)):
            dh[b, c, h] = st
            qgate, vgate, decay = gates(b, h, r)
            d = dv[b, r, h] + vgate * (k[b, r, h].astype(f64) @ st)
            dv2[b, r, h] = d
            st = st * decay + scale * (q[b, r, h] * qgate).T @ do[b, r, h].astype(f64) \
                - w[b, r, h].astype(f64).T @ d
        dh0[b, h] = st
    return dh, dh0, dv2


def dhu_inputs(rng, B, S, H, DK, DV, dtype="float16"):
    q, k, w = (rn(rng, (B, S, H, DK), dtype, 0.1) for _ in range(3))
    do, dv = rn(rng, (B, S, H, DV), dtype, 0.5), rn(rng, (B, S, H, DV), dtype, 0.5)
    h0, dht = (rn(rng, (B, H, DK, DV), dtype, 0.5) for _ in range(2))
    return q, k, w, h0, dht, do, dv


@case("tl/gdn/chunk_delta_bwd", TL, "examples/gdn/example_chunk_delta_bwd.py",
      "GDN state gradient over chunks in reverse (i_s_inv), exp gates of a shared 1-D tile read "
      "as scalars, ternary mask, tfloat32 transposed fragments, three outputs")
def _(m, rng):
    B, S, H, DK, DV, BS = CHUNK_DIMS
    scale, checks = DK ** -0.5, []
    for use_g in (True, False):
        q, k, w, h0, dht, do, dv = dhu_inputs(rng, B, S, H, DK, DV)
        g = gdn_gates(rng, B, S, H)

        def gates(b, h, r, g=g, use_g=use_g):
            if not use_g:
                return 1.0, 1.0, 1.0
            gc = g[b, r, h].astype(f64)
            return np.exp(gc)[:, None], np.exp(gc[-1] - gc)[:, None], np.exp(gc[-1])
        dh, dh0, dv2 = dhu_ref(q, k, w, do, dv, dht, BS, scale, gates)
        kern = m["tilelang_chunk_gated_delta_rule_bwd_dhu"](
            B, S, H, DK, DV, "float16", "float16", "float32", "float32", "float32", BS, scale,
            use_g, True, True, 32, 128, 1)
        checks.append(Check(kern, [q, k, w, g, h0, dht, do, dv], {0: dh, 1: dh0, 2: dv2},
                            "float16", 2 * BS))
    return checks


@case("tl/kda/chunk_delta_bwd", TL, KDA + "chunk_delta_bwd.py",
      "KDA state gradient over chunks in reverse: per-channel exp2 decay by the chunk's last "
      "gate row (T.min index, a GM row into a 1-D tile), transpose_A gemms; autotune factory "
      "with every config given")
def _(m, rng):
    B, S, H, DK, DV, BS = CHUNK_DIMS
    scale = DK ** -0.5
    q, k, w, h0, dht, do, dv = dhu_inputs(rng, B, S, H, DK, DV)
    g = kda_gates(rng, B, S, H, DK, BS)
    dh, dh0, dv2 = dhu_ref(q, k, w, do, dv, dht, BS, scale, lambda b, h, r: (
        1.0, 1.0, np.exp2(g[b, r.stop - 1, h].astype(f64))[:, None]))   # q, k come gated
    kern = m["tilelang_chunk_gated_delta_rule_bwd_dhu"](
        B, S, H, DK, DV, "float16", "float16", "float32", "float32", "float32", BS, scale,
        True, True, True, 32, 128, 1)
    return [Check(kern, [q, k, w, g, h0, dht, do, dv], {0: dh, 1: dh0, 2: dv2}, "float16",
                  2 * BS)]


def kda_intra_bwd_ref(q, k, g, beta, dAqk, dAkk, BT, block_DK):
    """Gradients of the KDA intra-chunk scores, float64. Forward, within a chunk (local rows
    i, j, per-channel log2 gates g): Aqk[i, j] = sum_c q_i k_j 2^(g_i - g_j), j <= i, and
    Akk[i, j] = beta_i sum_c k_i k_j 2^(g_i - g_j), j < i. With the upstream gradients dAqk,
    dAkk: dq, dk, dbeta and dg (with respect to the gate in natural-log units, g ln 2, the FLA
    convention); dbeta as per-block partial sums over DK blocks (NK, B, S, H)."""
    B, S, H, DK = q.shape
    dq, dk, dg = (np.zeros(q.shape) for _ in range(3))
    db = np.zeros((DK // block_DK, B, S, H))
    for b, h in np.ndindex(B, H):
        for _, r in chunk_rows(S, BT):
            qc, kc, gc = (x[b, r, h].astype(f64) for x in (q, k, g))
            bc = beta[b, r, h].astype(f64)
            lq, lk = np.tril(dAqk[b, r, h].astype(f64)), np.tril(dAkk[b, r, h].astype(f64), -1)
            gate = np.exp2(gc[:, None, :] - gc[None, :, :])            # [i, j, c]
            dq_ = np.einsum("ij,jc,ijc->ic", lq, kc, gate)             # d/dq_i
            dkr = np.einsum("ij,jc,ijc->ic", lk, kc, gate)             # d/d(beta_i k_i)
            dkc = np.einsum("ij,ic,ijc->jc", lq, qc, gate) \
                + np.einsum("ij,ic,ijc->jc", lk, bc[:, None] * kc, gate)   # k_j as the column
            dq[b, r, h] = dq_
            dk[b, r, h] = bc[:, None] * dkr + dkc
            dg[b, r, h] = qc * dq_ + (bc[:, None] * dkr - dkc) * kc
            part = (dkr * kc).reshape(BT, DK // block_DK, block_DK).sum(-1)
            db[:, b, r, h] = part.T
    return dq, dk, db, dg


@case("tl/kda/chunk_bwd_intra", TL, KDA + "chunk_bwd_intra.py",
      "KDA intra-chunk score gradients per sub-chunk: Pipelined loops over earlier and later "
      "sub-chunks with run-time bounds, per-token column copies of dA, alloc_local beta, "
      "if_then_else triangle masks, per-DK-block dbeta; autotune factory, every config given")
def _(m, rng):
    B, S, H, DK, BT, BC, BK = 1, 128, 2, 64, 64, 16, 32
    q, k = rn(rng, (B, S, H, DK), "float32", 0.5), rn(rng, (B, S, H, DK), "float32", 0.5)
    g = kda_gates(rng, B, S, H, DK, BT)
    beta = rng.random((B, S, H)).astype(np.float32)
    dAqk = rn(rng, (B, S, H, BT), "float32", 0.5)      # entries above the diagonal unused
    dAkk = np.zeros((B, S, H, BT), np.float32)          # strictly lower per chunk (Akk is)
    for _, r in chunk_rows(S, BT):
        dAkk[:, r] = np.tril(rn(rng, (BT, BT), "float32", 0.5), -1)[None, :, None]
    dq, dk, dbeta, dg = (rn(rng, s, "float32", 0.5) for s in (q.shape, q.shape, beta.shape,
                                                              q.shape))
    wq, wk, wdb, wdg = kda_intra_bwd_ref(q, k, g, beta, dAqk, dAkk, BT, BK)
    kern = m["tilelang_chunk_bwd_intra"](B, S, H, DK, "float32", "float32", "float32",
                                         "float32", "float32", BT, BK, BC, 128, 0)
    return [Check(kern, [q, k, g, beta, dAqk, dAkk, dq, dk, dbeta, dg],
                  {0: wq + dq, 1: wk + dk, 2: wdb, 3: wdg + dg}, "float32", BT)]


def chunk_o_bwd_ref(q, k, v, h, g, do, dh, dv, BS, scale, block_DK, use_g):
    """Gradients of GDN's chunk output o = scale * (q h + tril(q k^T) v) per chunk, float64,
    with k also feeding the next state (dk += v dh^T) and w the new values (dw = -dv h^T).
    use_g: the example's gated path as its code is written, which is not FLA's gated gradient:
    its G_last stays 0 (dk's state term kept only where G >= 0, scaled by exp(-G)), the
    score mask compares gates (G_i <= G_j) rather than positions, and every row of dg gets
    G_last exp(G_last) + sum(dk * k); dg is per DK block (NK, B, S, H), q k^T too."""
    B, S, H, DK = q.shape
    NK = DK // block_DK
    dq, dk, dw = (np.zeros(q.shape) for _ in range(3))
    dg = np.zeros((NK, B, S, H))
    for b, hh in np.ndindex(B, H):
        for c, r in chunk_rows(S, BS):
            qc, kc, vc, doc, dvc = (x[b, r, hh].astype(f64) for x in (q, k, v, do, dv))
            hc, dhc = h[b, c, hh].astype(f64), dh[b, c, hh].astype(f64)
            dw[b, r, hh] = -dvc @ hc.T
            ds = doc @ vc.T
            if not use_g:
                ds = np.tril(ds)
                dq[b, r, hh] = scale * (doc @ hc.T + ds @ kc)
                dk[b, r, hh] = vc @ dhc.T + scale * ds.T @ qc
                continue
            gc = g[b, r, hh].astype(f64)
            dq_ = doc @ hc.T * np.exp(gc)[:, None] * scale
            dk_ = np.where(gc[:, None] >= 0, vc @ dhc.T * np.exp(-gc)[:, None], 0)
            diff = gc[:, None] - gc[None, :]
            ds = np.where(diff <= 0, ds * np.exp(diff) * scale, 0)
            dq[b, r, hh] = dq_ + ds @ kc
            dk[b, r, hh] = dk_ + ds.T @ qc
            last0 = gc[-1] * np.exp(gc[-1])
            for ik in range(NK):
                cols = slice(ik * block_DK, (ik + 1) * block_DK)
                dsp = ds * (qc[:, cols] @ kc[:, cols].T)   # the block's share of q k^T
                dg[ik, b, r, hh] = (dq_[:, cols] * qc[:, cols]).sum(1) \
                    - (dk_[:, cols] * kc[:, cols]).sum(1) + dsp.sum(1) - dsp.sum(0) \
                    + last0 + (dk_[:, cols] * kc[:, cols]).sum()
    return dq, dk, dw, dg


@case("tl/gdn/chunk_o_bwd", TL, "examples/gdn/example_chunk_o_bwd.py",
      "GDN chunk-output gradients dq/dk/dw/dg: gemms accumulated over DV blocks, alloc_var "
      "scalars, reduce_sum of a flattened 1-D tile to a scalar, ternary gate masks on GM reads, "
      "a transposed copy for a column reduction, per-DK-block dg written by T.Parallel")
def _(m, rng):
    B, S, H, DK, DV, BS, BK = 1, 128, 2, 128, 128, 64, 64
    scale, checks = DK ** -0.5, []
    for use_g in (True, False):
        q, k, w = (rn(rng, (B, S, H, DK), "float16", 0.3) for _ in range(3))
        v, do, dv = (rn(rng, (B, S, H, DV), "float16", 0.3) for _ in range(3))
        h, dh = (rn(rng, (B, S // BS, H, DK, DV), "float16", 0.1) for _ in range(2))
        g = rn(rng, (B, S, H), "float32", 0.5)   # the example's own inputs: gates of either sign
        dq, dk, dw, dg = chunk_o_bwd_ref(q, k, v, h, g, do, dh, dv, BS, scale, BK, use_g)
        kern = m["tilelang_chunk_o_bwd_dqkwg"](B, S, H, DK, DV, "float16", "float16", "float32",
                                               "float32", "float32", BS, scale, use_g, True,
                                               BK, 64, 128, 0)
        want = {0: dq, 1: dk, 2: dw}
        if use_g:
            want[3] = dg
        checks.append(Check(kern, [q, k, v, h, g, do, dh, dv, w], want, "float16", DV + BS))
    return checks


def wy_split_ref(k, beta, g, a, dA, dk, BS):
    """The split WY backward's second kernel, float64: the gradient reaching the strictly
    lower part L of A = (I + L)^-1, L[i, j] = beta_i k_i . k_j exp(g_i - g_j), is
    dL = tril(-A^T tril(dA, -1) A^T, -1) gated; then dk += beta_i dL k (as the row) + dL^T
    (beta k) (as the column), dbeta = rowsum((dL k) * k), and dL * (beta k k^T) twice for dg,
    as is (positive, rows) and transposed (negative, columns)."""
    dk2, dbeta = dk.astype(f64), np.zeros(beta.shape)
    pos, neg = np.zeros(dA.shape), np.zeros(dA.shape)
    B, S, H = beta.shape
    for b, h in np.ndindex(B, H):
        for _, r in chunk_rows(S, BS):
            A_ = a[b, r, h].astype(f64)
            kc, bc, gc = k[b, r, h].astype(f64), beta[b, r, h].astype(f64), g[b, r, h].astype(f64)
            dL = np.tril(-(A_.T @ np.tril(dA[b, r, h].astype(f64), -1) @ A_.T), -1)
            dL = dL * np.exp(gc[:, None] - gc[None, :])
            kb = kc * bc[:, None]
            dkr = dL @ kc
            dk2[b, r, h] += dkr * bc[:, None] + dL.T @ kb
            dbeta[b, r, h] = (dkr * kc).sum(1)
            prod = dL * (kb @ kc.T)
            pos[b, r, h], neg[b, r, h] = prod, prod.T
    return dk2, dbeta, pos, neg


@case("tl/gdn/wy_fast_bwd_split", TL, "examples/gdn/example_wy_fast_bwd_split.py",
      "GDN WY backward, second (split) kernel: dA through A's inverse (two gemms, transpose_A/B), "
      "`if` in T.Parallel zeroing a triangle, gate mask by if_then_else on GM reads, dk updated "
      "in place over DK blocks, a transposed scatter to GM; every output an argument")
def _(m, rng):
    B, S, H, DK, DV, BS = CHUNK_DIMS
    k, v, beta, g, a = wy_inputs(rng, gdn_gates(rng, B, S, H), DK, DV, BS)
    dw, du = rn(rng, k.shape, "float16", 0.5), rn(rng, v.shape, "float16", 0.5)
    dA = rn(rng, (B, S, H, BS), "float16", 0.5)
    dk = rn(rng, k.shape, "float16", 0.5)
    wdk, wdb, pos, neg = wy_split_ref(k, beta, g, a, dA, dk, BS)
    kern = m["tilelang_wy_fast_bwd_split"](B, S, H, DK, DV, "float16", "float16", "float32",
                                           "float32", "float32", BS, 32, 32, 128, 0)
    outs = [dk, np.zeros(v.shape, np.float16), np.zeros(beta.shape, np.float16),
            np.zeros(dA.shape, np.float32), np.zeros(dA.shape, np.float32)]
    return [Check(kern, [k, v, beta, g, a, dw, du, dA] + outs,
                  {("arg", 8): wdk, ("arg", 10): wdb, ("arg", 11): pos, ("arg", 12): neg},
                  "float16", 2 * BS)]


# ------------------------------------------------------------------ GEMM family


def mm_nt(a, b):
    """float64 A @ B^T (B stored (N, K), the TileLang GEMM examples' transpose_B layout)."""
    return a.astype(f64) @ b.astype(f64).T


@case("tl/gemm/gemm_advanced_autotune", TL, "examples/gemm/example_gemm_advanced_autotune.py",
      "factory GEMM (B as (N, K), transpose_B) with T.use_swizzle(enable=...) under its "
      "AutoTuner API, every config given")
def _(m, rng):
    M, N, K = 128, 192, 96
    a, b = rn(rng, (M, K), "float16"), rn(rng, (N, K), "float16")
    return [Check(m["matmul"](M, N, K, 64, 64, 32, 2, 128, en), [a, b], {0: mm_nt(a, b)},
                  "float16", K) for en in (True, False)]


@case("tl/gemm/gemm_autotune_early_stop", TL, "examples/gemm/example_gemm_autotune_early_stop.py",
      "@autotune(early_stop=True, early_stop_factor=...) above a factory @jit, configs given")
def _(m, rng):
    M, N, K = 128, 128, 160
    a, b = rn(rng, (M, K), "float16"), rn(rng, (N, K), "float16")
    return [Check(m["matmul_early_stop"](M, N, K, 64, 64, 32, 2, 128), [a, b],
                  {0: mm_nt(a, b)}, "float16", K)]


@case("tl/analyze/gemm_analyze", TL, "examples/analyze/example_gemm_analyze.py",
      "eager GEMM over module-level sizes (set smaller here, host configuration), "
      "use_swizzle(enable=...), shared-tile epilogue")
def _(m, rng):
    from upstream_sweep import with_kwargs
    m["M"], m["N"], m["K"] = 128, 128, 96   # the module's M = N = K = 1024, made small
    a, b = rn(rng, (128, 96), "float16"), rn(rng, (128, 96), "float16")
    fn = with_kwargs(m["kernel"], block_M=64, block_N=64, block_K=32, num_stages=2,
                     thread_num=128, enable_rasteration=True)
    return [Check(fn, [a, b], {0: mm_nt(a, b)}, "float16", 96)]


def conv_checks(fn_of, shapes, rng):
    from upstream_cases_new import conv_nhwc_ref
    checks = []
    for (N, C, H, W, F, K, S, D, P) in shapes:
        a, w = rn(rng, (N, H, W, C), "float16"), rn(rng, (K, K, C, F), "float16")
        checks.append(Check(fn_of(S, D, P), [a, w], {0: conv_nhwc_ref(a, w, S, D, P)},
                            "float16", K * K * C))
    return checks


CONV_SHAPES = ((2, 32, 8, 8, 64, 3, 1, 1, 1), (1, 16, 9, 7, 64, 3, 2, 1, 1))


@case("tl/analyze/conv_analyze", TL, "examples/analyze/example_conv_analyze.py",
      "eager NHWC convolution: T.const sizes, T.im2col, GM views T.Tensor(shape, dtype, .data)")
def _(m, rng):
    from upstream_sweep import with_kwargs
    return conv_checks(lambda S, D, P: with_kwargs(
        m["kernel"], S=S, D=D, P=P, block_M=64, block_N=64, block_K=32, num_stages=2,
        threads=128), CONV_SHAPES, rng)


@case("tl/convolution/convolution_autotune", TL, "examples/convolution/example_convolution_autotune.py",
      "@tilelang.autotune above an eager convolution (im2col + gemm), every config given; an "
      "is_hopper host branch choosing the epilogue")
def _(m, rng):
    from upstream_sweep import with_kwargs
    return conv_checks(lambda S, D, P: with_kwargs(
        m["convolution"], S=S, D=D, P=P, block_M=64, block_N=64, block_K=32, num_stages=2,
        thread_num=128, enable_rasteration=True), CONV_SHAPES, rng)


def fp8_cmp(K):
    def cmp(got, want):
        g = got.astype(np.float32).astype(f64)
        assert np.allclose(g, want, rtol=0.02, atol=1e-3 * np.sqrt(K)), \
            f"fp8 gemm: max abs err {np.abs(g - want).max():.3g}"
    return cmp


@case("tl/gemm_fp8/gemm_fp8_2xAcc", TL, "examples/gemm_fp8/example_tilelang_gemm_fp8_2xAcc.py",
      "fp8 GEMM with a second float32 accumulator promoted every 128/block_K steps by a run-time "
      "`if (k + 1) % n == 0`, a tail promotion; e4m3 and e5m2", chip="ascend950")
def _(m, rng):
    import ml_dtypes
    checks = []
    for dt, K in (("float8_e4m3fn", 512), ("float8_e5m2", 320)):   # 320: an odd trip count
        a = rn(rng, (128, K)).astype(getattr(ml_dtypes, dt))
        b = rn(rng, (64, K)).astype(getattr(ml_dtypes, dt))
        checks.append(Check(m["matmul"], [a, b, 64, 64, 64, dt], {0: mm_nt(a, b)},
                            compare=fp8_cmp(K)))
    return checks


def blockscaled_fp8(rng, M, N, K, G=128):
    """DeepGEMM's fp8 GEMM inputs: e4m3 A (M, K) and B (N, K), float32 scales per (row of A,
    G columns of K) and per (G x G block of B); and the float64 sum over the K groups of each
    group's product times its two scales."""
    import ml_dtypes
    a = rn(rng, (M, K)).astype(ml_dtypes.float8_e4m3fn)
    b = rn(rng, (N, K)).astype(ml_dtypes.float8_e4m3fn)
    sa = (rng.random((M, K // G)) + 0.5).astype(np.float32)
    sb = (rng.random((N // G, K // G)) + 0.5).astype(np.float32)
    want = np.zeros((M, N))
    for kk in range(K // G):
        cols = slice(kk * G, (kk + 1) * G)
        want += mm_nt(a[:, cols], b[:, cols]) * sa[:, kk:kk + 1] * np.repeat(sb[:, kk], G)[None]
    return a, b, sa, sb, want


@case("tl/deepseek_deepgemm/deepgemm_fp8_2xAcc", TL,
      "examples/deepseek_deepgemm/example_deepgemm_fp8_2xAcc.py",
      "DeepGEMM-style fp8 GEMM: per-(row, 128-K group) scales of A and per-(128x128 block) "
      "scales of B applied at every promotion, a GM scalar read into a Python name",
      chip="ascend950")
def _(m, rng):
    return deepgemm_check(m, rng, 128, 256, 384)


def deepgemm_check(m, rng, M, N, K):
    """The DeepGEMM fp8 GEMM with per-(row, 128 K) A scales and per-128x128 B scales."""
    a, b, sa, sb, want = blockscaled_fp8(rng, M, N, K)
    return [Check(m["tl_gemm"], [a, b, sa, sb, 64, "float8_e4m3fn", "float32", "float32"],
                  {0: want}, compare=fp8_cmp(K))]


@case("tl/gemm_fp8/gemm_amd", TL, "examples/gemm_fp8/example_tilelang_gemm_amd.py",
      "fp8 GEMM factory under @autotune(ref_prog=, supply_prog=, manual_check_prog=), two "
      "prim_funcs chosen by gemm_type (A in a fragment or shared), k_pack, GemmWarpPolicy",
      chip="ascend950")
def _(m, rng):
    import ml_dtypes
    M, N, K = 128, 128, 256
    a = rn(rng, (M, K)).astype(ml_dtypes.float8_e4m3fn)
    b = rn(rng, (N, K)).astype(ml_dtypes.float8_e4m3fn)
    return [Check(m["fp8_matmul"](M, N, K, 64, 64, 64, 0, 256, kp, gt), [a, b],
                  {0: mm_nt(a, b)}, compare=fp8_cmp(K)) for gt, kp in (("ss", 1), ("rs", 2))]


@case("tl/aws/gemm", TL, "examples/aws/gemm.py",
      "persistent GEMM with tensor memory (T.alloc_tmem), T.PersistentTileScheduler and an "
      "annotate_ws_schedule (GPU-only: a located error expected)")
def _(m, rng):
    from upstream_sweep import with_kwargs
    M, N, K = 128, 1024, 128
    a, b = rn(rng, (M, K), "float16"), rn(rng, (N, K), "float16")
    kw = dict(block_M=64, block_N=64, store_block_N=32, block_K=32, dtype="float16",
              accum_dtype="float32", num_stages=2, num_persistent_stages=2)
    return [Check(with_kwargs(m[name], **kw), [a, b], {0: mm_nt(a, b)}, "float16", K)
            for name in ("gemm", "gemm_ws")]


def ws_cases():
    from upstream_cases_new4 import ws_gemm_case
    for stem, name in (("gemm_barrierpipe_stage2", "matmul"), ("gemm_softpipe_stage2", "matmul"),
                       ("gemm_copy_0_gemm_1", "matmul_warp_specialize_copy_0_gemm_1"),
                       ("gemm_copy_gemm_0_1", "matmul_warp_specialize_copy_gemm_0_1")):
        case(f"tl/warp_specialize/{stem}", TL, f"examples/warp_specialize/example_warp_specialize_{stem}.py",
             "GPU-only: warp groups (T.ws), mbarriers, tma_copy (a located error expected)")(
            lambda m, rng, name=name: ws_gemm_case(m, rng, name))


ws_cases()


@case("tl/grouped_gemm/grouped_gemm_fwd_ptr", TL, "examples/grouped_gemm/example_grouped_gemm_fwd_ptr.py",
      "grouped GEMM over per-group tensors reached through int64 pointer tables (T.ptr, "
      "T.make_tensor): raw device pointers, a located error expected")
def _(m, rng):
    sizes, K, N, bm = [16, 33, 64], 128, 96, 32
    a_list = [np.zeros((64, K), np.float16) for _ in sizes]
    for a, s in zip(a_list, sizes):
        a[:s] = rn(rng, (s, K), "float16")
    b_list = [rn(rng, (K, N), "float16") for _ in sizes]
    c_list = [np.zeros((64, N), np.float16) for _ in sizes]
    ptrs = [np.array([x.ctypes.data for x in xs], np.int64) for xs in (a_list, b_list, c_list)]
    offs = np.array([0, 1, 3], np.int32)   # ceil(16/32), ceil(33/32) tiles before each group
    import tilelang_mini
    kern = tilelang_mini.compile(m["grouped_gemm_ptr"](sizes, K, N, bm, 32, 32))

    def run(*args):
        kern(*args)
        return tuple(c[:s].copy() for c, s in zip(c_list, sizes))
    return [Check(run, ptrs + [offs], {i: mm_nt(a[:s], b.T) for i, (a, b, s) in
                                       enumerate(zip(a_list, b_list, sizes))}, "float16", K)]


# ------------------------------------------------------------------ attention family

AMD = "examples/amd/"


def gqa_bshd_grads(q, k, v, do, causal):
    """float64 GQA attention forward and backward on (B, S, H, D) tensors (k, v with H / groups
    heads): O, the natural log-sum-exp of the scaled scores (B, H, S), Delta (B, H, S), dQ,
    and dK/dV summed over each KV head's query heads."""
    from upstream_cases_new2 import attn_grads
    g = q.shape[2] // k.shape[2]
    t = lambda x: np.swapaxes(x, 1, 2)   # noqa: E731  (B, S, H, D) <-> (B, H, S, D)
    o, lse2, delta, dq, dk, dv = attn_grads(t(q), np.repeat(t(k), g, 1), np.repeat(t(v), g, 1),
                                            t(do), causal)
    B, H, S, D = dk.shape
    fold = lambda x: t(x.reshape(B, H // g, g, S, D).sum(2))   # noqa: E731
    return t(o), lse2 * np.log(2), delta, t(dq), fold(dk), fold(dv)


@case("tl/amd/flash_attn_fwd", TL, AMD + "example_amd_flash_attn_fwd.py",
      "GQA flash attention, persistent over q blocks by a `while bx < n` loop on an alloc_var, "
      "causal by if_then_else fill before the gemm, coalesced_width copies, k_pack; autotune "
      "factory with every config given")
def _(m, rng):
    return amd_fwd_checks(m, rng, 1, 4, 256, 64, 2, 3)


def amd_fwd_checks(m, rng, B, H, S, D, G, workers):
    """The AMD GQA flash attention (B, S, H, D), G query heads per KV head, `workers`
    persistent q-block workers, causal and not."""
    from upstream_cases_tl import attn
    q = rn(rng, (B, S, H, D), "float16")
    k, v = rn(rng, (B, S, H // G, D), "float16"), rn(rng, (B, S, H // G, D), "float16")
    return [Check(m["fast_flashattn"](B, H, S, D, causal, G, 64, 64, workers, 128, 1, True, 2,
                                      7, 8, 4), [q, k, v], {0: attn(q, k, v, causal)}, "float16",
                  S) for causal in (False, True)]


def amd_bwd_checks(m, rng, B, H, S, D, G):
    """The AMD GQA example's fwd (O, natural-log LSE), bwd preprocess, bwd (dQ/dK/dV by
    atomic_add into float32) and postprocess at (B, S, H, D), G query heads per KV head,
    causal and not, against gqa_bshd_grads."""
    checks = []
    for causal in (False, True):
        q, do = rn(rng, (B, S, H, D), "float16"), rn(rng, (B, S, H, D), "float16")
        k, v = rn(rng, (B, S, H // G, D), "float16"), rn(rng, (B, S, H // G, D), "float16")
        o, lse, delta, dq, dk, dv = gqa_bshd_grads(q, k, v, do, causal)
        fwd = m["fast_flashattn"](B, H, S, D, causal, G, 64, 64, 2, 128, 1, True, 2, 7, 8, 4)
        checks.append(Check(fwd, [q, k, v], {0: o, 1: lse}, "float16", S))
        o16 = o.astype(np.float16)
        pre = np.swapaxes((o16.astype(f64) * do).sum(-1), 1, 2)
        checks.append(Check(m["flashattn_bwd_preprocess"](B, H, S, D), [o16, do], {0: pre},
                            "float32", D))
        zeros = [np.zeros(q.shape, np.float32), np.zeros(k.shape, np.float32),
                 np.zeros(k.shape, np.float32)]
        bwd = m["flashattn_bwd"](B, H, S, D, causal, G, 64, 32, 1, 128, True, 7)
        checks.append(Check(bwd, [q, k, v, do, lse.astype(np.float32), delta.astype(np.float32)]
                            + zeros, {("arg", 6): dq, ("arg", 7): dk, ("arg", 8): dv},
                            "float16", S))
    dq32 = rn(rng, (B, S, H, D), "float32")
    checks.append(Check(m["flashattn_bwd_postprocess"](B, H, S, D), [dq32], {0: dq32.astype(f64)},
                        "float16"))
    return checks


@case("tl/amd/flash_attn_bwd", TL, AMD + "example_amd_flash_attn_bwd.py",
      "GQA attention fwd with natural-log LSE (if/else on -inf in T.Parallel), bwd "
      "preprocess, bwd with element-wise atomic_add of dQ/dK/dV from a Pipelined loop with a "
      "causal start (T.floordiv), postprocess copy")
def _(m, rng):
    return amd_bwd_checks(m, rng, 1, 4, 128, 64, 2)


@case("tl/aws/flash_attention", TL, "examples/aws/flash_attention.py",
      "persistent flash attention in tensor memory with an annotate_ws_schedule, and its "
      "warp-specialised twin (GPU-only: located errors expected)")
def _(m, rng):
    from upstream_cases_tl import attn
    from upstream_sweep import with_kwargs
    q, k, v = (rn(rng, (1, 128, 2, 128), "float16") for _ in range(3))
    kw = dict(block_M=128, block_N=128, store_block_N=16, dim=128, dtype="float16",
              accum_dtype="float32", num_stages=2, num_persistent_stages=2)
    return [Check(with_kwargs(m[name], **kw), [q, k, v], {0: attn(q, k, v)}, "float16", 128)
            for name in ("flash_attention", "flash_attention_ws")]


@case("tl/deepseek_mla/mla_decode_ws", TL, "examples/deepseek_mla/example_mla_decode_ws.py",
      "MLA decode with producer/consumer warp groups over 384 threads, split and no-split "
      "(partials as arguments), a softmax scale argument")
def _(m, rng):
    from upstream_cases_tl import mla_decode_checks
    return mla_decode_checks(m, rng, 1, 16, 128, 64, 32, 32, (1, 2), scale_arg=True, scratch=True)


@case("tl/warp_specialize/flashmla", TL, "examples/warp_specialize/example_warp_specialize_flashmla.py",
      "MLA decode written with explicit warp specialisation (GPU-only barriers: located "
      "expected)")
def _(m, rng):
    from upstream_cases_tl import mla_decode_checks
    return mla_decode_checks(m, rng, 1, 16, 128, 64, 32, 32, (1,), scale_arg=False, scratch=True)


def mla_kv_fp8_check(m, rng, B, H, S, D, P):
    """MLA decode with an e4m3 latent KV [B, S, 1, D] and fp16 rope part P, H query heads,
    block_N 32, block_H 16."""
    import ml_dtypes
    from upstream_cases_cv import sparse_ref
    q, qp = rn(rng, (B, H, D), "float16"), rn(rng, (B, H, P), "float16")
    kv = rn(rng, (B, S, 1, D)).astype(ml_dtypes.float8_e4m3fn)
    kp = rn(rng, (B, S, 1, P), "float16")
    want = sparse_ref(np.concatenate([q, qp], -1),
                      np.concatenate([kv[:, :, 0].astype(f64), kp[:, :, 0]], -1), D,
                      (D + P) ** -0.5)
    return [Check(m["flashattn"](B, H, 1, S, D, P, 32, 16), [q, qp, kv, kp], {0: want},
                  "float16", S)]


@case("tl/deepseek_mla/mla_decode_kv_fp8", TL,
      "examples/deepseek_mla/experimental/example_mla_decode_kv_fp8.py",
      "MLA decode with an fp8 (e4m3) latent KV cast to fp16 in shared memory (copy between "
      "shared tiles of two dtypes), exp2 online softmax")
def _(m, rng):
    return mla_kv_fp8_check(m, rng, 1, 16, 128, 64, 32)


