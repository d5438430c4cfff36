"""A TILELANG_MINI_* variable with a value it cannot take is a ConfigError naming the variable."""
import numpy as np
import pytest

import tilelang_mini as tl
from tilelang_mini.errors import ConfigError
from tilelang_mini.runtime import config

from kernels import gemm


@pytest.mark.parametrize("value", ["abc", "1.5"])
def test_bad_thread_count_is_a_config_error(monkeypatch, value):
    monkeypatch.setenv("TILELANG_MINI_NUM_THREADS", value)
    with pytest.raises(ConfigError, match="TILELANG_MINI_NUM_THREADS must be a positive integer"):
        config.num_threads()


def test_a_kernel_call_reports_it(monkeypatch):
    a = np.ones((64, 32), np.float32)
    b = np.ones((32, 64), np.float32)
    kernel = tl.compile(gemm(64, 64, 32, 64, 64, 32), target="llvm")
    monkeypatch.setenv("TILELANG_MINI_NUM_THREADS", "abc")
    with pytest.raises(ConfigError, match="got 'abc'"):
        kernel(a, b, np.zeros((64, 64), np.float32))
