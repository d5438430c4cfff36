"""Small pieces the frontend's modules share."""
from __future__ import annotations

import ast

from ..ir.nodes import Buffer
from .exprs import is_ir


class Marker:
    """What a `T.name` evaluates to inside a kernel."""

    def __init__(self, name: str):
        self.name = name


class LanguageNamespace:
    """The `T` module as seen inside a kernel."""


def is_docstring(s) -> bool:
    return isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) and isinstance(s.value.value, str)


def show(v) -> str:
    if isinstance(v, Buffer):
        return f"buffer '{v.name}'"
    if is_ir(v):
        from ..ir.printer import print_expr
        return f"'{print_expr(v)}' (not a constant)"
    if isinstance(v, Marker):
        return f"T.{v.name}"
    return repr(v)
