"""The key of a kernel factory's call before it is traced: what `factory(*args)` will build.

A `@jit` factory (or a kernel-library plan's factory) is a Python function that returns a
T.prim_func; tracing it and printing the IR for the disk cache's key costs milliseconds that a
cache hit in a fresh process cannot afford. `factory_key` computes a key from what determines
the traced kernel instead:

- the factory's code: its code object's bytecode, constants, names, file, and line/column
  table, with those of the nested kernel function (a changed kernel source text changes them;
  not `marshal`, whose output depends on reference counts);
- its default values and the values of its closure cells;
- the values of the module globals its code (and its nested code) names, and, through them, the
  code, closures and globals of the plain Python functions and `T.macro`s it calls;
- the arguments (bound to the signature, defaults applied).

A value is keyed by its type and value (numbers, strings, None, tuples, lists, dicts, sets,
NumPy dtypes, scalars and small arrays), a function by the above, and a module or class of the
compiler, the standard library's math/operator/functools/itertools, or NumPy by its name (the
compiler's own source is in the compiler fingerprint; NumPy's version is in the key). Anything
else (an object of a user class, a module of the user's, a file or the environment read through
`os`) makes the call unkeyable: `factory_key` returns None and the runtime traces the factory
as before, keying the cache on the traced IR text (runtime/kernel.py `_lower_cached`).
"""
from __future__ import annotations

import hashlib
import sys
import types

import numpy as np

_KNOWN_MODULES = ("tilelang_mini", "math", "operator", "functools", "itertools", "numpy",
                  "builtins", "ml_dtypes")
_SMALL_ARRAY = 1 << 16  # bytes; a larger array argument is unkeyable (hashing it costs time)


_CODE_FIELDS = ("co_argcount", "co_posonlyargcount", "co_kwonlyargcount", "co_flags", "co_code",
                "co_names", "co_varnames", "co_freevars", "co_cellvars", "co_filename",
                "co_name", "co_firstlineno", "co_linetable", "co_exceptiontable")


class Unkeyable(Exception):
    """A value whose effect on the traced kernel cannot be keyed cheaply."""


def factory_key(factory, args: tuple, kwargs: dict) -> str | None:
    """sha256 of the factory's code, closures and globals it names, and the arguments; None
    when something they reach is not keyable (then the call is traced and keyed on its IR)."""
    h = hashlib.sha256(f"numpy {np.__version__}\0".encode())
    try:
        _Keyer(h).value(factory)
        _Keyer(h).value((tuple(args), sorted(kwargs.items())))
    except (Unkeyable, RecursionError, ValueError, TypeError):
        return None
    return h.hexdigest()


def _known_module(name: str) -> bool:
    return name.split(".", 1)[0] in _KNOWN_MODULES


def _names(code: types.CodeType, out: set) -> set:
    out.update(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            _names(c, out)
    return out


class _Keyer:
    def __init__(self, h):
        self.h = h
        self.seen: dict[int, int] = {}  # id of a function -> its number (recursion, sharing)

    def put(self, tag: str, data: bytes = b"") -> None:
        self.h.update(f"{tag}\0{len(data)}\0".encode())
        self.h.update(data)

    def value(self, v) -> None:
        t = type(v)
        if v is None or v is Ellipsis or t in (bool, int, float, complex, str, bytes):
            self.put(t.__name__, repr(v).encode())
        elif t in (tuple, list):
            self.put(t.__name__, str(len(v)).encode())
            for x in v:
                self.value(x)
        elif t is dict:
            self.put("dict", str(len(v)).encode())
            for k in sorted(v, key=repr):
                self.value(k)
                self.value(v[k])
        elif t in (set, frozenset):
            self.put(t.__name__, repr(sorted(map(repr, v))).encode())
        elif isinstance(v, types.FunctionType):
            self.function(v)
        elif isinstance(v, types.ModuleType):
            if not _known_module(v.__name__):
                raise Unkeyable(f"module {v.__name__}")
            self.put("module", v.__name__.encode())
        elif isinstance(v, (type, types.BuiltinFunctionType, np.ufunc)):
            mod = getattr(v, "__module__", None) or "builtins"
            if not _known_module(mod):
                raise Unkeyable(f"class {v!r}")
            self.put("global", f"{mod}.{getattr(v, '__qualname__', v.__name__)}".encode())
        elif isinstance(v, np.dtype):
            self.put("dtype", v.str.encode() + str(v).encode())
        elif isinstance(v, np.generic):
            self.put("scalar", f"{v.dtype.str}{v!r}".encode())
        elif isinstance(v, np.ndarray) and v.nbytes <= _SMALL_ARRAY:
            self.put("array", f"{v.dtype.str}{v.shape}".encode() + v.tobytes())
        elif type(v).__name__ == "Macro" and _known_module(type(v).__module__):
            self.put("macro")
            self.function(v.fn)
        elif _known_module(type(v).__module__) and hasattr(v, "__dataclass_fields__"):
            # a dataclass value of the compiler (a Tensor type, an Options): its repr
            self.put("compiler-value", f"{type(v).__qualname__}{v!r}".encode())
        else:
            raise Unkeyable(f"{type(v).__qualname__} value")

    def code(self, code: types.CodeType) -> None:
        self.put("code", repr(tuple(getattr(code, f, None) for f in _CODE_FIELDS)).encode())
        self.put("consts", str(len(code.co_consts)).encode())
        for c in code.co_consts:
            if isinstance(c, types.CodeType):
                self.code(c)
            else:
                self.value(c)

    def function(self, fn: types.FunctionType) -> None:
        n = self.seen.get(id(fn))
        if n is not None:
            self.put("ref", str(n).encode())
            return
        self.seen[id(fn)] = len(self.seen)
        mod = fn.__module__ or ""
        if _known_module(mod):  # the compiler's (its source is in the compiler fingerprint),
            self.put("function", f"{mod}.{fn.__qualname__}".encode())  # NumPy's, math's
            for cell in fn.__closure__ or ():  # a library factory made by another function
                self.value(cell.cell_contents)
            return
        self.code(fn.__code__)
        self.value(fn.__defaults__)
        self.value(fn.__kwdefaults__)
        cells = fn.__closure__ or ()
        self.put("closure", str(len(cells)).encode())
        for cell in cells:
            try:
                self.value(cell.cell_contents)
            except ValueError:  # an empty cell (a name bound later)
                self.put("empty")
        glb = fn.__globals__
        for name in sorted(_names(fn.__code__, set())):
            if name in glb:
                self.put("name", name.encode())
                self.value(glb[name])
        # the module's own file may be reloaded under the same code: its name says which
        self.put("in", f"{mod}\0{getattr(sys.modules.get(mod), '__file__', '')}".encode())
