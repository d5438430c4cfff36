"""Python AST of a `@T.prim_func` -> Tile IR `Kernel`.

The function's source is parsed, not traced. Python values (closure variables, constants,
arithmetic on them, loops over Python lists) are evaluated at trace time; everything that depends
on grid or loop variables becomes IR. Any construct not handled here is a located CompileError.
"""
from __future__ import annotations

import ast
import builtins
import inspect
import math
import textwrap

from .. import language as T_module
from ..errors import CompileError
from ..ir import dtypes
from ..ir.nodes import Alloc, Buffer, Kernel, Load, Loc, Scope, Store, Var
from ..language.symbols import SymExpr
from .common import Marker, ThreadIndex, is_docstring, show
from .dialect import Dialect
from .eager import Eager, SymbolicPrimFunc
from .expr_visit import _BINOPS, ExprVisitor
from .exprs import as_expr, binop, is_ir, plain_number
from .tile_ops import TileOps
from .tile_ascend import TileAscend
from .atomic import Atomics
from .control import ControlFlow
from .views import Views
from .int4 import Int4Buffer, Int4s
from .rng import Rng
from .gemm_sp import GemmSparse
from .sync_all import scalars_per_core, split_launch
from .simt import Simt
from .safe_access import guard_global
from .reducer import Reducers
from .bindings import Bindings, Capture, LaneVar, StaleValue, vector_flags_without_scopes


_ALLOC_SCOPES = {"alloc_shared": "shared", "alloc_fragment": "fragment", "alloc_var": "var",
                 "alloc_L1": "L1", "alloc_L0A": "L0A", "alloc_L0B": "L0B", "alloc_L0C": "L0C",
                 "alloc_ub": "UB", "alloc_UB": "UB", "alloc_local": "fragment"}


class Launches:
    """The kernels of a prim_func with several `with T.Kernel` blocks: launched in order over
    the same parameters, each on its own grid (`compile` gives a LaunchSequence)."""

    def __init__(self, kernels: tuple, hidden: tuple = ()):
        self.kernels = kernels
        self.hidden = hidden  # views.Hidden: T.alloc_global buffers and GM views (last params)

    def __getattr__(self, name):  # name, params, loc: those of the first launch
        if name in ("name", "params", "loc"):
            return getattr(self.kernels[0], name)
        raise AttributeError(name)

    def __eq__(self, other):
        return (isinstance(other, Launches) and self.kernels == other.kernels
                and self.hidden == other.hidden)

    def __hash__(self):
        return hash(self.kernels)


class PrimFunc:
    """A parsed kernel: its Tile IR (`.ir`: a Kernel, or Launches for several T.Kernel
    blocks) and the Python function it came from."""

    def __init__(self, fn, ir):
        self.fn = fn
        self.ir = ir
        self.__name__ = ir.name

    @property
    def launches(self) -> tuple:
        return self.ir.kernels if isinstance(self.ir, Launches) else (self.ir,)

    @property
    def hidden(self) -> tuple:
        return self.ir.hidden if isinstance(self.ir, Launches) else ()

    def script(self) -> str:
        from ..ir.printer import print_ir
        return "\n".join(print_ir(k) for k in self.launches)

    def __repr__(self) -> str:
        return f"<PrimFunc {self.ir.name}>"


def is_scalar_param(ann) -> bool:
    """A scalar kernel parameter's annotation: a dtype (`n: T.int32`, `x: T.float32`)."""
    return isinstance(ann, T_module.dtype) and not isinstance(ann, T_module.TensorType)


def parse_prim_func(fn):
    symbols = set()
    for name, ann in getattr(fn, "__annotations__", {}).items():
        if isinstance(ann, T_module.TensorType):
            for d in ann.shape:
                if isinstance(d, SymExpr):
                    symbols |= d.symbols()
        elif is_scalar_param(ann):  # `n: T.int32`: specialised per value, like a shape symbol
            symbols.add(name)
    if symbols:
        return SymbolicPrimFunc(fn, symbols)
    builder = KernelBuilder(fn)
    try:
        return PrimFunc(fn, builder.build())
    except RecursionError as err:  # the innermost statement that was being read says where
        where = getattr(err, "tlm_where", None) or (builder.loc(builder.tree.body[0]), None)
        raise CompileError("the kernel nests too deeply to read (an expression or T.macro "
                           "calls hundreds of levels deep); split the expression with "
                           "intermediate variables", *where) from None


def _source(fn, file: str):
    """(lines, first line number, ast.Module) of `fn`'s definition, decorators included.

    The block is read straight from the file's lines (from the code object's first line to the
    last line indented deeper than it): `inspect.getsourcelines` tokenizes the whole block and
    compiles tokenize's regular expressions first, tens of milliseconds in a fresh process,
    which a compile that hits the disk cache cannot afford. Anything unusual (a line of a
    multi-line string at a smaller indent) falls back to `inspect`."""
    import linecache
    all_lines = linecache.getlines(file, fn.__globals__)
    first = fn.__code__.co_firstlineno
    if 0 < first <= len(all_lines):
        head = all_lines[first - 1]
        indent = len(head) - len(head.lstrip())
        end = first
        while head.lstrip().startswith("@") and end < len(all_lines):  # decorators: to the def
            head = all_lines[end]
            end += 1
        while end < len(all_lines):
            line = all_lines[end]
            if line.strip() and len(line) - len(line.lstrip()) <= indent \
                    and not line.lstrip().startswith((")", "]", "}")):
                break
            end += 1
        lines = all_lines[first - 1:end]
        try:
            tree = ast.parse(textwrap.dedent("".join(lines)))
        except SyntaxError:
            tree = None
        if tree is not None and len(tree.body) == 1 and isinstance(
                tree.body[0], (ast.FunctionDef, ast.AsyncFunctionDef)) \
                and tree.body[0].name == fn.__code__.co_name:
            return lines, first, tree
    try:
        lines, first = inspect.getsourcelines(fn)
    except (OSError, TypeError):
        raise CompileError(f"cannot read the source of {getattr(fn, '__name__', fn)!s}: "
                           "kernels are parsed from their source, so define them in a "
                           "file (not in an interactive prompt or exec string)") from None
    return lines, first, ast.parse(textwrap.dedent("".join(lines)))


class KernelBuilder(ExprVisitor, ControlFlow, TileOps, Dialect, TileAscend, Eager, Atomics, Views,
                    Bindings, GemmSparse, Simt, Int4s, Rng, Reducers):
    def __init__(self, fn, file: str | None = None, symbols: dict | None = None, eager=None):
        self.fn = fn
        self.file = file or inspect.getsourcefile(fn) or "<unknown>"
        lines, first, self.tree = _source(fn, self.file)
        src = "".join(lines)
        self.col_offset = len(lines[0]) - len(lines[0].lstrip()) if lines else 0
        self.line_offset = first - 1
        self.source_lines = src.splitlines()
        self.globals = fn.__globals__
        closure = {}
        if fn.__closure__:
            for name, cell in zip(fn.__code__.co_freevars, fn.__closure__):
                try:
                    closure[name] = plain_number(cell.cell_contents)
                except ValueError:
                    pass
        self.scopes: list[dict] = [closure, {}]
        self.buffer_names: set[str] = set()
        self.symbols: dict = dict(symbols or {})  # shape symbol name -> int
        self.eager = eager  # an EagerCall when the function is a TileLang eager jit function
        self.parallel_depth = 0
        self.parallel_loops: list = []  # (IR names, extents) of the open T.Parallel loops
        self.parallel_outer: list = []  # for each: the open_bodies index of its enclosing list
        self.loop_names: list = []  # IR names of the enclosing loops' variables
        self.while_marks: list = []  # (scope depth, names carried) of open run-time whiles
        self.open_bodies: list[list] = []  # statement lists being built (innermost last)
        self.captures: dict = {}  # (id(scope), name) -> Capture
        self.n_fresh = 0
        self.hints: list[str] = []  # GPU hints accepted (Kernel.hints)
        self.var_ranges: dict[str, tuple[int, int]] = {}  # block/loop variable -> (lo, hi) known
        self.reducers: dict[str, str] = {}  # T.alloc_reducer buffer name -> "sum"/"max"/"min"

    # ----------------------------------------------------------------------------------- errors

    def loc(self, node) -> Loc:
        line = getattr(node, "lineno", 1) + self.line_offset
        col = getattr(node, "col_offset", 0) + self.col_offset + 1
        return Loc(self.file, line, col)

    def error(self, node, message: str) -> CompileError:
        loc = self.loc(node)
        idx = loc.line - self.line_offset - 1
        line = self.source_lines[idx] if 0 <= idx < len(self.source_lines) else None
        return CompileError(message, loc, line)

    # ------------------------------------------------------------------------------- environment

    def lookup(self, name: str, node):
        for scope in reversed(self.scopes):
            if name in scope:
                value = scope[name]
                if isinstance(value, StaleValue):
                    if value.capture is not None:  # the first use after the write
                        load = self.captured(scope, name, value.capture)
                        if load is not None:
                            scope[name] = load
                            return load
                    raise self.error(node, value.message(name))
                cap = self.captures.get((id(scope), name))
                if cap is not None and cap.value is value and len(self.open_bodies) > cap.depth:
                    cap.nested_use = True
                return value
        if name in self.globals:
            return plain_number(self.globals[name])
        if hasattr(builtins, name):
            return getattr(builtins, name)
        raise self.error(node, f"name '{name}' is not defined")

    def bind(self, name: str, value) -> None:
        if self.while_marks:
            self.note_rebinding(name, value)  # control.py
        self.scopes[-1][name] = value

    def fresh_buffer_name(self, name: str) -> str:
        base, n = name, 0
        while name in self.buffer_names:
            n += 1
            name = f"{base}_{n}"
        self.buffer_names.add(name)
        return name

    # ------------------------------------------------------------------------------------ kernel

    def build(self) -> Kernel:
        fdef = self.tree.body[0]
        if not isinstance(fdef, ast.FunctionDef):
            raise self.error(fdef, "T.prim_func decorates a function definition")
        params = self.params(fdef)
        body = [s for s in fdef.body if not is_docstring(s)]
        launches, returned = [], None  # several `with T.Kernel` blocks: launches run in order
        self.eager_body, self.prebound = body, False
        for stmt in body:
            if isinstance(stmt, ast.With) and self.is_call_to(stmt.items[0].context_expr, "Kernel"):
                self.hints = []
                grid, names, is_npu, block = self.traced_block(stmt)
                for part in split_launch(scalars_per_core(block),  # sync_all.py
                                         self.kept_tiles(grid, names) if is_npu else None):
                    launches.append(((grid, names, is_npu, part), self.hints, stmt))
            elif not launches and self.eager is not None and self.eager_stmt(stmt):
                pass  # T.empty outputs, tensor annotations of an eager jit function
            elif launches and isinstance(stmt, ast.Return) and self.eager:
                returned = stmt
            elif returned is None and isinstance(stmt, (
                    ast.Assign, ast.AugAssign, ast.If, ast.Assert, ast.For, ast.Expr,
                    ast.AnnAssign, ast.Pass)):
                if self.stmt(stmt):  # trace-time set-up before (or between) the kernel blocks
                    raise self.error(stmt, "expected the kernel body inside `with T.Kernel(...) "
                                           "as ...:` (only trace-time Python comes outside it)")
            else:
                if isinstance(stmt, ast.With) and isinstance(stmt.items[0].context_expr, ast.Call):
                    self.eval_callee(stmt.items[0].context_expr.func)  # T.ClusterKernel: its error
                raise self.error(stmt, "expected the kernel body inside `with T.Kernel(...) as ...:`")
        if not launches:
            raise self.error(fdef, "expected a `with T.Kernel(grid...) as (bx, ...):` block")
        if self.eager is not None:
            params = self.eager_params(returned, fdef)
        hidden = tuple(self.hidden_list())
        params = tuple(params) + tuple(h.buffer for h in hidden)
        kernels = tuple(
            Kernel(fdef.name if i == 0 else f"{fdef.name}_{i}", params, grid, names,
                   tuple(body_ir), is_npu, self.loc(fdef if i == 0 else stmt), tuple(hints))
            for i, ((grid, names, is_npu, body_ir), hints, stmt) in enumerate(launches))
        return kernels[0] if len(kernels) == 1 and not hidden else Launches(kernels, hidden)

    def params(self, fdef: ast.FunctionDef) -> tuple[Buffer, ...]:
        annotations = getattr(self.fn, "__annotations__", {})
        out = []
        if self.eager is not None:
            return self.eager_signature(fdef, annotations)
        for arg in fdef.args.args:
            ann = annotations.get(arg.arg)
            if isinstance(ann, str) and arg.annotation is not None:
                # `from __future__ import annotations`: evaluate the source in the kernel's scope
                ann = self.eval(arg.annotation)
            if is_scalar_param(ann):
                out.append(self.scalar_param(arg.arg, ann, arg.annotation or arg))
                continue
            if not isinstance(ann, T_module.TensorType):
                raise self.error(arg, f"parameter '{arg.arg}' needs a T.Tensor(shape, dtype) "
                                      "annotation (or a scalar dtype: `n: T.int32`)")
            out.append(self.tensor_param(arg.arg, ann, arg.annotation or arg))
        if fdef.args.vararg or fdef.args.kwarg or fdef.args.kwonlyargs:
            raise self.error(fdef, "kernel parameters are plain positional T.Tensor arguments")
        return tuple(out)

    def scalar_param(self, name: str, ann, where) -> Buffer:
        """TileLang's scalar kernel argument `n: T.int32` (a varlen maximum length, a batch
        count, a float coefficient). The kernel is specialised per value, as for a `T.dynamic`
        shape symbol (parse_prim_func makes it a SymbolicPrimFunc; runtime/eager.py's
        SymbolicKernel binds the value from the call), so in the body `n` is that Python number
        (a grid extent, a loop bound, a trace-time `if`). The parameter stays in its place (the
        positions of `out_idx` count it) as a one-element tensor the caller passes the number
        for; the kernel does not read it. Without a value (not specialised) the name reads
        that element at run time."""
        dtype = self.dtype(ann, where)
        self.buffer_names.add(name)
        buf = Buffer(name, (1,), dtype, "global")
        if name in self.symbols:
            v = self.symbols[name]
            self.bind(name, plain_number(float(v) if dtypes.is_float(dtype) else int(v)))
        else:
            self.bind(name, Load(buf, (as_expr(0),)))
        return buf

    def dtype(self, value, node) -> str:
        if isinstance(value, str) and value == "ptr":  # T.ptr: tables of device pointers
            raise self.gpu_only("ptr", node)
        name = dtypes.canonical(value)
        if name is None:
            raise self.error(node, f"unsupported dtype {value!r}; expected one of "
                                   f"{', '.join(dtypes.DTYPES[:-1])}")
        return name

    def kernel_block(self, stmt: ast.With):
        call = stmt.items[0].context_expr
        self.trace_ranges(stmt.items[1:])
        is_npu = self.kwarg_bool(call, "is_npu", False)
        for kw in call.keywords:
            if kw.arg not in ("is_npu", "threads", "prelude", "is_cpu"):
                raise self.error(kw, f"T.Kernel has no argument '{kw.arg}'")
        self.record_hint(call, [k for k in call.keywords if k.arg in ("threads", "prelude")])
        threads = next((self.resolved(self.eval(k.value), k.value) for k in call.keywords
                        if k.arg == "threads"), 128)  # TileLang's default block size
        self.gpu_threads = threads if isinstance(threads, int) and threads > 0 else None
        self.start_threads(call)
        grid = []
        for a in call.args:
            v = self.resolved(self.eval(a), a)
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise self.error(a, f"grid extents must be positive constant ints, got {show(v)}")
            grid.append(v)
        grid = grid or [1]  # T.Kernel(): one block
        if not 1 <= len(grid) <= 3:
            raise self.error(call, "T.Kernel takes a 1-3 D grid")
        if is_npu and len(grid) != 1:
            raise self.error(call, "T.Kernel(n, is_npu=True) takes one block count")
        names = self.target_names(stmt.items[0].optional_vars, stmt) if is_npu or stmt.items[
            0].optional_vars else tuple(self.fresh_var("b") for _ in grid)  # no `as`: unused
        if is_npu and len(names) == 1:  # tilelang-ascend's `as (cid)` (threads=2): vid is implicit
            names = (names[0], self.fresh_var("vid"))
        want = 2 if is_npu else len(grid)
        if len(names) != want:
            what = "(cid, vid)" if is_npu else f"{want} block variables"
            raise self.error(stmt, f"`as` must name {what}, got {len(names)}")
        vector_only = is_npu and vector_flags_without_scopes(stmt)
        self.block_names = names if not is_npu else names[:1]  # T.get_block_binding(d)
        self.scopes.append({n: Var(n) for n in names})
        self.var_ranges.update({n: (0, g - 1) for n, g in zip(names, grid)})
        if is_npu:
            self.var_ranges[names[1]] = (0, 1)  # the vector core of the cluster
        self.hoisted_allocs, self.implied_flags = {}, []
        self.launch_depth = len(self.open_bodies) + 1  # the body's own statement list
        if vector_only:  # its own flags, no T.Scope, no cube work: the AIV's program
            self.scope_core = "V"
        try:
            body = self.without_implied_flags(self.body(stmt.body))
            if self.simt is not None:  # values kept at their bindings (Capture) in the body
                body = self.thread_maps(body, stmt)
        finally:
            if vector_only:
                self.scope_core = None
        if vector_only:
            body = [Scope("V", tuple(body), self.loc(stmt))]
        self.scopes.pop()
        return tuple(grid), names, is_npu, list(self.hoisted_allocs.values()) + body

    def fresh_var(self, base: str) -> str:
        self.n_fresh += 1
        return f"{base}_{self.n_fresh}"

    def target_names(self, target, node) -> tuple[str, ...]:
        if target is None:
            raise self.error(node, "expected `as name` or `as (names...)`")
        elts = target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]
        if not all(isinstance(e, ast.Name) for e in elts):
            raise self.error(target, "expected plain names")
        return tuple(e.id for e in elts)

    # -------------------------------------------------------------------------------- statements

    def body(self, stmts) -> list:
        out = []
        self.open_bodies.append(out)
        try:
            for s in stmts:
                out.extend(self.stmt(s))
                if getattr(self, "returned", False):  # an inlined helper returned (trace time)
                    break
        finally:
            self.open_bodies.pop()
        return [Store(x.buffer, x.indices, as_expr(x.bound), x.loc)
                if isinstance(x, Capture) else x
                for x in out if not isinstance(x, Capture) or x.buffer is not None]

    def flat_body(self, stmts) -> list:
        """The statements of a trace-time `if` branch, added to the enclosing statement list
        (their names stay bound there, so a later write can still keep their values)."""
        if not self.open_bodies:
            return self.body(stmts)
        out = self.open_bodies[-1]
        for s in stmts:
            out.extend(self.stmt(s))
            if getattr(self, "returned", False):
                break
        return []

    def stmt(self, s) -> list:
        method = getattr(self, "stmt_" + type(s).__name__, None)
        if method is None:
            raise self.error(s, f"unsupported Python construct in a kernel: {type(s).__name__}")
        try:
            out = method(s)
            if out:
                self.stale_reads_of(out, s)
                if self.simt is not None and not self.parallel_depth:
                    out = self.thread_maps(out, s)
            return out
        except RecursionError as err:  # reported by parse_prim_func at the innermost statement
            if getattr(err, "tlm_where", None) is None:
                try:
                    loc = self.loc(s)
                    idx = loc.line - self.line_offset - 1
                    line = self.source_lines[idx] if 0 <= idx < len(self.source_lines) else None
                    err.tlm_where = (loc, line)
                except RecursionError:  # too close to the limit here: an outer statement says
                    pass
            raise

    def stmt_Pass(self, s):
        return []

    def stmt_Expr(self, s):
        if is_docstring(s):
            return []
        if not isinstance(s.value, ast.Call):
            raise self.error(s, "this expression has no effect; expected a call of a T. operation")
        return self.call_stmt(s.value)

    def stmt_Assign(self, s):
        return self.assign(s)

    def assign(self, s):
        if len(s.targets) != 1:  # `a = b = 16`: the value once, bound to each name
            if not all(isinstance(t, (ast.Name, ast.Tuple, ast.List)) for t in s.targets) or (
                    isinstance(s.value, ast.Call) and isinstance(
                        self.eval_callee(s.value.func), (Marker, T_module.Macro))):
                raise self.error(s, "chained assignment (`a = b = value`) binds names to a "
                                    "value; write one assignment per tile or buffer")
            value = self.eval(s.value)
            return [st for t in s.targets for st in self.bind_value(t, value, s)]
        target = s.targets[0]
        if isinstance(target, (ast.Tuple, ast.List)) and (split := self.alloc_tuple(s)) is not None:
            return split
        if isinstance(target, ast.Name) and isinstance(s.value, ast.Call):
            fn = self.eval_callee(s.value.func)
            if isinstance(fn, Marker) and fn.name == "alloc_reducer":
                return self.alloc_reducer(target.id, s.value)
            if isinstance(fn, Marker) and fn.name in _ALLOC_SCOPES:
                out = self.alloc(target.id, fn.name, s.value)
                return out if isinstance(out, list) else [out]
            if isinstance(fn, Marker) and fn.name in ("alloc_global", "alloc_buffer"):
                return self.alloc_global(target.id, s.value)
            if isinstance(fn, Marker) and fn.name in ("reshape", "view"):
                return self.reshape_call(target.id, s.value)
            if isinstance(fn, Marker) and fn.name == "empty":
                raise self.error(s.value, "T.empty creates the outputs of an eager @jit function "
                                          "(before `with T.Kernel`); inside a kernel allocate "
                                          "tiles with T.alloc_shared/T.alloc_fragment")
        if isinstance(target, ast.Subscript):
            return self.store(target, self.stored_value(s.value), s)
        stmts = []
        if isinstance(s.value, ast.Call) and isinstance(self.eval_callee(s.value.func), T_module.Macro):
            stmts, value = self.assign_macro(s.value)  # its tiles, or a trace-time value
        else:
            value = self.eval(s.value)
        if isinstance(target, ast.Name) and not self.is_tiles(value):
            current = self.try_lookup(target.id)
            if isinstance(value, ThreadIndex) and (isinstance(current, LaneVar) or (
                    isinstance(current, Buffer) and self.is_scalar(current))):
                raise self.simt_use(s.value)  # `s = tx` into a scalar: per-thread code
            if isinstance(current, Buffer) and self.is_scalar(current):
                return stmts + [Store(current, self.scalar_index(current), as_expr(value),
                                      self.loc(s))]
            if isinstance(current, LaneVar):
                return stmts + [Store(*current, as_expr(value), self.loc(s))]
        return stmts + self.bind_value(target, value, s)

    def bind_value(self, target, value, s) -> list:
        """Bind the name(s) of an assignment's target to a trace-time value."""
        if isinstance(target, ast.Name):
            view = self.view_assign(target.id, value, s.value)
            if view is not None:
                return view
            self.bind(target.id, value)
            if is_ir(value) and not isinstance(value, Buffer):
                self.note_binding(target.id, value, self.loc(s))
            return []
        if isinstance(target, (ast.Tuple, ast.List)):
            if is_ir(value) or not isinstance(value, (tuple, list)) or len(value) != len(target.elts):
                raise self.error(s, "tuple assignment needs a trace-time tuple of the same length")
            for t, v in zip(target.elts, value):
                if not isinstance(t, ast.Name):
                    raise self.error(t, "expected a plain name")
                self.bind(t.id, v)
            return []
        raise self.error(target, "unsupported assignment target")

    def stmt_AugAssign(self, s):
        op = _BINOPS.get(type(s.op))
        if op is None:
            raise self.error(s, f"unsupported operator {type(s.op).__name__}")
        if isinstance(s.target, ast.Subscript):
            old = self.eval(s.target)
            return self.store(s.target, binop(op, old, self.eval(s.value)), s)
        if isinstance(s.target, ast.Name):
            current = self.lookup(s.target.id, s.target)
            if isinstance(current, Buffer) and self.is_scalar(current):
                idx = self.scalar_index(current)
                value = binop(op, Load(current, idx), self.eval(s.value))
                return [Store(current, idx, as_expr(value), self.loc(s))]
            if isinstance(current, LaneVar):
                return [Store(*current, as_expr(binop(op, Load(*current), self.eval(s.value))),
                              self.loc(s))]
            self.bind(s.target.id, binop(op, current, self.eval(s.value)))
            return []
        raise self.error(s.target, "unsupported assignment target")

    def try_lookup(self, name):
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return None

    def store(self, target: ast.Subscript, value, node) -> list:
        buf = self.eval(target.value)
        from .views import TileView
        if isinstance(buf, TileView):
            return self.view_store(target, buf, value, node)
        if isinstance(buf, Int4Buffer):
            return self.int4_store(target, buf, value, node)
        if isinstance(buf, Load) and self.is_scalar(buf.buffer):  # x[0] = v on a scalar
            buf = buf.buffer
        if not isinstance(buf, Buffer):
            raise self.error(target, "only buffers can be assigned element-wise")
        idx = self.indices(target, buf)
        st = Store(buf, idx, as_expr(value), self.loc(node))
        return [guard_global(st, self.var_ranges) if self.parallel_depth else st]

    def indices(self, sub: ast.Subscript, buf: Buffer) -> tuple:
        nodes = sub.slice.elts if isinstance(sub.slice, ast.Tuple) else [sub.slice]
        if any(isinstance(n, ast.Slice) for n in nodes):
            raise self.error(sub, "slices select regions for T.copy; use indices here")
        idx = tuple(self.eval(n) for n in nodes)
        rank = len(buf.shape) - self.per_thread_dims(buf)
        if len(idx) != rank:
            raise self.error(sub, f"'{buf.name}' has {rank} dimensions, got {len(idx)} indices")
        for n, i in zip(nodes, idx):
            if isinstance(i, ThreadIndex):
                raise self.simt_use(n)
            if not (is_ir(i) or (isinstance(i, int) and not isinstance(i, bool))):
                raise self.error(n, f"an index must be an integer expression, got {show(i)}")
        return self.own_row(buf, tuple(as_expr(i) for i in idx))

    def alloc(self, name: str, kind: str, call: ast.Call) -> Alloc:
        scope = _ALLOC_SCOPES[kind]
        args = [self.eval(a) for a in call.args]
        kw = {k.arg: self.eval(k.value) for k in call.keywords}
        # TileLang's memory-scope strings ("shared.dyn", "local.var"), by keyword or third
        # positional argument: T.alloc_fragment((1,), T.int32, "local")
        mem = kw.pop("scope", None)
        if scope != "var" and len(args) == 3 and isinstance(args[2], str):
            mem = args.pop()
        init = None
        if scope == "var":
            init = kw.pop("init", args.pop(1) if len(args) == 2 else None)
            if "dtype" in kw:
                args.append(kw.pop("dtype"))
            if len(args) != 1 or kw:
                raise self.error(call, "T.alloc_var(dtype, init=value) takes one dtype")
            shape, dtype = (1,), args[0]
        else:
            if "shape" in kw:
                args.insert(0, kw.pop("shape"))
            if "dtype" in kw:
                args.append(kw.pop("dtype"))
            if len(args) != 2 or kw:
                raise self.error(call, f"T.{kind}(shape, dtype) takes a shape and a dtype")
            shape, dtype = args
            shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
            shape = tuple(self.resolved(d, call) for d in shape)
            for s in shape:
                if not isinstance(s, int) or isinstance(s, bool) or s <= 0:
                    raise self.error(call.args[0] if call.args else call,
                                     f"tile shapes must be positive constant ints, got {show(s)}")
        int4 = dtype == "int4" and scope != "var"
        dt = "int4x2" if int4 else self.dtype(dtype, call.args[-1] if call.args else call)
        if mem in ("local", "local.var") and math.prod(shape) == 1 and scope in (
                "shared", "fragment"):
            # one per-thread register: a scalar (alloc_var), which every core that reads it
            # (the cube, for a loop bound or an if around a gemm) computes itself
            scope = "var"
        if scope in ("shared", "fragment"):
            scope = self.expert_home(name, scope) or scope
        if scope == "var" and self.parallel_depth:
            return self.lane_var(name, dt, init, call)
        unique = self.fresh_buffer_name(name)
        if int4:
            return Alloc(self.int4_buffer(name, unique, tuple(shape), scope, call), None,
                         self.loc(call))
        shape, scope = self.per_thread_alloc(unique, kind, tuple(shape), scope)
        buf = Buffer(unique, shape, dt, scope)
        self.bind(name, buf)
        alloc = Alloc(buf, None, self.loc(call))
        if init is None:
            return alloc
        if not (is_ir(init) or isinstance(init, (int, float))):
            raise self.error(call, f"init must be a number or an expression, got {show(init)}")
        return [alloc, Store(buf, self.scalar_index(buf), as_expr(init), self.loc(call))]

    def stmt_With(self, s):
        call = s.items[0].context_expr
        if self.is_call_to(call, "Scope"):
            args = [self.eval(a) for a in call.args]
            if len(args) != 1 or args[0] not in ("C", "V"):
                raise self.error(call, 'T.Scope takes "C" (cube core) or "V" (vector cores)')
            self.scopes.append({})
            self.scope_core = args[0]
            try:
                body = self.body(s.body)
            finally:
                self.scope_core = None
            self.scopes.pop()
            return [Scope(args[0], tuple(body), self.loc(s))]
        if self.is_call_to(call, "If"):
            return self.stmt_If(self.if_then_else_blocks(s, call))
        if self.is_trace_range(call):
            return self.trace_range_body(s)
        if self.is_call_to(call, "Kernel"):
            raise self.error(s, "`with T.Kernel(...)` inside a T.macro is not supported yet; write "
                                "it in the kernel function and call the macro inside it"
                             if getattr(self, "macro_depth", 0) else
                             "`with T.Kernel(...)` nested in an `if`, a loop or another block is "
                             "not supported yet; launch at the kernel function's top level (a "
                             "trace-time `if` may choose inside the launch)")
        if self.named_call(call, "attr"):  # TVM's cross-thread reduction block (simt.py)
            return self.thread_allreduce(s)
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute):
            self.unknown_name(call.func.attr, call)  # `with T.ws(0):`: GPU-only, named
        raise self.error(s, "expected `with T.Kernel(...)` or `with T.Scope(...)`")

    def stmt_Return(self, s):
        if getattr(self, "inline_result", None) is not None:
            if getattr(self, "runtime_if_depth", 0):
                raise self.error(s, "`return` inside an `if` on kernel values; return after it")
            self.returned, self.return_node = True, s
            if isinstance(s.value, ast.Call) and self.is_statement_call(s.value):
                return self.call_stmt(s.value)  # `return T.tile.cast(...)` in a helper
            self.inline_result.append(self.eval(s.value) if s.value is not None else None)
            return []
        raise self.error(s, "a kernel writes its outputs to parameters; `return` is not supported")
