"""Sweep cases added in the cases session: the TileLang GDN/KDA backward kernels no other case
file read (state gradient over chunks, intra-chunk score gradients, chunk-output gradients, the
split WY backward), then GEMM/attention/MoE examples without a case. Host code and float64
references are written here from each operation's meaning (backward references from the
forward math by hand; benchmarks/upstream_cases_new8.py's references were checked against finite
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
    a, b, sa, sb, want = blockscaled_fp8(rng, 128, 256, 384)
    return [Check(m["tl_gemm"], [a, b, sa, sb, 64, "float8_e4m3fn", "float32", "float32"],
                  {0: want}, compare=fp8_cmp(a.shape[1]))]


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
    from upstream_cases_tl import attn
    B, H, S, D, G = 1, 4, 256, 64, 2
    q = rn(rng, (B, S, H, D), "float16")
    k, v = rn(rng, (B, S, H // G, D), "float16"), rn(rng, (B, S, H // G, D), "float16")
    return [Check(m["fast_flashattn"](B, H, S, D, causal, G, 64, 64, 3, 128, 1, True, 2, 7, 8, 4),
                  [q, k, v], {0: attn(q, k, v, causal)}, "float16", S) for causal in (False, True)]


@case("tl/amd/flash_attn_bwd", TL, AMD + "example_amd_flash_attn_bwd.py",
      "GQA attention fwd with natural-log LSE (if/else on -inf in T.Parallel), bwd "
      "preprocess, bwd with element-wise atomic_add of dQ/dK/dV from a Pipelined loop with a "
      "causal start (T.floordiv), postprocess copy")
def _(m, rng):
    B, H, S, D, G = 1, 4, 128, 64, 2
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


@case("tl/deepseek_mla/mla_decode_kv_fp8", TL,
      "examples/deepseek_mla/experimental/example_mla_decode_kv_fp8.py",
      "MLA decode with an fp8 (e4m3) latent KV cast to fp16 in shared memory (copy between "
      "shared tiles of two dtypes), exp2 online softmax")
def _(m, rng):
    import ml_dtypes
    from upstream_cases_cv import sparse_ref
    B, H, S, D, P = 1, 16, 128, 64, 32
    q, qp = rn(rng, (B, H, D), "float16"), rn(rng, (B, H, P), "float16")
    kv = rn(rng, (B, S, 1, D)).astype(ml_dtypes.float8_e4m3fn)
    kp = rn(rng, (B, S, 1, P), "float16")
    want = sparse_ref(np.concatenate([q, qp], -1),
                      np.concatenate([kv[:, :, 0].astype(f64), kp[:, :, 0]], -1), D,
                      (D + P) ** -0.5)
    return [Check(m["flashattn"](B, H, 1, S, D, P, 32, 16), [q, qp, kv, kp], {0: want},
                  "float16", S)]


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
    import ml_dtypes
    M, N = 64, 256
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
    M, N, K = 64, 256, 384
    a, b, sa, sb, want = blockscaled_fp8(rng, M, N, K)
    kern = m["fp8_gemm_kernel"](N, K, "float32")
    return [Check(kern, [a, b, np.zeros((M, N), np.float32), sa, sb], {("arg", 2): want},
                  compare=fp8_cmp(K))]


@case("tl/deepseek_v32/inference_fp8_index", TL, INF,
      "DeepSeek-V3.2 inference fp8 index scores: relu(k . q_h) * q_s summed over heads, times "
      "k_s; three T.dynamic sizes, allocations inside a Pipelined body, transpose_B gemm",
      chip="ascend950")
def _(m, rng):
    import ml_dtypes
    B, Mq, N, H, D = 1, 3, 512, 16, 64
    q = rn(rng, (B, Mq, H, D)).astype(ml_dtypes.float8_e4m3fn)
    qs = rn(rng, (B, Mq, H), "float32")
    k = rn(rng, (B, N, D)).astype(ml_dtypes.float8_e4m3fn)
    ks = (rng.random((B, N)) + 0.5).astype(np.float32)
    want = relu_weighted_logits(q, k[:, None], qs, ks[:, None])
    return [Check(m["fp8_index_kernel"](H, D), [q, qs, k, ks], {0: want}, "float32", D * H)]


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
    from upstream_cases_new2 import attn_grads
    lens, H, HK, DQK, DV, NC = (40, 56), 4, 2, 64, 32, 64
    g, B = H // HK, len(lens)
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    U = int(cu[-1])
    checks = []
    for causal in (False, True):
        q, do = rn(rng, (U, H, DQK), "float16"), rn(rng, (U, H, DV), "float16")
        k, v = rn(rng, (U, HK, DQK), "float16"), rn(rng, (U, HK, DV), "float16")
        o, dq = np.zeros((U, H, DV)), np.zeros((U, H, DQK))
        dk, dv = np.zeros((U, HK, DQK)), np.zeros((U, HK, DV))
        lse, delta = np.zeros((B, H, NC)), np.zeros((B, H, NC))
        t = lambda x: np.swapaxes(x, 0, 1)[None]   # noqa: E731  (L, H, D) -> (1, H, L, D)
        for b, L in enumerate(lens):
            r = slice(cu[b], cu[b + 1])
            res = attn_grads(t(q[r]), np.repeat(t(k[r]), g, 1), np.repeat(t(v[r]), g, 1),
                             t(do[r]), causal)
            o[r], dq[r] = np.swapaxes(res[0][0], 0, 1), np.swapaxes(res[3][0], 0, 1)
            dk[r] = np.swapaxes(res[4][0].reshape(HK, g, L, DQK).sum(1), 0, 1)
            dv[r] = np.swapaxes(res[5][0].reshape(HK, g, L, DV).sum(1), 0, 1)
            lse[b, :, :L], delta[b, :, :L] = res[1][0], res[2][0]
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
