"""Kernels called with torch CPU tensors return torch tensors. torch is an optional extra and is
not installed in CI, so this runs against the NumPy stand-in of benchmarks/torch_shim (an ndarray
subclass from a module named `torch`): it checks the plumbing (detection, conversion in and
out, values), not torch itself."""
import importlib
import sys
from pathlib import Path

import numpy as np
import pytest

import tilelang_mini
import tilelang_mini.language as T

from util import close, f64

SHIM = Path(__file__).resolve().parents[2] / "benchmarks" / "torch_shim"


@pytest.fixture
def torch_shim(monkeypatch):
    try:
        import torch  # noqa: F401
        real = "Tensor" in dir(torch) and not hasattr(torch, "_rng")
    except ImportError:
        real = False
    if not real:
        monkeypatch.syspath_prepend(str(SHIM))
        for name in [m for m in sys.modules if m == "torch" or m.startswith("torch.")]:
            monkeypatch.delitem(sys.modules, name)
    return importlib.import_module("torch")


@tilelang_mini.jit
def scale(X, factor=2.0):
    M, N = T.const("M, N")
    X: T.Tensor((M, N), T.float32)
    Y = T.empty((M, N), T.float32)
    with T.Kernel(T.ceildiv(M, 8)) as bx:
        t = T.alloc_fragment((8, N), T.float32)
        T.copy(X[bx * 8, 0], t)
        for i, j in T.Parallel(8, N):
            t[i, j] = t[i, j] * factor
        T.copy(t, Y[bx * 8, 0])
    return Y


def test_torch_tensors_in_and_out(torch_shim, target, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    x = torch_shim.randn(16, 24)
    y = scale(x, 3.0)
    assert type(y).__module__.startswith("torch")
    close(np.asarray(y), 3.0 * f64(x))
    k = scale.compile(M=16, N=24, factor=0.5)
    y2 = k(x)
    assert type(y2).__module__.startswith("torch")
    close(np.asarray(y2), 0.5 * f64(x))
