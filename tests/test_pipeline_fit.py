"""pipeline_fitting: a Pipelined loop's buffer versions are capped per scope where all of them
would not fit the chip (GPU tile sizes, TileLang's pool_mqa_fp8 at its defaults), down to one
version; a kernel that fits keeps every version, and one that cannot fit even with one version
is still a located BufferOverflowError. Both targets and the simulator, float64 reference."""
import numpy as np
import pytest

import tilelang_mini
import tilelang_mini.language as T
from tilelang_mini.ir.nodes import Alloc, walk_statements

C = 128


def summed(R):
    """Y = 2 * (the sum of X's four R-row blocks), one block per 3-stage pipelined step; t and
    acc are R x 128 float32 UB tiles (half the rows per vector core)."""
    @T.prim_func
    def main(X: T.Tensor((4 * R, C), T.float32), Y: T.Tensor((R, C), T.float32)):
        with T.Kernel(1, threads=128):
            t = T.alloc_fragment((R, C), T.float32)
            acc = T.alloc_fragment((R, C), T.float32)
            T.clear(acc)
            for k in T.Pipelined(4, num_stages=3):
                T.copy(X[k * R, 0], t)
                for i, j in T.Parallel(R, C):
                    acc[i, j] += t[i, j] * 2.0
            T.copy(acc, Y)
    return main


@pytest.mark.parametrize("R, versions", [(64, {"t", "t_1", "t_2"}), (384, {"t"})])
def test_versions_capped_to_fit(target, R, versions):
    kern = tilelang_mini.compile(summed(R), out_idx=-1, target=target, chip="ascend910b")
    ir = kern.compilation.stages["pipeline"]
    names = {s.buffer.name for s in walk_statements(ir.body) if isinstance(s, Alloc)}
    assert {n for n in names if n.startswith("t")} == versions
    x = np.random.default_rng(R).standard_normal((4 * R, C)).astype(np.float32)
    want = 2 * x.astype(np.float64).reshape(4, R, C).sum(0)
    np.testing.assert_allclose(np.asarray(kern(x)), want, rtol=1e-5, atol=1e-5)
    if target == "numpy":
        np.testing.assert_allclose(np.asarray(kern.simulate(x)[0]), want, rtol=1e-5, atol=1e-5)


def test_overflow_without_versions_is_still_located():
    with pytest.raises(tilelang_mini.BufferOverflowError) as e:
        tilelang_mini.compile(summed(1024), out_idx=-1, chip="ascend910b")
    text = str(e.value)
    assert "UB overflow" in text and "test_pipeline_fit.py:" in text
    assert "t_1" in text  # the uncapped versions are what the message lists
