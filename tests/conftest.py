"""Test session set-up: the IR verifier runs between passes, and `target` runs a test on every
registered backend (one that does not load fails its tests: it is a dependency, not an option)."""
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


def pytest_addoption(parser):
    parser.addoption("--update-goldens", action="store_true", default=False,
                     help="write the golden IR files under tests/golden/ instead of failing")


def pytest_configure(config):
    import goldens
    goldens.UPDATE = config.getoption("--update-goldens")


@pytest.fixture(params=available_targets())
def target(request) -> str:
    """Every target in the backend registry (numpy and llvm)."""
    get_backend(request.param)  # a backend that does not load fails here, loudly
    return request.param


@pytest.fixture
def tgt(target, monkeypatch):
    """`target`, made the one every jit of the test compiles for (TILELANG_MINI_TARGET: jit
    factories and eager functions alike)."""
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    return target
