"""`tvm.tirx` (and `tvm.tir`): TIR expression constructors as kernel-language markers.

Each name is a marker the frontend resolves inside a kernel; called outside one it raises.
`PrimExpr`, `Var`, `Buffer` exist for annotations (`val: tirx.PrimExpr`)."""
from __future__ import annotations

from .. import language as _T

# tirx name -> the kernel-language name it means (the T. markers, or the two tvm.* spellings
# whose arguments differ from T.'s: const(value, dtype) and reinterpret(dtype, value))
_SAME = {
    "Cast": "Cast", "Select": "Select", "if_then_else": "if_then_else", "Min": "min",
    "Max": "max", "min": "min", "max": "max", "shift_left": "shift_left",
    "shift_right": "shift_right", "bitwise_and": "bitwise_and", "bitwise_or": "bitwise_or",
    "bitwise_xor": "bitwise_xor", "bitwise_not": "bitwise_not", "exp": "exp", "exp2": "exp2",
    "log": "log", "log2": "log2", "sqrt": "sqrt", "rsqrt": "rsqrt", "abs": "abs",
    "floordiv": "floordiv", "floormod": "floormod", "truncdiv": "truncdiv",
    "truncmod": "truncmod", "sigmoid": "sigmoid", "tanh": "tanh", "erf": "erf",
    "floor": "floor", "ceil": "ceil", "round": "round", "trunc": "trunc", "pow": "pow",
    "nearbyint": "nearbyint", "isnan": "isnan", "isinf": "isinf", "isfinite": "isfinite",
    "tan": "tan", "And": "And", "Or": "Or", "Not": "Not",
}
_OWN = ("const", "reinterpret")


def _marker(tl_name: str, py_name: str):
    def marker(*args, **kwargs):
        raise RuntimeError(f"tvm.tirx.{py_name} can only be used inside a T.prim_func kernel "
                           "(or a helper it calls)")

    marker.__name__ = marker.__qualname__ = py_name
    marker._tl_name = tl_name
    return marker


for _py, _tl in _SAME.items():
    globals()[_py] = _marker(_tl, _py)
for _py in _OWN:
    globals()[_py] = _marker("tvm." + _py, _py)
del _py, _tl


class PrimExpr:
    """TVM's expression type: an annotation only (kernel values are IR expressions here)."""


class Var(PrimExpr):
    pass


class IntImm(PrimExpr):
    pass


Buffer = _T.Tensor

__all__ = [*_SAME, *_OWN, "PrimExpr", "Var", "IntImm", "Buffer"]
