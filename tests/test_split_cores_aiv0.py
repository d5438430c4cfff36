"""split_cores: vector work that cannot be split by rows runs on AIV 0; consecutive such
statements of one core's run share one `if vid == 0` (before: one if per instruction, which kept
insert_sync from covering a run of producers with one flag). Numbers against NumPy on every
target and simulated; the IR after split_cores checked for the merged if."""
import numpy as np

import tilelang_mini as tilelang
import tilelang_mini.language as T
from tilelang_mini.ir.nodes import If, Scope, walk_statements


def one_row_kernel():
    @T.prim_func
    def main(A: T.Tensor((3, 32), "float32"), B: T.Tensor((1, 32), "float32")):
        with T.Kernel(1) as bx:
            a = T.alloc_fragment((1, 32), "float32")
            b = T.alloc_fragment((1, 32), "float32")
            c = T.alloc_fragment((1, 32), "float32")
            T.copy(A[0:1, :], a)
            T.copy(A[1:2, :], b)
            T.copy(A[2:3, :], c)
            for i, j in T.Parallel(1, 32):
                a[i, j] = a[i, j] * b[i, j] + c[i, j]
            T.copy(a, B)
    return main


def test_aiv0_statements_share_one_if(target):
    kernel = tilelang.compile(one_row_kernel(), out_idx=[1], target=target)
    split = kernel.compilation.stages["split_cores"]
    scopes = [s for s in walk_statements(split.body) if isinstance(s, Scope) and s.core == "V"]
    assert scopes and all(len(sc.body) == 1 and isinstance(sc.body[0], If) for sc in scopes)
    x = np.random.default_rng(3).standard_normal((3, 32)).astype(np.float32)
    want = x[0:1].astype(np.float64) * x[1:2] + x[2:3]
    np.testing.assert_allclose(kernel(x), want, rtol=1e-6, atol=1e-6)
    if target == "numpy":
        np.testing.assert_allclose(kernel.simulate(x)[0], want, rtol=1e-6, atol=1e-6)
