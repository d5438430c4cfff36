"""`topk(x [R, N], k) -> (values [R, k] largest first, indices [R, k] int32)`, built on the vector
unit's sort (T.sort), not on k passes of a max.

One block owns `block_R` rows. It keeps a working tile of `kp + C` candidates per row (kp = k
rounded up to 16, C the chunk): the first kp columns hold the best values so far (sorted), the
chunk of the row is appended after them, and one T.sort of the row leaves the new best kp in
front. Columns past the end of the row enter as -inf with indices >= N, so they lose every tie:
ties go to the smaller index, as a stable descending sort does.
"""
import numpy as np

import tilelang_mini.language as T

from ._core import Plan, as_input, int_arg, library_function

NEG_INF = float("-inf")


def topk_kernel(R, N, K, dtype, block_R=2, chunk=None):
    kp = -(-K // 16) * 16
    C = chunk or max(256, min(2048, 1 << (kp - 1).bit_length()))
    W = kp + C

    @T.prim_func
    def topk_rows(X: T.Tensor((R, N), dtype), V: T.Tensor((R, K), dtype),
                  I: T.Tensor((R, K), "int32")):
        with T.Kernel(T.ceildiv(R, block_R)) as bx:
            x = T.alloc_fragment((block_R, C), dtype)
            vals = T.alloc_fragment((block_R, W), "float32")
            idx = T.alloc_fragment((block_R, W), "int32")
            for i, j in T.Parallel(block_R, kp):
                vals[i, j] = NEG_INF
            for i, j in T.Parallel(block_R, kp):
                idx[i, j] = N + C + j          # placeholders lose every tie
            for c in T.serial(T.ceildiv(N, C)):
                T.copy(X[bx * block_R, c * C], x)
                for i, j in T.Parallel(block_R, C):
                    vals[i, kp + j] = T.if_then_else(c * C + j < N, T.cast(x[i, j], "float32"),
                                                     NEG_INF)
                for i, j in T.Parallel(block_R, C):
                    idx[i, kp + j] = c * C + j
                T.sort(vals, idx, descending=True)
            T.copy(vals[:, 0:K], V[bx * block_R, 0])
            T.copy(idx[:, 0:K], I[bx * block_R, 0])

    return topk_rows


@library_function
def topk(ctx, x, k):
    """Per row of x [R, N]: the k largest values (descending) and their int32 indices (ties:
    the smaller index first)."""
    plan = Plan()
    xa = as_input(x, name="x")
    if xa.ndim != 2:
        raise ValueError(f"topk takes a 2-D array [R, N], got shape {xa.shape}")
    from ..ir import dtypes
    dt = dtypes.canonical(xa.dtype)
    if dt is None or not dtypes.is_float(dt):
        xa, dt = xa.astype(np.float32), "float32"
    R, N = xa.shape
    k = int_arg(k, "topk: k")
    if not 1 <= k <= N:
        raise ValueError(f"topk needs 1 <= k <= N; got k={k}, N={N}")
    values = np.empty((R, k), xa.dtype)
    indices = np.empty((R, k), np.int32)
    plan.launch(ctx.compile(topk_kernel, R, N, k, dt), xa, values, indices)
    plan.result = (values, indices)
    return plan
