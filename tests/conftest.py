"""Test session set-up: the IR verifier runs between passes, and `target` runs a test on every
backend that is installed (a registered target whose backend does not load yet is skipped)."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# Read by tilelang_mini.runtime.config when a compile asks; set before any test compiles.
os.environ["TILELANG_MINI_VERIFY"] = "1"

TESTS = Path(__file__).resolve().parent
if str(TESTS) not in sys.path:  # `import kernels` from the test files
    sys.path.insert(0, str(TESTS))

from tilelang_mini.runtime.backends import available_targets, get_backend  # noqa: E402


def _loadable(name: str) -> str | None:
    """None when the backend loads, else why not (the test is then skipped)."""
    try:
        get_backend(name)
    except Exception as e:  # noqa: BLE001 - a backend still being written fails in any way
        return f"{type(e).__name__}: {e}"
    return None


@pytest.fixture(params=available_targets())
def target(request) -> str:
    """Every target returned by available_targets(): numpy now, llvm once it lands."""
    why = _loadable(request.param)
    if why is not None:
        pytest.skip(f"target {request.param!r} is not available: {why}")
    return request.param
