"""Small constructors for building IR directly in tests (no frontend)."""
from tilelang_mini.ir import dtypes
from tilelang_mini.ir.nodes import BinOp, Const, Kernel, Region, Var

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
