"""Sweep cases added in the dialect10 session, second file: upstream example kernels not in the
other case files (host code and float64 references written here; the kernels are the
examples' own, read from the mirror at run time by upstream_sweep.py)."""
import numpy as np

from upstream_sweep import Check, case, rn
from upstream_cases_new import A, TL, f64, mm, sigmoid  # noqa: F401
from upstream_cases_cv import sfa_pa_case
from upstream_cases_held import int_operands
from upstream_cases_new3 import (asc_gdn_inputs, chunk_h_checks, solve_tril_checks,
                                 wy_fast_checks)

# ------------------------------------------ tilelang-ascend linear_attention_and_rnn/opt_gdn

OPT = "examples/linear_attention_and_rnn/opt_gdn/"


@case("asc/opt_gdn/solve_tril", A, OPT + "opt_gdn_solve_tril.py",
      "(I + A)^-1 for chunks of 32 (row recurrence), 64 and 128 (blocked: gemms of the "
      "diagonal blocks' inverses)")
def _(m, rng):
    return (solve_tril_checks(m, rng, lambda B, H, L, C: m["solve_tril_ker"](B, H, L, C), 32)
            + solve_tril_checks(m, rng, lambda B, H, L, C: m["solve_tril_64_ker"](B, H, L), 64)
            + solve_tril_checks(m, rng, lambda B, H, L, C: m["solve_tril_128_ker"](B, H, L), 128))


@case("asc/opt_gdn/wy_fast", A, OPT + "opt_gdn_wy_fast.py",
      "W/U with the beta/gate scaling applied to A on the vector cores (two A workspaces)")
def _(m, rng):
    return wy_fast_checks(m, rng)


@case("asc/opt_gdn/chunk_h", A, OPT + "opt_gdn_chunk_h.py",
      "chunk state recurrence, whole DV per block")
def _(m, rng):
    return chunk_h_checks(m, rng)


@case("asc/opt_gdn/chunk_scaled_dot_kkt", A, OPT + "opt_gdn_chunk_scaled_dot_kkt.py",
      "strictly lower beta * exp(g_i - g_j) * K K^T per chunk, mask tensor")
def _(m, rng):
    B, H, L, DK, C = 1, 2, 128, 64, 32
    k, beta, g = asc_gdn_inputs(rng, B, H, L, DK, C)
    beta = rn(rng, (B, H, L), "float16")
    want = np.zeros((B, H, L, C))
    for c in range(L // C):
        r = slice(c * C, (c + 1) * C)
        kc, gc = k[:, :, r].astype(f64), g[:, :, r].astype(f64)
        a = np.einsum("bhid,bhjd->bhij", kc, kc) * beta[:, :, r, None].astype(f64)
        want[:, :, r] = np.tril(a * np.exp(gc[..., :, None] - gc[..., None, :]), -1)
    msk = np.tril(np.ones((C, C)), -1).astype(np.float32)
    return [Check(m["kkt_ker"](B, H, L, DK, C), [k, beta, g, msk], {0: want}, "float16", DK)]


@case("asc/opt_gdn/chunk_o", A, OPT + "opt_gdn_chunk_o.py",
      "exp(g)-scaled Q S plus the gated causal (Q K^T) V, whole DK/DV per block")
def _(m, rng):
    B, H, L, DK, DV, C = 1, 2, 128, 64, 64, 32
    q, k = rn(rng, (B, H, L, DK), "float16", 0.3), rn(rng, (B, H, L, DK), "float16", 0.3)
    v = rn(rng, (B, H, L, DV), "float16")
    _, _, g = asc_gdn_inputs(rng, B, H, L, DK, C)
    s = rn(rng, (B, H, L // C, DK, DV), "float16", 0.3)
    msk = np.tril(np.ones((C, C))).astype(np.float32)
    want = np.zeros((B, H, L, DV))
    for c in range(L // C):
        r = slice(c * C, (c + 1) * C)
        qc, kc, vc, gc = (x[:, :, r].astype(f64) for x in (q, k, v, g))
        t1 = np.exp(gc)[..., None] * (qc @ s[:, :, c].astype(f64))
        qk = (qc @ np.swapaxes(kc, -1, -2)) * np.exp(gc[..., :, None] - gc[..., None, :]) * msk
        want[:, :, r] = t1 + qk @ vc
    return [Check(m["chunk_o_ker"](B, H, L, DK, DV, C), [q, k, v, s, g, msk], {0: want},
                  "float16", C)]


# ------------------------------------------------------------------------- tilelang-ascend, more

def im2col_padded(x, w, stride, pad, blk):
    """Host code of the convolution examples: im2col columns (rows c, kh, kw; columns b, ho, wo)
    and the flattened kernel, zero-padded to multiples of blk; the float64 conv2d result."""
    B, C, H, W = x.shape
    OC, _, KH, KW = w.shape
    HO, WO = (H + 2 * pad - KH) // stride + 1, (W + 2 * pad - KW) // stride + 1
    xp = np.pad(x.astype(f64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    win = np.lib.stride_tricks.sliding_window_view(xp, (KH, KW), axis=(2, 3))
    win = win[:, :, ::stride, ::stride][:, :, :HO, :WO]            # b, c, ho, wo, kh, kw
    cols = win.transpose(1, 4, 5, 0, 2, 3).reshape(C * KH * KW, B * HO * WO)
    M, K, N = OC, C * KH * KW, B * HO * WO
    up = lambda v: -(-v // blk) * blk  # noqa: E731
    a = np.zeros((up(M), up(K)), np.float16)
    a[:M, :K] = w.reshape(OC, -1)
    b = np.zeros((up(K), up(N)), np.float16)
    b[:K, :N] = cols
    want = np.zeros((up(M), up(N)))
    want[:M, :N] = np.einsum("ocij,bchwij->obhw", w.astype(f64), win).reshape(OC, -1)
    return a, b, want, K


@case("asc/convolution/convolution_autotune", A, "examples/convolution/example_convolution_autotune.py",
      "host im2col + developer-mode gemm_v0 under @autotune(configs=<callable of the shapes>), "
      "and a fixed config")
def _(m, rng):
    checks = []
    for (B, C, H, W, OC, KH, stride, pad), tune in (((1, 2, 10, 10, 50, 3, 1, 0), True),
                                                    ((2, 3, 12, 12, 64, 3, 2, 1), False)):
        x, w = rn(rng, (B, C, H, W), "float16"), rn(rng, (OC, C, KH, KH), "float16")
        a, b, want, K = im2col_padded(x, w, stride, pad, 64 if tune else 128)
        M, N, Kp = a.shape[0], b.shape[1], a.shape[1]
        kern = m["matmul"](M, N, Kp) if tune else m["matmul"](M, N, Kp, block_M=128,
                                                                 block_N=128, K_L1=128)
        checks.append(Check(kern, [a, b], {0: want}, "float16", K))
    return checks


@case("asc/autotune/gemm_carver", A, "examples/autotune/example_gemm_carver.py",
      "@autotune over the configs carver.MatmulTemplate(...).with_arch(Ascend()).recommend_hints "
      "gives (module-level host code at the example's default 1024^3), called at 256^3")
def _(m, rng):
    a, b = rn(rng, (256, 256), "float16"), rn(rng, (256, 256), "float16")
    return [Check(m["matmul"](256, 256, 256), [a, b], {0: mm(a, b)}, "float16", 256)]


def causal_sparse_inputs(rng, S, SKV, H, dq, topk, dtype="float16"):
    """Query t attends a random subset of the keys before it (one key when t = 0), the rest of
    its topk indices padded with SKV (out of range, masked by `index <= t`)."""
    q = rn(rng, (1, S, H, dq), dtype)
    kv = rn(rng, (1, SKV, 1, dq), dtype)
    idx = np.full((1, S, 1, topk), SKV, np.int32)
    for t in range(S):
        sel = rng.permutation(max(1, t))[:topk]
        idx[0, t, 0, :len(sel)] = sel
    return q, kv, idx


def causal_sparse_ref(q, kv, idx, dim, scale):
    S = q.shape[1]
    out = np.zeros(q.shape[:3] + (dim,))
    for t in range(S):
        ids = idx[0, t, 0]
        valid = ids <= t
        rows = kv[0, np.minimum(ids, kv.shape[1] - 1), 0]
        out[0, t] = sparse_ref_rows(q[0, t], rows, dim, scale, valid)
    return out


def sparse_ref_rows(q, rows, dim, scale, valid):
    from upstream_cases_cv import sparse_ref
    return sparse_ref(q, rows, dim, scale, valid)


def sfa_mask_check(m, rng, S, SKV, H, dim, tail, topk, dtype):
    """The causal index-masked sparse MLA attention: S queries on SKV keys, H heads, dims
    dim + tail, top-k indices."""
    q, kv, idx = causal_sparse_inputs(rng, S, SKV, H, dim + tail, topk, dtype)
    want = causal_sparse_ref(q, kv, idx, dim, (dim + tail) ** -0.5)
    k = m["sparse_attention_fwd"](heads=H, dim=dim, tail_dim=tail, topk=topk, kv_stride=1,
                                  dtype=dtype)
    return [Check(k, [q, kv, idx], {0: want}, dtype, topk)]


@case("asc/sparse_flash_attention/sparse_flash_attn_mask", A,
      "examples/sparse_flash_attention/example_sparse_flash_attn_mask.py",
      "expert C/V sparse MLA attention with a causal index mask (tile.compare LE on the float "
      "indices, tile.select with -inf), fixed core loop, T.annotate_address with aliased UB")
def _(m, rng):
    return sfa_mask_check(m, rng, 12, 64, 16, 64, 32, 64, "float16")


@case("asc/sparse_flash_attention/sparse_flash_attn_mask_pa", A,
      "examples/sparse_flash_attention/example_sparse_flash_attn_mask_pa.py",
      "paged KV (block table) sparse MLA attention: -1 padded indices (`if index_i > -1` "
      "gathers), mask index <= kv_len - q_len + t AND index != -1 (two compares, bitwise_and)")
def _(m, rng):
    from upstream_cases_cv import sparse_ref
    S, H, dim, tail, topk, bs, nblk = 12, 16, 64, 32, 64, 16, 6
    SKV = 64
    dq = dim + tail
    q = rn(rng, (1, S, H, dq), "float16")
    kv = rn(rng, (nblk, bs, 1, dq), "float16")
    table = rng.permutation(nblk)[:SKV // bs].astype(np.int32)[None]      # [1, 4]
    logical = kv[table[0]].reshape(SKV, dq)                               # token -> row
    idx = np.full((S, 1, topk), -1, np.int32)
    want = np.zeros((1, S, H, dim))
    for t in range(S):
        lim = SKV - S + t                                                 # last visible token
        sel = list(rng.permutation(lim + 1)[:40]) + list(rng.integers(lim + 1, SKV, 3)
                                                         if lim + 1 < SKV else [])
        idx[t, 0, :len(sel)] = sel
        ids = idx[t, 0]
        valid = (ids != -1) & (ids <= lim)
        want[0, t] = sparse_ref(q[0, t], logical[np.maximum(ids, 0)], dim, dq ** -0.5, valid)
    k = m["sparse_attention_fwd"](heads=H, dim=dim, tail_dim=tail, topk=topk, dtype="float16",
                                  block_num=nblk, block_size=bs, core_num=4)
    lens = np.array([S], np.int32), np.array([SKV], np.int32)
    return [Check(k, [q, kv, idx, *lens, table], {0: want}, "float16", topk)]


def gqa_sparse_case(m, rng, make, B=1, S=4, SKV=256, H=32, G=2, dim=128, topk=128):
    """GQA sparse attention over top-k KV rows per (batch, position, kv group); K = V = the
    gathered rows (dim, no tail)."""
    from upstream_cases_cv import sparse_ref
    q = rn(rng, (B, S, H, dim), "float16")
    kv = rn(rng, (B, SKV, G, dim), "float16")
    idx = np.stack([np.stack([np.stack([rng.choice(SKV, topk, replace=False) for _ in range(G)])
                              for _ in range(S)]) for _ in range(B)]).astype(np.int32)
    want = np.zeros((B, S, H, dim))
    hg = H // G
    for b in range(B):
        for g in range(G):
            rows = kv[b, idx[b, :, g], g]                                 # [S, topk, dim]
            want[b, :, g * hg:(g + 1) * hg] = sparse_ref(q[b, :, g * hg:(g + 1) * hg], rows, dim,
                                                         dim ** -0.5)
    return [Check(make(B, S, H, G, dim, topk), [q, kv, idx], {0: want}, "float16", topk)]


@case("asc/sparse_flash_attention/sparse_flash_attn_gqa_pto", A,
      "examples/sparse_flash_attention/example_sparse_flash_attn_gqa_pto.py",
      "expert C/V GQA sparse attention, target='pto', one block per (position, group), L0C "
      "address reuse by T.annotate_address")
def _(m, rng):
    return gqa_sparse_case(m, rng, lambda B, S, H, G, dim, topk: m["sparse_attention_fwd"](
        heads=H, dim=dim, tail_dim=0, topk=topk, kv_stride=1, kv_group=G,
        workspace_block_num=B * S * G))


@case("asc/pipeline/sparse_flash_attn_gqa_pipeline_pto", A,
      "examples/pipeline/sparse_flash_attn_gqa_pipeline_pto.py",
      "developer-mode GQA sparse attention, target='pto', T.Pipelined(num_stages=2) over "
      "caller-passed workspaces")
def _(m, rng):
    def make(B, S, H, G, dim, topk):
        wbn, hb = B * S * G, H // G
        k = m["sparse_attention_fwd"](heads=H, dim=dim, tail_dim=0, topk=topk, kv_stride=1,
                                      kv_group=G, workspace_block_num=wbn)
        ws = [np.zeros((wbn, 64, dim), np.float16), np.zeros((wbn, hb, 64), np.float32),
              np.zeros((wbn, hb, 64), np.float16), np.zeros((wbn, hb, dim), np.float32)]
        return Extra(k, ws)
    return gqa_sparse_case(m, rng, make)


class Extra:
    """A kernel called with trailing arguments the host code adds (caller-passed workspaces,
    fresh zeros each call); `simulate` the same way."""
    def __init__(self, kernel, extra):
        self.kernel, self.extra = kernel, extra

    def __call__(self, *args):
        return self.kernel(*args, *[e.copy() for e in self.extra])

    def simulate(self, *args):
        return self.kernel.simulate(*args, *[e.copy() for e in self.extra])


def pack_int4(t):
    """The int4 values of t [R, C] (int8 in [-8, 8)) packed two a byte along C, the even column
    in the low nibble: uint8 [R, C / 2]."""
    nib = (t.astype(np.int16) & 0xF).astype(np.uint8)
    return (nib[:, 0::2] | (nib[:, 1::2] << 4)).astype(np.uint8)


@case("asc/dequantize_gemm/dequant_gemm_w4a8", A, "examples/dequantize_gemm/example_dequant_gemm_w4a8.py",
      "developer mode: the vector cores unpack int4 pairs (casts, bitwise and/shift, compare + "
      "select sign fix, element interleave) into a caller-passed workspace the cube reads")
def _(m, rng):
    checks = []
    for M, N, K in ((64, 32, 256), (64, 16, 512)):
        a, b = int_operands(rng, M, N, K, -8, 8)
        packed = pack_int4(b)
        want = a.astype(f64) @ b.astype(f64).T
        kern = m["w4a8_gemm_cv"](M, N, K)
        checks.append(Check(Extra(kern, [np.zeros((N, K), np.int8)]), [a, packed], {0: want},
                            "int32", tol=(0, 0)))
    return checks


def aclgraph_checks(m, rng, bsz, heads, hidden, rd, eps):
    """The aclgraph RMSNorm and in-place interleaved rope kernels on bsz x heads rows of
    width hidden (the last rd rotated), block_M 32."""
    from upstream_cases_new3 import rope_perm
    q = rn(rng, (bsz * heads, hidden), "float16")
    x = q.astype(f64)
    rms = x / np.sqrt((x * x).mean(1, keepdims=True) + eps)
    checks = [Check(m["rms_norm_kernel"](bsz * heads, hidden, 32, eps), [q], {0: rms}, "float16",
                    hidden)]
    sin, cos = rn(rng, (bsz, rd), "float16"), rn(rng, (bsz, rd), "float16")
    partner, sign = rope_perm(rd, "interleave")
    r = np.arange(bsz * heads) // heads
    s, c = sin.astype(f64)[r], cos.astype(f64)[r]
    xr = x[:, hidden - rd:]
    want = x.copy()
    want[:, hidden - rd:] = xr * c + sign * xr[:, partner] * s
    kern = m["rope_kernel_in_place"](bsz * heads, 32, bsz, hidden, rd, heads)
    checks.append(Check(kern, [q.copy(), sin, cos], {("arg", 0): want}, "float16"))
    return checks


@case("asc/aclgraph/rms_rope_aclgraph", A, "examples/aclgraph/rms_rope_aclgraph.py",
      "RMSNorm (row slices divided by a per-row scalar) and in-place interleaved rope "
      "(createvecindex, bitwise_xor, reinterpretcast gather mask, broadcast)")
def _(m, rng):
    return aclgraph_checks(m, rng, 2, 16, 64, 32, 1e-6)


def gated_delta_h_ref(k, w, u, g, h0, cu, BT, hg_ratio):
    """Per sequence and head: h_t (state before chunk t), v_new = u - w h, state update
    h <- h * exp(g_last) + k^T (v_new * exp(g_last - g)); k heads shared by hg_ratio heads.
    k [T, Hg, K], w [T, H, K], u [T, H, V], g [T, H], h0 [N, H, K, V]."""
    N, H = len(cu) - 1, w.shape[1]
    hs = np.zeros((N, max(-(-(cu[i + 1] - cu[i]) // BT) for i in range(N)), H) + h0.shape[2:])
    vn_all, ht = np.zeros(u.shape), np.zeros(h0.shape)
    for n in range(N):
        for hh in range(H):
            st = h0[n, hh].astype(f64)
            for t in range(-(-(cu[n + 1] - cu[n]) // BT)):
                r = slice(cu[n] + t * BT, min(cu[n] + (t + 1) * BT, cu[n + 1]))
                hs[n, t, hh] = st
                vn = u[r, hh].astype(f64) - w[r, hh].astype(f64) @ st
                vn_all[r, hh] = vn
                gc = g[r, hh].astype(f64)
                vn = vn * np.exp(gc[-1] - gc)[:, None]
                st = st * np.exp(gc[-1]) + k[r, hh // hg_ratio].astype(f64).T @ vn
            ht[n, hh] = st
    return hs, vn_all, ht


def gated_delta_checks(m, rng, name, pad):
    """The chunk_gated_delta_rule examples' kernel `name` on two sequences (varlen by
    cu_seqlens, grouped K heads), its token-major inputs and v_new output `pad` rows longer
    (zeros) than the tokens, against gated_delta_h_ref."""
    seqlens, H, Hg, K, V, BT = (64, 128), 2, 1, 64, 64, 64
    T_ = sum(seqlens)
    cu = np.concatenate([[0], np.cumsum(seqlens)]).astype(np.int32)
    k = rn(rng, (T_, Hg, K), "float16", 0.1)
    w = rn(rng, (T_, H, K), "float16", 0.1)
    u = rn(rng, (T_, H, V), "float16", 0.1)
    g = -rng.random((T_, H)).astype(np.float32) * 0.1
    h0 = rn(rng, (len(seqlens), H, K, V), "float16", 0.1)
    hs, vn, ht = gated_delta_h_ref(k, w, u, g, h0, cu, BT, H // Hg)
    N, NT = len(seqlens), hs.shape[1]
    padded = lambda x: np.concatenate([x, np.zeros((pad,) + x.shape[1:], x.dtype)])  # noqa: E731
    g_t = np.concatenate([g.T, np.zeros((H, pad), np.float32)], 1)
    want_vn = np.zeros((T_ + pad, H, V))
    want_vn[:T_] = vn
    kern = m[name](N, H, T_ + pad, Hg, K, V, NT, BT=BT)
    args = [np.zeros((N, NT, H, K, V), np.float16), padded(k), padded(u), padded(w), g_t,
            np.zeros((T_ + pad, H, V), np.float16), h0, np.zeros((N, H, K, V), np.float16), cu]
    return [Check(kern, args, {("arg", 0): hs, ("arg", 5): want_vn, ("arg", 7): ht}, "float16",
                  BT * NT)]


@case("asc/chunk_gated_delta_rule/chunk_gated_delta_rule", A,
      "examples/chunk_gated_delta_rule/chunk_gated_delta_rule.py",
      "varlen (cu_seqlens read in the kernel, run-time chunk count), developer mode with four "
      "workspaces, grouped K heads, T.if_then_else on GM scalar reads, broadcast(axis=1)")
def _(m, rng):
    return gated_delta_checks(m, rng, "chunk_gated_delta_rule", pad=64)  # one chunk (BT) of zeros


@case("asc/chunk_gated_delta_rule/expert_chunk_gated_delta_rule", A,
      "examples/chunk_gated_delta_rule/expert_chunk_gated_delta_rule.py",
      "the same recurrence in expert mode: V halves per AIV, own set/wait flags (event ids up "
      "to 10) and cross flags")
def _(m, rng):
    return gated_delta_checks(m, rng, "chunk_gated_delta_rule_fwd_kernel", pad=0)


BENCH = "examples/sparse_flash_attention/bench_sfa/"


@case("asc/sparse_flash_attention/bench_sfa_pa_baseline", A, BENCH + "sparse_flash_attn_pa_baseline.py",
      "paged sparse MLA attention, AUTO_SYNC, 64-row query blocks")
def _(m, rng):
    return sfa_pa_case(m, rng, 64)


@case("asc/sparse_flash_attention/bench_sfa_pa", A, BENCH + "sparse_flash_attn_pa.py",
      "paged sparse MLA attention, hand-synchronised CV pipeline (own flags), a 32-byte "
      "compare mask for 64 keys")
def _(m, rng):
    return sfa_pa_case(m, rng, 16, tail=64)


@case("asc/sparse_flash_attention/bench_sfa_pa_no_cv_pipeline", A,
      BENCH + "sparse_flash_attn_pa_no_cv_pipeline.py",
      "paged sparse MLA attention, hand-synchronised, no CV pipelining (64-key blocks: the "
      "32-byte compare mask longer than the 64 bits it needs)")
def _(m, rng):
    return sfa_pa_case(m, rng, 16, tail=64, n_base_size=64)  # its L0 K step is 64 = rope_dim


# ------------------------------------------------------------------------------ TileLang, more

def nsa_decode_check(m, rng, B, L, H, HQ, D, S, bs):
    """NSA decode: one query per batch, HQ heads over H KV heads of dim D, S selected blocks of
    bs keys (S = 1, see below) out of L."""
    # one selected block, as the example runs it: its online softmax keeps only the current
    # block's max and never rescales acc_o, so more blocks would not be a softmax
    q = rn(rng, (B, 1, HQ, D), "float16")
    k, v = rn(rng, (B, L, H, D), "float16"), rn(rng, (B, L, H, D), "float16")
    idx = np.sort(np.stack([rng.choice(L // bs, S, replace=False) for _ in range(B * H)]),
                  -1).reshape(B, 1, H, S).astype(np.int32)
    want = np.zeros((B, 1, HQ, D))
    g = HQ // H
    for b in range(B):
        for h in range(H):
            rows = np.concatenate([np.arange(i * bs, (i + 1) * bs) for i in idx[b, 0, h]])
            kr, vr = k[b, rows, h].astype(f64), v[b, rows, h].astype(f64)
            s = q[b, 0, h * g:(h + 1) * g].astype(f64) @ kr.T / np.sqrt(D)
            p = np.exp(s - s.max(-1, keepdims=True))
            want[b, 0, h * g:(h + 1) * g] = (p / p.sum(-1, keepdims=True)) @ vr
    f = m["native_sparse_attention"]
    fn = lambda q, k, v, i: f(q, k, v, i, dim=D, block_size=bs, groups=g, selected_blocks=S)  # noqa: E731
    fn.kernel_for = lambda q, k, v, i: f.kernel_for(q, k, v, i, dim=D, block_size=bs, groups=g,
                                                    selected_blocks=S)
    return [Check(fn, [q, k, v, idx], {0: want}, "float16", S * bs)]


@case("tl/deepseek_nsa/nsa_decode", TL, "examples/deepseek_nsa/example_tilelang_nsa_decode.py",
      "eager native sparse attention decode: selected KV blocks read by a GM index, run-time "
      "`if i_s >= 0` around the block's online softmax, gemm policy hints")
def _(m, rng):
    return nsa_decode_check(m, rng, 2, 128, 2, 32, 32, 1, 32)


@case("tl/blocksparse_attention/sparse_gqa_decode_varlen_mask", TL,
      "examples/blocksparse_attention/example_tilelang_sparse_gqa_decode_varlen_mask.py",
      "split-KV GQA decode over a bool block mask (run-time `if` on a GM bool, T.alloc_var bool "
      "flag), variable cache lengths, T.dynamic shapes, second launch combining the splits")
def _(m, rng):
    B, H, HKV, D, bn, L, nsplit = 2, 16, 2, 64, 32, 256, 2
    g = H // HKV
    q = rn(rng, (B, H, D), "float16")
    k, v = rn(rng, (B, L, HKV, D), "float16"), rn(rng, (B, L, HKV, D), "float16")
    seqlens = np.array([200, 256], np.int32)
    nb = L // bn
    mask = np.zeros((B, HKV, nb), bool)
    for b in range(B):
        live = -(-seqlens[b] // bn)              # blocks holding some visible token
        for h in range(HKV):
            for s in range(nsplit):             # every split gets at least one live block
                blocks = [i for i in range(s * nb // nsplit, (s + 1) * nb // nsplit) if i < live]
                mask[b, h, rng.choice(blocks, 1 + rng.integers(len(blocks)), replace=False)] = True
    want = np.zeros((B, H, D))
    for b in range(B):
        for h in range(H):
            rows = [r for i in np.nonzero(mask[b, h // g])[0]
                    for r in range(i * bn, (i + 1) * bn) if r < seqlens[b]]
            s = q[b, h].astype(f64) @ k[b, rows, h // g].astype(f64).T / np.sqrt(D)
            p = np.exp(s - s.max())
            want[b, h] = (p / p.sum()) @ v[b, rows, h // g].astype(f64)
    kern = m["flashattn"](B, H, HKV, D, D, block_N=bn, block_H=64, num_stages=2, threads=128)
    extra = [np.zeros((B, H, nsplit), np.float32), np.zeros((B, H, nsplit, D), np.float32)]
    return [Check(Extra(kern, extra), [q, k, v, mask, seqlens], {0: want}, "float16", L)]


def decode_indices(rng, B, HKV, seqlens, bn, nmax):
    """Per (batch, kv head) selected block ids in descending order (the last visible block
    always among them), -1 padded to nmax."""
    idx = np.full((B, HKV, nmax), -1, np.int32)
    for b in range(B):
        live = -(-seqlens[b] // bn)
        for h in range(HKV):
            n = rng.integers(2, nmax + 1)
            sel = [live - 1] + list(rng.choice(live - 1, n - 1, replace=False))
            idx[b, h, :n] = sorted(sel, reverse=True)
    return idx


def decode_ref(q, kv_rows, seqlens, idx, bn, g):
    """kv_rows(b, kvh, rows) -> (k, v) of those logical rows."""
    B, H, D = q.shape
    want = np.zeros((B, H, D))
    for b in range(B):
        for h in range(H):
            ids = [i for i in idx[b, h // g] if i >= 0]
            rows = [r for i in ids for r in range(i * bn, (i + 1) * bn) if r < seqlens[b]]
            kk, vv = kv_rows(b, h // g, rows)
            s = q[b, h].astype(f64) @ kk.T / np.sqrt(D)
            p = np.exp(s - s.max())
            want[b, h] = (p / p.sum()) @ vv
    return want


def indice_decode_check(m, rng, B, H, HKV, D, bn, L, nsplit, nmax, seqlens):
    """Split-KV GQA decode over -1 padded block indices (at most nmax per KV head) of a cache
    of L rows with per-batch `seqlens`, blocks of bn, nsplit splits."""
    q = rn(rng, (B, H, D), "float16")
    k, v = rn(rng, (B, L, HKV, D), "float16"), rn(rng, (B, L, HKV, D), "float16")
    seqlens = np.array(seqlens, np.int32)
    idx = decode_indices(rng, B, HKV, seqlens, bn, nmax)
    want = decode_ref(q, lambda b, h, r: (k[b, r, h].astype(f64), v[b, r, h].astype(f64)),
                      seqlens, idx, bn, H // HKV)
    kern = m["flashattn"](B, H, HKV, D, D, block_N=bn, block_H=64, num_stages=2, threads=128)
    extra = [np.zeros((B, H, nsplit), np.float32), np.zeros((B, H, nsplit, D), np.float32)]
    return [Check(Extra(kern, extra), [q, k, v, idx, seqlens], {0: want}, "float16", L)]


@case("tl/blocksparse_attention/sparse_gqa_decode_varlen_indice", TL,
      "examples/blocksparse_attention/example_tilelang_sparse_gqa_decode_varlen_indice.py",
      "split-KV GQA decode over -1 padded block indices read from GM, length mask on the first "
      "block of a split, combine launch")
def _(m, rng):
    return indice_decode_check(m, rng, 2, 16, 2, 64, 32, 256, 2, 6, (200, 256))


def paged_decode_check(m, rng, B, H, HKV, D, bn, page, L, nsplit, nmax, npages, seqlens):
    """The indexed split-KV decode over a paged cache: npages pages of `page` rows, a random
    block table per batch."""
    q = rn(rng, (B, H, D), "float16")
    kp, vp = rn(rng, (npages, page, HKV, D), "float16"), rn(rng, (npages, page, HKV, D), "float16")
    table = rng.permutation(npages)[:B * (L // page)].reshape(B, L // page).astype(np.int32)
    seqlens = np.array(seqlens, np.int32)
    idx = decode_indices(rng, B, HKV, seqlens, bn, nmax)

    def rows(b, h, r):
        r = np.array(r)
        pg, off = table[b, r // page], r % page
        return kp[pg, off, h].astype(f64), vp[pg, off, h].astype(f64)
    want = decode_ref(q, rows, seqlens, idx, bn, H // HKV)
    kern = m["flashattn"](B, H, HKV, D, D, block_N=bn, block_H=64, page_block_size=page,
                          num_stages=2, threads=128, num_pages=npages)
    extra = [np.zeros((B, H, nsplit), np.float32), np.zeros((B, H, nsplit, D), np.float32)]
    return [Check(Extra(kern, extra), [q, kp, vp, idx, seqlens, table], {0: want}, "float16", L)]


@case("tl/blocksparse_attention/sparse_gqa_decode_paged", TL,
      "examples/blocksparse_attention/example_tilelang_sparse_gqa_decode_paged.py",
      "the indexed split-KV decode over a paged KV cache (block table, pages of two blocks)")
def _(m, rng):
    return paged_decode_check(m, rng, 2, 16, 2, 64, 32, 64, 256, 2, 6, 10, (200, 256))


@case("tl/flash_decoding/gqa_decode_varlen_logits", TL,
      "examples/flash_decoding/example_gqa_decode_varlen_logits.py",
      "varlen GQA decode (cu_seqlens read in the kernel, run-time trip count), optional sink "
      "added to the denominator, per-block score statistics written through a shared tile")
def _(m, rng):
    return varlen_logits_checks(m, rng, 2, 16, 2, 64, 64, [150, 200])


def varlen_logits_checks(m, rng, B, H, HK, D, bn, lens):
    """gqa_decode_varlen_logits' flashattn for B sequences of `lens` keys, H query heads over
    HK KV heads of dim D, block_N bn, with and without the sink: output and block scores."""
    lens = np.array(lens)
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    total, maxlen = int(cu[-1]), int(lens.max())
    nblk = -(-maxlen // bn)
    q = rn(rng, (B, H, D), "float16")
    k, v = rn(rng, (total, HK, D), "float16"), rn(rng, (total, HK, D), "float16")
    g = H // HK
    checks = []
    for sink in (False, True):
        aux = (rng.random(H) * 2).astype(np.float32)
        o_want, s_want = np.zeros((B, H, D)), np.zeros((B, H, nblk))
        for b in range(B):
            for h in range(H):
                kk = k[cu[b]:cu[b + 1], h // g].astype(f64)
                s = q[b, h].astype(f64) @ kk.T / np.sqrt(D)
                nb = -(-lens[b] // bn)
                # the kernel's reference max is the last block's (each block's scores_max is
                # refilled before its reduce_max); the sink joins the denominator as given
                mx = s[(nb - 1) * bn:].max()
                e = np.exp(s - mx)
                den = e.sum() + (aux[h] if sink else 0.0)
                o_want[b, h] = e @ v[cu[b]:cu[b + 1], h // g].astype(f64) / den
                for j in range(nb):
                    s_want[b, h, j] = np.exp(s[j * bn:(j + 1) * bn].max() - mx) / den

        def first_blocks(got, want, lens=lens):
            from upstream_sweep import tolerance
            rtol, atol = tolerance("float16", 1)
            for b in range(B):   # blocks past a sequence's end are never written by the kernel
                nb = -(-lens[b] // bn)
                assert np.allclose(got[b, :, :nb].astype(f64), want[b, :, :nb], rtol=rtol,
                                   atol=atol), f"S of batch {b}"
        kern = m["flashattn"](B, H, HK, maxlen, total, D, sink, block_N=bn, block_H=64)
        args = [q, k, v, cu, aux]
        checks.append(Check(kern, args, {0: o_want}, "float16", maxlen))
        checks.append(Check(kern, args, {1: s_want}, "float16", compare=first_blocks))
    return checks


# GPU-only examples: a located error naming the feature is the expected outcome

def ws_gemm_case(m, rng, name):
    a, b = rn(rng, (128, 64), "float16"), rn(rng, (64, 128), "float16")
    f = m[name]
    fn = lambda a, b: f(a, b, 64, 64, 32)  # noqa: E731
    fn.kernel_for = lambda a, b: f.kernel_for(a, b, 64, 64, 32)
    return [Check(fn, [a, b], {0: mm(a, b)}, "float16", 64)]


@case("tl/warp_specialize/gemm_copy_1_gemm_0", TL,
      "examples/warp_specialize/example_warp_specialize_gemm_copy_1_gemm_0.py",
      "GPU-only: T.ws warp groups, T.alloc_barrier, T.tma_copy (expected: a located error)")
def _(m, rng):
    return ws_gemm_case(m, rng, "matmul_warp_specialize_copy_1_gemm_0")


@case("tl/dequantize_gemm/dequant_gemv_fp16xint4", TL,
      "examples/dequantize_gemm/example_dequant_gemv_fp16xint4.py",
      "SIMT gemv (T.thread_binding lanes run in lockstep) whose blockers are TVM-level: "
      "T.import_source, the quantize package's tvm.tirx helpers, T.attr + T.comm_reducer + "
      "T.tvm_thread_allreduce (expected: a located error)")
def _(m, rng):
    M, N, K = 1, 64, 1024
    a = rn(rng, (M, K), "float16")
    w = rng.integers(0, 16, (N, K)).astype(np.int64)
    packed = (w[:, 0::2] | (w[:, 1::2] << 4)).astype(np.uint8).view(np.int8)
    signed = np.where(w >= 8, w - 16, w)  # _tir_packed_int_to_int_convert sign-extends a nibble
    kern = m["dequantize_gemv"](M, N, K, "float16", "float16", "float16")
    return [Check(kern, [a, packed], {0: a.astype(f64) @ signed.T.astype(f64)}, "float16", K)]


def sink_attn_grads(q, k, v, do, sinks, window=None):
    """Causal attention whose softmax denominator also holds exp(sink_h) (no value): O, lse
    (log2 of the denominator), Delta = rowsum(dO * O), dQ, dK, dV and dsink per position
    (-P_sink * Delta), float64, B,H,S,D; `window`: keys j with i - window < j <= i only."""
    q, k, v, do = (x.astype(f64) for x in (q, k, v, do))
    d = q.shape[-1]
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(d)
    i, j = np.indices(s.shape[-2:])
    s = np.where((i >= j) & ((i < j + window) if window else True), s, -np.inf)
    sk = sinks.astype(f64)[None, :, None, None]
    mx = np.maximum(s.max(-1, keepdims=True), sk)
    e = np.exp(s - mx)
    den = e.sum(-1, keepdims=True) + np.exp(sk - mx)
    p = e / den
    o = p @ v
    lse = ((np.log(den) + mx) / np.log(2))[..., 0]
    delta = (do * o).sum(-1)
    dv = np.swapaxes(p, -1, -2) @ do
    ds = p * (do @ np.swapaxes(v, -1, -2) - delta[..., None]) / np.sqrt(d)
    dsink = -(np.exp(sk - mx) / den)[..., 0] * delta
    return o, lse, delta, ds @ k, np.swapaxes(ds, -1, -2) @ q, dv, dsink


def sink_bwd_checks(m, rng, B, H, S, D):
    """The MHA attention-sink examples' fwd, preprocess, bwd, postprocess and dsink kernels at
    (B, H, S, D), causal, against sink_attn_grads."""
    q, k, v, do = (rn(rng, (B, H, S, D), "float16") for _ in range(4))
    sinks = rn(rng, (H,), "float16")
    o, lse, delta, dq, dk, dv, dsink = sink_attn_grads(q, k, v, do, sinks)
    # the fwd's sink tile has `heads` elements filled over block_M rows: block_M <= heads
    checks = [Check(m["flashattn_fwd"](B, H, S, D, block_M=16, block_N=16), [q, k, v, sinks],
                    {0: o, 1: lse}, "float16", S)]
    o16 = o.astype(np.float16)
    checks.append(Check(m["flashattn_bwd_preprocess"](B, H, S, D), [o16, do],
                        {0: (o16.astype(f64) * do).sum(-1)}, "float32", D))
    lse32, delta32 = lse.astype(np.float32), delta.astype(np.float32)
    args = [q, k, v, do, lse32, delta32, np.zeros((B, H, S, D), np.float32),
            np.zeros((B, H, S, D), np.float16), np.zeros((B, H, S, D), np.float16)]
    checks.append(Check(m["flashattn_bwd"](B, H, S, D), args,
                        {("arg", 6): dq, ("arg", 7): dk, ("arg", 8): dv}, "float16", S))
    dq32 = dq.astype(np.float32)
    checks.append(Check(m["flashattn_bwd_postprocess"](B, H, S, D), [dq32], {0: dq32.astype(f64)},
                        "float16"))
    checks.append(Check(m["flashattn_bwd_dsink"](B, H, S), [sinks, delta32, lse32], {0: dsink},
                        "float32"))
    return checks


@case("tl/attention_sink/mha_sink_bwd_bhsd", TL, "examples/attention_sink/example_mha_sink_bwd_bhsd.py",
      "attention sinks: causal fwd with the sink in the denominator, preprocess, bwd (dQ by "
      "atomic_add; its block sizes from get_device_capability), postprocess, dsink")
def _(m, rng):
    return sink_bwd_checks(m, rng, 1, 16, 128, 32)


@case("tl/attention_sink/gqa_sink_bwd_bhsd", TL, "examples/attention_sink/example_gqa_sink_bwd_bhsd.py",
      "GQA attention sinks, full and sliding window: fwd, preprocess, bwd (dQ/dK/dV by "
      "atomic_add into float32), postprocess, dsink")
def _(m, rng):
    B, H, HK, S, D = 1, 16, 4, 128, 32
    g = H // HK
    checks = []
    for window in (None, 64):
        q, do = rn(rng, (B, H, S, D), "float16"), rn(rng, (B, H, S, D), "float16")
        k, v = rn(rng, (B, HK, S, D), "float16"), rn(rng, (B, HK, S, D), "float16")
        sinks = rn(rng, (H,), "float16")
        o, lse, delta, dq, dk, dv, dsink = sink_attn_grads(q, np.repeat(k, g, 1),
                                                           np.repeat(v, g, 1), do, sinks, window)
        dk, dv = dk.reshape(B, HK, g, S, D).sum(2), dv.reshape(B, HK, g, S, D).sum(2)
        checks.append(Check(m["flashattn_fwd"](B, H, S, D, g, window, block_M=16, block_N=16),
                            [q, k, v, sinks], {0: o, 1: lse}, "float16", S))
        lse32, delta32 = lse.astype(np.float32), delta.astype(np.float32)
        args = [q, k, v, do, lse32, delta32, np.zeros((B, H, S, D), np.float32),
                np.zeros((B, HK, S, D), np.float32), np.zeros((B, HK, S, D), np.float32)]
        checks.append(Check(m["flashattn_bwd"](B, H, S, D, g, window), args,
                            {("arg", 6): dq, ("arg", 7): dk, ("arg", 8): dv}, "float16", S))
        checks.append(Check(m["flashattn_bwd_dsink"](B, H, S), [sinks, delta32, lse32],
                            {0: dsink}, "float16"))
    return checks
