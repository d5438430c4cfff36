"""GEMM and attention kernels a TileLang user ports from their own CUDA code (the second half of
test_user_kernels_tl.py), written in TileLang's GPU dialect
(T.Kernel(..., threads=128), shared/fragment tiles, T.Pipelined, T.Parallel, T.gemm, T.reduce_*,
both jit styles, T.macro, T.dynamic), none of them an upstream example or another test's kernel:
each runs on every target and simulated, against an independent float64 NumPy reference."""
import numpy as np
import pytest

import tilelang_mini as tilelang
import tilelang_mini.language as T
from tilelang_mini import CompileError

from util import close, f64, rand, simulated


# ---------------------------------------------------------------- paged attention decode

@T.macro
def online_softmax(s, o, m, m_prev, l, ls):
    """One key block of an online softmax (the attention kernels below): the running row
    maxima m, sums l and output o rescaled, the scores s turned into probabilities. The
    extents come from the tiles' shapes."""
    rows, cols = s.shape
    T.copy(m, m_prev)
    T.reduce_max(s, m, dim=1, clear=False)
    for i, j in T.Parallel(rows, cols):
        s[i, j] = T.exp(s[i, j] - m[i])
    T.reduce_sum(s, ls, dim=1)
    for i in T.Parallel(rows):
        l[i] = l[i] * T.exp(m_prev[i] - m[i]) + ls[i]
    for i, d in T.Parallel(rows, o.shape[1]):
        o[i, d] *= T.exp(m_prev[i] - m[i])

@tilelang.jit(out_idx=[-1])
def paged_decode(B, H, Hkv, D, page, n_pages, max_pages, dtype=T.float16):
    """One query token per sequence; K/V in pages of `page` tokens found through a block
    table; the valid length of each sequence in seq_lens."""
    G = H // Hkv
    scale = 1.0 / D ** 0.5

    @T.prim_func
    def main(Q: T.Tensor((B, H, D), dtype), Kc: T.Tensor((n_pages, page, Hkv, D), dtype),
             Vc: T.Tensor((n_pages, page, Hkv, D), dtype),
             table: T.Tensor((B, max_pages), T.int32), seq_lens: T.Tensor((B,), T.int32),
             O: T.Tensor((B, H, D), dtype)):
        with T.Kernel(Hkv, B, threads=128) as (hk, b):
            q_s = T.alloc_shared((G, D), dtype)
            k_s = T.alloc_shared((page, D), dtype)
            v_s = T.alloc_shared((page, D), dtype)
            p_s = T.alloc_shared((G, page), dtype)
            s = T.alloc_fragment((G, page), T.float32)
            o = T.alloc_fragment((G, D), T.float32)
            m = T.alloc_fragment((G,), T.float32)
            m_prev = T.alloc_fragment((G,), T.float32)
            l = T.alloc_fragment((G,), T.float32)
            ls = T.alloc_fragment((G,), T.float32)
            T.copy(Q[b, hk * G:(hk + 1) * G, :], q_s)
            T.fill(o, 0.0)
            T.fill(l, 0.0)
            T.fill(m, -T.infinity(T.float32))
            n = seq_lens[b]
            for pg in T.serial(T.ceildiv(n, page)):
                phys = table[b, pg]
                T.copy(Kc[phys, :, hk, :], k_s)
                T.copy(Vc[phys, :, hk, :], v_s)
                T.clear(s)
                T.gemm(q_s, k_s, s, transpose_B=True)
                for g, t in T.Parallel(G, page):
                    s[g, t] = T.if_then_else(pg * page + t < n, s[g, t] * scale,
                                             -T.infinity(T.float32))
                online_softmax(s, o, m, m_prev, l, ls)
                T.copy(s, p_s)
                T.gemm(p_s, v_s, o)
            for g, d in T.Parallel(G, D):
                o[g, d] /= l[g]
            T.copy(o, O[b, hk * G:(hk + 1) * G, :])
    return main


def test_paged_attention_decode(tgt):
    B, H, Hkv, D, page, n_pages, max_pages = 3, 8, 2, 64, 16, 12, 4
    rng = np.random.default_rng(10)
    q = rand((B, H, D), "float16", 11)
    kc = rand((n_pages, page, Hkv, D), "float16", 12)
    vc = rand((n_pages, page, Hkv, D), "float16", 13)
    table = rng.permutation(n_pages)[:B * max_pages].reshape(B, max_pages).astype(np.int32)
    lens = np.array([37, 64, 5], np.int32)
    want = np.zeros((B, H, D))
    for b in range(B):
        n = lens[b]
        kk = np.concatenate([f64(kc[p]) for p in table[b]], 0)[:n]
        vv = np.concatenate([f64(vc[p]) for p in table[b]], 0)[:n]
        for h in range(H):
            sc = kk[:, h // (H // Hkv)] @ f64(q[b, h]) / np.sqrt(D)
            e = np.exp(sc - sc.max())
            want[b, h] = e @ vv[:, h // (H // Hkv)] / e.sum()
    k = paged_decode(B, H, Hkv, D, page, n_pages, max_pages)
    args = (q, kc, vc, table, lens)
    close(k(*args), want, "float16", D)
    close(simulated(k, *args), want, "float16", D)


# ---------------------------------------------------------------- GEMM + bias + GELU + residual

@tilelang.jit(out_idx=[-1])
def gemm_bias_gelu_res(M, N, K, block_M=32, block_N=32, block_K=32, dtype=T.float16):
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype),
             bias: T.Tensor((N,), T.float32), R: T.Tensor((M, N), dtype),
             C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            a_s = T.alloc_shared((block_M, block_K), dtype)
            b_s = T.alloc_shared((block_K, block_N), dtype)
            r_s = T.alloc_shared((block_M, block_N), dtype)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            out = T.alloc_fragment((block_M, block_N), dtype)
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                T.copy(A[by * block_M, k * block_K], a_s)
                T.copy(B[k * block_K, bx * block_N], b_s)
                T.gemm(a_s, b_s, acc)
            T.copy(R[by * block_M, bx * block_N], r_s)
            for i, j in T.Parallel(block_M, block_N):
                x = acc[i, j] + bias[bx * block_N + j]
                g = 0.5 * x * (1.0 + T.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))
                out[i, j] = T.cast(g + T.cast(r_s[i, j], T.float32), dtype)
            T.copy(out, C[by * block_M, bx * block_N])
    return main


def test_gemm_bias_gelu_residual(tgt):
    M, N, K = 70, 96, 80
    a, b = rand((M, K), "float16", 14, 0.3), rand((K, N), "float16", 15, 0.3)
    bias, r = rand((N,), "float32", 16), rand((M, N), "float16", 17)
    x = f64(a) @ f64(b) + f64(bias)
    want = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))) + f64(r)
    k = gemm_bias_gelu_res(M, N, K)
    close(k(a, b, bias, r), want, "float16", K)
    close(simulated(k, a, b, bias, r), want, "float16", K)


# ---------------------------------------------------------------- causal varlen flash attention

@tilelang.jit(out_idx=[4])
def flash_varlen_causal(batch, H, D, max_seqlen, block_M=32, block_N=32, dtype=T.float16):
    """Packed sequences q/k/v (total, H, D) with boundaries cu_seqlens; causal within each
    sequence. The online-softmax update is a T.macro."""
    total = T.dynamic("total")
    scale = (1.0 / D) ** 0.5 * 1.44269504

    @T.macro
    def rescale(acc_s, acc_o, m, m_prev, l, ls):
        T.copy(m, m_prev)
        T.reduce_max(acc_s, m, dim=1, clear=False)
        for i, j in T.Parallel(block_M, block_N):
            acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m[i] * scale)
        T.reduce_sum(acc_s, ls, dim=1)
        for i in T.Parallel(block_M):
            l[i] = l[i] * T.exp2(m_prev[i] * scale - m[i] * scale) + ls[i]
        for i, j in T.Parallel(block_M, D):
            acc_o[i, j] *= T.exp2(m_prev[i] * scale - m[i] * scale)

    @T.prim_func
    def main(Q: T.Tensor((total, H, D), dtype), K: T.Tensor((total, H, D), dtype),
             V: T.Tensor((total, H, D), dtype), cu_seqlens: T.Tensor((batch + 1,), T.int32),
             O: T.Tensor((total, H, D), dtype)):
        with T.Kernel(T.ceildiv(max_seqlen, block_M), H, batch, threads=128) as (bx, h, b):
            q_s = T.alloc_shared((block_M, D), dtype)
            k_s = T.alloc_shared((block_N, D), dtype)
            v_s = T.alloc_shared((block_N, D), dtype)
            p_s = T.alloc_shared((block_M, block_N), dtype)
            acc_s = T.alloc_fragment((block_M, block_N), T.float32)
            acc_o = T.alloc_fragment((block_M, D), T.float32)
            m = T.alloc_fragment((block_M,), T.float32)
            m_prev = T.alloc_fragment((block_M,), T.float32)
            l = T.alloc_fragment((block_M,), T.float32)
            ls = T.alloc_fragment((block_M,), T.float32)
            start = cu_seqlens[b]
            n = cu_seqlens[b + 1] - start
            if bx * block_M < n:
                for i, d in T.Parallel(block_M, D):
                    q_s[i, d] = T.if_then_else(bx * block_M + i < n,
                                               Q[start + bx * block_M + i, h, d], 0)
                T.fill(acc_o, 0.0)
                T.fill(l, 0.0)
                T.fill(m, -T.infinity(T.float32))
                hi = T.min(T.ceildiv(n, block_N), T.ceildiv((bx + 1) * block_M, block_N))
                for kb in T.Pipelined(hi, num_stages=1):
                    for j, d in T.Parallel(block_N, D):
                        k_s[j, d] = T.if_then_else(kb * block_N + j < n,
                                                   K[start + kb * block_N + j, h, d], 0)
                        v_s[j, d] = T.if_then_else(kb * block_N + j < n,
                                                   V[start + kb * block_N + j, h, d], 0)
                    T.clear(acc_s)
                    T.gemm(q_s, k_s, acc_s, transpose_B=True)
                    for i, j in T.Parallel(block_M, block_N):
                        acc_s[i, j] = T.if_then_else(
                            (kb * block_N + j <= bx * block_M + i) and (kb * block_N + j < n),
                            acc_s[i, j], -T.infinity(T.float32))
                    rescale(acc_s, acc_o, m, m_prev, l, ls)
                    T.copy(acc_s, p_s)
                    T.gemm(p_s, v_s, acc_o)
                for i, d in T.Parallel(block_M, D):
                    if bx * block_M + i < n:
                        O[start + bx * block_M + i, h, d] = acc_o[i, d] / l[i]
    return main


def test_flash_attention_varlen_causal(tgt):
    H, D = 2, 32
    lens = [45, 17, 64]
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    tot = int(cu[-1])
    q, kk, v = (rand((tot, H, D), "float16", s) for s in (22, 23, 24))
    want = np.zeros((tot, H, D))
    for a, e in zip(cu[:-1], cu[1:]):
        n = e - a
        for h in range(H):
            sc = f64(q[a:e, h]) @ f64(kk[a:e, h]).T / np.sqrt(D)
            sc[np.triu_indices(n, 1)] = -np.inf
            p = np.exp(sc - sc.max(1, keepdims=True))
            want[a:e, h] = (p / p.sum(1, keepdims=True)) @ f64(v[a:e, h])
    k = flash_varlen_causal(len(lens), H, D, max(lens))
    close(k(q, kk, v, cu), want, "float16", D)
    close(simulated(k, q, kk, v, cu), want, "float16", D)


# ---------------------------------------------------------------- split-K GEMM, dynamic M

@tilelang.jit
def splitk_gemm(M_blocks, N, K, split_k=3, block_M=32, block_N=32, block_K=32):
    """C (float32, zeroed by the caller) += A @ B with K split over the grid's third axis;
    M is a dynamic shape."""
    M = T.dynamic("M")
    per_split = K // split_k

    @T.prim_func
    def main(A: T.Tensor((M, K), T.bfloat16), B: T.Tensor((N, K), T.bfloat16),
             C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), split_k,
                      threads=128) as (bx, by, bz):
            a_s = T.alloc_shared((block_M, block_K), T.bfloat16)
            b_s = T.alloc_shared((block_N, block_K), T.bfloat16)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(per_split, block_K), num_stages=2):
                T.copy(A[by * block_M, bz * per_split + k * block_K], a_s)
                T.copy(B[bx * block_N, bz * per_split + k * block_K], b_s)
                T.gemm(a_s, b_s, acc, transpose_B=True)
            for i, j in T.Parallel(block_M, block_N):
                if by * block_M + i < M:
                    T.atomic_add(C[by * block_M + i, bx * block_N + j], acc[i, j])
    return main


def test_splitk_gemm_dynamic_m(tgt):
    N, K = 64, 192
    k = splitk_gemm(None, N, K)
    b = rand((N, K), "bfloat16", 25)
    for M in (50, 96):
        a = rand((M, K), "bfloat16", 26 + M)
        want = f64(a) @ f64(b).T
        c = np.zeros((M, N), np.float32)
        k(a, b, c)
        close(c, want, "float32", K)
        c = np.zeros((M, N), np.float32)
        k.simulate(a, b, c)
        close(c, want, "float32", K)


# ---------------------------------------------------------------- fp8 e4m3 block-scaled GEMM

@tilelang.jit(out_idx=[-1])
def fp8_block_scaled_gemm(M, N, K, block_M=32, block_N=128, block_K=128, widen=False):
    """C = (A * sa) @ (B * sb)^T with DeepSeek-V3 scales: sa per token and 128-wide K block,
    sb per 128x128 block of B; each K block's product is scaled into a float32 accumulator.
    `widen`: the fp8 tiles are converted to bfloat16 before the gemm."""
    fp8, op = T.float8_e4m3fn, (T.bfloat16 if widen else T.float8_e4m3fn)

    @T.prim_func
    def main(A: T.Tensor((M, K), fp8), B: T.Tensor((N, K), fp8),
             sa: T.Tensor((M, K // 128), T.float32), sb: T.Tensor((N // 128, K // 128), T.float32),
             C: T.Tensor((M, N), T.bfloat16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            a8 = T.alloc_shared((block_M, block_K), fp8)
            b8 = T.alloc_shared((block_N, block_K), fp8)
            a_s = T.alloc_shared((block_M, block_K), op)
            b_s = T.alloc_shared((block_N, block_K), op)
            part = T.alloc_fragment((block_M, block_N), T.float32)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            out = T.alloc_fragment((block_M, block_N), T.bfloat16)
            T.clear(acc)
            for k in T.Pipelined(K // block_K, num_stages=2):
                if widen:
                    T.copy(A[by * block_M, k * block_K], a8)
                    T.copy(B[bx * block_N, k * block_K], b8)
                    T.copy(a8, a_s)
                    T.copy(b8, b_s)
                else:
                    T.copy(A[by * block_M, k * block_K], a_s)
                    T.copy(B[bx * block_N, k * block_K], b_s)
                T.gemm(a_s, b_s, part, transpose_B=True, clear_accum=True)
                for i, j in T.Parallel(block_M, block_N):
                    acc[i, j] += part[i, j] * sa[by * block_M + i, k] * sb[bx, k]
            T.copy(acc, out)
            T.copy(out, C[by * block_M, bx * block_N])
    return main


def _fp8_inputs(M, N, K):
    import ml_dtypes
    a = rand((M, K), "float32", 30).astype(ml_dtypes.float8_e4m3fn)
    b = rand((N, K), "float32", 31).astype(ml_dtypes.float8_e4m3fn)
    sa = np.exp(rand((M, K // 128), "float32", 32, 0.5))
    sb = np.exp(rand((N // 128, K // 128), "float32", 33, 0.5))
    sae = np.repeat(f64(sa), 128, 1)
    sbe = np.repeat(np.repeat(f64(sb), 128, 0), 128, 1)
    want = (f64(a) * sae) @ (f64(b) * sbe).T
    return (a, b, sa, sb), want


def test_fp8_block_scaled_gemm(tgt, monkeypatch):
    M, N, K = 48, 128, 256
    args, want = _fp8_inputs(M, N, K)
    k = fp8_block_scaled_gemm(M, N, K, widen=True)  # the 910b cube: bf16 tiles
    close(k(*args), want, "bfloat16", K)
    close(simulated(k, *args), want, "bfloat16", K)
    with pytest.raises(CompileError, match="float8_e4m3fn.*910b|910b.*FP8") as err:
        fp8_block_scaled_gemm(M, N, K)
    assert "test_user_kernels_tl_gemm.py" in str(err.value)
    monkeypatch.setenv("TILELANG_MINI_CHIP", "ascend950")  # its cube takes fp8
    k = fp8_block_scaled_gemm(M, N, K)
    close(k(*args), want, "bfloat16", K)
    close(simulated(k, *args), want, "bfloat16", K)


# ---------------------------------------------------------------- SwiGLU MLP (eager)

@tilelang.jit
def swiglu_mlp(X, Wg, Wu, block_M=32, block_N=32, block_K=32):
    """Y = silu(X @ Wg) * (X @ Wu): two gemms over one X tile, the gate in the epilogue."""
    M, N, K = T.const("M, N, K")
    X: T.Tensor((M, K), T.float16)
    Wg: T.Tensor((K, N), T.float16)
    Wu: T.Tensor((K, N), T.float16)
    Y = T.empty((M, N), T.float16)
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
        x_s = T.alloc_shared((block_M, block_K), T.float16)
        g_s = T.alloc_shared((block_K, block_N), T.float16)
        u_s = T.alloc_shared((block_K, block_N), T.float16)
        g = T.alloc_fragment((block_M, block_N), T.float32)
        u = T.alloc_fragment((block_M, block_N), T.float32)
        y = T.alloc_fragment((block_M, block_N), T.float16)
        T.clear(g)
        T.clear(u)
        for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
            T.copy(X[by * block_M, k * block_K], x_s)
            T.copy(Wg[k * block_K, bx * block_N], g_s)
            T.copy(Wu[k * block_K, bx * block_N], u_s)
            T.gemm(x_s, g_s, g)
            T.gemm(x_s, u_s, u)
        for i, j in T.Parallel(block_M, block_N):
            y[i, j] = g[i, j] * T.sigmoid(g[i, j]) * u[i, j]
        T.copy(y, Y[by * block_M, bx * block_N])
    return Y


def test_swiglu_mlp(tgt):
    M, N, K = 40, 64, 96
    x = rand((M, K), "float16", 34, 0.5)
    wg, wu = rand((K, N), "float16", 35, 0.3), rand((K, N), "float16", 36, 0.3)
    g, u = f64(x) @ f64(wg), f64(x) @ f64(wu)
    want = g / (1 + np.exp(-g)) * u
    close(swiglu_mlp(x, wg, wu), want, "float16", K)
    close(simulated(swiglu_mlp.compile(x, wg, wu), x, wg, wu), want, "float16", K)


def test_fp16_accumulator_is_a_located_error(tgt):
    """A CUDA habit: a float16 gemm accumulator. The cube's L0C accumulates in float32."""

    @T.prim_func
    def main(A: T.Tensor((32, 32), T.float16), B: T.Tensor((32, 32), T.float16),
             C: T.Tensor((32, 32), T.float16)):
        with T.Kernel(1, threads=128) as _:
            a = T.alloc_shared((32, 32), T.float16)
            b = T.alloc_shared((32, 32), T.float16)
            acc = T.alloc_fragment((32, 32), T.float16)
            T.copy(A, a)
            T.copy(B, b)
            T.clear(acc)
            T.gemm(a, b, acc)
            T.copy(acc, C)

    with pytest.raises(CompileError, match=r"L0C has no float16 accumulator.*as float32") as e:
        tilelang.compile(main, out_idx=[-1])
    assert "test_user_kernels_tl_gemm.py" in str(e.value) and "T.gemm(a, b, acc)" in str(e.value)


# ---------------------------------------------------------------- W4A16 GEMM (uint8-packed int4)

@tilelang.jit(out_idx=[-1])
def w4a16_gemm(M, N, K, block_M=32, block_N=32, block_K=64, group=32):
    """C = A @ W^T, W's int4 codes (offset 8) packed two a byte, low nibble first, with a
    float16 scale per output channel and group of `group` K elements."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), Wp: T.Tensor((N, K // 2), T.uint8),
             s: T.Tensor((N, K // group), T.float16), C: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            a_s = T.alloc_shared((block_M, block_K), T.float16)
            wp_s = T.alloc_shared((block_N, block_K // 2), T.uint8)
            w_s = T.alloc_shared((block_N, block_K), T.float16)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(acc)
            for k in T.Pipelined(K // block_K, num_stages=2):
                T.copy(A[by * block_M, k * block_K], a_s)
                T.copy(Wp[bx * block_N, k * block_K // 2], wp_s)
                for i, j in T.Parallel(block_N, block_K):
                    q = (wp_s[i, j // 2] >> ((j % 2) * 4)) & 0xF
                    w_s[i, j] = T.cast((T.cast(q, T.float32) - 8.0)
                                       * s[bx * block_N + i, (k * block_K + j) // group],
                                       T.float16)
                T.gemm(a_s, w_s, acc, transpose_B=True)
            T.copy(acc, C[by * block_M, bx * block_N])
    return main


def test_w4a16_gemm(tgt):
    M, N, K, group = 40, 64, 128, 32
    a = rand((M, K), "float16", 50, 0.5)
    rng = np.random.default_rng(51)
    q = rng.integers(0, 16, (N, K)).astype(np.uint8)
    wp = (q[:, 0::2] | (q[:, 1::2] << 4)).astype(np.uint8)
    s = (rng.random((N, K // group)) * 0.1).astype(np.float16)
    w = (f64(q) - 8) * np.repeat(f64(s), group, 1)
    want = f64(a) @ w.T
    k = w4a16_gemm(M, N, K)
    close(k(a, wp, s), want, "float16", K)
    close(simulated(k, a, wp, s), want, "float16", K)


# ---------------------------------------------------------------- sliding-window ALiBi attention

@tilelang.jit(out_idx=[-1])
def swa_alibi(S, D, window, slope, block_M=16, block_N=16):
    """Causal attention over the last `window` keys with an ALiBi bias -slope * distance; the
    key loop starts at the first block the window reaches (T.Pipelined(start, stop))."""
    scale = 1.0 / D ** 0.5

    @T.prim_func
    def main(Q: T.Tensor((S, D), T.float16), K: T.Tensor((S, D), T.float16),
             V: T.Tensor((S, D), T.float16), O: T.Tensor((S, D), T.float32)):
        with T.Kernel(T.ceildiv(S, block_M), threads=128) as bx:
            q = T.alloc_shared((block_M, D), T.float16)
            k = T.alloc_shared((block_N, D), T.float16)
            v = T.alloc_shared((block_N, D), T.float16)
            s = T.alloc_fragment((block_M, block_N), T.float32)
            p = T.alloc_fragment((block_M, block_N), T.float16)
            o = T.alloc_fragment((block_M, D), T.float32)
            m = T.alloc_fragment((block_M,), T.float32)
            mp = T.alloc_fragment((block_M,), T.float32)
            l = T.alloc_fragment((block_M,), T.float32)
            ls = T.alloc_fragment((block_M,), T.float32)
            T.copy(Q[bx * block_M, 0], q)
            T.fill(o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(T.float32))
            lo = T.max(0, (bx * block_M - window + 1) // block_N)
            hi = T.ceildiv((bx + 1) * block_M, block_N)
            for kb in T.Pipelined(lo, hi, num_stages=2):
                T.copy(K[kb * block_N, 0], k)
                T.copy(V[kb * block_N, 0], v)
                T.clear(s)
                T.gemm(q, k, s, transpose_B=True)
                for i, j in T.Parallel(block_M, block_N):
                    dist = bx * block_M + i - kb * block_N - j
                    s[i, j] = T.if_then_else((dist >= 0) & (dist < window),
                                             s[i, j] * scale - slope * dist, -1e30)
                online_softmax(s, o, m, mp, l, ls)
                T.copy(s, p)
                T.gemm(p, v, o)
            for i, d in T.Parallel(block_M, D):
                o[i, d] /= l[i]
            T.copy(o, O[bx * block_M, 0])
    return main


def test_sliding_window_alibi_attention(tgt):
    S, D, window, slope = 64, 32, 20, 0.1
    q, kk, v = (rand((S, D), "float16", s) for s in (52, 53, 54))
    sc = f64(q) @ f64(kk).T / np.sqrt(D)
    ii, jj = np.indices((S, S))
    sc = np.where((jj <= ii) & (ii - jj < window), sc - slope * (ii - jj), -np.inf)
    p = np.exp(sc - sc.max(1, keepdims=True))
    want = p / p.sum(1, keepdims=True) @ f64(v)
    k = swa_alibi(S, D, window, slope)
    close(k(q, kk, v), want, "float16", D)
    close(simulated(k, q, kk, v), want, "float16", D)


# ---------------------------------------------------------------- fused MoE expert GEMM

@tilelang.jit
def moe_expert_gemm(n_tok, E, D, F, topk, block_M=16, block_N=32, block_K=32):
    """Token slots (t * topk + k) sorted by expert, expert e's segment
    sorted_ids[off[e]:off[e + 1]]: rows of X gathered into the A tile, times W[e], scattered
    back into Y weighted by the routing weight (atomic adds: a token meets topk experts)."""

    @T.prim_func
    def main(X: T.Tensor((n_tok, D), T.float16), W: T.Tensor((E, D, F), T.float16),
             sorted_ids: T.Tensor((n_tok * topk,), T.int32), off: T.Tensor((E + 1,), T.int32),
             weights: T.Tensor((n_tok * topk,), T.float32), Y: T.Tensor((n_tok, F), T.float32)):
        with T.Kernel(T.ceildiv(F, block_N), T.ceildiv(n_tok * topk, block_M), E,
                      threads=128) as (bx, by, e):
            start = off[e]
            cnt = off[e + 1] - start
            if by * block_M < cnt:
                a = T.alloc_shared((block_M, block_K), T.float16)
                w = T.alloc_shared((block_K, block_N), T.float16)
                acc = T.alloc_fragment((block_M, block_N), T.float32)
                T.clear(acc)
                for k in T.Pipelined(T.ceildiv(D, block_K), num_stages=2):
                    for i, j in T.Parallel(block_M, block_K):
                        a[i, j] = T.if_then_else(
                            by * block_M + i < cnt,
                            X[sorted_ids[start + by * block_M + i] // topk, k * block_K + j], 0)
                    T.copy(W[e, k * block_K, bx * block_N], w)
                    T.gemm(a, w, acc)
                for i, j in T.Parallel(block_M, block_N):
                    if by * block_M + i < cnt:
                        slot = sorted_ids[start + by * block_M + i]
                        T.atomic_add(Y[slot // topk, bx * block_N + j], acc[i, j] * weights[slot])
    return main


def test_fused_moe_expert_gemm(tgt):
    n_tok, E, D, F, topk = 20, 4, 64, 64, 2
    rng = np.random.default_rng(60)
    x = rand((n_tok, D), "float16", 61)
    w = rand((E, D, F), "float16", 62, 0.2)
    experts = np.stack([rng.choice(E, topk, replace=False) for _ in range(n_tok)]).reshape(-1)
    wts = rng.random(n_tok * topk).astype(np.float32)
    sorted_ids = np.argsort(experts, kind="stable").astype(np.int32)
    off = np.concatenate([[0], np.cumsum(np.bincount(experts, minlength=E))]).astype(np.int32)
    want = np.zeros((n_tok, F))
    for slot, ex in enumerate(experts):
        want[slot // topk] += wts[slot] * (f64(x[slot // topk]) @ f64(w[ex]))
    k = moe_expert_gemm(n_tok, E, D, F, topk)
    for run in (k, k.simulate):
        y = np.zeros((n_tok, F), np.float32)
        run(x, w, sorted_ids, off, wts, y)
        close(y, want, "float32", D)
