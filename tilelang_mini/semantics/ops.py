"""Expressions and single instructions of the NumPy interpreter.

`compile_expr(e)` turns an expression into a closure `fn(env) -> value`; `lower_instruction(s)`
turns a leaf statement (tile op, Store, Alloc, sync) into a closure `fn(env) -> None`. Both are
resolved once, by one handler per node type (`EXPR_HANDLERS`, `INSTR_HANDLERS`), so running a
closure never dispatches on node types. `execute(stmt, env)` runs one instruction: the pipe-level
simulator feeds instructions through it one at a time; control flow lives in interpreter.py.

Values: integers are Python ints (scalars) or int64 arrays (inside Parallel loops), floats are
np.float32 scalars or float32 arrays, booleans are bools / bool arrays.
"""
from __future__ import annotations

import numpy as np

from tilelang_mini.errors import CompileError, KernelRuntimeError
from tilelang_mini.ir import dtypes
from tilelang_mini.ir.analysis import BLOCK_SCOPES, SYNC_OPS
from tilelang_mini.ir.nodes import (
    BIT_FNS, Alloc, BinOp, Buffer, Call, Cast, Const, Copy, Fill, Gemm, Load, Reduce, Region,
    Reinterpret, Sort, Store, Var, call_arity,
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


# ----------------------------------------------------------------------------------- regions


def _squeezed(ext) -> tuple:
    return tuple(n for n in ext if n != 1)


def check_reshape(src_ext, dst_ext, stmt, what: str) -> None:
    n_src = int(np.prod(src_ext)) if src_ext else 1
    n_dst = int(np.prod(dst_ext)) if dst_ext else 1
    if n_src != n_dst or _squeezed(src_ext) != _squeezed(dst_ext):
        raise CompileError(f"{what}: shapes {list(src_ext)} and {list(dst_ext)} do not match "
                           f"(they must be equal after dropping extent-1 dimensions)", stmt.loc)


def compile_starts(r: Region):
    """Closure returning the region's start as a tuple of ints."""
    if len(r.start) != len(r.buffer.shape) or len(r.extent) != len(r.buffer.shape):
        raise CompileError(f"region of {r.buffer.name} has {len(r.start)} starts and "
                           f"{len(r.extent)} extents for a {len(r.buffer.shape)}-d buffer")
    if all(isinstance(s, Const) for s in r.start):
        starts = tuple(int(s.value) for s in r.start)
        return lambda env: starts
    fns = [compile_expr(s)[0] for s in r.start]
    name = r.buffer.name
    return lambda env: tuple(as_index(f(env), f"a start of the region of {name}") for f in fns)


def _buffer(env, name):
    try:
        return env.bufs[name]
    except KeyError:
        raise Fault(f"buffer {name!r} is used before it is allocated") from None


def region_view(r: Region):
    """Closure returning a writable view of an in-bounds region (tile ops other than copy)."""
    starts = compile_starts(r)
    ext, shape, name = r.extent, r.buffer.shape, r.buffer.name

    def view(env):
        s = starts(env)
        for d, (a, e, n) in enumerate(zip(s, ext, shape)):
            if a < 0 or a + e > n:
                raise Fault(f"region [{a}, {a + e}) out of bounds for dimension {d} of "
                            f"{name}{list(shape)}")
        return _buffer(env, name)[tuple(slice(a, a + e) for a, e in zip(s, ext))]

    return view


# ------------------------------------------------------------------------------ instructions


def _alloc(s: Alloc):
    buf = s.buffer
    name, shape, dt, scope = buf.name, buf.shape, dtypes.to_numpy(buf.dtype), buf.scope

    def alloc(env):
        # First execution in a block allocates zeros; later executions keep the buffer.
        if scope in BLOCK_SCOPES:
            targets = env.block or (env,)
            arr = next((e.bufs[name] for e in targets if name in e.bufs), None)
            if arr is None:
                arr = np.zeros(shape, dt)
            for e in targets:
                e.bufs.setdefault(name, arr)
        elif env.core is None and env.block:
            for e in env.block:  # block-level on-chip buffer: one copy per core
                if name not in e.bufs:
                    e.bufs[name] = np.zeros(shape, dt)
        elif name not in env.bufs:
            env.bufs[name] = np.zeros(shape, dt)

    return alloc


def _copy(s: Copy):
    if s.src.buffer.scope == "L0C" and s.dst.buffer.scope == "UB":
        return _dual_copy(s)
    return _plain_copy(s)


def _dual_copy(s: Copy):
    """FixPipe L0C -> UB delivers to both vector cores of the block: each gets its half of the
    rows when the UB tile has half the rows of the source (dual destination), else all of it."""
    half = s.dst.extent[0]
    split = s.src.extent[0] == 2 * half
    d_name, d_shape = s.dst.buffer.name, s.dst.buffer.shape
    d_dt = dtypes.to_numpy(s.dst.buffer.dtype)
    parts = []
    for v in range(2):
        src = s.src
        if split:
            start0 = src.start[0] if v == 0 else BinOp("+", src.start[0], Const(half))
            src = Region(src.buffer, (start0,) + src.start[1:], (half,) + src.extent[1:])
        parts.append(_plain_copy(Copy(src, s.dst, s.loc)))
    whole = parts[0] if not split else None

    def copy(env):
        if env.block is None or env.core != "C":
            if whole is None:
                raise Fault("a dual-destination copy runs on the cube core of an NPU block")
            whole(env)
            return
        for v, part in enumerate(parts):
            venv = env.block[2 + v]
            if d_name not in venv.bufs:  # the AIV has not reached its Alloc yet
                venv.bufs[d_name] = np.zeros(d_shape, d_dt)
            part(Env(env.vars, venv.bufs, "V", env.block))

    return copy


def _plain_copy(s: Copy):
    src, dst = s.src, s.dst
    check_reshape(src.extent, dst.extent, s, "copy")
    s_starts, d_starts = compile_starts(src), compile_starts(dst)
    s_ext, d_ext = src.extent, dst.extent
    s_shape, d_shape = src.buffer.shape, dst.buffer.shape
    s_name, d_name = src.buffer.name, dst.buffer.name
    s_dt = dtypes.to_numpy(src.buffer.dtype)
    reshape = s_ext != d_ext

    def copy(env):
        ss, ds = s_starts(env), d_starts(env)
        sarr, darr = _buffer(env, s_name), _buffer(env, d_name)
        # read, padding the out-of-bounds part with zeros
        if all(a >= 0 and a + e <= n for a, e, n in zip(ss, s_ext, s_shape)):
            tile = sarr[tuple(slice(a, a + e) for a, e in zip(ss, s_ext))]
        else:
            tile = np.zeros(s_ext, s_dt)
            lo = [min(max(a, 0), n) for a, n in zip(ss, s_shape)]
            hi = [max(min(a + e, n), 0) for a, e, n in zip(ss, s_ext, s_shape)]
            if all(h > l for l, h in zip(lo, hi)):
                tile[tuple(slice(l - a, h - a) for l, h, a in zip(lo, hi, ss))] = \
                    sarr[tuple(slice(l, h) for l, h in zip(lo, hi))]
        if reshape:
            tile = tile.reshape(d_ext)
        # write only the in-bounds part of dst (cast by assignment)
        if all(a >= 0 and a + e <= n for a, e, n in zip(ds, d_ext, d_shape)):
            darr[tuple(slice(a, a + e) for a, e in zip(ds, d_ext))] = tile
        else:
            lo = [min(max(a, 0), n) for a, n in zip(ds, d_shape)]
            hi = [max(min(a + e, n), 0) for a, e, n in zip(ds, d_ext, d_shape)]
            if all(h > l for l, h in zip(lo, hi)):
                darr[tuple(slice(l, h) for l, h in zip(lo, hi))] = \
                    tile[tuple(slice(l - a, h - a) for l, h, a in zip(lo, hi, ds))]

    return copy


def matrix_ext(r: Region, stmt, what: str) -> tuple[int, int]:
    """The (rows, cols) of gemm operand `r`, leading extent-1 dims dropped."""
    ext = list(r.extent)
    while len(ext) > 2 and ext[0] == 1:
        ext.pop(0)
    if len(ext) != 2:
        raise CompileError(f"gemm operand {what} ({r.buffer.name}) must be a 2-d tile "
                           f"(leading extent-1 dims allowed), got extent {list(r.extent)}",
                           stmt.loc)
    return ext[0], ext[1]


def gemm_shape(s: Gemm) -> tuple[int, int, int]:
    """(M, N, K) of `s` after its transposes; a CompileError where A, B and C disagree."""
    am, ak = matrix_ext(s.a, s, "A")
    bk, bn = matrix_ext(s.b, s, "B")
    cm, cn = matrix_ext(s.c, s, "C")
    if s.transpose_a:
        am, ak = ak, am
    if s.transpose_b:
        bk, bn = bn, bk
    if ak != bk or (am, bn) != (cm, cn):
        raise CompileError(f"gemm shapes do not agree: A is ({am}, {ak}), B is ({bk}, {bn}), "
                           f"C is ({cm}, {cn})", s.loc)
    return cm, cn, ak


def _gemm(s: Gemm):
    gemm_shape(s)
    va, vb, vc = region_view(s.a), region_view(s.b), region_view(s.c)
    a2, b2, c2 = (matrix_ext(r, s, "") for r in (s.a, s.b, s.c))
    ta, tb, clear = s.transpose_a, s.transpose_b, s.clear_accum

    def gemm(env):
        a = va(env).reshape(a2).astype(F32)
        b = vb(env).reshape(b2).astype(F32)
        if ta:
            a = a.T
        if tb:
            b = b.T
        c = vc(env).reshape(c2)  # dropping extent-1 dims keeps this a view
        prod = np.matmul(a, b)
        c[...] = prod if clear else c.astype(F32) + prod

    return gemm


def _fill(s: Fill):
    view = region_view(s.dst)
    fv, _ = compile_expr(s.value)

    def fill(env):
        view(env)[...] = fv(env)

    return fill


_REDUCE = {"sum": np.sum, "abssum": np.sum, "max": np.max, "absmax": np.max, "min": np.min}
_COMBINE = {"sum": np.add, "abssum": np.add, "max": np.maximum, "absmax": np.maximum,
            "min": np.minimum}


def _reduce(s: Reduce):
    if s.kind not in _REDUCE:
        raise CompileError(f"unknown reduction {s.kind!r}", s.loc)
    ndim = len(s.src.extent)
    if not -ndim <= s.dim < ndim:
        raise CompileError(f"reduce dim {s.dim} out of range for a {ndim}-d source", s.loc)
    dim = s.dim % ndim
    out_ext = s.src.extent[:dim] + s.src.extent[dim + 1:]
    check_reshape(out_ext, s.dst.extent, s, f"reduce_{s.kind} result")
    vs, vd = region_view(s.src), region_view(s.dst)
    red, comb = _REDUCE[s.kind], _COMBINE[s.kind]
    absolute, clear, d_ext = s.kind.startswith("abs"), s.clear, s.dst.extent

    def reduce(env):
        x = vs(env).astype(F32)
        if absolute:
            x = np.abs(x)
        r = red(x, axis=dim).reshape(d_ext)
        d = vd(env)
        if not clear:
            r = comb(d.astype(F32), r)
        d[...] = r

    return reduce


def _sort(s: Sort):
    """Each row of the values tile sorted (largest first when descending; ties by the smaller
    index), its indices tile permuted alike."""
    vname, iname = s.values.buffer.name, s.indices.buffer.name
    desc = s.descending

    def sort(env):
        v, ix = _buffer(env, vname), _buffer(env, iname)
        n = v.shape[-1]
        vv, ii = v.reshape(-1, n), ix.reshape(-1, n)
        for r in range(vv.shape[0]):
            key = vv[r].astype(np.float64)
            order = np.lexsort((ii[r], -key if desc else key))
            vv[r], ii[r] = vv[r][order], ii[r][order]

    return sort


def _store(s: Store):
    buf = s.buffer
    name = buf.name
    idx_fns = [compile_expr(i)[0] for i in s.indices]
    fv, _ = compile_expr(s.value)

    def store(env):
        arr = _buffer(env, name)
        idx = check_indices(tuple(f(env) for f in idx_fns), buf)
        v = fv(env)
        if isinstance(v, np.ndarray) and v.ndim:
            target = np.broadcast_shapes(*(np.shape(i) for i in idx)) if idx else ()
            try:
                if np.broadcast_shapes(target, v.shape) != target:
                    raise ValueError
            except ValueError:
                raise Fault(f"value of shape {v.shape} does not fit the indexed elements of "
                            f"{name} (shape {target}); a Parallel loop variable that is not "
                            f"used in the indices would make this a reduction") from None
        if arr.dtype.kind in "iu" and not isinstance(v, np.ndarray):
            v = np.asarray(v, np.int64).astype(arr.dtype)  # wrap, as the element type does
        arr[idx] = v

    return store


def _nop(s):
    return lambda env: None


INSTR_HANDLERS = {
    Alloc: _alloc, Copy: _copy, Gemm: _gemm, Fill: _fill, Reduce: _reduce, Sort: _sort,
    Store: _store,
    **dict.fromkeys(SYNC_OPS, _nop),
}


def lower_instruction(stmt):
    """The located closure `fn(env)` executing one leaf statement."""
    try:
        handler = INSTR_HANDLERS[type(stmt)]
    except KeyError:
        raise TypeError(f"{type(stmt).__name__} is not a single instruction") from None
    try:
        fn = handler(stmt)
    except CompileError as e:
        if e.loc.line or not stmt.loc.line:
            raise
        raise CompileError(e.message, stmt.loc) from None
    return located(fn, stmt)


_CACHE: dict[int, tuple] = {}


def execute(stmt, env: Env) -> None:
    """Execute one instruction in `env` (closures are cached per statement object)."""
    hit = _CACHE.get(id(stmt))
    if hit is None or hit[0] is not stmt:
        hit = (stmt, lower_instruction(stmt))
        _CACHE[id(stmt)] = hit
    hit[1](env)
