"""Tuple assignment of allocations, as TileLang kernels write it (`A_s, B_s = T.alloc_shared(..),
T.alloc_shared(..)`; fragments and locals too): Python unpacks the tuple at trace time, so it is
one allocation per name. Kernels on both targets and simulated, against float64 NumPy."""
import numpy as np
import pytest

import tilelang_mini as tilelang
import tilelang_mini.language as T
from tilelang_mini.errors import CompileError

from util import close, f64, rand


@tilelang.jit(out_idx=[-1])
def matmul(M, N, K, bm, bn, bk, dtype=T.float16, accum=T.float32):
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_shared, B_shared = T.alloc_shared((bm, bk), dtype), T.alloc_shared((bk, bn), dtype)
            [C_local] = [T.alloc_fragment((bm, bn), accum)]
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                T.copy(A[by * bm, ko * bk], A_shared)
                T.copy(B[ko * bk, bx * bn], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * bm, bx * bn])
    return main


def test_gemm_with_tuple_allocated_shared_tiles(target, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    a, b = rand((96, 64), "float16", seed=1), rand((64, 128), "float16", seed=2)
    kern = matmul(96, 128, 64, 32, 64, 32)
    want = f64(a) @ f64(b)
    close(kern(a, b), want, "float16", reduce_len=64)
    close(kern.simulate(a, b)[0], want, "float16", reduce_len=64)


@tilelang.jit(out_idx=[-1])
def softmax(M, N, bm, dtype=T.float32):
    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(M // bm, threads=128) as bx:
            x_s, y_s = T.alloc_shared((bm, N), dtype), T.alloc_shared((bm, N), dtype)
            x_f, m_f, s_f, scale = (T.alloc_fragment((bm, N), T.float32),
                                    T.alloc_fragment((bm,), T.float32),
                                    T.alloc_local((bm,), T.float32), 1.0)
            T.copy(X[bx * bm, 0], x_s)
            T.copy(x_s, x_f)
            T.reduce_max(x_f, m_f, dim=1)
            for i, j in T.Parallel(bm, N):
                x_f[i, j] = T.exp(x_f[i, j] * scale - m_f[i])
            T.reduce_sum(x_f, s_f, dim=1)
            for i, j in T.Parallel(bm, N):
                x_f[i, j] = x_f[i, j] / s_f[i]
            T.copy(x_f, y_s)
            T.copy(y_s, Y[bx * bm, 0])
    return main


def test_softmax_with_tuple_allocated_fragments_and_locals(target, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    x = rand((64, 48), seed=3, scale=3.0)
    e = np.exp(f64(x) - f64(x).max(axis=1, keepdims=True))
    want = e / e.sum(axis=1, keepdims=True)
    kern = softmax(64, 48, 16)
    close(kern(x), want, reduce_len=48)
    close(kern.simulate(x)[0], want, reduce_len=48)


def test_a_tuple_without_allocations_is_not_split():
    """`a, b = b, a` reads the names it binds: Python's evaluate-then-bind order is kept (the
    values swap), and an allocation nested in an expression is still a located error."""
    @T.prim_func
    def swap(Out: T.Tensor((2,), T.float32)):
        with T.Kernel(1):
            a, b = 1.0, 2.0
            a, b = b, a
            Out[0] = a
            Out[1] = b

    np.testing.assert_array_equal(tilelang.compile(swap, out_idx=[-1], target="numpy")(), [2.0, 1.0])

    with pytest.raises(CompileError, match="must be assigned to a name"):
        @T.prim_func
        def nested(Out: T.Tensor((4,), T.float32)):
            with T.Kernel(1):
                a, b = (T.alloc_shared((4,), T.float32), 1), 2
                Out[0] = b + a[0]

        tilelang.compile(nested, out_idx=[-1], target="numpy")


def test_nested_tuples_unpack_too():
    @T.prim_func
    def main(X: T.Tensor((8,), T.float32), Out: T.Tensor((8,), T.float32)):
        with T.Kernel(1):
            (x_s, two), y_l = (T.alloc_shared((8,), T.float32), 2.0), T.alloc_local((8,), T.float32)
            T.copy(X, x_s)
            for i in T.Parallel(8):
                y_l[i] = x_s[i] * two
            T.copy(y_l, Out)

    x = rand((8,), seed=4)
    kern = tilelang.compile(main, out_idx=[-1], target="numpy")
    close(kern(x), 2 * f64(x))
    close(kern.simulate(x)[0], 2 * f64(x))
