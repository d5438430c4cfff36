"""insert_sync: a `pipe_barrier(V)` placed inside an `if vid == 0:` block (split_cores' AIV 0
work, or a developer kernel's own) orders the vector pipe of AIV 0 alone. Vector work after
the block that depends on vector work before it needs its own barrier: before, the one in the
branch was counted for both AIVs, and AIV 1 read a tile its fill had not finished writing (a
race the simulator reports). Checked against a float64 NumPy reference on both targets and in
the simulator on both chips."""
import numpy as np

import tilelang_mini
import tilelang_mini.language as T

R, C = 8, 16


@T.prim_func
def fill_then_branch(X: T.Tensor((2 * R, C), T.float32), Y: T.Tensor((2 * R, C), T.float32),
                     Z: T.Tensor((R, C), T.float32)):
    with T.Kernel(1, is_npu=True) as (cid, vid):
        x = T.alloc_ub((R, C), T.float32)
        a = T.alloc_ub((R, C), T.float32)
        b = T.alloc_ub((R, C), T.float32)
        T.copy(X[cid * 2 * R + vid * R, 0], x)
        T.tile.fill(a, 0.5)
        T.tile.fill(b, 1.0)
        if vid == 0:
            T.tile.adds(b, b, 2.0)  # after the fill of b: a barrier in the branch
        for i, j in T.Parallel(R, C):  # after the fill of a, on both AIVs
            a[i, j] = a[i, j] + x[i, j]
        T.copy(a, Y[cid * 2 * R + vid * R, 0])
        if vid == 0:
            T.copy(b, Z[0, 0])


def test_a_barrier_in_a_vid_branch_orders_aiv0_only(target):
    x = np.random.default_rng(1).standard_normal((2 * R, C)).astype(np.float32)
    want_y, want_z = x.astype(np.float64) + 0.5, np.full((R, C), 3.0)
    kernel = tilelang_mini.compile(fill_then_branch, out_idx=[1, 2], target=target)
    y, z = kernel(x)
    np.testing.assert_allclose(y, want_y, rtol=1e-6)
    np.testing.assert_allclose(z, want_z)
    if target == "numpy":
        for chip in ("ascend910b", "ascend950"):
            (y, z), _ = tilelang_mini.compile(fill_then_branch, out_idx=[1, 2],
                                              chip=chip).simulate(x)
            np.testing.assert_allclose(y, want_y, rtol=1e-6)
            np.testing.assert_allclose(z, want_z)
