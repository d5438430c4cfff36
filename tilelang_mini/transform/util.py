"""Small rewriting helpers shared by the passes."""
from __future__ import annotations

from dataclasses import replace

from ..ir.nodes import (
    Alloc, Buffer, If, Kernel, Region, Scope, Var, body_fields, transform,
)


def fresh_name(base: str, taken: set) -> str:
    """`base`, else `base1`, `base2`, ...: the first name not in `taken` (added to it)."""
    name, n = base, 0
    while name in taken:
        n += 1
        name = f"{base}{n}"
    taken.add(name)
    return name


def substitute(node, mapping: dict):
    """Replace variables by expressions (`mapping`: name -> Expr) everywhere below `node`."""
    return _replace_named(node, mapping, Var)


def rebuffer(node, mapping: dict):
    """Replace buffers (`mapping`: name -> Buffer) everywhere below `node`."""
    return _replace_named(node, mapping, Buffer)


def _replace_named(node, mapping: dict, kind):
    if not mapping:
        return node
    return transform(node, lambda n: mapping.get(n.name, n) if isinstance(n, kind) else n)


def map_bodies(stmt, fn):
    """Apply `fn(list_of_stmts) -> list_of_stmts` to every statement list of `stmt`."""
    changes = {f: tuple(fn(list(getattr(stmt, f)))) for f in body_fields(stmt)}
    return replace(stmt, **changes) if changes else stmt


def all_allocs(body) -> list[Alloc]:
    out = []
    for s in body:
        if isinstance(s, Alloc):
            out.append(s)
        for f in body_fields(s):
            out += all_allocs(getattr(s, f))
    return out


def strip_allocs(body) -> list:
    """`body` without Alloc statements (at any depth)."""
    out = []
    for s in body:
        if isinstance(s, Alloc):
            continue
        out.append(map_bodies(s, strip_allocs))
    return out


def group_scopes(items) -> list:
    """[(core or None, stmt)] -> statements, each run of one core's statements in its Scope."""
    out, run, core = [], [], None
    for c, st in items:
        if c != core and run:
            out.append(Scope(core, tuple(run), run[0].loc))
            run = []
        core = c
        if c is None:
            out.append(st)
        else:
            run.append(st)
    if run:
        out.append(Scope(core, tuple(run), run[0].loc))
    return out


def with_body(kernel: Kernel, body) -> Kernel:
    return replace(kernel, body=tuple(body))


__all__ = ["substitute", "rebuffer", "map_bodies", "all_allocs", "strip_allocs", "with_body", "Region", "If", "Scope"]
