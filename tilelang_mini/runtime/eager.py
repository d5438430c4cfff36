"""TileLang's eager jit style and symbolic shapes at run time.

* `EagerJIT`: `@jit` on a function whose body holds `with T.Kernel` (docs/tilelang_compat.md).
  `f(a, b, ...)` binds the shape symbols from the arrays, compiles once per distinct
  (shapes, dtypes, other arguments) signature (memoised) and returns the outputs;
  `f.compile(M=..., N=..., **args)` compiles ahead and returns the `JITKernel`.
* `SymbolicKernel`: a `T.prim_func` whose tensor shapes hold `T.dynamic`/`T.symbolic` symbols,
  compiled: each call binds the symbols from the input shapes and runs the kernel specialised for
  them (memoised per binding). `specialize(**values)` gives the `JITKernel` for given values.
"""
from __future__ import annotations

import ast
import inspect
import textwrap

import numpy as np

from ..errors import ArgumentError, CompileError
from .errors import user_facing
from .kernel import CompileSettings, frozen
from .torch_interop import is_torch, to_numpy as _to_numpy, to_torch


def is_array(v) -> bool:
    """An argument that is a tensor (NumPy array, torch tensor, anything with shape and dtype)."""
    return hasattr(v, "shape") and hasattr(v, "dtype") and len(getattr(v, "shape", ())) > 0


def to_numpy(v):
    """A NumPy view of an array argument (torch CPU tensors share their memory)."""
    if isinstance(v, np.ndarray):
        return v
    if is_torch(v):
        return _to_numpy(v, "tensor argument", ArgumentError)
    return np.asarray(v)


def from_numpy(out, like):
    """Return outputs as torch tensors when the caller passed torch tensors."""
    return out if like is None else to_torch(out)


def _dtype_of(v) -> str:
    if isinstance(v.dtype, str):  # a T.Tensor(shape, dtype) description
        return str(v.dtype)
    if type(v).__module__.startswith("torch"):
        return str(v.dtype).replace("torch.", "")
    return np.dtype(v.dtype).name


def is_eager_function(fn) -> bool:
    """Whether `fn`'s body holds `with T.Kernel(...)` itself (an eager jit function) rather than
    returning a `T.prim_func` (a factory). `with T.ClusterKernel(...)` counts too: the parser
    then gives its located GPU-only error; so does an output `C = T.empty(...)` (the T.Kernel
    then in a T.macro the body calls: a located error of the parser's)."""
    try:
        src = textwrap.dedent(inspect.getsource(fn))
        tree = ast.parse(src)
    except (OSError, TypeError, SyntaxError):
        return False
    fdef = tree.body[0] if tree.body else None
    if not isinstance(fdef, ast.FunctionDef):
        return False
    for stmt in _own_statements(fdef.body):
        if isinstance(stmt, ast.With):
            call = stmt.items[0].context_expr
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and \
                    call.func.attr.endswith("Kernel"):  # T.Kernel, GPU-only T.ClusterKernel
                return True
        f = stmt.value.func if isinstance(stmt, ast.Assign) and \
            isinstance(stmt.value, ast.Call) else None
        if isinstance(f, ast.Attribute) and f.attr == "empty" and isinstance(f.value, ast.Name) \
                and f.value.id not in ("torch", "np", "numpy"):
            return True  # `C = T.empty(...)`: an eager output (its T.Kernel perhaps in a macro)
    return False


def _own_statements(body):
    """The statements of a function body, also those inside its `if`/`for`/`with`/`try` blocks
    (`if is_2d: ... with T.Kernel(...)`), not those of the functions it defines (a factory's
    nested `@T.prim_func`)."""
    for stmt in body:
        yield stmt
        if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for field in ("body", "orelse", "finalbody"):
                yield from _own_statements(getattr(stmt, field, None) or [])
            for h in getattr(stmt, "handlers", None) or []:
                yield from _own_statements(h.body)


class EagerJIT:
    """`@tilelang_mini.jit` on an eager kernel function."""

    def __init__(self, fn, target, chip):
        import functools
        self.fn = fn
        self.target = target
        self.chip = chip
        self.signature = inspect.signature(fn)
        self._cache: dict = {}
        functools.update_wrapper(self, fn)

    def _kernel(self, tensors: dict, scalars: dict, symbols: dict, target=None):
        from ..frontend.eager import EagerCall
        from ..frontend.parser import KernelBuilder, PrimFunc
        from . import config
        from .kernel import compile as tl_compile
        target = target or self.target or config.default_target()
        chip = self.chip or config.default_chip()
        try:
            key = (tuple(tensors.items()),
                   tuple(sorted(((k, frozen(v)) for k, v in scalars.items()), key=str)),
                   tuple(sorted(symbols.items())), target, chip)
            hash(key)
        except TypeError:  # a value that is neither hashable nor a container of such
            key = None
        if key is not None and key in self._cache:
            return self._cache[key]
        call = EagerCall(tensors, scalars)
        ir = KernelBuilder(self.fn, symbols=symbols, eager=call).build()
        n_in = len(call.inputs)
        n_out = len(call.outputs)
        kernel = tl_compile(PrimFunc(self.fn, ir), out_idx=list(range(n_in, n_in + n_out)),
                            target=target, chip=chip)
        kernel.eager_inputs = call.inputs
        if key is not None:
            self._cache[key] = kernel
        return kernel

    @user_facing
    def __call__(self, *args, **kwargs):
        kernel, call_args = self.kernel_for(*args, **kwargs)
        return kernel(*call_args)

    def get_kernel_source(self, *args, **kwargs) -> str:
        """TileLang's `f.get_kernel_source(...)`: the generated code of the kernel, without
        running it: of the kernel a call with these tensors compiles, or, given no tensor (the
        shape symbols and other arguments by name, nsa_fwd's host code), of `f.compile(...)`."""
        if not any(is_array(v) for v in (*args, *kwargs.values())):
            named = dict(zip(self.signature.parameters, args))
            return self.compile(**named, **kwargs).get_kernel_source()
        return self.kernel_for(*args, **kwargs)[0].get_kernel_source()

    def kernel_for(self, *args, target=None, **kwargs):
        """(compiled kernel, its arguments) for a call, without running it."""
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as e:
            raise ArgumentError(f"{self.fn.__name__}: {e}", _def_loc(self.fn)) from None
        bound.apply_defaults()
        tensors, scalars, arrays, like = {}, {}, {}, None
        for name, v in bound.arguments.items():
            if is_array(v):
                tensors[name] = (tuple(int(d) for d in v.shape), _dtype_of(v))
                arrays[name] = to_numpy(v)
                if like is None and type(v).__module__.startswith("torch"):
                    like = v
            else:
                scalars[name] = v
        kernel = self._kernel(tensors, scalars, {}, target)
        return kernel, [arrays[n] if like is None else bound.arguments[n]
                        for n in kernel.eager_inputs]

    @user_facing
    def compile(self, *args, target=None, **kwargs):
        """Compile ahead: shape symbols and trace-time arguments by name; parameters without a
        value or a default are the tensors. Returns the `JITKernel` (inputs -> outputs). Given
        tensors (arrays, or `T.Tensor(shape, dtype)` descriptions) as a call takes them
        (`f.compile(A, B, block_M=64)`), the kernel that call would run."""
        if len(args) == 1 and isinstance(args[0], str) and target is None:
            args, target = (), args[0]  # f.compile("llvm", N=...): the target, positionally
        if args or any(is_array(v) for v in kwargs.values()):
            try:
                bound = self.signature.bind(*args, **kwargs)
            except TypeError as e:
                raise ArgumentError(f"{self.fn.__name__}: {e}", _def_loc(self.fn)) from None
            bound.apply_defaults()
            tensors = {n: (tuple(int(d) for d in v.shape), _dtype_of(v))
                       for n, v in bound.arguments.items() if is_array(v)}
            scalars = {n: v for n, v in bound.arguments.items() if n not in tensors}
            return self._kernel(tensors, scalars, {}, target)
        params = self.signature.parameters
        tensors, scalars, symbols = {}, {}, {}
        for name, value in kwargs.items():
            if name in params:
                scalars[name] = value
            else:
                symbols[name] = value
        for name, p in params.items():
            if name not in scalars:
                if p.default is p.empty:
                    tensors[name] = None
                else:
                    scalars[name] = p.default
        return self._kernel(tensors, scalars, symbols, target)

    def par_compile(self, configs, target=None, **_options):
        """TileLang's `f.par_compile([kwargs, ...])`: `f.compile(**kwargs)` of each (in order;
        its num_workers and the like have no meaning here), the kernels in a list."""
        return [self.compile(target=target, **dict(c)) for c in configs]

    def __repr__(self) -> str:
        return f"<eager jit {self.fn.__name__}>"


class SymbolicKernel(CompileSettings):
    """A compiled kernel with symbolic tensor shapes: specialised per call."""

    def __init__(self, prim, out_idx, target, chip, workspace_idx=None, pass_configs=None):
        super().__init__(out_idx, target, chip, workspace_idx, pass_configs)
        self.prim = prim
        anns = getattr(prim.fn, "__annotations__", {})
        names = list(inspect.signature(prim.fn).parameters)
        n = len(names)
        outs = {i % n for i in (out_idx or ())} | {i % n for i in (workspace_idx or ())}
        self.input_types = [anns.get(p) for i, p in enumerate(names) if i not in outs]
        self.names = [p for i, p in enumerate(names) if i not in outs]

    def bind(self, args) -> dict:
        from ..language.symbols import Symbol
        values: dict = {}
        if len(args) != len(self.input_types):
            raise ArgumentError(f"{self.prim.__name__} takes {len(self.input_types)} input "
                                f"arrays, got {len(args)}")
        from ..frontend.parser import is_scalar_param
        for i, (ann, a) in enumerate(zip(self.input_types, args)):
            if is_scalar_param(ann):  # `n: T.int32`: the kernel is specialised per value
                v = np.asarray(a).reshape(-1)
                if v.size != 1:
                    raise ArgumentError(f"input {i} ({self.names[i]}): expected a number, got "
                                        f"{type(a).__name__}")
                values[self.names[i]] = v[0].item()
                continue
            shape = _shape_of(a)
            while shape is not None and len(shape) > len(ann.shape) and shape[-1] == 1:
                shape = tuple(shape)[:-1]  # (.., G, 1) for (.., G): read regrouped (arguments.py)
            if shape is None or len(shape) != len(ann.shape):
                raise ArgumentError(f"input {i}: expected a {len(ann.shape)}-D array, got "
                                    f"{'shape ' + str(tuple(shape)) if shape is not None else type(a).__name__}",
                                    _def_loc(self.prim.fn))
            for d, n in zip(ann.shape, shape):
                if isinstance(d, Symbol):
                    if int(n) < 1:  # (a tensor dimension is at least 1, as for fixed shapes)
                        raise ArgumentError(
                            f"argument '{self.names[i]}' of kernel '{self.prim.__name__}' has "
                            f"shape {tuple(shape)}: shape symbol {d.name} would be {int(n)}; "
                            f"tensor dimensions must be at least 1", _def_loc(self.prim.fn))
                    if values.setdefault(d.name, int(n)) != int(n):
                        raise ArgumentError(f"shape symbol {d.name} is {values[d.name]} by an "
                                            f"earlier input but {n} by input {i}")
        return values

    def specialize(self, **values):
        from .kernel import compile as tl_compile
        key = tuple(sorted(values.items()))
        if key not in self._cache:
            self._cache[key] = tl_compile(self.prim.specialize(values), out_idx=self.out_idx,
                                            target=self.target, chip=self.chip,
                                            workspace_idx=self.workspace_idx,
                                            pass_configs=self.pass_configs)
        return self._cache[key]

    @user_facing
    def __call__(self, *args):
        return self.specialize(**self.bind(args))(*args)

    @user_facing
    def simulate(self, *args, **kwargs):
        return self.specialize(**self.bind(args)).simulate(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<SymbolicKernel {self.prim.__name__}>"


__all__ = ["EagerJIT", "SymbolicKernel", "is_eager_function", "is_array", "CompileError"]


def _shape_of(a):
    """The shape the call's argument conversion (runtime/arguments.py) will give `a`: an
    array's, a nested list's, an `__array__`/`__dlpack__` object's; None for anything else."""
    shape = getattr(a, "shape", None)
    if shape is not None:
        try:
            return tuple(int(n) for n in shape)
        except (TypeError, ValueError):
            return None
    if isinstance(a, (list, tuple)) or hasattr(a, "__array__") or hasattr(a, "__dlpack__"):
        try:
            with np.errstate(all="ignore"):
                return np.shape(np.asarray(a))
        except Exception:  # noqa: BLE001 - ragged lists, broken __array__: the call reports it
            return None
    return None


def _def_loc(fn):
    """Where `fn` starts (its first decorator line), for errors about how it was called."""
    from ..ir.nodes import Loc
    code = getattr(fn, "__code__", None)
    return Loc(code.co_filename, code.co_firstlineno, 1) if code is not None else None
