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
    ks = list(range(n_in))  # a Python list: unrolled at trace time, a tile per input

    @T.macro
    def scaled_into(acc, X, k, s, bx):
        t = T.alloc_shared((rows, cols), "float32")
        T.copy(X[k, s, bx * rows, 0], t)
        for i, j in T.Parallel(rows, cols):
            acc[i, j] += t[i, j] * T.exp(t[i, j] * 0.25) * (k + 1)

    @T.prim_func
    def main(X: T.Tensor((n_in, n_steps, 2 * rows, cols), T.float32),
             O: T.Tensor((2 * rows, cols), T.float32)):
        with T.Kernel(2) as bx:
            acc = T.alloc_fragment((rows, cols), "float32")
            T.clear(acc)
            for s in T.serial(n_steps):
                for k in ks:
                    scaled_into(acc, X, k, s, bx)
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
        sets = re.findall(r"set_flag\(MTE2, V, (\d+)\)", kern.get_ir("insert_sync"))
        assert len(sets) >= 10 and max(int(i) for i in sets) < 8, sets  # ids used again
        simulated, _ = kern.simulate(x)
        np.testing.assert_allclose(simulated, want, rtol=1e-4, atol=1e-4)
