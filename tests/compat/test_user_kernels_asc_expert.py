"""Kernels written from scratch in tilelang-ascend's expert mode (issue #10): T.Scope("C") /
T.Scope("V"), T.set_flag/T.wait_flag with string pipes, cross-core flags both ways, T.gemm_v0,
T.mma on explicit L0A/L0B/L0C, T.barrier_all, ping-pong buffers with per-slot event ids. The
kernels' own flags are checked as written (the compiler adds only the vector barriers), on
every target and on the simulator of both chips, against float64 NumPy references."""
import numpy as np

import tilelang_mini.language as T

from util import f64, rand, run_all


def silu(z):
    return z / (1 + np.exp(-z))


# 1. expert mode: double-buffered L1 (ping-pong flags), gemm_v0, cross-core hand-off, SiLU ----

def expert_gemm_pingpong_silu(M, N, K, bm=32, bn=32, bk=32):
    n_num = N // bn
    nk = K // bk
    half = bm // 2

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
             C: T.Tensor((M, N), T.float32), WS: T.Tensor((M, N), T.float32)):
        with T.Kernel((M // bm) * n_num, is_npu=True) as (cid, vid):
            bx = cid // n_num
            by = cid % n_num
            a0 = T.alloc_L1((bm, bk), "float16")
            a1 = T.alloc_L1((bm, bk), "float16")
            b0 = T.alloc_L1((bk, bn), "float16")
            b1 = T.alloc_L1((bk, bn), "float16")
            acc = T.alloc_L0C((bm, bn), "float32")
            x = T.alloc_ub((half, bn), "float32")
            y = T.alloc_ub((half, bn), "float32")
            with T.Scope("C"):
                T.set_flag("MTE1", "MTE2", 0)
                T.set_flag("MTE1", "MTE2", 1)
                for k in T.serial(nk):
                    if k % 2 == 0:
                        T.wait_flag("MTE1", "MTE2", 0)
                        T.copy(A[bx * bm, k * bk], a0)
                        T.copy(B[k * bk, by * bn], b0)
                        T.set_flag("MTE2", "MTE1", 0)
                        T.wait_flag("MTE2", "MTE1", 0)
                        T.gemm_v0(a0, b0, acc, init=(k == 0))
                        T.set_flag("MTE1", "MTE2", 0)
                    else:
                        T.wait_flag("MTE1", "MTE2", 1)
                        T.copy(A[bx * bm, k * bk], a1)
                        T.copy(B[k * bk, by * bn], b1)
                        T.set_flag("MTE2", "MTE1", 1)
                        T.wait_flag("MTE2", "MTE1", 1)
                        T.gemm_v0(a1, b1, acc)
                        T.set_flag("MTE1", "MTE2", 1)
                T.wait_flag("MTE1", "MTE2", 0)
                T.wait_flag("MTE1", "MTE2", 1)
                T.set_flag("M", "FIX", 0)
                T.wait_flag("M", "FIX", 0)
                T.copy(acc, WS[bx * bm, by * bn])
                T.set_cross_flag("FIX", 3)
            with T.Scope("V"):
                T.wait_cross_flag(3)
                T.copy(WS[bx * bm + vid * half, by * bn], x)
                T.set_flag("MTE2", "V", 0)
                T.wait_flag("MTE2", "V", 0)
                T.tile.sigmoid(y, x)
                T.tile.mul(y, y, x)
                T.set_flag("V", "MTE3", 0)
                T.wait_flag("V", "MTE3", 0)
                T.copy(y, C[bx * bm + vid * half, by * bn])
    return main


def test_expert_gemm_pingpong_silu(target):
    M, N, K = 64, 64, 128
    a, b = rand((M, K), "float16", 16), rand((K, N), "float16", 17)
    want = silu(f64(a) @ f64(b))
    run_all(target, expert_gemm_pingpong_silu(M, N, K), [2], (a, b), [want], ["float16"], K,
            ws=[3])


# 2. expert mode, vector only: double-buffered UB rows, a row softmax, event ids 0/1 ---------

def expert_softmax_pingpong(M, N, rows=4):
    per_core = M // 2
    trips = per_core // rows

    @T.prim_func
    def main(X: T.Tensor((M, N), T.float32), Y: T.Tensor((M, N), T.float32)):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_ub((2, rows, N), "float32")
            mx = T.alloc_ub((rows,), "float32")
            sm = T.alloc_ub((rows,), "float32")
            with T.Scope("V"):
                T.set_flag("MTE3", "MTE2", 0)
                T.set_flag("MTE3", "MTE2", 1)
                for t in T.serial(trips):
                    p = t % 2
                    r0 = vid * per_core + t * rows
                    T.wait_flag("MTE3", "MTE2", p)
                    T.copy(X[r0:r0 + rows, :], x[p, :, :])
                    T.set_flag("MTE2", "V", p)
                    T.wait_flag("MTE2", "V", p)
                    T.reduce_max(x[p, :, :], mx, dim=-1)
                    T.tile.row_expand_sub(x[p, :, :], x[p, :, :], mx)
                    T.tile.exp(x[p, :, :], x[p, :, :])
                    T.reduce_sum(x[p, :, :], sm, dim=-1)
                    T.tile.reciprocal(sm, sm)
                    T.tile.row_expand_mul(x[p, :, :], x[p, :, :], sm)
                    T.set_flag("V", "MTE3", p)
                    T.wait_flag("V", "MTE3", p)
                    T.copy(x[p, :, :], Y[r0:r0 + rows, :])
                    T.set_flag("MTE3", "MTE2", p)
                T.wait_flag("MTE3", "MTE2", 0)
                T.wait_flag("MTE3", "MTE2", 1)
    return main


def test_expert_softmax_pingpong(target):
    M, N = 32, 64
    x = rand((M, N), seed=18, scale=3.0)
    e = np.exp(f64(x) - f64(x).max(1, keepdims=True))
    run_all(target, expert_softmax_pingpong(M, N), [-1], (x,), [e / e.sum(1, keepdims=True)],
            ["float32"])


# 3. expert mode: the cube streams score tiles through a 2-slot workspace, cross flags both
#    ways (C -> V data ready, V -> C slot free); the vectors keep a running row max and sum ---

def expert_stream_rowstats(M, N, K, bn=32):
    nb = N // bn
    half = M // 2

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
             Mx: T.Tensor((M,), T.float32), Sm: T.Tensor((M,), T.float32),
             WS: T.Tensor((2, M, bn), T.float32)):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a_l1 = T.alloc_L1((M, K), "float16")
            b_l1 = T.alloc_L1((K, bn), "float16")
            acc = T.alloc_L0C((M, bn), "float32")
            s = T.alloc_ub((half, bn), "float32")
            mx = T.alloc_ub((half,), "float32")
            sm = T.alloc_ub((half,), "float32")
            t = T.alloc_ub((half,), "float32")
            with T.Scope("C"):
                T.copy(A[0, 0], a_l1)
                for j in T.serial(nb):
                    if j >= 2:
                        T.wait_cross_flag(1)
                    T.copy(B[0, j * bn], b_l1)
                    T.barrier_all()
                    T.gemm_v0(a_l1, b_l1, acc, init=True)
                    T.barrier_all()
                    T.copy(acc, WS[j % 2, 0, 0])
                    T.set_cross_flag("FIX", 0)
                    T.barrier_all()
            with T.Scope("V"):
                T.tile.fill(mx, -1e30)
                T.tile.fill(sm, 0.0)
                for j in T.serial(nb):
                    T.wait_cross_flag(0)
                    T.copy(WS[j % 2, vid * half, 0], s)
                    T.barrier_all()
                    if j + 2 < nb:
                        T.set_cross_flag("MTE2", 1)
                    T.reduce_max(s, t, dim=-1)
                    T.tile.max(mx, mx, t)
                    T.reduce_sum(s, t, dim=-1)
                    T.tile.add(sm, sm, t)
                    T.barrier_all()
                T.copy(mx, Mx[vid * half])
                T.copy(sm, Sm[vid * half])
    return main


def test_expert_stream_rowstats(target):
    M, N, K = 32, 128, 64
    a, b = rand((M, K), "float16", 19), rand((K, N), "float16", 20)
    s = f64(a) @ f64(b)
    run_all(target, expert_stream_rowstats(M, N, K), [2, 3], (a, b), [s.max(1), s.sum(1)],
            ["float16", "float16"], K * 4, ws=[4])


# 4. expert mode: explicit L0A/L0B, transposed B load, T.mma, flags by string pipe names ----

def expert_mma_nt(M, N, K, bk=32):
    nk = K // bk

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((N, K), T.float16),
             C: T.Tensor((M, N), T.float32)):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a_l1 = T.alloc_L1((M, bk), "float16")
            b_l1 = T.alloc_L1((N, bk), "float16")
            a_l0 = T.alloc_L0A((M, bk), "float16")
            b_l0 = T.alloc_L0B((bk, N), "float16")
            acc = T.alloc_L0C((M, N), "float32")
            with T.Scope("C"):
                for k in T.serial(nk):
                    T.copy(A[0, k * bk], a_l1)
                    T.copy(B[0, k * bk], b_l1)
                    T.set_flag("MTE2", "MTE1", 0)
                    T.wait_flag("MTE2", "MTE1", 0)
                    if k > 0:
                        T.wait_flag("M", "MTE1", 1)
                    T.copy(a_l1, a_l0)
                    T.copy(b_l1, b_l0, transpose=True)
                    T.set_flag("MTE1", "MTE2", 2)
                    T.set_flag("MTE1", "M", 0)
                    T.wait_flag("MTE1", "M", 0)
                    T.mma(a_l0, b_l0, acc, init=(k == 0))
                    if k + 1 < nk:
                        T.set_flag("M", "MTE1", 1)
                    T.wait_flag("MTE1", "MTE2", 2)
                T.set_flag("M", "FIX", 0)
                T.wait_flag("M", "FIX", 0)
                T.copy(acc, C[0, 0])
    return main


def test_expert_mma_transposed_b(target):
    M, N, K = 32, 48, 96
    a, b = rand((M, K), "float16", 26), rand((N, K), "float16", 27)
    run_all(target, expert_mma_nt(M, N, K), [-1], (a, b), [f64(a) @ f64(b).T], ["float16"], K)


# 5. double-buffered L1, L0B and L0C slots ([2, ...] tiles indexed by j % 2), T.mma, a cross
#     flag every second tile (and after the last), the vectors waiting alike ------------------

def l0c_pingpong_exp(M, N, K, bn=32):
    nb = N // bn
    half = M // 2

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
             C: T.Tensor((M, N), T.float32), WS: T.Tensor((nb, M, bn), T.float32)):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a_l1 = T.alloc_L1((M, K), "float16")
            b_l1 = T.alloc_L1((2, K, bn), "float16")
            l0a = T.alloc_L0A((M, K), "float16")
            l0b = T.alloc_L0B((2, K, bn), "float16")
            l0c = T.alloc_L0C((2, M, bn), "float32")
            x = T.alloc_ub((half, bn), "float32")
            with T.Scope("C"):
                T.copy(A[0, 0], a_l1)
                T.set_flag("MTE2", "MTE1", 0)
                T.wait_flag("MTE2", "MTE1", 0)
                T.copy(a_l1, l0a)
                for s in T.serial(2):
                    T.set_flag("MTE1", "MTE2", s)
                    T.set_flag("M", "MTE1", s)
                    T.set_flag("FIX", "M", s)
                for j in T.serial(nb):
                    s = j % 2
                    T.wait_flag("MTE1", "MTE2", s)
                    T.copy(B[0, j * bn], b_l1[s, :, :])
                    T.set_flag("MTE2", "MTE1", s)
                    T.wait_flag("MTE2", "MTE1", s)
                    T.wait_flag("M", "MTE1", s)
                    T.copy(b_l1[s, :, :], l0b[s, :, :])
                    T.set_flag("MTE1", "MTE2", s)
                    T.set_flag("MTE1", "M", s)
                    T.wait_flag("MTE1", "M", s)
                    T.wait_flag("FIX", "M", s)
                    T.mma(l0a, l0b[s, :, :], l0c[s, :, :], init=True)
                    T.set_flag("M", "MTE1", s)
                    T.set_flag("M", "FIX", s)
                    T.wait_flag("M", "FIX", s)
                    T.copy(l0c[s, :, :], WS[j, :, :])
                    T.set_flag("FIX", "M", s)
                    if (j + 1) % 2 == 0 or j == nb - 1:
                        T.set_cross_flag("FIX", 0)
                for s in T.serial(2):
                    T.wait_flag("MTE1", "MTE2", s)
                    T.wait_flag("M", "MTE1", s)
                    T.wait_flag("FIX", "M", s)
            with T.Scope("V"):
                for j in T.serial(nb):
                    if j % 2 == 0:
                        T.wait_cross_flag(0)
                    T.copy(WS[j, vid * half, 0], x)
                    T.set_flag("MTE2", "V", 0)
                    T.wait_flag("MTE2", "V", 0)
                    T.tile.exp(x, x)
                    T.set_flag("V", "MTE3", 0)
                    T.wait_flag("V", "MTE3", 0)
                    T.copy(x, C[vid * half, j * bn])
                    T.set_flag("MTE3", "MTE2", 0)
                    T.wait_flag("MTE3", "MTE2", 0)
    return main


def test_l0c_pingpong_cross_interval(target):
    M, N, K = 32, 160, 32
    a, b = rand((M, K), "float16", 51, 0.3), rand((K, N), "float16", 52, 0.3)
    run_all(target, l0c_pingpong_exp(M, N, K), [2], (a, b), [np.exp(f64(a) @ f64(b))],
            ["float16"], K, ws=[3])


# 6. C and V scopes interleaved inside one loop that both cores run; wait_cross_flag on a
#     named pipe ("MTE2"); the cube waits for the slot back from the second tile on ----------

def interleaved_scopes(M, N, K, bn=32):
    nb = N // bn
    half = M // 2

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
             C: T.Tensor((M, N), T.float32), WS: T.Tensor((M, bn), T.float32)):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_L1((M, K), "float16")
            b = T.alloc_L1((K, bn), "float16")
            acc = T.alloc_L0C((M, bn), "float32")
            x = T.alloc_ub((half, bn), "float32")
            with T.Scope("C"):
                T.copy(A[0, 0], a)
            for j in T.serial(nb):
                with T.Scope("C"):
                    if j > 0:
                        T.wait_cross_flag(1)
                    T.copy(B[0, j * bn], b)
                    T.barrier_all()
                    T.gemm_v0(a, b, acc, init=True)
                    T.barrier_all()
                    T.copy(acc, WS[0, 0])
                    T.set_cross_flag("FIX", 0)
                with T.Scope("V"):
                    T.wait_cross_flag(0, "MTE2")
                    T.copy(WS[vid * half, 0], x)
                    T.barrier_all()
                    if j + 1 < nb:
                        T.set_cross_flag("MTE2", 1)
                    T.tile.relu(x, x)
                    T.barrier_all()
                    T.copy(x, C[vid * half, j * bn])
                    T.barrier_all()
    return main


def test_interleaved_scopes(target):
    M, N, K = 32, 96, 32
    a, b = rand((M, K), "float16", 53), rand((K, N), "float16", 54)
    run_all(target, interleaved_scopes(M, N, K), [2], (a, b), [np.maximum(f64(a) @ f64(b), 0)],
            ["float16"], K, ws=[3])


# 7. vector -> cube: the vectors prepare each operand tile (sigmoid, fp16) into GM and set one
#     cross flag per tile; the cube consumes the pending sets one per trip ---------------------

def vector_feeds_cube(M, N, K, nt):
    half = M // 2

    @T.prim_func
    def main(X: T.Tensor((nt, M, K), T.float32), B: T.Tensor((K, N), T.float16),
             C: T.Tensor((nt, M, N), T.float32), WS: T.Tensor((nt, M, K), T.float16)):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_ub((half, K), "float32")
            xh = T.alloc_ub((half, K), "float16")
            a = T.alloc_L1((M, K), "float16")
            b = T.alloc_L1((K, N), "float16")
            acc = T.alloc_L0C((M, N), "float32")
            with T.Scope("V"):
                for t in T.serial(nt):
                    T.copy(X[t, vid * half, 0], x)
                    T.barrier_all()
                    T.tile.sigmoid(x, x)
                    T.tile.cast(xh, x, "CAST_RINT", half * K)
                    T.barrier_all()
                    T.copy(xh, WS[t, vid * half, 0])
                    T.set_cross_flag("MTE3", 5)
            with T.Scope("C"):
                T.copy(B[0, 0], b)
                for t in T.serial(nt):
                    T.wait_cross_flag(5)
                    T.copy(WS[t, 0, 0], a)
                    T.barrier_all()
                    T.gemm_v0(a, b, acc, init=True)
                    T.barrier_all()
                    T.copy(acc, C[t, 0, 0])
                    T.barrier_all()
    return main


def test_vector_feeds_cube_counted_flags(target):
    nt, M, N, K = 4, 32, 32, 32
    x, b = rand((nt, M, K), seed=55), rand((K, N), "float16", 56)
    sx = (1 / (1 + np.exp(-f64(x)))).astype(np.float16).astype(np.float64)
    run_all(target, vector_feeds_cube(M, N, K, nt), [2], (x, b), [sx @ f64(b)], ["float16"], K,
            ws=[3])


# 8. a 3-slot ring of UB tiles (event ids t % 3, primed and drained in loops), a column
#     reduction per slot, then work that differs per vector core (if vid == 0 / else) --------

def ring3_colsums(M, N, rows=2):
    per = M // 2
    trips = per // rows

    @T.prim_func
    def main(X: T.Tensor((M, N), T.float32), Y: T.Tensor((M, N), T.float32),
             Z: T.Tensor((2, N), T.float32)):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_ub((3, rows, N), "float32")
            acc = T.alloc_ub((N,), "float32")
            tmp = T.alloc_ub((N,), "float32")
            with T.Scope("V"):
                T.tile.fill(acc, 0.0)
                for s in T.serial(3):
                    T.set_flag("MTE3", "MTE2", s)
                for t in T.serial(trips):
                    p = t % 3
                    r0 = vid * per + t * rows
                    T.wait_flag("MTE3", "MTE2", p)
                    T.copy(X[r0, 0], x[p, :, :])
                    T.set_flag("MTE2", "V", p)
                    T.wait_flag("MTE2", "V", p)
                    T.tile.mul(x[p, :, :], x[p, :, :], 2.0)
                    T.reduce_sum(x[p, :, :], tmp, dim=1)
                    T.tile.add(acc, acc, tmp)
                    T.set_flag("V", "MTE3", p)
                    T.wait_flag("V", "MTE3", p)
                    T.copy(x[p, :, :], Y[r0, 0])
                    T.set_flag("MTE3", "MTE2", p)
                for s in T.serial(3):
                    T.wait_flag("MTE3", "MTE2", s)
                if vid == 0:
                    T.tile.muls(acc, acc, -1.0)
                else:
                    T.tile.adds(acc, acc, 100.0)
                T.set_flag("V", "MTE3", 3)
                T.wait_flag("V", "MTE3", 3)
                T.copy(acc, Z[vid, 0])
    return main


def test_ring3_and_per_core_branches(target):
    """The else branch of `if vid == 0` got no pipe_barrier(V) after the loop's tile.add
    (insert_sync counted the then branch's barrier for it): a false race on `acc`."""
    M, N = 24, 32
    x = rand((M, N), seed=57)
    z = np.stack([-2 * f64(x[:12]).sum(0), 2 * f64(x[12:]).sum(0) + 100])
    run_all(target, ring3_colsums(M, N), [1, 2], (x,), [2 * f64(x), z], ["float32", "float32"],
            12)


# 9. V scope on slices of a 3-D UB tile: per-slot row max broadcast with T.tile.brcb and
#    row_expand_sub, row slices x[p, i, :], a (1,) sum filled over a row; T.pipe_barrier("ALL")

def slices_3d(M, N):
    half = M // 2

    @T.prim_func
    def main(X: T.Tensor((2, M, N), T.float32), Y: T.Tensor((2, M, N), T.float32)):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_ub((2, half, N), "float32")
            r = T.alloc_ub((half,), "float32")
            rb = T.alloc_ub((half, 8), "float32")
            tot = T.alloc_ub((1,), "float32")
            w = T.alloc_ub((N,), "float32")
            with T.Scope("V"):
                for p in T.serial(2):
                    T.copy(X[p, vid * half, 0], x[p, :, :])
                T.pipe_barrier("ALL")
                for p in T.serial(2):
                    T.reduce_max(x[p, :, :], r, dim=-1)
                    T.tile.brcb(rb, r, half // 8, 1, 8)
                    T.tile.row_expand_sub(x[p, :, :], x[p, :, :], rb)
                    for i in T.serial(half):
                        T.tile.mul(x[p, i, :], x[p, i, :], 0.5)
                T.reduce_sum(x[0, 0:1, :], tot, dim=-1)
                T.tile.fill(w, tot)
                T.tile.add(x[1, 0, :], x[1, 0, :], w)
                T.pipe_barrier("all")
                for p in T.serial(2):
                    T.copy(x[p, :, :], Y[p, vid * half, 0])
    return main


def test_slices_of_3d_tiles_pipe_barrier_all(target):
    """T.pipe_barrier("ALL") (tilelang-ascend's T.barrier_all) was "unknown pipe 'ALL'"."""
    M, N = 32, 32
    x = f64(rand((2, M, N), seed=61))
    blocks = x.reshape(2, 2, M // 2, N)
    y = 0.5 * (blocks - blocks.max(3, keepdims=True))
    y[1, :, 0] += y[0, :, 0].sum(1, keepdims=True)
    run_all(target, slices_3d(M, N), [-1], (x.astype(np.float32),), [y.reshape(2, M, N)],
            ["float32"], N)


# 10. flash attention in expert mode: the cube computes S_(j+1) while the vectors turn S_j into
#     P_j (online softmax); scores, probabilities and P@V pass through three workspaces (S in two
#     slots), four cross flags: S ready, P ready, O ready, O consumed ----------------------------

def fa_expert(S, D, bm=32, bn=32):
    nb = S // bn
    half = bm // 2
    scale = 1.0 / D ** 0.5
    nblk = S // bm

    @T.prim_func
    def main(Q: T.Tensor((S, D), T.float16), K: T.Tensor((S, D), T.float16),
             V: T.Tensor((S, D), T.float16), O: T.Tensor((S, D), T.float32),
             W1: T.Tensor((nblk, 2, bm, bn), T.float32),
             W2: T.Tensor((nblk, 2, bm, bn), T.float16), W3: T.Tensor((nblk, bm, D), T.float32)):
        with T.Kernel(S // bm, is_npu=True) as (cid, vid):
            q_l1 = T.alloc_L1((bm, D), "float16")
            k_l1 = T.alloc_L1((bn, D), "float16")
            v_l1 = T.alloc_L1((bn, D), "float16")
            p_l1 = T.alloc_L1((bm, bn), "float16")
            s_l0 = T.alloc_L0C((bm, bn), "float32")
            o_l0 = T.alloc_L0C((bm, D), "float32")
            s = T.alloc_ub((half, bn), "float32")
            p16 = T.alloc_ub((half, bn), "float16")
            pv = T.alloc_ub((half, D), "float32")
            o = T.alloc_ub((half, D), "float32")
            m = T.alloc_ub((half,), "float32")
            mo = T.alloc_ub((half,), "float32")
            l = T.alloc_ub((half,), "float32")
            t = T.alloc_ub((half,), "float32")
            with T.Scope("C"):
                T.copy(Q[cid * bm, 0], q_l1)
                T.copy(K[0, 0], k_l1)
                T.barrier_all()
                T.gemm_v0(q_l1, k_l1, s_l0, transpose_B=True, init=True)
                T.barrier_all()
                T.copy(s_l0, W1[cid, 0, 0, 0])
                T.set_cross_flag("FIX", 0)
                for j in T.serial(nb):
                    if j + 1 < nb:
                        T.barrier_all()
                        T.copy(K[(j + 1) * bn, 0], k_l1)
                        T.barrier_all()
                        T.gemm_v0(q_l1, k_l1, s_l0, transpose_B=True, init=True)
                        T.barrier_all()
                        T.copy(s_l0, W1[cid, (j + 1) % 2, 0, 0])
                        T.set_cross_flag("FIX", 0)
                    T.wait_cross_flag(1)
                    T.copy(W2[cid, j % 2, 0, 0], p_l1)
                    T.copy(V[j * bn, 0], v_l1)
                    T.barrier_all()
                    T.gemm_v0(p_l1, v_l1, o_l0, init=True)
                    T.barrier_all()
                    if j > 0:
                        T.wait_cross_flag(3)
                    T.copy(o_l0, W3[cid, 0, 0])
                    T.set_cross_flag("FIX", 2)
                    T.barrier_all()
            with T.Scope("V"):
                T.tile.fill(o, 0.0)
                T.tile.fill(l, 0.0)
                T.tile.fill(m, -1e30)
                for j in T.serial(nb):
                    T.wait_cross_flag(0)
                    T.copy(W1[cid, j % 2, vid * half, 0], s)
                    T.barrier_all()
                    T.tile.mul(s, s, scale)
                    T.copy(m, mo)
                    T.reduce_max(s, t, dim=-1)
                    T.tile.max(m, m, t)
                    T.tile.row_expand_sub(s, s, m)
                    T.tile.exp(s, s)
                    T.tile.sub(mo, mo, m)
                    T.tile.exp(mo, mo)
                    T.reduce_sum(s, t, dim=-1)
                    T.tile.mul(l, l, mo)
                    T.tile.add(l, l, t)
                    T.tile.cast(p16, s, "CAST_RINT", half * bn)
                    T.barrier_all()
                    T.copy(p16, W2[cid, j % 2, vid * half, 0])
                    T.set_cross_flag("MTE3", 1)
                    T.wait_cross_flag(2)
                    T.copy(W3[cid, vid * half, 0], pv)
                    T.barrier_all()
                    if j + 1 < nb:
                        T.set_cross_flag("MTE2", 3)
                    T.tile.row_expand_mul(o, o, mo)
                    T.tile.add(o, o, pv)
                    T.barrier_all()
                T.tile.row_expand_div(o, o, l)
                T.barrier_all()
                T.copy(o, O[cid * bm + vid * half, 0])
    return main


def test_flash_attention_expert_three_workspaces(target):
    S, D = 96, 32
    q, k, v = (rand((S, D), "float16", i) for i in (62, 63, 64))
    s = f64(q) @ f64(k).T / np.sqrt(D)
    e = np.exp(s - s.max(1, keepdims=True))
    run_all(target, fa_expert(S, D), [3], (q, k, v), [e / e.sum(1, keepdims=True) @ f64(v)],
            ["float16"], S, ws=[4, 5, 6])


# 11. a tile loop around a K loop with explicit L0A/L0B and T.mma; the M -> FIX flag set only
#     on the last K step and FIX -> M waited only on the first (conditional sets and waits) ---

def nested_flags(M, N, K, bm=16, bk=16):
    mt, nk = M // bm, K // bk

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
             C: T.Tensor((M, N), T.float32)):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_L1((bm, bk), "float16")
            b = T.alloc_L1((bk, N), "float16")
            l0a = T.alloc_L0A((bm, bk), "float16")
            l0b = T.alloc_L0B((bk, N), "float16")
            acc = T.alloc_L0C((bm, N), "float32")
            with T.Scope("C"):
                T.set_flag("MTE1", "MTE2", 0)
                T.set_flag("M", "MTE1", 0)
                T.set_flag("FIX", "M", 0)
                for t in T.serial(mt):
                    for k in T.serial(nk):
                        T.wait_flag("MTE1", "MTE2", 0)
                        T.copy(A[t * bm, k * bk], a)
                        T.copy(B[k * bk, 0], b)
                        T.set_flag("MTE2", "MTE1", 0)
                        T.wait_flag("MTE2", "MTE1", 0)
                        T.wait_flag("M", "MTE1", 0)
                        T.copy(a, l0a)
                        T.copy(b, l0b)
                        T.set_flag("MTE1", "MTE2", 0)
                        T.set_flag("MTE1", "M", 0)
                        T.wait_flag("MTE1", "M", 0)
                        if k == 0:
                            T.wait_flag("FIX", "M", 0)
                        T.mma(l0a, l0b, acc, init=(k == 0))
                        T.set_flag("M", "MTE1", 0)
                        if k == nk - 1:
                            T.set_flag("M", "FIX", 0)
                    T.wait_flag("M", "FIX", 0)
                    T.copy(acc, C[t * bm, 0])
                    T.set_flag("FIX", "M", 0)
                T.wait_flag("MTE1", "MTE2", 0)
                T.wait_flag("M", "MTE1", 0)
                T.wait_flag("FIX", "M", 0)
    return main


def test_nested_loops_conditional_flags(target):
    M, N, K = 48, 32, 64
    a, b = rand((M, K), "float16", 66), rand((K, N), "float16", 67)
    run_all(target, nested_flags(M, N, K), [-1], (a, b), [f64(a) @ f64(b)], ["float16"], K)
