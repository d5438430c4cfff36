"""TVM's cross-thread reduction in per-thread (SIMT) TileLang code:

    with T.attr(T.comm_reducer(lambda x, y: x + y, [T.cast(0, dt)]), "reduce_scope", ...):
        T.evaluate(T.tvm_thread_allreduce(T.uint32(1), v[0], True, out[0], tk, dtype="handle"))

gives each thread the reducer over the threads differing only in the listed thread indices
(frontend/simt.thread_allreduce). Kernels in TileLang's dialect, on both targets and simulated,
against float64 NumPy references; and the located errors for other T.attr uses."""
import numpy as np
import pytest

import tilelang_mini
import tilelang_mini.language as T
from tilelang_mini import CompileError

from util import close, f64, rand


def run_and_simulate(f, args, want, dtype="float32", reduce_len=1):
    close(f(*args), want, dtype, reduce_len)
    kern, kargs = f.kernel_for(*args)
    out, _ = kern.simulate(*kargs)
    close(out, want, dtype, reduce_len)


@tilelang_mini.jit
def splitk_rows(A, B, BLOCK_N: int, RT: int, TILE: int):
    """y = B @ a: BLOCK_N rows a block, RT threads splitting each row's K, a per-thread partial
    sum, then the sum over the RT threads of a row (tk) by tvm_thread_allreduce."""
    N, K = T.const("N, K")
    A: T.Tensor((K,), T.float16)
    B: T.Tensor((N, K), T.float16)
    C = T.empty((N,), T.float16)
    with T.Kernel(T.ceildiv(N, BLOCK_N), threads=(BLOCK_N, RT)) as bn:
        tn = T.get_thread_binding(0)
        tk = T.get_thread_binding(1)
        part = T.alloc_local((1,), T.float32)
        total = T.alloc_local((1,), T.float32)
        T.clear(part)
        for bk in T.serial(K // (RT * TILE)):
            for k in T.serial(TILE):
                col = bk * RT * TILE + tk * TILE + k
                part[0] += A[col].astype(T.float32) * B[bn * BLOCK_N + tn, col].astype(T.float32)
        with T.attr(T.comm_reducer(lambda x, y: x + y, [T.cast(0, T.float32)]), "reduce_scope",
                    T.reinterpret(T.uint64(0), dtype="handle")):
            T.evaluate(T.tvm_thread_allreduce(T.uint32(1), part[0], True, total[0], tk,
                                              dtype="handle"))
        if tk == 0:
            C[bn * BLOCK_N + tn] = total[0]
    return C


@pytest.mark.parametrize("block_n, rt, tile", [(2, 32, 8), (4, 8, 4), (1, 4, 16)])
def test_splitk_sum_over_one_thread_dim(target, monkeypatch, block_n, rt, tile):
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    a, b = rand((256,), "float16", seed=3), rand((8, 256), "float16", seed=4)
    run_and_simulate(splitk_rows, [a, b, block_n, rt, tile], f64(b) @ f64(a), "float16", 256)


@tilelang_mini.jit
def block_max(X, THREADS: int):
    """Each thread takes the max of its strided slice of a row; the block's max over all its
    threads (a 1-D block, every thread index reduced) is written by every thread's lane."""
    M, N = T.const("M, N")
    X: T.Tensor((M, N), T.float32)
    Y = T.empty((M, THREADS), T.float32)
    with T.Kernel(M, threads=THREADS) as bm:
        tx = T.get_thread_binding(0)
        mine = T.alloc_local((1,), T.float32)
        best = T.alloc_local((1,), T.float32)
        mine[0] = -T.infinity(T.float32)
        for j in T.serial(N // THREADS):
            mine[0] = T.max(mine[0], X[bm, j * THREADS + tx])
        with T.attr(T.comm_reducer(lambda a, b: T.max(a, b), [-T.infinity(T.float32)]),
                    "reduce_scope", T.reinterpret(T.uint64(0), dtype="handle")):
            T.evaluate(T.tvm_thread_allreduce(T.uint32(1), mine[0], True, best[0], tx,
                                              dtype="handle"))
        Y[bm, tx] = best[0]
    return Y


def test_max_over_all_threads_reaches_every_thread(target, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    x = rand((3, 64), seed=5)
    want = np.repeat(f64(x).max(1, keepdims=True), 16, 1)
    run_and_simulate(block_max, [x, 16], want)


def test_other_attr_is_located():
    @tilelang_mini.jit
    def k(X):
        X: T.Tensor((8,), T.float32)
        Y = T.empty((8,), T.float32)
        with T.Kernel(1):
            with T.attr(0, "pragma_unroll", 1):  # AT:attr
                T.copy(X, Y)
        return Y

    with pytest.raises(CompileError, match=r"T.attr is supported only as TVM's cross-thread") as e:
        k(rand((8,)))
    assert e.value.loc.line == _line("# AT:attr")


def test_two_values_is_located():
    @tilelang_mini.jit
    def k(X):
        X: T.Tensor((4,), T.float32)
        Y = T.empty((4,), T.float32)
        with T.Kernel(1, threads=4):
            tx = T.get_thread_binding(0)
            v = T.alloc_local((2,), T.float32)
            o = T.alloc_local((2,), T.float32)
            v[0] = X[tx]
            with T.attr(T.comm_reducer(lambda x, y: x + y, [T.cast(0, T.float32)]),
                        "reduce_scope", T.reinterpret(T.uint64(0), dtype="handle")):
                T.evaluate(T.tvm_thread_allreduce(  # AT:two
                    T.uint32(2), v[0], v[1], True, o[0], o[1], tx, dtype="handle"))
            Y[tx] = o[0]
        return Y

    with pytest.raises(CompileError, match="one value, no condition") as e:
        k(rand((4,)))
    assert e.value.loc.line == _line("# AT:two")


def _line(mark: str) -> int:
    with open(__file__) as f:
        return next(i for i, ln in enumerate(f, 1) if mark in ln)
