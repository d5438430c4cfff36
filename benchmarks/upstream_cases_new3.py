"""Sweep cases added in the dialect10 session: upstream example kernels not in the other case
files (host code and float64 references written here; the kernels are the examples' own, read
from the mirror at run time by upstream_sweep.py)."""
import numpy as np

from tilelang_mini.testing.references import sinkhorn_ref as sinkhorn
from upstream_sweep import Check, case, rn
from upstream_cases_new import A, TL, f64, mm, sigmoid  # noqa: F401

# ------------------------------------------------------------------------------ tilelang-ascend


def rope_perm(rd, mode):
    """The partner column of each rotary column and the sign of sin there: interleave pairs
    (2k, 2k+1), half pairs (k, k + rd/2); out = x*cos + sign*x[partner]*sin."""
    cols = np.arange(rd)
    if mode == "interleave":
        partner = cols ^ 1
        sign = np.where(cols % 2 == 0, -1.0, 1.0)
    else:
        partner = (cols + rd // 2) % rd
        sign = np.where(cols < rd // 2, -1.0, 1.0)
    return partner, sign


@case("asc/pos_embedding/rope_mask_bwd", A, "examples/pos_embedding/rope_mask_bwd.py",
      "rope fwd and bwd in place: uint32 gather mask, per-row tile.mul on row slices, casts")
def _(m, rng):
    checks = []
    for dtype, mode, (rows, heads, hidden, rd, sc_rows) in (
            ("float16", "interleave", (128, 32, 64, 32, 4)),    # TND: one sin row per token
            ("float32", "half", (64, 16, 32, 32, 4)),
            ("float16", "half", (256, 32, 96, 64, 4))):       # BSND: B=2, S=4
        # the kernel reads one sin/cos row per vector core's row_per_vec rows: head_num is a
        # multiple of row_per_vec, as in the example's shapes
        tl_dtype = "float" if dtype == "float32" else dtype
        block_m = 32 if dtype == "float32" else 64
        rpv = block_m // 2
        partner, sign = rope_perm(rd, mode)
        mask = ((np.arange(rpv)[:, None] * rd + partner[None, :]) * 4).astype(np.uint32)
        x = rn(rng, (rows, hidden), dtype)
        sin, cos = rn(rng, (sc_rows, rd), dtype), rn(rng, (sc_rows, rd), dtype)
        sin_m = (sin.astype(f64) * sign).astype(dtype)  # host code: sin * sin_mask
        r = (np.arange(rows) // heads) % sc_rows
        s, c = sin.astype(f64)[r], cos.astype(f64)[r]
        xr = x.astype(f64)[:, hidden - rd:]
        fwd = x.astype(f64)
        fwd[:, hidden - rd:] = xr * c + sign * xr[:, partner] * s
        # backward of the linear map y = x*c + sign*x[partner]*s: dx = dy*c + (sign*s*dy)[inverse partner]
        inv = np.argsort(partner)
        bwd = x.astype(f64)
        bwd[:, hidden - rd:] = xr * c + (sign * s * xr)[:, inv]
        nb = min(rows // block_m, 48)
        for fn, want in (("rope_fwd_kernel", fwd), ("rope_bwd_kernel", bwd)):
            k = m[fn](rows, block_m, nb, sc_rows, hidden, rd, heads, dtype=tl_dtype)
            checks.append(Check(k, [x, sin_m, cos, mask], {("arg", 0): want}, dtype))
    return checks


def sinkhorn_ref(mixes, scale, base, hc, iters, eps):
    x = mixes.astype(f64) * np.repeat(scale.astype(f64), [hc, hc, hc * hc]) + base
    pre = sigmoid(x[:, :hc]) + eps
    post = 2 * sigmoid(x[:, hc:2 * hc])
    return pre, post, sinkhorn(x[:, 2 * hc:].reshape(-1, hc, hc), iters, eps)


@case("asc/deepseek_v4/hc_split_sinkhorn", A, "examples/deepseek_v4/hc_split_sinkhorn.py",
      "symbolic n (odd), workspace_idx, scalar GM reads, reduce_max/sum real_shape, sinkhorn loop")
def _(m, rng):
    return sinkhorn_checks(m, rng, ((5, 4, 20), (4, 4, 3)))


def sinkhorn_checks(m, rng, configs):
    """hc_split_sinkhorn on random mixes for each (tokens, hc, iterations) of `configs`."""
    checks = []
    for n, hc, iters in configs:
        mix_hc = (2 + hc) * hc
        mixes = rng.random((n, mix_hc)).astype(np.float32)
        scale, base = rng.random(3).astype(np.float32), rng.random(mix_hc).astype(np.float32)
        pre, post, comb = sinkhorn_ref(mixes, scale, base, hc, iters, 1e-6)
        k = m["hc_split_sinkhorn"](hc=hc, sinkhorn_iters=iters, eps=1e-6)
        checks.append(Check(k, [mixes, scale, base], {0: pre, 1: post, 2: comb}, "float32", 16))
    return checks


@case("asc/moe/token_permute_grad", A, "examples/moe_token_permute/moe_token_permute_grad.py",
      "gather-reduce of topK rows per token: group/lane-pipelined expert flags, cast and fp32 paths")
def _(m, rng):
    checks = []
    # (tokens, topK, hidden, dtype, TILE_H): group-pipelined (topK 8), lane-pipelined (topK 4),
    # multi-tile cast path (TILE_H < hidden), fp32 path; tokens not a multiple of the cores
    for T_, K, H, dtype, tile_h in ((6, 8, 64, "float16", None), (5, 4, 64, "float16", None),
                                    (7, 2, 64, "float16", 16), (6, 3, 64, "float32", None)):
        E = T_ * K
        kern, padded_e = m["_compile_gather_reduce"](T_, K, H, E, NUM_CORES=4, TILE_H=tile_h,
                                                     dtype=dtype)
        g = rn(rng, (E, H), dtype)
        idx = np.zeros((1, padded_e), np.int32)
        idx[0, :E] = rng.permutation(E)
        want = g.astype(f64)[idx[0, :E]].reshape(T_, K, H).sum(1)
        checks.append(Check(kern, [g, idx], {0: want}, dtype, K))
    return checks


@case("asc/moe/token_unpermute_grad", A, "examples/moe_token_permute/moe_token_unpermute_grad.py",
      "scatter rows by sorted index (no probs); with probs: scaled scatter and per-half dot products "
      "through a T.macro with expert flags; fp32 developer-mode path")
def _(m, rng):
    checks = []
    T_, K, H = 16, 4, 64
    E = T_ * K
    for dtype in ("float16", "float32"):
        kern, padded_t, padded_e, _cores = m["_compile_grad"](T_, K, H, has_probs=True,
                                                              NUM_CORES=4, dtype=dtype)
        assert padded_t == T_
        perm = rn(rng, (E, H), dtype)
        og = rn(rng, (T_, H), dtype)
        idx = np.zeros((1, padded_e), np.int32)
        idx[0, :E] = rng.permutation(E)
        probs = rng.random((T_, K)).astype(dtype)
        dst = idx[0, :E].reshape(T_, K)
        pg = np.zeros((E, H))
        pg[dst] = og.astype(f64)[:, None, :] * probs.astype(f64)[:, :, None]
        rows = perm.astype(f64)[dst]                    # (T, K, H)
        dots = rows * og.astype(f64)[:, None, :]
        if dtype == "float16":   # one partial sum per vector core (hidden halves), summed by host code
            want_p = np.stack([dots[..., :H // 2].sum(-1), dots[..., H // 2:].sum(-1)])
        else:
            want_p = dots.sum(-1)
        checks.append(Check(kern, [perm, og, idx, probs], {0: pg, 1: want_p}, dtype, H))
    kern, _, padded_e, _ = m["_compile_grad"](T_, K, H, has_probs=False, NUM_CORES=4)
    og = rn(rng, (E, H), "float16")
    idx = np.zeros((1, padded_e), np.int32)
    idx[0, :E] = rng.permutation(E)
    pg = np.zeros((E, H))
    pg[idx[0, :E]] = og
    checks.append(Check(kern, [og, idx], {0: pg}, "float16"))
    return checks


@case("asc/quant_batch_matmul/quant_batch_matmul", A,
      "examples/quant_batch_matmul/example_quant_batch_matmul.py",
      "int8 x int8 -> int32 L0C through a workspace, cast, per-tensor / per-channel scale")
def _(m, rng):
    return quant_bmm_checks(m, rng, 2, 128, 256, 128)


def quant_bmm_checks(m, rng, B_, M, N, K):
    """The int8 batch GEMM with a per-tensor scale (float16 out) and a per-channel one
    (bfloat16 out), 64x128x64 blocks."""
    checks = []
    for scale_size, out_dtype in (("1", "float16"), ("N", "bfloat16")):
        a = rng.integers(-8, 8, (B_, M, K)).astype(np.int8)
        b = rng.integers(-8, 8, (B_, K, N)).astype(np.int8)
        scale = (rng.standard_normal(N if scale_size == "N" else 1) * 0.01).astype(np.float32)
        want = np.einsum("bmk,bkn->bmn", a.astype(f64), b.astype(f64)) * scale.astype(f64)
        kern = m["simple_quant_batch_matmul"](B_, M, N, K, scale_size, 64, 128, 64,
                                              out_dtype=out_dtype)
        checks.append(Check(kern, [a, b, scale], {0: want}, out_dtype))
    return checks


def grouped_inputs(rng, sizes, K, N, bm):
    """Padded grouped-GEMM inputs: A rows of group g start at a block_M-aligned offset (zero
    padding), per-block metadata (group, row start, valid rows) and the float64 result."""
    padded = [-(-s // bm) * bm for s in sizes]
    offs = np.concatenate([[0], np.cumsum(padded)[:-1]]).astype(int)
    a = np.zeros((sum(padded), K), np.float16)
    b = rn(rng, (len(sizes), K, N), "float16")
    want = np.zeros((sum(padded), N))
    meta = []
    for g, (s, o) in enumerate(zip(sizes, offs)):
        a[o:o + s] = rn(rng, (s, K), "float16")
        want[o:o + s] = mm(a[o:o + s], b[g])
        meta += [[g, o + i, min(bm, s - i)] for i in range(0, s, bm)]
    return a, b, np.array(meta, np.int32), want


@case("asc/grouped_gemm/grouped_gemm_fwd_ptr", A, "examples/grouped_gemm/example_grouped_gemm_fwd_ptr.py",
      "expert C scope, padded groups, block metadata read from GM, barrier_all")
def _(m, rng):
    checks = []
    for sizes in ((16, 33, 96), (29, 57)):
        K, N, bm = 128, 96, 32
        a, b, meta, want = grouped_inputs(rng, sizes, K, N, bm)
        kern = m["grouped_gemm_fwd_ptr"](tuple(sizes), K, N, bm, 32, 32)
        checks.append(Check(kern, [a, b, meta], {0: want}, "float16", K))
    return checks


# ------------------------------------------------------------------------------ TileLang

def bshd_grads(q, k, v, do, causal):
    """attn_grads (float64) on B,S,H,D tensors, GQA (K/V heads shared by H/HK query heads):
    O, lse, Delta in B,H,S; dQ, dK, dV in B,S,H,D (dK/dV summed over each group)."""
    from upstream_cases_new2 import attn_grads
    g = q.shape[2] // k.shape[2]
    t = lambda x: np.swapaxes(x, 1, 2)  # noqa: E731
    kk, vv = np.repeat(t(k), g, 1), np.repeat(t(v), g, 1)
    o, lse, delta, dq, dk, dv = attn_grads(t(q), kk, vv, t(do), causal)
    B, HK, S = k.shape[0], k.shape[2], k.shape[1]
    dk = dk.reshape(B, HK, g, S, -1).sum(2)
    dv = dv.reshape(B, HK, g, S, -1).sum(2)
    return t(o), lse, delta, t(dq), t(dk), t(dv)


@case("tl/flash_attention/mha_bwd_bshd", TL, "examples/flash_attention/example_mha_bwd_bshd.py",
      "B,S,H,D layout: fwd with lse, preprocess, bwd (dQ by atomic_add), postprocess with "
      "T.annotate_layout (a hint)")
def _(m, rng):
    from upstream_cases_new2 import mha_bwd_checks
    return mha_bwd_checks(m, rng, bshd=True)


@case("tl/flash_attention/gqa_bwd", TL, "examples/flash_attention/example_gqa_bwd.py",
      "GQA (groups 2, dim_v != dim_qk) fwd, bwd by atomic_add of dQ/dK/dV and the split "
      "variant (per-group dK/dV summed by host code)")
def _(m, rng):
    return gqa_bwd_checks(m, rng, "flashattn_bwd_split")


def gqa_bwd_checks(m, rng, split, dims=(1, 4, 2, 128, 64, 32)):
    """TileLang's GQA backward examples: fwd (O, lse), bwd by atomic_add of dQ/dK/dV, and the
    factory `split` (per-group dK/dV slots summed by host code), causal and not; `dims` are
    B, H, HK, S, DQK, DV."""
    B, H, HK, S, DQK, DV = dims
    g = H // HK
    checks = []
    for causal in (False, True):
        q, do = rn(rng, (B, S, H, DQK), "float16"), rn(rng, (B, S, H, DV), "float16")
        k, v = rn(rng, (B, S, HK, DQK), "float16"), rn(rng, (B, S, HK, DV), "float16")
        o, lse, delta, dq, dk, dv = bshd_grads(q, k, v, do, causal)
        checks.append(Check(m["flashattn_fwd"](B, H, S, DQK, DV, causal, 64, 64, g), [q, k, v],
                            {0: o, 1: lse}, "float16", S))
        lse32, delta32 = lse.astype(np.float32), delta.astype(np.float32)
        zeros = [np.zeros((B, S, H, DQK), np.float32), np.zeros((B, S, HK, DQK), np.float32),
                 np.zeros((B, S, HK, DV), np.float32)]
        kern = m["flashattn_bwd_atomic_add"](B, H, S, DQK, DV, causal, 64, 32, groups=g)
        checks.append(Check(kern, [q, k, v, do, lse32, delta32] + zeros,
                            {("arg", 6): dq, ("arg", 7): dk, ("arg", 8): dv}, "float16", S))
        if not causal:
            continue
        # split: dK/dV of each query head of a group in its own slot; the sum is host code
        kern = m[split](B, H, S, DQK, DV, causal, 64, 32, groups=g)
        dks = np.zeros((g, B, S, HK, DQK), np.float16)
        dvs = np.zeros((g, B, S, HK, DV), np.float16)

        def summed(got, want):
            from upstream_sweep import tolerance
            rtol, atol = tolerance("float16", S)
            assert np.allclose(got.astype(f64).sum(0), want, rtol=rtol, atol=2 * atol), \
                f"split sum: max abs err {np.abs(got.astype(f64).sum(0) - want).max():.3g}"
        checks.append(Check(kern, [q, k, v, do, lse32, delta32, zeros[0].copy(), dks, dvs],
                            {("arg", 6): dq}, "float16", S))
        checks.append(Check(kern, [q, k, v, do, lse32, delta32, zeros[0].copy(), dks, dvs],
                            {("arg", 7): dk, ("arg", 8): dv}, "float16", S, compare=summed))
    return checks


def gdn_gates(rng, B, S, H):
    """Cumulative log-gates as gated delta-rule chunk kernels take them: decreasing along S."""
    return np.cumsum(-rng.random((B, S, H)) * 0.1, axis=1).astype(np.float32)


def chunk_rows(S, BS):
    """(c, the rows of chunk c) of a length-S sequence cut in chunks of BS."""
    return [(c, slice(c * BS, (c + 1) * BS)) for c in range(S // BS)]


# B, S, H, DK, DV, BS: the problem size of the chunked GDN/KDA cases (one S of two chunks)
CHUNK_DIMS = (1, 128, 2, 64, 64, 64)


def per_chunk(shape, BS, f):
    """A float64 array of `shape` (B, S, H, ...) whose rows r (a slice of S) of chunk c of
    batch b and head h are f(b, h, c, r)."""
    out = np.zeros(shape)
    for b, h in np.ndindex(shape[0], shape[2]):
        for c, r in chunk_rows(shape[1], BS):
            out[b, r, h] = f(b, h, c, r)
    return out


def wy_ref(k, v, beta, a, BS, gate):
    """The WY chunk products w = A (k * beta * gate) and u = A (v * beta), float64; gate(b, h, r)
    the gate factors of those rows of k (per row [BS, 1] or per channel [BS, DK])."""
    def prod(x, b, h, r, gf=1.0):
        return a[b, r, h].astype(f64) @ (x[b, r, h] * beta[b, r, h].astype(f64)[:, None] * gf)
    w = per_chunk(k.shape, BS, lambda b, h, c, r: prod(k, b, h, r, gate(b, h, r)))
    return w, per_chunk(v.shape, BS, lambda b, h, c, r: prod(v, b, h, r))


@case("tl/gdn/chunk_o", TL, "examples/gdn/example_chunk_o.py",
      "gated chunk output: two gemms into fragments, gate scaling with T.if_then_else, causal "
      "mask by `if` in T.Parallel, T.disable_warp_group_reg_alloc (a hint)")
def _(m, rng):
    return gdn_chunk_o_checks(m, rng, CHUNK_DIMS)


def in_dtype(x, dtype):
    """x in an example's input dtype name ("bfloat16" through ml_dtypes)."""
    import ml_dtypes
    return x.astype(ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype)


def gdn_chunk_o_checks(m, rng, dims, dtype="float16", blocks=(64, 64)):
    """GDN's tilelang_chunk_fwd_o, gated and not, on (B, S, H, DK, DV, chunk) `dims` in
    `dtype` with (block_DK, block_DV) `blocks`."""
    B, S, H, DK, DV, BS = dims
    checks = []
    for use_g in (True, False):
        q, k, v = (in_dtype(rn(rng, (B, S, H, d), scale=0.3), dtype) for d in (DK, DK, DV))
        hid = in_dtype(rn(rng, (B, S // BS, H, DK, DV), scale=0.3), dtype)
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
                a = np.tril(a)
                want[b, r, h] = (o + a @ vc) * scale
        kern = m["tilelang_chunk_fwd_o"](B, S, H, DK, DV, dtype, dtype, "float32", "float32",
                                         BS, scale, use_g, BS, *blocks, 128, 1)
        checks.append(Check(kern, [q, k, v, hid, g], {0: want}, dtype, DK + BS))
    return checks


def delta_h_checks(m, rng, dims):
    """The GDN chunked state recurrence at dims = (B, S, H, DK, DV, BS), with and without gates."""
    B, S, H, DK, DV, BS = dims
    checks = []
    for use_g in (True, False):
        k, w, u, g, h0 = delta_h_inputs(rng, gdn_gates(rng, B, S, H), DK, DV)

        def step(st, vn, b, h, c, r, use_g=use_g, g=g):
            if use_g:
                gl = f64(g[b, (c + 1) * BS - 1, h])
                d = gl - g[b, r, h].astype(f64)
                vn = np.where(d[:, None] <= 0, vn * np.exp(d)[:, None], 0)
                st = st * np.exp(gl)
            return st, vn
        hs, final, vnew = delta_h_ref(k, w, u, h0, BS, step)
        kern = m["tilelang_chunk_gated_delta_rule_fwd_h"](
            B, S, H, DK, DV, "float16", "float16", "float32", "float32", "float32", BS, use_g,
            True, True, True, 64, 32, 128, 1)
        checks.append(Check(kern, [k, w, u, g, h0], {0: hs, 1: final, 2: vnew}, "float16",
                            DK * 2))
    return checks


@case("tl/gdn/chunk_delta_h", TL, "examples/gdn/example_chunk_delta_h.py",
      "gated delta-rule state recurrence over chunks: T.alloc_var scalar gate, ternary in a "
      "Parallel body, gemm clear_accum, transpose_A, three outputs (out_idx negative)")
def _(m, rng):
    return delta_h_checks(m, rng, CHUNK_DIMS)


def delta_h_inputs(rng, g, DK, DV):
    """Keys, W, U, gates g (B, S, H[, DK]) and an initial state of the delta-rule chunk
    recurrence kernels."""
    B, S, H = g.shape[:3]
    k, w = rn(rng, (B, S, H, DK), "float16", 0.1), rn(rng, (B, S, H, DK), "float16", 0.1)
    return k, w, rn(rng, (B, S, H, DV), "float16"), g, rn(rng, (B, H, DK, DV), "float16", 0.5)


def delta_h_ref(k, w, u, h0, BS, step):
    """The delta-rule state over chunks, float64: per chunk the state before it, the new values
    u - w @ state, then `step(state, v_new, b, h, c, rows)` -> (decayed state, gated v_new) and
    state += k^T @ gated v_new. Returns (states per chunk, final states, new values)."""
    (B, S, H, DK), DV = k.shape, u.shape[-1]
    hs, vnew = np.zeros((B, S // BS, H, DK, DV)), np.zeros((B, S, H, DV))
    final = np.zeros((B, H, DK, DV))
    for b, h in np.ndindex(B, H):
        st = h0[b, h].astype(f64)
        for c, r in chunk_rows(S, BS):
            hs[b, c, h] = st
            vn = u[b, r, h] - w[b, r, h].astype(f64) @ st
            vnew[b, r, h] = vn
            st, vn = step(st, vn, b, h, c, r)
            st = st + k[b, r, h].astype(f64).T @ vn
        final[b, h] = st
    return hs, final, vnew


def wy_inputs(rng, g, DK, DV, BS):
    """Inputs of the WY-representation chunk kernels for gates g (B, S, H[, DK]): keys and
    values (B, S, H, D), beta in [0, 1), the chunk matrix A (B, S, H, BS)."""
    B, S, H = g.shape[:3]
    k, v = rn(rng, (B, S, H, DK), "float16", 0.5), rn(rng, (B, S, H, DV), "float16", 0.5)
    beta = rng.random((B, S, H)).astype(np.float16)
    return k, v, beta, g, chunk_matrix(rng, B, S, H, BS)


def chunk_matrix(rng, B, S, H, BS):
    """A per-chunk matrix input of the chunk kernels (the WY A, the KDA intra-chunk scores):
    (B, S, H, BS) float16, row t of a chunk holding its BS columns, small entries."""
    return rn(rng, (B, S, H, BS), "float16", 0.2)


@case("tl/gdn/wy_fast", TL, "examples/gdn/example_wy_fast.py",
      "recompute W/U per chunk: gate exp in a 1-D Parallel fill, scaled operands, gemms with "
      "clear_accum in Pipelined loops")
def _(m, rng):
    B, S, H, DK, DV, BS = 1, 128, 2, 128, 64, 64
    k, v, beta, g, a = wy_inputs(rng, gdn_gates(rng, B, S, H), DK, DV, BS)
    w, u = wy_ref(k, v, beta, a, BS, lambda b, h, r: np.exp(g[b, r, h].astype(f64))[:, None])
    kern = m["tilelang_recompute_w_u_fwd"](B, S, H, DK, DV, "float16", "float16", "float32",
                                           "float32", BS, BS, 64, 64, 128, 1)
    return [Check(kern, [k, v, beta, g, a], {0: w, 1: u}, "float16", BS)]


@case("tl/linear_attention/linear_attn_bwd", TL, "examples/linear_attention/example_linear_attn_bwd.py",
      "causal linear attention backward: masked T.if_then_else copies into shared, chunk "
      "states as accumulators, a reversed Pipelined loop, tile atomic_add of dQ/dK/dV")
def _(m, rng):
    return [linear_attn_bwd_check(m, rng, 1, 128, 2, 64)]


def linear_attn_bwd_check(m, rng, B, S, H, D):
    """tl_fused_chunk_bwd_kernel's dQ, dK, dV of causal linear attention on (B, S, H, D)."""
    q, k, v, do = (rn(rng, (B, S, H, D), "float16", 0.5) for _ in range(4))
    scale = D ** -0.5
    dq, dk, dv = (np.zeros((B, S, H, D)) for _ in range(3))
    mask = np.tril(np.ones((S, S)))
    for b in range(B):
        for h in range(H):
            qq, kk, vv, oo = (x[b, :, h].astype(f64) for x in (q, k, v, do))
            ds = (oo @ vv.T) * mask
            dq[b, :, h] = scale * ds @ kk
            dk[b, :, h] = scale * ds.T @ qq
            dv[b, :, h] = scale * ((qq @ kk.T) * mask).T @ oo
    kern = m["tl_fused_chunk_bwd_kernel"](B, S, H, D, D)
    zeros = [np.zeros((B, S, H, D), np.float32) for _ in range(3)]
    return Check(kern, [q, k, v, do] + zeros, {("arg", 4): dq, ("arg", 5): dk, ("arg", 6): dv},
                 "float16", S)


@case("tl/deepseek_mhc/mhc_pre", TL, "examples/deepseek_mhc/example_mhc_pre.py",
      "eager, T.dynamic tokens: gemm+sqrsum (tfloat32 operands, fragment A operand, tail "
      "block) and the fused pre block (scalar accumulation, sinkhorn, branches on "
      "T.get_thread_binding() < 32)")
def _(m, rng):
    from upstream_cases_more import bf16
    n, hc, hidden = 40, 4, 256
    hc3 = hc * (2 + hc)
    res = bf16(rn(rng, (n, hc, hidden)))
    fn = rn(rng, (hc3, hc * hidden), "float32", 0.05)
    x = res.reshape(n, hc * hidden)
    out, sq = np.zeros((n, hc3), np.float32), np.zeros(n, np.float32)
    xf = x.astype(f64)
    want_out, want_sq = xf @ fn.astype(f64).T, (xf * xf).sum(1)
    checks = [Check(m["mhc_pre_gemm_sqrsum_tilelang"], [x, fn, out, sq, hc3, hc * hidden],
                    {("arg", 2): want_out, ("arg", 3): want_sq}, "float32", hc * hidden,
                    tol=(2e-3, 2e-3))]  # tfloat32 operands (10-bit mantissa)
    # the fused block on exact inputs (the gemm's result, as float32)
    gm, gs = want_out.astype(np.float32)[None], want_sq.astype(np.float32)[None]
    scale, base = rng.random(3).astype(np.float32), rng.random(hc3).astype(np.float32) * 0.1
    rms_eps, pre_eps, sk_eps, post_mult, rep = 1e-6, 1e-2, 1e-6, 2.0, 5
    mixes = gm[0].astype(f64) / np.sqrt(gs[0].astype(f64)[:, None] / (hc * hidden) + rms_eps)
    xm = mixes * np.repeat(scale.astype(f64), [hc, hc, hc * hc]) + base
    pre = sigmoid(xm[:, :hc]) + pre_eps
    post = sigmoid(xm[:, hc:2 * hc]) * post_mult
    c = sinkhorn(xm[:, 2 * hc:].reshape(-1, hc, hc), rep, sk_eps)
    layer = np.einsum("nc,nch->nh", pre, res.astype(f64))
    outs = [np.zeros((n, hc), np.float32), np.zeros((n, hc * hc), np.float32),
            bf16(np.zeros((n, hidden), np.float32))]
    checks.append(Check(m["mhc_pre_big_fuse_tilelang"],
                        [gm, gs, scale, base, res] + outs
                        + [hidden, rms_eps, pre_eps, sk_eps, post_mult, rep, 1, hc],
                        {("arg", 5): post, ("arg", 6): c.reshape(n, hc * hc),
                         ("arg", 7): layer}, "bfloat16", hc))
    return checks


# --------------------------------------------------- tilelang-ascend linear_attention_and_rnn/gdn

def asc_gdn_inputs(rng, B, H, L, DK, C):
    """Normalised keys, beta in [0, 1), per-chunk cumulative log-sigmoid gates (B, H, L)."""
    k = rng.standard_normal((B, H, L, DK))
    k = (k / np.linalg.norm(k, axis=-1, keepdims=True)).astype(np.float16)
    beta = rng.random((B, H, L)).astype(np.float16)
    g = -np.log1p(np.exp(-rng.standard_normal((B, H, L))))
    g = np.cumsum(g.reshape(B, H, L // C, C), -1).reshape(B, H, L).astype(np.float32)
    return k, beta, g


def asc_kkt(k, beta, g, C):
    """Strictly lower (K K^T * beta_i * exp(g_i - g_j)) per chunk, fp16."""
    B, H, L, _ = k.shape
    a = np.zeros((B, H, L, C))
    for c in range(L // C):
        r = slice(c * C, (c + 1) * C)
        kc, gc = k[:, :, r].astype(f64), g[:, :, r].astype(f64)
        kkt = np.einsum("bhid,bhjd->bhij", kc, kc) * beta[:, :, r, None]
        a[:, :, r] = np.tril(kkt * np.exp(gc[..., :, None] - gc[..., None, :]), -1)
    return a.astype(np.float16)


@case("asc/gdn/solve_tril", A, "examples/linear_attention_and_rnn/gdn/gdn_solve_tril.py",
      "(I + A)^-1 of strictly lower chunks: row recurrence with row reads of the tile being "
      "updated, reduce_sum over dim 0, jit_func.__jit_impl__.target")
def _(m, rng):
    return solve_tril_checks(m, rng, lambda B, H, L, C: m["solve_tril_ker"](B, H, L, C), 32)


def solve_tril_checks(m, rng, make, C):
    B, H, L, DK = 1, 2, 2 * C, 64
    k, beta, g = asc_gdn_inputs(rng, B, H, L, DK, C)
    a = asc_kkt(k, beta, g, C)
    want = np.zeros((B, H, L, C))
    for c in range(L // C):
        r = slice(c * C, (c + 1) * C)
        want[:, :, r] = np.linalg.inv(np.eye(C) + a[:, :, r].astype(f64))
    kern = make(B, H, L, C)
    return [Check(kern, [a, np.eye(C, dtype=np.float32)], {0: want}, "float16", C)]


@case("asc/gdn/wy_fast", A, "examples/linear_attention_and_rnn/gdn/gdn_wy_fast.py",
      "expert V then C with a cross flag: beta/exp(g)-scaled K, V through workspaces, A @ each")
def _(m, rng):
    return wy_fast_checks(m, rng, 32, 32)


def wy_fast_checks(m, rng, *blocks, dims=(1, 2, 64, 64, 64, 32)):
    """wy_fast_ker(B, H, L, DK, DV, C, *blocks) of the GDN wy_fast examples at `dims`."""
    B, H, L, DK, DV, C = dims
    k, v = rn(rng, (B, H, L, DK), "float16"), rn(rng, (B, H, L, DV), "float16")
    beta = rn(rng, (B, H, L), "float16")
    g = rn(rng, (B, H, L), scale=0.5)
    a = rn(rng, (B, H, L, C), "float16", 0.3)
    kg = (k * (beta.astype(f64) * np.exp(g.astype(f64)))[..., None]).astype(np.float16)
    vg = (v * beta.astype(f64)[..., None]).astype(np.float16)
    w, u = np.zeros((B, H, L, DK)), np.zeros((B, H, L, DV))
    for c in range(L // C):
        r = slice(c * C, (c + 1) * C)
        w[:, :, r] = a[:, :, r].astype(f64) @ kg[:, :, r]
        u[:, :, r] = a[:, :, r].astype(f64) @ vg[:, :, r]
    kern = m["wy_fast_ker"](B, H, L, DK, DV, C, *blocks)
    return [Check(kern, [k, v, beta, g, a], {0: w, 1: u}, "float16", C)]


@case("asc/gdn/chunk_h", A, "examples/linear_attention_and_rnn/gdn/gdn_chunk_h.py",
      "expert C/V chunk recurrence with four cross flags: state via a caller-zeroed "
      "workspace, the new V written by AIV and read back by AIC, shadowed loop variable")
def _(m, rng):
    return chunk_h_checks(m, rng, 32, 32)


def chunk_h_checks(m, rng, *blocks, dims=(1, 2, 96, 64, 64, 32)):
    """The GDN chunk_h examples' chunk_h_ker(B, H, L, DK, DV, C, *blocks) (`dims` are B, H, L,
    DK, DV, C): the per-chunk states, the new V and the final state."""
    B, H, L, DK, DV, C = dims
    BV = blocks[1] if blocks else DV
    k, _, g = asc_gdn_inputs(rng, B, H, L, DK, C)
    w = rn(rng, (B, H, L, DK), "float16", 0.1)
    u = rn(rng, (B, H, L, DV), "float16", 0.5)
    n = L // C
    s_all, v_new, fs = np.zeros((B, H, n, DK, DV)), np.zeros((B, H, L, DV)), None
    st = np.zeros((B, H, DK, DV))
    for c in range(n):
        r = slice(c * C, (c + 1) * C)
        s_all[:, :, c] = st
        st16 = st.astype(np.float16).astype(f64)  # the state passes through fp16 workspaces
        ws = (w[:, :, r].astype(f64) @ st16).astype(np.float16)
        vn = (u[:, :, r] - ws.astype(f64)).astype(np.float16)
        v_new[:, :, r] = vn
        gc = g[:, :, r].astype(f64)
        kk = (k[:, :, r] * np.exp(gc[..., -1:] - gc)[..., None]).astype(np.float16)
        kv = (np.swapaxes(kk.astype(f64), -1, -2) @ vn.astype(f64)).astype(np.float16)
        st = st * np.exp(gc[..., -1])[..., None, None] + kv
    fs = st
    ws3 = np.zeros((B * H * (DV // BV), DK, BV), np.float16)
    s = np.zeros((B, H, n, DK, DV), np.float16)
    kern = m["chunk_h_ker"](B, H, L, DK, DV, C, *blocks)
    return [Check(kern, [k, w, u, g, ws3, s], {("arg", 5): s_all, 0: v_new, 1: fs}, "float16",
                  C * n)]
