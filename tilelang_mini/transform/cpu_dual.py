"""mark_dual_copies (llvm target): the cube's L0C -> UB copies are marked as writing both AIVs.

On the NPU the FixPipe delivers an L0C tile to the UB of both vector cores of the block: each gets
its half of the rows when its UB tile has half the source rows, else all of them (semantics/ops.py
`dual_copy_parts`). Such a copy runs in the cube's program but writes the vector cores' buffers, so
a CPU running the program must address their copies of the destination, not a cube one. The pass
says so in the IR: every L0C -> UB copy inside a `Scope("C")` gets `dual=True` (the verifier
checks that no other copy has it, and that once one has it every such copy has it):

    with Scope("C"):                                  with Scope("C"):
        copy(C_l[0 +: 64, 0 +: 32], C_u)      ->          copy(C_l[0 +: 64, 0 +: 32], C_u, dual=True)

An L0C -> UB copy outside the cube's Scope (code every core runs) is a plain copy: the pass
clears a `dual=True` found anywhere else (IR text written by hand), so its output says what the
copies are whatever its input said.
"""
from __future__ import annotations

from dataclasses import replace

from ..ir.analysis import is_dual_copy
from ..ir.nodes import Copy, Kernel, Scope, body_fields
from .util import map_bodies


def mark_dual_copies(kernel: Kernel) -> Kernel:
    """Every L0C -> UB copy of the cube core gets `dual=True`, every other copy `dual=False`
    (module docstring)."""
    return replace(kernel, body=tuple(_mark(kernel.body, None)))


def _mark(stmts, core) -> list:
    out = []
    for s in stmts:
        if isinstance(s, Copy):
            dual = is_dual_copy(s, core)
            s = s if s.dual == dual else replace(s, dual=dual)
        elif body_fields(s):
            inner = s.core if isinstance(s, Scope) else core
            s = map_bodies(s, lambda body, inner=inner: _mark(body, inner))
        out.append(s)
    return out
