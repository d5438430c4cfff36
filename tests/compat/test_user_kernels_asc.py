"""Kernels written from scratch in tilelang-ascend's developer mode (issue #10: a kernel
engineer's own kernels, not ports of the examples): T.alloc_shared/alloc_fragment/alloc_ub/
alloc_L1/alloc_L0C mixed, the compiler splitting the cube and vector work and placing every
flag. Each runs on every target and, on the numpy parametrisation, on the simulator of both
chips, against float64 NumPy references. Expert mode: test_user_kernels_asc_expert.py; the
T.tile vector ops: test_user_kernels_asc_tile.py."""
import numpy as np

import tilelang_mini.language as T

from util import f64, rand, run_all


# 1. developer mode: GEMM, then bias (per column), relu, per-row scale, fp16 output ----------

def gemm_bias_relu_rowscale(M, N, K, bm=32, bn=32, bk=32):
    n_num = N // bn

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
             Bias: T.Tensor((N,), T.float32), Scale: T.Tensor((M,), T.float32),
             C: T.Tensor((M, N), T.float16)):
        with T.Kernel((M // bm) * n_num, is_npu=True) as (cid, vid):
            bx = cid // n_num
            by = cid % n_num
            a_s = T.alloc_shared((bm, bk), "float16")
            b_s = T.alloc_shared((bk, bn), "float16")
            acc = T.alloc_fragment((bm, bn), "float32")
            c_ub = T.alloc_ub((bm, bn), "float32")
            bias = T.alloc_ub((bn,), "float32")
            bias2 = T.alloc_ub((bm, bn), "float32")
            sc = T.alloc_ub((bm,), "float32")
            out = T.alloc_ub((bm, bn), "float16")
            for k in T.serial(T.ceildiv(K, bk)):
                T.copy(A[bx * bm, k * bk], a_s)
                T.copy(B[k * bk, by * bn], b_s)
                T.gemm_v0(a_s, b_s, acc, init=(k == 0))
            T.copy(acc, c_ub)
            T.copy(Bias[by * bn], bias)
            T.copy(Scale[bx * bm], sc)
            T.tile.broadcast(bias2, bias)
            T.tile.add(c_ub, c_ub, bias2)
            T.tile.relu(c_ub, c_ub)
            T.tile.row_expand_mul(c_ub, c_ub, sc)
            T.tile.cast(out, c_ub, "CAST_RINT", bm * bn)
            T.copy(out, C[bx * bm, by * bn])
    return main


def test_gemm_bias_relu_rowscale(target):
    M, N, K = 64, 64, 96
    a, b = rand((M, K), "float16", 1), rand((K, N), "float16", 2)
    bias, sc = rand((N,), seed=3), rand((M,), seed=4)
    want = np.maximum(f64(a) @ f64(b) + f64(bias), 0) * f64(sc)[:, None]
    run_all(target, gemm_bias_relu_rowscale(M, N, K), [-1], (a, b, bias, sc), [want],
            ["float16"], K)


# 2. developer mode: attention with online softmax, O and the row log-sum-exp ----------------

def attention_lse(S, D, bm=32, bn=32):
    scale = 1.0 / D ** 0.5

    @T.prim_func
    def main(Q: T.Tensor((S, D), T.float16), K: T.Tensor((S, D), T.float16),
             V: T.Tensor((S, D), T.float16), O: T.Tensor((S, D), T.float32),
             L: T.Tensor((S,), T.float32)):
        with T.Kernel(S // bm, is_npu=True) as (cid, vid):
            q = T.alloc_shared((bm, D), "float16")
            k = T.alloc_shared((bn, D), "float16")
            v = T.alloc_shared((bn, D), "float16")
            p16 = T.alloc_shared((bm, bn), "float16")
            s_acc = T.alloc_fragment((bm, bn), "float32")
            pv_acc = T.alloc_fragment((bm, D), "float32")
            s = T.alloc_ub((bm, bn), "float32")
            pv = T.alloc_ub((bm, D), "float32")
            o = T.alloc_ub((bm, D), "float32")
            m = T.alloc_ub((bm,), "float32")
            m_old = T.alloc_ub((bm,), "float32")
            l = T.alloc_ub((bm,), "float32")
            l_new = T.alloc_ub((bm,), "float32")
            T.tile.fill(o, 0.0)
            T.tile.fill(l, 0.0)
            T.tile.fill(m, -1e30)
            T.copy(Q[cid * bm, 0], q)
            for j in T.serial(S // bn):
                T.copy(K[j * bn, 0], k)
                T.copy(V[j * bn, 0], v)
                T.gemm_v0(q, k, s_acc, transpose_B=True, init=True)
                T.copy(s_acc, s)
                T.tile.mul(s, s, scale)
                T.copy(m, m_old)
                T.reduce_max(s, l_new, dim=-1)
                T.tile.max(m, m, l_new)
                T.tile.row_expand_sub(s, s, m)
                T.tile.exp(s, s)
                T.tile.sub(m_old, m_old, m)
                T.tile.exp(m_old, m_old)         # the rescale factor
                T.reduce_sum(s, l_new, dim=-1)
                T.tile.mul(l, l, m_old)
                T.tile.add(l, l, l_new)
                T.copy(s, p16)
                T.gemm_v0(p16, v, pv_acc, init=True)
                T.copy(pv_acc, pv)
                for r in T.serial(bm):
                    T.tile.mul(o[r, :], o[r, :], m_old[r])
                T.tile.add(o, o, pv)
            T.tile.row_expand_div(o, o, l)
            T.copy(o, O[cid * bm, 0])
            T.tile.ln(l, l)
            T.tile.add(l, l, m)
            T.copy(l, L[cid * bm])
    return main


def test_attention_online_softmax_lse(target):
    S, D = 64, 32
    q, k, v = (rand((S, D), "float16", i) for i in (5, 6, 7))
    s = f64(q) @ f64(k).T / np.sqrt(D)
    mx = s.max(1, keepdims=True)
    e = np.exp(s - mx)
    want_o = e / e.sum(1, keepdims=True) @ f64(v)
    want_l = np.log(e.sum(1)) + mx[:, 0]
    run_all(target, attention_lse(S, D), [3, 4], (q, k, v), [want_o, want_l],
            ["float16", "float32"], S)


# 3. developer mode: RMSNorm of X feeding a GEMM with W ------------------------------------

def rmsnorm_gemm(M, N, K, bm=32, bn=32, eps=1e-6):
    n_num = N // bn

    @T.prim_func
    def main(X: T.Tensor((M, K), T.float32), G: T.Tensor((K,), T.float32),
             W: T.Tensor((K, N), T.float16), Y: T.Tensor((M, N), T.float32)):
        with T.Kernel((M // bm) * n_num, is_npu=True) as (cid, vid):
            bx = cid // n_num
            by = cid % n_num
            x = T.alloc_ub((bm, K), "float32")
            sq = T.alloc_ub((bm, K), "float32")
            g = T.alloc_ub((K,), "float32")
            g2 = T.alloc_ub((bm, K), "float32")
            ss = T.alloc_ub((bm,), "float32")
            xh = T.alloc_ub((bm, K), "float16")
            x_l1 = T.alloc_L1((bm, K), "float16")
            w_l1 = T.alloc_L1((K, bn), "float16")
            acc = T.alloc_L0C((bm, bn), "float32")
            T.copy(X[bx * bm, 0], x)
            T.copy(G[0], g)
            T.tile.mul(sq, x, x)
            T.reduce_sum(sq, ss, dim=-1)
            T.tile.mul(ss, ss, 1.0 / K)
            T.tile.add(ss, ss, eps)
            T.tile.rsqrt(ss, ss)
            T.tile.row_expand_mul(x, x, ss)
            T.tile.broadcast(g2, g)
            T.tile.mul(x, x, g2)
            T.tile.cast(xh, x, "CAST_RINT", bm * K)
            T.copy(xh, x_l1)
            T.copy(W[0, by * bn], w_l1)
            T.gemm_v0(x_l1, w_l1, acc, init=True)
            T.copy(acc, Y[bx * bm, by * bn])
    return main


def test_rmsnorm_feeding_gemm(target):
    M, N, K = 64, 64, 64
    x, g, w = rand((M, K), seed=8), rand((K,), seed=9), rand((K, N), "float16", 10)
    xn = f64(x) / np.sqrt((f64(x) ** 2).mean(1, keepdims=True) + 1e-6) * f64(g)
    want = xn.astype(np.float16).astype(np.float64) @ f64(w)
    run_all(target, rmsnorm_gemm(M, N, K), [-1], (x, g, w), [want], ["float16"], K)


# 4. vector only: a row loop split over the two vector cores by vid (LayerNorm) ---------------

def layernorm_rows(M, N, bm=16, eps=1e-5):
    half = bm // 2

    @T.prim_func
    def main(X: T.Tensor((M, N), T.float16), Gm: T.Tensor((N,), T.float32),
             Bt: T.Tensor((N,), T.float32), Y: T.Tensor((M, N), T.float16)):
        with T.Kernel(M // bm, is_npu=True) as (cid, vid):
            xh = T.alloc_ub((half, N), "float16")
            x = T.alloc_ub((half, N), "float32")
            t = T.alloc_ub((half, N), "float32")
            g = T.alloc_ub((N,), "float32")
            b = T.alloc_ub((N,), "float32")
            mean = T.alloc_ub((half,), "float32")
            var = T.alloc_ub((half,), "float32")
            r0 = cid * bm + vid * half
            T.copy(X[r0, 0], xh)
            T.copy(Gm[0], g)
            T.copy(Bt[0], b)
            T.tile.cast(x, xh, "CAST_NONE", half * N)
            T.reduce_sum(x, mean, dim=-1)
            T.tile.mul(mean, mean, 1.0 / N)
            for r in T.serial(half):
                T.tile.sub(x[r, :], x[r, :], mean[r])
            T.tile.mul(t, x, x)
            T.reduce_sum(t, var, dim=-1)
            T.tile.mul(var, var, 1.0 / N)
            T.tile.add(var, var, eps)
            T.tile.rsqrt(var, var)
            for r in T.serial(half):
                T.tile.mul(x[r, :], x[r, :], var[r])
                T.tile.mul(x[r, :], x[r, :], g)
                T.tile.add(x[r, :], x[r, :], b)
            T.tile.cast(xh, x, "CAST_RINT", half * N)
            T.copy(xh, Y[r0, 0])
    return main


def test_layernorm_rows_over_vid(target):
    M, N = 32, 64
    x, g, b = rand((M, N), "float16", 11), rand((N,), seed=12), rand((N,), seed=13)
    xd = f64(x)
    mu = xd.mean(1, keepdims=True)
    want = (xd - mu) / np.sqrt(((xd - mu) ** 2).mean(1, keepdims=True) + 1e-5) * f64(g) + f64(b)
    run_all(target, layernorm_rows(M, N), [-1], (x, g, b), [want], ["float16"])


# 5. developer mode: scalars read from GM used by the cube (trip count) and vector (scale) --

def scaled_partial_gemm(Bn, M, N, K, bk=32):
    @T.prim_func
    def main(A: T.Tensor((Bn, M, K), T.float16), B: T.Tensor((Bn, K, N), T.float16),
             Kt: T.Tensor((Bn,), T.int32), Sc: T.Tensor((Bn,), T.float32),
             C: T.Tensor((Bn, M, N), T.float32)):
        with T.Kernel(Bn, is_npu=True) as (cid, vid):
            a_l1 = T.alloc_L1((M, bk), "float16")
            b_l1 = T.alloc_L1((bk, N), "float16")
            acc = T.alloc_L0C((M, N), "float32")
            c = T.alloc_ub((M, N), "float32")
            nk = Kt[cid]
            s = Sc[cid]
            T.tile.fill(c, 0.0)
            for k in T.serial(nk):
                T.copy(A[cid, 0, k * bk], a_l1)
                T.copy(B[cid, k * bk, 0], b_l1)
                T.gemm_v0(a_l1, b_l1, acc, init=(k == 0))
            if nk > 0:
                T.copy(acc, c)
            T.tile.mul(c, c, s)
            T.copy(c, C[cid, 0, 0])
    return main


def test_scalars_read_by_both_cores(target):
    Bn, M, N, K, bk = 3, 32, 32, 96, 32
    a, b = rand((Bn, M, K), "float16", 14), rand((Bn, K, N), "float16", 15)
    kt = np.array([3, 1, 0], np.int32)
    sc = np.array([0.5, -2.0, 3.0], np.float32)
    want = np.stack([f64(a[i, :, :kt[i] * bk]) @ f64(b[i, :kt[i] * bk]) * sc[i]
                     for i in range(Bn)])
    run_all(target, scaled_partial_gemm(Bn, M, N, K), [-1], (a, b, kt, sc), [want],
            ["float16"], K)


# 6. developer mode: a two-layer MLP, relu(X W1) W2; the hidden tile goes vector -> cube ----

def mlp2(M, D, H, bm=32):
    @T.prim_func
    def main(X: T.Tensor((M, D), T.float16), W1: T.Tensor((D, H), T.float16),
             W2: T.Tensor((H, D), T.float16), Y: T.Tensor((M, D), T.float32)):
        with T.Kernel(M // bm, is_npu=True) as (cid, vid):
            x = T.alloc_shared((bm, D), "float16")
            w1 = T.alloc_shared((D, H), "float16")
            w2 = T.alloc_shared((H, D), "float16")
            h_acc = T.alloc_fragment((bm, H), "float32")
            y_acc = T.alloc_fragment((bm, D), "float32")
            h = T.alloc_shared((bm, H), "float32")
            h16 = T.alloc_shared((bm, H), "float16")
            T.copy(X[cid * bm, 0], x)
            T.copy(W1[0, 0], w1)
            T.copy(W2[0, 0], w2)
            T.gemm(x, w1, h_acc, clear_accum=True)
            T.copy(h_acc, h)
            for i, j in T.Parallel(bm, H):
                h16[i, j] = T.max(h[i, j], 0.0)
            T.gemm(h16, w2, y_acc, clear_accum=True)
            T.copy(y_acc, Y[cid * bm, 0])
    return main


def test_mlp_vector_between_gemms(target):
    M, D, H = 64, 32, 64
    x, w1, w2 = rand((M, D), "float16", 28), rand((D, H), "float16", 29), \
        rand((H, D), "float16", 30)
    hid = np.maximum(f64(x) @ f64(w1), 0).astype(np.float16).astype(np.float64)
    run_all(target, mlp2(M, D, H), [-1], (x, w1, w2), [hid @ f64(w2)], ["float16"], H * 2)


# 7. developer mode: int8 weights dequantised on the vector unit per K tile, then the cube ---

def dequant_gemm(M, N, K, bk=32):
    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), Wq: T.Tensor((K, N), T.int8),
             Sc: T.Tensor((N,), T.float32), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_L1((M, bk), "float16")
            wq = T.alloc_ub((bk, N), "int8")
            wh = T.alloc_ub((bk, N), "float16")
            w_l1 = T.alloc_L1((bk, N), "float16")
            acc = T.alloc_L0C((M, N), "float32")
            c = T.alloc_ub((M, N), "float32")
            sc = T.alloc_ub((N,), "float32")
            scb = T.alloc_ub((M, N), "float32")
            for k in T.serial(K // bk):
                T.copy(Wq[k * bk, 0], wq)
                T.tile.cast(wh, wq, "CAST_NONE", bk * N)
                T.copy(wh, w_l1)
                T.copy(A[0, k * bk], a)
                T.gemm_v0(a, w_l1, acc, init=(k == 0))
            T.copy(acc, c)
            T.copy(Sc[0], sc)
            T.tile.broadcast(scb, sc)
            T.tile.mul(c, c, scb)
            T.copy(c, C[0, 0])
    return main


def test_dequant_gemm_vector_to_cube_in_loop(target):
    M, N, K = 32, 32, 96
    a = rand((M, K), "float16", 31)
    wq = np.random.default_rng(32).integers(-8, 8, (K, N)).astype(np.int8)
    sc = rand((N,), seed=33, scale=0.1)
    want = f64(a) @ f64(wq) * f64(sc)
    run_all(target, dequant_gemm(M, N, K), [-1], (a, wq, sc), [want], ["float16"], K * 8)


# 8. developer mode, vector only, no vid: a row loop the compiler splits over the two cores --

def rows_l2_normalize(M, N, bm=16):
    @T.prim_func
    def main(X: T.Tensor((M, N), T.float32), Y: T.Tensor((M, N), T.float32)):
        with T.Kernel(M // bm, is_npu=True) as (cid, vid):
            x = T.alloc_shared((bm, N), "float32")
            sq = T.alloc_fragment((bm, N), "float32")
            nrm = T.alloc_fragment((bm,), "float32")
            T.copy(X[cid * bm, 0], x)
            for i, j in T.Parallel(bm, N):
                sq[i, j] = x[i, j] * x[i, j]
            T.reduce_sum(sq, nrm, dim=1)
            for i in T.Parallel(bm):
                nrm[i] = T.rsqrt(nrm[i] + 1e-6)
            for r in T.serial(bm):
                T.tile.mul(x[r, :], x[r, :], nrm[r])
            T.copy(x, Y[cid * bm, 0])
    return main


def test_rows_normalize_split_by_compiler(target):
    M, N = 48, 32
    x = rand((M, N), seed=34)
    want = f64(x) / np.sqrt((f64(x) ** 2).sum(1, keepdims=True) + 1e-6)
    run_all(target, rows_l2_normalize(M, N), [-1], (x,), [want], ["float32"])


# 9. developer mode: a grouped GEMM; group offsets read from GM address both cores' copies ---

def grouped_gemm(G, M, N, K, bm=16):
    @T.prim_func
    def main(A: T.Tensor((G * M, K), T.float16), B: T.Tensor((G, K, N), T.float16),
             Off: T.Tensor((G,), T.int32), Bias: T.Tensor((G * M, N), T.float32),
             C: T.Tensor((G * M, N), T.float32)):
        with T.Kernel(G, is_npu=True) as (cid, vid):
            a = T.alloc_L1((bm, K), "float16")
            b = T.alloc_L1((K, N), "float16")
            acc = T.alloc_L0C((bm, N), "float32")
            c = T.alloc_ub((bm, N), "float32")
            d = T.alloc_ub((bm, N), "float32")
            row = Off[cid]
            T.copy(B[cid, 0, 0], b)
            for t in T.serial(M // bm):
                T.copy(A[row + t * bm, 0], a)
                T.gemm_v0(a, b, acc, init=True)
                T.copy(acc, c)
                T.copy(Bias[row + t * bm, 0], d)
                T.tile.add(c, c, d)
                T.tile.tanh(c, c)
                T.copy(c, C[row + t * bm, 0])
    return main


def test_grouped_gemm_runtime_offsets(target):
    G, M, N, K = 3, 32, 32, 32
    a, b = rand((G * M, K), "float16", 35), rand((G, K, N), "float16", 36)
    off = np.array([64, 0, 32], np.int32)          # a permutation of the row blocks
    bias = rand((G * M, N), seed=37)
    want = np.zeros((G * M, N))
    for g in range(G):
        rs = slice(off[g], off[g] + M)
        want[rs] = np.tanh(f64(a[rs]) @ f64(b[g]) + f64(bias[rs]))
    run_all(target, grouped_gemm(G, M, N, K), [-1], (a, b, off, bias), [want], ["float16"], K)


# 10. developer mode: a GEMM whose result is written transposed through T.tile.transpose -----

def gemm_transposed_out(M, N, K, bm=32, bn=32):
    n_num = N // bn

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
             CT: T.Tensor((N, M), T.float32)):
        with T.Kernel((M // bm) * n_num, is_npu=True) as (cid, vid):
            bx = cid // n_num
            by = cid % n_num
            a = T.alloc_L1((bm, K), "float16")
            b = T.alloc_L1((K, bn), "float16")
            acc = T.alloc_L0C((bm, bn), "float32")
            c = T.alloc_ub((bm, bn), "float32")
            ct = T.alloc_ub((bn, bm), "float32")
            T.copy(A[bx * bm, 0], a)
            T.copy(B[0, by * bn], b)
            T.gemm_v0(a, b, acc, init=True)
            T.copy(acc, c)
            T.tile.transpose(ct, c)
            T.tile.add(ct, ct, 1.0)
            T.copy(ct, CT[by * bn, bx * bm])
    return main


def test_gemm_transposed_output(target):
    """T.tile.transpose (tilelang-ascend's UB transpose) was a located "not supported" error."""
    M, N, K = 64, 64, 32
    a, b = rand((M, K), "float16", 38), rand((K, N), "float16", 39)
    run_all(target, gemm_transposed_out(M, N, K), [-1], (a, b), [(f64(a) @ f64(b)).T + 1],
            ["float16"], K)


# 11. developer mode: causal attention; the KV loop's trip count reads the block index, the
#     diagonal block masked in a T.Parallel map, GPU-style fragments and T.fill ---------------

def causal_attention(S, D, bm=32):
    scale = 1.0 / D ** 0.5

    @T.prim_func
    def main(Q: T.Tensor((S, D), T.float16), K: T.Tensor((S, D), T.float16),
             V: T.Tensor((S, D), T.float16), O: T.Tensor((S, D), T.float16)):
        with T.Kernel(S // bm, is_npu=True) as (cid, vid):
            q = T.alloc_shared((bm, D), "float16")
            k = T.alloc_shared((bm, D), "float16")
            v = T.alloc_shared((bm, D), "float16")
            p16 = T.alloc_shared((bm, bm), "float16")
            s_acc = T.alloc_fragment((bm, bm), "float32")
            pv_acc = T.alloc_fragment((bm, D), "float32")
            s = T.alloc_fragment((bm, bm), "float32")
            pv = T.alloc_fragment((bm, D), "float32")
            o = T.alloc_fragment((bm, D), "float32")
            o16 = T.alloc_fragment((bm, D), "float16")
            m = T.alloc_fragment((bm,), "float32")
            m_new = T.alloc_fragment((bm,), "float32")
            lsum = T.alloc_fragment((bm,), "float32")
            rs = T.alloc_fragment((bm,), "float32")
            T.fill(o, 0.0)
            T.fill(lsum, 0.0)
            T.fill(m, -1e30)
            T.copy(Q[cid * bm, 0], q)
            for j in T.serial(cid + 1):
                T.copy(K[j * bm, 0], k)
                T.copy(V[j * bm, 0], v)
                T.gemm(q, k, s_acc, transpose_B=True, clear_accum=True)
                T.copy(s_acc, s)
                for i, c in T.Parallel(bm, bm):
                    s[i, c] = T.if_then_else(j * bm + c > cid * bm + i, -1e30, s[i, c] * scale)
                T.reduce_max(s, m_new, dim=1, clear=True)
                for i in T.Parallel(bm):
                    m_new[i] = T.max(m_new[i], m[i])
                    rs[i] = T.exp(m[i] - m_new[i])
                    m[i] = m_new[i]
                for i, c in T.Parallel(bm, bm):
                    s[i, c] = T.exp(s[i, c] - m[i])
                T.reduce_sum(s, m_new, dim=1)
                for i in T.Parallel(bm):
                    lsum[i] = lsum[i] * rs[i] + m_new[i]
                T.copy(s, p16)
                T.gemm(p16, v, pv_acc, clear_accum=True)
                T.copy(pv_acc, pv)
                for i, c in T.Parallel(bm, D):
                    o[i, c] = o[i, c] * rs[i] + pv[i, c]
            for i, c in T.Parallel(bm, D):
                o16[i, c] = o[i, c] / lsum[i]
            T.copy(o16, O[cid * bm, 0])
    return main


def test_causal_attention(target):
    S, D = 96, 32
    q, k, v = (rand((S, D), "float16", i) for i in (41, 42, 43))
    s = f64(q) @ f64(k).T / np.sqrt(D)
    s[np.triu_indices(S, 1)] = -np.inf
    e = np.exp(s - s.max(1, keepdims=True))
    run_all(target, causal_attention(S, D), [3], (q, k, v), [e / e.sum(1, keepdims=True) @ f64(v)],
            ["float16"], S)


# 12. developer mode, as (cid) with threads=2: paged attention; the page id read from a block
#     table addresses the cube's K/V copies and the vector's bias copy; T.Pipelined; row loops
#     in Python range() -----------------------------------------------------------------------

def paged_attention(B, H, D, P, NP, page):
    scale = 1.0 / D ** 0.5

    @T.prim_func
    def main(Q: T.Tensor((B, H, D), T.float16), Kc: T.Tensor((P, page, D), T.float16),
             Vc: T.Tensor((P, page, D), T.float16), Tab: T.Tensor((B, NP), T.int32),
             Bias: T.Tensor((P, page), T.float32), O: T.Tensor((B, H, D), T.float32)):
        with T.Kernel(B, threads=2, is_npu=True) as (cid):
            q = T.alloc_shared((H, D), "float16")
            k = T.alloc_shared((page, D), "float16")
            v = T.alloc_shared((page, D), "float16")
            p16 = T.alloc_shared((H, page), "float16")
            s_l0 = T.alloc_fragment((H, page), "float32")
            o_l0 = T.alloc_fragment((H, D), "float32")
            s = T.alloc_shared((H, page), "float32")
            bias = T.alloc_shared((page,), "float32")
            o = T.alloc_shared((H, D), "float32")
            pv = T.alloc_shared((H, D), "float32")
            m = T.alloc_shared((H,), "float32")
            mp = T.alloc_shared((H,), "float32")
            lsum = T.alloc_shared((H,), "float32")
            ls = T.alloc_shared((H,), "float32")
            T.tile.fill(o, 0.0)
            T.tile.fill(lsum, 0.0)
            T.tile.fill(m, -1e30)
            T.copy(Q[cid, 0, 0], q)
            for j in T.Pipelined(NP, num_stages=2):
                pg = Tab[cid, j]
                T.copy(Kc[pg, 0, 0], k)
                T.copy(Vc[pg, 0, 0], v)
                T.copy(Bias[pg, 0], bias)
                T.gemm_v0(q, k, s_l0, transpose_B=True, init=True)
                T.copy(s_l0, s)
                T.tile.mul(s, s, scale)
                for h in range(H):
                    T.tile.add(s[h, :], s[h, :], bias)
                T.copy(m, mp)
                T.reduce_max(s, ls, dim=-1)
                T.tile.max(m, m, ls)
                T.tile.sub(mp, mp, m)
                T.tile.exp(mp, mp)
                for h in range(H):
                    T.tile.sub(s[h, :], s[h, :], m[h])
                T.tile.exp(s, s)
                T.reduce_sum(s, ls, dim=-1)
                T.tile.mul(lsum, lsum, mp)
                T.tile.add(lsum, lsum, ls)
                T.copy(s, p16)
                T.gemm_v0(p16, v, o_l0, init=True)
                T.copy(o_l0, pv)
                for h in range(H):
                    T.tile.mul(o[h, :], o[h, :], mp[h])
                T.tile.add(o, o, pv)
            for h in range(H):
                T.tile.div(o[h, :], o[h, :], lsum[h])
            T.copy(o, O[cid, 0, 0])
    return main


def test_paged_attention(target):
    B, H, D, P, NP, page = 2, 16, 32, 6, 3, 16
    q = rand((B, H, D), "float16", 44)
    kc, vc = rand((P, page, D), "float16", 45), rand((P, page, D), "float16", 46)
    tab = np.array([[4, 0, 2], [1, 5, 3]], np.int32)
    bias = rand((P, page), seed=47)
    want = np.zeros((B, H, D))
    for b in range(B):
        keys, vals = f64(kc[tab[b]]).reshape(-1, D), f64(vc[tab[b]]).reshape(-1, D)
        s = f64(q[b]) @ keys.T / np.sqrt(D) + f64(bias[tab[b]]).ravel()
        e = np.exp(s - s.max(1, keepdims=True))
        want[b] = e / e.sum(1, keepdims=True) @ vals
    run_all(target, paged_attention(B, H, D, P, NP, page), [-1], (q, kc, vc, tab, bias), [want],
            ["float16"], NP * page)


# 13. developer mode: blocks diverge on the block index (even ones run a GEMM, odd ones only
#     vector work), then a common vector epilogue -------------------------------------------

def divergent_blocks(M, N, K, bm=16):
    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
             X: T.Tensor((M, N), T.float32), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(M // bm, is_npu=True) as (cid, vid):
            a = T.alloc_L1((bm, K), "float16")
            b = T.alloc_L1((K, N), "float16")
            acc = T.alloc_L0C((bm, N), "float32")
            c = T.alloc_ub((bm, N), "float32")
            if cid % 2 == 0:
                T.copy(A[cid * bm, 0], a)
                T.copy(B[0, 0], b)
                T.gemm_v0(a, b, acc, init=True)
                T.copy(acc, c)
            else:
                T.copy(X[cid * bm, 0], c)
                T.tile.mul(c, c, 2.0)
            T.tile.add(c, c, 1.0)
            T.copy(c, C[cid * bm, 0])
    return main


def test_divergent_blocks(target):
    M, N, K = 64, 32, 32
    a, b, x = rand((M, K), "float16", 48), rand((K, N), "float16", 49), rand((M, N), seed=50)
    want = (f64(a) @ f64(b)).reshape(4, 16, N)
    want[1::2] = 2 * f64(x).reshape(4, 16, N)[1::2]
    run_all(target, divergent_blocks(M, N, K), [-1], (a, b, x), [want.reshape(M, N) + 1],
            ["float16"], K)


# 14. developer mode: each vector core takes its own branch (if vid == 0 / else) of dependent
#     vector work, the else branch reloading a tile --------------------------------------------

def per_core_branches(M, N):
    half = M // 2

    @T.prim_func
    def main(X: T.Tensor((M, N), T.float32), Y: T.Tensor((M, N), T.float32)):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_ub((half, N), "float32")
            y = T.alloc_ub((half, N), "float32")
            T.copy(X[vid * half, 0], x)
            T.tile.exp(y, x)
            if vid == 0:
                T.tile.add(y, y, x)
                T.tile.mul(y, y, 2.0)
            else:
                T.tile.sub(y, y, x)
                T.copy(X[0, 0], x)
                T.tile.add(y, y, x)
            T.copy(y, Y[vid * half, 0])
    return main


def test_per_core_branches(target):
    """The simulator found a race on V1 (exp, then the else branch's sub, no barrier): the
    compiler's barrier went into the then branch only."""
    M, N = 16, 32
    x = f64(rand((M, N), seed=58))
    want = np.concatenate([2 * (np.exp(x[:8]) + x[:8]), np.exp(x[8:]) - x[8:] + x[:8]])
    run_all(target, per_core_branches(M, N), [-1], (x.astype(np.float32),), [want], ["float32"])


# 15. developer mode: per-block counts copied GM -> UB, then read as scalars: the cube's trip
#     count and the vector's scale (the cube reads them from the GM the tile copies) ----------

def counted_gemm(G, M, N, K, bk=16):
    @T.prim_func
    def main(Cnt: T.Tensor((G, 8), T.int32), A: T.Tensor((G, M, K), T.float16),
             B: T.Tensor((K, N), T.float16), C: T.Tensor((G, M, N), T.float32)):
        with T.Kernel(G, is_npu=True) as (cid, vid):
            cnt = T.alloc_ub((8,), "int32")
            a = T.alloc_L1((M, bk), "float16")
            b = T.alloc_L1((bk, N), "float16")
            acc = T.alloc_L0C((M, N), "float32")
            c = T.alloc_ub((M, N), "float32")
            T.copy(Cnt[cid, 0], cnt)
            n = cnt[0]
            T.tile.fill(c, 0.0)
            for kk in T.serial(n):
                T.copy(A[cid, 0, kk * bk], a)
                T.copy(B[kk * bk, 0], b)
                T.gemm_v0(a, b, acc, init=(kk == 0))
            if n > 0:
                T.copy(acc, c)
            T.tile.muls(c, c, T.cast(cnt[1], "float32"))
            T.copy(c, C[cid, 0, 0])
    return main


def test_counts_read_from_a_ub_copy(target):
    G, M, N, K = 4, 16, 32, 64
    cnt = np.zeros((G, 8), np.int32)
    cnt[:, 0], cnt[:, 1] = [4, 0, 2, 1], [1, 2, -1, 3]
    a, b = rand((G, M, K), "float16", 59), rand((K, N), "float16", 60)
    want = np.stack([f64(a[g, :, :cnt[g, 0] * 16]) @ f64(b[:cnt[g, 0] * 16]) * cnt[g, 1]
                     for g in range(G)])
    run_all(target, counted_gemm(G, M, N, K), [-1], (cnt, a, b), [want], ["float16"], K)
