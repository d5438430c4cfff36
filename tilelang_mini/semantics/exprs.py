"""Values and expressions of the NumPy interpreter (the executable semantics).

`compile_expr(e)` turns an expression into a closure `fn(env) -> value`, resolved once by one
handler per node type (`EXPR_HANDLERS`); `Env` holds a block's buffers and variables; `Fault` is a
run-time fault that `located` turns into a KernelRuntimeError at the kernel line.
"""
from __future__ import annotations

import numpy as np

from tilelang_mini.errors import CompileError, KernelRuntimeError
from tilelang_mini.ir import dtypes
from tilelang_mini.ir.nodes import (
    BIT_FNS, BinOp, Buffer, Call, Cast, Const, Load, Reinterpret, Var, call_arity,
)

F32 = np.float32
# Scopes with one instance per block (BLOCK_SCOPES): GM, and the AIC's buffers (which the AIVs can
# write on chips with a UB -> L1 path). UB and scalars are per core.


class Fault(Exception):
    """Bad runtime state found while evaluating; the enclosing statement adds its loc."""


class Env:
    """Execution state of one core: loop/grid vars and buffers (name -> ndarray).

    `core` is None at block level, else "C" or "V"; `block` lists the block's envs
    [block-level, C, V0, V1] when the kernel has Scope blocks (None otherwise)."""

    __slots__ = ("vars", "bufs", "core", "block")

    def __init__(self, vars: dict, bufs: dict, core: str | None = None, block=None):
        self.vars = vars
        self.bufs = bufs
        self.core = core
        self.block = block


def located(fn, stmt):
    """Wrap `fn(env)` so runtime faults become a KernelRuntimeError at `stmt.loc`."""
    loc = stmt.loc
    what = type(stmt).__name__

    def run(env):
        try:
            fn(env)
        except Fault as e:
            raise KernelRuntimeError(str(e), loc) from None
        except (IndexError, ValueError, ZeroDivisionError, OverflowError) as e:
            raise KernelRuntimeError(f"{what} failed at run time: {e}", loc) from None

    return run


# ------------------------------------------------------------------------------------ values


def kind_of(dtype: str) -> str:
    if dtypes.is_float(dtype):
        return "float"
    return "bool" if dtype == "bool" else "int"


def to_f32(x):
    if isinstance(x, np.ndarray):
        return x.astype(F32, copy=False)
    return F32(x)


def to_int(x):
    if isinstance(x, np.ndarray):
        if x.dtype == np.int64:
            return x
        if x.dtype.kind == "f":
            return x.astype(np.int32).astype(np.int64)
        return x.astype(np.int64)
    return int(x)


def as_index(x, what: str) -> int:
    """A scalar integer (region start, loop extent)."""
    if type(x) is int:
        return x
    if isinstance(x, (np.integer, np.bool_, bool)):
        return int(x)
    if isinstance(x, np.ndarray) and x.ndim == 0 and x.dtype.kind in "iub":
        return int(x)
    if isinstance(x, np.ndarray):
        raise Fault(f"{what} must be a scalar integer, got an array of shape {x.shape} "
                    f"(does it depend on a Parallel loop variable?)")
    raise Fault(f"{what} must be an integer, got {x!r}")


def check_indices(idx: tuple, buf: Buffer) -> tuple:
    """Validate element indices against buf's shape; returns them normalised."""
    shape = buf.shape
    if len(idx) != len(shape):
        raise Fault(f"{buf.name} has {len(shape)} dimension(s) but is indexed with {len(idx)}")
    out = []
    for d, (i, n) in enumerate(zip(idx, shape)):
        if type(i) is not int:
            if isinstance(i, np.ndarray) and i.ndim:
                if i.dtype.kind not in "iu":
                    raise Fault(f"index {d} of {buf.name} is not an integer ({i.dtype})")
                if i.size and (i.min() < 0 or i.max() >= n):
                    bad = int(i.min()) if i.min() < 0 else int(i.max())
                    raise Fault(f"index {bad} out of bounds for dimension {d} of "
                                f"{buf.name}{list(shape)}")
                out.append(i)
                continue
            if isinstance(i, (np.integer, np.ndarray)) and np.asarray(i).dtype.kind in "iu":
                i = int(i)
            else:
                raise Fault(f"index {d} of {buf.name} is not an integer: {i!r}")
        if not 0 <= i < n:
            raise Fault(f"index {i} out of bounds for dimension {d} of {buf.name}{list(shape)}")
        out.append(i)
    return tuple(out)


# ------------------------------------------------------------------------------- expressions

def compile_expr(e):
    """(closure, kind) of an expression; kind is 'int', 'float' or 'bool'."""
    try:
        handler = EXPR_HANDLERS[type(e)]
    except KeyError:
        raise CompileError(f"not an expression: {e!r}") from None
    return handler(e)


def _const(e: Const):
    kind = kind_of(e.dtype)
    v = F32(e.value) if kind == "float" else (bool(e.value) if kind == "bool" else int(e.value))
    return (lambda env: v), kind


def _var(e: Var):
    name = e.name

    def var(env):
        try:
            return env.vars[name]
        except KeyError:
            raise Fault(f"variable {name!r} is not bound here") from None

    return var, kind_of(e.dtype)


def _load(e: Load):
    buf = e.buffer
    name = buf.name
    idx_fns = [compile_expr(i)[0] for i in e.indices]
    kind = kind_of(buf.dtype)
    conv = {"float": to_f32, "int": to_int, "bool": lambda x: x if isinstance(x, np.ndarray)
            else bool(x)}[kind]

    def load(env):
        try:
            arr = env.bufs[name]
        except KeyError:
            raise Fault(f"buffer {name!r} is used before it is allocated") from None
        idx = check_indices(tuple(f(env) for f in idx_fns), buf)
        return conv(arr[idx])

    return load, kind


def _promote(fa, ka, fb, kb):
    """Make both operands float32 when either is float."""
    if ka == "float" and kb != "float":
        fb = _wrap_f32(fb)
    elif kb == "float" and ka != "float":
        fa = _wrap_f32(fa)
    kind = "float" if "float" in (ka, kb) else "int"
    return fa, fb, kind


def _wrap_f32(f):
    return lambda env: to_f32(f(env))


_ARITH = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
    "//": lambda a, b: a // b, "%": lambda a, b: a % b,
}
_CMP = {
    "<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b,
}


def _binop(e: BinOp):
    fa, ka = compile_expr(e.a)
    fb, kb = compile_expr(e.b)
    op = e.op
    if op in _CMP:
        cmp = _CMP[op]
        return (lambda env: cmp(fa(env), fb(env))), "bool"
    if op in ("and", "or"):
        fn = np.logical_and if op == "and" else np.logical_or
        return (lambda env: fn(fa(env), fb(env))), "bool"
    if op == "/":
        fa, fb = (fa if ka == "float" else _wrap_f32(fa)), (fb if kb == "float" else _wrap_f32(fb))
        return (lambda env: fa(env) / fb(env)), "float"
    if op not in _ARITH:
        raise CompileError(f"unknown binary operator {op!r}")
    fa, fb, kind = _promote(fa, ka, fb, kb)
    arith = _ARITH[op]
    if kind == "int" and op in ("//", "%"):
        def intdiv(env):
            b = fb(env)
            if type(b) is int and b == 0 or isinstance(b, np.ndarray) and not b.all():
                raise Fault(f"integer division by zero in '{op}'")
            return arith(fa(env), b)
        return intdiv, kind
    return (lambda env: arith(fa(env), fb(env))), kind


def _rsqrt(x):
    return F32(1.0) / np.sqrt(x)


_FLOAT_FNS = {"exp": np.exp, "exp2": np.exp2, "log": np.log, "sqrt": np.sqrt, "rsqrt": _rsqrt}


def _max(a, b):
    if type(a) is int and type(b) is int:
        return a if a >= b else b
    return np.maximum(a, b)


def _min(a, b):
    if type(a) is int and type(b) is int:
        return a if a <= b else b
    return np.minimum(a, b)


def _ceildiv(a, b):
    if type(b) is int and b == 0 or isinstance(b, np.ndarray) and not b.all():
        raise Fault("ceildiv by zero")
    return -(-a // b)


def _call(e: Call):
    fns = [compile_expr(a) for a in e.args]
    fn = e.fn
    want = call_arity(fn)
    if len(fns) != want:
        raise CompileError(f"{fn}() takes {want} argument(s), got {len(fns)}")
    if fn == "select":
        return _select(fns)
    if fn in _FLOAT_FNS:
        (fa, ka), = fns
        if ka != "float":
            fa = _wrap_f32(fa)
        np_fn = _FLOAT_FNS[fn]
        return (lambda env: np_fn(fa(env))), "float"
    if fn in ("abs", "neg"):
        (fa, ka), = fns
        if ka == "bool":
            fa, ka = (lambda env, f=fa: to_int(f(env))), "int"
        if fn == "abs":
            return (lambda env: abs(fa(env))), ka
        return (lambda env: -fa(env)), ka
    if fn == "not":
        (fa, _), = fns
        return (lambda env: np.logical_not(fa(env))), "bool"
    if fn in BIT_FNS:
        return _bitop(fn, fns)
    (fa, ka), (fb, kb) = fns
    if fn == "ceildiv":
        if "float" in (ka, kb):
            raise CompileError("ceildiv takes integers")
        return (lambda env: _ceildiv(fa(env), fb(env))), "int"
    fa, fb, kind = _promote(fa, ka, fb, kb)
    pick = _max if fn == "max" else _min
    return (lambda env: pick(fa(env), fb(env))), kind


_BIT = {"bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor,
        "shift_left": np.left_shift, "shift_right": np.right_shift}


def _bitop(fn, fns):
    """Bit operations on 64-bit integer values (booleans count as 0/1; floats are an error)."""
    if any(k == "float" for _, k in fns):
        raise CompileError(f"{fn} takes integers; reinterpret a float's bits first "
                           "(T.reinterpret(x, \"int32\"))")
    ints = [f if k == "int" else (lambda env, f=f: to_int(f(env))) for f, k in fns]
    if fn == "bitwise_not":
        (fa,) = ints

        def bnot(env):
            a = fa(env)
            return ~a if type(a) is int else np.invert(np.asarray(a, np.int64))
        return bnot, "int"
    op = _BIT[fn]
    fa, fb = ints

    def bitop(env):
        a, b = fa(env), fb(env)
        if fn.startswith("shift"):
            if np.any(np.asarray(b) < 0) or np.any(np.asarray(b) > 63):
                raise Fault(f"{fn} by {b}: shift counts are 0..63")
        if type(a) is int and type(b) is int:
            return _int_result(op(np.int64(a), np.int64(b)))
        return op(np.asarray(a, np.int64), np.asarray(b, np.int64))

    return bitop, "int"


def _int_result(v):
    return int(v) if np.ndim(v) == 0 else v


def _select(fns):
    """select(cond, a, b): both sides promoted as in arithmetic, then picked per element."""
    (fc, _), (fa, ka), (fb, kb) = fns
    if "bool" in (ka, kb) and ka != kb:
        fa, ka = ((lambda env, f=fa: to_int(f(env))), "int") if ka == "bool" else (fa, ka)
        fb, kb = ((lambda env, f=fb: to_int(f(env))), "int") if kb == "bool" else (fb, kb)
    if ka == kb == "bool":
        kind = "bool"
    else:
        fa, fb, kind = _promote(fa, ka, fb, kb)

    def select(env):
        c, a, b = fc(env), fa(env), fb(env)
        if isinstance(c, np.ndarray) or isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
            return np.where(c, a, b)
        return a if c else b

    return select, kind


def _cast(e: Cast):
    fv, kv = compile_expr(e.value)
    dt = dtypes.to_numpy(e.dtype)
    kind = kind_of(e.dtype)
    if e.dtype == "float32":
        return (fv if kv == "float" else _wrap_f32(fv)), kind
    if kind == "float":
        def cast_low(env):
            a = np.asarray(fv(env), dtype=np.float64).astype(dt).astype(F32)
            return a if a.ndim else a[()]
        return cast_low, kind
    if kind == "int":
        def cast_int(env):
            v = np.asarray(fv(env))
            a = (v.astype(np.int64) if v.dtype.kind in "iub" else v).astype(dt)
            return a.astype(np.int64) if a.ndim else int(a)
        return cast_int, kind

    def cast_bool(env):
        v = fv(env)
        return v.astype(bool) if isinstance(v, np.ndarray) else bool(v)

    return cast_bool, kind


def _reinterpret(e: Reinterpret):
    """The value as an element of `source`, its bits read as `dtype` (NumPy's view)."""
    fv, kv = compile_expr(e.value)
    src, dst = dtypes.to_numpy(e.source), dtypes.to_numpy(e.dtype)
    kind = kind_of(e.dtype)
    if src.itemsize != dst.itemsize:
        raise CompileError(f"reinterpret from {e.source} ({src.itemsize} bytes) to {e.dtype} "
                           f"({dst.itemsize} bytes): the sizes differ")

    def reinterpret(env):
        v = np.asarray(fv(env))
        bits = (v.astype(np.int64) if v.dtype.kind in "iub" else v).astype(src).view(dst)
        out = bits.astype(F32) if kind == "float" else (
            bits.astype(bool) if kind == "bool" else bits.astype(np.int64))
        return out if out.ndim else (out[()] if kind == "float" else (
            bool(out) if kind == "bool" else int(out)))

    return reinterpret, kind


EXPR_HANDLERS = {Const: _const, Var: _var, Load: _load, BinOp: _binop, Call: _call, Cast: _cast,
                 Reinterpret: _reinterpret}


def eval_expr(e, env):
    """Evaluate an expression once (uncached; for tools and tests)."""
    return compile_expr(e)[0](env)
