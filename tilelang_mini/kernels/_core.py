"""What every library function shares: array conversion, compiled-kernel cache, launches.

A library function is written as a *plan*: `plan(ctx, *args, **kwargs) -> Plan`, which converts
the arguments, compiles (memoised) the tile kernels the call needs for `ctx.target`/`ctx.chip`
and lists the launches, each a JITKernel with the full list of its parameter arrays. Outputs are
parameters like any other, so the kernels write them in place (as DeepGEMM / FlashMLA do).

`LibraryFunction` turns a plan into the public callable `f(*args)`, plus
`f.kernels(*args)` (the JITKernels it would launch) and `f.estimate(*args, chip=...)` (the
performance model's estimate of the whole call: the sum of its launches).
"""
from __future__ import annotations

import functools
import inspect
import operator
import threading
from dataclasses import dataclass, field

import numpy as np

from ..ir import dtypes
from ..runtime import config
from ..runtime.torch_interop import is_torch as _is_torch, to_numpy, to_torch  # noqa: F401

DEFAULT_TARGET = "llvm"  # the library runs on the fast target unless told otherwise

_CACHE: dict = {}
_LOCK = threading.Lock()


@dataclass(frozen=True)
class Context:
    target: str
    chip: str
    check_data: bool = True  # host checks of index data (off for estimates on np.empty arrays)

    def compile(self, factory, *args):
        """`factory(*args)` (a T.prim_func) compiled for this context, memoised."""
        key = (factory.__module__, factory.__qualname__, args, self.target, self.chip)
        with _LOCK:
            kernel = _CACHE.get(key)
        if kernel is None:
            from ..runtime.kernel import compile_call
            kernel = compile_call(factory, args, target=self.target, chip=self.chip)
            with _LOCK:
                _CACHE[key] = kernel
        return kernel


@dataclass
class Plan:
    """The launches of one call, in order, the value it returns, and copy-backs of outputs
    that were not C-contiguous arrays of the kernel's dtype."""

    launches: list = field(default_factory=list)
    result: object = None
    writeback: list = field(default_factory=list)
    hints: dict = field(default_factory=dict)  # launch number -> arrays the estimate reads

    def launch(self, kernel, *arrays, estimate_with=None):
        """Launch `kernel` on `arrays`; `estimate_with` replaces them for the estimate (a hint
        such as DeepGEMM's expected_m in place of the real row counts)."""
        if estimate_with is not None:
            self.hints[len(self.launches)] = estimate_with
        self.launches.append((kernel, arrays))


@dataclass
class CallEstimate:
    """The estimate of a whole library call: the sum of its launches on one chip."""

    chip: str
    kernels: list  # (kernel name, Estimate)

    @property
    def time_us(self) -> float:
        return sum(e.time_us for _, e in self.kernels)

    def __repr__(self) -> str:
        parts = ", ".join(f"{n} {e.time_us:.2f} us" for n, e in self.kernels)
        return f"<CallEstimate {self.time_us:.2f} us on {self.chip}: {parts}>"


class LibraryFunction:
    """A public library function: call it, list its kernels, or estimate it.

    An empty array argument (a 0 in its shape) is a ValueError naming it, unless `empty_ok`
    (the function gives empty data a meaning: the k-grouped GEMMs' groups with no K rows, an
    empty batch of get_mla_metadata); the tile kernels take no 0-extent tensors."""

    def __init__(self, plan, empty_ok=False):
        self.plan = plan
        self.empty_ok = empty_ok
        functools.update_wrapper(self, plan)

    def _plan(self, ctx, args, kwargs):
        if not self.empty_ok:
            names = list(inspect.signature(self.plan).parameters)[1:]  # after ctx
            for where, a in _arrays(args, kwargs, names):
                if 0 in a.shape:
                    raise ValueError(f"{self.__name__}: {where} has shape {tuple(a.shape)}; the "
                                     f"library takes no empty arrays (every dimension >= 1)")
        return self.plan(ctx, *args, **kwargs)

    def _context(self, target=None, chip=None, check_data=True) -> Context:
        return Context(target or DEFAULT_TARGET, chip or config.default_chip(), check_data)

    def __call__(self, *args, target=None, chip=None, **kwargs):
        tensors = TorchArgs()
        args, kwargs = tensors.convert(args), tensors.convert(kwargs)
        plan = self._plan(self._context(target, chip), args, kwargs)
        for kernel, arrays in plan.launches:
            kernel(*arrays)
        for dst, src in plan.writeback:
            dst[...] = from_numpy_like(src, dst)
        if not tensors:
            return plan.result
        copies = {id(src): dst for dst, src in plan.writeback}  # an output's working copy
        return tensors.back(plan.result, copies)

    def kernels(self, *args, target=None, chip=None, **kwargs) -> list:
        """The compiled JITKernels this call launches, in order (for get_ir and simulate)."""
        tensors = TorchArgs()
        plan = self._plan(self._context(target, chip), tensors.convert(args),
                          tensors.convert(kwargs))
        return [k for k, _ in plan.launches]

    def launches(self, *args, target=None, chip=None, **kwargs) -> list:
        """(JITKernel, arrays) per launch: `kernel.simulate(*arrays)` replays one launch (torch
        tensors given are NumPy views of the same memory there)."""
        tensors = TorchArgs()
        return self._plan(self._context(target, chip), tensors.convert(args),
                          tensors.convert(kwargs)).launches

    def estimate(self, *args, chip=None, data=True, **kwargs) -> CallEstimate:
        """The estimate of the whole call on `chip`. With `data` the model reads the arrays
        where control flow depends on them (group ids, row counts, sequence lengths); arrays it
        cannot use (np.empty garbage that faults) fall back to the data-free estimate."""
        from ..errors import TileLangMiniError
        ctx = self._context("numpy", chip, check_data=False)
        tensors = TorchArgs()
        plan = self._plan(ctx, tensors.convert(args), tensors.convert(kwargs))
        out = []
        for n, (k, arrays) in enumerate(plan.launches):
            est = None
            if data:
                try:
                    est = k.estimate(args=plan.hints.get(n, arrays))
                except (TileLangMiniError, IndexError, ValueError):
                    est = None
            out.append((k.ir.name, est if est is not None else k.estimate()))
        return CallEstimate(ctx.chip, out)


def library_function(plan=None, *, empty_ok=False):
    """`@library_function` or `@library_function(empty_ok=True)` over a plan function."""
    if plan is None:
        return lambda p: LibraryFunction(p, empty_ok)
    return LibraryFunction(plan, empty_ok)


def _arrays(args, kwargs, names):
    """(where, array) for the NumPy arrays among the arguments (also inside tuples and lists,
    as the (values, scales) pairs); `names`: the parameters' names."""
    items = [(names[i] if i < len(names) else f"argument {i + 1}", a) for i, a in enumerate(args)]
    items += list(kwargs.items())
    for where, a in items:
        if isinstance(a, np.ndarray):
            yield where, a
        elif isinstance(a, (tuple, list)):
            for j, x in enumerate(a):
                if isinstance(x, np.ndarray):
                    yield f"{where}[{j}]", x


# ----------------------------------------------------------------------------- arrays


class TorchArgs:
    """The torch tensors of one call: `convert` replaces each (in nested tuples, lists and
    dicts) by a NumPy view of its memory, the same view for the same tensor, so kernels write
    outputs in place; `back` turns the NumPy arrays of the result into torch tensors, the
    caller's own tensor where the result is (a working copy of) one it passed."""

    def __init__(self):
        self.views = {}     # id(tensor) -> (tensor, view)

    def __bool__(self) -> bool:
        return bool(self.views)

    def convert(self, x):
        if _is_torch(x):
            hit = self.views.get(id(x))
            if hit is None:
                hit = self.views[id(x)] = (x, to_numpy(x))
            return hit[1]
        if isinstance(x, tuple):
            return tuple(self.convert(v) for v in x)
        if isinstance(x, list):
            return [self.convert(v) for v in x]
        if isinstance(x, dict):
            return {k: self.convert(v) for k, v in x.items()}
        return x

    def back(self, result, copies=None):
        if isinstance(result, tuple):
            return tuple(self.back(v, copies) for v in result)
        if isinstance(result, list):
            return [self.back(v, copies) for v in result]
        if not isinstance(result, np.ndarray):
            return result
        result = (copies or {}).get(id(result), result)
        for tensor, view in self.views.values():
            if result is view:
                return tensor
        return to_torch(result)


def from_numpy_like(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """`src` in `dst`'s dtype (float8_e8m0fnu by our rounding rule, dtypes.to_e8m0)."""
    name = dtypes.canonical(dst.dtype)
    if src.dtype == dst.dtype or name is None:
        return src.astype(dst.dtype, copy=False)
    return dtypes.cast_array(src, name)


def dtype_of(a: np.ndarray, name: str = "d") -> str:
    """The dtype name of array argument `name`; a dtype tilelang_mini has no name for (float64,
    complex, object) is a ValueError naming the argument."""
    d = dtypes.canonical(a.dtype)
    if d is None:
        raise ValueError(f"{name} has dtype {a.dtype}, which no kernel takes "
                         f"(bfloat16 or float32 here)")
    return d


def as_input(x, dtype: str | None = None, name: str = "argument") -> np.ndarray:
    """A C-contiguous NumPy array for a kernel input (cast to `dtype` if given)."""
    a = to_numpy(x, name)
    if dtype is not None and dtypes.canonical(a.dtype) != dtype:
        a = dtypes.cast_array(a, dtype)
    return np.ascontiguousarray(a)


def as_output(plan: Plan, x, name: str = "output", dtype: str | None = None) -> np.ndarray:
    """The array a kernel writes for output `x`: `x` itself when it is C-contiguous (and of
    `dtype`), else a contiguous copy that the call copies back into `x` at the end."""
    a = to_numpy(x, name)
    if a.flags.c_contiguous and (dtype is None or dtypes.canonical(a.dtype) == dtype):
        return a
    work = np.ascontiguousarray(dtypes.cast_array(a, dtype) if dtype else a)
    plan.writeback.append((a, work))
    return work


def dims(a: np.ndarray, axes: str, name: str) -> tuple:
    """The sizes of `a`'s axes, after checking it has one per name in `axes` ("M, K"): an
    array of another rank is a ValueError saying which form was expected."""
    want = [x.strip() for x in axes.split(",")]
    if a.ndim != len(want):
        raise ValueError(f"{name} must be {len(want)}-D [{axes}], got shape {tuple(a.shape)}")
    return tuple(int(x) for x in a.shape)


def check_shape(a: np.ndarray, shape, name: str) -> None:
    if tuple(a.shape) != tuple(shape):
        raise ValueError(f"{name} has shape {tuple(a.shape)}; expected {tuple(shape)}")


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def int_arg(value, name: str) -> int:
    """An integer argument (a Python or NumPy integer, or a float with an integral value) as an
    int; anything else (a string, 2.5, None) is a ValueError naming the argument, not the
    `invalid literal for int()` of Python's own conversion."""
    if isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        pass
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return int(value)
    raise ValueError(f"{name} must be an integer, got {value!r}")
