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
    """What `T.get_thread_binding(dim)` evaluates to in a first trace: a GPU thread's index.
    The one-thread guard `tx == 0` (true) / `tx != 0` (false) and the thread groups of tile
    work (`if tx < c:`, control.thread_split) keep their meaning with it; any other use is
    per-thread (SIMT) code: `SimtUse`, and the kernel block is traced again in per-thread
    mode (simt.py), where the index is an IR variable of the threads' map."""

    def __init__(self, dim: int):
        self.dim = dim

    def __repr__(self) -> str:
        return f"T.get_thread_binding({self.dim})"


SIMT_ADVICE = (
    "T.get_thread_binding() is a GPU thread's index and this use makes the code per-thread "
    "(SIMT): it runs here inside `with T.Kernel(..., threads=...)`, the block's threads in "
    "lockstep (each statement a map over the threads)")


class SimtUse(CompileError):
    """A per-thread use of a GPU thread index: the kernel block is traced again in per-thread
    mode (simt.py); raised with SIMT_ADVICE where that mode cannot be entered."""

    def __init__(self, loc=None, line=None):
        super().__init__(SIMT_ADVICE, loc, line)


class ThreadScalar(CompileError):
    """A per-thread write of a block scalar (T.alloc_var) in per-thread code: the kernel block
    is traced again with that scalar one per thread (simt.py)."""

    def __init__(self, name: str, message: str, loc=None, line=None):
        super().__init__(message, loc, line)
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
    if isinstance(v, ThreadIndex):
        return f"{v!r} (a GPU thread index)"
    return repr(v)
