"""`import tilelang_mini.language as T`: the names of the DSL.

Kernels are parsed from their Python source, not traced, so most names here are markers that the
frontend recognises; calling one outside a kernel is an error. `prim_func`, `macro`, `Tensor` and
`ceildiv` do run in plain Python (decoration, annotations, trace-time arithmetic).
"""
from __future__ import annotations

from ..ir.dtypes import canonical
from ..runtime.errors import user_facing


class TensorType:
    """The annotation `T.Tensor(shape, dtype)` of a kernel parameter."""

    def __init__(self, shape, dtype="float32"):
        self.shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
        self.dtype = dtype

    def __repr__(self) -> str:
        return f"Tensor({self.shape}, {self.dtype!r})"


def Tensor(shape, dtype="float32") -> TensorType:  # noqa: N802 (TileLang's spelling)
    return TensorType(shape, dtype)


Buffer = Tensor  # TileLang also spells parameters `T.Buffer`


@user_facing
def prim_func(fn):
    """Parse a kernel function into Tile IR; returns a `PrimFunc` (errors are located)."""
    return parse_prim_func(fn)


class Macro:
    """A `@T.macro` function: inlined at each call inside a kernel."""

    def __init__(self, fn):
        self.fn = fn
        self.__name__ = fn.__name__
        self.__doc__ = fn.__doc__

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"macro {self.fn.__name__} can only be called inside a T.prim_func")


def macro(fn) -> Macro:
    return Macro(fn)


def ceildiv(a, b):
    """ceil(a / b) for ints (trace time); inside a kernel it also takes index expressions."""
    return -(-a // b)


def dtype_name(d) -> str | None:
    return canonical(d)


# Names that only mean something inside a kernel: the frontend dispatches on them by name.
KERNEL_NAMES = (
    "Kernel", "alloc_shared", "alloc_fragment", "alloc_var", "alloc_L1", "alloc_L0A", "alloc_L0B",
    "alloc_L0C", "alloc_ub", "copy", "gemm", "clear", "fill", "Parallel", "Pipelined", "serial",
    "unroll", "reduce_sum", "reduce_max", "reduce_min", "reduce_abssum", "reduce_absmax", "exp",
    "exp2", "log", "sqrt", "rsqrt", "abs", "max", "min", "cast", "Scope", "set_flag", "wait_flag",
    "pipe_barrier", "set_cross_flag", "wait_cross_flag",
)


def _kernel_only(name: str):
    def marker(*args, **kwargs):
        raise RuntimeError(f"T.{name} can only be used inside a T.prim_func kernel")

    marker.__name__ = name
    marker.__qualname__ = name
    marker._tl_name = name
    return marker


for _name in KERNEL_NAMES:
    globals()[_name] = _kernel_only(_name)

del _name

from ..frontend import parse_prim_func  # noqa: E402 (the frontend reads the names above)

__all__ = ["Tensor", "Buffer", "TensorType", "prim_func", "macro", "Macro", "ceildiv", *KERNEL_NAMES]
