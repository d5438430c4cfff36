"""Sweep cases added in the dialect2 session, second batch (tilelang-ascend batch 2 and later):
upstream example kernels not in the other case files (host code and float64 references written
here; the kernels are the examples' own, read from the mirror at run time by upstream_sweep.py)."""
import numpy as np

from upstream_sweep import Check, case, rn, with_kwargs
from upstream_cases_ascend import indexer_checks
from upstream_cases_cv import developer_case
from upstream_cases_new import (
    A, TL, block_sparse_inputs, f64, masked_attn_ref, mm, sigmoid, varlen_inputs,
)

# ------------------------------------------------------------------- tilelang-ascend, batch 2

@case("asc/grouped_gemm/grouped_gemm_fwd", A, "examples/grouped_gemm/example_grouped_gemm_fwd.py",
      "expert grouped GEMM: per-block (group, row start, valid rows) metadata read from GM")
def _(m, rng):
    checks = []
    # group sizes that are multiples of block_M, or one group: the example copies whole
    # block_M-row tiles out ("tail handling is not supported yet"), so a partial block of one
    # group would overwrite the next group's first rows (a race between blocks)
    for sizes in ((64,), (64, 128, 192), (63,)):
        K, N, bm = 128, 128, 64
        a = rn(rng, (sum(sizes), K), "float16")
        b = rn(rng, (len(sizes), K, N), "float16")
        meta, off = [], 0
        for g, sz in enumerate(sizes):
            for i in range(0, sz, bm):
                meta.append([g, off + i, min(bm, sz - i)])
            off += sz
        want = np.zeros((sum(sizes), N))
        off = 0
        for g, sz in enumerate(sizes):
            want[off:off + sz] = mm(a[off:off + sz], b[g])
            off += sz
        kern = m["grouped_gemm"](tuple(sizes), K, N, bm, 64, 64)
        checks.append(Check(kern, [a, b, np.array(meta, np.int32)], {0: want}, "float16", K))
    return checks



def paged_kv(rng, k, v, bs):
    """[B, H, S, D] keys/values as a shuffled paged cache: (block table [B, S // bs], key and
    value caches [B * S // bs, bs, H, D])."""
    B, H, S, D = k.shape
    nb = S // bs
    table = rng.permutation(B * nb).reshape(B, nb).astype(np.int32)
    kc = np.zeros((B * nb, bs, H, D), k.dtype)
    vc = np.zeros((B * nb, bs, H, D), v.dtype)
    for b in range(B):
        for si in range(nb):
            kc[table[b, si]] = k[b, :, si * bs:(si + 1) * bs].transpose(1, 0, 2)
            vc[table[b, si]] = v[b, :, si * bs:(si + 1) * bs].transpose(1, 0, 2)
    return table, kc, vc

@case("asc/flash_attention/paged_flash_attn_bhsd", A, "examples/flash_attention/paged_flash_attn_bhsd.py",
      "paged KV cache through a block table (shuffled blocks), developer mode, workspaces")
def _(m, rng):
    B, H, S, D, bs = 2, 2, 256, 64, 128
    q, k, v = (rn(rng, (B, H, S, D), "float16") for _ in range(3))
    nb = S // bs
    table, kc, vc = paged_kv(rng, k, v, bs)
    kern = m["paged_flash_attention_fwd"](B, H, S, D, B * nb, nb, block_size=bs)
    want = masked_attn_ref(q, k, v, np.ones((S, S), bool))
    return [Check(kern, [q, kc, vc, table], {0: want}, "float16", S)]


def fa_gqa_case(m, rng, **kw):
    q = rn(rng, (1, 4, 256, 128), "float16")
    k, v = rn(rng, (1, 2, 256, 128), "float16"), rn(rng, (1, 2, 256, 128), "float16")
    want = masked_attn_ref(q, np.repeat(k, 2, 1), np.repeat(v, 2, 1), np.ones((256, 256), bool))
    kern = m["flash_attention_fwd"](batch=1, seq_len=256, heads_q=4, heads_kv=2, dim=128, **kw)
    return [Check(kern, [q, k, v], {0: want}, "float16", 256)]


def fa_opt_case(m, rng):
    """The fa_opt examples' case: fa_gqa_case with 2 kv blocks per stage group at seq_len 256."""
    return fa_gqa_case(m, rng, num_stages=2)


case("asc/flash_attention/fa_opt_expert_h16_d128", A,
     "examples/flash_attention/fa_opt/flash_attn_bhsd_expert_h16_d128.py",
     "expert GQA flash attention: own C/V flags, staged workspaces, persistent cores")(fa_opt_case)
case("asc/flash_attention/fa_opt_auto_pipeline_h16_d128", A,
     "examples/flash_attention/fa_opt/flash_attn_bhsd_auto_pipeline_h16_d128.py",
     "GQA flash attention, auto pipeline, persistent cores")(fa_opt_case)


@case("asc/seer_attention/block_sparse_attn", A, "examples/seer_attention/block_sparse_attn.py",
      "int8 block mask, causal, developer mode with workspaces")
def _(m, rng):
    checks = []
    for B, H, SQ, SK in ((1, 2, 256, 256), (1, 1, 128, 256)):
        q, k, v, mask, allowed = block_sparse_inputs(rng, B, H, SQ, SK)  # block_M = block_N = 64
        ds = SK // 64
        kern = m["blocksparse_flashattn_ascend"](B, H, SQ, SK, 64, ds, is_causal=True)
        checks.append(Check(kern, [q, k, v, mask], {0: masked_attn_ref(q, k, v, allowed)},
                            "float16", SK))
    return checks


def attn_grads(q, k, v, do, causal):
    """float64 attention forward and backward (softmax(q k^T / sqrt(d)) v, causal optional):
    O, lse (log2 of the softmax denominator of the scaled scores), Delta = rowsum(dO * O),
    dQ, dK, dV."""
    q, k, v, do = (x.astype(f64) for x in (q, k, v, do))
    d = q.shape[-1]
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(d)
    if causal:
        i, j = np.indices(s.shape[-2:])
        s = np.where(i >= j, s, -np.inf)
    mx = s.max(-1, keepdims=True)
    e = np.exp(s - mx)
    den = e.sum(-1, keepdims=True)
    p = e / den
    o = p @ v
    lse = ((np.log(den) + mx) / np.log(2))[..., 0]
    delta = (do * o).sum(-1)
    dv = np.swapaxes(p, -1, -2) @ do
    dp = do @ np.swapaxes(v, -1, -2)
    ds = p * (dp - delta[..., None]) / np.sqrt(d)
    return o, lse, delta, ds @ k, np.swapaxes(ds, -1, -2) @ q, dv


@case("tl/flash_attention/mha_bwd_bhsd", TL, "examples/flash_attention/example_mha_bwd_bhsd.py",
      "fwd with lse, bwd preprocess (Delta), bwd (dQ by element-wise atomic_add, dK, dV), postprocess")
def _(m, rng):
    return mha_bwd_checks(m, rng, bshd=False)


def mha_bwd_checks(m, rng, bshd, dims=(1, 2, 128, 64)):
    """The four kernels of the MHA backward examples (fwd with lse, bwd preprocess (Delta), bwd,
    postprocess), causal and not, with B,H,S,D tensors or (`bshd`) B,S,H,D ones (`dims`)."""
    B, H, S, D = dims
    shape = (B, S, H, D) if bshd else (B, H, S, D)
    checks = []
    for causal in (False, True):
        q, k, v, do = (rn(rng, shape, "float16") for _ in range(4))
        if bshd:
            from upstream_cases_new3 import bshd_grads
            o, lse, delta, dq, dk, dv = bshd_grads(q, k, v, do, causal)
        else:
            o, lse, delta, dq, dk, dv = attn_grads(q, k, v, do, causal)
        checks.append(Check(m["flashattn_fwd"](B, H, S, D, causal, 64, 64), [q, k, v],
                            {0: o, 1: lse}, "float16", S))
        o16 = o.astype(np.float16)
        pre = (o16.astype(f64) * do).sum(-1)
        checks.append(Check(m["flashattn_bwd_preprocess"](B, H, S, D), [o16, do],
                            {0: np.swapaxes(pre, 1, 2) if bshd else pre}, "float32", D))
        args = [q, k, v, do, lse.astype(np.float32), delta.astype(np.float32),
                np.zeros(shape, np.float32), np.zeros(shape, np.float16),
                np.zeros(shape, np.float16)]
        checks.append(Check(m["flashattn_bwd"](B, H, S, D, causal, 64, 64), args,
                            {("arg", 6): dq, ("arg", 7): dk, ("arg", 8): dv}, "float16", S))
        dq32 = dq.astype(np.float32)
        checks.append(Check(m["flashattn_bwd_postprocess"](B, H, S, D), [dq32],
                            {0: dq32.astype(f64)}, "float16"))
    return checks


def silu(x):
    return x * sigmoid(x)


@case("tl/fusedmoe/shared_and_routed", TL, "examples/fusedmoe/example_fusedmoe_tilelang.py",
      "eager jit with two T.Kernel launches, in-place outputs; routed: grouped GEMM over "
      "padded expert groups (metadata from GM), masked row stores scaled by routing weights")
def _(m, rng):
    return fusedmoe_checks(m, rng, 32, 128, 128, 4, 2, 128)


def fusedmoe_checks(m, rng, T_, D, E, NE, TOPK, bt, probs=None):
    """The fused MoE example's shared and routed kernels on T_ tokens of width D, experts of
    width E, NE routed experts, top-TOPK routing (`probs`: each expert's share of the routes,
    else uniform), block_token bt."""
    x = rn(rng, (T_, D), "float16")
    wg, wu, wd = rn(rng, (E, D), "float16", 0.1), rn(rng, (E, D), "float16", 0.1), \
        rn(rng, (D, E), "float16", 0.1)
    up = silu(mm(x, wg.T)) * mm(x, wu.T)
    up16 = up.astype(np.float16)
    shared = Check(m["moe_forward_tilelang_shared"],
                   [x, wg, wu, wd, np.zeros((T_, E), np.float16), np.zeros((T_, D), np.float16),
                    "float16"],
                   {("arg", 4): up, ("arg", 5): mm(up16, wd.T)}, "float16", D)
    # routed experts: tokens sorted by expert (the example's host code), groups padded
    idx = rng.integers(0, NE, T_ * TOPK) if probs is None else rng.choice(NE, T_ * TOPK, p=probs)
    order = np.argsort(idx, kind="stable")
    counts = np.bincount(idx, minlength=NE)
    xs = x[order // TOPK]
    wts = (rng.random(T_ * TOPK) + 0.5).astype(np.float16)
    rg, ru, rd = (rn(rng, (NE, E, D), "float16", 0.1), rn(rng, (NE, E, D), "float16", 0.1),
                  rn(rng, (NE, D, E), "float16", 0.1))
    offs = (np.cumsum(counts) - counts).astype(np.int32)
    padded = np.zeros(NE, np.int64)
    for i in range(1, NE):
        padded[i] = padded[i - 1] + -(-(counts[i - 1] + 1) // bt) * bt
    M = -(-(T_ * TOPK) // bt) + NE
    gidx = np.array([max(i for i in range(NE) if b * bt >= padded[i]) for b in range(M)], np.int32)
    g_of_row = np.repeat(np.arange(NE), counts)
    up_r = np.stack([silu(mm(xs[r], rg[g].T)) * mm(xs[r], ru[g].T) for r, g in enumerate(g_of_row)])
    out_r = np.stack([mm(up_r[r].astype(np.float16), rd[g].T) * wts[r]
                      for r, g in enumerate(g_of_row)])
    routed = Check(m["moe_forward_tilelang_routed"],
                   [xs, rg, ru, rd, wts, counts.astype(np.int32), offs, padded.astype(np.int32),
                    gidx, np.zeros((T_ * TOPK, E), np.float16),
                    np.zeros((T_ * TOPK, D), np.float16), "float16", T_ * TOPK, NE],
                   {("arg", 9): up_r, ("arg", 10): out_r}, "float16", D)
    return [shared, routed]


@case("asc/moe/token_unpermute", A, "examples/moe_token_permute/moe_token_unpermute.py",
      "expert V: row gathers by sorted indices read from UB, probability-weighted sum (axpy) "
      "in float32, and the plain gather without probabilities")
def _(m, rng):
    return unpermute_checks(m, rng, 16, 4, 32, 4)


def unpermute_checks(m, rng, nt, topk, hid, cores, dtype="float16"):
    """MoE unpermute of nt tokens x topk rows of width hid on `cores` cores: the
    probability-weighted sum of each token's rows (gathered by the sorted index) and the plain
    gather."""
    from upstream_cases_shapes import inputs
    E = nt * topk
    perm = inputs(rng, (E, hid), dtype)
    sio = rng.permutation(E).astype(np.int32)
    checks = []
    fn, ptok, pE, _ = m["_compile_gather"](nt, topk, hid, has_probs=True, NUM_CORES=cores,
                                         dtype=dtype)
    idx = np.zeros((1, pE), np.int32)
    idx[0, :E] = sio
    probs = np.zeros((1, ptok * topk), perm.dtype)
    probs[0, :E] = rng.random(E).astype(perm.dtype)
    want = (perm.astype(f64)[sio] * probs[0, :E, None].astype(f64)).reshape(nt, topk, hid).sum(1)
    checks.append(Check(fn, [perm, idx, probs], {0: want}, dtype, topk))
    fn, _, pE, _ = m["_compile_gather"](nt, topk, hid, has_probs=False, NUM_CORES=cores,
                                        dtype=dtype)
    idx = np.zeros((1, pE), np.int32)
    idx[0, :E] = sio
    checks.append(Check(fn, [perm, idx], {0: perm.astype(f64)[sio]}, dtype, tol=(0, 0)))
    return checks


def xllm_rope_check(m, rng, hd, rd, ntok, cores):
    """xllm's in-place interleaved rope of ntok rows of head_dim hd (the first rd rotated) on
    `cores` vector cores, in its compile-time token capacity."""
    import ml_dtypes
    k = m["rope_in_place_kernel_jit"](head_dim=hd, rope_dim=rd, vec_core_num=cores,
                                       ub_buffer_bytes=64 * 1024)
    cap = max(4 * (64 * 1024 // (30 * rd)), 65536)  # the example's compile_num_tokens
    x = np.zeros((1, cap * hd), ml_dtypes.bfloat16)
    x[0, :ntok * hd] = rn(rng, ntok * hd).astype(ml_dtypes.bfloat16)
    sin = np.zeros((cap, rd), ml_dtypes.bfloat16)
    cos = np.zeros((cap, rd), ml_dtypes.bfloat16)
    sin[:ntok] = rn(rng, (ntok, rd)).astype(ml_dtypes.bfloat16)
    cos[:ntok] = rn(rng, (ntok, rd)).astype(ml_dtypes.bfloat16)
    rows = x[0, :ntok * hd].reshape(ntok, hd).astype(f64)
    part = rows[:, :rd]
    rot = np.empty_like(part)
    rot[:, 0::2], rot[:, 1::2] = -part[:, 1::2], part[:, 0::2]
    want_rows = rows.copy()
    want_rows[:, :rd] = part * cos[:ntok].astype(f64) + rot * sin[:ntok].astype(f64)
    want = x.astype(f64)
    want[0, :ntok * hd] = want_rows.reshape(-1)
    return [Check(k, [x, sin, cos, x.copy(), ntok, hd], {("arg", 3): want}, "bfloat16")]


@case("asc/xllm/rope", A, "examples/xllm_kernels/rope.py",
      "in-place interleaved RoPE over a run-time token count (scalar params), T.tile.gather by "
      "byte offsets, sign mask, bf16 <-> f32 casts, AUTO_SYNC with the kernel's own layout")
def _(m, rng):
    return xllm_rope_check(m, rng, 128, 64, 10, 4)


@case("asc/random_1d", A, "examples/random_1d/random_1d.py",
      "int32 LCG with wrapping multiplies, T.tile.arith_progression, no inputs")
def _(m, rng):
    M, seed, a, c = 512, 42, 1103515245, 12345
    state = (seed + np.arange(M, dtype=np.int64))
    for _ in range(3):
        state = (state * a + c) % 2 ** 32
    want = np.where(state >= 2 ** 31, state - 2 ** 32, state).astype(f64)
    return [Check(m["random_1d"](M, 128, seed, a, c), [], {0: want}, "int32", tol=(0, 0))]


@case("asc/print/elementwise_print", A, "examples/print/elementwise_print.py",
      "T.printf / T.dump_tensor (device debug output) around an int16 bitwise_and")
def _(m, rng):
    a = rng.integers(-2 ** 15, 2 ** 15, (2, 16)).astype(np.int16)
    b = rng.integers(-2 ** 15, 2 ** 15, (2, 16)).astype(np.int16)
    return [Check(m["bitwise_and"](2, 16, 2, 16), [a, b], {0: (a & b).astype(f64)}, "int16",
                  tol=(0, 0))]


@case("tl/deepseek_v4/act_quant_fp8", TL, "examples/deepseek_v4/act_quant.py",
      "eager, T.dynamic M, reduce_absmax, power-of-two scales by IEEE bit tricks "
      "(T.reinterpret, shifts, masks), clamp, cast to float8_e4m3")
def _(m, rng):
    return act_quant_checks(m, rng, 64, 256)


def act_quant_checks(m, rng, M, N):
    """DeepSeek-V4 fp8 activation quantisation of an (M, N) bf16 tensor in groups of 128
    columns, power-of-two scales and plain ones."""
    import ml_dtypes
    checks = []
    for rs in (True, False):
        x = rn(rng, (M, N), scale=3.0).astype(ml_dtypes.bfloat16)
        g = x.astype(f64).reshape(M, N // 128, 128)
        amax = np.maximum(np.abs(g).max(-1), 1e-4)
        s = 2.0 ** np.ceil(np.log2(amax / 448.0)) if rs else \
            (amax.astype(np.float32) * np.float32(1 / 448.0)).astype(f64)
        q = np.clip(g / s[..., None], -448, 448).reshape(M, N)
        want_q = q.astype(ml_dtypes.float8_e4m3fn).astype(f64)
        fn = m["fp8_quant_kernel"]
        chk = Check(lambda x, rs=rs: fn(x, block_size=128, round_scale=rs), [x],
                    {0: want_q, 1: s}, tol=(0.07, 2 ** -9))
        chk.fn.kernel_for = lambda x, rs=rs: fn.kernel_for(x, block_size=128, round_scale=rs)
        checks.append(chk)
    return checks


@case("tl/deepseek_mla/mla_decode_paged", TL, "examples/deepseek_mla/example_mla_decode_paged.py",
      "MLA decode over a paged KV cache (shuffled block table), per-batch cache lengths from GM, "
      "split-KV with an LSE combine and without")
def _(m, rng):
    return mla_paged_checks(m, rng, 2, 16, 128, 64, 64, 256, [100, 190], (1, 2))


def mla_paged_checks(m, rng, b, hq, dv, dpe, bs, pad, lens, splits):
    """mla_decode_tilelang over a paged cache (pages of bs rows, pad rows per sequence, a
    shuffled block table) for cache `lens`, hq heads, dv + dpe wide keys, each split count."""
    lens = np.array(lens, np.int32)
    nb = pad // bs
    table = rng.permutation(b * nb).reshape(b, nb).astype(np.int32)
    q = rn(rng, (b, hq, dv + dpe), "float16")
    kv = rn(rng, (b * pad, 1, dv + dpe), "float16")
    want = np.zeros((b, hq, dv))
    for i in range(b):
        rows = np.concatenate([table[i, p] * bs + np.arange(bs) for p in range(nb)])[:lens[i]]
        keys = kv[rows, 0].astype(f64)
        s = q[i].astype(f64) @ keys.T * (dv + dpe) ** -0.5
        p = np.exp(s - s.max(-1, keepdims=True))
        want[i] = (p / p.sum(-1, keepdims=True)) @ keys[:, :dv]
    qn, qp = np.ascontiguousarray(q[..., :dv]), np.ascontiguousarray(q[..., dv:])
    kn, kp = np.ascontiguousarray(kv[..., :dv]), np.ascontiguousarray(kv[..., dv:])
    checks = []
    for split in splits:
        kern = m["mla_decode_tilelang"](b, hq, 1, pad, dv, dpe, 64, 16, split, bs, (dv + dpe) ** -0.5)
        args = [qn, qp, kn, kp, table, lens, np.zeros((b, hq, split), np.float16),
                np.zeros((b, hq, split, dv), np.float16)]
        checks.append(Check(kern, args, {0: want}, "float16", int(lens.max())))
    return checks


case("asc/sparse_flash_attention/sparse_flash_attn", A,
     "examples/sparse_flash_attention/example_sparse_flash_attn.py",
     "MLA-style sparse attention over top-k gathered KV rows, auto CV combine, five workspaces")(
    developer_case)


@case("asc/sparse_flash_attention/sparse_flash_attn_gqa", A,
      "examples/sparse_flash_attention/example_sparse_flash_attn_gqa.py",
      "GQA sparse attention, symbolic batch/seq shapes, per-group index lists")
def _(m, rng):
    from upstream_cases_cv import sparse_ref
    B, S, SKV, H, G, dim, tail, topk = 1, 8, 512, 32, 2, 64, 0, 128  # tail 0 as the example calls it
    dq = dim + tail
    q = rn(rng, (B, S, H, dq), "float16")
    kv = rn(rng, (B, SKV, G, dq), "float16")
    idx = np.stack([np.stack([rng.choice(SKV - S, topk, replace=False) for _ in range(G)])
                    for _ in range(S)]).astype(np.int32)[None]          # [B, S, G, topk]
    want = np.zeros((B, S, H, dim))
    hg = H // G
    for g in range(G):
        rows = kv[0, idx[0, :, g], g]                                  # [S, topk, dq]
        want[0, :, g * hg:(g + 1) * hg] = sparse_ref(q[0, :, g * hg:(g + 1) * hg], rows, dim,
                                                     dq ** -0.5)
    k = m["sparse_attention_fwd"](heads=H, dim=dim, tail_dim=tail, topk=topk, kv_stride=1,
                                  kv_group=G)
    return [Check(k, [q, kv, idx], {0: want}, "float16", topk)]


@case("asc/sparse_flash_attention/sparse_flash_attn_dynamic_shape", A,
      "examples/sparse_flash_attention/example_sparse_flash_attn_dynamic_shape.py",
      "bf16 sparse attention with T.symbolic batch/seq/kv lengths")
def _(m, rng):
    import ml_dtypes
    from upstream_cases_cv import sparse_ref
    B, S, SKV, H, dim, tail, topk = 2, 5, 300, 16, 64, 32, 128
    dq = dim + tail
    q = rn(rng, (B, S, H, dq)).astype(ml_dtypes.bfloat16)
    kv = rn(rng, (B, SKV, 1, dq)).astype(ml_dtypes.bfloat16)
    idx = np.stack([np.stack([rng.choice(SKV - S, topk, replace=False) for _ in range(S)])
                    for _ in range(B)]).astype(np.int32)[:, :, None]   # [B, S, 1, topk]
    want = np.stack([sparse_ref(q[b], kv[b, idx[b, :, 0], 0], dim, dq ** -0.5) for b in range(B)])
    k = m["sparse_attention_fwd"](heads=H, dim=dim, tail_dim=tail, topk=topk, kv_stride=1)
    return [Check(k, [q, kv, idx], {0: want}, "bfloat16", topk)]


@case("asc/lightning_indexer/dynamic_shape", A,
      "examples/lightning_indexer/example_lightning_indexer_dynamic_shape.py",
      "the lightning indexer with T.symbolic B/S1/S2 (buffers sized by MAX_S2), workspace_idx=[-3]")
def _(m, rng):
    return indexer_checks(rng, lambda B, N2, G, S1, S2, D, K:
                          m["indexer"](N2, G, D, K, 64, 4, 64, 64, 64, MAX_S2=S2))


def rms_rope_mask_check(m, rng, bsz, heads, hd, rd, eps, bm):
    """RMSNorm + interleaved rope of bsz x heads rows of head_dim hd (the last rd rotated),
    block_M bm, with the example's host-built gather offsets and sign mask."""
    from upstream_cases_held import rope_pairs
    q = rn(rng, (bsz * heads, hd), "float16")
    sin, cos = rn(rng, (bsz, rd), "float16"), rn(rng, (bsz, rd), "float16")
    idx = np.arange(rd * (bm // 2), dtype=np.int64)
    mask = np.empty(rd * (bm // 2), np.uint32)      # the example's host code
    mask[0::2], mask[1::2] = idx[1::2] * 4, idx[0::2] * 4
    mask = mask.reshape(bm // 2, rd)
    sin_mask = np.ones(rd, np.float32)
    sin_mask[0::2] = -1
    x = q.astype(f64)
    x = x / np.sqrt((x * x).mean(1, keepdims=True) + eps)
    b = np.arange(bsz * heads) // heads
    x[:, hd - rd:] = rope_pairs(x[:, hd - rd:], sin.astype(f64)[b], cos.astype(f64)[b])
    k = m["rms_rope_fused"](bsz * heads, bm, bsz, hd, rd, heads, eps)
    return [Check(k, [q, sin, cos, mask, sin_mask], {0: x}, "float16")]


@case("asc/pos_embedding/rms_rope_fused_mask", A, "examples/pos_embedding/rms_rope_fused_mask.py",
      "RMSNorm + interleaved RoPE with host-built uint32 gather offsets and a sign mask")
def _(m, rng):
    return rms_rope_mask_check(m, rng, 2, 16, 64, 32, 1e-6, 16)


@case("tl/gemm/gemm_intrinsics", TL, "examples/gemm/example_gemm_intrinsics.py",
      "GPU MMA intrinsics emitter (ldmatrix/mma per warp): expected a located error")
def _(m, rng):
    a, b = rn(rng, (128, 64), "float16"), rn(rng, (128, 64), "float16")
    fn = m["tl_matmul"]
    chk = Check(lambda a, b: fn(a, b, "float16", "float32", "float32"), [a, b],
                {0: mm(a, b.T)}, "float32", 64)
    chk.fn.kernel_for = lambda a, b: fn.kernel_for(a, b, "float16", "float32", "float32")
    return [chk]


@case("tl/rand/rand_uint", TL, "examples/rand/rand_uint.py",
      "T.rng_init / T.rng_rand: cuRAND's Philox4x32-10 stream, one generator a block "
      "(threads=1), bit-exact against a NumPy Philox")
def _(m, rng):
    from tilelang_mini.testing.references import philox_stream
    fn = m["tilelang_rand_1d"]
    checks = []
    for M, seed in ((256, 42), (200, 123)):
        def cmp(got, want):
            assert np.array_equal(got, want), "not the Philox stream"
        chk = Check(lambda M=M, seed=seed: fn(M=M, seed=seed), [],
                    {0: philox_stream(seed, 0, 0, M)}, "float32", compare=cmp)
        chk.fn.kernel_for = lambda M=M, seed=seed: fn.kernel_for(M=M, seed=seed)
        checks.append(chk)
    return checks


@case("tl/deepseek_nsa/nsa_fwd", TL, "examples/deepseek_nsa/example_tilelang_nsa_fwd.py",
      "native sparse attention: per-query selected KV blocks from GM, skip blocks past the "
      "query (`if i_s <= i_t and i_s >= 0`), causal inside a block, eager jit")
def _(m, rng):
    return [nsa_fwd_check(m, rng, 1, 128, 1, 16, 32, 3, 32, 0.1)]


def nsa_fwd_check(m, rng, B, L, H, HQ, D, S, bs, scale):
    """native_sparse_attention (causal) on B x L queries, H KV heads x HQ / H query heads of
    dim D, S selected blocks of bs keys per query: its own block first, then others."""
    G = HQ // H
    q = rn(rng, (B, L, HQ, D), "float16")
    k, v = rn(rng, (B, L, H, D), "float16"), rn(rng, (B, L, H, D), "float16")
    nb = L // bs
    idx = np.zeros((B, L, H, S), np.int32)
    for b, t, h in np.ndindex(B, L, H):  # the query's own block first, then others
        own = t // bs
        idx[b, t, h] = [own] + [x for x in rng.permutation(nb) if x != own][:S - 1]
    want = np.zeros((B, L, HQ, D))
    for b, t, h in np.ndindex(B, L, H):
        keys = [blk * bs + j for blk in idx[b, t, h] if blk * bs <= t
                for j in range(bs) if t >= blk * bs + j]
        kk, vv = k[b, keys, h].astype(f64), v[b, keys, h].astype(f64)
        s = q[b, t, h * G:(h + 1) * G].astype(f64) @ kk.T * scale
        p = np.exp(s - s.max(-1, keepdims=True))
        want[b, t, h * G:(h + 1) * G] = (p / p.sum(-1, keepdims=True)) @ vv
    fn = with_kwargs(m["native_sparse_attention"], dim=D, is_causal=True,
                     scale=scale, block_size=bs, groups=G, selected_blocks=S)
    return Check(fn, [q, k, v, idx], {0: want}, "float16", S * bs)


def sink_varlen_ref(q, k, v, cu_q, cu_k, sinks, group, causal, window=None):
    """Varlen attention whose softmax denominator also holds exp(sinks[h]) (a logit with no
    value); causal aligned on the right, optional sliding window (key j visible to query i
    when i - window < j)."""
    out = np.zeros(q.shape)
    d = q.shape[-1]
    for b in range(len(cu_q) - 1):
        qs, qe, ks, ke = cu_q[b], cu_q[b + 1], cu_k[b], cu_k[b + 1]
        i, j = np.indices((qe - qs, ke - ks))
        qi = i + (ke - ks) - (qe - qs)
        ok = np.ones(i.shape, bool)
        if causal:
            ok &= qi >= j
        if window is not None:
            ok &= j > qi - window
        for h in range(q.shape[1]):
            s = q[qs:qe, h].astype(f64) @ k[ks:ke, h // group].astype(f64).T / np.sqrt(d)
            s = np.where(ok, s, -np.inf)
            mx = np.maximum(s.max(-1, keepdims=True), float(sinks[h]))
            e = np.exp(s - mx)
            den = e.sum(-1, keepdims=True) + np.exp(float(sinks[h]) - mx)
            out[qs:qe, h] = (e / den) @ v[ks:ke, h // group].astype(f64)
    return out


@case("tl/attention_sink/gqa_sink_fwd_varlen", TL, "examples/attention_sink/example_gqa_sink_fwd_varlen.py",
      "varlen GQA with attention sinks, scalar max_seqlen_q, causal with and without a sliding window")
def _(m, rng):
    checks = []
    lq, lk = [50, 64], [90, 64]
    for window in (None, 64):
        q, k, v, cu_q, cu_k = varlen_inputs(rng, lq, lk, 4, 2, 64)
        sinks = rn(rng, (4,), "float16")
        kern = m["flashattn_sink"](2, 2, int(cu_q[-1]), int(cu_k[-1]), 4, 64, True,
                                   window_size=window)
        checks.append(Check(kern, [q, k, v, cu_q, cu_k, max(lq), sinks],
                            {0: sink_varlen_ref(q, k, v, cu_q, cu_k, sinks, 2, True, window)},
                            "float16", 154))
    return checks


@case("tl/mamba/chunk_scan", TL, "examples/linear_attention/example_mamba_chunk_scan.py",
      "@autotune above an eager @jit (every config given): intra-chunk decayed causal scores, "
      "inter-chunk states, skip term D")
def _(m, rng):
    batch, seqlen, cs, ngroups, nheads, hd, dstate = 1, 128, 64, 1, 2, 64, 128
    nc = seqlen // cs
    cb = rn(rng, (batch, nc, ngroups, cs, cs), "float16", 0.2)
    x = rn(rng, (batch, seqlen, nheads, hd), "float16")
    dt = (rng.random((batch, nheads, nc, cs)) * 0.5).astype(np.float16)
    dA = np.cumsum(-rng.random((batch, nheads, nc, cs)) * 0.05, -1).astype(np.float16)
    C = rn(rng, (batch, seqlen, ngroups, dstate), "float16", 0.2)
    prev = rn(rng, (batch, nc, nheads, hd, dstate), "float16", 0.2)
    D = rn(rng, (nheads,), "float16")
    want = np.zeros((batch, seqlen, nheads, hd))
    tri = np.tril(np.ones((cs, cs), bool))
    for c in range(nc):
        sl = slice(c * cs, (c + 1) * cs)
        for h in range(nheads):
            g = h // (nheads // ngroups)
            a = dA[0, h, c].astype(f64)
            sc = np.where(tri, cb[0, c, g].astype(f64) * np.exp(a[:, None] - a[None, :]), 0)
            intra = (sc * dt[0, h, c].astype(f64)[None, :]) @ x[0, sl, h].astype(f64)
            inter = (C[0, sl, g].astype(f64) @ prev[0, c, h].astype(f64).T) * np.exp(a)[:, None]
            want[0, sl, h] = intra + inter + x[0, sl, h].astype(f64) * float(D[h])
    fn = m["chunk_scan_fwd"]
    kw = dict(block_M=64, block_N=64, block_K=64, block_Dstate=128, num_stages=2)
    chk = Check(lambda *a: fn(*a, **kw), [cb, x, dt, dA, C, prev, D], {0: want}, "float16", cs)
    chk.fn.kernel_for = lambda *a: fn.factory.kernel_for(*a, **kw) if hasattr(fn, "factory") \
        else fn.kernel_for(*a, **kw)
    return [chk]


def block_causal_varlen_check(m, rng, lens, H, D, d):
    """The dLLM block-causal varlen forward over packed sequences of `lens`, H heads of dim D,
    blocks of d tokens: Output and its log2 LSE written in place."""
    from upstream_cases_held import block_causal_mask
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    tot = int(cu[-1])
    scale = D ** -0.5
    q, k, v = (rn(rng, (tot, H, D), "float16") for _ in range(3))
    o_want, lse_want = np.zeros((tot, H, D)), np.zeros((H, tot))
    for b, L in enumerate(lens):
        sl = slice(cu[b], cu[b + 1])
        for h in range(H):
            s = q[sl, h].astype(f64) @ k[sl, h].astype(f64).T * scale
            s = np.where(block_causal_mask(L, d), s, -np.inf)
            mx = s.max(-1, keepdims=True)
            p = np.exp(s - mx)
            o_want[sl, h] = (p / p.sum(-1, keepdims=True)) @ v[sl, h].astype(f64)
            lse_want[h, sl] = (np.log(p.sum(-1)) + mx[:, 0]) / np.log(2)
    kern = m["_fwd_varlen_template"](len(lens), H, D, d, scale, dtype="float16")
    args = [q, k, v, cu, max(lens), np.zeros((tot, H, D), np.float16), np.zeros((H, tot), np.float32)]
    return [Check(kern, args, {("arg", 5): o_want, ("arg", 6): lse_want}, "float16", max(lens))]


@case("tl/block_causal_attention/fwd_varlen", TL,
      "examples/block_causal_attention/block_causal_attention_varlen.py",
      "dLLM block-causal attention over packed sequences: T.dynamic total_tokens plus the "
      "scalar max_seqlen, in-place Output and LSE (log2)")
def _(m, rng):
    return block_causal_varlen_check(m, rng, [128, 256], 1, 64, 16)


def chunk_cumsum_ref(g, C):
    B, H, L = g.shape
    return np.cumsum(g.astype(f64).reshape(B, H, L // C, C), -1).reshape(B, H, L)


@case("asc/gdn/chunk_cumsum", A, "examples/linear_attention_and_rnn/gdn/gdn_chunk_cumsum.py",
      "per-chunk cumulative sums of the gates, rows split over the two vector cores")
def _(m, rng):
    g = rn(rng, (2, 4, 256), scale=0.1)
    return [Check(m["cumsum_ker"](2, 4, 256, 64), [g], {0: chunk_cumsum_ref(g, 64)}, reduce_len=64)]


@case("asc/opt_gdn/chunk_cumsum", A, "examples/linear_attention_and_rnn/opt_gdn/opt_gdn_chunk_cumsum.py",
      "per-chunk cumulative sums, CC rows at a time")
def _(m, rng):
    g = rn(rng, (2, 4, 256), scale=0.1)
    return [Check(m["cumsum_ker"](2, 4, 256, 64), [g], {0: chunk_cumsum_ref(g, 64)}, reduce_len=64)]


@case("asc/gdn/chunk_scaled_dot_kkt", A, "examples/linear_attention_and_rnn/gdn/gdn_chunk_scaled_dot_kkt.py",
      "developer mode: K K^T on the cube through a workspace, gated by beta and exp(g_i - g_j), "
      "strictly lower mask tensor")
def _(m, rng):
    B, H, L, DK, C, BK = 1, 2, 128, 64, 32, 32
    k = rn(rng, (B, H, L, DK), "float16", 0.5)
    beta = rn(rng, (B, H, L), "float16")
    g = np.cumsum(-rng.random((B, H, L)) * 0.1, -1).astype(np.float32)
    msk = np.tril(np.ones((C, C)), -1).astype(np.float32)
    want = np.zeros((B, H, L, C))
    for c in range(L // C):
        sl = slice(c * C, (c + 1) * C)
        kk = k[:, :, sl].astype(f64)
        a = np.einsum("bhid,bhjd->bhij", kk, kk) * beta[:, :, sl, None].astype(f64)
        a *= np.exp(g[:, :, sl, None].astype(f64) - g[:, :, None, sl].astype(f64))
        want[:, :, sl] = a * np.tril(np.ones((C, C)), -1)
    return [Check(m["kkt_ker"](B, H, L, DK, C, BK), [k, beta, g, msk], {0: want}, "float16", DK)]


@case("asc/gdn/chunk_o", A, "examples/linear_attention_and_rnn/gdn/gdn_chunk_o.py",
      "expert C/V with cross flags: exp(g)-scaled Q S plus the gated causal (Q K^T) V, three "
      "workspaces")
def _(m, rng):
    return asc_chunk_o_checks(m, rng, 1, 2, 128, 64, 64, 32, 32, 32)


def asc_chunk_o_checks(m, rng, B, H, L, DK, DV, C, BK, BV):
    """chunk_o_ker(B, H, L, DK, DV, C, BK, BV) of the tilelang-ascend GDN chunk_o examples."""
    q, k = rn(rng, (B, H, L, DK), "float16", 0.3), rn(rng, (B, H, L, DK), "float16", 0.3)
    v = rn(rng, (B, H, L, DV), "float16")
    nc = L // C
    s = rn(rng, (B, H, nc, DK, DV), "float16", 0.3)
    g = np.cumsum(-rng.random((B, H, L)) * 0.1, -1).astype(np.float32)
    msk = np.tril(np.ones((C, C))).astype(np.float32)
    want = np.zeros((B, H, L, DV))
    for c in range(nc):
        sl = slice(c * C, (c + 1) * C)
        qc, kc, vc, gc = (x[:, :, sl].astype(f64) for x in (q, k, v, g))
        t1 = np.exp(gc)[..., None] * (qc @ s[:, :, c].astype(f64))
        qk = (qc @ np.swapaxes(kc, -1, -2)) * np.exp(gc[..., :, None] - gc[..., None, :]) * msk
        qk = qk.astype(np.float16).astype(f64)   # the kernel's float16 workspace_3
        want[:, :, sl] = t1 + qk @ vc
    return [Check(m["chunk_o_ker"](B, H, L, DK, DV, C, BK, BV), [q, k, v, s, g, msk], {0: want},
                  "float16", C)]
