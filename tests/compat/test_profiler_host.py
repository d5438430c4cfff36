"""TileLang's host helpers without torch: the profiler's check against a reference (its argument
order, its mismatch-ratio rule), do_bench's quantiles, torch_assert_close on arrays, dtypes built
from NumPy types. (tests/compat/test_torch_host.py runs the same with real torch, where
installed.)"""
import numpy as np
import pytest

import tilelang_mini
import tilelang_mini.language as T
from tilelang_mini.profiler import assert_close, do_bench
from tilelang_mini.utils.tensor import torch_assert_close


@tilelang_mini.jit(out_idx=[-1])
def scaled(M, N, blk=16, dtype=T.float32):
    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, blk)) as bx:
            x = T.alloc_fragment((blk, N), dtype)
            T.copy(X[bx * blk, 0], x)
            for i, j in T.Parallel(blk, N):
                x[i, j] = x[i, j] * 2.0 + 1.0
            T.copy(x, Y[bx * blk, 0])
    return main


def test_profiler_checks_against_a_numpy_reference(target, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    prof = scaled(32, 24).get_profiler()
    prof.assert_allclose(lambda x: x.astype(np.float64) * 2 + 1, rtol=1e-5, atol=1e-5)
    with pytest.raises(AssertionError, match="elements differ"):
        prof.assert_allclose(lambda x: x.astype(np.float64) * 2, rtol=1e-5, atol=1e-5)


def test_profiler_takes_tilelangs_argument_order(target, monkeypatch):
    """assert_allclose(reference, input_tensors, atol, rtol, max_mismatched_ratio)."""
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    prof = scaled(32, 24).get_profiler()
    x = np.arange(32 * 24, dtype=np.float32).reshape(32, 24) / 100
    seen = []

    def ref(a):
        seen.append(a)
        return a * 2.0 + 1.0
    prof.assert_allclose(ref, [x], 1e-6, 1e-6)
    assert seen[0] is x
    assert prof.run_once(lambda a: a.sum()) == pytest.approx(
        float(prof._inputs()[0].sum()))
    prof.assert_consistent(repeat=2)


def test_mismatch_ratio_is_tilelangs_rule():
    want = np.zeros(1000)
    got = want.copy()
    got[:5] = 1.0                                  # 0.5% of the elements off
    assert_close(got, want, 1e-3, 1e-3, max_mismatched_ratio=0.01)
    with pytest.raises(AssertionError, match="5 of 1000"):
        assert_close(got, want, 1e-3, 1e-3, max_mismatched_ratio=0.001)
    torch_assert_close(got, want, max_mismatched_ratio=0.01)
    with pytest.raises(AssertionError):
        torch_assert_close(got, want)              # TileLang's default ratio is 0.001
    with pytest.raises(AssertionError, match="shape"):
        assert_close(np.zeros(3), np.zeros(4), 0, 0)


def test_do_bench_quantiles():
    calls = []
    q = do_bench(lambda: calls.append(1), warmup=1, rep=5, quantiles=[0.5, 0.2, 0.8])
    assert len(q) == 3 and q[1] <= q[0] <= q[2]
    assert len(calls) == 1 + 2 + 10      # a fast call: the capped counts (3 warm-ups, 10 timed)
    assert isinstance(do_bench(lambda: None, rep=2), float)


def test_do_bench_budgets_are_milliseconds():
    """TileLang's warmup/rep are budgets in ms: a call slower than both runs twice in all (the
    estimate, one timed run), not 13 times; explicit counts are honoured."""
    import time
    calls = []

    def slow():
        calls.append(1)
        time.sleep(0.03)                 # 30 ms: over a 25 ms warm-up and a 20 ms rep budget
    do_bench(slow, warmup=25, rep=20)
    assert len(calls) == 2
    calls.clear()
    do_bench(lambda: calls.append(1), _n_warmup=4, _n_repeat=3)
    assert len(calls) == 4 + 3           # the estimating call is the first warm-up


def test_profiler_draws_its_inputs_once_and_hands_out_copies(target, monkeypatch):
    """The same random inputs (seed 0) on every call, drawn once; a kernel or reference that
    writes its inputs does not change the next call's."""
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    prof = scaled(32, 24).get_profiler()
    seen = []

    def ref(x):
        seen.append(x.copy())
        x[...] = 7.0                     # a reference that writes its input
        return x.astype(np.float64) * 0  # never compared: only the inputs matter here
    prof.run_once(ref)
    prof.run_once(ref)
    assert np.array_equal(seen[0], seen[1]) and not np.all(seen[0] == 7.0)
    assert seen[0].dtype == np.float32 and abs(float(seen[0].std()) - 1.0) < 0.3


def test_dtype_from_numpy_types():
    assert T.dtype(np.float16) == "float16" and T.dtype(np.dtype("int8")) == "int8"


@tilelang_mini.jit(out_idx=[-1])
def iota(n, blk=16):
    """Y[i] = start + i: a kernel whose only input is a scalar."""
    @T.prim_func
    def main(start: T.int32, Y: T.Tensor((n,), T.int32)):
        with T.Kernel(T.ceildiv(n, blk)) as bx:
            for i in T.Parallel(blk):
                Y[bx * blk + i] = start + bx * blk + i
    return main


def test_a_kernel_of_scalars_returns_numpy_to_numpy_code(target, monkeypatch):
    """A call with no array argument from code that does not use torch returns NumPy (even
    where torch is installed and imported: tests/compat/test_torch_host.py)."""
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    y = iota(32)(5)
    assert isinstance(y, np.ndarray)
    np.testing.assert_array_equal(y, np.arange(5, 37))


def test_tilelang_testing_names():
    """`import tilelang.testing` examples: the module is an attribute of the package, with
    set_random_seed, the requires_* markers (no CUDA here: they skip) and torch_assert_close."""
    testing = tilelang_mini.testing
    testing.set_random_seed(7)
    a = np.random.rand(3)
    testing.set_random_seed(7)
    np.testing.assert_array_equal(np.random.rand(3), a)
    def needs_cuda():
        pass
    marked = testing.requires_cuda(needs_cuda)
    assert any(m.name == "skip" for m in marked.pytestmark)
    assert testing.requires_package("numpy")(len) is len
    assert testing.requires_cuda_compute_version_eq(9, 0)(needs_cuda).pytestmark
    testing.torch_assert_close(np.ones(3), np.ones(3))
    assert testing.process_func(lambda: 1.5) == 1.5


def test_torch_dtype_spellings_without_torch():
    """A torch dtype is read by its name (torch is never imported for it): a stand-in object
    of module `torch` printing as `torch.bfloat16` is bfloat16."""
    from tilelang_mini.ir import dtypes

    class FakeTorchDtype:
        __module__ = "torch"

        def __init__(self, name):
            self.name = name

        def __str__(self):
            return "torch." + self.name
    assert dtypes.canonical(FakeTorchDtype("bfloat16")) == "bfloat16"
    assert dtypes.canonical(FakeTorchDtype("float8_e4m3fn")) == "float8_e4m3fn"
    assert dtypes.canonical(FakeTorchDtype("complex64")) is None
    assert T.dtype(FakeTorchDtype("int16")) == "int16"
