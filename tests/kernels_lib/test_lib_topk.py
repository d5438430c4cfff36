"""T.sort (the vector unit's sort as a tile op) and topk built on it: ties, -inf, k larger than
a chunk, odd row counts, both targets, IR text round trip, simulate; reference: a stable NumPy
sort of the row (largest first, ties by the smaller index)."""
import numpy as np
import pytest
from refs import BF16, rng

import tilelang_mini as tl
import tilelang_mini.language as T
from tilelang_mini.ir.parser import parse_ir
from tilelang_mini.ir.printer import print_ir
from tilelang_mini.kernels import topk


def topk_ref(x, k):
    x64 = x.astype(np.float64)
    cols = np.broadcast_to(np.arange(x.shape[1]), x.shape)
    order = np.lexsort((cols, -x64), axis=-1)[:, :k]
    return np.take_along_axis(x, order, 1), order.astype(np.int32)


@pytest.mark.parametrize("shape,k", [((3, 700), 5), ((5, 2500), 300), ((1, 4100), 2048)])
def test_topk(target, shape, k):
    x = rng(50).standard_normal(shape).astype(np.float32)
    x[0, 3:9] = x[0, 200]        # ties: the smaller index first
    x[-1, 10:30] = -np.inf       # masked logits
    values, indices = topk(x, k, target=target)
    want_v, want_i = topk_ref(x, k)
    assert np.array_equal(indices, want_i) and np.array_equal(values, want_v)


def test_topk_bf16_and_k_equals_n(target):
    x = rng(51).standard_normal((4, 40)).astype(BF16)  # many ties after rounding
    values, indices = topk(x, 40, target=target)
    want_v, want_i = topk_ref(x, 40)
    assert values.dtype == BF16 and np.array_equal(indices, want_i)
    assert np.array_equal(values.astype(np.float32), want_v.astype(np.float32))


def sort_rows(rows, cols, dtype="int32", index_dtype="int32"):
    """Y, I = each row of X sorted ascending and the column each value came from."""
    @T.prim_func
    def main(X: T.Tensor((rows, cols), dtype), Y: T.Tensor((rows, cols), dtype),
             I: T.Tensor((rows, cols), index_dtype)):
        with T.Kernel(1) as bx:
            v = T.alloc_fragment((rows, cols), dtype)
            ix = T.alloc_fragment((rows, cols), index_dtype)
            T.copy(X, v)
            for i, j in T.Parallel(rows, cols):
                ix[i, j] = j
            T.sort(v, ix, descending=False)
            T.copy(v, Y)
            T.copy(ix, I)
    return main


def test_sort_ascending_ints_round_trip_and_simulate(target):
    x = rng(52).integers(-20, 20, (6, 50)).astype(np.int32)
    k = tl.compile(sort_rows(6, 50), out_idx=[1, 2], target=target)
    y, idx = k(x)
    order = np.lexsort((np.broadcast_to(np.arange(50), x.shape), x), axis=-1)
    assert np.array_equal(idx, order) and np.array_equal(y, np.take_along_axis(x, order, 1))
    for stage in k.compilation.stages.values():
        assert parse_ir(print_ir(stage)) == stage
    assert "sort(v, ix, descending=False)" in k.get_ir("frontend")
    (y2, _), report = k.simulate(x)
    assert np.array_equal(y2, y) and report.pipe_busy["V"] > 0


def test_sort_rejects_float_indices():
    with pytest.raises(tl.CompileError) as err:
        tl.compile(sort_rows(4, 8, "float32", "float32"), out_idx=[1, 2])
    assert "sort indices must be int32" in str(err.value)
    assert "T.sort(v, ix, descending=False)" in str(err.value)  # the kernel line, located


def test_topk_estimate_of_the_indexer_top2048():
    x = np.empty((64, 131072), np.float32)
    for chip, tbps in (("ascend910b", 1.6), ("ascend950", 4.0)):
        est = topk.estimate(x, 2048, chip=chip)
        assert est.time_us > x.nbytes / (tbps * 1e12) * 1e6  # no faster than reading x once


@pytest.mark.parametrize("shape", [(3, 131072), (2, 65536 + 1531)])
def test_topk_full_size_indexer_top2048(target, shape):
    """The indexer's size: the best 2048 of 64K-128K logits a row (an odd width too), with ties
    across chunk boundaries, a -inf masked tail and a row whose top values cluster at the end."""
    r = rng(53)
    x = r.standard_normal(shape).astype(np.float32)
    x[0, ::1000] = 3.5                    # 100+ equal values spread over many chunks
    x[0, -20000:] = -np.inf               # a masked tail
    x[1] = np.sort(x[1])                  # ascending: the top 2048 are the last columns
    x[-1, 7] = np.inf
    values, indices = topk(x, 2048, target=target)
    want_v, want_i = topk_ref(x, 2048)
    assert np.array_equal(indices, want_i) and np.array_equal(values, want_v)
