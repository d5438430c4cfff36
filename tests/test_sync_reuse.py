"""Sync resources are recycled between channels whose uses never overlap (issue 8 / i11):
cross-core flag ids like local event ids. A pipelined loop with several cube -> vector -> cube
steps per iteration needs more cross-core channels than the chip has ids; it compiles, runs
right on every target and simulates clean on both chips."""
import re

import numpy as np
import pytest

import tilelang_mini
import tilelang_mini.language as T

import kernels

CHIPS = ["ascend910b", "ascend950"]


def chained_mlp(M, D, H, n_chunks, stages, bm=32):
    """O = sum_c relu(relu(X @ W1[c]) @ W3[c]) @ W2[c] over chunks c: three gemms and two
    vector steps per iteration, pipelined."""
    @T.prim_func
    def main(X: T.Tensor((M, D), "float16"), W1: T.Tensor((n_chunks, D, H), "float16"),
             W3: T.Tensor((n_chunks, H, H), "float16"), W2: T.Tensor((n_chunks, H, D), "float16"),
             O: T.Tensor((M, D), "float32")):
        with T.Kernel(M // bm) as bx:
            X_s, W1_s, h = kernels.gemm_tiles(bm, H, D)
            W2_s = T.alloc_shared((H, D), "float16")
            W3_s = T.alloc_shared((H, H), "float16")
            h16 = T.alloc_fragment((bm, H), "float16")
            g = T.alloc_fragment((bm, H), "float32")
            g16 = T.alloc_fragment((bm, H), "float16")
            o = T.alloc_fragment((bm, D), "float32")
            T.copy(X[bx * bm, 0], X_s)
            T.clear(o)
            for c in T.Pipelined(n_chunks, num_stages=stages):
                T.copy(W1[c, 0, 0], W1_s)
                T.copy(W2[c, 0, 0], W2_s)
                T.copy(W3[c, 0, 0], W3_s)
                T.gemm(X_s, W1_s, h, clear_accum=True)
                for i, j in T.Parallel(bm, H):
                    h16[i, j] = T.max(h[i, j], 0.0)
                T.gemm(h16, W3_s, g, clear_accum=True)
                for i, j in T.Parallel(bm, H):
                    g16[i, j] = T.max(g[i, j], 0.0)
                T.gemm(g16, W2_s, o)
            T.copy(o, O[bx * bm, 0])
    return main


def run_everywhere(prim, args, ref, target, tol):
    out = tilelang_mini.compile(prim, out_idx=[-1], target=target)(*args)
    np.testing.assert_allclose(out, ref, rtol=tol, atol=tol)
    for chip in CHIPS:
        simulated, _ = tilelang_mini.compile(prim, out_idx=[-1], chip=chip).simulate(*args)
        np.testing.assert_allclose(simulated, ref, rtol=tol, atol=tol)


@pytest.mark.parametrize("stages", [2, 3])
def test_pipelined_gemm_chain_recycle_cross_core_flags(target, stages):
    M, D, H, n = 64, 32, 32, 6
    rng = np.random.default_rng(11)
    x = rng.standard_normal((M, D)).astype("float16")
    w1 = (rng.standard_normal((n, D, H)) / 4).astype("float16")
    w2 = (rng.standard_normal((n, H, D)) / 4).astype("float16")
    w3 = (rng.standard_normal((n, H, H)) / 4).astype("float16")
    ref = np.zeros((M, D))
    f16 = lambda a: a.astype(np.float16).astype(np.float64)  # noqa: E731
    for c in range(n):
        hid = f16(np.maximum(x.astype(np.float64) @ w1[c].astype(np.float64), 0.0))
        hid = f16(np.maximum(hid @ w3[c].astype(np.float64), 0.0))
        ref += hid @ w2[c].astype(np.float64)
    run_everywhere(chained_mlp(M, D, H, n, stages), [x, w1, w3, w2], ref, target, 2e-2)


def test_three_stage_attention_fits_the_cross_core_flags_of_910b(target):
    rng = np.random.default_rng(12)
    S, D = 128, 32
    q, k, v = (rng.standard_normal((1, S, D)).astype("float16") for _ in range(3))
    qf, kf, vf = (t[0].astype(np.float64) for t in (q, k, v))
    s = qf @ kf.T / np.sqrt(D)
    p = np.exp(s - s.max(1, keepdims=True))
    ref = ((p / p.sum(1, keepdims=True)) @ vf)[None]
    prim = kernels.flash_attention(1, S, D, block_M=32, block_N=32, num_stages=3)
    run_everywhere(prim, [q, k, v], ref, target, 2e-2)


def cube_vector_cube(M, K, N, N2, bm, bk, stages):
    """O = (relu(A @ B) * 0.5 in float16) @ V: the second gemm reads what the vector cores wrote
    from the first one's result."""
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
             V: T.Tensor((N, N2), "float16"), O: T.Tensor((M, N2), "float32")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            A_s, B_s, S_f = kernels.gemm_tiles(bm, N, bk)
            P_s = T.alloc_shared((bm, N), "float16")
            V_s = T.alloc_shared((N, N2), "float16")
            O_f = T.alloc_fragment((bm, N2), "float32")
            T.clear(S_f)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                T.copy(A[bx * bm, k * bk], A_s)
                T.copy(B[k * bk, 0], B_s)
                T.gemm(A_s, B_s, S_f)
            for i, j in T.Parallel(bm, N):
                S_f[i, j] = T.max(S_f[i, j], 0.0) * 0.5
            T.copy(S_f, P_s)
            T.copy(V[0, 0], V_s)
            T.clear(O_f)
            T.gemm(P_s, V_s, O_f)
            T.copy(O_f, O[bx * bm, 0])
    return main


@pytest.mark.parametrize("shape", [(17, 33, 16, 32, 16, 16, 1), (129, 17, 16, 16, 64, 16, 2),
                                   (40, 64, 32, 16, 32, 32, 3)])
def test_cross_core_waits_on_different_pipes_get_their_own_flag_ids(target, shape):
    # On ascend950 (L0C -> UB direct) the cube waits for the vector cores twice: on FIX before
    # it copies S_f (C_f in the IR) out (the vector cores' clear of its UB copy is done) and on MTE1 before it
    # loads P_s. One cross-core id for both let MTE1 take the first set and load P_s before it
    # was written (a race; with one stage a deadlock, FIX waiting for a set already taken).
    M, K, N, N2, bm, bk, stages = shape
    rng = np.random.default_rng(13)
    a = rng.standard_normal((M, K)).astype("float16")
    b = rng.standard_normal((K, N)).astype("float16")
    v = rng.standard_normal((N, N2)).astype("float16")
    s = a.astype(np.float64) @ b.astype(np.float64)
    p = (np.maximum(s, 0.0) * 0.5).astype(np.float16).astype(np.float64)
    run_everywhere(cube_vector_cube(M, K, N, N2, bm, bk, stages), [a, b, v],
                   p @ v.astype(np.float64), target, 2e-2)


@pytest.mark.parametrize("stages", [5, 8])
@pytest.mark.parametrize("target", ["numpy", "llvm"])
def test_deep_pipelines_share_one_flag_per_stage(target, stages):
    """A GEMM pipelined 5 or 8 deep with two operand tiles per stage: one MTE1 -> MTE2 flag
    per tile and stage is 10-16 ids, more than a pipe pair has (8); the loads of a stage wait
    for one flag set after the stage's last MTE1 read (insert_sync's coalescing retry), so it
    compiles, matches float64 and simulates clean on both chips."""
    M, N, K = 64, 64, 640
    rng = np.random.default_rng(stages)
    a = (rng.standard_normal((M, K)) * 0.3).astype(np.float16)
    b = (rng.standard_normal((K, N)) * 0.3).astype(np.float16)
    want = a.astype(np.float64) @ b.astype(np.float64)
    for chip in CHIPS:
        kern = tilelang_mini.compile(kernels.gemm(M, N, K, 64, 64, 32, "float16",
                                                  num_stages=stages), target=target, chip=chip)
        ids = set(re.findall(r"set_flag\(MTE1, MTE2, (\d+)\)", kern.get_ir("insert_sync")))
        assert stages <= len(ids) <= 8, ids  # one per stage, not one per tile and stage
        for run in (kern, kern.simulate):
            c = np.zeros((M, N), np.float32)
            run(a, b, c)
            np.testing.assert_allclose(c, want, rtol=2e-3, atol=2e-3 * np.sqrt(K))
