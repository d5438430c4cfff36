"""Shape symbols: `M, N = T.const("M, N")` (bound from the tensors an eager jit function is called
with, or by `f.compile(M=...)`) and `T.dynamic("m")`/`T.symbolic("m")` (bound per call: the kernel
is specialised for each distinct value; docs/tilelang_compat.md).

Arithmetic on symbols at trace time (`M // 2`, `T.ceildiv(M, bm) * n`) builds a small expression
that the frontend evaluates once the symbols are bound; comparing or branching on an unbound
symbol is a TypeError that says so."""
from __future__ import annotations

import operator

_OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "//": operator.floordiv,
        "%": operator.mod, "/": operator.truediv, "neg": operator.neg}


class SymExpr:
    """A trace-time integer expression over shape symbols."""

    def __init__(self, op: str, args: tuple):
        self.op = op
        self.args = args

    def symbols(self) -> set:
        out = set()
        for a in self.args:
            if isinstance(a, SymExpr):
                out |= a.symbols()
        return out

    def evaluate(self, values: dict):
        args = [a.evaluate(values) if isinstance(a, SymExpr) else a for a in self.args]
        return _OPS[self.op](*args)

    def _bin(op, swap=False):  # noqa: N805
        def method(self, other):
            if not isinstance(other, (int, SymExpr)) or isinstance(other, bool):
                return NotImplemented
            return SymExpr(op, (other, self) if swap else (self, other))
        return method

    __add__, __radd__ = _bin("+"), _bin("+", True)
    __sub__, __rsub__ = _bin("-"), _bin("-", True)
    __mul__, __rmul__ = _bin("*"), _bin("*", True)
    __floordiv__, __rfloordiv__ = _bin("//"), _bin("//", True)
    __mod__, __rmod__ = _bin("%"), _bin("%", True)

    def __neg__(self):
        return SymExpr("neg", (self,))

    def __pos__(self):
        return self

    def _unbound(self, *_):
        names = ", ".join(sorted(s.name for s in self.symbols()))
        raise TypeError(f"shape symbol(s) {names} have no value yet: they are bound when the "
                        "kernel is called with tensors (or by compile(name=value))")

    __lt__ = __le__ = __gt__ = __ge__ = __bool__ = __index__ = __int__ = _unbound

    def __repr__(self) -> str:
        if self.op == "neg":
            return f"-({self.args[0]!r})"
        return f"({self.args[0]!r} {self.op} {self.args[1]!r})"


class Symbol(SymExpr):
    """A named integer shape value not known until the kernel is called."""

    def __init__(self, name: str, dtype: str = "int32", kind: str = "const"):
        super().__init__("sym", ())
        self.name = name
        self.dtype = dtype
        self.kind = kind

    def symbols(self) -> set:
        return {self}

    def evaluate(self, values: dict):
        if self.name not in values:
            self._unbound()
        return values[self.name]

    def __repr__(self) -> str:
        return self.name

    __hash__ = object.__hash__
    __eq__ = object.__eq__


def resolve(value, values: dict):
    """`value` with every symbol expression in it evaluated (tuples and lists recursively)."""
    if isinstance(value, SymExpr):
        return value.evaluate(values)
    if isinstance(value, (tuple, list)):
        return type(value)(resolve(v, values) for v in value)
    return value


def has_symbols(value) -> bool:
    if isinstance(value, SymExpr):
        return True
    if isinstance(value, (tuple, list)):
        return any(has_symbols(v) for v in value)
    return False


def _names(spec) -> list[str]:
    if isinstance(spec, (list, tuple)):
        return [str(s) for s in spec]
    return [s.strip() for s in str(spec).replace(",", " ").split()]


def const(names, dtype: str = "int32"):
    """`M = T.const("M")` or `M, N = T.const("M, N")`: shape symbols of an eager jit function."""
    syms = [Symbol(n, dtype, "const") for n in _names(names)]
    return syms[0] if len(syms) == 1 else tuple(syms)


def dynamic(name: str, dtype: str = "int32"):
    """A symbolic dimension: the kernel is specialised for each value it is called with.
    `b, s = T.dynamic("b, s")` (a comma or space separated list, or a list of names) gives one
    per name, as `T.const` does."""
    syms = [Symbol(n, dtype, "dynamic") for n in _names(name)]
    return syms[0] if len(syms) == 1 else tuple(syms)


def symbolic(name: str, dtype: str = "int32"):
    syms = [Symbol(n, dtype, "symbolic") for n in _names(name)]
    return syms[0] if len(syms) == 1 else tuple(syms)
