"""The upstream dialect's expressions and statements (a KernelBuilder part): TileLang's math and
select functions, dtype constructors, loop spellings, GPU hints and GPU-only errors.

New functions are spelled with the IR's operations where they have an exact or float32-accurate
form, so that every backend runs them the same way:

    T.if_then_else(c, a, b)  -> select(c, a, b)         (loads in a or b read clamped indices
                                                         where the loop ranges do not bound them)
    T.clamp(x, lo, hi)       -> min(max(x, lo), hi)
    T.sigmoid(x)             -> 1.0 / (1.0 + exp(-x))
    T.log2(x)                -> log(x) * 1.4426950408889634
    T.erf(x)                 -> Abramowitz-Stegun 7.1.26 (|error| < 1.5e-7) with the sign by select
    T.truncdiv(a, b)         -> select(a % b != 0 and signs differ, a // b + 1, a // b)
    T.round(x), T.trunc(x)   -> trunc(x) = select(x < 0, -(-x // 1.0), x // 1.0), then
                                round(x) = trunc(x) +- 1 where |x - trunc(x)| >= 0.5;
                                nearbyint: an odd away-rounded tie goes back to trunc(x)
    T.isnan(x), T.isinf(x)   -> x != x, abs(x) == inf
    T.float32(x), T.Cast(dtype, x) -> cast(x, "float32")
"""
from __future__ import annotations

import ast
import math
from dataclasses import replace

from .. import language as T_module
from ..ir import dtypes
from ..ir.nodes import (BIT_BINARY_FNS, BinOp, Call, Cast, Const, Fill, For, If, Load, Region, Store,
                        Var, walk)
from ..language.hints import (GPU_ONLY, GPU_ONLY_PREFIXES, HINT_NAMES, MULTI_DEVICE_PREFIXES, NOT_YET,
                              TRACE_EVENTS)
from .atomic import ParallelAtomic
from .common import Marker, show
from ..ir.analysis import interval
from .exprs import BIT_SYMBOLS, as_expr, binop, bit_not, const, is_ir, reinterpret, static_dtype

_LN2_INV = 1.0 / math.log(2.0)
_LN10_INV = 1.0 / math.log(10.0)


def _f(v):
    return Const(float(v), "float32")


def _call(fn, *args):
    return Call(fn, tuple(as_expr(a) for a in args))


def sigmoid(x):
    return binop("/", 1.0, binop("+", 1.0, _call("exp", _call("neg", x))))


def tanh(x):
    # 1 - 2 / (exp(2x) + 1): exact limits at +-inf, no cancellation for large |x|
    return binop("-", 1.0, binop("/", 2.0, binop("+", _call("exp", binop("*", 2.0, x)), 1.0)))


def erf(x):
    ax = _call("abs", x)
    t = binop("/", 1.0, binop("+", 1.0, binop("*", 0.3275911, ax)))
    poly = _f(1.061405429)
    for c in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
        poly = binop("+", binop("*", poly, t), c)
    poly = binop("*", poly, t)
    y = binop("-", 1.0, binop("*", poly, _call("exp", _call("neg", binop("*", ax, ax)))))
    return _call("select", binop("<", x, 0.0), _call("neg", y), y)


def clamp_loads(e, ranges=None):
    """`e` with every load's indices clamped into its buffer (the unselected side of a select
    is evaluated too, and TileLang guards out-of-range reads with if_then_else). `ranges`: the
    block and loop variables' (lo, hi); an index they keep inside its dimension stays as
    written (`acc_o[i, j]` in `T.Parallel(block_M, dim)` over an acc_o of that shape), so
    the row index of a tile stays the map's row variable (split_cores splits such maps)."""
    if isinstance(e, Load):
        idx = []
        for i, n in zip(e.indices, e.buffer.shape):
            i = clamp_loads(i, ranges)
            iv = interval(ranges or {}, i)
            if not (iv is not None and isinstance(n, int) and 0 <= iv[0] and iv[1] < n):
                i = _call("min", _call("max", i, 0), n - 1)
            idx.append(i)
        return Load(e.buffer, tuple(idx))
    if isinstance(e, BinOp):
        return BinOp(e.op, clamp_loads(e.a, ranges), clamp_loads(e.b, ranges))
    if isinstance(e, Call):
        return Call(e.fn, tuple(clamp_loads(a, ranges) for a in e.args))
    if isinstance(e, Cast):
        return Cast(e.dtype, clamp_loads(e.value, ranges))
    return e


def select(c, a, b, ranges=None):
    """a if c else b: at trace time when c is a Python value, else an IR select (`ranges`:
    see clamp_loads)."""
    if not is_ir(c):
        return a if c else b
    if isinstance(a, bool) or isinstance(b, bool):
        a, b = as_expr(a), as_expr(b)
    return _call("select", c, clamp_loads(as_expr(a), ranges), clamp_loads(as_expr(b), ranges))


_F32_INTEGRAL = float(2 ** 23)  # float32 values of at least this magnitude are integers


def trunc(x):
    """T.trunc (C truncf, toward zero): select(x < 0, ceil(x), floor(x)), each floor the exact
    `x // 1.0`. On a magnitude of 2^23 or more (every float32 there is an integer, and inf)
    the value itself, so that no infinity reaches `//`."""
    if not is_ir(x):
        return float(math.trunc(x)) if math.isfinite(x) else float(x)
    if static_dtype(x) is not None and dtypes.is_int(static_dtype(x)):
        return x
    y = _call("min", _call("max", x, -_F32_INTEGRAL), _F32_INTEGRAL)
    t = _call("select", binop("<", y, 0.0), _call("neg", binop("//", _call("neg", y), 1.0)),
              binop("//", y, 1.0))
    return _call("select", binop("<", _call("abs", x), _F32_INTEGRAL), t, x)


def round_away(x):
    """T.round (TVM's tir.round, C roundf: ties away from zero) as t = trunc(x) plus a step
    toward x's sign where |x - t| >= 0.5; x - t is exact, so 0.49999997 rounds to 0 and -2.5
    to -3 (floor(x + 0.5) gets both wrong)."""
    if not is_ir(x):
        if not math.isfinite(x):
            return float(x)
        t = math.trunc(x)
        return float(t + (math.copysign(1, x) if abs(x - t) >= 0.5 else 0))
    if static_dtype(x) is not None and dtypes.is_int(static_dtype(x)):
        return x
    t = trunc(x)
    d = binop("-", x, t)
    return _call("select", binop(">=", d, 0.5), binop("+", t, 1.0),
                 _call("select", binop("<=", d, -0.5), binop("-", t, 1.0), t))


def nearbyint(x):
    """T.nearbyint (the default rounding mode: ties to even): round_away(x), except that a tie
    (|x - trunc(x)| == 0.5) whose away-rounded value is odd goes to trunc(x) instead."""
    if not is_ir(x):
        return float(round(x)) if math.isfinite(x) else float(x)
    if static_dtype(x) is not None and dtypes.is_int(static_dtype(x)):
        return x
    t, r = trunc(x), round_away(x)
    tie = binop("==", _call("abs", binop("-", x, t)), 0.5)
    odd = binop("!=", binop("*", binop("//", r, 2.0), 2.0), r)
    return _call("select", binop("and", tie, odd), t, r)


def float_class(name: str, x):
    """T.isnan (x != x, unordered), T.isinf (|x| == inf), T.isfinite (|x| < inf): bools."""
    if not is_ir(x):
        return {"isnan": math.isnan, "isinf": math.isinf, "isfinite": math.isfinite}[name](x)
    if static_dtype(x) is not None and dtypes.is_int(static_dtype(x)):
        return name == "isfinite"
    if name == "isnan":
        return binop("!=", x, x)
    return binop("==" if name == "isinf" else "<", _call("abs", x), math.inf)


def power(a, b):
    """a ** b: a product for small integer exponents, else exp2(b * log2(a))."""
    if not is_ir(a) and not is_ir(b):
        return a ** b
    if isinstance(b, int) and not isinstance(b, bool) and 0 <= b <= 8:
        out = 1.0 if b == 0 else a
        for _ in range(b - 1):
            out = binop("*", out, a)
        return out
    if isinstance(b, (int, float)) and b == 0.5:
        return _call("sqrt", a)
    return _call("exp2", binop("*", b, binop("*", _call("log", a), _LN2_INV)))


class Dialect:
    """Upstream names the KernelBuilder dispatches here (see `intrinsic` and `call_stmt`)."""

    # ------------------------------------------------------------------------------ expressions

    def dialect_intrinsic(self, name: str, n: ast.Call):
        """The value of `T.name(...)` for the upstream expression functions, or None."""
        if name in ("if_then_else", "Select"):
            c, a, b = self.values(n, 3, name)
            return select(c, a, b, self.var_ranges)
        if name in ("And", "Or"):  # tilelang-ascend's logical helpers
            if len(n.args) < 2 or n.keywords:
                raise self.error(n, f"T.{name}(a, b, ...) takes two or more conditions")
            out = self.value_arg(n.args[0])
            for a in n.args[1:]:
                out = binop(name.lower(), out, self.value_arg(a))
            return out
        if name == "Not":
            (v,) = self.values(n, 1, name)
            return (not v) if not is_ir(v) else _call("not", v)
        if name == "Cast":
            if len(n.args) != 2:
                raise self.error(n, "T.Cast(dtype, value) takes a dtype and a value")
            dt = self.dtype(self.eval(n.args[0]), n.args[0])
            return Cast(dt, as_expr(self.value_arg(n.args[1])))
        if name == "clamp":
            x, lo, hi = self.values(n, 3, name)
            return self.minmax("min", [self.minmax("max", [x, lo], n), hi], n)
        unary = {"log2": lambda x: binop("*", _call("log", x), _LN2_INV),
                 "log10": lambda x: binop("*", _call("log", x), _LN10_INV),
                 "sigmoid": sigmoid, "tanh": tanh, "erf": erf,
                 "floor": lambda x: binop("//", x, 1.0),
                 "tan": lambda x: binop("/", _call("sin", x), _call("cos", x)),
                 "ceil": lambda x: _call("neg", binop("//", _call("neg", x), 1.0))}
        if name in unary:
            (x,) = self.values(n, 1, name)
            if not is_ir(x):
                x = float(x)
                py = {"log2": math.log2, "log10": math.log10, "tanh": math.tanh, "erf": math.erf,
                      "sigmoid": lambda v: 1.0 / (1.0 + math.exp(-v)), "floor": math.floor,
                      "ceil": math.ceil, "tan": math.tan}[name]
                return py(x)
            return unary[name](x)
        if name in ("floordiv", "floormod", "truncdiv", "truncmod"):
            a, b = self.values(n, 2, name)
            if name.startswith("trunc"):
                return self.trunc_divmod(name, a, b, n)
            return self.arith("//" if name == "floordiv" else "%", a, b, n)
        if name == "pow":
            a, b = self.values(n, 2, name)
            return power(a, b)
        if name in BIT_BINARY_FNS:
            a, b = self.values(n, 2, name)
            return self.arith(BIT_SYMBOLS[name], a, b, n)
        if name == "bitwise_not":
            (a,) = self.values(n, 1, name)
            return bit_not(a, self, n)
        if name == "reinterpret":
            if len(n.args) != 2 or n.keywords:
                raise self.error(n, 'T.reinterpret(value, dtype) takes a value and a dtype, e.g. '
                                    'T.reinterpret(x, "int32")')
            v = self.value_arg(n.args[0])
            dt = self.dtype(self.eval(n.args[1]), n.args[1])
            return reinterpret(as_expr(v), dt, self, n)
        if name in ("tvm.const", "tvm.reinterpret"):
            return self.tvm_intrinsic(name[len("tvm."):], n)
        if name == "use_swizzle":  # tilelang-ascend's value form remaps a tile id: any
            if n.args:                # bijection computes the same result; the identity is one
                return self.value_arg(n.args[0])
            raise self.error(n, "T.use_swizzle is a statement here (a GPU hint)")
        if name in ("atomic_add", "atomic_max", "atomic_min"):  # return_prev=True
            return self.atomic_value(name[len("atomic_"):], n)
        if name in ("round", "trunc", "nearbyint"):
            (x,) = self.values(n, 1, name)
            return {"round": round_away, "trunc": trunc, "nearbyint": nearbyint}[name](x)
        if name in ("isnan", "isinf", "isfinite"):
            (x,) = self.values(n, 1, name)
            return float_class(name, x)
        return None

    def trunc_divmod(self, name: str, a, b, n):
        """T.truncdiv / T.truncmod (C's `/` and `%` on integers) from the floor forms: they
        differ by one step where the remainder is non-zero and the operands' signs differ."""
        for v in (a, b):
            dt = static_dtype(v) if is_ir(v) else ("int32" if isinstance(v, int) else "float32")
            if dt is not None and not (dtypes.is_int(dt) or dt == "bool"):
                raise self.error(n, f"T.{name} takes integers, got {show(v)} ({dt}); for floats "
                                    "write T.trunc(a / b) or a - b * T.trunc(a / b)")
        if not is_ir(b) and b == 0:
            raise self.error(n, f"T.{name}: division by zero")
        if not is_ir(a) and not is_ir(b):
            q = a // b
            if q < 0 and q * b != a:
                q += 1
            return q if name == "truncdiv" else a - q * b
        q, r = self.arith("//", a, b, n), self.arith("%", a, b, n)
        differ = binop("or", binop("and", binop("<", a, 0), binop(">", b, 0)),
                       binop("and", binop(">", a, 0), binop("<", b, 0)))
        if not is_ir(b):  # a constant divisor: one sign test
            differ = binop("<", a, 0) if b > 0 else binop(">", a, 0)
        step = binop("and", binop("!=", r, 0), differ)
        if name == "truncdiv":
            return select(step, binop("+", q, 1), q)
        return select(step, binop("-", r, b), r)

    def tvm_intrinsic(self, name: str, n: ast.Call):
        """TVM's `tirx.const(value, dtype)` (a trace-time number of that kind, range-checked:
        integer arithmetic in a kernel is exact, so only the value matters) and
        `tirx.reinterpret(dtype, value)` (T.reinterpret with its arguments the other way)."""
        args = [*n.args, *(k.value for k in n.keywords if k.arg in ("dtype", "value"))]
        if name == "reinterpret":
            if len(args) != 2 or len(n.keywords) > 1:
                raise self.error(n, "tirx.reinterpret(dtype, value) takes a dtype and a value")
            dt = self.dtype(self.eval(args[0]), args[0])
            return reinterpret(as_expr(self.value_arg(args[1])), dt, self, n)
        if not 1 <= len(args) <= 2:
            raise self.error(n, "tirx.const(value, dtype) takes a number and a dtype")
        v = self.eval(args[0])
        if is_ir(v) or not isinstance(v, (int, float)):
            raise self.error(n, f"tirx.const takes a Python number, got {show(v)}; convert a "
                                "kernel value with tirx.Cast(dtype, x) or x.astype(dtype)")
        dt = self.dtype(self.eval(args[1]), args[1]) if len(args) == 2 else \
            ("int32" if isinstance(v, int) else "float32")
        return self.typed_number(v, dt, n)

    def typed_number(self, v, dt: str, n):
        """The Python number `v` as a value of dtype `dt` (`tirx.const`, `3 .astype(dt)`)."""
        if dt == "bool":
            return bool(v)
        if not dtypes.is_int(dt):
            return float(v)
        lo, hi = T_module.min_value(dt), T_module.max_value(dt)
        if v != int(v) or not lo <= v <= hi:
            raise self.error(n, f"{v!r} is not a {dt} value (range {lo}..{hi})")
        return int(v)

    def values(self, n: ast.Call, count: int, name: str) -> list:
        if len(n.args) != count or n.keywords:
            raise self.error(n, f"T.{name} takes {count} argument(s)")
        return [self.value_arg(a) for a in n.args]

    def dtype_call(self, dt: str, n: ast.Call):
        """`T.float32(x)`: a conversion (a Python number stays a number of that kind)."""
        if len(n.args) != 1 or n.keywords:
            raise self.error(n, f"T.{dt}(x) converts one value")
        name = self.dtype(dt, n.func)
        v = self.value_arg(n.args[0])
        if not is_ir(v):
            return int(v) if dtypes.is_int(name) else bool(v) if name == "bool" else float(v)
        return Cast(name, as_expr(v))

    def gpu_only(self, name: str, node):
        advice = GPU_ONLY[name]
        return self.error(node, f"T.{name} is GPU-only and has no meaning on the Ascend machine "
                                f"model; write {advice}")

    # ------------------------------------------------------------------------------ statements

    def hint_stmt(self, name: str, call: ast.Call) -> list:
        """GPU scheduling hints: the arguments are evaluated (so misspellings still fail) and
        the statement is recorded in the kernel's `hints` (docs/tilelang_compat.md)."""
        for a in call.args:
            if not isinstance(a, ast.Dict):
                self.eval_quiet(a)
        self.record_hint(call)
        return []

    def is_trace_range(self, node) -> bool:
        """`iket.range(name)` (TileLang's trace events, language/hints.TRACE_EVENTS)."""
        if not isinstance(node, ast.Call):
            return False
        fn = self.eval_quiet(node.func)
        return isinstance(fn, Marker) and fn.name in TRACE_EVENTS

    def trace_ranges(self, items) -> None:
        """The items after the first of a `with` (`with T.Kernel(n) as bx, iket.range("k"):`):
        trace ranges, recorded as hints; anything else is an error at the item."""
        for item in items:
            if not self.is_trace_range(item.context_expr) or item.optional_vars is not None:
                raise self.error(item.context_expr, "a `with T.Kernel(...)` statement takes no "
                                                    "other item than trace ranges (iket.range)")
            self.hint_stmt("range", item.context_expr)

    def trace_range_body(self, s: ast.With) -> list:
        """`with iket.range(name): body` inside a kernel: the body (the range is a hint)."""
        self.trace_ranges(s.items)
        return self.body(s.body)

    def record_hint(self, node, keywords=None) -> None:
        """Note a GPU hint in the kernel's `hints`: its source text (or only `keywords` of a
        call) and line:col; quotes become single quotes (IR strings have no escapes)."""
        if keywords is not None:
            if not keywords:
                return
            text = ", ".join(ast.unparse(k) for k in keywords)
            node = keywords[0]
        else:
            text = ast.unparse(node)
        loc = self.loc(node)
        text = " ".join(text.replace('"', "'").split())
        self.hints.append(f"{text} @ {loc.line}:{loc.col}")

    def eval_quiet(self, node):
        try:
            return self.eval(node)
        except Exception:  # noqa: BLE001 (a hint's argument need not be a kernel value)
            return None

    def parallel_if(self, cond, then, other, s) -> list:
        """`if c: x[i] = a else: x[i] = b` inside T.Parallel: an If in the map. Its element
        assignments are masked: each runs (reads and writes memory) only in the iterations
        where its branch's condition holds, so a guard keeps every access inside its tensor."""
        from .safe_access import guard_reads  # its reads too are safe accesses (a tail
        cond = guard_reads(cond, self.var_ranges)  # lane's `if i < n and m[i] > 0`)
        if then and all(isinstance(st, ParallelAtomic) for st in then) and not other:
            # `if c: T.atomic_add(C[..], v)`: each update where c holds (and its own guard)
            return [replace(u, cond=cond if u.cond is None else binop("and", cond, u.cond))
                    for u in then]
        for st in [*then, *other]:
            if not isinstance(st, (Store, If)):
                raise self.error(s, "an `if` inside T.Parallel holds element assignments only "
                                    "(or, without an else, atomic updates only)")
        if not then and not other:
            return []
        return [If(cond, tuple(then), tuple(other), self.loc(s))]

    def parallel_fill(self, loop: For):
        """A T.Parallel map that writes one loop-invariant value to every element of an L0C
        tile (tilelang-ascend's `for i, j in T.Parallel(bm, bn): C_L0[i, j] = 0` in a cube
        scope) is the cube's fill of L0C (the M pipe); the vector unit cannot reach L0C:

            for i, j in Parallel(32, 32): C_L0[i, j] = 0   ->   fill(C_L0, 0.0)
        """
        if loop.kind != "parallel" or len(loop.body) != 1 or not isinstance(loop.body[0], Store):
            return loop
        st = loop.body[0]
        buf = st.buffer
        if buf.scope != "L0C" or [e.value if isinstance(e, Const) else None
                                   for e in loop.extents] != list(buf.shape):
            return loop
        if [i.name if isinstance(i, Var) else None for i in st.indices] != list(loop.vars):
            return loop
        if any(isinstance(n, Load) or (isinstance(n, Var) and n.name in loop.vars)
               for n in walk(st.value)):
            return loop
        value = st.value
        if isinstance(value, Const) and dtypes.is_float(buf.dtype):
            value = const(float(value.value))
        return Fill(Region.full(buf), value, loop.loc)

    def parallel_with_loops(self, names, extents, body, s) -> list:
        """A T.Parallel body holding serial loops (TileLang's per-element accumulation,
        `x[i, j] = ...; for k in T.serial(n): x[i, j] += a[k, i] * b[k, j]`): the iterations
        of T.Parallel are independent, so each run of element stores is a map and each serial
        loop runs its maps in order (the loop outside, the map inside):

            for i, j in Parallel(4, 8): x[i, j] = c[i]; for k in serial(4): x[i, j] += a[k, i]
        ->  for i, j in Parallel(4, 8): x[i, j] = c[i]
            for k in serial(4): for i, j in Parallel(4, 8): x[i, j] += a[k, i]
        """
        ext = tuple(const(e) for e in extents)
        out, run = [], []

        def flush():
            if run:
                out.append(For(names, ext, "parallel", tuple(run), 0, self.loc(s)))
                run.clear()

        for b in body:
            if isinstance(b, (Store, If)):  # element assignments, masked ones included
                run.append(b)
                continue
            if not (isinstance(b, For) and b.kind in ("serial", "unroll")) or any(
                    isinstance(v, Var) and v.name in names for e in b.extents for v in walk(e)):
                raise self.error(s, "a T.Parallel body holds element assignments and serial "
                                    "loops (whose extents do not depend on the T.Parallel "
                                    "variables) only")
            flush()
            inner = self.parallel_with_loops(names, extents, list(b.body), s)
            out.append(For(b.vars, b.extents, b.kind, tuple(inner), b.num_stages, b.loc))
        flush()
        return out

    def serial_loop(self, names, call: ast.Call, s, kind="serial") -> list:
        """T.serial(stop) / T.serial(start, stop[, step]) / T.unroll(...) with kwargs."""
        args = [self.eval(a) for a in call.args]
        kw = {k.arg: k for k in call.keywords}
        for k in kw:
            if k not in ("step", "unroll_factor", "annotations", "explicit"):
                raise self.error(kw[k], f"unexpected argument '{k}'")
        if "step" in kw:
            args.append(self.eval(kw["step"].value))
        if len(args) == 1:
            return None  # the ordinary one-extent loop
        if len(names) != 1 or not 2 <= len(args) <= 3:
            raise self.error(call, f"T.{kind}(stop) or T.{kind}(start, stop[, step])")
        start, stop, step = (args + [1])[:3]
        if not isinstance(step, int) or isinstance(step, bool) or step == 0:
            raise self.error(call, "the loop step must be a nonzero constant int")
        if step > 0:
            extent = binop("//", binop("+", binop("-", stop, start), step - 1), step)
        else:
            extent = binop("//", binop("+", binop("-", start, stop), -step - 1), -step)
        if not is_ir(extent) and extent <= 0:
            return []
        name = names[0]
        self.scopes.append({name: binop("+", binop("*", Var(name), step), start)})
        body = self.body(s.body)
        self.scopes.pop()
        return [For((name,), (as_expr(extent),), "serial", tuple(body), 0, self.loc(s))]

    def grid_loop(self, names, call: ast.Call, s) -> list:
        """T.grid(a, b, ...): nested serial loops."""
        extents = [self.eval(a) for a in call.args]
        if len(names) != len(extents) or not extents:
            raise self.error(s.target, f"expected {len(extents)} loop variables, got {len(names)}")
        self.scopes.append({n: Var(n) for n in names})
        body = self.body(s.body)
        self.scopes.pop()
        for name, e in reversed(list(zip(names, extents))):
            if not (is_ir(e) or isinstance(e, int)):
                raise self.error(call, f"a loop extent must be an integer expression, got {show(e)}")
            body = [For((name,), (as_expr(e),), "serial", tuple(body), 0, self.loc(s))]
        return body

    def vectorized_loop(self, names, call: ast.Call, s) -> list:
        """T.vectorized(n) (or T.vectorized(0, n)): an elementwise map when its body is element
        stores, else serial."""
        extents = [self.eval(a) for a in call.args]
        if len(extents) == 2 and type(extents[0]) is int and extents[0] == 0:
            extents = extents[1:]
        if len(extents) != 1 or len(names) != 1:
            raise self.error(call, "T.vectorized(n) takes one extent and one loop variable")
        self.scopes.append({names[0]: Var(names[0])})
        body = self.body(s.body)
        self.scopes.pop()
        kind = "parallel" if body and all(isinstance(b, Store) for b in body) and \
            isinstance(extents[0], int) else "serial"
        return [For(tuple(names), (as_expr(extents[0]),), kind, tuple(body), 0, self.loc(s))]

    def stmt_Assert(self, s):
        cond = self.resolved(self.eval(s.test), s.test)
        if is_ir(cond):
            raise self.error(s, "assert checks trace-time values; this condition depends on "
                                "kernel values")
        if not cond:
            msg = self.eval(s.msg) if s.msg is not None else "assertion failed"
            raise self.error(s, f"assert failed: {msg}")
        return []

    def stmt_AnnAssign(self, s):
        if s.value is None:
            raise self.error(s, "a bare annotation declares a tensor parameter of an eager @jit "
                                "function, before `with T.Kernel`")
        if not isinstance(s.target, ast.Name):
            raise self.error(s.target, "expected a plain name")
        return self.assign(ast.Assign(targets=[s.target], value=s.value, lineno=s.lineno,
                                      col_offset=s.col_offset))

    def expr_IfExp(self, n):
        cond = self.resolved(self.eval(n.test), n.test)
        if not is_ir(cond):  # trace-time: evaluate only the branch taken, as Python does
            return self.eval(n.body if cond else n.orelse)
        return select(cond, self.value_arg(n.body), self.value_arg(n.orelse), self.var_ranges)

    def unknown_name(self, attr: str, node):
        if attr in GPU_ONLY:
            raise self.gpu_only(attr, node)
        prefix = next((p for p in GPU_ONLY_PREFIXES if attr.startswith(p)), None)
        if prefix is not None:
            raise self.error(node, f"T.{attr} is GPU-only and has no meaning on the Ascend "
                                   f"machine model; write {GPU_ONLY_PREFIXES[prefix]}")
        prefix = next((p for p in MULTI_DEVICE_PREFIXES if attr.startswith(p)), None)
        if prefix is not None:
            raise self.error(node, f"T.{attr} is multi-device communication, outside this "
                                   f"one-device machine model; write {MULTI_DEVICE_PREFIXES[prefix]}")
        if attr in NOT_YET:
            raise self.error(node, f"T.{attr} is not supported yet; write {NOT_YET[attr]}")
        return None


__all__ = ["Dialect", "select", "clamp_loads", "HINT_NAMES", "T_module", "const"]
