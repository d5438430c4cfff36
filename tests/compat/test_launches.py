"""Several `with T.Kernel` blocks in one prim_func (TileLang's split + combine kernels): launched
in order over the same tensors, each on its own grid, on every target and simulated, against
float64 NumPy references."""
import numpy as np

import tilelang_mini as tilelang
import tilelang_mini.language as T
from tilelang_mini.ir.parser import parse_ir
from tilelang_mini.ir.printer import print_ir

from util import close, f64, rand

ROWS, COLS, SPLIT = 128, 32, 4


def split_combine():
    part = ROWS // SPLIT

    @T.prim_func
    def main(X: T.Tensor((ROWS, COLS), "float32"), Partial: T.Tensor((SPLIT, COLS), "float32"),
             Y: T.Tensor((COLS,), "float32")):
        # split: each block sums its slab of rows
        with T.Kernel(SPLIT, threads=128) as bx:
            x = T.alloc_fragment((part, COLS), "float32")
            s = T.alloc_fragment((COLS,), "float32")
            T.copy(X[bx * part, 0], x)
            T.reduce_sum(x, s, dim=0)
            T.copy(s, Partial[bx, 0:COLS])
        scale = 1.0 / ROWS  # trace-time Python between the launches
        # combine: one block per column chunk reads every split's partial sum
        with T.Kernel(COLS // 16) as (by):
            p = T.alloc_fragment((SPLIT, 16), "float32")
            m = T.alloc_fragment((16,), "float32")
            T.copy(Partial[0, by * 16], p)
            T.reduce_sum(p, m, dim=0)
            for j in T.Parallel(16):
                m[j] = m[j] * scale
            T.copy(m, Y[by * 16:(by + 1) * 16])
    return main


def test_two_launches(target):
    fn = split_combine()
    assert len(fn.launches) == 2 and fn.launches[1].grid == (COLS // 16,)
    for k in fn.launches:
        assert parse_ir(print_ir(k)) == k
    kernel = tilelang.compile(fn, out_idx=[1, 2], target=target)
    x = rand((ROWS, COLS), seed=3)
    want_p = f64(x).reshape(SPLIT, -1, COLS).sum(1)
    partial, y = kernel(x)
    close(partial, want_p, reduce_len=ROWS // SPLIT)
    close(y, f64(x).mean(0), reduce_len=ROWS)
    if target == "numpy":
        (partial, y), reports = kernel.simulate(x)
        assert len(reports) == 2
        close(y, f64(x).mean(0), reduce_len=ROWS)
        est = kernel.estimate()
        assert len(est) == 2 and est.time_us == est[0].time_us + est[1].time_us > 0


def test_clear_and_fill_of_alloc_var(target):
    """T.clear / T.fill on an alloc_var scalar (TileLang's combine kernels write it so)."""
    @T.prim_func
    def main(X: T.Tensor((4, 8), "float32"), Y: T.Tensor((4,), "float32")):
        with T.Kernel(4) as b:
            acc = T.alloc_var("float32")
            best = T.alloc_var("float32")
            T.clear(acc)
            T.fill(best, -T.infinity("float32"))
            for k in T.serial(8):
                acc += X[b, k]
                best = T.max(best, X[b, k])
            Y[b] = acc + best

    x = rand((4, 8), seed=9)
    want = f64(x).sum(1) + f64(x).max(1)
    close(tilelang.compile(main, out_idx=[-1], target=target)(x), want)


def test_fill_with_a_tile_element(target):
    """T.fill(t, s[0]) reads a tile element: a map, placed and split like any map (it was an
    internal error in infer_scopes)."""
    @T.prim_func
    def main(X: T.Tensor((16, 8), "float32"), Y: T.Tensor((16, 8), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((16, 8), "float32")
            s = T.alloc_fragment((16,), "float32")
            t = T.alloc_fragment((16, 8), "float32")
            T.copy(X, x)
            T.reduce_sum(x, s, dim=1)
            T.fill(t, s[0] + s[15])
            T.copy(t, Y)

    x = rand((16, 8), seed=10)
    want = np.full((16, 8), f64(x)[0].sum() + f64(x)[15].sum())
    kernel = tilelang.compile(main, out_idx=[-1], target=target)
    close(kernel(x), want, reduce_len=8)
    if target == "numpy":
        close(kernel.simulate(x)[0], want, reduce_len=8)
