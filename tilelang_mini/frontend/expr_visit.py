"""Expressions of a kernel body: Python AST expression -> trace-time value or IR expression.

A mixin of the KernelBuilder (frontend/parser.py): `eval` dispatches on the node type to an
`expr_*` method; names, attributes, arithmetic, comparisons, calls of T.* intrinsics and of
trace-time Python are resolved here.
"""
from __future__ import annotations

import ast
import difflib

from .. import language as T_module
from ..errors import CompileError
from ..ir import dtypes
from ..ir.nodes import Buffer, Call, Cast, Load, Var
from ..language.symbols import SymExpr
from .common import LanguageNamespace, Marker, ThreadIndex, show
from .bindings import LaneVar
from .dialect import power
from .exprs import as_expr, binop, bit_not, is_ir, plain_number, static_dtype


_BINOPS = {ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^", ast.LShift: "<<", ast.RShift: ">>",
           ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//",
           ast.Mod: "%", ast.Pow: "**"}
_CMPOPS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}
_MATH = {"exp", "exp2", "log", "sqrt", "rsqrt", "sin", "cos", "abs"}


class ExprVisitor:
    """The expression half of the KernelBuilder."""

    def is_call_to(self, node, name: str) -> bool:
        if not isinstance(node, ast.Call):
            return False
        try:
            fn = self.eval_callee(node.func)
        except CompileError:
            return False
        return isinstance(fn, Marker) and fn.name == name

    def is_statement_call(self, call: ast.Call) -> bool:
        try:
            fn = self.eval_callee(call.func)
        except CompileError:
            return False
        if isinstance(fn, Marker):
            name = fn.name
            return name.startswith(("tile.", "reduce_")) or hasattr(self, "op_" + name)
        return isinstance(fn, T_module.Macro)

    def eval_callee(self, node):
        """What a call's function evaluates to (for dispatch on T. markers and macros);
        `x.astype` is a method of a value, not a name (expr_Call converts x)."""
        if isinstance(node, ast.Attribute) and node.attr == "astype":
            return None
        return self.eval(node)

    def eval(self, node):
        method = getattr(self, "expr_" + type(node).__name__, None)
        if method is None:
            raise self.error(node, f"unsupported Python expression in a kernel: {type(node).__name__}")
        return method(node)

    def expr_Constant(self, n):
        return n.value

    def expr_Name(self, n):
        v = self.lookup(n.id, n)
        if isinstance(v, Buffer) and self.is_scalar(v):
            return Load(v, self.scalar_index(v))
        if isinstance(v, LaneVar):
            return Load(*v)
        return self.wrap(v)

    def wrap(self, v):
        if v is T_module:
            return LanguageNamespace()
        if isinstance(v, SymExpr) and all(x.name in self.symbols for x in v.symbols()):
            return v.evaluate(self.symbols)
        tl_name = getattr(v, "_tl_name", None)
        if tl_name is not None:
            return Marker(tl_name)
        return v

    def expr_Attribute(self, n):
        base = self.eval(n.value)
        if isinstance(base, LanguageNamespace):
            if n.attr in T_module.KERNEL_NAMES:
                return Marker(n.attr)
            if hasattr(T_module, n.attr) and not n.attr.startswith("_"):
                return getattr(T_module, n.attr)
            if dtypes.canonical(n.attr):
                return n.attr  # T.float16 and friends
            if n.attr in ("get_thread_binding", "thread_binding", "tvm_warp_shuffle",
                          "get_block_binding", "rng_init", "rng_rand", "rng_rand_float"):
                return Marker(n.attr)
            self.unknown_name(n.attr, n)
            close = difflib.get_close_matches(n.attr, [*T_module.__all__, *dtypes.DTYPES], n=1)
            hint = f"did you mean T.{close[0]}? " if close else ""
            raise self.error(n, f"unknown name T.{n.attr}; {hint}see docs/language.md for the "
                                "T. names")
        if isinstance(base, Buffer):
            if n.attr in ("shape", "dtype"):
                return T_module.dtype(base.dtype) if n.attr == "dtype" else base.shape
            if n.attr == "data" and base.scope == "global":
                from .views import BufferData
                return BufferData(base)  # viewed with T.Tensor(shape, dtype, buf.data)
            if n.attr in ("data", "access_ptr", "scope"):
                raise self.error(n, f".{n.attr} of a buffer is GPU pointer plumbing; pass the "
                                    "buffer or a region of it (A[i:i+n, :]) instead")
            raise self.error(n, f"buffers have .shape and .dtype, not .{n.attr}")
        if is_ir(base) and n.attr == "dtype":  # TVM's PrimExpr.dtype (helpers' asserts)
            dt = static_dtype(base)
            if dt is None:
                raise self.error(n, "the dtype of this expression is not known; T.Cast it")
            return T_module.dtype(dt)
        if is_ir(base) or isinstance(base, Marker):
            raise self.error(n, f"unsupported attribute .{n.attr}")
        try:
            return self.wrap(getattr(base, n.attr))
        except AttributeError:
            if getattr(base, "__name__", "") == "tilelang_mini.language.tile":
                plain = n.attr.removesuffix("_experiment")  # AscendC calls with a count
                close = [plain] if plain != n.attr and hasattr(base, plain) else \
                    difflib.get_close_matches(n.attr, [x for x in dir(base) if
                                                       not x.startswith("_")], n=1)
                hint = f"; write T.tile.{close[0]} on the tile or a region of it" if close \
                    else ""
                raise self.error(n, f"T.tile.{n.attr} is not supported (docs/tilelang_compat.md "
                                    f"lists the T.tile operations){hint}") from None
            raise self.error(n, f"{show(base)} has no attribute '{n.attr}'") from None

    def expr_Tuple(self, n):
        return tuple(self.eval(e) for e in n.elts)

    expr_List = expr_Tuple

    def expr_Dict(self, n):
        """A dict literal of trace-time values (`{T.float32: 4, T.float16: 2}[dtype]`)."""
        if any(k is None for k in n.keys):
            raise self.error(n, "`**` inside a dict literal is not supported in a kernel")
        return {self.eval(k): self.eval(v) for k, v in zip(n.keys, n.values)}

    def expr_BinOp(self, n):
        op = _BINOPS.get(type(n.op))
        if op is None:
            raise self.error(n, f"unsupported operator {type(n.op).__name__}")
        a, b = self.eval(n.left), self.eval(n.right)
        if op == "**":
            if isinstance(a, Buffer) or isinstance(b, Buffer):
                return self.arith("*", a, b, n)  # the buffer error
            if not is_ir(a) and not is_ir(b):
                return self.arith(op, a, b, n)
            return power(a, b)
        return self.arith(op, a, b, n)

    def arith(self, op, a, b, n):
        if isinstance(a, ThreadIndex) or isinstance(b, ThreadIndex):
            other = b if isinstance(a, ThreadIndex) else a
            if op in ("==", "!=") and type(other) is int and other == 0 \
                    and not isinstance(other, ThreadIndex):
                return op == "=="  # the one thread this machine has is thread 0
            raise self.simt_use(n)
        if (is_ir(a) or is_ir(b)) and (isinstance(a, SymExpr) or isinstance(b, SymExpr)):
            a, b = self.resolved(a, n), self.resolved(b, n)
        for v in (a, b):
            if isinstance(v, Buffer):
                raise self.error(n, f"'{v.name}' is a buffer; index it (e.g. {v.name}[i, j]) in arithmetic")
        if not is_ir(a) and not is_ir(b):
            if op == "**":
                try:
                    return a ** b
                except Exception as e:  # trace-time Python arithmetic failed
                    raise self.error(n, f"{type(e).__name__}: {e}") from None
            try:
                return binop(op, a, b)
            except Exception as e:  # trace-time Python arithmetic failed
                raise self.error(n, f"{type(e).__name__}: {e}") from None
        for v in (a, b):
            if not (is_ir(v) or isinstance(v, (int, float))):
                raise self.error(n, f"cannot use {show(v)} in kernel arithmetic")
        return binop(op, a, b)

    def expr_UnaryOp(self, n):
        v = self.eval(n.operand)
        if isinstance(n.op, ast.USub):
            return -v if not is_ir(v) else Call("neg", (v,))
        if isinstance(n.op, ast.UAdd):
            return v
        if isinstance(n.op, ast.Not):
            return (not v) if not is_ir(v) else Call("not", (v,))
        if isinstance(n.op, ast.Invert):
            return bit_not(v, self, n)
        raise self.error(n, f"unsupported operator {type(n.op).__name__}")

    def expr_Compare(self, n):
        result, left = None, self.eval(n.left)
        for op, comp in zip(n.ops, n.comparators):
            sym = _CMPOPS.get(type(op))
            right = self.eval(comp)
            if sym is None and isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)):
                if is_ir(left) or is_ir(right):  # `x is None`, `k in (1, 2)`: trace-time Python
                    raise self.error(n, f"'{type(op).__name__}' compares trace-time Python values, "
                                        "not kernel values; use == / != or T.if_then_else")
                term = {ast.Is: lambda a, b: a is b, ast.IsNot: lambda a, b: a is not b,
                        ast.In: lambda a, b: a in b,
                        ast.NotIn: lambda a, b: a not in b}[type(op)](left, right)
                if result is not None and not is_ir(result):
                    result = result and term
                else:
                    result = term if result is None else binop("and", result, term)
                left = right
                continue
            if sym is None:
                raise self.error(n, f"unsupported comparison {type(op).__name__}")
            term = self.arith(sym, left, right, n)
            result = term if result is None else binop("and", result, term)
            left = right
        return result

    def expr_GeneratorExp(self, n):
        """`sum(s // b for s in sizes)`, `[f(x) for x in xs if ...]`: Python at trace time over
        trace-time iterables (one or more `for` clauses)."""
        out = []

        def run(gens):
            if not gens:
                out.append(self.eval(n.elt))
                return
            g = gens[0]
            if getattr(g, "is_async", 0):
                raise self.error(n, "async comprehensions are not supported in a kernel")
            seq = self.eval(g.iter)
            if is_ir(seq) or not hasattr(seq, "__iter__"):
                raise self.error(g.iter, "a comprehension in a kernel iterates over a "
                                         "trace-time Python sequence")
            names = self.target_names(g.target, g.target) if not isinstance(
                g.target, ast.Name) else (g.target.id,)
            for v in seq:
                if len(names) == 1:
                    self.bind(names[0], v)
                else:
                    for name, x in zip(names, v):
                        self.bind(name, x)
                conds = [self.eval(c) for c in g.ifs]
                if any(is_ir(c) for c in conds):
                    raise self.error(g, "a comprehension's `if` must be a trace-time condition")
                if all(conds):
                    run(gens[1:])
        run(list(n.generators))
        return out

    expr_ListComp = expr_GeneratorExp

    def expr_BoolOp(self, n):
        """`a and b`, `a or b`: Python's short circuit while the value so far is a trace-time
        constant (`not guarded or n > 0` is `True` when `guarded` is False: no run-time if),
        an IR `and`/`or` once it is a run-time value."""
        op = "and" if isinstance(n.op, ast.And) else "or"
        out = self.eval(n.values[0])
        for v in n.values[1:]:
            if isinstance(out, (bool, int, float, str, type(None))):
                if (op == "and") != bool(out):
                    return out
                out = self.eval(v)
                continue
            out = binop(op, out, self.eval(v))
        return out

    def expr_Subscript(self, n):
        base = self.eval(n.value)
        if isinstance(base, Load) and self.is_scalar(base.buffer):  # x[0] of a scalar
            base = base.buffer
        if isinstance(base, Buffer):
            return Load(base, self.indices(n, base))
        from .views import TileView
        if isinstance(base, TileView):
            return self.view_load(n, base)
        from .int4 import Int4Buffer
        if isinstance(base, Int4Buffer):
            return base.load(self.int4_indices(n, base))
        if is_ir(base):
            raise self.error(n, "cannot index an expression")
        key = self.eval(n.slice)
        if isinstance(base, (list, tuple)) and any(
                is_ir(k) for k in (key if isinstance(key, tuple) else (key,))):
            kind = type(base).__name__
            raise self.error(n, f"a Python {kind} is a trace-time constant and cannot be indexed "
                                f"by a run-time value; index it with constants (`for v in "
                                f"the_{kind}:` or `for k, v in enumerate(the_{kind}):` unroll "
                                f"at trace time) or pass its values as a tensor")
        try:
            return base[key]
        except Exception as e:
            raise self.error(n, f"{type(e).__name__}: {e}") from None

    def expr_Slice(self, n):
        raise self.error(n, "slices select regions in T.copy arguments only")

    def expr_Call(self, n):
        if isinstance(n.func, ast.Attribute) and n.func.attr == "astype":
            base = self.eval(n.func.value)
            if is_ir(base) or isinstance(base, (int, float)):
                return self.astype(base, n)
        fn = self.eval(n.func)
        if isinstance(fn, Marker):
            return self.intrinsic(fn.name, n)
        if isinstance(fn, T_module.dtype):
            return self.dtype_call(fn, n)
        if fn in (max, min) and n.args and not n.keywords:
            args = [self.eval(a) for a in n.args]
            if any(is_ir(a) for a in args):
                return self.minmax(fn.__name__, args, n)
            return fn(*args)
        if fn is T_module.ceildiv:
            args = [self.eval(a) for a in n.args]
            if len(args) == 2 and any(is_ir(a) for a in args):
                return Call("ceildiv", (as_expr(args[0]), as_expr(args[1])))
        if isinstance(fn, T_module.Macro):
            return self.inline_value(fn.fn, n)
        if not callable(fn):
            raise self.error(n, f"{show(fn)} is not callable")
        args = [self.eval(a) for a in n.args]
        kwargs = {k.arg: self.eval(k.value) for k in n.keywords}
        if any(is_ir(a) or isinstance(a, Buffer) for a in [*args, *kwargs.values()]):
            if self.is_python_function(fn):  # a helper on kernel values: inlined like T.macro
                return self.inline_value(fn, n)
            raise self.error(n, f"cannot call Python function {getattr(fn, '__name__', fn)!s} on "
                                "kernel values; use T. math functions")
        try:
            return plain_number(fn(*args, **kwargs))
        except CompileError as e:  # e.g. a tilelang.cuda stub (cuda/__init__.py): here
            raise self.error(n, e.message) from None
        except Exception as e:  # a trace-time Python helper failed
            raise self.error(n, f"{type(e).__name__}: {e}") from None

    def astype(self, base, n):
        """TVM's `x.astype(dtype)` on a kernel value: T.Cast(dtype, x); on a Python number, that
        number as a value of the dtype."""
        args = [*n.args, *(k.value for k in n.keywords if k.arg == "dtype")]
        if len(args) != 1 or len(n.keywords) > 1:
            raise self.error(n, ".astype(dtype) takes one dtype")
        dt = self.dtype(self.eval(args[0]), args[0])
        if not is_ir(base):
            return self.typed_number(base, dt, n)
        return Cast(dt, base)

    def minmax(self, name, args, n):
        out = as_expr(args[0])
        for a in args[1:]:
            out = Call(name, (out, as_expr(a)))
        return out

    def intrinsic(self, name: str, n: ast.Call):
        if name == "get_thread_binding":
            args = [self.eval(a) for a in n.args] + [self.eval(k.value) for k in n.keywords]
            dim = args[0] if args else 0
            if type(dim) is not int or not 0 <= dim <= 2 or len(args) > 1:
                raise self.error(n, "T.get_thread_binding(dim) takes a dimension 0, 1 or 2")
            return ThreadIndex(dim) if self.simt is None else self.thread_index(dim)
        if name == "thread_binding":
            return self.bound_thread(n)
        if name in ("rng_rand", "rng_rand_float"):  # frontend/rng.py
            return self.rng_value(name, n)
        if name == "tvm_warp_shuffle":
            return self.warp_shuffle(n)
        if name == "get_block_binding":  # the T.Kernel's block variable of that dimension
            blocks = getattr(self, "block_names", ())
            dims = [self.eval(a) for a in n.args] + [self.eval(k.value) for k in n.keywords]
            dim = dims[0] if dims else 0
            if len(dims) > 1 or type(dim) is not int or not 0 <= dim < len(blocks):
                raise self.error(n, f"T.get_block_binding(dim) takes a dimension of the "
                                    f"enclosing T.Kernel's grid (0..{len(blocks) - 1})")
            return Var(blocks[dim])
        value = self.dialect_intrinsic(name, n)
        if value is not None:
            return value
        if name in _MATH:
            if len(n.args) != 1 or n.keywords:
                raise self.error(n, f"T.{name}(x) takes one argument")
            return Call(name, (as_expr(self.value_arg(n.args[0])),))
        if name in ("max", "min"):
            if len(n.args) < 2 or n.keywords:
                raise self.error(n, f"T.{name}(a, b) takes two arguments")
            args = [self.value_arg(a) for a in n.args]
            if not any(is_ir(a) for a in args):
                return (max if name == "max" else min)(args)
            return self.minmax(name, args, n)
        if name == "cast":
            if len(n.args) == 1 and len(n.keywords) == 1 and n.keywords[0].arg == "dtype":
                n = ast.Call(func=n.func, args=[n.args[0], n.keywords[0].value], keywords=[],
                             lineno=n.lineno, col_offset=n.col_offset)
            if len(n.args) != 2:
                raise self.error(n, "T.cast(value, dtype) takes a value and a dtype")
            v = self.value_arg(n.args[0])
            return Cast(self.dtype(self.eval(n.args[1]), n.args[1]), as_expr(v))
        if name in ("alloc_shared", "alloc_fragment", "alloc_var") or name.startswith("alloc_"):
            raise self.error(n, f"T.{name} must be assigned to a name: X = T.{name}(...)")
        if name in ("reshape", "view"):
            return self.inline_view(n)
        raise self.error(n, f"T.{name} is not a value; it cannot be used in an expression")

    def value_arg(self, node):
        v = self.resolved(self.eval(node), node)
        if isinstance(v, Buffer):
            raise self.error(node, f"'{v.name}' is a buffer; index it to use its elements")
        if not (is_ir(v) or isinstance(v, (int, float))):
            raise self.error(node, f"expected a number or an expression, got {show(v)}")
        return v
