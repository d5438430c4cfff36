"""split_maps (llvm target): every Parallel map becomes maps a CPU runs as one lane loop each.

A map means what NumPy does with it: each statement of its body runs over the whole iteration
space before the next one. A CPU runs a map as one loop over the lanes; statements can share that
loop only when no element one of them reads (or writes) is written by an earlier one at another
index. This pass makes that grouping, and everything else the loop cannot do, explicit:

* consecutive stores share a map when they are `fusable` (none reads a buffer an earlier one
  writes, or writes a buffer an earlier one reads, at other indices; no two write one buffer at
  different indices); otherwise the map is split between them;
* a store that reads its own target at other indices (`x[i, j] = x[j, i]`) first evaluates its
  right-hand side into a new tile of the target's dtype and shape of the iteration space (the
  assignment rounds once either way), then copies that in a second map;
* a serial loop or an `if` whose condition does not depend on the map's variables moves out of
  the map (one map per segment of its body);
* an `if` on the map's variables (a masked store) becomes one map per store under every
  condition around it (the code generator and-s them into the lane mask); a condition that
  reads what its branches write is first evaluated into a bool tile of the iteration space
  (`if_cond[i, j] = a[i, j] > 0`; `if if_cond[i, j]: a[i, j] = ...`).

    for i, j in Parallel(4, 8):                 for i, j in Parallel(4, 8):
        x[i, j] = a[i, j] + 1                       x[i, j] = a[i, j] + 1
        y[i, j] = x[i, j] * 2                       y[i, j] = x[i, j] * 2
        z[i, j] = y[i, 7 - j]             ->    for i, j in Parallel(4, 8):
        for k in serial(3):                         z[i, j] = y[i, 7 - j]
            w[i, j] = w[i, j] + b[k, j]         for k in serial(3):
        x[i, j] = x[j % 4, i]                       for i, j in Parallel(4, 8):
                                                        w[i, j] = w[i, j] + b[k, j]
                                                alloc x_rhs (4, 8) uninit
                                                for i, j in Parallel(4, 8):
                                                    x_rhs[i, j] = x[j % 4, i]
                                                for i, j in Parallel(4, 8):
                                                    x[i, j] = x_rhs[i, j]

What the code generator rejects (a loop extent that reads what the loop writes, an `if`
condition that does so in a map of run-time extents, a tile op in a map) is left in its map, so the error it reports stays the same. Fused
blocks are not entered (their map is one store already).
"""
from __future__ import annotations

from dataclasses import replace

from ..errors import CompileError
from ..ir.analysis import GM_SCOPES, SYNC_OPS, is_map
from ..ir.nodes import (
    Alloc, Buffer, Const, For, Fused, If, Kernel, Load, Store, Var, body_fields, walk,
)
from .util import fresh_name

__all__ = ["split_maps", "map_group_ok"]


def split_maps(kernel: Kernel) -> Kernel:
    """The kernel with every Parallel map split as the module docstring says."""
    taken = {n.name for n in walk(kernel) if isinstance(n, Buffer)}
    return replace(kernel, body=tuple(_statements(kernel.body, taken)))


def map_group_ok(stores) -> bool:
    """The stores of one map after split_maps can run in one lane loop (the code generator
    checks what it is given with this)."""
    return all(not _self_hazard(s) for s in stores) and all(
        _fusable(stores[:k], s) for k, s in enumerate(stores))


def _statements(stmts, taken: set) -> list:
    out = []
    for s in stmts:
        if is_map(s):
            out += _split(s, s.body, (), taken)
        elif isinstance(s, Fused) or not body_fields(s):
            out.append(s)
        else:
            out.append(replace(s, **{f: tuple(_statements(getattr(s, f), taken))
                                     for f in body_fields(s)}))
    return out


def _split(loop: For, body, guards: tuple, taken: set) -> list:
    """Statements meaning map `loop` over `body`, under `guards` (the masked ifs around it,
    outermost first, as (if, branch) pairs)."""
    names = set(loop.vars)
    out, group = [], []

    def flush():
        if group:
            out.append(_map(loop, tuple(group), guards))
            group.clear()

    for s in body:
        if isinstance(s, Store):
            if _self_hazard(s):
                flush()
                out.extend(_via_temp(loop, s, guards, taken))
            else:
                if group and not _fusable(group, s):
                    flush()
                group.append(s)
            continue
        flush()
        if isinstance(s, (*SYNC_OPS, Alloc)):
            out.append(s)
        elif isinstance(s, If) and (guards or _vars(s.cond) & names):
            if _cond_hazard(s) and all(isinstance(x, Const) and type(x.value) is int
                                       for x in loop.extents):
                pre, s = _cond_via_temp(loop, s, guards, taken)
                out += pre
            if _maskable(s):
                out += _split(loop, s.then_body, guards + ((s, "then"),), taken)
                out += _split(loop, s.else_body, guards + ((s, "else"),), taken)
            else:
                out.append(_map(loop, (s,), guards))
        elif isinstance(s, If) and not guards:
            out.append(replace(s, then_body=tuple(_split(loop, s.then_body, (), taken)),
                               else_body=tuple(_split(loop, s.else_body, (), taken))))
        elif (isinstance(s, For) and not is_map(s) and not guards
              and not _vars(s.extents) & names):
            out.append(replace(s, body=tuple(_split(loop, s.body, (), taken))))
        else:  # the code generator reports it
            out.append(_map(loop, (s,), guards))
    flush()
    return out


def _map(loop: For, stmts: tuple, guards: tuple) -> For:
    for s, branch in reversed(guards):
        stmts = (replace(s, then_body=stmts if branch == "then" else (),
                         else_body=stmts if branch == "else" else ()),)
    return replace(loop, body=stmts)


def _via_temp(loop: For, s: Store, guards: tuple, taken: set) -> list:
    """x[idx] = f(x) -> tmp[vars] = f(x); x[idx] = tmp[vars] (tmp: the iteration space)."""
    if not all(isinstance(x, Const) and type(x.value) is int for x in loop.extents):
        raise CompileError("a Parallel map that reads the buffer it writes needs constant "
                           "extents in the llvm backend", s.loc)
    x = s.buffer
    tmp = Buffer(fresh_name(f"{x.name}_rhs", taken), tuple(e.value for e in loop.extents),
                 x.dtype, "UB" if x.scope in GM_SCOPES else x.scope)
    at = tuple(Var(v) for v in loop.vars)
    return [Alloc(tmp, None, s.loc, uninit=True),  # read only where the first map wrote it
            _map(loop, (Store(tmp, at, s.value, s.loc),), guards),
            _map(loop, (replace(s, value=Load(tmp, at)),), guards)]


def _cond_hazard(s: If) -> bool:
    """Does the condition of `s` read a buffer its branches write? (A lane loop evaluates the
    condition again for each store under it, after the earlier stores.)"""
    reads = {n.buffer.name for n in walk(s.cond) if isinstance(n, Load)}
    return bool(reads & {n.buffer.name for f in ("then_body", "else_body") for t in getattr(s, f)
                         for n in walk(t) if isinstance(n, Store)})


def _cond_via_temp(loop: For, s: If, guards: tuple, taken: set):
    """if c(x): x[..] = ..  ->  c_tmp[vars] = c(x); if c_tmp[vars]: x[..] = ..  (the condition
    of each element as the map's statement reached it, before its branch writes)."""
    tmp = Buffer(fresh_name("if_cond", taken), tuple(e.value for e in loop.extents), "bool", "UB")
    at = tuple(Var(v) for v in loop.vars)
    pre = [Alloc(tmp, None, s.loc, uninit=True),
           _map(loop, (Store(tmp, at, s.cond, s.loc),), guards)]
    return pre, replace(s, cond=Load(tmp, at))


def _maskable(s: If) -> bool:
    """An if the code generator masks: element assignments and ifs only, its condition not
    reading what it writes (a nested if's condition gets its temporary when _split reaches it)."""
    return not _cond_hazard(s) and _assignments_only(s)


def _assignments_only(s: If) -> bool:
    return all(isinstance(t, (Store, *SYNC_OPS, Alloc)) or (isinstance(t, If) and _assignments_only(t))
               for t in s.then_body + s.else_body)


def _vars(exprs) -> set:
    if not isinstance(exprs, tuple):
        exprs = (exprs,)
    return {n.name for x in exprs for n in walk(x) if isinstance(n, Var)}


def _loads(x):
    return [n for n in walk(x) if isinstance(n, Load)]


def _self_hazard(s: Store) -> bool:
    return any(ld.buffer.name == s.buffer.name and ld.indices != s.indices
               for ld in _loads(s.value))


def _fusable(group, s: Store) -> bool:
    """Can `s` run lane-chunk by lane-chunk together with the earlier stores of `group`?"""
    if _self_hazard(s) or any(_self_hazard(g) for g in group):
        return False
    for g in group:
        if g.buffer.name == s.buffer.name and g.indices != s.indices:
            return False
        for ld in _loads(s.value) + [n for x in s.indices for n in _loads(x)]:
            if ld.buffer.name == g.buffer.name and ld.indices != g.indices:
                return False
        for ld in _loads(g.value) + [n for x in g.indices for n in _loads(x)]:
            if ld.buffer.name == s.buffer.name and ld.indices != s.indices:
                return False
    return True
