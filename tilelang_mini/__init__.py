"""tilelang_mini: a TileLang-compatible tile DSL and compiler for Ascend-class NPUs."""
from .errors import (  # noqa: F401
    ArgumentError, CompileError, DeadlockError, RaceError, SimulationError, SyncError,
    TileLangMiniError,
)
from .runtime.kernel import JITKernel, PassConfigKey, compile, compile_ir, jit  # noqa: F401
from .autotune import AutotuneResult, autotune  # noqa: F401,E402

__version__ = "0.1.0"


class cache:  # noqa: N801 (TileLang's `tilelang.cache.clear_cache()`)
    """TileLang's kernel-cache controls; compiled kernels here are cached per process and on
    disk under a key that already covers the source, so these are no-ops."""

    @staticmethod
    def clear_cache():
        return None


def _data_type():
    from .language import dtype
    return dtype


def __getattr__(name):
    if name == "DataType":  # TileLang's `from tilelang import DataType`
        return _data_type()
    raise AttributeError(f"module 'tilelang_mini' has no attribute {name!r}")


def disable_cache():
    return None


def enable_cache():
    return None


def parse_ir(text: str, filename: str = "<ir>"):
    """Read IR text (as printed after any stage) back into a Kernel."""
    from .ir.parser import parse_ir as _parse
    from .runtime.errors import user_facing
    return user_facing(_parse)(text, filename)
