"""tilelang-ascend's sorting and gathering T.tile operations (topk, sort, merge_sort,
gather_mask, gather) and other constructs the upstream example sweep needed: T.copy with a
non-zero pad_value, slices whose bounds hold //, T.barrier_all before a scalar read, an expert
gemm_v0 kernel without flags (the compiler synchronises it), jit(workspace_idx=...). Every
kernel runs on each target and on the simulator against float64 NumPy references."""
import numpy as np
import pytest

import tilelang_mini as tilelang
import tilelang_mini.language as T

from util import close, f64, rand
from kernels import gemm_tiles


def run_all(kernel, target, args, want, dtype="float32", reduce_len=1):
    got = kernel(*args)
    outs = got if isinstance(got, tuple) else (got,)
    for g, w in zip(outs, want):
        close(g, w, dtype, reduce_len)
    if target == "numpy":
        sim, _ = kernel.simulate(*args)
        sims = sim if isinstance(sim, tuple) else (sim,)
        for g, w in zip(sims, want):
            close(g, w, dtype, reduce_len)


def test_topk_gather_mask_cast(target):
    R, N, K = 4, 96, 8

    @tilelang.jit(out_idx=[-2, -1], target=target)
    def row_topk():
        @T.prim_func
        def main(X: T.Tensor((R, N), "float32"), V: T.Tensor((R, K), "float32"),
                 I: T.Tensor((R, K), "int32")):
            with T.Kernel(R // 2, is_npu=True) as (cid, vid):
                row = cid * 2 + vid
                x = T.alloc_ub((N,), "float32")
                pairs = T.alloc_ub((2 * K,), "float32")
                v = T.alloc_ub((K,), "float32")
                fidx = T.alloc_ub((K,), "float32")
                idx = T.alloc_ub((K,), "int32")
                T.copy(X[row, 0], x)
                T.tile.topk(pairs, x, K, N - 6)          # the last 6 columns do not count
                T.tile.gather_mask(v, pairs, "P0101")     # values
                T.tile.gather_mask(fidx, pairs, "P1010")  # indices (as numbers)
                T.tile.cast(idx, fidx, "CAST_ROUND", K)
                T.copy(v, V[row, 0])
                T.copy(idx, I[row, 0])
        return main

    rng = np.random.default_rng(3)
    x = rng.permutation(R * N).reshape(R, N).astype(np.float32) - R * N / 2
    order = np.argsort(-f64(x[:, :N - 6]), axis=1, kind="stable")[:, :K]
    run_all(row_topk(), target, [x],
            [np.take_along_axis(f64(x), order, 1), order.astype(np.float64)], "int32")


def test_sort_and_merge_sort(target):
    n = 32

    @tilelang.jit(out_idx=[-2, -1], target=target)
    def sort_merge():
        @T.prim_func
        def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32"),
                 S: T.Tensor((2 * n,), "float32"), M: T.Tensor((4 * n,), "float32")):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                a = T.alloc_ub((n,), "float32")
                b = T.alloc_ub((n,), "float32")
                sa = T.alloc_ub((2 * n,), "float32")
                sb = T.alloc_ub((2 * n,), "float32")
                m = T.alloc_ub((4 * n,), "float32")
                T.copy(A, a)
                T.copy(B, b)
                T.tile.sort(sa, a, n)
                T.tile.sort(sb, b, n)
                T.tile.merge_sort(m, sa, sb)
                T.copy(sa, S)
                T.copy(m, M)
        return main

    rng = np.random.default_rng(4)
    a, b = rng.permutation(2 * n).astype(np.float32)[:n], rng.permutation(2 * n).astype(np.float32)[n:] + 0.5
    oa = np.argsort(-f64(a), kind="stable")
    want_s = np.stack([f64(a)[oa], oa], 1).reshape(-1)
    pairs = [(v, i) for v, i in zip(f64(a)[oa], oa)] + \
        [(v, i) for v, i in zip(f64(b)[np.argsort(-f64(b))], np.argsort(-f64(b)))]
    pairs.sort(key=lambda p: -p[0])
    want_m = np.array([x for p in pairs for x in p], np.float64)
    run_all(sort_merge(), target, [a, b], [want_s, want_m])


def test_gather_byte_offsets(target):
    n = 64

    @tilelang.jit(out_idx=[-1], target=target)
    def swap_pairs():
        @T.prim_func
        def main(X: T.Tensor((2, n), "float32"), Y: T.Tensor((2, n), "float32")):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                x = T.alloc_ub((n,), "float32")
                off = T.alloc_ub((n,), "int32")
                y = T.alloc_ub((n,), "float32")
                T.copy(X[vid, 0], x)
                T.tile.createvecindex(off, 0)
                for i in T.Parallel(n):   # the neighbour's byte offset: (i ^ 1) * 4
                    off[i] = (off[i] + 1 - 2 * (off[i] % 2)) * 4
                T.tile.gather(y, x, off, 0)
                T.copy(y, Y[vid, 0])
        return main

    x = rand((2, n), seed=5)
    want = f64(x).reshape(2, n // 2, 2)[:, :, ::-1].reshape(2, n)
    run_all(swap_pairs(), target, [x], [want])


def test_copy_pad_value_and_floordiv_slices(target):
    M, N, BM, BN = 40, 72, 16, 32

    @tilelang.jit(out_idx=[-1], target=target)
    def row_max():
        @T.prim_func
        def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M,), "float32")):
            with T.Kernel(T.ceildiv(M, BM), is_npu=True) as (cid, vid):
                x = T.alloc_ub((BM // 2, BN), "float32")
                part = T.alloc_ub((BM // 2,), "float32")
                best = T.alloc_ub((BM // 2,), "float32")
                T.tile.fill(best, -T.infinity("float32"))
                for k in T.serial(T.ceildiv(N, BN)):
                    # the slice bounds hold // (constant extent BM // 2 after simplification)
                    T.copy(X[cid * BM + vid * BM // 2:cid * BM + (vid + 1) * BM // 2,
                             k * BN:(k + 1) * BN], x, pad_value=-T.infinity("float32"))
                    T.reduce_max(x, part, dim=-1)
                    T.tile.max(best, best, part)
                T.copy(best, Y[cid * BM + vid * BM // 2])
        return main

    x = rand((M, N), seed=6) - 3.0  # every value negative: a zero pad would win the max
    run_all(row_max(), target, [x], [f64(x).max(1)])


def test_barrier_all_orders_scalar_reads(target):
    @tilelang.jit(out_idx=[-1], target=target)
    def firsts():
        @T.prim_func
        def main(A: T.Tensor((256,), "int32"), B: T.Tensor((4,), "int32")):
            with T.Kernel(2, is_npu=True) as (cid, vid):
                a = T.alloc_ub((1, 64), "int32")
                b = T.alloc_ub((1,), "int32")
                with T.Scope("V"):
                    T.copy(A[(cid * 2 + vid) * 64], a)
                    T.barrier_all()
                    first = a[0, 0]
                    T.barrier_all()
                    b[0] = first + 1
                    T.barrier_all()
                    T.copy(b, B[cid * 2 + vid])
        return main

    a = np.arange(256, dtype=np.int32) * 3
    run_all(firsts(), target, [a], [f64(a[::64]) + 1], "int32")


def test_expert_gemm_v0_without_flags_is_synchronised(target):
    M, N, K, BM, BN, BK = 48, 40, 80, 32, 32, 32

    @tilelang.jit(out_idx=[-1], target=target)
    def gemm():
        @T.prim_func
        def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
                 C: T.Tensor((M, N), "float32")):
            with T.Kernel(T.ceildiv(M, BM) * T.ceildiv(N, BN), is_npu=True) as (cid, _):
                bx = cid // T.ceildiv(N, BN)
                by = cid % T.ceildiv(N, BN)
                a = T.alloc_L1((BM, BK), "float16")
                b = T.alloc_L1((BK, BN), "float16")
                c = T.alloc_L0C((BM, BN), "float32")
                with T.Scope("C"):   # no flag: the compiler synchronises (tails clip)
                    for k in T.serial(T.ceildiv(K, BK)):
                        T.copy(A[bx * BM, k * BK], a)
                        T.copy(B[k * BK, by * BN], b)
                        T.gemm_v0(a, b, c, init=(k == 0))
                    T.copy(c, C[bx * BM, by * BN])
        return main

    a, b = rand((M, K), "float16", 7), rand((K, N), "float16", 8)
    run_all(gemm(), target, [a, b], [f64(a) @ f64(b)], reduce_len=K)


def test_workspace_idx_and_jit_impl(target):
    M, N = 32, 64

    @tilelang.jit(out_idx=[-1], workspace_idx=[1], target=target)
    def twice(M, N):
        assert twice.__jit_impl__.target in ("numpy", "llvm")

        @T.prim_func
        def main(X: T.Tensor((M, N), "float32"), W: T.Tensor((M, N), "float32"),
                 Y: T.Tensor((M, N), "float32")):
            with T.Kernel(2, is_npu=True) as (cid, vid):
                x = T.alloc_ub((M // 4, N), "float32")
                row = cid * (M // 2) + vid * (M // 4)
                T.copy(X[row, 0], x)
                T.tile.mul(x, x, 2.0)
                T.copy(x, W[row, 0])       # through the scratch tensor
                T.copy(W[row, 0], x)
                T.tile.add(x, x, 1.0)
                T.copy(x, Y[row, 0])
        return main

    x = rand((M, N), seed=9)
    kernel = twice(M, N)
    assert [b.name for b in kernel.inputs] == ["X"]
    run_all(kernel, target, [x], [2 * f64(x) + 1])


def test_tile_bitwise_and_round(target):
    n = 64

    @tilelang.jit(out_idx=[-2, -1], target=target)
    def bits():
        @T.prim_func
        def main(A: T.Tensor((2, n), "int32"), X: T.Tensor((2, n), "float32"),
                 B: T.Tensor((2, n), "int32"), R: T.Tensor((2, n), "float32")):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                a = T.alloc_ub((n,), "int32")
                t = T.alloc_ub((n,), "int32")
                x = T.alloc_ub((n,), "float32")
                T.copy(A[vid, 0], a)
                T.copy(X[vid, 0], x)
                T.tile.createvecindex(t, 0)
                T.tile.bitwise_xor(t, t, 1)         # the neighbour's index
                T.tile.bitwise_and(a, a, 0xF0F)
                T.tile.bitwise_or(a, a, t)
                T.tile.bitwise_lshift(t, t, 3)
                T.tile.bitwise_rshift(t, t, 1)
                T.tile.add(a, a, t)
                T.tile.bitwise_not(t, a)
                T.tile.sub(a, a, t)
                T.tile.round(x, x)
                T.copy(a, B[vid, 0])
                T.copy(x, R[vid, 0])
        return main

    rng = np.random.default_rng(10)
    a = rng.integers(0, 1 << 20, (2, n)).astype(np.int32)
    x = (rng.integers(-40, 40, (2, n)) / 4).astype(np.float32)  # many exact .5 ties
    j = np.arange(n) ^ 1
    v = ((a & 0xF0F) | j) + ((j << 3) >> 1)
    run_all(bits(), target, [a, x], [f64(v - ~v), np.round(f64(x))], "int32")


def test_persistent_tile_loop(target):
    M, N, K, BM, BN = 96, 64, 32, 32, 32   # 6 tiles over 4 blocks: two waves, the second partial

    @tilelang.jit(out_idx=[-1], target=target)
    def gemm():
        @T.prim_func
        def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
                 C: T.Tensor((M, N), "float32")):
            with T.Kernel(4) as bid:
                a, b, c = gemm_tiles(BM, BN, K)
                for bx, by in T.Persistent([T.ceildiv(M, BM), T.ceildiv(N, BN)], 4, bid):
                    T.copy(A[bx * BM, 0], a)
                    T.copy(B[0, by * BN], b)
                    T.gemm(a, b, c, clear_accum=True)
                    for i, j in T.Parallel(BM, BN):
                        c[i, j] = c[i, j] + bx * 10 + by
                    T.copy(c, C[bx * BM, by * BN])
        return main

    a, b = rand((M, K), "float16", 11), rand((K, N), "float16", 12)
    tiles = np.add.outer(np.repeat(np.arange(M // BM) * 10.0, BM), np.repeat(np.arange(N // BN), BN))
    run_all(gemm(), target, [a, b], [f64(a) @ f64(b) + tiles], reduce_len=K)


def test_block_sparse_gemm_if_on_data(target):
    """A gemm under an `if` on loaded data (a block mask) whose accumulator is copied out after
    the loop: on a path that never runs the gemm it keeps its zeros (was an internal error in
    infer_scopes: no UB version)."""
    M = N = K = 64
    bm = bk = 32

    @tilelang.jit(out_idx=[-1], target=target)
    def sparse():
        @T.prim_func
        def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
                 Mask: T.Tensor((2, 2, 2), "int32"), C: T.Tensor((M, N), "float32")):
            with T.Kernel(4, is_npu=True) as (cid, _):
                bx = cid // 2
                by = cid % 2
                a = T.alloc_shared((bm, bk), "float16")
                b = T.alloc_shared((bk, bm), "float16")
                c = T.alloc_fragment((bm, bm), "float")
                for k in T.serial(K // bk):
                    if Mask[bx, by, k]:
                        T.copy(A[bx * bm, k * bk], a)
                        T.copy(B[k * bk, by * bm], b)
                        T.gemm_v0(a, b, c)
                T.copy(c, C[bx * bm, by * bm])
        return main

    a, b = rand((M, K), "float16", 13), rand((K, N), "float16", 14)
    mask = np.array([[[1, 0], [0, 1]], [[1, 1], [0, 0]]], np.int32)
    want = np.zeros((M, N))
    for i in range(2):
        for j in range(2):
            for k in range(2):
                if mask[i, j, k]:
                    want[i * bm:(i + 1) * bm, j * bm:(j + 1) * bm] += \
                        f64(a[i * bm:(i + 1) * bm, k * bk:(k + 1) * bk]) @ f64(b[k * bk:(k + 1) * bk, j * bm:(j + 1) * bm])
    run_all(sparse(), target, [a, b, mask], [want], reduce_len=K)


def test_copy_1d_tensor_to_first_row_of_tile(target):
    """tilelang-ascend's cube GEMV: a 1-D GM vector into row 0 of a (16, bk) L1 tile, and row 0
    of the (16, bn) accumulator back into a 1-D GM vector."""
    N, K, BN, BK = 64, 96, 32, 32

    @tilelang.jit(out_idx=[-1], target=target)
    def gemv():
        @T.prim_func
        def main(x: T.Tensor((K,), "float16"), A: T.Tensor((N, K), "float16"),
                 y: T.Tensor((N,), "float32")):
            with T.Kernel(N // BN, is_npu=True) as (cid, _):
                a = T.alloc_L1((BN, BK), "float16")
                xl = T.alloc_L1((16, BK), "float16")
                c = T.alloc_L0C((16, BN), "float32")
                for k in T.serial(K // BK):
                    T.copy(x[k * BK], xl)
                    T.copy(A[cid * BN, k * BK], a)
                    T.gemm_v0(xl, a, c, transpose_B=True, init=(k == 0))
                T.copy(c, y[cid * BN])
        return main

    x, a = rand((K,), "float16", 15), rand((N, K), "float16", 16)
    run_all(gemv(), target, [x, a], [f64(a) @ f64(x)], reduce_len=K)


def test_trace_time_is_comprehension_pipelined_start(target):
    """`x is None` / `k in (...)`, generator expressions and list comprehensions at trace time,
    T.Pipelined(start, stop, num_stages=) and host-side tilelang.cdiv."""
    sizes = [16, 48]
    M, N = sum(sizes), 32

    @tilelang.jit(out_idx=[-1], target=target)
    def scaled(window=None):
        blocks = sum(tilelang.cdiv(s, 16) for s in sizes)
        offs = [sum(sizes[:i]) for i in range(len(sizes)) if sizes[i] > 0]

        @T.prim_func
        def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
            with T.Kernel(blocks) as bx:
                x = T.alloc_fragment((16, N), "float32")
                acc = T.alloc_fragment((16, N), "float32")
                T.clear(acc)
                for k in T.Pipelined(1, 4, num_stages=2):   # k = 1, 2, 3
                    T.copy(X[bx * 16, 0], x)
                    for i, j in T.Parallel(16, N):
                        acc[i, j] += x[i, j] * k if window is None else x[i, j]
                for i, j in T.Parallel(16, N):
                    acc[i, j] += offs[1] if 2 in (1, 2) else 0.0
                T.copy(acc, Y[bx * 16, 0])
        return main

    x = rand((M, N), seed=17)
    run_all(scaled(), target, [x], [6 * f64(x) + sizes[0]])
