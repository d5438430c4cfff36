"""Illegal calls of the kernel library (the `library` family, one case in four): a legal call
with one argument made wrong (a shape that disagrees, a dtype, an option out of range, an array
of the wrong rank, an unknown expression). Each must be refused with a ValueError or a
TileLangMiniError raised by tilelang_mini's own checks, never an internal error, an error from
NumPy's or Python's internals, or a run (library_call.judge_illegal)."""
from __future__ import annotations

from .case import Tensor
from .gen_library import BF, E4, F32, _nan_output, _run, library_case


def _gemm(d, what):
    M, N, K = d.dim(1, 100), d.dim(1, 100), d.dim(1, 200)
    if what == "empty":  # an empty M or K (the kernels take no 0-extent tensors)
        M, K = d.choice([(0, K), (M, 0)])
    ka, kb, dshape, cshape = K, K, [M, N], None
    d_expr = _nan_output(dshape, F32)
    kw = ""
    if what == "k_mismatch":
        kb = K + d.choice([1, 16, 128])
    elif what == "d_shape":
        d_expr = _nan_output([M, N + d.int(1, 3)], F32)
    elif what == "d_dtype":
        d_expr = f"np.zeros(({M}, {N}), np.{d.choice(['int32', 'float16', 'float64'])})"
    elif what == "c_shape":
        cshape = [M + 1, N]
        kw = "c=C"
    tensors = [Tensor("A", [M, ka], BF), Tensor("B", [N, kb], BF)]
    if what == "a_rank":
        tensors[0] = Tensor("A", [2, M, ka], BF)
    if what == "b_rank":
        tensors[1] = Tensor("B", [N * kb], BF)
    if cshape:
        tensors.append(Tensor("C", cshape, F32))
    return tensors, [f"d = {d_expr}", _run("dg.bf16_gemm_nt", "A, B, d", kw)]


def _fp8(d, what):
    M, N, K = d.dim(1, 100), d.dim(1, 100), d.dim(1, 300)
    KB = -(-K // 128)
    sfa, sfb, kw = [M, KB], [N, KB], ""
    if what == "sfa_shape":
        sfa = d.choice([[M, KB + 1], [M + 1, KB], [M]])
    elif what == "recipe":
        kw = f"recipe={d.choice(['(1, 64, 64)', '(2, 2, 2)', '(1, 128, 64)'])}"
    tensors = [Tensor("A", [M, K], E4), Tensor("sfA", sfa, F32, 0.1, 1.0), Tensor("B", [N, K], E4),
               Tensor("sfB", sfb, F32, 0.1, 1.0)]
    body = [f"d = {_nan_output([M, N], F32)}"]
    if what == "mixed_scales":
        body.append("sfB = sfB.astype(np.uint16)")
    if what == "packed_910b":  # UE8M0 pairs (made for the 950) on the 910b, whose cube has no MX
        body += [f"sfA = dg.transform_sf_into_required_layout(np.ones(({M}, {KB}), np.float32), "
                 f"{M}, {K}, (1, 128, 128), is_sfa=True, chip='ascend950')",
                 f"sfB = dg.transform_sf_into_required_layout(np.ones(({N}, {KB}), np.float32), "
                 f"{N}, {K}, (1, 1, 128), chip='ascend950')"]
    return tensors, body + [_run("dg.fp8_gemm_nt", "(A, sfA), (B, sfB), d", kw)]


def _grouped(d, what):
    G, N, K, M = d.int(1, 3), d.dim(1, 64), d.dim(1, 100), 128 * d.int(1, 2)
    rows = M - d.int(1, 5) if what == "layout_length" else M
    tensors = [Tensor("A", [M, K], BF), Tensor("Bw", [N, K] if what == "b_rank" else [G, N, K], BF)]
    group = G + d.int(0, 3) if what == "layout_group" else 0
    body = [f"layout = np.full({rows}, {group}, np.int32)", f"d = {_nan_output([M, N], F32)}",
            _run("dg.m_grouped_bf16_gemm_nt_contiguous", "A, Bw, d, layout")]
    if what in ("masked_length", "masked_rows"):
        tensors[0] = Tensor("A", [G, M, K], BF)
        masked = (f"np.zeros({G + 1}, np.int32)" if what == "masked_length"
                  else f"np.full({G}, {M + d.int(1, 100)}, np.int32)")
        body = [f"masked = {masked}", f"d = {_nan_output([G, M, N], F32)}",
                _run("dg.m_grouped_bf16_gemm_nt_masked", "A, Bw, d, masked")]
    return tensors, body


def _hc(d, what):
    M, N, K = d.dim(1, 40), 24, d.dim(1, 300)
    tensors = [Tensor("A", [M * K] if what == "a_rank" else [M, K], BF), Tensor("Bw", [N, K], F32)]
    splits = d.choice([0, -1]) if what == "splits" else "None"
    sq = [M + 1] if what == "sqr_shape" else [M]
    return tensors, [f"d = {_nan_output([M, N], F32)}", f"s = {_nan_output(sq, F32)}",
                     _run("dg.tf32_hc_prenorm_gemm", "A, Bw, d, s", f"num_splits={splits}")]


def _topk(d, what):
    R, N = d.dim(1, 8), d.dim(1, 300)
    shape = {"x_rank1": [N], "x_rank3": [2, R, N], "empty": [0, N]}.get(what, [R, N])
    k = {"k_zero": 0, "k_big": N + d.int(1, 5), "k_negative": -d.int(1, 3)}.get(what, 1)
    return [Tensor("X", shape, F32)], [_run("topk", f"X, {k}")]


def _einsum(d, what):
    B, H, K, N = d.dim(1, 8), d.int(1, 3), d.dim(1, 64), d.dim(1, 64)
    if what == "expr":
        expr = d.choice(["ij,jk->ik", "bhr,hdr->bdh", "bmk,bkn->mn"])
        return ([Tensor("A", [B, H, K], BF), Tensor("Bw", [H, N, K], BF)],
                [f"d = {_nan_output([B, H, N], BF)}", _run("dg.einsum", f"'{expr}', A, Bw, d")])
    if what == "f32_without_c":
        return ([Tensor("A", [B, H, K], BF), Tensor("Bw", [B, N, K], BF)],
                [f"d = {_nan_output([H, N], F32)}", _run("dg.einsum", "'bmk,bnk->mn', A, Bw, d")])
    return ([Tensor("A", [B, H, K], BF), Tensor("Bw", [H, N + 1, K + 1], BF)],
            [f"d = {_nan_output([B, H, N], BF)}", _run("dg.einsum", "'bhr,hdr->bhd', A, Bw, d")])


def _mhc(d, what):
    Tn, n, C = d.dim(1, 8), d.choice([2, 4]), d.dim(1, 100)
    if what in ("sinkhorn_square", "sinkhorn_rank", "sinkhorn_repeat", "sinkhorn_empty"):
        shape = {"sinkhorn_square": [Tn, n, n + 1], "sinkhorn_rank": [n, n],
                 "sinkhorn_empty": [0, n, n]}.get(what, [Tn, n, n])
        rep = d.choice([0, -1]) if what == "sinkhorn_repeat" else 20
        return [Tensor("X", shape, F32)], [_run("mhc.sinkhorn", "X", f"repeat={rep}")]
    if what in ("pre_rank", "pre_repeat"):
        N = n * (n + 2)
        rep = d.choice([0, -2]) if what == "pre_repeat" else 20
        return ([Tensor("Res", [Tn, n * C] if what == "pre_rank" else [Tn, n, C], BF),
                 Tensor("Fn", [N, n * C], F32), Tensor("Sc", [3], F32), Tensor("Base", [N], F32)],
                [_run("mhc.mhc_pre", "Res, Fn, Sc, Base", f"sinkhorn_repeat={rep}")])
    comb = [Tn, n, n + 1] if what == "comb_shape" else [Tn, n, n]
    x = [Tn, C + 1] if what == "x_shape" else [Tn, C]
    res = [Tn, n * C] if what == "post_rank" else [Tn, n, C]
    return ([Tensor("X", x, BF), Tensor("Res", res, BF), Tensor("Post", [Tn, n], F32),
             Tensor("Comb", comb, F32)], [_run("mhc.mhc_post", "X, Res, Post, Comb")])


def _mqa(d, what):
    S, H, D, SK = d.dim(1, 8), d.int(1, 4), d.choice([32, 64]), d.dim(1, 100)
    kvd = D + 16 if what == "kv_dim" else D
    w = [S, H + 1] if what == "weights_shape" else [S, H]
    kw = f"max_seqlen_k={d.int(1, 9)}" if what == "max_seqlen_k" else ""
    q = [S * H, D] if what == "q_rank" else [S, H, D]
    return ([Tensor("Q", q, E4), Tensor("KV", [SK, kvd], E4), Tensor("SF", [SK], F32),
             Tensor("W", w, F32)],
            [f"ks, ke = np.zeros({S}, np.int32), np.full({S}, {SK}, np.int32)",
             _run("dg.fp8_mqa_logits", "Q, (KV, SF), W, ks, ke", kw)])


def _quant(d, what):
    M, N = d.dim(1, 40), d.dim(1, 300)
    shape = {"x_rank1": [N], "x_rank3": [2, M, N], "empty": [M, 0]}.get(what, [M, N])
    gran = d.choice([0, -128]) if what == "gran" else 128
    fn = "dg.per_token_cast_to_fp8"
    if what == "fp4_odd":
        fn, shape = "dg.per_token_cast_to_fp4", [M, 2 * (N // 2) + 1]
    return [Tensor("X", shape, F32)], [_run(fn, "X", f"gran_k={gran}")]


def _moe(d, what):
    Tn, H, I, E, K = d.dim(1, 8), d.dim(16, 64), d.dim(16, 48), d.int(1, 3), 1
    w = [Tn, K + 1] if what == "weights_shape" else [Tn, K]
    l1 = [2 * I, H] if what == "l1_rank" else [E, 2 * I, H]
    idx = f"np.full({Tn}, {E + d.int(0, 2) if what == 'expert' else 0}, np.int32)"
    return ([Tensor("X", [Tn, H], BF), Tensor("Wt", w, F32, 0.0, 1.0), Tensor("L1", l1, BF),
             Tensor("L2", [E, H, I], BF)],
            [f"idx = {idx}" + ("" if what == "idx_rank" else f".reshape({Tn}, 1)"),
             f"y = {_nan_output([Tn, H], BF)}", _run("dg.bf16_mega_moe", "X, idx, Wt, L1, L2, y")])


def _mla(d, what):
    B, HQ, D, MAXB = d.int(1, 2), d.choice([1, 16]), d.choice([64, 576]), d.int(1, 2)
    NB = B * MAXB
    seq = [d.int(1, MAXB * 64) for _ in range(B)]
    if what == "seqlen_long":
        seq[-1] = MAXB * 64 + d.int(1, 64)
    bt = f"np.arange({NB}, dtype=np.int32).reshape({B}, {MAXB})"
    if what == "block_oob":
        bt = f"np.full(({B}, {MAXB}), {NB + d.int(0, 3)}, np.int32)"
    elif what == "bt_rank":
        bt = f"np.arange({NB}, dtype=np.int32)"
    dv = {"dv_big": D + d.int(1, 64), "dv_zero": 0}.get(what, min(D, 512))
    parts = d.choice([0, -1]) if what == "parts" else "None"
    return ([Tensor("Q", [B, 1, HQ, D], BF), Tensor("KC", [NB, 64, 1, D], BF)],
            [f"seqlens = np.array({seq!r}, np.int32)", f"bt = {bt}",
             _run("fm.get_mla_metadata", f"seqlens, {HQ}, 1", f"num_parts={parts}",
                  lhs="meta, splits"),
             _run("fm.flash_mla_with_kvcache", f"Q, KC, bt, seqlens, {dv}, meta, splits")])



def _fp4(d, what):
    """FP4 GEMMs: an MN-major FP4 operand of odd MN (it is packed along MN), UE8M0 pairs on the
    910b, UE8M0 pairs with FP4 outside the nt layout, a K the packing disagrees with."""
    M, N, K = d.dim(1, 60), d.dim(1, 60), 128 * d.int(1, 2)
    layout = {"odd_mn": "tn", "packed_layout": d.choice(["nn", "tn", "tt"])}.get(what, "nt")
    if what == "odd_mn":
        M += 1 - M % 2
    a = [K, M // 2 + M % 2] if layout[0] == "t" else [M, K // 2]
    b = [K, N // 2 + N % 2] if layout[1] == "n" else [N, K // 2 + (d.int(1, 3) if what == "k_packing" else 0)]
    tensors = [Tensor("A", a, "int8", -128, 127), Tensor("B", b, "int8", -128, 127)]
    body = [f"sfa, sfb = np.ones(({M}, {K // 32}), np.float32), np.ones(({N}, {K // 32}), np.float32)"]
    if what in ("packed_910b", "packed_layout"):
        body += [f"sfa = dg.transform_sf_into_required_layout(sfa, {M}, {K}, (1, 32), chip='ascend950')",
                 f"sfb = dg.transform_sf_into_required_layout(sfb, {N}, {K}, (1, 32), chip='ascend950')"]
    return tensors, body + [f"d = {_nan_output([M, N], F32)}",
                            _run(f"dg.fp8_fp4_gemm_{layout}", "(A, sfa), (B, sfb), d")]


def _paged(d, what):
    B, NN, H, D, BKV, MAXB = d.int(1, 2), d.int(1, 2), d.int(1, 4), 32, 16, 2
    kvd = D + 4 + (d.choice([-4, 1, 8]) if what == "kv_bytes" else 0)
    w = [B * NN, H + 1] if what == "weights_shape" else [B * NN, H]
    lens = B + 1 if what == "lens_shape" else B
    L = '"64"' if what == "max_len_str" else str(MAXB * BKV)
    return ([Tensor("Q", [B, NN, H, D], E4), Tensor("KV", [B * MAXB, BKV, 1, kvd], "int32", 0, 255),
             Tensor("W", w, F32)],
            [f"lens = np.full({lens}, {BKV}, np.int32)", "kv = KV.astype(np.uint8)",
             f"bt = np.arange({B * MAXB}, dtype=np.int32).reshape({B}, {MAXB})",
             _run("dg.get_paged_mqa_logits_metadata", f"lens, {BKV}, 4", lhs="meta"),
             _run("dg.fp8_paged_mqa_logits", f"Q, kv, W, lens, bt, meta, {L}")])


def _sparse(d, what):
    """Sparse decoding on the FP8 cache: two KV heads, no indices, causal, a cache row of the
    wrong width, extra indices without an extra cache."""
    B, HQ, NT = 1, d.choice([1, 16]), 64
    hk = 2 if what == "two_kv_heads" else 1
    row = 656 + (d.choice([-16, 8]) if what == "row_bytes" else 0)
    kw = {"no_indices": "is_fp8_kvcache=True", "causal": "is_fp8_kvcache=True, indices=Idx, causal=True",
          "extra_alone": "is_fp8_kvcache=True, indices=Idx, extra_indices_in_kvcache=Idx"}.get(
              what, "is_fp8_kvcache=True, indices=Idx")
    return ([Tensor("Q", [B, 1, HQ * hk, 576], BF), Tensor("KC", [1, NT, hk, row], "int32", 0, 120),
             Tensor("Idx", [B, 1, 8], "int32", -1, NT - 1)],
            [_run("fm.flash_mla_with_kvcache",
                  "Q, KC.astype(np.uint8), None, None, 512, fm.get_mla_metadata()[0], None", kw)])


def _nonint(d, what):
    """An integer argument given as a string or a non-integral float."""
    bad = d.choice(["'a'", "'3'", "2.5", "None"] if what != "topk_k" else ["'a'", "'3'", "2.5"])
    if what == "topk_k":
        return [Tensor("X", [d.dim(1, 8), d.dim(4, 100)], F32)], [_run("topk", f"X, {bad}")]
    if what == "sinkhorn_repeat":
        return [Tensor("X", [d.dim(1, 8), 4, 4], F32)], [_run("mhc.sinkhorn", "X", f"repeat={bad}")]
    return [Tensor("X", [d.dim(1, 8), d.dim(1, 100)], F32)], \
        [_run("dg.per_token_cast_to_fp8", "X", f"gran_k={bad}")]


BAD = {
    "gemm": (_gemm, ("k_mismatch", "d_shape", "d_dtype", "c_shape", "a_rank", "b_rank",
                     "empty")),
    "fp8_gemm": (_fp8, ("sfa_shape", "recipe", "mixed_scales", "packed_910b")),
    "m_grouped": (_grouped, ("layout_length", "b_rank", "masked_length", "layout_group",
                             "masked_rows")),
    "hc_prenorm": (_hc, ("splits", "sqr_shape", "a_rank")),
    "topk": (_topk, ("x_rank1", "x_rank3", "k_zero", "k_big", "k_negative", "empty")),
    "einsum": (_einsum, ("expr", "f32_without_c", "b_shape")),
    "mhc": (_mhc, ("sinkhorn_square", "sinkhorn_rank", "sinkhorn_repeat", "sinkhorn_empty", "pre_rank",
                   "pre_repeat", "comb_shape", "x_shape", "post_rank")),
    "mqa_logits": (_mqa, ("kv_dim", "weights_shape", "max_seqlen_k", "q_rank")),
    "mega_moe": (_moe, ("weights_shape", "l1_rank", "expert", "idx_rank")),
    "flash_mla": (_mla, ("seqlen_long", "block_oob", "bt_rank", "dv_big", "dv_zero", "parts")),
    "quant": (_quant, ("x_rank1", "x_rank3", "gran", "fp4_odd", "empty")),
    "fp4_gemm": (_fp4, ("odd_mn", "packed_910b", "packed_layout", "k_packing")),
    "paged_mqa": (_paged, ("kv_bytes", "weights_shape", "lens_shape", "max_len_str")),
    "sparse_mla": (_sparse, ("two_kv_heads", "no_indices", "causal", "row_bytes", "extra_alone")),
    "nonint": (_nonint, ("topk_k", "sinkhorn_repeat", "gran_k")),
}


def gen_library_bad(d, seed, chip):
    kind = d.choice(list(BAD))
    gen, whats = BAD[kind]
    what = d.choice(whats)
    tensors, body = gen(d, what)
    chip = "ascend910b" if what == "packed_910b" else chip
    if what == "packed_layout":  # (the 910b refuses the pairs for another reason)
        chip = "ascend950"
    return library_case(seed, f"bad_{kind}", tensors, body, [], {}, {f"illegal_{what}"}, chip,
                        illegal=f"{kind}: {what}")
