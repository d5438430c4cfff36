"""TileLang's host-side timing and checking helpers: `do_bench(fn)` and `kernel.get_profiler()`.

Times are wall-clock medians in milliseconds of the kernel on this machine's target (numpy or
llvm); they measure this CPU, not an NPU (for that, `kernel.estimate()`).

The profiler makes random inputs for the kernel's input parameters (normal floats, small
integers). A reference program or a function to time that is written with torch (its module
imports a real torch) receives them as torch CPU tensors, as TileLang's profiler hands out torch
tensors; any other callable receives the NumPy arrays. The kernel itself runs on the arrays."""
from __future__ import annotations

import functools
import time

import numpy as np


def do_bench(fn, warmup: float = 25, rep: float = 100, _n_warmup=None, _n_repeat=None,
             quantiles=None, **_ignored):
    """Median milliseconds of `fn()`. As in TileLang, `warmup` and `rep` are time budgets in
    milliseconds: a first call estimates the time of one, which gives `warmup / estimate` warm-up
    calls (at most 3 here: the interpreter is slow) and `rep / estimate` timed ones (at least 1,
    at most 10); a call slower than the budgets runs twice in all, not 13 times (examples at
    their own sizes). `_n_warmup`/`_n_repeat` (TileLang's overrides) are counts, honoured as
    given. `quantiles=[q, ...]` returns those quantiles of the times instead, as TileLang does;
    its GPU-only options (`backend="cupti"`, `return_mode`...) are ignored."""
    t = time.perf_counter()
    fn()
    estimate = max((time.perf_counter() - t) * 1e3, 1e-6)
    n_warmup = _n_warmup if _n_warmup else min(int(warmup / estimate), 3)   # 0: auto, as there
    n_repeat = _n_repeat if _n_repeat else max(1, min(int(rep / estimate), 10))
    for _ in range(max(0, n_warmup - 1)):        # the estimating call was the first warm-up
        fn()
    times = []
    for _ in range(max(1, n_repeat)):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    times = np.sort(np.array(times) * 1e3)
    if quantiles is not None:
        out = [float(np.quantile(times, q)) for q in quantiles]
        return out[0] if len(out) == 1 else out
    return float(times[len(times) // 2])


def _random_inputs(kernel, seed):
    import importlib
    from .autotune import _random_inputs as inputs
    importlib.import_module(".autotuner", __package__)  # keeps `tilelang_mini.autotune` the decorator
    return inputs(kernel, seed)


def wants_torch(fn) -> bool:
    """Whether `fn` (a function, a functools.partial of one, a bound method, a callable
    object) is written with torch: a real torch is installed and its module uses it."""
    from .runtime.torch_interop import written_with_torch
    while isinstance(fn, functools.partial):
        fn = fn.func
    fn = getattr(fn, "__func__", fn)
    if not hasattr(fn, "__globals__"):
        fn = getattr(type(fn).__call__, "__func__", type(fn).__call__)
    return written_with_torch(getattr(fn, "__globals__", None))


def for_caller(fn, arrays: list) -> list:
    """`arrays` as the arguments `fn` expects: torch tensors sharing their memory when `fn` is
    written with torch, else the arrays themselves."""
    if not wants_torch(fn):
        return list(arrays)
    from .runtime.torch_interop import to_torch
    return [to_torch(a) if isinstance(a, np.ndarray) else a for a in arrays]


def _listed(outs) -> list:
    if outs is None:
        return []
    return list(outs) if isinstance(outs, (tuple, list)) else [outs]


def assert_close(got, want, rtol: float, atol: float, max_mismatched_ratio: float = 0.0,
                 what: str = "output") -> None:
    """float64 comparison of an array or tensor with its reference: raises an AssertionError
    when more than `max_mismatched_ratio` of the elements differ (TileLang's rule)."""
    from .runtime.torch_interop import as_float64
    g, w = as_float64(got), as_float64(want)
    if g.shape != w.shape and g.size == w.size:
        w = w.reshape(g.shape)
    if g.shape != w.shape:
        raise AssertionError(f"{what}: shape {g.shape} differs from the reference's {w.shape}")
    close = np.isclose(g, w, rtol=rtol, atol=atol, equal_nan=True)
    bad = int(close.size - np.count_nonzero(close))
    if bad > max_mismatched_ratio * close.size:
        err = np.abs(g - w)[~close]
        raise AssertionError(f"{what}: {bad} of {close.size} elements differ (rtol {rtol}, atol "
                             f"{atol}, allowed ratio {max_mismatched_ratio}); max abs error "
                             f"{np.nanmax(err) if err.size else float('nan'):.4g}")


class Profiler:
    """`kernel.get_profiler()`: checks and times the kernel on random inputs of its input
    parameters' shapes (the same inputs every call: seed 0)."""

    def __init__(self, kernel):
        self.kernel = kernel
        self._drawn = None

    @property
    def func(self):
        return self.kernel

    def __call__(self, *args, **kwargs):
        return self.kernel(*args, **kwargs)

    def _inputs(self, input_tensors=None) -> list:
        """The given tensors, or the random inputs (seed 0): drawn once per profiler, each call
        gets fresh copies (a kernel may write its inputs; a copy is ~50x cheaper than drawing
        again, which dominated the examples' checks at their own sizes)."""
        if input_tensors is not None:
            return list(input_tensors)
        if self._drawn is None:
            self._drawn = _random_inputs(self.kernel, 0)
        return [a.copy() for a in self._drawn]

    def run_once(self, func=None):
        """One call of `func` (default: the kernel) on the profiler's inputs."""
        ins = self._inputs()
        return func(*for_caller(func, ins)) if func is not None else self.kernel(*ins)

    def do_bench(self, func=None, warmup: float = 25, rep: float = 100, n_warmup=None,
                 n_repeat=None, input_tensors=None, **kwargs) -> float:
        ins = self._inputs(input_tensors)
        if func is None:
            return do_bench(lambda: self.kernel(*ins), warmup, rep, n_warmup, n_repeat, **kwargs)
        args = for_caller(func, ins)
        return do_bench(lambda: func(*args), warmup, rep, n_warmup, n_repeat, **kwargs)

    def assert_allclose(self, reference_program, input_tensors=None, atol: float = 1e-2,
                        rtol: float = 1e-2, max_mismatched_ratio: float = 0.01):
        """The kernel's outputs against `reference_program(*inputs)`, TileLang's argument
        order and its rule: at most `max_mismatched_ratio` of the elements outside
        `atol + rtol * |ref|`."""
        ins = self._inputs(input_tensors)
        want = _listed(reference_program(*for_caller(reference_program, ins)))
        got = _listed(self.kernel(*ins))
        if len(got) != len(want):
            raise AssertionError(f"the kernel returned {len(got)} output(s), the reference "
                                 f"{len(want)}")
        for i, (g, w) in enumerate(zip(got, want)):
            assert_close(g, w, rtol, atol, max_mismatched_ratio, f"output {i}")

    def assert_consistent(self, repeat: int = 10):
        """The kernel gives the same outputs on every one of `repeat` calls."""
        ins = self._inputs()
        first = _listed(self.kernel(*ins))
        for _ in range(max(1, repeat) - 1):
            for i, (a, b) in enumerate(zip(first, _listed(self.kernel(*ins)))):
                assert_close(b, a, 0.0, 0.0, 0.0, f"output {i} (repeated call)")
