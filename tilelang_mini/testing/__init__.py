"""Testing tools that ship with tilelang_mini: the differential fuzzer (`testing.fuzz`), and the
names of TileLang's `tilelang.testing` its examples and their tests use.

`set_random_seed(seed)` seeds Python's, NumPy's and (when imported) torch's generators;
`main()` runs pytest on the calling file; `torch_assert_close` is `utils.tensor`'s. The
`requires_*` markers skip a test whose hardware this machine is not: there is no CUDA, ROCm or
Metal device here (the kernels run on the Ascend model), so `requires_cuda` and the compute
version checks skip (under pytest; outside it the function runs unchanged), and
`requires_package(name)` skips when the package is not importable."""
from __future__ import annotations

import importlib.util
import random
import sys

from ..utils.tensor import torch_assert_close

__all__ = ["main", "process_func", "regression", "requires_cuda", "requires_package",
           "set_random_seed", "torch_assert_close"]


def set_random_seed(seed: int = 42) -> None:
    import numpy as np
    random.seed(seed)
    np.random.seed(seed)
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "manual_seed"):
        torch.manual_seed(seed)


def main():
    """Run pytest on the file that calls this (`if __name__ == "__main__": testing.main()`)."""
    import pytest
    caller = sys._getframe(1).f_globals.get("__file__")
    sys.exit(pytest.main([caller] + sys.argv[1:]))


def _skip(reason: str):
    def mark(func):
        try:
            import pytest
        except ImportError:
            return func
        return pytest.mark.skip(reason=reason)(func)
    return mark


requires_cuda = _skip("needs a CUDA device; this machine is the Ascend model")
requires_rocm = requires_cdna = requires_gfx950 = requires_cuda_or_cdna = \
    _skip("needs a ROCm device; this machine is the Ascend model")
requires_metal = _skip("needs a Metal device; this machine is the Ascend model")


def requires_llvm(func):
    return func  # llvmlite is a dependency: the llvm target is always there


def requires_cuda_compute_version(major_version, minor_version=0, mode="ge"):
    return _skip(f"needs CUDA compute capability {mode} {major_version}.{minor_version}")


def requires_cuda_compute_version_ge(major_version, minor_version=0):
    return requires_cuda_compute_version(major_version, minor_version, "ge")


def requires_cuda_compute_version_gt(major_version, minor_version=0):
    return requires_cuda_compute_version(major_version, minor_version, "gt")


def requires_cuda_compute_version_eq(major_version, minor_version=0):
    return requires_cuda_compute_version(major_version, minor_version, "eq")


def requires_cuda_compute_version_lt(major_version, minor_version=0):
    return requires_cuda_compute_version(major_version, minor_version, "lt")


def requires_cuda_compute_version_le(major_version, minor_version=0):
    return requires_cuda_compute_version(major_version, minor_version, "le")


def requires_package(*names):
    missing = [n for n in names if importlib.util.find_spec(n) is None]
    return _skip(f"needs {', '.join(missing)}") if missing else (lambda func: func)


def process_func(func, *args, **kwargs):
    """TileLang's perf-regression step: run `func` and print what it returns (a latency)."""
    result = func(*args, **kwargs)
    print(f"{getattr(func, '__name__', 'func')}: {result}")
    return result


def regression(*_args, **_kwargs):
    """TileLang's perf-regression driver: nothing to compare against here (no GPU baseline)."""
    return None
