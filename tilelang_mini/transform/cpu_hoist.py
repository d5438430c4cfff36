"""hoist_private_work (llvm target): a core's work on its own buffers moves up to what it needs.

On the llvm target the cores of a block run their Scopes one after the other in program order
(or, when they must interleave, as coroutines switching at cross-core flags). A statement of a
Scope("V") that touches only the vector core's private buffers (UB, fragments: one copy per vid,
nothing another core or block can see) and holds no cross-core flag, separated from an earlier
Scope("V") of the same statement list only by Scopes of other cores that do not touch its
buffers, moves into that earlier Scope, right after the last statement there that writes what it
reads or accesses what it writes (the flags within the core following that statement stay before
it). A copy-in and the vector work reading it then sit side by side, so the later CPU passes can
fuse them into one pass over the data (fuse_rows, fuse_row_copies):

    with Scope("V"):                                   with Scope("V"):
        copy(A[r +: 32, k +: 128], A_ub)                   copy(A[r +: 32, k +: 128], A_ub)
        set_flag(MTE2, V, 0)                               set_flag(MTE2, V, 0)
        wait_flag(MTE2, V, 0)                              wait_flag(MTE2, V, 0)
        copy(A_ub, A_ws[vid * 32 +: 32, 0 +: 128]) ->      for i, j in Parallel(32, 128):
    with Scope("C"):                                           sq[i, j] = A_ub[i, j] * A_ub[i, j]
        gemm(A_ws, B_s, D_f, transpose_B=True)             reduce_sum(sq, ss, dim=1, clear=False)
    with Scope("V"):                                       copy(A_ub, A_ws[vid * 32 +: 32, 0 +: 128])
        pipe_barrier(V)                                with Scope("C"):
        for i, j in Parallel(32, 128):                     gemm(A_ws, B_s, D_f, transpose_B=True)
            sq[i, j] = A_ub[i, j] * A_ub[i, j]         with Scope("V"):
        reduce_sum(sq, ss, dim=1, clear=False)             pipe_barrier(V)

A statement never moves before a wait for another core (wait_cross_flag) of either Scope: in
coroutine mode such a wait may order a write of the other core into this core's buffers.

Why the results are unchanged: in program order the moved statement only trades places with
statements that neither write what it reads nor access what it writes (the other cores' Scopes
between, the statements of the earlier Scope after the insertion point), and its buffers are per
vid, so running vid 0's copy of it before vid 1's part of the earlier Scope changes nothing.
In coroutine mode a core's own program order is what it was: the statement still follows
everything of its core it followed, and it touches nothing a cross-core flag guards. The flags
within the core (set/wait_flag, pipe_barrier) left behind order nothing on a CPU.
"""
from __future__ import annotations

from dataclasses import replace

from ..ir.analysis import BLOCK_SCOPES, SYNC_OPS, written_names
from ..ir.nodes import (
    Alloc, For, Kernel, Region, Load, Scope, SetCrossFlag, Store, WaitCrossFlag, body_fields,
    walk,
)

_CROSS = (SetCrossFlag, WaitCrossFlag)


def _names(stmt) -> tuple[set, set]:
    """(names of every buffer a statement and its nested statements reference, names of those
    it writes): a reference counts as a read (conservative)."""
    refs = {n.buffer.name for n in walk(stmt) if isinstance(n, (Region, Load, Store))}
    return refs, written_names(stmt)


class _Hoist:
    def __init__(self, kernel: Kernel):
        self.params = {p.name for p in kernel.params}
        self.shared = set(self.params)
        for n in walk(kernel):
            if isinstance(n, Alloc) and n.buffer.scope in BLOCK_SCOPES:
                self.shared.add(n.buffer.name)

    def movable(self, s) -> bool:
        """Vector work on private buffers only, no flags across cores inside."""
        if isinstance(s, SYNC_OPS) or isinstance(s, Alloc):
            return False
        if any(isinstance(n, _CROSS) for n in walk(s)):
            return False
        rd, wr = _names(s)
        return bool(rd | wr) and not (rd | wr) & self.shared

    def body(self, stmts) -> tuple:
        out: list = []
        for s in stmts:
            if body_fields(s) and not (isinstance(s, For) and s.kind == "parallel") \
                    and not isinstance(s, Scope):
                s = replace(s, **{f: self.body(getattr(s, f)) for f in body_fields(s)})
            if isinstance(s, Scope) and s.core == "V":
                s = self.merge(out, s)
                if s is None:
                    continue
            out.append(s)
        return tuple(out)

    def merge(self, out: list, s: Scope):
        """Move what of Scope s can go into the last earlier Scope("V") of `out`; return what
        is left of s (None when nothing is)."""
        k = len(out) - 1
        between: list = []
        while k >= 0 and not (isinstance(out[k], Scope) and out[k].core == "V"):
            t = out[k]
            if not (isinstance(t, Scope) or isinstance(t, SYNC_OPS)):
                return s
            between.append(t)
            k -= 1
        if k < 0:
            return s
        target = list(out[k].body)
        kept, pos = [], None
        moved_any = blocked = False
        # never before a wait for another core: in coroutine mode it may be what orders a
        # write of the other core into this core's buffers (a dual L0C -> UB copy)
        waited = max((q + 1 for q, u in enumerate(target)
                      if any(isinstance(n, WaitCrossFlag) for n in walk(u))), default=0)
        for t in s.body:
            if isinstance(t, SYNC_OPS):  # the core's flags stay where they were
                kept.append(t)
                blocked |= isinstance(t, WaitCrossFlag)  # what follows a wait stays after it
                continue
            rd, wr = _names(t)
            if blocked or not self.movable(t) or any(_conflict(rd, wr, *_names(u))
                                                     for u in between):
                kept.append(t)
                blocked = True  # what follows keeps its place after it
                continue
            at = waited if pos is None else pos
            for q in range(len(target) - 1, at - 1, -1):
                if _conflict(rd, wr, *_names(target[q])):
                    at = q + 1
                    break
            while at < len(target) and isinstance(target[at], SYNC_OPS) \
                    and not isinstance(target[at], _CROSS):
                at += 1
            target.insert(at, t)
            pos = at + 1
            moved_any = True
        if not moved_any:
            return s
        out[k] = replace(out[k], body=tuple(target))
        return replace(s, body=tuple(kept)) if kept else None


def _conflict(rd, wr, rd2, wr2) -> bool:
    return bool(rd & wr2 or wr & (rd2 | wr2))


def hoist_private_work(kernel: Kernel) -> Kernel:
    """Vector-core statements on private buffers move up into the previous Scope("V"), next to
    the statements they depend on (module docstring)."""
    return replace(kernel, body=_Hoist(kernel).body(kernel.body))
