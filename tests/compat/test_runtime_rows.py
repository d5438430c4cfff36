"""T.copy of a slice whose length is a run-time value (tilelang-ascend's varlen chunks,
`T.copy(w[bos : bos + actual_len, h, :], w_l1[0, :, :])`): the first n rows move, the other
side's rows past n keep their values; on either side or both (`t[:n, :]` -> `Z[off : off + n]`).
Both targets and the simulator against NumPy; a second run-time length is a located error."""
import numpy as np
import pytest

import tilelang_mini as tilelang
import tilelang_mini.language as T

from util import close, f64, rand

B, R, W = 4, 8, 32
LENS = np.array([3, 8, 0, 5], np.int32)
OFFS = np.concatenate([[0], np.cumsum(LENS)[:-1]]).astype(np.int32)
TOTAL = int(LENS.sum())


def varlen_rows(two_lengths=False):
    @T.prim_func
    def main(X: T.Tensor((TOTAL, W), "float32"), Lens: T.Tensor((B,), "int32"),
             Offs: T.Tensor((B,), "int32"), Y: T.Tensor((B, R, W), "float32"),
             Z: T.Tensor((TOTAL, W), "float32")):
        with T.Kernel(B, is_npu=True) as (cid, vid):
            t = T.alloc_ub((R, W), "float32")
            with T.Scope("V"):
                n = Lens[cid]
                off = Offs[cid]
                T.tile.fill(t, -1.0)
                T.barrier_all()
                T.copy(X[off:off + n, :], t)
                T.barrier_all()
                if vid == 0:
                    T.copy(t, Y[cid, 0, 0])
                    if two_lengths:
                        T.copy(t[:n, :], Z[off:off + n - 1, :])
                    else:
                        T.copy(t[:n, :], Z[off:off + n, :])
    return main


def test_copy_of_a_run_time_row_count(target):
    x = rand((TOTAL, W), seed=11)
    want_y = -np.ones((B, R, W))
    for b in range(B):
        want_y[b, :LENS[b]] = f64(x[OFFS[b]:OFFS[b] + LENS[b]])
    k = tilelang.compile(varlen_rows(), out_idx=[3, 4], target=target)
    y, z = k(x, LENS, OFFS)
    close(y, want_y)
    close(z, f64(x))
    y, z = k.simulate(x, LENS, OFFS)[0]
    close(y, want_y)
    close(z, f64(x))


def test_two_run_time_lengths_are_located():
    with pytest.raises(tilelang.CompileError, match="one run-time slice length") as e:
        tilelang.compile(varlen_rows(two_lengths=True), out_idx=[3, 4])
    assert "Z[off:off + n - 1, :]" in open(__file__).read().splitlines()[e.value.loc.line - 1]
