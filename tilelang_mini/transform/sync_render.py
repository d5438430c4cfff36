"""The channels insert_sync decided, written into the statement tree: each `set_flag` after its
producer, each `wait_flag` before its consumer (or right after the set, in a branch), the primes
before a loop and the drains after it, `pipe_barrier(V)` before a dependent vector instruction;
then the items flattened back to statements, grouped into one `Scope` per core run:

    items (Instr, Block) + channels      ->   Scope("C", (copy, set_flag(MTE2, MTE1, 0), ...))
                                              Scope("V", (...))

Control flow that only one core runs goes inside that core's Scope (its condition may read `vid`).
"""
from __future__ import annotations

from dataclasses import replace

from ..ir.happens_before import Instr
from ..ir.nodes import Alloc, For, PipeBarrier, SetCrossFlag, SetFlag, WaitCrossFlag, WaitFlag
from .util import group_scopes


def render(tree, channels) -> list:
    """The statements of `tree` (build_tree's items) with every channel's flags placed (it fills
    the items' `before`/`after` lists, which insert_sync built for this one use)."""
    for ch in channels:
        loc = ch.loc
        if ch.kind == "barrier":
            ch.wait_at.before.append((ch.dst[0], PipeBarrier(ch.dst[1], loc)))
            continue
        if ch.kind == "flag":
            set_ = SetFlag(ch.src[1], ch.dst[1], ch.event, loc)
            wait = WaitFlag(ch.src[1], ch.dst[1], ch.event, loc)
        else:
            set_ = SetCrossFlag(ch.src[1], ch.event, loc)
            wait = WaitCrossFlag(ch.dst[1], ch.event, loc)
        ch.set_at.after.append((ch.src[0], set_))
        if ch.wait_after:
            ch.set_at.after.append((ch.dst[0], wait))
        else:
            ch.wait_at.before.append((ch.dst[0], wait))
        if ch.primed is not None:
            ch.primed.before.append((ch.src[0], set_))
            ch.primed.after.append((ch.dst[0], wait))
    return _emit(tree)


def _cores(items) -> set:
    """The cores that run anything in `items` (instructions and the sync placed around them)."""
    out = set()
    for it in items:
        if isinstance(it, Alloc):
            continue
        out |= {core for core, _ in it.before + it.after}
        if isinstance(it, Instr):
            if not it.probe:
                out.add(it.core)
        else:
            for body in it.bodies:
                out |= _cores(body)
    return out


def _emit(items, in_scope=False) -> list:
    flat: list = []  # (core or None, stmt)
    for it in items:
        if isinstance(it, Alloc):
            flat.append((None, it))
            continue
        flat += it.before
        if isinstance(it, Instr):
            if not it.probe:
                flat.append((it.core, it.stmt))
        else:
            # Control flow that only one core runs goes inside that core's Scope: its
            # condition may read `vid`, which only means something on a vector core.
            cores = _cores([replace(it, before=[], after=[])])
            core = next(iter(cores)) if len(cores) == 1 and not in_scope else None
            inner = in_scope or core is not None
            s = it.stmt
            if isinstance(s, For):
                s = replace(s, body=tuple(_emit(it.bodies[0], inner)))
            else:
                s = replace(s, then_body=tuple(_emit(it.bodies[0], inner)),
                            else_body=tuple(_emit(it.bodies[1], inner)))
            flat.append((core, s))
        flat += it.after
    if in_scope:
        return [s for _, s in flat]
    return group_scopes(flat)
