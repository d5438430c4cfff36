"""TileLang's host-side timing helpers: `do_bench(fn)` and `kernel.get_profiler().do_bench()`.

Times are wall-clock medians in milliseconds of the kernel on this machine's target (numpy or
llvm); they measure this CPU, not an NPU (for that, `kernel.estimate()`)."""
from __future__ import annotations

import time


def do_bench(fn, warmup: int = 3, rep: int = 10, _n_warmup=None, _n_repeat=None, **_ignored) -> float:
    """Median milliseconds of `fn()` over `rep` runs after `warmup` runs (TileLang's GPU-only
    options such as `backend="cupti"` or `quantiles` are ignored)."""
    warmup = _n_warmup if _n_warmup is not None else min(int(warmup), 3)
    rep = _n_repeat if _n_repeat is not None else max(1, min(int(rep), 10))
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(rep):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    times.sort()
    return times[len(times) // 2] * 1e3


def _random_inputs(kernel, seed):
    from .autotune import _random_inputs as inputs
    from . import autotuner  # noqa: F401 (keeps `tilelang_mini.autotune` the decorator)
    return inputs(kernel, seed)


class Profiler:
    """`kernel.get_profiler()`: times the kernel on random inputs of its parameter shapes."""

    def __init__(self, kernel):
        self.kernel = kernel

    def do_bench(self, func=None, warmup: int = 3, rep: int = 10, **_ignored) -> float:
        if func is not None:
            inputs = _random_inputs(self.kernel, 0)
            return do_bench(lambda: func(*inputs), warmup, rep)
        inputs = _random_inputs(self.kernel, 0)
        return do_bench(lambda: self.kernel(*inputs), warmup, rep)

    def assert_allclose(self, reference, rtol=1e-2, atol=1e-2, **_ignored):
        import numpy as np
        inputs = _random_inputs(self.kernel, 0)
        got = self.kernel(*inputs)
        want = reference(*inputs)
        got = got if isinstance(got, tuple) else (got,)
        want = want if isinstance(want, tuple) else (want,)
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64),
                                       rtol=rtol, atol=atol)
