"""TileLang's expression functions, dtype values and trace-time Python, in the upstream
spelling, on every target and simulated, against float64 NumPy references."""
import math

import numpy as np
import pytest

import tilelang_mini
import tilelang_mini.language as T
from tilelang_mini import CompileError

from util import close, f64, rand

import kernels

M, N, BM = 64, 48, 16


def elementwise(fn_body, dtype=T.float32):
    """A row-block elementwise kernel whose body is `fn_body(x, y, i, j)` (a macro)."""

    @tilelang_mini.jit(out_idx=[-1])
    def factory(M, N, block_M=BM, dtype=dtype):
        @T.prim_func
        def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
            with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
                x = T.alloc_fragment((block_M, N), dtype)
                y = T.alloc_fragment((block_M, N), dtype)
                T.copy(X[bx * block_M, 0], x)
                fn_body(x, y, bx)
                T.copy(y, Y[bx * block_M, 0])
        return main
    return factory


def test_dtypes_are_values():
    assert T.float16 == "float16" and T.float32 == "float32" and T.bfloat16 == "bfloat16"
    assert T.float == "float32" and T.int32 == "int32" and T.uint8 == "uint8"
    assert T.dtype("float16") == T.float16 and {T.float16: 1}["float16"] == 1
    assert T.float16.bits == 16 and T.float32(1.5) == np.float32(1.5)
    assert T.infinity(T.float32) == math.inf and -T.infinity("float16") == -math.inf
    assert T.max_value(T.float16) == 65504.0 and T.min_value(T.int32) == -2**31
    assert tilelang_mini.PassConfigKey.TL_DISABLE_TMA_LOWER == "TL_DISABLE_TMA_LOWER"
    assert T.GemmWarpPolicy.FullRow != T.GemmWarpPolicy.Square


def sigmoid_tanh_erf(x, y, bx):
    for i, j in T.Parallel(BM, N):
        y[i, j] = T.sigmoid(x[i, j]) + T.tanh(x[i, j]) * 0.5 + T.erf(x[i, j]) * 0.25


def log2_clamp_exp2(x, y, bx):
    for i, j in T.Parallel(BM, N):
        y[i, j] = T.log2(T.abs(x[i, j]) + 1.0) + T.clamp(x[i, j], -0.5, 0.5) + T.exp2(x[i, j])


def select_forms(x, y, bx):
    for i, j in T.Parallel(BM, N):
        y[i, j] = T.if_then_else(x[i, j] > 0, x[i, j], -T.infinity(T.float32)) \
            if False else T.if_then_else(x[i, j] > 0, x[i, j], x[i, j] * 0.1)
    for i, j in T.Parallel(BM, N):
        y[i, j] = y[i, j] + (1.0 if (bx * BM + i) % 2 == 0 else 2.0) * (x[i, j] ** 2)


def causal(x, y, bx):
    for i, j in T.Parallel(BM, N):
        y[i, j] = T.if_then_else(bx * BM + i >= j, x[i, j], -T.infinity(T.float32))
    for i, j in T.Parallel(BM, N):
        y[i, j] = T.max(y[i, j], -1e4)


def if_in_parallel(x, y, bx):
    for i, j in T.Parallel(BM, N):
        if x[i, j] > 0.25:
            y[i, j] = x[i, j] * 2.0
        else:
            y[i, j] = T.Cast(T.float32, T.floordiv(j, 4) + T.floormod(bx * BM + i, 3))


def logical_helpers(x, y, bx):
    for i, j in T.Parallel(BM, N):
        y[i, j] = T.if_then_else(T.And(x[i, j] > -0.5, T.Not(x[i, j] > 0.5)), 1.0,
                                 T.if_then_else(T.Or(j == 0, j == 1), 2.0, 3.0))


def casts_and_ctors(x, y, bx):
    for i, j in T.Parallel(BM, N):
        y[i, j] = T.float32(T.Cast(T.float16, x[i, j])) + T.float32(1.0) + T.min(x[i, j], 0.0)


REFS = {
    sigmoid_tanh_erf: lambda x, r: 1 / (1 + np.exp(-x)) + np.tanh(x) * 0.5
    + np.vectorize(math.erf)(x) * 0.25,
    log2_clamp_exp2: lambda x, r: np.log2(np.abs(x) + 1) + np.clip(x, -0.5, 0.5) + np.exp2(x),
    select_forms: lambda x, r: np.where(x > 0, x, 0.1 * x) + np.where(r % 2 == 0, 1.0, 2.0) * x * x,
    causal: lambda x, r: np.where(r >= np.arange(N)[None, :], x, -1e4),
    if_in_parallel: lambda x, r: np.where(x > 0.25, 2 * x, np.arange(N)[None, :] // 4 + r % 3),
    logical_helpers: lambda x, r: np.where((x > -0.5) & ~(x > 0.5), 1.0,
                                           np.where(np.arange(N)[None, :] < 2, 2.0, 3.0)),
    casts_and_ctors: lambda x, r: x.astype(np.float16).astype(np.float64) + 1 + np.minimum(x, 0),
}


@pytest.mark.parametrize("body", list(REFS), ids=lambda f: f.__name__)
def test_expression_functions(target, body):
    x = rand((M, N), seed=1)
    kernel = elementwise(body)(M, N)
    rows = np.arange(M)[:, None] * np.ones((1, N), dtype=np.int64)
    want = REFS[body](f64(x), rows)
    close(kernel(x), want)
    if target == "numpy":
        out, _ = kernel.simulate(x)
        close(out, want)


def scale_rows(buf, factor):
    """A plain Python helper issuing T operations: inlined like a T.macro."""
    for i, j in T.Parallel(BM, N):
        buf[i, j] = buf[i, j] * factor


def relu_value(v):
    return T.max(v, 0.0)


def test_python_helpers_inlined(target):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(M // BM) as bx:
            t = T.alloc_local((BM, N), T.float32)
            T.copy(X[bx * BM, 0], t)
            scale_rows(t, 3.0)
            for i, j in T.Parallel(BM, N):
                t[i, j] = relu_value(t[i, j])
            T.copy(t, Y[bx * BM, 0])

    x = rand((M, N), seed=2)
    close(tilelang_mini.compile(main, out_idx=[-1], target=target)(x), np.maximum(3 * f64(x), 0))


def test_loops_and_vars(target):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M,), "float32")):
        with T.Kernel(M // BM) as bx:
            acc = T.alloc_var(T.float32, init=0.0)
            t = T.alloc_fragment((BM, N), T.float32)
            s = T.alloc_fragment((BM,), T.float32)
            T.use_swizzle(panel_size=10, enable=True)
            T.annotate_layout({})
            T.copy(X[bx * BM, 0], t)
            for i in T.serial(BM):
                acc = 0.0
                for j in T.serial(1, N, 2):  # odd columns
                    acc = acc + t[i, j]
                for a, b in T.grid(1, 2):
                    acc = acc + t[i, a + b * 2]  # columns 0 and 2
                s[i] = acc
            for v in T.vectorized(BM):
                s[v] = s[v] * 0.5
            T.copy(s, Y[bx * BM])

    x = rand((M, N), seed=3)
    want = (f64(x)[:, 1::2].sum(1) + f64(x)[:, 0] + f64(x)[:, 2]) * 0.5
    close(tilelang_mini.compile(main, out_idx=[-1], target=target)(x), want, reduce_len=N)


def test_gemm_runtime_clear_and_hints(target):
    Mg, Ng, Kg, bk = 32, 32, 64, 16

    @T.prim_func
    def main(A: T.Tensor((Mg, Kg), T.float16), B: T.Tensor((Kg, Ng), T.float16),
             C: T.Tensor((Mg, Ng), T.float32)):
        with T.Kernel(1, 1, threads=256) as (bx, by):
            a_s = T.alloc_shared((Mg, bk), T.float16)
            b_s = T.alloc_shared((bk, Ng), T.float16)
            c_f = T.alloc_fragment((Mg, Ng), T.float32)
            for k in T.Pipelined(Kg // bk, num_stages=2):
                T.copy(A[0, k * bk], a_s)
                T.copy(B[k * bk, 0], b_s)
                T.gemm(a_s, b_s, c_f, clear_accum=k == 0, policy=T.GemmWarpPolicy.FullRow)
            T.copy(c_f, C[0, 0])

    a, b = rand((Mg, Kg), "float16", 4), rand((Kg, Ng), "float16", 5)
    kernel = tilelang_mini.compile(main, out_idx=[-1], target=target)
    close(kernel(a, b), f64(a) @ f64(b), reduce_len=Kg)
    if target == "numpy":
        out, _ = kernel.simulate(a, b)
        close(out, f64(a) @ f64(b), reduce_len=Kg)


@pytest.mark.parametrize("snippet,fragment", [
    ("T.tma_copy(X, t)", "T.tma_copy is GPU-only"),
])
def test_gpu_only_errors_are_located(snippet, fragment):
    src = f'''
import tilelang_mini.language as T
def main(X: T.Tensor((16, 16), "float32")):
    with T.Kernel(1) as bx:
        t = T.alloc_fragment((16, 16), "float32")
        {snippet}
'''
    ns = {}
    import linecache
    fname = f"<compat-{abs(hash(snippet))}>"
    linecache.cache[fname] = (len(src), None, src.splitlines(True), fname)
    exec(compile(src, fname, "exec"), ns)
    with pytest.raises(CompileError) as info:
        T.prim_func(ns["main"])
    err = info.value
    assert fragment in str(err) and err.loc.line == 6


@pytest.mark.parametrize("dim,reverse", [(1, False), (0, True)])
def test_cumsum(target, dim, reverse):
    @T.macro
    def cumsum(X, t, c, bx):
        T.cumsum(t, c, dim=dim, reverse=reverse)

    main = kernels.row_blocks(M, N, BM, cumsum)

    x = rand((M, N), seed=7)
    blocks = f64(x).reshape(M // BM, BM, N)
    ax = 1 + dim
    want = np.flip(np.cumsum(np.flip(blocks, ax), ax), ax) if reverse else np.cumsum(blocks, ax)
    close(tilelang_mini.compile(main, out_idx=[-1], target=target)(x), want.reshape(M, N),
          reduce_len=N)
