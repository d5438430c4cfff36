"""`import tilelang_mini.language as T`: the names of the DSL.

Kernels are parsed from their Python source, not traced, so most names here are markers that the
frontend recognises; calling one outside a kernel is an error. Plain Python values work anywhere:
`prim_func`, `macro`, `Tensor`, `ceildiv`, the dtypes (`T.float16` is the string "float16"),
`T.infinity`/`T.max_value`/`T.min_value`, `T.const`/`T.dynamic` symbols and the GPU hint enums.
"""
from __future__ import annotations

import builtins as _builtins  # T.int / T.float / T.bool are dtypes in this module

from ..ir.dtypes import canonical
from ..runtime.errors import user_facing
from .dtypes import (  # noqa: F401
    DTYPE_NAMES, dtype, infinity, max_value, min_value,
)
from . import dtypes as _dtypes
from .symbols import Symbol, const, dynamic, symbolic  # noqa: F401

for _spelling in DTYPE_NAMES:  # T.float16, T.float32, T.bfloat16, T.int32, T.uint8, T.float, ...
    globals()[_spelling] = getattr(_dtypes, _spelling)
from . import hints as _hints
from .hints import GemmWarpPolicy, HINT_NAMES  # noqa: F401


class TensorType:
    """The annotation `T.Tensor(shape, dtype)` (or `T.Tensor[shape, dtype]`) of a parameter."""

    def __init__(self, shape, dtype="float32", data=None):
        shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
        self.shape = tuple(_builtins.int(n) if isinstance(n, IntImm) else n for n in shape)
        self.dtype = dtype
        self.data = data

    def __repr__(self) -> str:
        return f"Tensor({self.shape}, {self.dtype!r})"


class _TensorSpelling:
    """`T.Tensor((M, K), dtype)` and TileLang's subscript spelling `T.Tensor[(M, K), dtype]`."""

    def __call__(self, shape, dtype="float32", data=None) -> TensorType:
        return TensorType(shape, dtype, data)

    def __getitem__(self, key) -> TensorType:
        # `_builtins.int`: `int` is T.int (a dtype) in this module
        if isinstance(key, tuple) and len(key) == 2 and \
                not isinstance(key[1], (_builtins.int, Symbol)):
            return TensorType(key[0], key[1])
        return TensorType(key, "float32")


class _StridedSpelling:
    """`T.StridedTensor[(M, N), (dM, dN), dtype]` (or called): a tensor parameter whose argument
    may be a strided view (`A.T`). The strides are the argument's memory layout, which the
    runtime reads through; the kernel indexes the tensor by its shape as any other."""

    def __call__(self, shape, strides=None, dtype="float32") -> TensorType:
        return TensorType(shape, dtype)

    def __getitem__(self, key) -> TensorType:
        if isinstance(key, tuple) and len(key) == 3:
            return TensorType(key[0], key[2])
        return Tensor[key]


Tensor = _TensorSpelling()  # noqa: N816 (TileLang's spelling)
Buffer = Tensor  # TileLang also spells parameters `T.Buffer`
StridedTensor = _StridedSpelling()
SharedBuffer = Tensor
FragmentBuffer = Tensor


@user_facing
def prim_func(fn=None, **_attrs):
    """Parse a kernel function into Tile IR; returns a `PrimFunc` (errors are located).
    A function whose tensor shapes hold `T.dynamic`/`T.symbolic` symbols is parsed per call."""
    if fn is None:  # `@T.prim_func(private=True)` and similar spellings
        return prim_func
    return _parser()(fn)


class Macro:
    """A `@T.macro` function: inlined at each call inside a kernel."""

    def __init__(self, fn):
        self.fn = fn
        self.__name__ = fn.__name__
        self.__doc__ = fn.__doc__

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"macro {self.fn.__name__} can only be called inside a T.prim_func")


def macro(fn=None, **_attrs) -> Macro:
    if fn is None:
        return macro
    return Macro(fn)


class Ref:
    """`x: T.Ref` on a T.macro parameter: the argument (an element `A[i]` or a `T.alloc_var`
    scalar) is passed by reference, so `x = v` in the macro writes it (C++'s `T&`)."""


class Layout:
    """`T.Layout(shape, index_fn)` / `T.Fragment(...)`: a GPU memory or thread layout, the
    argument of `T.annotate_layout` (a hint here): built in plain Python, never applied."""

    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs

    def __repr__(self) -> str:
        return f"{type(self).__name__}(...)"


class Fragment(Layout):
    pass


class _Imm:
    """TileLang's immediate attributes (`.value`, `.dtype`) on a Python number: the result of
    `T.max`/`T.min`/`T.clamp`/... on Python numbers in factory code (`T.min(n, 2).value`)."""

    _number, _dtype = _builtins.int, "int32"

    @property
    def value(self):
        return self._number(self)

    @property
    def dtype(self) -> str:
        return self._dtype


class IntImm(_Imm, _builtins.int):
    """An int that also answers TileLang's `IntImm` attributes (`.value` an int, `.dtype`)."""


class FloatImm(_Imm, _builtins.float):
    """The float counterpart of `IntImm` (`.value` a float, `.dtype` float32)."""

    _number, _dtype = _builtins.float, "float32"


def _imm(v):
    if isinstance(v, _builtins.bool):
        return v
    if isinstance(v, _builtins.int):
        return IntImm(v)
    return FloatImm(v) if isinstance(v, _builtins.float) else v


def ceildiv(a, b):
    """ceil(a / b) for ints (trace time); inside a kernel it also takes index expressions."""
    return -(-a // b)


def dtype_name(d) -> str | None:
    return canonical(d)


# Names that only mean something inside a kernel: the frontend dispatches on them by name.
KERNEL_NAMES = (
    "Kernel", "alloc_shared", "alloc_fragment", "alloc_var", "alloc_L1", "alloc_L0A", "alloc_L0B",
    "alloc_L0C", "alloc_ub", "alloc_local", "alloc_UB", "copy", "gemm", "clear", "fill",
    "Parallel", "parallel", "Pipelined", "serial", "Serial", "unroll", "vectorized", "grid",
    "reduce_sum", "reduce_max", "reduce_min", "reduce_abssum", "reduce_absmax", "exp",
    "exp2", "log", "sqrt", "rsqrt", "sin", "cos", "abs", "max", "min", "cast", "Scope", "set_flag",
    "wait_flag",
    "pipe_barrier", "set_cross_flag", "wait_cross_flag",
    # expressions TileLang kernels use (the frontend spells them with the IR's operations)
    "if_then_else", "Select", "Cast", "clamp", "log2", "log10", "sigmoid", "tanh", "erf",
    "floordiv", "floormod", "truncdiv", "truncmod", "pow", "round", "nearbyint", "floor", "ceil",
    "shift_left", "shift_right", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not",
    "reinterpret", "sort",
    "atomic_add", "atomic_max", "atomic_min", "atomic_addx2", "atomic_addx4", "alloc_global", "alloc_buffer", "reshape", "view",
    "reinterpretcast", "im2col", "alloc_reducer", "finalize_reducer",
    "empty", "gemm_v0", "barrier_all", "sync_all", "sync_grid", "gemm_sp", "mma", "cumsum", "And", "Or", "Not", "If", "Then", "Else",
) + HINT_NAMES


def _kernel_only(name: str):
    def marker(*args, **kwargs):
        raise RuntimeError(f"T.{name} can only be used inside a T.prim_func kernel")

    marker.__name__ = name
    marker.__qualname__ = name
    marker._tl_name = name
    return marker


for _name in KERNEL_NAMES:
    globals()[_name] = _kernel_only(_name)


def _numbers_too(name: str, fn):
    """max/min/abs/... also work on plain Python numbers (factory code: `T.max(n, 1)`)."""
    marker = globals()[name]

    def both(*args, **kwargs):
        if args and not kwargs and all(isinstance(a, (_builtins.int, _builtins.float))
                                        for a in args):
            return _imm(fn(*args))
        return marker(*args, **kwargs)

    both.__name__ = name
    both._tl_name = name
    globals()[name] = both


import math as _math  # noqa: E402

for _name, _fn in {"max": _builtins.max, "min": _builtins.min, "abs": _builtins.abs, "exp": _math.exp, "exp2": lambda x: 2.0 ** x,
                   "log": _math.log, "log2": _math.log2, "sqrt": _math.sqrt, "sin": _math.sin,
                   "cos": _math.cos,
                   "floordiv": lambda a, b: a // b, "floormod": lambda a, b: a % b,
                   "clamp": lambda x, lo, hi: _builtins.min(_builtins.max(x, lo), hi)}.items():
    _numbers_too(_name, _fn)

del _name

from . import tile  # noqa: E402  (T.tile.* : tilelang-ascend's vector operations)


def _parser():
    """The frontend's `parse_prim_func`, imported at the first kernel: the frontend reads the
    names above when it loads, so importing it here would make `tilelang_mini.frontend` (or
    `compile_ir`, which loads it) fail when it is imported before this module."""
    fn = globals().get("parse_prim_func")
    if fn is None:
        from ..frontend import parse_prim_func as fn
        globals()["parse_prim_func"] = fn
    return fn


def __getattr__(name):
    if name == "parse_prim_func":
        return _parser()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = ["Tensor", "Buffer", "TensorType", "prim_func", "macro", "Macro", "Ref", "ceildiv", "dtype",
           "infinity", "max_value", "min_value", "const", "dynamic", "symbolic", "Symbol",
           "GemmWarpPolicy", "tile", "Layout", "Fragment", *DTYPE_NAMES, *KERNEL_NAMES]
