"""A dict literal of trace-time values in an eager kernel body (TileLang's hadamard example:
`elem_size = {T.float32: 4, T.float16: 2, T.bfloat16: 2}[dtype]`) is Python at trace time:
the kernel it selects runs on both targets and simulated against a float64 reference."""
import numpy as np
import pytest

import tilelang_mini
import tilelang_mini.language as T
from tilelang_mini import CompileError

from util import close, f64, rand


@tilelang_mini.jit
def scaled_copy(X, dtype):
    n = T.const("n")
    X: T.Tensor((n,), dtype)
    Y = T.empty((n,), T.float32)
    factor = {T.float32: 4, T.float16: 2, T.bfloat16: 2}[dtype]
    with T.Kernel(1) as bx:
        x = T.alloc_fragment((n,), T.float32)
        T.copy(X[0:n], x)
        for i in T.Parallel(n):
            x[i] = x[i] * factor
        T.copy(x, Y[0:n])
    return Y


@pytest.mark.parametrize("target", ["numpy", "llvm"])
@pytest.mark.parametrize("dtype,factor", [("float32", 4), ("float16", 2)])
def test_dict_literal_selects_a_trace_time_value(target, dtype, factor):
    x = rand((64,), dtype, 3)
    kern, args = scaled_copy.kernel_for(x, dtype, target=target)
    y = kern(*args)
    close(np.asarray(y), f64(x) * factor, "float32")
    if target == "numpy":
        got, _ = kern.simulate(*args)
        close(np.asarray(got), f64(x) * factor, "float32")


def test_dict_with_unpacking_is_located():
    @tilelang_mini.jit
    def bad(X):
        n = T.const("n")
        X: T.Tensor((n,), T.float32)
        Y = T.empty((n,), T.float32)
        table = {**{1: 2}}
        with T.Kernel(1) as bx:
            T.copy(X[0:n], Y[0:n])
        return Y

    with pytest.raises(CompileError) as err:
        bad(np.zeros(8, np.float32))
    assert "dict literal" in str(err.value) and "test_trace_dict.py" in str(err.value)
