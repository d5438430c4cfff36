"""TileLang's `T.Pipelined(start=a, stop=b, num_stages=n)` (the bounds by keyword, NSA's
backward: `for i in T.Pipelined(start=i_s * BS, stop=seq_len)`), and Python's `print(...)` in a
kernel function (trace-time output there: accepted and recorded as a hint). Both targets and
the simulator against a float64 NumPy reference; the misuses are located errors."""
import numpy as np
import pytest

import tilelang_mini
import tilelang_mini.language as T

from util import close, f64, rand

R, C = 64, 16


def row_sums(runtime_start: bool):
    """Y[b] = the sum of X's rows from the block's start (b * 16, or Lo[0]) to R."""
    @T.prim_func
    def main(X: T.Tensor((R, C), T.float32), Lo: T.Tensor((1,), T.int32),
             Y: T.Tensor((R // 16, C), T.float32)):
        print("blocks", R // 16)
        with T.Kernel(R // 16, threads=128) as b:
            print("block", b)
            acc = T.alloc_fragment((1, C), T.float32)
            row = T.alloc_fragment((1, C), T.float32)
            T.clear(acc)
            for i in T.Pipelined(start=Lo[0] if runtime_start else b * 16, stop=R,
                                 num_stages=2):
                T.copy(X[i, 0], row)
                for r, j in T.Parallel(1, C):
                    acc[r, j] += row[r, j]
            T.copy(acc, Y[b, 0])
    return main


@pytest.mark.parametrize("runtime_start", [False, True])
def test_pipelined_start_stop_keywords(target, runtime_start):
    x, lo = rand((R, C), seed=3), np.array([40], np.int32)
    starts = [40] * (R // 16) if runtime_start else range(0, R, 16)
    want = np.stack([f64(x)[s:].sum(0) for s in starts])
    prog = row_sums(runtime_start)
    assert [h.split(" @ ")[0] for h in prog.ir.hints if "print" in h] == \
        ["print('block', b)"]  # recorded, not run (the one before the kernel: accepted)
    kern = tilelang_mini.compile(prog, out_idx=[-1], target=target)
    close(np.asarray(kern(x, lo)), want, reduce_len=R)
    if target == "numpy":
        close(np.asarray(kern.simulate(x, lo)[0]), want, reduce_len=R)


def test_pipelined_start_twice_is_located():
    def bad():
        @T.prim_func
        def main(X: T.Tensor((R, C), T.float32), Y: T.Tensor((1, C), T.float32)):
            with T.Kernel(1, threads=128):
                acc = T.alloc_fragment((1, C), T.float32)
                T.clear(acc)
                for i in T.Pipelined(0, start=4, num_stages=1):
                    T.copy(X[i, 0], acc)
                T.copy(acc, Y[0, 0])
        return main
    with pytest.raises(tilelang_mini.CompileError) as e:
        bad()
    assert "start twice" in str(e.value) and "test_pipelined_keywords.py:" in str(e.value)
    assert "tilelang_mini/" not in str(e.value)
