"""A map that writes a gemm accumulator only in part (TileLang's gdn chunk_scaled_dot_kkt:
`for i, j in T.Parallel(S, S): if i <= j: A[i, j] = 0` after `T.gemm(..., A)`) keeps the
gemm's values in the other elements: infer_scopes brings the L0C value to UB before the map.
Both targets and the simulator, against float64 NumPy references."""
import numpy as np
import pytest

import tilelang_mini
import tilelang_mini.language as T

from util import close, f64, rand


def masked_gram(n, mode):
    @T.prim_func
    def main(X: T.Tensor((n, 64), T.float16), A: T.Tensor((n, n), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            xs = T.alloc_shared((n, 64), T.float16)
            acc = T.alloc_fragment((n, n), T.float32)
            T.fill(acc, 0)
            T.copy(X[0, 0], xs)
            T.gemm(xs, xs, acc, transpose_B=True)
            if mode == "upper":
                for i, j in T.Parallel(n, n):
                    if i <= j:
                        acc[i, j] = 0
            elif mode == "diag":  # a store not over the whole tile: one element per row
                for i in T.Parallel(n):
                    acc[i, i] = acc[i, i] + 100.0
            T.copy(acc, A[0, 0])
    return main


@pytest.mark.parametrize("target", ["numpy", "llvm"])
@pytest.mark.parametrize("mode", ["upper", "diag"])
def test_partial_map_keeps_gemm_values(target, mode):
    x = rand((64, 64), "float16", 5, 0.3)
    g = f64(x) @ f64(x).T
    want = np.tril(g, -1) if mode == "upper" else g + 100.0 * np.eye(64)
    kern = tilelang_mini.compile(masked_gram(64, mode), out_idx=[-1], target=target)
    close(np.asarray(kern(x)), want, "float32", 64)
    if target == "numpy":
        got, _ = kern.simulate(x)
        close(np.asarray(got), want, "float32", 64)


def gram_then_maybe_double():
    """TileLang's paged MLA decode: after the gemm, `if kr == 0:` a map rewrites the scores
    (its value then lives in UB) and nothing otherwise (it stays in L0C); the row max after the
    if reads it in UB either way."""
    @T.prim_func
    def main(X: T.Tensor((64, 64), T.float16), F: T.Tensor((1,), T.int32),
             M: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            xs = T.alloc_shared((64, 64), T.float16)
            acc = T.alloc_fragment((64, 64), T.float32)
            mx = T.alloc_fragment((64,), T.float32)
            T.copy(X[0, 0], xs)
            T.clear(acc)
            T.gemm(xs, xs, acc, transpose_B=True)
            if F[0] == 0:
                for i, j in T.Parallel(64, 64):
                    acc[i, j] = T.if_then_else(j > i, -1000.0, acc[i, j] * 2.0)
            T.reduce_max(acc, mx, dim=1)
            T.copy(mx, M[0])
    return main


@pytest.mark.parametrize("target", ["numpy", "llvm"])
@pytest.mark.parametrize("flag", [0, 1])
def test_if_leaving_tile_in_two_places(target, flag):
    x = rand((64, 64), "float16", 6, 0.3)
    g = f64(x) @ f64(x).T
    if flag == 0:
        i, j = np.indices(g.shape)
        g = np.where(j > i, -1000.0, 2 * g)
    want = g.max(1)
    kern = tilelang_mini.compile(gram_then_maybe_double(), out_idx=[-1], target=target)
    f = np.array([flag], np.int32)
    close(np.asarray(kern(x, f)), want, "float32", 64)
    if target == "numpy":
        got, _ = kern.simulate(x, f)
        close(np.asarray(got), want, "float32", 64)
