"""More flags of one pipe pair than the chip has event ids (0-7 per pair): a loop whose body
loads ten tiles, each read by vector work of its own before the next load, needs an
MTE2 -> V flag per tile that no other can share (the load pipe runs ahead of the vector unit).
insert_sync chains the excess flags (a load waits for the vector work of an earlier flag of the
same id before setting it again), so the kernel compiles, matches float64 on every target and
simulates clean on both chips."""
import re

import numpy as np

import tilelang_mini
import tilelang_mini.language as T

CHIPS = ["ascend910b", "ascend950"]


def weighted_sum(n_steps, rows, cols, n_in=10):
    """O[b] = sum over steps s and inputs k of (k + 1) * X[k, s] * exp(X[k, s] / 4), each input
    loaded into a tile of its own and scaled into the accumulator before the next load."""
    @T.prim_func
    def main(X: T.Tensor((n_in, n_steps, 2 * rows, cols), "float32"),
             O: T.Tensor((2 * rows, cols), "float32")):
        with T.Kernel(2) as bx:
            t0 = T.alloc_shared((rows, cols), "float32")
            t1 = T.alloc_shared((rows, cols), "float32")
            t2 = T.alloc_shared((rows, cols), "float32")
            t3 = T.alloc_shared((rows, cols), "float32")
            t4 = T.alloc_shared((rows, cols), "float32")
            t5 = T.alloc_shared((rows, cols), "float32")
            t6 = T.alloc_shared((rows, cols), "float32")
            t7 = T.alloc_shared((rows, cols), "float32")
            t8 = T.alloc_shared((rows, cols), "float32")
            t9 = T.alloc_shared((rows, cols), "float32")
            acc = T.alloc_fragment((rows, cols), "float32")
            T.clear(acc)
            for s in T.serial(n_steps):
                T.copy(X[0, s, bx * rows, 0], t0)
                for i, j in T.Parallel(rows, cols):
                    acc[i, j] += t0[i, j] * T.exp(t0[i, j] * 0.25) * 1.0
                T.copy(X[1, s, bx * rows, 0], t1)
                for i, j in T.Parallel(rows, cols):
                    acc[i, j] += t1[i, j] * T.exp(t1[i, j] * 0.25) * 2.0
                T.copy(X[2, s, bx * rows, 0], t2)
                for i, j in T.Parallel(rows, cols):
                    acc[i, j] += t2[i, j] * T.exp(t2[i, j] * 0.25) * 3.0
                T.copy(X[3, s, bx * rows, 0], t3)
                for i, j in T.Parallel(rows, cols):
                    acc[i, j] += t3[i, j] * T.exp(t3[i, j] * 0.25) * 4.0
                T.copy(X[4, s, bx * rows, 0], t4)
                for i, j in T.Parallel(rows, cols):
                    acc[i, j] += t4[i, j] * T.exp(t4[i, j] * 0.25) * 5.0
                T.copy(X[5, s, bx * rows, 0], t5)
                for i, j in T.Parallel(rows, cols):
                    acc[i, j] += t5[i, j] * T.exp(t5[i, j] * 0.25) * 6.0
                T.copy(X[6, s, bx * rows, 0], t6)
                for i, j in T.Parallel(rows, cols):
                    acc[i, j] += t6[i, j] * T.exp(t6[i, j] * 0.25) * 7.0
                T.copy(X[7, s, bx * rows, 0], t7)
                for i, j in T.Parallel(rows, cols):
                    acc[i, j] += t7[i, j] * T.exp(t7[i, j] * 0.25) * 8.0
                T.copy(X[8, s, bx * rows, 0], t8)
                for i, j in T.Parallel(rows, cols):
                    acc[i, j] += t8[i, j] * T.exp(t8[i, j] * 0.25) * 9.0
                T.copy(X[9, s, bx * rows, 0], t9)
                for i, j in T.Parallel(rows, cols):
                    acc[i, j] += t9[i, j] * T.exp(t9[i, j] * 0.25) * 10.0
            T.copy(acc, O[bx * rows, 0])
    return main


def test_more_load_to_vector_flags_than_event_ids(target):
    n_in, n_steps, rows, cols = 10, 3, 8, 16
    x = np.random.default_rng(5).standard_normal((n_in, n_steps, 2 * rows, cols)).astype(np.float32)
    x64 = x.astype(np.float64)
    w = np.arange(1, n_in + 1, dtype=np.float64)[:, None, None, None]
    want = (x64 * np.exp(x64 / 4) * w).sum((0, 1))
    prim = weighted_sum(n_steps, rows, cols)
    out = tilelang_mini.compile(prim, out_idx=[-1], target=target)(x)
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)
    for chip in CHIPS:
        kern = tilelang_mini.compile(prim, out_idx=[-1], target=target, chip=chip)
        ids = set(re.findall(r"set_flag\(MTE2, V, (\d+)\)", kern.get_ir("insert_sync")))
        assert ids and max(int(i) for i in ids) < 8, ids
        simulated, _ = kern.simulate(x)
        np.testing.assert_allclose(simulated, want, rtol=1e-4, atol=1e-4)
