"""TileLang's eager jit functions (a KernelBuilder part): the jit-decorated function is the kernel.

    @tilelang_mini.jit
    def add(A, B, block=64):
        M, N = T.const("M, N")            # shape symbols, bound from the tensors passed
        A: T.Tensor((M, N), T.float32)    # tensor parameters, annotated in the body (or signature)
        B: T.Tensor((M, N), T.float32)
        C = T.empty((M, N), T.float32)    # an output, created here and returned
        with T.Kernel(T.ceildiv(M, block)) as bx:
            ...
        return C

The kernel's parameters are the tensor arguments (signature order), then the outputs (return
order); every other argument is a trace-time value.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .. import language as T_module
from ..errors import CompileError
from ..ir.nodes import Buffer
from ..language.symbols import Symbol, has_symbols, resolve
from .common import Marker

if TYPE_CHECKING:  # the parser imports this module
    from .parser import PrimFunc


@dataclass
class EagerCall:
    """What one eager call binds: tensor parameters -> (shape, dtype) of the argument (None when
    compiled ahead with `f.compile(M=...)`), and the trace-time values of the other parameters."""

    tensors: dict
    scalars: dict
    inputs: list = field(default_factory=list)    # filled by the builder: input buffer names
    outputs: list = field(default_factory=list)   # output buffer names, in return order


class SymbolicPrimFunc:
    """A kernel whose tensor shapes hold `T.dynamic`/`T.symbolic` symbols: parsed once per
    distinct binding of the symbols (`specialize`), which `compile` does on each call."""

    def __init__(self, fn, symbols):
        self.fn = fn
        self.symbols = symbols
        self.__name__ = fn.__name__
        self._cache: dict = {}

    def specialize(self, values: dict) -> PrimFunc:
        key = tuple(sorted(values.items()))
        if key not in self._cache:
            from .parser import KernelBuilder, PrimFunc
            self._cache[key] = PrimFunc(self.fn, KernelBuilder(self.fn, symbols=values).build())
        return self._cache[key]

    def __repr__(self) -> str:
        # shape symbols (Symbol objects) and scalar parameters (their names)
        names = ", ".join(sorted(getattr(s, "name", s) for s in self.symbols))
        return f"<SymbolicPrimFunc {self.__name__} ({names})>"


class Eager:
    def tensor_param(self, name, ann, where, actual=None) -> Buffer:
        """The global buffer of a T.Tensor annotation; with `actual` (shape, dtype) of the
        argument, unbound shape symbols in the annotation are bound from it."""
        dims = list(ann.shape)
        if actual is not None:
            if len(actual[0]) != len(dims):
                raise self.error(where, f"'{name}' is annotated with {len(dims)} dimensions but "
                                        f"the argument has shape {tuple(actual[0])}")
            for d, n in zip(dims, actual[0]):
                if isinstance(d, Symbol) and d.name not in self.symbols:
                    self.symbols[d.name] = int(n)
        shape = []
        for s in dims:
            s = self.resolved(s, where)
            if not isinstance(s, int) or isinstance(s, bool) or s <= 0:
                raise self.error(where, f"tensor shapes must be positive constant ints, got {s!r}")
            shape.append(s)
        if actual is not None and tuple(actual[0]) != tuple(shape):
            raise self.error(where, f"'{name}' is annotated with shape {tuple(shape)} but the "
                                    f"argument has shape {tuple(actual[0])}")
        self.buffer_names.add(name)
        if ann.dtype == "int4":  # the caller passes the packed bytes (frontend/int4.py)
            return self.int4_buffer(name, name, tuple(shape), "global", where)
        dtype = self.dtype(ann.dtype, where)
        buf = Buffer(name, tuple(shape), dtype, "global")
        self.bind(name, buf)
        return buf

    def resolved(self, v, node):
        """`v` with its shape symbols evaluated; an unbound one is a located error."""
        if not has_symbols(v):
            return v
        try:
            return resolve(v, self.symbols)
        except TypeError as e:
            raise self.error(node, str(e)) from None

    def eager_signature(self, fdef: ast.FunctionDef, annotations: dict) -> tuple:
        self.eager_bufs: dict = {}
        self.eager_empty: dict = {}
        for arg in [*fdef.args.args, *fdef.args.kwonlyargs]:
            name = arg.arg
            if name in self.eager.tensors:
                ann = annotations.get(name)
                if isinstance(ann, str) and arg.annotation is not None:
                    ann = self.eval(arg.annotation)
                if isinstance(ann, T_module.TensorType):
                    self.eager_bufs[name] = self.tensor_param(name, ann, arg.annotation or arg,
                                                              self.eager.tensors[name])
            elif name in self.eager.scalars:
                self.bind(name, self.eager.scalars[name])
        return ()

    def prebind_symbols(self, body) -> None:
        """Bind the shape symbols that are whole dimensions of annotated tensor arguments
        (`x: T.Tensor((batch, seqlen, nheads, headdim), dt)`) when the first annotation is read,
        before the annotations are read in order, so that an earlier annotation may use a later one's symbols in an expression
        (mamba chunk_scan: `cb: T.Tensor((batch, T.ceildiv(seqlen, chunk_size), ...))` before
        `x` binds seqlen). An annotation that cannot be evaluated yet is left to its turn."""
        for stmt in body:
            if not (isinstance(stmt, ast.AnnAssign) and stmt.value is None and
                    isinstance(stmt.target, ast.Name) and stmt.target.id in self.eager.tensors):
                continue
            actual = self.eager.tensors[stmt.target.id]
            try:
                ann = self.eval(stmt.annotation)
            except Exception:  # noqa: BLE001 - names bound by earlier statements: later
                continue
            if not isinstance(ann, T_module.TensorType) or actual is None or \
                    len(actual[0]) != len(ann.shape):
                continue
            for d, n in zip(ann.shape, actual[0]):
                if isinstance(d, Symbol) and d.name not in self.symbols:
                    self.symbols[d.name] = int(n)

    def eager_stmt(self, stmt) -> bool:
        """Handle a statement before `with T.Kernel` that only eager functions have."""
        if isinstance(stmt, ast.AnnAssign) and stmt.value is None and \
                isinstance(stmt.target, ast.Name):
            name = stmt.target.id
            if name in self.eager.scalars and self.is_dtype(stmt.annotation):
                return True  # `M: T.int32`: a scalar parameter (a trace-time value per call)
            if name not in self.eager.tensors:
                raise self.error(stmt, f"'{name}' is not a tensor argument of this function")
            if not self.prebound:  # at the first annotation: the T.const symbols exist now
                self.prebound = True
                self.prebind_symbols(self.eager_body)
            ann = self.eval(stmt.annotation)
            if not isinstance(ann, T_module.TensorType):
                raise self.error(stmt.annotation, "expected a T.Tensor(shape, dtype) annotation")
            self.eager_bufs[name] = self.tensor_param(name, ann, stmt.annotation,
                                                      self.eager.tensors[name])
            return True
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and \
                isinstance(stmt.targets[0], ast.Name) and isinstance(stmt.value, ast.Call):
            fn = self.eval_callee(stmt.value.func)
            if isinstance(fn, Marker) and fn.name == "empty":
                self.eager_output(stmt.targets[0].id, stmt.value)
                return True
        return False

    def is_dtype(self, node) -> bool:
        """Whether an annotation names a dtype (T.int32, "float32", ...)."""
        try:
            self.dtype(self.eval(node), node)
        except CompileError:
            return False
        return True

    def eager_output(self, name: str, call: ast.Call) -> None:
        args = [self.eval(a) for a in call.args]
        kw = {k.arg: self.eval(k.value) for k in call.keywords}
        shape = kw.pop("shape", args[0] if args else None)
        dtype = kw.pop("dtype", args[1] if len(args) > 1 else "float32")
        shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
        shape = tuple(self.resolved(d, call) for d in shape)
        for d in shape:
            if not isinstance(d, int) or isinstance(d, bool) or d <= 0:
                raise self.error(call, f"T.empty shapes must be positive ints, got {d!r}")
        self.buffer_names.add(name)
        buf = Buffer(name, shape, self.dtype(dtype, call), "global")
        self.eager_empty[name] = buf
        self.bind(name, buf)

    def eager_params(self, returned, fdef) -> tuple:
        inputs = []
        for name in self.eager.tensors:
            if name not in self.eager_bufs:
                raise self.error(fdef, f"tensor argument '{name}' needs an annotation: "
                                       f"`{name}: T.Tensor((M, N), dtype)`")
            inputs.append(self.eager_bufs[name])
        outputs = []
        if returned is not None and returned.value is not None:
            value = self.eval(returned.value)
            values = value if isinstance(value, tuple) else (value,)
            for v in values:
                if not isinstance(v, Buffer) or v.name not in self.eager_empty:
                    raise self.error(returned, "an eager @jit function returns the T.empty "
                                               "tensors it created")
                outputs.append(v)
        for name, buf in self.eager_empty.items():
            if buf not in outputs:
                raise self.error(fdef, f"T.empty tensor '{name}' is not returned")
        self.eager.inputs = [b.name for b in inputs]
        self.eager.outputs = [b.name for b in outputs]
        return tuple(inputs + outputs)
