"""Trace-time arithmetic: Python values fold at once; IR expressions are built and simplified."""
from __future__ import annotations

import operator

from ..ir import dtypes
from ..ir.nodes import BinOp, Call, Const, Expr, Load, Cast, Reinterpret, Var

_PY_OPS = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
    "//": operator.floordiv, "%": operator.mod, "<": operator.lt, "<=": operator.le,
    ">": operator.gt, ">=": operator.ge, "==": operator.eq, "!=": operator.ne,
    "and": lambda a, b: a and b, "or": lambda a, b: a or b,
    "&": operator.and_, "|": operator.or_, "^": operator.xor, "<<": operator.lshift,
    ">>": operator.rshift,
}
# Python's bit operators and the IR calls they become (integers only).
BIT_CALLS = {"&": "bitwise_and", "|": "bitwise_or", "^": "bitwise_xor", "<<": "shift_left",
             ">>": "shift_right"}
BIT_SYMBOLS = {v: k for k, v in BIT_CALLS.items()}

IR_TYPES = (Const, Var, BinOp, Call, Cast, Reinterpret, Load)


def is_ir(v) -> bool:
    return isinstance(v, IR_TYPES)


def is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) or isinstance(v, bool)


def plain_number(v):
    """T.IntImm / T.FloatImm (factory results of T.max, T.ceildiv, ...) as plain int / float."""
    if isinstance(v, int) and type(v) not in (int, bool):
        return int(v)
    if isinstance(v, float) and type(v) is not float:
        return float(v)
    return v


def const(v) -> Const:
    if isinstance(v, bool):
        return Const(v, "bool")
    if isinstance(v, int):
        return Const(v, "int32")
    if isinstance(v, float):
        return Const(v, "float32")
    raise TypeError(v)


def as_expr(v) -> Expr:
    """An IR expression for a trace-time value (numbers become constants)."""
    if is_ir(v):
        return v
    return const(v)


def binop(op: str, a, b):
    """a op b: Python result when both are Python numbers, else a (folded) IR expression."""
    if not is_ir(a) and not is_ir(b):
        return _PY_OPS[op](a, b)
    a, b = as_expr(a), as_expr(b)
    if isinstance(a, Const) and isinstance(b, Const):
        return const(_PY_OPS[op](a.value, b.value))
    if op in BIT_CALLS:
        return _wrap_u32(op, (a, b), Call(BIT_CALLS[op], (a, b)))
    # Identities that keep index arithmetic readable.
    if op in ("+", "-") and isinstance(b, Const) and b.value == 0 and b.dtype == "int32":
        return a
    if op == "+" and isinstance(a, Const) and a.value == 0 and a.dtype == "int32":
        return b
    if op == "*" and isinstance(b, Const) and b.value == 1 and b.dtype == "int32":
        return a
    if op == "*" and isinstance(a, Const) and a.value == 1 and a.dtype == "int32":
        return b
    return _wrap_u32(op, (a, b), BinOp(op, a, b))


# uint32 arithmetic that can leave 32 bits: TVM types `a * b` of a uint32 value as uint32, and
# CUDA computes it in 32 bits, so a hash's `h * 2654435761` wraps before `h >> 16` reads it.
# (Other integers compute exactly, as 64-bit values, and wrap where they are stored.)
_U32_WRAPS = ("+", "-", "*", "<<")


def _wrap_u32(op, args, e):
    """`e` (a op b), cast to uint32 where an operand is a uint32 value, the other an integer
    of at most 32 bits, and op can leave 32 bits:

        h * 2654435761 (h: uint32)  ->  cast(h * 2654435761, "uint32")
    """
    if op not in _U32_WRAPS and op != "~":
        return e
    kinds = [static_dtype(x) for x in args]
    if "uint32" not in kinds or any(k is None or k == "bool" or dtypes.is_float(k)
                                    or k == "int64" for k in kinds):
        return e
    return Cast("uint32", e)


def linear(e, atoms: bool = False) -> tuple[dict, int] | None:
    """e as ({var: coef}, const) when it is an affine integer expression, else None. With
    `atoms`, a non-affine part (`x // 2`, `min(a, b)`, a load) counts as one opaque variable,
    so that `(cid // n + 1) * 64 - cid // n * 64` is still the constant 64."""
    if isinstance(e, int) and not isinstance(e, bool):
        return {}, e
    if isinstance(e, Const) and e.dtype == "int32":
        return {}, e.value
    if isinstance(e, Var):
        return {e.name: 1}, 0
    if isinstance(e, BinOp) and e.op in ("+", "-", "*"):
        la, lb = linear(e.a, atoms), linear(e.b, atoms)
        if la is None or lb is None:
            return None
        if e.op == "*":
            if not la[0]:
                la, lb = lb, la
            if lb[0]:
                return ({e: 1}, 0) if atoms else None
            k = lb[1]
            return {v: c * k for v, c in la[0].items()}, la[1] * k
        sign = 1 if e.op == "+" else -1
        coefs = dict(la[0])
        for v, c in lb[0].items():
            coefs[v] = coefs.get(v, 0) + sign * c
        return {v: c for v, c in coefs.items() if c}, la[1] + sign * lb[1]
    if isinstance(e, BinOp) and e.op in ("//", "%") and isinstance(e.b, Const) \
            and e.b.dtype == "int32" and e.b.value > 0:
        # (d*m + c) // d == m + c // d and (d*m + c) % d == c % d for an integer m
        d, la = e.b.value, linear(e.a, atoms)
        if la is not None and all(c % d == 0 for c in la[0].values()):
            if e.op == "%":
                return {}, la[1] % d
            return {v: c // d for v, c in la[0].items()}, la[1] // d
    if atoms and isinstance(e, (BinOp, Call, Load, Cast)):
        return {e: 1}, 0
    return None


def constant_difference(stop, start) -> int | None:
    """stop - start when it does not depend on any variable (slice extents)."""
    ls, lt = linear(stop, True), linear(start, True)
    if ls is None or lt is None:
        return None
    coefs = dict(ls[0])
    for v, c in lt[0].items():
        coefs[v] = coefs.get(v, 0) - c
    if any(coefs.values()):
        return None
    return ls[1] - lt[1]


def bit_not(v, builder=None, node=None):
    """~v: Python at trace time, else the IR call."""
    if not is_ir(v):
        if not isinstance(v, int) or isinstance(v, bool):
            raise builder.error(node, "~ (bitwise_not) takes an integer")
        return ~v
    return _wrap_u32("~", (v,), Call("bitwise_not", (v,)))


_INT_OF_SIZE = {1: "int8", 2: "int16", 4: "int32", 8: "int64"}


def static_dtype(e) -> str | None:
    """The dtype an expression's value has before any store: its buffer's, its cast's; for
    arithmetic, float32 when a float is involved, else int32; None when unknown."""
    if isinstance(e, Load):
        return e.buffer.dtype
    if isinstance(e, (Cast, Reinterpret, Const)):
        return e.dtype
    if isinstance(e, Var):
        return e.dtype
    if isinstance(e, BinOp):
        if e.op in ("<", "<=", ">", ">=", "==", "!=", "and", "or"):
            return "bool"
        kinds = {static_dtype(e.a), static_dtype(e.b)}
        return "float32" if e.op == "/" or any(k and dtypes.is_float(k) for k in kinds) else \
            _int_kind(kinds)
    if isinstance(e, Call):
        if e.fn in ("exp", "exp2", "log", "sqrt", "rsqrt", "sin", "cos"):
            return "float32"
        kinds = {static_dtype(a) for a in (e.args[1:] if e.fn == "select" else e.args)}
        return "float32" if any(k and dtypes.is_float(k) for k in kinds) else _int_kind(kinds)
    return None


def _int_kind(kinds) -> str:
    """The integer dtype of arithmetic on values of `kinds`: uint32 when one is (and none is
    64-bit: TVM's uint32 ^ literal, uint32 * literal are uint32), else int32."""
    return "uint32" if "uint32" in kinds and "int64" not in kinds else "int32"


def reinterpret(v: Expr, dtype: str, builder, node):
    """T.reinterpret(v, dtype): v's bits as `dtype`. v's own dtype is its static one; an integer
    expression counts as an integer of dtype's size (values are exact integers)."""
    src = static_dtype(v)
    size = dtypes.itemsize(dtype)
    if src is not None and not dtypes.is_float(src) and src != "bool":
        src = src if dtypes.itemsize(src) == size else _INT_OF_SIZE.get(size, src)
    if src is None or src == "bool" or dtypes.itemsize(src) != size:
        have = "a value of unknown dtype" if src is None else f"a {src} value"
        raise builder.error(node, f"T.reinterpret to {dtype} ({size} bytes) needs a value of "
                                  f"{size} bytes; got {have}: T.cast it to a {size}-byte dtype "
                                  "first")
    return Reinterpret(dtype, src, v)


def region_index(region, names) -> tuple:
    """(indices into region.buffer, loop extents) for loop variables `names` that run over the
    region's dimensions of extent != 1 (the last one when all are 1), in order:

        A[r0 +: 1, c0 +: 16], names (j,)  ->  ((r0, c0 + j), (Const(16),))
    """
    from ..ir.nodes import Var
    dims = region_dims(region)
    at = {d: Var(n) for d, n in zip(dims, names)}
    idx = tuple(as_expr(binop("+", s, at[d]) if d in at else s)
                for d, s in enumerate(region.start))
    return idx, tuple(const(region.extent[d]) for d in dims)


def region_dims(region) -> list:
    """The dimensions of extent != 1 of a region (the last one when all are 1)."""
    return [d for d, e in enumerate(region.extent) if e != 1] or [len(region.extent) - 1]
