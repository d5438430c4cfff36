"""Small constructors for building IR directly in tests (no frontend)."""
from tilelang_mini.ir import dtypes
from tilelang_mini.ir.nodes import (
    Alloc, BinOp, Buffer, Call, Cast, Const, Copy, Fill, For, Gemm, Kernel, Load, Region, Store,
    Var,
)

import numpy as np


def c(v, dtype=None):
    if dtype is None:
        dtype = "float32" if isinstance(v, float) else "int32"
    return Const(v, dtype)


def v(name):
    return Var(name)


def add(a, b):
    return BinOp("+", a, b)


def mul(a, b):
    return BinOp("*", a, b)


def reg(buf, starts, extents):
    return Region(buf, tuple(c(s) if isinstance(s, int) else s for s in starts), tuple(extents))


def full(buf):
    return Region.full(buf)


def kernel(params, body, grid=(1,), grid_vars=("bx",), is_npu=False):
    return Kernel("k", tuple(params), tuple(grid), tuple(grid_vars), tuple(body), is_npu)


def close(actual, expected, dtype):
    rtol, atol = dtypes.tolerance(dtype)
    np.testing.assert_allclose(np.asarray(actual, np.float64), expected, rtol=rtol, atol=atol)


def ceildiv(a, b):
    return -(-a // b)


def tiled_gemm(M, N, K, in_dtype, bm=32, bn=32, bk=16, ta=False, tb=False, scope="shared"):
    """C = A @ B (either transposed) in bm x bn tiles, K in pipelined bk chunks; tails on every side."""
    A = Buffer("A", (K, M) if ta else (M, K), in_dtype)
    B = Buffer("B", (N, K) if tb else (K, N), in_dtype)
    C = Buffer("C", (M, N), "float32")
    A_s = Buffer("A_s", (bk, bm) if ta else (bm, bk), in_dtype, scope)
    B_s = Buffer("B_s", (bn, bk) if tb else (bk, bn), in_dtype, scope)
    C_l = Buffer("C_l", (bm, bn), "float32", "fragment")
    row, col, kk = mul(v("by"), c(bm)), mul(v("bx"), c(bn)), mul(v("k"), c(bk))
    a_src = reg(A, (kk, row), (bk, bm)) if ta else reg(A, (row, kk), (bm, bk))
    b_src = reg(B, (col, kk), (bn, bk)) if tb else reg(B, (kk, col), (bk, bn))
    body = [
        Alloc(A_s), Alloc(B_s), Alloc(C_l),
        Fill(full(C_l), c(0.0)),
        For(("k",), (c(ceildiv(K, bk)),), "pipelined", (
            Copy(a_src, full(A_s)),
            Copy(b_src, full(B_s)),
            Gemm(full(A_s), full(B_s), full(C_l), transpose_a=ta, transpose_b=tb),
        ), num_stages=2),
        Copy(full(C_l), reg(C, (row, col), (bm, bn))),
    ]
    return kernel((A, B, C), body, (ceildiv(N, bn), ceildiv(M, bm)), ("bx", "by"))


def exp_rsqrt_map(rows, cols):
    """Y[i, j] = bf16(f16(max(exp(X[i, j] - X[i, 0]), rsqrt(X[i, j]^2 + 1))) * 2) over a
    parallel loop: X float16 and Y bfloat16 (rows x cols)."""
    X = Buffer("X", (rows, cols), "float16")
    Y = Buffer("Y", (rows, cols), "bfloat16")
    i, j = v("i"), v("j")
    x_ij, x_i0 = Load(X, (i, j)), Load(X, (i, c(0)))
    value = mul(Cast("float16", Call("max", (Call("exp", (BinOp("-", x_ij, x_i0),)),
                                             Call("rsqrt", (add(mul(x_ij, x_ij), c(1.0)),))))),
                c(2.0))
    return kernel((X, Y), [For(("i", "j"), (c(rows), c(cols)), "parallel",
                               (Store(Y, (i, j), value),))])


def compile_unchecked(text, out_idx, chip="ascend910b"):
    """IR text of an expert kernel compiled for numpy without the static check of its flags
    (check_sync), so that the simulator can be shown what the check rejects."""
    import tilelang_mini
    from tilelang_mini.runtime.kernel import JITKernel, _normalize_out_idx
    from tilelang_mini.transform.pipeline import Options, run_pipeline
    kernel = tilelang_mini.parse_ir(text)
    options = Options(chip=chip, target="numpy")
    compilation = run_pipeline(kernel, options, stop_after="plan_memory")
    return JITKernel(None, kernel, _normalize_out_idx(out_idx, len(kernel.params)), options,
                     compilation=compilation)
