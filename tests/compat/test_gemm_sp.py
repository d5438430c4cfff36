"""`T.gemm_sp(A_sparse, E, B, C)`: TileLang's 2:4 structured-sparse GEMM (examples/gemm_sp),
run dense: A rebuilt from its kept values and natural row-major metadata (a vector map), then a
gemm. Against float64 NumPy on every target and simulated; int16/int32/uint8 metadata,
float16/bfloat16/float32 A, transpose_B, clear_accum."""
import numpy as np
import pytest

import tilelang_mini as tilelang
import tilelang_mini.language as T
from tilelang_mini import CompileError
from tilelang_mini.ir import dtypes
from tilelang_mini.testing.references import compress_2to4, semi_sparse

from util import close, f64, rand


def sparse_gemm(M, N, K, bm, bn, bk, adt, edt, trans_b=False, e_cols=None):
    """C = A @ B with A 2:4 sparse (kept values and metadata E); e_cols: the width of the
    metadata tile, bk's by default (another width is a user error)."""
    keep = 1 if adt == "float32" else 2
    group = 2 if adt == "float32" else 4
    ef = np.dtype(edt).itemsize * 2 * group
    b_shape = (N, K) if trans_b else (K, N)
    b_tile = (bn, bk) if trans_b else (bk, bn)

    @T.prim_func
    def main(A: T.Tensor((M, K * keep // group), adt), E: T.Tensor((M, K // ef), edt),
             B: T.Tensor(b_shape, adt), C: T.Tensor((M, N), "float32")):
        with T.Kernel(N // bn, M // bm) as (bx, by):
            a = T.alloc_shared((bm, bk * keep // group), adt)
            e = T.alloc_shared((bm, e_cols or bk // ef), edt)
            b = T.alloc_shared(b_tile, adt)
            c = T.alloc_fragment((bm, bn), "float32")
            for k in T.Pipelined(K // bk, num_stages=2):
                T.copy(A[by * bm, k * bk * keep // group], a)
                T.copy(E[by * bm, k * bk // ef], e)
                if trans_b:
                    T.copy(B[bx * bn, k * bk], b)
                else:
                    T.copy(B[k * bk, bx * bn], b)
                T.gemm_sp(a, e, b, c, transpose_B=trans_b, clear_accum=k == 0,
                          policy=T.GemmWarpPolicy.Square)
            T.copy(c, C[by * bm, bx * bn])
    return main


@pytest.mark.parametrize("adt,edt,trans_b", [("float16", "int16", False),
                                             ("bfloat16", "int32", True),
                                             ("float16", "uint8", False),
                                             ("float32", "int16", False)])
def test_gemm_sp(target, adt, edt, trans_b):
    M, N, K = 64, 64, 128
    rng = np.random.default_rng(7)
    a = semi_sparse(rng, M, K, dtypes.to_numpy(adt))
    vals, meta = compress_2to4(a, edt)
    b = rand((N, K) if trans_b else (K, N), adt, seed=8)
    want = f64(a) @ (f64(b).T if trans_b else f64(b))
    kernel = tilelang.compile(sparse_gemm(M, N, K, 32, 32, 64, adt, edt, trans_b), out_idx=[3],
                              target=target)
    close(kernel(vals, meta, b), want, reduce_len=K)
    if target == "numpy":
        close(kernel.simulate(vals, meta, b)[0], want, reduce_len=K)


def test_gemm_sp_metadata_shape_is_located():
    with pytest.raises(CompileError, match="metadata for A_sparse") as info:
        sparse_gemm(32, 32, 64, 32, 32, 64, "float16", "int16", e_cols=2)   # 64 // 16 = 4 wanted
    assert "T.gemm_sp(a, e, b, c" in str(info.value) and "^" in str(info.value)
