"""tilelang_mini: a TileLang-compatible tile DSL and compiler for Ascend-class NPUs.

`import tilelang_mini` loads only the error classes and the IR nodes; the compiler (passes, IR
parser), the backends (LLVM) and plotting load when first used, so importing the package costs
about as much as importing NumPy (benchmarks/cache_hit.py measures both)."""
from .errors import (  # noqa: F401
    ArgumentError, BufferOverflowError, CompileError, DeadlockError, InternalCompilerError, KernelRuntimeError,
    RaceError, SimulationError, SyncError, TileLangMiniError,
)

__version__ = "0.1.0"

_LAZY = {
    "JITKernel": ".runtime.kernel", "compile": ".runtime.kernel", "compile_ir": ".runtime.kernel",
    "jit": ".runtime.kernel", "PassConfigKey": ".runtime.kernel",
    "AutotuneResult": ".autotune", "autotune": ".autotune",
}

__all__ = ["ArgumentError", "BufferOverflowError", "CompileError", "DeadlockError", "RaceError", "SimulationError",
           "SyncError", "TileLangMiniError", "__version__", "parse_ir", *_LAZY]


def __getattr__(name):
    if name == "DataType":  # TileLang's `from tilelang import DataType`
        return _data_type()
    if name == "cdiv":  # TileLang's host-side `tilelang.cdiv(a, b)`
        from .language import ceildiv
        return ceildiv
    if name == "next_power_of_2":  # TileLang's `from .math import *` at the top level
        from .math import next_power_of_2
        return next_power_of_2
    if name in ("math", "layout", "testing"):  # TileLang's submodules tilelang.math, ...testing
        import importlib
        return importlib.import_module("." + name, __name__)
    if name == "TensorSupplyType":
        from .utils.tensor import TensorSupplyType
        return TensorSupplyType
    from .ir.lazy import load_lazy
    return load_lazy(__name__, globals(), _LAZY, name)


def __dir__():
    return sorted(set(globals()) | set(_LAZY) | {"DataType"})


class cache:  # noqa: N801 (TileLang's `tilelang.cache.clear_cache()`)
    """TileLang's kernel-cache controls; compiled kernels here are cached per process and on
    disk under a key that already covers the source, so these are no-ops."""

    @staticmethod
    def clear_cache():
        return None


def _data_type():
    from .language import dtype
    return dtype


def disable_cache():
    return None


def enable_cache():
    return None


def parse_ir(text: str, filename: str = "<ir>"):
    """Read IR text (as printed after any stage) back into a Kernel."""
    from .ir.parser import parse_ir as _parse
    from .runtime.errors import user_facing
    return user_facing(_parse)(text, filename)
