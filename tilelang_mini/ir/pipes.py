"""Which pipe runs an instruction: derived from the op and the scopes of its buffers (design 5).

    GM -> L1, GM -> UB           MTE2        L1 -> L0A, L0B       MTE1
    L0A x L0B -> L0C (gemm)      M           L0C -> GM, L1, UB    FIX
    UB -> GM, UB -> L1           MTE3        UB -> UB, UB maps    V
    scalar stores, maps on GM    S (the scalar unit, element by element)
"""
from __future__ import annotations

from .analysis import GM_SCOPES
from .nodes import Copy, Fill, For, Gemm, Reduce, Sort, Store, Load, walk

SCALAR_SCOPES = {"var", "UB", *GM_SCOPES}

COPY_PIPES = {
    ("GM", "L1"): "MTE2", ("GM", "UB"): "MTE2",
    ("L1", "L0A"): "MTE1", ("L1", "L0B"): "MTE1",
    ("L0C", "GM"): "FIX", ("L0C", "L1"): "FIX", ("L0C", "UB"): "FIX",
    ("UB", "GM"): "MTE3", ("UB", "L1"): "MTE3",
    ("UB", "UB"): "V",
}
FILL_PIPES = {"L0C": "M", "UB": "V", "L1": "MTE2", "L0A": "MTE1", "L0B": "MTE1", "var": "S"}


def _space(scope: str) -> str:
    return "GM" if scope in GM_SCOPES else scope


def copy_pipe(src_scope: str, dst_scope: str) -> str | None:
    return COPY_PIPES.get((_space(src_scope), _space(dst_scope)))


def pipe_of(stmt, core=None) -> str | None:
    """The pipe of a lowered instruction, or None when it is not (yet) a pipe instruction."""
    if isinstance(stmt, Copy):
        return copy_pipe(stmt.src.buffer.scope, stmt.dst.buffer.scope)
    if isinstance(stmt, Gemm):
        if (stmt.a.buffer.scope, stmt.b.buffer.scope, stmt.c.buffer.scope) == ("L0A", "L0B", "L0C"):
            return "M"
        return None
    if isinstance(stmt, Fill):
        return FILL_PIPES.get(stmt.dst.buffer.scope)
    if isinstance(stmt, Reduce):
        return "V" if stmt.src.buffer.scope == "UB" and stmt.dst.buffer.scope == "UB" else None
    if isinstance(stmt, Sort):
        return "V" if stmt.values.buffer.scope == stmt.indices.buffer.scope == "UB" else None
    if isinstance(stmt, (For, Store)) and (isinstance(stmt, Store) or stmt.kind == "parallel"):
        stores = stmt.body if isinstance(stmt, For) else (stmt,)
        scopes = {n.buffer.scope for s in stores for n in walk(s) if isinstance(n, (Store, Load))}
        if isinstance(stmt, For) and scopes and scopes <= {"UB", "var"} and "UB" in scopes:
            return "V"
        if scopes <= SCALAR_SCOPES:  # the scalar unit reaches registers, UB and GM
            return "S"
        return None
    return None
