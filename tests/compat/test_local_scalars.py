"""TileLang's one-element "local" buffers (`T.alloc_fragment((1,), T.int32, "local")`, the scope
as a third argument) are scalars: indexed `x[0]`, read by the cube core in the bounds and ifs
around gemms. The stream-K shape of tilelang's gemm_streamk example: programs walk a range of
K-iterations across tile boundaries, with a run-time loop bound and an `if` guard on scalars
and atomic adds of partial tiles; `while` on a run-time condition on such a scalar."""
import numpy as np

import tilelang_mini
import tilelang_mini.language as T

from util import f64, rand

M, N, K, BM, BN, BK = 32, 64, 128, 16, 32, 32
TILES = (M // BM) * (N // BN)
ITERS = K // BK
PROGRAMS = 3
PER = -(-TILES * ITERS // PROGRAMS)     # iterations per program (the last gets fewer)


@tilelang_mini.jit
def streamk(A, B, C, trips=3):
    A: T.Tensor((M, K), T.float16)
    B: T.Tensor((N, K), T.float16)
    C: T.Tensor((M, N), T.float32)
    with T.Kernel(PROGRAMS, threads=64) as pid:
        a_s = T.alloc_shared((BM, BK), T.float16)
        b_s = T.alloc_shared((BN, BK), T.float16)
        acc = T.alloc_fragment((BM, BN), T.float32)
        start = T.alloc_fragment((1,), T.int32, "local")
        end = T.alloc_fragment((1,), T.int32, scope="local")
        prog = PROGRAMS - 1 - pid  # block 0 takes the last range: a later block's spare trip
        start[0] = prog * PER      # (guard false) would overwrite its tile if it ran
        last = T.min((prog + 1) * PER, TILES * ITERS)
        for _ in T.serial(trips):  # a bound on the tiles a program touches (2), and one more
            if start[0] < last:
                end[0] = T.min(start[0] + (ITERS - start[0] % ITERS), last)
                tile = start[0] // ITERS
                tm = tile // (N // BN)
                tn = tile % (N // BN)
                T.clear(acc)
                for k in T.Pipelined(end[0] - start[0], num_stages=2):
                    T.copy(A[tm * BM, (k + start[0] % ITERS) * BK], a_s)
                    T.copy(B[tn * BN, (k + start[0] % ITERS) * BK], b_s)
                    T.gemm(a_s, b_s, acc, transpose_B=True)
                if start[0] % ITERS == 0 and end[0] % ITERS == 0:
                    T.copy(acc, C[tm * BM, tn * BN])
                else:
                    for i, j in T.Parallel(BM, BN):
                        T.atomic_add(C[tm * BM + i, tn * BN + j], acc[i, j])
                start[0] = end[0]


def test_streamk_with_local_scalars(target, monkeypatch):
    """Every target and the simulator against a float64 reference; the guard is false in the
    programs' later trips (they must not write again), partial tiles meet by atomic adds."""
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    assert PER % ITERS != 0  # programs start and end inside tiles
    a, b = rand((M, K), "float16", 1), rand((N, K), "float16", 2)
    want = f64(a) @ f64(b).T
    c = np.zeros((M, N), np.float32)
    streamk(a, b, c)
    np.testing.assert_allclose(c, want, rtol=2e-3, atol=2e-3)
    kern, args = streamk.kernel_for(a, b, np.zeros((M, N), np.float32))
    kern.simulate(*args)
    np.testing.assert_allclose(args[2], want, rtol=2e-3, atol=2e-3)


def test_local_scope_one_element_is_a_scalar():
    kern, _ = streamk.kernel_for(rand((M, K), "float16"), rand((N, K), "float16"),
                                 np.zeros((M, N), np.float32))
    from tilelang_mini.ir.nodes import Alloc
    allocs = {s.buffer.name: s.buffer.scope for s in kern.frontend.body if isinstance(s, Alloc)}
    assert allocs["start"] == allocs["end"] == "var" and allocs["acc"] == "fragment"


def test_run_time_while_on_a_local_scalar(target, monkeypatch):
    """gemm_streamk's own form, `while start_iter[0] < last_iter:` on a "local" scalar: an IR
    while loop (tests/compat/test_while_runtime.py has the rest)."""
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)

    @tilelang_mini.jit
    def spin(X):
        X: T.Tensor((8,), T.int32)
        with T.Kernel(1) as _:
            i = T.alloc_fragment((1,), T.int32, "local")
            i[0] = 0
            while i[0] < X[0]:
                i[0] = i[0] + 1
            X[1] = i[0]

    for n in (0, 5):
        x = np.zeros(8, np.int32)
        x[0] = n
        spin(x)
        assert x[1] == n


def test_trace_time_while_unrolls(target, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)

    @tilelang_mini.jit
    def doubled(X, times=3):
        n = T.const("n")
        X: T.Tensor((n,), T.float32)
        Y = T.empty((n,), T.float32)
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((n,), T.float32)
            T.copy(X, x)
            left = times
            while left > 0:
                for i in T.Parallel(n):
                    x[i] = x[i] * 2.0
                left -= 1
            T.copy(x, Y)
        return Y

    x = rand((16,), seed=3)
    np.testing.assert_allclose(doubled(x), f64(x) * 8.0, rtol=1e-6)
    np.testing.assert_allclose(doubled(x, 1), f64(x) * 2.0, rtol=1e-6)
