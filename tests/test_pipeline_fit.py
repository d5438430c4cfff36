"""pipeline_fitting: a Pipelined loop's buffer versions are capped per scope where all of them
would not fit the chip (GPU tile sizes, TileLang's pool_mqa_fp8 at its defaults), down to one
version; a kernel that fits keeps every version, and one that cannot fit even with one version
is still a located BufferOverflowError. Where even one version does not fit (the unrolled stages
keep every temporary live across the unrolled body) but the loop run serially does (temporaries
that die within an iteration share bytes), the loop runs serially. Both targets and the
simulator, float64 reference."""
import numpy as np
import pytest

import tilelang_mini
import tilelang_mini.language as T
from tilelang_mini.arch import get_chip
from tilelang_mini.ir.nodes import Alloc, For, walk_statements
from tilelang_mini.ir.printer import print_ir
from tilelang_mini.transform.pipeline_stages import pipeline
from tilelang_mini.transform.plan_memory import plan_memory

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


def chained(R, n=3):
    """Y_k = (X_k + 1) * 2 per R-row block k, 2-stage pipelined, through three R x 128 float32
    UB tiles a -> b -> c (half the rows per vector core): run serially, a (dead after the first
    map) and c (born in the second) share bytes, so two tiles' worth fits UB; unrolled into two
    stages, all three live across the unrolled body, even with one version each."""
    @T.prim_func
    def main(X: T.Tensor((n * R, C), T.float32), Y: T.Tensor((n * R, C), T.float32)):
        with T.Kernel(1, threads=128):
            a = T.alloc_fragment((R, C), T.float32)
            b = T.alloc_fragment((R, C), T.float32)
            c = T.alloc_fragment((R, C), T.float32)
            for k in T.Pipelined(n, num_stages=2):
                T.copy(X[k * R, 0], a)
                for i, j in T.Parallel(R, C):
                    b[i, j] = a[i, j] + 1.0
                for i, j in T.Parallel(R, C):
                    c[i, j] = b[i, j] * 2.0
                T.copy(c, Y[k * R, 0])
    return main


def test_serial_fallback_when_one_version_does_not_fit(target):
    R, n = 320, 3  # 80 KiB per tile per AIV: 3 x 80 > 192 KiB UB, 2 x 80 fits
    chip = get_chip("ascend910b")
    kern = tilelang_mini.compile(chained(R, n), out_idx=-1, target=target, chip="ascend910b")
    stages = kern.compilation.stages
    before = stages["split_cores"]  # the pass's input
    with pytest.raises(tilelang_mini.BufferOverflowError):  # the cap alone cannot help
        plan_memory(pipeline(before, {"UB": 1}), chip)
    after = stages["pipeline"]
    text = print_ir(after)
    loops = [s for s in walk_statements(after.body) if isinstance(s, For)
             and s.kind != "parallel"]
    assert [(s.vars, s.kind) for s in loops] == [(("k",), "serial")]
    assert "for k in serial(3):" in text and "Pipelined" not in text
    names = {s.buffer.name for s in walk_statements(after.body) if isinstance(s, Alloc)}
    assert names == {"a", "b", "c"}  # no stage versions
    x = np.random.default_rng(11).standard_normal((n * R, C)).astype(np.float32)
    want = (x.astype(np.float64) + 1.0) * 2.0
    np.testing.assert_allclose(np.asarray(kern(x)), want, rtol=1e-6, atol=1e-6)
    if target == "numpy":
        np.testing.assert_allclose(np.asarray(kern.simulate(x)[0]), want, rtol=1e-6, atol=1e-6)


def test_serial_fallback_keeps_versions_when_they_fit():
    kern = tilelang_mini.compile(chained(64, 3), out_idx=-1, chip="ascend910b")
    names = {s.buffer.name for s in walk_statements(kern.compilation.stages["pipeline"].body)
             if isinstance(s, Alloc)}
    assert {"a_1", "b_1", "c_1"} <= names


def test_not_fitting_even_serially_is_located():
    # 100 KiB per tile per AIV: even serially a and b (or b and c) need 200 KiB > 192 KiB
    with pytest.raises(tilelang_mini.BufferOverflowError) as e:
        tilelang_mini.compile(chained(400), out_idx=-1, chip="ascend910b")
    text = str(e.value)
    assert "UB overflow on ascend910b" in text and "192 KiB" in text
    assert "test_pipeline_fit.py:" in text and "= T.alloc_fragment((R, C), T.float32)" in text
