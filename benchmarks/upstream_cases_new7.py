"""Sweep cases added in the dialect10b session: TileLang example kernels no other case file read
(KDA chunk kernels, GDN backward, sparse MLA variants, persistent MLA decode, ...). Host code
and float64 references are written here from each operation's meaning; the kernels are the
examples' own, read from the mirror at run time by upstream_sweep.py."""
from functools import partial

import numpy as np

from upstream_sweep import Check, case, rn, with_kwargs
from upstream_cases_new import TL, f64
from upstream_cases_new3 import (CHUNK_DIMS, chunk_matrix, chunk_rows, delta_h_inputs,
                                 delta_h_ref, gdn_gates, per_chunk, wy_inputs, wy_ref)

KDA = "examples/kda/"


def varlen_gqa_grads(grads, q, k, v, do, cu, nc):
    """float64 GQA attention and its gradients on packed variable-length sequences (rows
    cu[b]:cu[b + 1] of q (U, H, D), k/v (U, HK, D)), one sequence at a time: `grads(q, k, v, do)`
    on (1, H, L, D) views returns (o, lse, delta, dq, dk, dv, *more per-row results). Gives o,
    dq, dk, dv per token (dk/dv summed over the query heads of each K/V head) and the per-row
    results [lse, delta, *more] as (B, H, nc) arrays, zero past each sequence's length."""
    H, HK = q.shape[1], k.shape[1]
    g, B = H // HK, len(cu) - 1
    o, dq = np.zeros(q.shape[:2] + v.shape[2:]), np.zeros(q.shape)
    dk, dv = np.zeros(k.shape), np.zeros(v.shape)
    rows = None
    t = lambda x: np.swapaxes(x, 0, 1)[None]  # noqa: E731  (L, H, D) -> (1, H, L, D)
    for b in range(B):
        r, L = slice(cu[b], cu[b + 1]), int(cu[b + 1] - cu[b])
        res = grads(t(q[r]), np.repeat(t(k[r]), g, 1), np.repeat(t(v[r]), g, 1), t(do[r]))
        per_row = (res[1], res[2], *res[6:])
        rows = rows or [np.zeros((B, H, nc)) for _ in per_row]
        o[r], dq[r] = np.swapaxes(res[0][0], 0, 1), np.swapaxes(res[3][0], 0, 1)
        dk[r] = np.swapaxes(res[4][0].reshape(HK, g, L, -1).sum(1), 0, 1)
        dv[r] = np.swapaxes(res[5][0].reshape(HK, g, L, -1).sum(1), 0, 1)
        for out, x in zip(rows, per_row):
            out[b, :, :L] = x[0]
    return o, dq, dk, dv, rows


def varlen_gqa_problem(rng, lens, H, HK, DQK, DV, NC, causal):
    """Packed float16 q/do (U, H, .) and k/v (U, HK, .) for sequences of `lens`, their
    cu_seqlens, and varlen_gqa_grads of causal (or full) attention: (cu, q, k, v, do, grads)."""
    from upstream_cases_new2 import attn_grads
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    U = int(cu[-1])
    q, do = rn(rng, (U, H, DQK), "float16"), rn(rng, (U, H, DV), "float16")
    k, v = rn(rng, (U, HK, DQK), "float16"), rn(rng, (U, HK, DV), "float16")
    grads = varlen_gqa_grads(lambda *a: attn_grads(*a, causal), q, k, v, do, cu, NC)
    return cu, q, k, v, do, grads


def kda_gates(rng, B, S, H, DK, chunk):
    """Per-channel cumulative log2-gates (B, S, H, DK), restarting at every chunk (as the KDA
    chunk kernels take them): within a chunk they decrease along S."""
    g = -rng.random((B, S, H, DK)) * 0.1
    g = g.reshape(B, S // chunk, chunk, H, DK).cumsum(2).reshape(B, S, H, DK)
    return g.astype(np.float32)


@case("tl/kda/chunk_o", TL, KDA + "chunk_o.py",
      "KDA chunk output: per-channel gated queries times the chunk state plus the causal "
      "intra-chunk A @ V, autotune factory with every config given")
def _(m, rng):
    B, S, H, DK, DV, BS = CHUNK_DIMS
    q, v = rn(rng, (B, S, H, DK), "float16", 0.5), rn(rng, (B, S, H, DV), "float16", 0.5)
    a = chunk_matrix(rng, B, S, H, BS)
    hid = rn(rng, (B, S // BS, H, DK, DV), "float16", 0.3)
    g = kda_gates(rng, B, S, H, DK, BS)
    scale = DK ** -0.5

    def rows(b, h, c, r):   # gated queries times the chunk state, plus tril(A) @ V
        gq = q[b, r, h].astype(f64) * scale * np.exp2(g[b, r, h].astype(f64))
        return gq @ hid[b, c, h].astype(f64) + np.tril(a[b, r, h].astype(f64)) @ v[b, r, h]
    want = per_chunk((B, S, H, DV), BS, rows)
    kern = m["tilelang_chunk_fwd_o"](B, S, H, DK, DV, "float16", "float16", "float32", "float32",
                                     BS, scale, BS, 32, 32, 128, 1)
    return [Check(kern, [q, v, g, a, hid], {0: want}, "float16", DK + BS)]


def kda_wy_checks(m, rng, dims):
    """KDA recompute W/U at dims = (B, S, H, DK, DV, BS)."""
    B, S, H, DK, DV, BS = dims
    k, v, beta, g, a = wy_inputs(rng, kda_gates(rng, B, S, H, DK, BS), DK, DV, BS)
    w, u = wy_ref(k, v, beta, a, BS, lambda b, h, r: np.exp2(g[b, r, h].astype(f64)))
    kg = per_chunk(k.shape, BS, lambda b, h, c, r:   # keys gated against the chunk's last gate
                   k[b, r, h] * np.exp2(g[b, r.stop - 1, h].astype(f64)[None, :] - g[b, r, h]))
    kern = m["tilelang_recompute_w_u_fwd"](B, S, H, DK, DV, "float16", "float16", "float32",
                                           "float32", BS, False, True, BS, 32, 32, 128, 1)
    return [Check(kern, [k, v, beta, g, a], {0: w, 1: u, 3: kg}, "float16", BS)]


@case("tl/kda/wy_fast", TL, KDA + "wy_fast.py",
      "KDA recompute W/U: beta-scaled operands, per-channel exp2 gates, gated keys against the "
      "chunk's last gate (use_kg); four outputs, one never written (QG)")
def _(m, rng):
    return kda_wy_checks(m, rng, CHUNK_DIMS)


@case("tl/kda/chunk_delta_h_fwd", TL, KDA + "chunk_delta_h_fwd.py",
      "KDA state recurrence over chunks: per-channel decay of the state rows by the chunk's "
      "last gate (a GM row into a 1-D tile), transpose_A gemm, three outputs")
def _(m, rng):
    B, S, H, DK, DV, BS = CHUNK_DIMS
    k, w, u, g, h0 = delta_h_inputs(rng, kda_gates(rng, B, S, H, DK, BS), DK, DV)

    def step(st, vn, b, h, c, r):   # per-channel decay of the state rows by the last gate
        return st * np.exp2(g[b, r.stop - 1, h].astype(f64))[:, None], vn
    hs, final, vnew = delta_h_ref(k, w, u, h0, BS, step)
    kern = m["tilelang_chunk_gated_delta_rule_fwd_h"](
        B, S, H, DK, DV, "float16", "float16", "float32", "float32", "float32", BS, True, True,
        True, True, 64, 32, 128, 1)
    return [Check(kern, [k, w, u, g, h0], {0: hs, 1: final, 2: vnew}, "float16", DK * 2)]


@case("tl/kda/chunk_intra_token_parallel", TL, KDA + "chunk_intra_token_parallel.py",
      "KDA intra-chunk scores, one block per token: a run-time trip count (the token's place in "
      "its sub-chunk), row sums into a column chosen at run time, a guarded column copy")
def _(m, rng):
    B, S, H, DK, CS, SCS = 1, 64, 2, 64, 32, 16
    q, k = rn(rng, (B, S, H, DK), "float16", 0.5), rn(rng, (B, S, H, DK), "float16", 0.5)
    g = kda_gates(rng, B, S, H, DK, CS)
    beta = rng.random((B, S, H)).astype(np.float16)
    aqk, akk = np.zeros((B, S, H, CS)), np.zeros((B, S, H, SCS))
    for b, t, h in np.ndindex(B, S, H):
        start = t // SCS * SCS
        kb = (k[b, t, h].astype(f64) * beta[b, t, h]).astype(np.float16).astype(f64)
        for j in range(start, t + 1):
            kj = k[b, j, h].astype(f64) * np.exp2(g[b, t, h].astype(f64) - g[b, j, h])
            aqk[b, t, h, j % CS] = q[b, t, h].astype(f64) @ kj
            if j < t:
                akk[b, t, h, j - start] = kb @ kj
    kern = m["tilelang_chunk_kda_fwd_intra_token_parallel"](
        B, S, H, DK, "float16", "float16", "float32", "float32", CS, SCS, 1, 32, 1)
    return [Check(kern, [q, k, g, beta], {0: aqk, 1: akk}, "float16", DK)]


@case("tl/kda/chunk_bwd_dv", TL, KDA + "chunk_bwd_dv.py",
      "KDA backward dv = tril(A)^T @ dO per chunk: an if_then_else mask on a shared tile, "
      "transpose_A gemm with clear_accum")
def _(m, rng):
    B, S, H, DV, BS = 1, 128, 2, 128, 64
    do = rn(rng, (B, S, H, DV), "float16", 0.5)
    a = chunk_matrix(rng, B, S, H, BS)
    want = per_chunk((B, S, H, DV), BS,
                     lambda b, h, c, r: np.tril(a[b, r, h].astype(f64)).T @ do[b, r, h])
    kern = m["tilelang_chunk_bwd_kernel_dv_local"](B, S, H, DV, "float16", "float16", "float16",
                                                   BS, 64, 128, 1)
    return [Check(kern, [do, a], {0: want}, "float16", BS)]


@case("tl/kda/chunk_bwd_gla_dA", TL, KDA + "chunk_bwd_gla_dA.py",
      "KDA backward dA = scale * tril(dO @ V^T) per chunk: a gemm accumulated over DV blocks, "
      "then masked and scaled in place")
def _(m, rng):
    B, S, H, DV, BS = 1, 128, 2, 128, 64
    do, v = rn(rng, (B, S, H, DV), "float16", 0.5), rn(rng, (B, S, H, DV), "float16", 0.5)
    scale = 0.125
    want = per_chunk((B, S, H, BS), BS,
                     lambda b, h, c, r: np.tril(do[b, r, h].astype(f64) @ v[b, r, h].T) * scale)
    kern = m["tilelang_chunk_bwd_kernel_dv_local"](B, S, H, DV, scale, "float16", "float32",
                                                   "float16", BS, 64, 128, 1)
    return [Check(kern, [do, v], {0: want}, "float32", DV, tol=(2e-3, 2e-3))]


@case("tl/deepseek_mla/mla_decode_persistent", TL,
      "examples/deepseek_mla/example_mla_decode_persistent.py",
      "persistent split-KV MLA decode: waves of tiles over driver.get_num_sms() blocks, "
      "T.sync_grid() between the split pass and the log-sum-exp combine (two launches)")
def _(m, rng):
    from upstream_cases_tl import mla_decode_checks
    return mla_decode_checks(m, rng, 2, 32, 256, 64, 32, 64, (2,), scale_arg=False, scratch=True)


def dsa_inputs(rng, lens, heads, dq, topk, dtype):
    """Varlen DSA inputs: packed tokens of sequences `lens`, offsets, (sequence, position)
    per token, and per token `topk` KV positions of its own sequence (relative to its start):
    some causal (<= position, the position itself always among them), some past it, some -1
    (both masked); also the valid mask, gathered rows, masked scores (scale dq^-0.5) and
    their natural log-sum-exp."""
    offs = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    tok = np.array([(b, s) for b, n in enumerate(lens) for s in range(n)], np.int32)
    T_ = int(offs[-1])
    q = rn(rng, (T_, heads, dq)).astype(dtype)
    kv = rn(rng, (T_, 1, dq)).astype(dtype)
    idx = np.full((T_, 1, topk), -1, np.int32)
    for t, (b, s) in enumerate(tok):
        ids = rng.permutation(lens[b])[:topk - 2]
        ids = np.concatenate([[s], ids[ids != s], [lens[b] - 1]])[:topk]
        idx[t, 0, :len(ids)] = ids
    valid = (idx[:, 0] <= tok[:, 1:2]) & (idx[:, 0] != -1)
    rows = kv[offs[tok[:, 0]][:, None] + np.maximum(idx[:, 0], 0), 0]  # [T, topk, dq]
    s = np.einsum("thd,tkd->thk", q.astype(f64), rows.astype(f64)) * dq ** -0.5
    s = np.where(valid[:, None, :], s, -np.inf)                          # scaled scores
    mx = s.max(-1)
    lse = np.log(np.exp(s - mx[..., None]).sum(-1)) + mx
    return q, kv, idx, offs, tok, valid, rows, s, lse


def dsa_setup(m, name, rng, lens, topk, H=16, dim=64, tail=32):
    """dsa_inputs for the eager kernel `name` and that kernel bound to its keyword arguments."""
    import ml_dtypes
    ins = dsa_inputs(rng, lens, H, dim + tail, topk, ml_dtypes.bfloat16)
    return ins, with_kwargs(m[name], heads=H, dim=dim, tail_dim=tail, topk=topk)


@case("tl/dsa_sparse_finetune/sparse_mla_fwd", TL, "examples/dsa_sparse_finetune/sparse_mla_fwd.py",
      "eager varlen sparse MLA forward: per-token sequence offsets read from GM, KV rows "
      "gathered through relative indices (-1 and future positions masked by a bool tile)")
def _(m, rng):
    from upstream_cases_cv import sparse_ref
    (q, kv, idx, offs, tok, valid, rows, _, lse), fn = dsa_setup(m, "sparse_mla_fwd", rng,
                                                                 (5, 11), 32)
    want = sparse_ref(q, rows, 64, 96 ** -0.5, valid)
    return [Check(fn, [q, kv, idx, offs, tok], {0: want, 1: lse}, "bfloat16", 32)]


@case("tl/dsa_sparse_finetune/sparse_mla_topk_reducesum", TL,
      "examples/dsa_sparse_finetune/sparse_mla_topk_reducesum.py",
      "eager varlen: attention probabilities of the selected KV rows from a given log-sum-exp, "
      "summed over heads (reduce_sum over dim 0) into a column block of the output")
def _(m, rng):
    (q, kv, idx, offs, tok, _, _, s, lse), fn = dsa_setup(
        m, "tl_sparse_mla_topk_reducesum_impl", rng, (6, 9), 64)
    lse = lse.astype(np.float32)
    want = np.exp(s - lse[..., None].astype(f64)).sum(1)[:, None, None, :]   # [T, 1, 1, topk]
    return [Check(fn, [q, kv, idx, lse, offs, tok], {0: want}, "float32", 96,
                  tol=(2e-2, 2e-2))]


def indexer_topk_checks(m, rng, lens, H, D, topk):
    """The varlen indexer top-k over packed sequences of `lens`, H heads of dim D: the selected
    key set per token (any order) and the softmax of the top-k logits."""
    offs = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    tok = np.array([(b, s) for b, n in enumerate(lens) for s in range(n)], np.int32)
    T_ = int(offs[-1])
    q, w = rn(rng, (T_, H, D)), rn(rng, (T_, H))
    k = rn(rng, (T_, D))
    scale = D ** -0.5
    want_p = np.zeros((T_, topk))
    want_sets = []
    for t, (b, s) in enumerate(tok):
        keys = k[offs[b]:offs[b] + s + 1].astype(f64)
        logit = (np.maximum(keys @ (q[t].astype(f64) * scale).T, 0) * w[t].astype(f64)).sum(1)
        order = np.argsort(-logit, kind="stable")[:topk]
        v = np.full(topk, -np.inf)
        v[:len(order)] = logit[order]
        p = np.exp(v - v.max())
        want_p[t] = -np.sort(-(p / p.sum()))
        want_sets.append(set(order.tolist()))

    def same_topk(got, want):
        for t in range(T_):   # the selected keys, any order (ties aside); -1 past the causal ones
            sel = set(int(i) for i in got[t] if i >= 0)
            assert sel == want_sets[t] and (got[t] >= 0).sum() == len(want_sets[t]), \
                f"token {t}: indices {sorted(sel)} != {sorted(want_sets[t])}"

    def probs(got, want):
        from upstream_sweep import tolerance
        rtol, atol = tolerance("float32", D * H)
        g = -np.sort(-got.astype(f64), axis=1)
        assert np.allclose(g, want, rtol=rtol, atol=atol), \
            f"probabilities: max abs err {np.abs(g - want).max():.3g}"
    kern = m["tl_indexer_topk_reducesum_impl"](H, D, topk)
    idx, red = np.zeros((T_, topk), np.int32), np.zeros((T_, topk), np.float32)
    args = [q, w, k, idx, red, offs, tok]
    return [Check(kern, args, {("arg", 3): None}, compare=same_topk),
            Check(kern, args, {("arg", 4): want_p}, compare=probs)]


@case("tl/dsa_sparse_finetune/indexer_topk_reducesum", TL,
      "examples/dsa_sparse_finetune/indexer_topk_reducesum.py",
      "varlen lightning-indexer top-k: relu(k . q) weighted over heads per causal key, a "
      "bitonic sort as T.Parallel compare-and-swap steps in a T.macro, softmax of the top-k")
def _(m, rng):
    return indexer_topk_checks(m, rng, (40, 70), 8, 32, 32)


@case("tl/flash_attention/gqa_bwd_tma_reduce", TL,
      "examples/flash_attention/example_gqa_bwd_tma_reduce.py",
      "GQA backward: tile atomic_add(..., use_tma=True) of dQ/dK/dV, the split variant with "
      "T.annotate_layout of dQ (hints), fwd with lse")
def _(m, rng):
    from upstream_cases_new3 import gqa_bwd_checks
    return gqa_bwd_checks(m, rng, "flashattn_bwd_split_novarlen")


# GPU warp-specialised kernels (mbarriers, TMA, register reallocation): located errors expected


@case("tl/deepseek_v32/sparse_mla_fwd_pipelined", TL, "examples/deepseek_v32/sparse_mla_fwd_pipelined.py",
      "warp-specialised sparse MLA: T.alloc_barrier, tma_copy, producer threads with "
      "cp.async (GPU-only: located)")
def _(m, rng):
    from upstream_cases_new5 import v32_sparse_checks
    return v32_sparse_checks(m, rng, extra=[np.zeros(1, np.int32)], topk=128, with_lse=False,
                             kv_stride=1)


@case("tl/deepseek_v32/sparse_mla_fwd_seesaw", TL, "examples/deepseek_v32/sparse_mla_fwd_seesaw.py",
      "two consumer warp groups alternating on one sparse MLA (GPU-only barriers: located)")
def _(m, rng):
    from upstream_cases_new5 import v32_sparse_checks
    return v32_sparse_checks(m, rng, extra=[np.zeros(1, np.int32)], topk=128, with_lse=False,
                             H=64, tail=64, kv_stride=1)


@case("tl/gemm_sp/gemm_sp", TL, "examples/gemm_sp/example_gemm_sp.py",
      "2:4 structured-sparse GEMM T.gemm_sp on kept values + int16 natural metadata (host "
      "compression here: the example's compressor is a SIMT kernel on CUDA)")
def _(m, rng):
    from tilelang_mini.testing.references import compress_2to4, semi_sparse
    # host code: the e_factor helper comes from TileLang's CUDA sparse-layout module
    m["get_e_factor"] = lambda a_dtype, e_dtype: np.dtype(e_dtype).itemsize * 2 * 4
    M, N, K = 128, 128, 256
    a = semi_sparse(rng, M, K, np.float16)
    vals, meta = compress_2to4(a, "int16")
    b = rn(rng, (K, N), "float16")
    kern = m["matmul_sp_fp16"](M, N, K, "float32", "int16", 64, 64, 64, 2, 128, 0, True)
    return [Check(kern, [vals, meta, b], {0: a.astype(f64) @ b.astype(f64)}, "float32", K,
                  tol=(1e-2, 1e-2))]


@case("tl/deepseek_mhc/mhc_bwd", TL, "examples/deepseek_mhc/example_mhc_bwd.py",
      "sinkhorn backward by implicit differentiation: conjugate gradient on 3-D tiles "
      "(T.macro mat-vecs with reduce_sum over dims -1/-2), eager T.dynamic/T.const under "
      "@tilelang.autotune with the config given")
def _(m, rng):
    from tilelang_mini.testing.references import sinkhorn_ref
    S, n = 64, 4
    R = sinkhorn_ref(rng.standard_normal((S, n, n)), 40, 0.0).astype(np.float32)
    dR = rn(rng, (S, n, n))
    want = np.zeros((S, n, n))
    for s in range(S):   # (dR - x1[i] - x2[j]) * R with [[I, R], [R^T, I]] x = [rowsum, colsum] of R*dR
        r, g = R[s].astype(f64), (R[s] * dR[s]).astype(f64)
        A = np.block([[np.eye(n), r], [r.T, np.eye(n)]])
        x = np.linalg.lstsq(A, np.concatenate([g.sum(1), g.sum(0)]), rcond=None)[0]
        want[s] = (dR[s] - x[:n, None] - x[None, n:]) * r
    fn = with_kwargs(m["sinkhorn_bwd_implicit_cg"], tilesize=8, threads=128)
    return [Check(fn, [R, dR], {0: want}, "float32", tol=(1e-3, 1e-3))]


@case("tl/kda/chunk_bwd_dqkwg", TL, KDA + "chunk_bwd_dqkwg.py",
      "KDA backward dq/dk/dw/dg per chunk: three gemms against the chunk state and its "
      "gradient, row sums of h*dh, a column reduce_sum, the chunk's last-row term by "
      "T.if_then_else")
def _(m, rng):
    B, S, H, DK, DV, BS = CHUNK_DIMS
    q, k = rn(rng, (B, S, H, DK), "float16", 0.5), rn(rng, (B, S, H, DK), "float16", 0.5)
    v, do, dv = (rn(rng, (B, S, H, DV), "float16", 0.5) for _ in range(3))
    h, dh = (rn(rng, (B, S // BS, H, DK, DV), "float16", 0.3) for _ in range(2))
    g = kda_gates(rng, B, S, H, DK, BS).astype(np.float16).astype(np.float32)  # fp16 tiles
    scale = DK ** -0.5
    dq, dk, dw, dg = (np.zeros((B, S, H, DK)) for _ in range(4))
    for b, hh in np.ndindex(B, H):
        for c, r in chunk_rows(S, BS):
            hc, dhc = h[b, c, hh].astype(f64), dh[b, c, hh].astype(f64)
            gc = g[b, r, hh].astype(f64)
            gn = gc[-1]
            q_ = do[b, r, hh].astype(f64) @ hc.T * scale * np.exp2(gc)
            k_ = v[b, r, hh].astype(f64) @ dhc.T * np.exp2(gn[None, :] - gc)
            dq[b, r, hh], dk[b, r, hh] = q_, k_
            dw[b, r, hh] = -(dv[b, r, hh].astype(f64) @ hc.T)
            last = (hc * dhc).sum(1) * np.exp2(gn) + (k_ * k[b, r, hh]).sum(0)
            dg[b, r, hh] = q[b, r, hh] * q_ - k[b, r, hh] * k_
            dg[b, r.stop - 1, hh] += last
    kern = m["chunk_bwd_dqkwg"](B, S, H, DK, DV, scale, BS, "float16", "float32", 32, 32, 32, 0)
    return [Check(kern, [q, k, v, g, h, dv, do, dh], {0: dq, 1: dk, 2: dw, 3: dg}, "float16",
                  BS + DV)]


def wy_bwd_checks(m, rng, kda):
    """tilelang_wy_fast_bwd of the KDA and GDN examples: the gradients through the chunk
    products w = A (k * beta * gate) and u = A (v * beta), gate = exp2(g) per channel (KDA) or
    exp(g) per row (GDN), so dg is dk_bg * k_bg per channel or its row sum. KDA also takes
    incoming dk and dg, and carries dA through A's inverse (dA <- -A^T tril(dA, -1) A^T, strictly
    lower); GDN returns dA of the products."""
    B, S, H, DK, DV, BS = CHUNK_DIMS
    gates = kda_gates(rng, B, S, H, DK, BS) if kda else gdn_gates(rng, B, S, H)
    k, v, beta, g, a = wy_inputs(rng, gates, DK, DV, BS)
    dw = rn(rng, (B, S, H, DK), "float16", 0.5)
    extra = [rn(rng, (B, S, H, DK), "float16", 0.5)] if kda else []   # incoming dk (KDA)
    du = rn(rng, (B, S, H, DV), "float16", 0.5)
    extra += [rn(rng, (B, S, H, DK), "float32", 0.5)] if kda else []  # incoming dg (KDA)
    dA, dk, dv, dbeta = (np.zeros(s) for s in ((B, S, H, BS), k.shape, v.shape, beta.shape))
    dg = np.zeros(g.shape)
    for b, h in np.ndindex(B, H):
        for _, r in chunk_rows(S, BS):
            A_, bt = a[b, r, h].astype(f64), beta[b, r, h].astype(f64)[:, None]
            gc = g[b, r, h].astype(f64)
            ge = np.exp2(gc) if kda else np.exp(gc)[:, None]
            kk, vv = k[b, r, h].astype(f64), v[b, r, h].astype(f64)
            dwc, duc = dw[b, r, h].astype(f64), du[b, r, h].astype(f64)
            kbg = kk * bt * ge
            dkbg, dvb = A_.T @ dwc, A_.T @ duc
            da = dwc @ kbg.T + duc @ (vv * bt).T
            dk[b, r, h], dv[b, r, h] = dkbg * ge * bt, dvb * bt
            dbeta[b, r, h] = (dkbg * kk * ge).sum(1) + (dvb * vv).sum(1)
            if kda:
                dA[b, r, h] = np.tril(-(A_.T @ (np.tril(da, -1) @ A_.T)), -1)
                dk[b, r, h] += extra[0][b, r, h]
                dg[b, r, h] = dkbg * kbg + extra[1][b, r, h]
            else:
                dA[b, r, h] = da
                dg[b, r, h] = (dkbg * kbg).sum(1)
    kern = m["tilelang_wy_fast_bwd"](B, S, H, DK, DV, "float16", "float16", "float32", "float32",
                                     "float32", BS, 32, 32, 128, 0)
    return [Check(kern, [k, v, beta, g, a, dw, du] + extra,
                  {0: dA, 1: dk, 2: dv, 3: dbeta, 4: dg}, "float16", DK + DV)]


case("tl/kda/wy_fast_bwd", TL, KDA + "wy_fast_bwd.py",
     "KDA WY backward: dA accumulated over DK and DV blocks by two gemm kinds, row-sum "
     "dbeta with reduce_sum(clear=False), strictly-lower masks, A^T (dA) A^T chain")(
    partial(wy_bwd_checks, kda=True))


case("tl/gdn/wy_fast_bwd", TL, "examples/gdn/example_wy_fast_bwd_split.py",
     "GDN WY backward (the fused kernel of the split example): dA by gemms over DK and DV "
     "blocks, per-row dbeta/dg by reduce_sum(clear=False), scalar outputs by a T.Parallel map")(
    partial(wy_bwd_checks, kda=False))


@case("tl/deepseek_nsa/nsa_fwd_varlen", TL, "examples/deepseek_nsa/example_tilelang_nsa_fwd_varlen.py",
      "varlen native sparse attention: per-token selected KV blocks read from GM (a run-time "
      "trip count), blocks past the token skipped by a run-time if, causal mask inside a "
      "block, output written in place (eager, no T.empty)")
def _(m, rng):
    return [nsa_varlen_check(m, rng, (40, 70), 1, 16, 64, 16, 4, NSEL_less=2)]


def nsa_varlen_check(m, rng, lens, HK, G, D, BS, NSEL, NSEL_less):
    """native_sparse_attention_varlen on sequences of `lens` tokens, HK KV heads x G query
    heads of dim D, KV blocks of BS: per token block 0 and NSEL - NSEL_less other blocks of its
    sequence (the rest of its NSEL slots -1)."""
    offs = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    tok = np.array([(b, s) for b, n in enumerate(lens) for s in range(n)], np.int32)
    T_ = int(offs[-1])
    q = rn(rng, (T_, HK * G, D), "float16")
    k, v = rn(rng, (T_, HK, D), "float16"), rn(rng, (T_, HK, D), "float16")
    idx = np.full((T_, HK, NSEL), -1, np.int32)
    counts = np.full((T_, HK), NSEL, np.int32)   # one count for all tokens
    want = np.zeros((T_, HK * G, D))
    for t, (b, s) in enumerate(tok):
        for h in range(HK):
            # block 0 always, then other blocks of the sequence (a future one is skipped)
            blocks = [0] + list(rng.permutation(np.arange(1, -(-lens[b] // BS)))[:NSEL - NSEL_less])
            idx[t, h, :len(blocks)] = blocks
            keys = np.array([j for blk in blocks if blk * BS <= s
                             for j in range(blk * BS, min(blk * BS + BS, s + 1))])
            rows = offs[b] + keys
            sc = q[t, h * G:(h + 1) * G].astype(f64) @ k[rows, h].astype(f64).T * D ** -0.5
            p = np.exp(sc - sc.max(1, keepdims=True))
            want[t, h * G:(h + 1) * G] = (p / p.sum(1, keepdims=True)) @ v[rows, h].astype(f64)
    fn = with_kwargs(m["native_sparse_attention_varlen"], batch=len(lens), dim=D, is_causal=True,
                     block_size=BS, groups=G, selected_blocks=NSEL)
    out = np.zeros((T_, HK * G, D), np.float16)
    return Check(fn, [q, k, v, out, idx, counts, offs, tok], {("arg", 3): want}, "float16",
                 NSEL * BS)


@case("tl/attention_sink/gqa_sink_bwd_varlen", TL,
      "examples/attention_sink/example_gqa_sink_bwd_varlen.py",
      "varlen GQA attention with sinks: fwd (O, lse per sequence position), bwd (dQ/dK/dV by "
      "atomic_add into float32 over cu_seqlens rows), dsink; per-sequence lse rows padded")
def _(m, rng):
    from upstream_cases_new4 import sink_attn_grads
    from upstream_sweep import tolerance
    lens, H, HK, D, NC = (40, 56), 8, 4, 32, 64
    g, B = H // HK, len(lens)
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    U = int(cu[-1])
    q, do = rn(rng, (U, H, D), "float16"), rn(rng, (U, H, D), "float16")
    k, v = rn(rng, (U, HK, D), "float16"), rn(rng, (U, HK, D), "float16")
    sinks = rn(rng, (H,), "float16")
    o, dq, dk, dv, (lse, delta, dsink) = varlen_gqa_grads(
        lambda *a: sink_attn_grads(*a, sinks), q, k, v, do, cu, NC)

    def rows_of_each_sequence(got, want, dtype="float16"):
        rtol, atol = tolerance(dtype, NC)
        for b, L in enumerate(lens):   # positions past a sequence's length are padding
            gb, wb = got[b, :, :L].astype(f64), want[b, :, :L]
            assert np.allclose(gb, wb, rtol=rtol, atol=atol), \
                f"sequence {b}: max abs err {np.abs(gb - wb).max():.3g}"
    args = (B, g, U, U, NC, H, max(lens), D, True)
    fwd = m["flashattn_fwd"](*args, block_M=16, block_N=16)
    checks = [Check(fwd, [q, k, v, cu, cu, sinks], {0: o}, "float16", NC),
              Check(fwd, [q, k, v, cu, cu, sinks], {1: lse}, compare=rows_of_each_sequence)]
    lse32, delta32 = lse.astype(np.float32), delta.astype(np.float32)
    zeros = [np.zeros((U, H, D), np.float32), np.zeros((U, HK, D), np.float32),
             np.zeros((U, HK, D), np.float32)]
    checks.append(Check(m["flashattn_bwd"](*args), [q, k, v, do, lse32, delta32, cu, cu] + zeros,
                        {("arg", 8): dq, ("arg", 9): dk, ("arg", 10): dv}, "float16", NC))
    checks.append(Check(m["flashattn_bwd_dsink"](B, H, NC, max(lens)), [sinks, delta32, lse32, cu],
                        {0: dsink}, compare=rows_of_each_sequence))
    return checks


@case("tl/kda/chunk_inter_solve_fused", TL, KDA + "chunk_inter_solve_fused.py",
      "KDA off-diagonal sub-chunk scores fused with the unit-lower-triangular solve: a dozen "
      "guarded loads per trip each feeding vector work (more MTE2 -> V dependencies than event "
      "ids), row-by-row forward substitution over run-time trip counts, block inverse by gemms")
def _(m, rng):
    from upstream_sweep import tolerance
    B, S, H, DK, BS, BC = 1, 128, 2, 64, 64, 16
    scale, g = DK ** -0.5, kda_gates(rng, B, S, H, DK, BS)
    q, k = (rn(rng, (B, S, H, DK), "float16", 0.5) for _ in range(2))
    beta = rng.random((B, S, H)).astype(np.float16)
    diag = rn(rng, (B, S, H, BC), "float32", 0.2)   # the diagonal blocks' strict lower part
    aqk, akk = np.zeros((B, S, H, BS)), np.zeros((B, S, H, BS))
    for b, h in np.ndindex(B, H):
        for c0 in range(0, S, BS):
            rows = [slice(c0 + i * BC, c0 + (i + 1) * BC) for i in range(BS // BC)]
            a = np.zeros((BS, BS))   # the chunk's strictly lower (beta k_i)(k_j)^T, gated
            for i, ri in enumerate(rows):
                gi = g[b, ri, h].astype(f64)
                a[i * BC:(i + 1) * BC, i * BC:(i + 1) * BC] = np.tril(diag[b, ri, h], -1)
                for j, rj in enumerate(rows[:i]):
                    gate = np.exp2(gi[:, None, :] - g[b, rj, h].astype(f64)[None])   # (c, d, k)
                    qk = np.einsum("ck,dk,cdk->cd", q[b, ri, h].astype(f64),
                                   k[b, rj, h].astype(f64), gate)
                    kk = np.einsum("ck,dk,cdk->cd", k[b, ri, h].astype(f64),
                                   k[b, rj, h].astype(f64), gate)
                    aqk[b, ri, h, j * BC:(j + 1) * BC] = qk * scale
                    a[i * BC:(i + 1) * BC, j * BC:(j + 1) * BC] = kk * beta[b, ri, h, None]
            akk[b, c0:c0 + BS, h] = np.linalg.inv(np.eye(BS) + a)

    def lower_blocks(strict):
        def cmp(got, want):   # the kernel writes only the blocks on or below the diagonal
            rtol, atol = tolerance("float16", DK)
            for i, j in np.ndindex(BS // BC, BS // BC):
                if j < i or (j == i and not strict):
                    r, c = slice(i * BC, (i + 1) * BC), slice(j * BC, (j + 1) * BC)
                    gb = got.reshape(B, S // BS, BS, H, BS)[:, :, r, :, c].astype(f64)
                    wb = want.reshape(B, S // BS, BS, H, BS)[:, :, r, :, c]
                    assert np.allclose(gb, wb, rtol=rtol, atol=atol), \
                        f"block ({i}, {j}): max abs err {np.abs(gb - wb).max():.3g}"
        return cmp
    kern = m["tilelang_chunk_kda_fwd_inter_fused"](
        B, S, H, DK, "float16", "float16", "float32", "float32", BS, BC, scale)
    args = [q, k, g, beta, diag]
    return [Check(kern, args, {0: aqk}, compare=lower_blocks(True)),
            Check(kern, args, {1: akk}, compare=lower_blocks(False))]
