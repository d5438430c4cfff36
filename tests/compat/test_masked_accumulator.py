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
