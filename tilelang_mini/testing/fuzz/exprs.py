"""Random element expressions, written twice: as DSL text and as float64 NumPy text.

A leaf is a tile element (`x[i, j]`), a row/column vector element, a constant or an index
expression (the element's global row or column as a float). Operations keep values finite and
well conditioned (log/sqrt/rsqrt of |a| + c, division by |b| + c), so a float32 result can be
compared with the float64 one at a tolerance proportional to the number of operations.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .case import EPS


@dataclass
class Expr:
    dsl: str
    ref: str
    nodes: int = 1
    cast_eps: float = 0.0          # largest epsilon of a T.cast inside (its rounding may differ)
    bound: float = 1.0             # a bound on |value| (keeps exp arguments small)
    features: set = field(default_factory=set)


def _un(name_dsl, name_ref, a: Expr, bound, feature) -> Expr:
    return Expr(name_dsl.format(a.dsl), name_ref.format(a.ref), a.nodes + 1, a.cast_eps, bound,
                a.features | {feature})


def gen_expr(d, leaves: list[Expr], depth: int, allow_casts=True) -> Expr:
    """A random expression over `leaves` of at most `depth` operations deep."""
    if depth <= 0 or d.boolean(0.25):
        if d.boolean(0.15):
            c = d.choice([0.5, 2.0, -1.5, 3.0, 0.25, 1e-3])
            return Expr(repr(c), repr(c), 1, 0.0, abs(c))
        return d.choice(leaves)
    kind = d.weighted(["bin", "un", "cast"], [5, 4, 1 if allow_casts else 0])
    a = gen_expr(d, leaves, depth - 1, allow_casts)
    if kind == "bin":
        b = gen_expr(d, leaves, depth - 1, allow_casts)
        op = d.choice(["+", "-", "*", "max", "min", "/"])
        nodes, ce = a.nodes + b.nodes + 1, max(a.cast_eps, b.cast_eps)
        feats = a.features | b.features
        if op in "+-":
            return Expr(f"({a.dsl} {op} {b.dsl})", f"({a.ref} {op} {b.ref})", nodes, ce,
                        a.bound + b.bound, feats)
        if op == "*":
            if a.bound * b.bound > 50:
                return a
            return Expr(f"({a.dsl} * {b.dsl})", f"({a.ref} * {b.ref})", nodes, ce,
                        a.bound * b.bound, feats)
        if op == "/":
            return Expr(f"({a.dsl} / (T.abs({b.dsl}) + 0.5))",
                        f"({a.ref} / (np.abs({b.ref}) + 0.5))", nodes + 2, ce, a.bound * 2,
                        feats | {"div"})
        fn = "maximum" if op == "max" else "minimum"
        return Expr(f"T.{op}({a.dsl}, {b.dsl})", f"np.{fn}({a.ref}, {b.ref})", nodes, ce,
                    max(a.bound, b.bound), feats | {op})
    if kind == "cast":
        dt = d.choice(["float16", "bfloat16"])
        return Expr(f'T.cast({a.dsl}, "{dt}")', f'rnd({a.ref}, "{dt}")', a.nodes + 1,
                    max(a.cast_eps, EPS[dt]), a.bound, a.features | {"cast"})
    op = d.choice(["exp", "exp2", "log", "sqrt", "rsqrt", "abs", "neg"])
    if op in ("exp", "exp2"):
        if a.bound > 6:
            return a
        base = 2.718281828459045 if op == "exp" else 2.0
        npf = "np.exp({})" if op == "exp" else "np.exp2({})"
        return _un("T." + op + "({})", npf, a, base ** a.bound, op)
    if op == "log":
        return _un("T.log(T.abs({}) + 1.0)", "np.log(np.abs({}) + 1.0)", a, a.bound, "log")
    if op == "sqrt":
        return _un("T.sqrt(T.abs({}) + 0.25)", "np.sqrt(np.abs({}) + 0.25)", a, a.bound ** 0.5 + 1,
                   "sqrt")
    if op == "rsqrt":
        return _un("T.rsqrt(T.abs({}) + 0.25)", "1.0 / np.sqrt(np.abs({}) + 0.25)", a, 2.0, "rsqrt")
    if op == "abs":
        return _un("T.abs({})", "np.abs({})", a, a.bound, "abs")
    return _un("(-{})", "(-{})", a, a.bound, "neg")
