"""Values and expressions of the NumPy interpreter (the executable semantics).

`compile_expr(e)` turns an expression into a closure `fn(env) -> value`, resolved once by one
handler per node type (`EXPR_HANDLERS`); `Env` holds a block's buffers and variables; `Fault` is a
run-time fault that `located` turns into a KernelRuntimeError at the kernel line.
"""
from __future__ import annotations

import operator

import numpy as np

from tilelang_mini.errors import CompileError, KernelRuntimeError
from tilelang_mini.ir import dtypes
from tilelang_mini.ir.nodes import (
    BIT_FNS, BinOp, Buffer, Call, Cast, Const, Load, Reinterpret, Var, call_arity, walk,
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


class Buffers(dict):
    """A core's buffers by name. `declare` records a block-level on-chip buffer that becomes an
    array of zeros when the core first uses it: every core has its own copy, but a core that
    never touches one (the cube core and a UB tile) never pays for it."""

    __slots__ = ("declared",)

    def __init__(self, arrays=()):
        super().__init__(arrays)
        self.declared = {}

    def declare(self, name: str, shape: tuple, dtype) -> None:
        self.declared[name] = (shape, dtype)

    def __missing__(self, name):
        shape, dtype = self.declared[name]  # KeyError: not allocated
        arr = self[name] = np.zeros(shape, dtype)
        return arr


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
        if x.dtype == np.float16:
            if x.size >= 4096:
                return f16_to_f32(x)
            if x.ndim == 1 or (x.ndim and x.flags.c_contiguous):  # (the cast's layout)
                return _f16_table().take(x.view(np.uint16))
        if x.dtype == _BF16:
            return bf16_to_f32(x)
        return x.astype(F32, copy=False)
    return F32(x)


_BF16 = dtypes.to_numpy("bfloat16")


def to_f32_fn(dtype: str, size: int, contiguous: bool = False):
    """`to_f32` for arrays of IR dtype `dtype` with `size` elements (C-contiguous ones when
    `contiguous`): what it decides on each call (a tile operand's dtype and size are known
    when it is compiled), decided once."""
    if dtype == "float32":
        return lambda x: x
    if dtype == "bfloat16":
        return bf16_to_f32
    if dtype != "float16":
        return to_f32
    if size >= 4096:
        return f16_to_f32
    table = _f16_table()
    if contiguous:
        return lambda x: table.take(x.view(np.uint16))

    def f16(x):
        if x.ndim == 1 or (x.ndim and x.flags.c_contiguous):
            return table.take(x.view(np.uint16))
        return x.astype(F32)

    return f16


def bf16_to_f32(b: np.ndarray) -> np.ndarray:
    """b.astype(float32): ml_dtypes' cast (0.6) is exact for every bit pattern (NaN payloads
    too: it places the bits in a float's upper half) and, measured, 1.6-4x faster at every
    size than doing that by hand (an integer pass and a shift)."""
    return b.astype(F32)


_F16_TABLE = []


def _f16_table() -> np.ndarray:
    """NumPy's float32 of each half, by its bits (made on first use: 256 KiB). A small tile is
    widened by one gather from it, about half the time of NumPy's element-by-element cast and a
    third of f16_to_f32's passes; the values are the cast's by construction."""
    if not _F16_TABLE:
        _F16_TABLE.append(np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
                          .view(np.float16).astype(F32))
    return _F16_TABLE[0]


_F16_SCALE = F32(2.0 ** 112)    # 2^(127 - 15): a half's exponent field in a float's place


def f16_to_f32(h: np.ndarray) -> np.ndarray:
    """h.astype(float32), bit-exact, in a few integer passes (NumPy's own float16 cast converts
    one element at a time, about 3x slower): the half's bits sign-extended to 32 and shifted
    so that its exponent and mantissa sit in a float's (the sign stays in bit 31; the copies
    of it in bits 30..28 cleared), scaled by 2^112 (which also normalises subnormals).
    Infinities and NaNs (exponent field all ones; the only values that scale to 2^16 or
    more) take NumPy's cast."""
    i = h.view(np.int16).astype(np.int32)
    i <<= 13
    i &= _F16_FIELDS
    out = i.view(F32)
    out *= _F16_SCALE
    if out.size and _MAX(np.bitwise_and(h.view(np.uint16), 0x7C00), None) == 0x7C00:
        special = np.abs(out) >= 65536
        out[special] = h[special].astype(F32)
    return out


_F16_FIELDS = np.uint32(0x8FFFE000).view(np.int32)   # sign, float exponent and mantissa bits
_MAX = np.maximum.reduce


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

def compile_expr(e, par: tuple = (), table=None):
    """(closure, kind) of an expression; kind is 'int', 'float' or 'bool'. `par` names the
    variables of the enclosing Parallel loop in axis order (affine loads in them are views).
    `table` replaces EXPR_HANDLERS (the batched run's loads: semantics/batched.py)."""
    table = table or EXPR_HANDLERS
    try:
        handler = table[type(e)]
    except KeyError:
        raise CompileError(f"not an expression: {e!r}") from None
    return handler(e, par, table)


def _const(e: Const, par=(), table=None):
    kind = kind_of(e.dtype)
    v = F32(e.value) if kind == "float" else (bool(e.value) if kind == "bool" else int(e.value))
    return (lambda env: v), kind


def _var(e: Var, par=(), table=None):
    name = e.name

    def var(env):
        try:
            return env.vars[name]
        except KeyError:
            raise Fault(f"variable {name!r} is not bound here") from None

    return var, kind_of(e.dtype)


def _load(e: Load, par=(), table=None):
    buf = e.buffer
    name = buf.name
    idx_fns = [compile_expr(i, par, table)[0] for i in e.indices]
    kind = kind_of(buf.dtype)
    conv = {"float": to_f32, "int": to_int, "bool": lambda x: x if isinstance(x, np.ndarray)
            else bool(x)}[kind]
    view = affine_view(buf, e.indices, par)    # the elements as a strided view, when affine
    if view is not None:
        if buf.dtype == "float32":   # already a float32 value: no conversion
            return view, kind
        return (lambda env: conv(view(env))), kind

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


_ARITH = {"+": operator.add, "-": operator.sub, "*": operator.mul, "//": operator.floordiv,
          "%": operator.mod}
_CMP = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
        "==": operator.eq, "!=": operator.ne}


def _binop(e: BinOp, par=(), table=None):
    fa, ka = compile_expr(e.a, par, table)
    fb, kb = compile_expr(e.b, par, table)
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
    if kind == "int" and isinstance(e.b, Const) and table[Const] is _const and (
            op not in ("//", "%") or fb(None)):
        c = fb(None)  # a constant (non-zero) right operand: `ko * 2 * 32`, `cid // 1`
        return (lambda env: arith(fa(env), c)), kind
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


_FLOAT_FNS = {"exp": np.exp, "exp2": np.exp2, "log": np.log, "sqrt": np.sqrt, "rsqrt": _rsqrt,
              "sin": np.sin, "cos": np.cos}


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


def _call(e: Call, par=(), table=None):
    fns = [compile_expr(a, par, table) for a in e.args]
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


def _cast(e: Cast, par=(), table=None):
    fv, kv = compile_expr(e.value, par, table)
    dt = dtypes.to_numpy(e.dtype)
    kind = kind_of(e.dtype)
    if e.dtype == "float32":
        return (fv if kv == "float" else _wrap_f32(fv)), kind
    if e.dtype == "float8_e8m0fnu":  # our rounding rule, not the ml_dtypes version's
        def cast_e8m0(env):
            a = dtypes.to_e8m0(fv(env)).astype(F32)
            return a if a.ndim else a[()]
        return cast_e8m0, kind
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


def _reinterpret(e: Reinterpret, par=(), table=None):
    """The value as an element of `source`, its bits read as `dtype` (NumPy's view)."""
    fv, kv = compile_expr(e.value, par, table)
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


# ------------------------------------------------------------------------- affine accesses
# Affine element accesses of a Parallel loop as strided views (the interpreter's fast path).
#
# Inside `for i, j in T.Parallel(m, n)` the loop variables are broadcasting aranges, and the
# general way to read `A[bx * 64 + i, j]` is a gather with index arrays, bounds-checked element by
# element. When every index is affine in the loop variables with one positive constant step per
# dimension, and no loop variable indexes two dimensions, the same elements form a strided view:
#
#     A[bx * 64 + i, 2 * j + 1]   ->  A[bx*64 : bx*64 + m, 1 : 1 + 2*(n-1) + 1 : 2]
#     B[j, i]                     ->  B[0:n, 0:m].T          (axes in loop order)
#     s[i]          (in i, j)     ->  s[0:m][:, None]        (an unused variable: extent 1)
#
# The view has the gather's shape (the loop's rank, extent 1 on the axes the access does not use)
# and the same elements, so loads and stores mean exactly what the gather means; the bounds are
# checked once from the first and last index of each dimension. Any other index (a product of two
# variables, `i // 2`, one variable in two dimensions, a negative step) keeps the gather.


def _uses(e, par) -> bool:
    return any(isinstance(n, Var) and n.name in par for n in walk(e))


def split_affine(e, par):
    """`({var: step}, rest)` with e == sum(step * var) + rest and `rest` free of the loop
    variables `par`; None when e is not of that form (integer constant steps only)."""
    if not _uses(e, par):
        return {}, e
    if isinstance(e, Var):
        return {e.name: 1}, Const(0)
    if not isinstance(e, BinOp):
        return None
    if e.op in ("+", "-"):
        a, b = split_affine(e.a, par), split_affine(e.b, par)
        if a is None or b is None:
            return None
        sign = 1 if e.op == "+" else -1
        steps = dict(a[0])
        for v, c in b[0].items():
            steps[v] = steps.get(v, 0) + sign * c
        return steps, BinOp(e.op, a[1], b[1])
    if e.op == "*":
        for var_side, k in ((e.a, e.b), (e.b, e.a)):
            if isinstance(k, Const) and type(k.value) is int and not _uses(k, par):
                inner = split_affine(var_side, par)
                if inner is None:
                    return None
                return {v: c * k.value for v, c in inner[0].items()}, BinOp("*", inner[1], k)
    return None


def _constant(value):
    def const(env):
        return value
    const.value = value     # known when compiling (batched.py reads it)
    return const


def affine_dims(buf: Buffer, indices, par, table=None):
    """The strided-view form of the elements `buf[indices]` of the Parallel loop over `par` (its
    variables in axis order): (dims, perm, expand) with one (offset closure, loop axis or None,
    step) per dimension of `buf`, the transpose putting the used loop axes in order (None: none
    needed) and the indexing that adds the unused ones (None: all used); None when the access
    is not affine as described above (the caller gathers)."""
    if not par or len(indices) != len(buf.shape):
        return None
    dims = []                         # per dimension: (rest closure, loop axis or None, step)
    used = set()
    for e in indices:
        form = split_affine(e, par)
        if form is None:
            return None
        if not all(form[0].values()):
            return None               # `i - i` still broadcasts along i in the gather
        steps = form[0]
        rest, kind = compile_expr(form[1], (), table)
        if all(isinstance(n, Const) or isinstance(n, BinOp) and n.op in ("+", "-", "*")
               for n in walk(form[1])):
            rest = _constant(rest(None))    # a constant offset: computed once
        if kind != "int" or len(steps) > 1 or used & steps.keys():
            return None
        if not steps:
            dims.append((rest, None, 0))
            continue
        (v, c), = steps.items()
        if c < 0:
            return None
        used.add(v)
        dims.append((rest, par.index(v), c))
    if not used:
        return None                   # scalar indices: the gather is already a single element
    nd = len(par)
    order = [a for _, a, _ in dims if a is not None]       # loop axes of the view's axes
    perm = tuple(sorted(range(len(order)), key=order.__getitem__))
    if perm == tuple(range(len(order))):
        perm = None
    # after the transpose the view's axes are the used loop axes in order; add the others
    expand = tuple(slice(None) if a in order else None for a in range(nd))
    if len(order) == nd:
        expand = None
    return dims, perm, expand


def affine_view(buf: Buffer, indices, par):
    """A closure `view(env) -> ndarray` giving the elements `buf[indices]` of the Parallel loop
    over `par` as a view with the loop's rank (`affine_dims`); None when the access is not
    affine (the caller gathers)."""
    form = affine_dims(buf, indices, par)
    if form is None:
        return None
    dims, perm, expand = form
    name, shape = buf.name, buf.shape
    names = par

    def view(env):
        try:
            arr = env.bufs[name]
        except KeyError:
            raise Fault(f"buffer {name!r} is used before it is allocated") from None
        vs = env.vars
        sl = []
        for d, (rest, axis, step) in enumerate(dims):
            o = rest(env)
            if type(o) is not int:
                o = as_index(o, f"index {d} of {name}")
            n = shape[d]
            if axis is None:
                if not 0 <= o < n:
                    raise Fault(f"index {o} out of bounds for dimension {d} of "
                                f"{name}{list(shape)}")
                sl.append(o)
                continue
            last = o + step * (vs[names[axis]].shape[axis] - 1)
            if o < 0 or last >= n:
                raise Fault(f"index {o if o < 0 else last} out of bounds for dimension {d} of "
                            f"{name}{list(shape)}")
            sl.append(slice(o, last + 1, step))
        v = arr[tuple(sl)]
        if perm is not None:
            v = v.transpose(perm)
        return v if expand is None else v[expand]

    return view



def eval_expr(e, env):
    """Evaluate an expression once (uncached; for tools and tests)."""
    return compile_expr(e)[0](env)
