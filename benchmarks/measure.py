"""Measurement helpers of benchmarks/bench.py: environment control, interleaved timing,
result checks, NumPy's BLAS and thread settings, formatting."""
from __future__ import annotations

import os
import statistics
import sys
import time
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"




@contextmanager
def _env(**values):
    """Set (str) or unset (None) environment variables; restored on exit. tilelang_mini reads
    its variables when asked (runtime/config.py), so this takes effect for the next compile/run."""
    old = {k: os.environ.get(k) for k in values}
    try:
        for k, v in values.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = str(v)
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _examples():
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))


class _OtherLoad:
    """How many CPUs other processes kept busy, on average, while the block ran (Linux:
    /proc/stat busy time minus this process's and its children's CPU time); None elsewhere."""

    @staticmethod
    def _sample():
        import resource
        try:
            with open("/proc/stat") as f:
                fields = [int(v) for v in f.readline().split()[1:]]
        except (OSError, ValueError):
            return None
        busy = (sum(fields) - fields[3] - (fields[4] if len(fields) > 4 else 0))
        own = sum(getattr(resource.getrusage(who), a)
                  for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
                  for a in ("ru_utime", "ru_stime"))
        return busy / os.sysconf("SC_CLK_TCK"), own, time.perf_counter()

    def __enter__(self):
        self.start, self.cpus = self._sample(), None
        return self

    def __exit__(self, *exc):
        end = self._sample()
        # /proc/stat counts in clock ticks (10 ms): too coarse for a short block
        if self.start is not None and end is not None and end[2] - self.start[2] >= 0.25:
            other = (end[0] - self.start[0]) - (end[1] - self.start[1])
            self.cpus = max(0.0, other / (end[2] - self.start[2]))


LOAD: dict = {}  # the last _interleaved call's other load, read by the workers


def _interleaved(fns: dict, repeats: int, warmup: int) -> tuple[dict, dict]:
    """Medians (seconds) of `repeats` rounds, each round calling every function once in turn,
    after `warmup` untimed rounds: drift of the machine hits all contenders alike."""
    with _OtherLoad() as load:
        result = _interleaved_runs(fns, repeats, warmup)
    LOAD["cpus"] = load.cpus
    return result


def _interleaved_runs(fns: dict, repeats: int, warmup: int) -> tuple[dict, dict]:
    for _ in range(warmup):
        for f in fns.values():
            f()
    samples = {k: [] for k in fns}
    for _ in range(max(1, repeats)):
        for k, f in fns.items():
            t = time.perf_counter()
            f()
            samples[k].append(time.perf_counter() - t)
    return {k: statistics.median(v) for k, v in samples.items()}, samples


def _check(got, want, dtype: str, reduce_len: int = 1) -> tuple[float, bool]:
    """(max abs error against the float64 reference, within the examples' tolerance)."""
    import numpy as np
    from tilelang_mini.ir import dtypes
    rtol, atol = dtypes.tolerance(dtype)
    atol = atol * max(1.0, np.sqrt(reduce_len) / 4)
    got64 = np.asarray(got, dtype=np.float64)
    if got64.shape != want.shape:
        return float("inf"), False
    err = float(np.max(np.abs(got64 - want))) if got64.size else 0.0
    return err, bool(np.allclose(got64, want, rtol=rtol, atol=atol))


def _runner(kernel, args):
    """Run a compiled kernel on preallocated inputs + outputs (no output allocation timed)."""
    backend, artifact, full = kernel.backend, kernel.artifact, list(args)
    return lambda: backend.run(artifact, full)


def _openblas():
    """ctypes access to the OpenBLAS NumPy loaded (when threadpoolctl is not installed)."""
    import ctypes
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return None
    paths = sorted({line.split()[-1] for line in maps.splitlines()
                    if "openblas" in line.lower() and ".so" in line})
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for prefix in ("", "scipy_"):
            for suffix in ("", "64_", "_64"):
                get = getattr(lib, f"{prefix}openblas_get_corename{suffix}", None)
                if get is None:
                    continue
                sym = lambda n: getattr(lib, f"{prefix}openblas_{n}{suffix}")  # noqa: E731
                get.restype = ctypes.c_char_p
                sym("get_config").restype = ctypes.c_char_p
                return {"path": path, "corename": get().decode(),
                        "config": sym("get_config")().decode(),
                        "get_num_threads": sym("get_num_threads"),
                        "set_num_threads": sym("set_num_threads")}
    return None


def blas_info() -> str:
    """Which BLAS (and which OpenBLAS core kernel) NumPy runs on, in this process."""
    import numpy  # noqa: F401 - loads the BLAS library
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        lib = _openblas()
        if lib is None:
            return "unknown (install threadpoolctl to see it)"
        return (f"{lib['config'].split()[0]} {lib['config'].split()[1]}, core kernel "
                f"{lib['corename']}, {lib['get_num_threads']()} thread(s) (via ctypes; "
                f"threadpoolctl not installed)")
    infos = [i for i in threadpool_info() if i.get("user_api") == "blas"]
    if not infos:
        return "unknown (threadpoolctl found no BLAS)"
    return "; ".join(f"{i.get('internal_api')} {i.get('version')}, core kernel "
                     f"{i.get('architecture')}, {i.get('num_threads')} thread(s) (threadpoolctl)"
                     for i in infos)


@contextmanager
def _numpy_threads(n: int | None):
    """Limit NumPy's BLAS to n threads (None: leave it): threadpoolctl when installed, else
    OpenBLAS's own setter through ctypes. Subprocesses also get OPENBLAS_NUM_THREADS."""
    if n is None:
        yield
        return
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        threadpool_limits = None
    if threadpool_limits is not None:
        with threadpool_limits(limits=n, user_api="blas"):
            yield
        return
    lib = _openblas()
    if lib is None:
        yield
        return
    old = lib["get_num_threads"]()
    lib["set_num_threads"](n)
    try:
        yield
    finally:
        lib["set_num_threads"](old)


def _all_threads() -> int:
    from tilelang_mini.runtime import config
    with _env(TILELANG_MINI_NUM_THREADS=None):
        return config.num_threads()


def _ms(s: float) -> str:
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 0.01:
        return f"{s * 1e3:.1f} ms"
    return f"{s * 1e3:.2f} ms" if s >= 1e-3 else f"{s * 1e6:.0f} us"
