"""Every TILELANG_MINI_* environment variable is read here, and nowhere else.

Values are read when asked for (not at import), so a process can change them between compiles
(`set_setting`), and a child process gets its own (`child_environment`).
"""
from __future__ import annotations

import os
from pathlib import Path

from ..arch.presets import DEFAULT_CHIP
from ..errors import ConfigError
from ..transform.options import DEFAULT_TARGET


def _get(name: str, default: str | None = None) -> str | None:
    value = os.environ.get(name)
    return default if value is None or value == "" else value


def set_setting(name: str, value: str | None, keep: bool = False) -> None:
    """Set environment variable `name` for this process (None: remove it); `keep`: only when it
    is not set already. The functions below read the new value at their next call."""
    if keep and os.environ.get(name) is not None:
        return
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


def child_environment(**settings: str) -> dict:
    """The environment for a child process: this one's, with `settings` set."""
    return {**os.environ, **settings}


def default_target() -> str:
    """TILELANG_MINI_TARGET: the backend `jit` uses when none is given (numpy | llvm)."""
    return _get("TILELANG_MINI_TARGET", DEFAULT_TARGET)


def default_chip() -> str:
    """TILELANG_MINI_CHIP: the chip preset `jit` uses when none is given."""
    return _get("TILELANG_MINI_CHIP", DEFAULT_CHIP)


def print_after() -> tuple[str, ...]:
    """TILELANG_MINI_PRINT_AFTER: comma-separated pass names, or `all`, printed to stderr."""
    value = _get("TILELANG_MINI_PRINT_AFTER", "")
    return tuple(v.strip() for v in value.split(",") if v.strip())


def verify_ir() -> bool:
    """TILELANG_MINI_VERIFY=1 runs the IR verifier after every pass (always on in tests)."""
    return _get("TILELANG_MINI_VERIFY", "0") not in ("0", "false", "no")


def time_passes() -> bool:
    """TILELANG_MINI_TIME_PASSES=1 prints how long each pass took."""
    return _get("TILELANG_MINI_TIME_PASSES", "0") not in ("0", "false", "no")


def num_threads() -> int:
    """TILELANG_MINI_NUM_THREADS: worker threads of the llvm backend (default: all cores)."""
    value = _get("TILELANG_MINI_NUM_THREADS")
    if value is None:
        return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        return max(1, int(value))
    except ValueError:
        raise ConfigError(f"TILELANG_MINI_NUM_THREADS must be a positive integer (threads of "
                          f"the llvm target), got {value!r}") from None


def cache_enabled() -> bool:
    """TILELANG_MINI_CACHE=0 turns the on-disk cache of compiled code off."""
    return _get("TILELANG_MINI_CACHE", "1") not in ("0", "false", "no")


def cache_dir() -> Path:
    """TILELANG_MINI_CACHE_DIR, else $XDG_CACHE_HOME/tilelang_mini, else ~/.cache/tilelang_mini."""
    value = _get("TILELANG_MINI_CACHE_DIR")
    if value:
        return Path(value)
    base = _get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tilelang_mini"
