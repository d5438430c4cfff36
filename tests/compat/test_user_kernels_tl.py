"""Kernels a TileLang user ports from their own CUDA code, written in TileLang's GPU dialect
(T.Kernel(..., threads=128), shared/fragment tiles, T.Pipelined, T.Parallel, T.gemm, T.reduce_*,
both jit styles, T.macro, T.dynamic), none of them an upstream example or another test's kernel:
each runs on every target and simulated, against an independent float64 NumPy reference."""
import numpy as np

import tilelang_mini as tilelang
import tilelang_mini.language as T

from util import close, f64, rand, simulated


# ---------------------------------------------------------------- softmax + cross-entropy

@tilelang.jit(out_idx=[-1])
def softmax_xent(M, V, block_M=4, block_V=128, dtype=T.float16):
    """Per-row loss logsumexp(x) - x[label]: an online logsumexp over vocabulary chunks."""

    @T.prim_func
    def main(logits: T.Tensor((M, V), dtype), labels: T.Tensor((M,), T.int32),
             loss: T.Tensor((M,), T.float32)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            x_s = T.alloc_shared((block_M, block_V), dtype)
            x = T.alloc_fragment((block_M, block_V), T.float32)
            hit = T.alloc_fragment((block_M, block_V), T.float32)
            m = T.alloc_fragment((block_M,), T.float32)
            m_prev = T.alloc_fragment((block_M,), T.float32)
            m_cur = T.alloc_fragment((block_M,), T.float32)
            s = T.alloc_fragment((block_M,), T.float32)
            s_cur = T.alloc_fragment((block_M,), T.float32)
            tgt = T.alloc_fragment((block_M,), T.float32)
            t_cur = T.alloc_fragment((block_M,), T.float32)
            T.fill(m, -T.infinity(T.float32))
            T.fill(s, 0.0)
            T.fill(tgt, 0.0)
            for kv in T.Pipelined(T.ceildiv(V, block_V), num_stages=2):
                T.copy(logits[bx * block_M, kv * block_V], x_s)
                for i, j in T.Parallel(block_M, block_V):
                    x[i, j] = T.if_then_else(kv * block_V + j < V, T.cast(x_s[i, j], T.float32),
                                             -T.infinity(T.float32))
                    hit[i, j] = T.if_then_else(kv * block_V + j == labels[bx * block_M + i],
                                               x[i, j], 0.0)
                T.reduce_sum(hit, t_cur, dim=1)
                T.copy(m, m_prev)
                T.reduce_max(x, m_cur, dim=1)
                for i in T.Parallel(block_M):
                    m[i] = T.max(m_prev[i], m_cur[i])
                    tgt[i] += t_cur[i]
                for i, j in T.Parallel(block_M, block_V):
                    x[i, j] = T.exp(x[i, j] - m[i])
                T.reduce_sum(x, s_cur, dim=1)
                for i in T.Parallel(block_M):
                    s[i] = s[i] * T.exp(m_prev[i] - m[i]) + s_cur[i]
            for i in T.Parallel(block_M):
                loss[bx * block_M + i] = T.log(s[i]) + m[i] - tgt[i]
    return main


def test_softmax_cross_entropy(tgt):
    M, V = 10, 300
    x = rand((M, V), "float16", 1, scale=3.0)
    lab = np.random.default_rng(2).integers(0, V, M).astype(np.int32)
    xd = f64(x)
    mx = xd.max(1, keepdims=True)
    want = np.log(np.exp(xd - mx).sum(1)) + mx[:, 0] - xd[np.arange(M), lab]
    k = softmax_xent(M, V)
    close(k(x, lab), want, "float32", V)
    close(simulated(k, x, lab), want, "float32", V)


# ---------------------------------------------------------------- RoPE in place

@tilelang.jit
def rope_inplace(B, S, H, D, block_S=16, dtype=T.bfloat16):
    """NeoX-style rotary embedding applied to q (B, S, H, D) in place."""
    half = D // 2

    @T.prim_func
    def main(q: T.Tensor((B, S, H, D), dtype), cos: T.Tensor((S, half), T.float32),
             sin: T.Tensor((S, half), T.float32)):
        with T.Kernel(T.ceildiv(S, block_S), H, B, threads=128) as (bx, by, bz):
            q_s = T.alloc_shared((block_S, D), dtype)
            c_s = T.alloc_shared((block_S, half), T.float32)
            s_s = T.alloc_shared((block_S, half), T.float32)
            o = T.alloc_fragment((block_S, D), dtype)
            T.copy(q[bz, bx * block_S:(bx + 1) * block_S, by, :], q_s)
            T.copy(cos[bx * block_S, 0], c_s)
            T.copy(sin[bx * block_S, 0], s_s)
            for i, j in T.Parallel(block_S, half):
                x1 = T.cast(q_s[i, j], T.float32)
                x2 = T.cast(q_s[i, j + half], T.float32)
                o[i, j] = T.cast(x1 * c_s[i, j] - x2 * s_s[i, j], dtype)
                o[i, j + half] = T.cast(x2 * c_s[i, j] + x1 * s_s[i, j], dtype)
            T.copy(o, q[bz, bx * block_S:(bx + 1) * block_S, by, :])
    return main


def test_rope_in_place(tgt):
    B, S, H, D = 2, 40, 3, 64
    q = rand((B, S, H, D), "bfloat16", 3)
    pos = np.arange(S)[:, None] * (10000.0 ** (-np.arange(D // 2) * 2.0 / D))[None, :]
    cos, sin = np.cos(pos).astype(np.float32), np.sin(pos).astype(np.float32)
    x1, x2 = f64(q)[..., :D // 2], f64(q)[..., D // 2:]
    c, s = f64(cos)[None, :, None, :], f64(sin)[None, :, None, :]
    want = np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], -1)
    k = rope_inplace(B, S, H, D)
    got = q.copy()
    k(got, cos, sin)
    close(got, want, "bfloat16")
    got = q.copy()
    k.simulate(got, cos, sin)
    close(got, want, "bfloat16")


# ---------------------------------------------------------------- group norm (eager)

@tilelang.jit
def group_norm(X, Gamma, Beta, groups=4, eps=1e-5):
    N, C, L = T.const("N, C, L")
    X: T.Tensor((N, C, L), T.float16)
    Gamma: T.Tensor((C,), T.float32)
    Beta: T.Tensor((C,), T.float32)
    Y = T.empty((N, C, L), T.float16)
    cg = C // groups
    with T.Kernel(N, groups, threads=128) as (bn, bg):
        x = T.alloc_fragment((cg, L), T.float32)
        row = T.alloc_fragment((cg,), T.float32)
        tot = T.alloc_fragment((1,), T.float32)
        sq = T.alloc_fragment((cg, L), T.float32)
        y = T.alloc_fragment((cg, L), T.float16)
        T.copy(X[bn, bg * cg:(bg + 1) * cg, :], x)
        T.reduce_sum(x, row, dim=1)
        T.reduce_sum(row, tot, dim=0)
        mean = tot[0] / (cg * L)
        for i, j in T.Parallel(cg, L):
            sq[i, j] = (x[i, j] - mean) * (x[i, j] - mean)
        T.reduce_sum(sq, row, dim=1)
        T.reduce_sum(row, tot, dim=0)
        for i, j in T.Parallel(cg, L):
            y[i, j] = T.cast((x[i, j] - mean) * T.rsqrt(tot[0] / (cg * L) + eps)
                             * Gamma[bg * cg + i] + Beta[bg * cg + i], T.float16)
        T.copy(y, Y[bn, bg * cg:(bg + 1) * cg, :])
    return Y


def test_group_norm(tgt):
    N, C, L = 2, 16, 48
    x = rand((N, C, L), "float16", 4, scale=2.0) + np.float16(1.0)
    g, b = rand((C,), "float32", 5), rand((C,), "float32", 6)
    xg = f64(x).reshape(N, 4, -1)
    xn = ((xg - xg.mean(-1, keepdims=True)) / np.sqrt(xg.var(-1, keepdims=True) + 1e-5))
    want = xn.reshape(N, C, L) * f64(g)[None, :, None] + f64(b)[None, :, None]
    close(group_norm(x, g, b), want, "float16")
    close(simulated(group_norm.compile(x, g, b), x, g, b), want, "float16")


# ---------------------------------------------------------------- int8 per-token quant / dequant

@tilelang.jit(out_idx=[1, 2])
def quant_int8(M, K, block_M=8, dtype=T.float16):
    @T.prim_func
    def main(X: T.Tensor((M, K), dtype), Q: T.Tensor((M, K), T.int8),
             S: T.Tensor((M,), T.float32)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            x = T.alloc_fragment((block_M, K), T.float32)
            amax = T.alloc_fragment((block_M,), T.float32)
            q = T.alloc_fragment((block_M, K), T.int8)
            T.copy(X[bx * block_M, 0], x)
            T.reduce_absmax(x, amax, dim=1)
            for i in T.Parallel(block_M):
                amax[i] = T.max(amax[i], 1e-8) / 127.0
            for i, j in T.Parallel(block_M, K):
                q[i, j] = T.cast(T.clamp(T.round(x[i, j] / amax[i]), -127.0, 127.0), T.int8)
            T.copy(q, Q[bx * block_M, 0])
            T.copy(amax, S[bx * block_M])
    return main


@tilelang.jit(out_idx=[-1])
def dequant_int8(M, K, block_M=8, block_K=64):
    @T.prim_func
    def main(Q: T.Tensor((M, K), T.int8), S: T.Tensor((M,), T.float32),
             Y: T.Tensor((M, K), T.float16)):
        with T.Kernel(T.ceildiv(K, block_K), T.ceildiv(M, block_M), threads=128) as (bx, by):
            q = T.alloc_shared((block_M, block_K), T.int8)
            y = T.alloc_fragment((block_M, block_K), T.float16)
            T.copy(Q[by * block_M, bx * block_K], q)
            for i, j in T.Parallel(block_M, block_K):
                y[i, j] = T.cast(T.cast(q[i, j], T.float32) * S[by * block_M + i], T.float16)
            T.copy(y, Y[by * block_M, bx * block_K])
    return main


def test_int8_quant_dequant(tgt):
    M, K = 20, 128
    x = rand((M, K), "float16", 7, scale=4.0)
    xd = f64(x)
    scale = np.maximum(np.abs(xd).max(1), 1e-8) / 127.0
    want_q = np.clip(np.round(xd / scale[:, None]), -127, 127)
    kq = quant_int8(M, K)
    for q, s in (kq(x), simulated(kq, x)):
        close(s, scale, "float32")
        # half-way cases may round either way through float32: at most one step apart
        assert np.abs(q.astype(np.int64) - want_q).max() <= 1
        assert (q.astype(np.int64) == want_q).mean() > 0.99
    q, s = kq(x)
    kd = dequant_int8(M, K)
    want = f64(q) * f64(s)[:, None]
    close(kd(q, s), want, "float16")
    close(simulated(kd, q, s), want, "float16")


# ---------------------------------------------------------------- MoE gating

@tilelang.jit(out_idx=[1, 2])
def moe_gate(Tok, E, topk, block_T=8):
    """softmax over experts, top-k by repeated arg-max, weights renormalised to sum 1."""

    @T.prim_func
    def main(logits: T.Tensor((Tok, E), T.float32), W: T.Tensor((Tok, topk), T.float32),
             Ids: T.Tensor((Tok, topk), T.int32)):
        with T.Kernel(T.ceildiv(Tok, block_T), threads=128) as bx:
            p = T.alloc_fragment((block_T, E), T.float32)
            cand = T.alloc_fragment((block_T, E), T.int32)
            mx = T.alloc_fragment((block_T,), T.float32)
            sm = T.alloc_fragment((block_T,), T.float32)
            arg = T.alloc_fragment((block_T,), T.int32)
            w = T.alloc_fragment((block_T, topk), T.float32)
            ids = T.alloc_fragment((block_T, topk), T.int32)
            T.copy(logits[bx * block_T, 0], p)
            T.reduce_max(p, mx, dim=1)
            for i, j in T.Parallel(block_T, E):
                p[i, j] = T.exp(p[i, j] - mx[i])
            T.reduce_sum(p, sm, dim=1)
            for i, j in T.Parallel(block_T, E):
                p[i, j] = p[i, j] / sm[i]
            for k in T.serial(topk):
                T.reduce_max(p, mx, dim=1)
                for i, j in T.Parallel(block_T, E):
                    cand[i, j] = T.if_then_else(p[i, j] == mx[i], j, E)
                T.reduce_min(cand, arg, dim=1)
                for i in T.Parallel(block_T):
                    w[i, k] = mx[i]
                    ids[i, k] = arg[i]
                for i, j in T.Parallel(block_T, E):
                    if j == arg[i]:
                        p[i, j] = -1.0
            T.reduce_sum(w, sm, dim=1)
            for i, k in T.Parallel(block_T, topk):
                w[i, k] = w[i, k] / sm[i]
            T.copy(w, W[bx * block_T, 0])
            T.copy(ids, Ids[bx * block_T, 0])
    return main


def test_moe_gating(tgt):
    Tok, E, K = 20, 16, 3
    x = rand((Tok, E), "float32", 8, scale=2.0)
    p = np.exp(f64(x) - f64(x).max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    ids = np.argsort(-p, axis=1, kind="stable")[:, :K]
    w = np.take_along_axis(p, ids, 1)
    w /= w.sum(1, keepdims=True)
    k = moe_gate(Tok, E, K)
    for gw, gi in (k(x), simulated(k, x)):
        np.testing.assert_array_equal(gi, ids)
        close(gw, w, "float32")


# ---------------------------------------------------------------- top-p (nucleus) filter

@tilelang.jit(out_idx=[-1])
def top_p_filter(M, V, top_p, block_M=4):
    """Probabilities sorted descending per row: keep the smallest prefix whose mass reaches
    top_p (the first token always), renormalise, zero the rest."""

    @T.prim_func
    def main(P: T.Tensor((M, V), T.float32), Out: T.Tensor((M, V), T.float32)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            p = T.alloc_shared((block_M, V), T.float32)
            c = T.alloc_fragment((block_M, V), T.float32)
            keep = T.alloc_fragment((block_M, V), T.float32)
            tot = T.alloc_fragment((block_M,), T.float32)
            T.copy(P[bx * block_M, 0], p)
            T.cumsum(p, c, dim=1)
            for i, j in T.Parallel(block_M, V):
                keep[i, j] = T.if_then_else(c[i, j] - p[i, j] < top_p, p[i, j], 0.0)
            T.reduce_sum(keep, tot, dim=1)
            for i, j in T.Parallel(block_M, V):
                keep[i, j] = keep[i, j] / tot[i]
            T.copy(keep, Out[bx * block_M, 0])
    return main


def test_top_p_filter(tgt):
    M, V, top_p = 8, 64, 0.6
    x = np.exp(rand((M, V), "float32", 9, scale=2.0))
    p = -np.sort(-x / x.sum(1, keepdims=True), axis=1)
    p = p.astype(np.float32)
    pd = f64(p)
    before = np.cumsum(pd, 1) - pd
    keep = np.where(before < top_p, pd, 0.0)
    want = keep / keep.sum(1, keepdims=True)
    k = top_p_filter(M, V, top_p)
    close(k(p), want, "float32", V)
    close(simulated(k, p), want, "float32", V)


# ---------------------------------------------------------------- layernorm backward

@tilelang.jit(out_idx=[5])
def layernorm_bwd(M, N, block_M=8):
    """dx of y = (x - mean) * rstd * gamma, and dgamma / dbeta summed over the blocks with
    atomic adds (dgamma, dbeta are zero-initialised inputs)."""

    @T.prim_func
    def main(X: T.Tensor((M, N), T.float32), dY: T.Tensor((M, N), T.float32),
             gamma: T.Tensor((N,), T.float32), Mean: T.Tensor((M,), T.float32),
             Rstd: T.Tensor((M,), T.float32), dX: T.Tensor((M, N), T.float32),
             dgamma: T.Tensor((N,), T.float32), dbeta: T.Tensor((N,), T.float32)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            x = T.alloc_fragment((block_M, N), T.float32)
            dy = T.alloc_fragment((block_M, N), T.float32)
            xh = T.alloc_fragment((block_M, N), T.float32)
            g = T.alloc_fragment((block_M, N), T.float32)
            c1 = T.alloc_fragment((block_M,), T.float32)
            c2 = T.alloc_fragment((block_M,), T.float32)
            dg = T.alloc_fragment((N,), T.float32)
            db = T.alloc_fragment((N,), T.float32)
            T.copy(X[bx * block_M, 0], x)
            T.copy(dY[bx * block_M, 0], dy)
            for i, j in T.Parallel(block_M, N):
                xh[i, j] = (x[i, j] - Mean[bx * block_M + i]) * Rstd[bx * block_M + i]
                g[i, j] = dy[i, j] * gamma[j]
            for i, j in T.Parallel(block_M, N):
                x[i, j] = g[i, j] * xh[i, j]
            T.reduce_sum(g, c1, dim=1)
            T.reduce_sum(x, c2, dim=1)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = (g[i, j] - (c1[i] + xh[i, j] * c2[i]) / N) * Rstd[bx * block_M + i]
            T.copy(x, dX[bx * block_M, 0])
            for i, j in T.Parallel(block_M, N):
                xh[i, j] = xh[i, j] * dy[i, j]
            T.reduce_sum(xh, dg, dim=0)
            T.reduce_sum(dy, db, dim=0)
            T.atomic_add(dgamma[0], dg)
            for j in T.Parallel(N):
                T.atomic_add(dbeta[j], db[j])
    return main


def test_layernorm_backward(tgt):
    M, N = 32, 64
    x, dy = rand((M, N), "float32", 18), rand((M, N), "float32", 19)
    gamma = rand((N,), "float32", 20)
    xd = f64(x)
    mean = xd.mean(1)
    rstd = 1 / np.sqrt(xd.var(1) + 1e-5)
    xh = (xd - mean[:, None]) * rstd[:, None]
    g = f64(dy) * f64(gamma)
    want_dx = rstd[:, None] * (g - g.mean(1, keepdims=True) - xh * (g * xh).mean(1, keepdims=True))
    want_dg, want_db = (xh * f64(dy)).sum(0), f64(dy).sum(0)
    k = layernorm_bwd(M, N)
    stats = (mean.astype(np.float32), rstd.astype(np.float32))
    for run in (k, lambda *a: simulated(k, *a)):
        dg, db = np.zeros(N, np.float32), np.zeros(N, np.float32)
        dx = run(x, dy, gamma, *stats, dg, db)
        close(dx, want_dx, "float32", N)
        close(dg, want_dg, "float32", M)
        close(db, want_db, "float32", M)


# ---------------------------------------------------------------- ragged segment sums

@tilelang.jit(out_idx=[2, 3])
def segment_sums(D, block_L=16):
    """Rows x[offsets[s]:offsets[s + 1]] of each segment s summed, and their running
    (cumulative) sum written row by row; the row and segment counts are dynamic."""
    total, n_off = T.dynamic("total"), T.dynamic("n_off")

    @T.prim_func
    def main(x: T.Tensor((total, D), T.float32), offsets: T.Tensor((n_off,), T.int32),
             out: T.Tensor((n_off - 1, D), T.float32), csum: T.Tensor((total, D), T.float32)):
        with T.Kernel(n_off - 1, threads=128) as s:
            tile = T.alloc_fragment((block_L, D), T.float32)
            run = T.alloc_fragment((block_L, D), T.float32)
            part = T.alloc_fragment((D,), T.float32)
            acc = T.alloc_fragment((D,), T.float32)
            T.clear(acc)
            start = offsets[s]
            n = offsets[s + 1] - start
            for c in T.serial(T.ceildiv(n, block_L)):
                for i, d in T.Parallel(block_L, D):
                    tile[i, d] = T.if_then_else(c * block_L + i < n,
                                                x[start + c * block_L + i, d], 0.0)
                T.cumsum(tile, run, dim=0)
                for i, d in T.Parallel(block_L, D):
                    if c * block_L + i < n:
                        csum[start + c * block_L + i, d] = run[i, d] + acc[d]
                T.reduce_sum(tile, part, dim=0)
                for d in T.Parallel(D):
                    acc[d] += part[d]
            T.copy(acc, out[s, 0])
    return main


def test_ragged_segment_sums(tgt):
    D = 8
    lens = [5, 0, 33, 16, 1]
    off = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    x = rand((int(off[-1]), D), "float32", 21)
    want = np.stack([f64(x[a:b]).sum(0) for a, b in zip(off[:-1], off[1:])])
    want_c = np.concatenate([np.cumsum(f64(x[a:b]), 0) for a, b in zip(off[:-1], off[1:])])
    k = segment_sums(D)
    for o, c in (k(x, off), simulated(k, x, off)):
        close(o, want, "float32", 33)
        close(c, want_c, "float32", 33)




# ---------------------------------------------------------------- cross-entropy forward + backward

@tilelang.jit(out_idx=[2, 3])
def xent_fwd_bwd(M, V, block_M=4):
    """Loss per row and d(mean loss)/d logits = (softmax - onehot) / M; int64 labels."""

    @T.prim_func
    def main(x: T.Tensor((M, V), T.bfloat16), lab: T.Tensor((M,), T.int64),
             loss: T.Tensor((M,), T.float32), dx: T.Tensor((M, V), T.bfloat16)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            f = T.alloc_fragment((block_M, V), T.float32)
            t = T.alloc_fragment((block_M, V), T.float32)
            mx = T.alloc_fragment((block_M,), T.float32)
            se = T.alloc_fragment((block_M,), T.float32)
            xl = T.alloc_fragment((block_M,), T.float32)
            g = T.alloc_fragment((block_M, V), T.bfloat16)
            T.copy(x[bx * block_M, 0], f)
            T.reduce_max(f, mx, dim=-1)
            for i, j in T.Parallel(block_M, V):
                t[i, j] = T.if_then_else(j == lab[bx * block_M + i], f[i, j], 0.0)
                f[i, j] = T.exp(f[i, j] - mx[i])
            T.reduce_sum(f, se, dim=-1)
            T.reduce_sum(t, xl, dim=-1)
            for i in T.Parallel(block_M):
                loss[bx * block_M + i] = T.log(se[i]) + mx[i] - xl[i]
            for i, j in T.Parallel(block_M, V):
                g[i, j] = (f[i, j] / se[i]
                           - T.if_then_else(j == lab[bx * block_M + i], 1.0, 0.0)) / M
            T.copy(g, dx[bx * block_M, 0])
    return main


def test_cross_entropy_forward_backward(tgt):
    M, V = 6, 100
    x = rand((M, V), "bfloat16", 40)
    lab = np.random.default_rng(41).integers(0, V, M).astype(np.int64)
    xd = f64(x)
    mx = xd.max(1, keepdims=True)
    p = np.exp(xd - mx)
    se = p.sum(1, keepdims=True)
    want_l = np.log(se[:, 0]) + mx[:, 0] - xd[np.arange(M), lab]
    onehot = np.eye(V)[lab]
    want_g = (p / se - onehot) / M
    k = xent_fwd_bwd(M, V)
    for loss, g in (k(x, lab), simulated(k, x, lab)):
        close(loss, want_l, "float32", V)
        close(g, want_g, "bfloat16")


# ---------------------------------------------------------------- KV-cache append (scatter)

@tilelang.jit
def kv_append(n_tok, slots_total, D, block=8):
    """cache[slots[t]] = k[t] for the new tokens (slot -1: padding, skipped)."""

    @T.prim_func
    def main(k: T.Tensor((n_tok, D), T.bfloat16), slots: T.Tensor((n_tok,), T.int32),
             cache: T.Tensor((slots_total, D), T.bfloat16)):
        with T.Kernel(T.ceildiv(n_tok, block), threads=128) as bx:
            for i, d in T.Parallel(block, D):
                if bx * block + i < n_tok and slots[bx * block + i] >= 0:
                    cache[slots[bx * block + i], d] = k[bx * block + i, d]
    return main


def test_kv_cache_append(tgt):
    n, S, D = 13, 40, 32
    kv = rand((n, D), "bfloat16", 43)
    slots = np.random.default_rng(44).permutation(S)[:n].astype(np.int32)
    slots[3] = -1
    cache0 = rand((S, D), "bfloat16", 45)
    want = f64(cache0)
    want[slots[slots >= 0]] = f64(kv)[slots >= 0]
    k = kv_append(n, S, D)
    for run in (k, k.simulate):
        cache = cache0.copy()
        run(kv, slots, cache)
        np.testing.assert_array_equal(f64(cache), want)
