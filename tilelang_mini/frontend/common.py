"""Small pieces the frontend's modules share."""
from __future__ import annotations

import ast

from ..errors import CompileError
from ..ir.nodes import Buffer
from .exprs import is_ir


class Marker:
    """What a `T.name` evaluates to inside a kernel."""

    def __init__(self, name: str):
        self.name = name


class ThreadIndex:
    """What `T.get_thread_binding(dim)` evaluates to: a GPU thread's index. This machine has no
    threads (the scalar unit of a core runs the kernel's code once), so the only use with a
    meaning is the one-thread guard `tx == 0` (true) / `tx != 0` (false); every other use is
    per-thread (SIMT) code, a located error with `SIMT_ADVICE`."""

    def __init__(self, dim: int):
        self.dim = dim

    def __repr__(self) -> str:
        return f"T.get_thread_binding({self.dim})"


SIMT_ADVICE = (
    "T.get_thread_binding() is a GPU thread's index, and this use of it (an index, arithmetic "
    "or a comparison other than == 0) makes the code per-thread (SIMT); this machine has no "
    "threads (a vector core works on whole tiles, its scalar unit runs the code once). Write "
    "the threads' work as a map, `for tx in T.Parallel(threads): ...`, with per-thread locals "
    "as tiles indexed by tx, cross-thread sums as T.reduce_sum and warp shuffles as reads of "
    "another tx's row; only the one-thread guard `if T.get_thread_binding() == 0:` keeps its "
    "meaning here (it holds once per core)")


class SimtUse(CompileError):
    """A per-thread use of a GPU thread index: the kernel block is traced again in per-thread
    mode (simt.py); raised with SIMT_ADVICE where that mode cannot be entered."""

    def __init__(self, loc=None, line=None):
        super().__init__(SIMT_ADVICE, loc, line)


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
    if isinstance(v, ThreadIndex):
        return f"{v!r} (a GPU thread index)"
    return repr(v)
