"""`T.sync_grid()` (TileLang's grid-wide barrier in persistent kernels, deepseek_mla's
example_mla_decode_persistent): the kernel body splits there into two launches over the same
grid; the second phase reads what every block of the first wrote to global memory. On every
target and simulated, against float64 NumPy references; an on-chip value carried across the
barrier and a barrier inside a loop are located errors."""
import numpy as np
import pytest

import tilelang_mini as tilelang
import tilelang_mini.language as T
from tilelang_mini import CompileError

from util import close, f64, rand

BLOCKS, ROWS, COLS = 4, 64, 32


def persistent_normalise():
    """Phase 1: block b writes the column sums of its rows to Partial[b]. Phase 2: block b
    divides its rows by the total over every block's partial sums (written by the others)."""
    part = ROWS // BLOCKS

    @T.prim_func
    def main(X: T.Tensor((ROWS, COLS), "float32"), Partial: T.Tensor((BLOCKS, COLS), "float32"),
             Y: T.Tensor((ROWS, COLS), "float32")):
        with T.Kernel(BLOCKS, threads=128) as b:
            x = T.alloc_fragment((part, COLS), "float32")
            s = T.alloc_fragment((COLS,), "float32")
            p = T.alloc_fragment((BLOCKS, COLS), "float32")
            tot = T.alloc_fragment((COLS,), "float32")
            y = T.alloc_fragment((part, COLS), "float32")
            T.copy(X[b * part, 0], x)
            T.reduce_sum(x, s, dim=0)
            T.copy(s, Partial[b, 0:COLS])
            T.sync_grid()
            T.copy(Partial, p)
            T.reduce_sum(p, tot, dim=0)
            T.copy(X[b * part, 0], y)
            for i, j in T.Parallel(part, COLS):
                y[i, j] = y[i, j] / tot[j]
            T.copy(y, Y[b * part, 0])
    return main


def test_sync_grid_splits_launches(target):
    fn = persistent_normalise()
    assert len(fn.launches) == 2 and fn.launches[1].grid == (BLOCKS,)
    # each launch allocates only the buffers it uses
    names = [{s.buffer.name for s in k.body if type(s).__name__ == "Alloc"} for k in fn.launches]
    assert names == [{"x", "s"}, {"p", "tot", "y"}]
    kernel = tilelang.compile(fn, out_idx=[1, 2], target=target)
    x = np.abs(rand((ROWS, COLS), seed=5)) + 0.5
    want_p = f64(x).reshape(BLOCKS, -1, COLS).sum(1)
    want = f64(x) / f64(x).sum(0)
    partial, y = kernel(x)
    close(partial, want_p, reduce_len=ROWS // BLOCKS)
    close(y, want, reduce_len=ROWS)
    if target == "numpy":
        (partial, y), reports = kernel.simulate(x)
        assert len(reports) == 2
        close(y, want, reduce_len=ROWS)


def test_value_carried_across_sync_grid_is_located():
    with pytest.raises(CompileError) as info:
        @T.prim_func
        def main(X: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "float32")):
            with T.Kernel(1) as b:
                t = T.alloc_fragment((8,), "float32")
                T.copy(X, t)
                T.sync_grid()
                T.copy(t, Y)
    msg = str(info.value)
    assert "'t' (fragment) is written before T.sync_grid()" in msg and "read after it" in msg
    assert "T.copy(t, Y)" in msg  # located at the read


def test_sync_grid_in_a_loop_is_located():
    with pytest.raises(CompileError, match="top level of the T.Kernel body"):
        @T.prim_func
        def main(X: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "float32")):
            with T.Kernel(1) as b:
                t = T.alloc_fragment((8,), "float32")
                for k in T.serial(2):
                    T.copy(X, t)
                    T.sync_grid()
                T.copy(t, Y)
