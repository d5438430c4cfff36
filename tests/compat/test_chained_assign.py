"""Chained assignment of trace-time values in a kernel body (TileLang's gemm_intrinsics:
`micro_size_x = micro_size_y = micro_size_k = 16`): the value once, bound to each name; a
chained allocation is a located error. Both targets and the simulator, float64 reference."""
import numpy as np
import pytest

import tilelang_mini
import tilelang_mini.language as T
from tilelang_mini import CompileError

from util import close, f64, rand


@tilelang_mini.jit
def scale_rows(X):
    n = T.const("n")
    X: T.Tensor((n, 64), T.float32)
    Y = T.empty((n, 64), T.float32)
    bm = bn = 32
    a = b = 1.5
    with T.Kernel(T.ceildiv(n, bm), T.ceildiv(64, bn)) as (bx, by):
        x = T.alloc_fragment((bm, bn), T.float32)
        T.copy(X[bx * bm, by * bn], x)
        for i, j in T.Parallel(bm, bn):
            x[i, j] = x[i, j] * a + b
        T.copy(x, Y[bx * bm, by * bn])
    return Y


@pytest.mark.parametrize("target", ["numpy", "llvm"])
def test_chained_assignment_binds_each_name(target):
    x = rand((64, 64), seed=2)
    kern, args = scale_rows.kernel_for(x, target=target)
    want = f64(x) * 1.5 + 1.5
    close(np.asarray(kern(*args)), want)
    if target == "numpy":
        got, _ = kern.simulate(*args)
        close(np.asarray(got), want)


def test_chained_allocation_is_located():
    def main(X: T.Tensor((16,), "float32")):
        with T.Kernel(1) as bx:
            a = b = T.alloc_fragment((16,), "float32")
            T.copy(X, a)

    with pytest.raises(CompileError) as e:
        T.prim_func(main)
    assert "chained assignment" in str(e.value) and "test_chained_assign.py:" in str(e.value)


@tilelang_mini.jit
def chunk_sums(cb, x):
    """cb's annotation uses `nchunks`, derived from seqlen, which only x's annotation binds
    (TileLang's mamba chunk_scan annotates cb before x)."""
    seqlen, cs = T.const("seqlen, cs")
    nchunks = T.ceildiv(seqlen, cs)
    cb: T.Tensor((nchunks, cs), T.float32)
    x: T.Tensor((seqlen,), T.float32)
    Y = T.empty((nchunks, cs), T.float32)
    with T.Kernel(nchunks) as bx:
        a = T.alloc_fragment((cs,), T.float32)
        b = T.alloc_fragment((cs,), T.float32)
        T.copy(cb[bx, 0], a)
        T.copy(x[bx * cs], b)
        for i in T.Parallel(cs):
            a[i] = a[i] + b[i]
        T.copy(a, Y[bx, 0])
    return Y


@pytest.mark.parametrize("target", ["numpy", "llvm"])
def test_symbol_bound_by_a_later_annotation(target):
    cb, x = rand((4, 32), seed=3), rand((128,), seed=4)
    kern, args = chunk_sums.kernel_for(cb, x, target=target)
    want = f64(cb) + f64(x).reshape(4, 32)
    close(np.asarray(kern(*args)), want)
    if target == "numpy":
        got, _ = kern.simulate(*args)
        close(np.asarray(got), want)
