"""plan_memory: each on-chip buffer gets an aligned byte offset in its scope; buffers whose live
ranges do not overlap share bytes. A scope that overflows is a CompileError at the allocation
that does not fit, naming the scope, the chip, and every buffer with its size:

    A_s = alloc_L1((128, 64), "float16")     ->   A_s = alloc_L1((128, 64), "float16", offset=0)
    B_s = alloc_L1((64, 128), "float16")     ->   B_s = alloc_L1((64, 128), "float16", offset=16384)

A buffer is live from its first to its last use; a use inside a loop keeps it live for the whole
loop (the next iteration uses it again). Only when a scope does not fit that way, its plan is
made again with finer ranges: a loop whose every iteration begins by overwriting the whole buffer
(a gemm with clear_accum, a fill, a copy or a map writing all of it) does not keep it live
between its uses, so two such buffers of one iteration share bytes when their uses there do not
overlap (the S and O accumulators of a D=512 attention in L0C, as tilelang-ascend's examples
place them by hand). The first plan stays the rule because sharing bytes inside an iteration
orders what would overlap (a pipelined loop's stage versions). With that plan, a fill of the
scope's buffers whose value nothing reads is dropped first (`_drop_dead_fills`): a fragment
cleared before a loop that computes it afresh in each iteration keeps no value in its L0C
version (sparse MLA's 64x512 O next to a 64x64 S at 128 heads).
"""
from __future__ import annotations

from dataclasses import replace

from ..arch import Chip
from ..errors import BufferOverflowError, CompileError
from ..ir import dtypes
from ..ir.nodes import (Alloc, Const, Copy, Fill, For, Gemm, If, Kernel, Load, Reduce, Region, Store,
                        Scope, Var, body_fields, walk, walk_own, walk_statements)

PLANNED = ("L1", "L0A", "L0B", "L0C", "UB")


def nbytes(buf) -> int:
    return buf.numel * dtypes.itemsize(buf.dtype)


def plan_memory(kernel: Kernel, chip: Chip) -> Kernel:
    body = kernel.body
    allocs = [s for s in _walk(body) if isinstance(s, Alloc)]
    live, within = _live_ranges(body), _live_ranges(body, within_iteration=True)
    offsets: dict[str, int] = {}
    for scope in PLANNED:
        mine = [a for a in allocs if a.buffer.scope == scope]
        if not mine:
            continue
        try:
            offsets.update(_assign(mine, live, scope, chip))
        except CompileError:  # does not fit: share bytes inside loop iterations too, and
            # place the largest buffers first (less fragmentation by small long-lived ones)
            trimmed = _drop_dead_fills(body, {a.buffer.name for a in mine})
            if trimmed != body:  # only this scope's ranges shrink
                body = trimmed
                live, within = _live_ranges(body), _live_ranges(body, within_iteration=True)
            offsets.update(_assign(sorted(mine, key=lambda a: -nbytes(a.buffer)), within, scope,
                                   chip))

    def rw(stmts):
        out = []
        for s in stmts:
            if isinstance(s, Alloc) and s.buffer.name in offsets:
                s = replace(s, offset=offsets[s.buffer.name])
            changes = {f: tuple(rw(getattr(s, f))) for f in body_fields(s)}
            out.append(replace(s, **changes) if changes else s)
        return out
    planned = replace(kernel, body=tuple(rw(list(body))))
    # (the live ranges of `planned` are `within`: only the allocations' offsets changed)
    check_plan(planned, {a.buffer.name for a in allocs if a.offset is None}, within)
    return planned


def check_plan(kernel: Kernel, placed=None, live=None) -> None:
    """No two buffers of one scope that are live at the same time share a byte (`placed`: the
    names to check, default all; `live`: the kernel's `_live_ranges(within_iteration=True)`
    when the caller has them). A failure is a compiler bug, reported as an internal error
    naming both buffers, their bytes and their live ranges."""
    if live is None:
        live = _live_ranges(kernel.body, within_iteration=True)
    allocs = [s for s in _walk(kernel.body) if isinstance(s, Alloc) and s.offset is not None
              and s.buffer.scope in PLANNED and (placed is None or s.buffer.name in placed)]
    by_scope: dict[str, list] = {}
    for a in allocs:
        by_scope.setdefault(a.buffer.scope, []).append(a)
    for scope, mine in by_scope.items():
        mine.sort(key=lambda a: a.offset)
        for i, a in enumerate(mine):
            a_end = a.offset + nbytes(a.buffer)
            for b in mine[i + 1:]:
                if b.offset >= a_end:
                    break
                la, lb = live.get(a.buffer.name), live.get(b.buffer.name)
                if la is None or lb is None or la[1] < lb[0] or lb[1] < la[0]:
                    continue
                raise CompileError(
                    f"internal: plan_memory placed '{a.buffer.name}' ({scope} bytes {a.offset}.."
                    f"{a_end}) and '{b.buffer.name}' (bytes {b.offset}..{b.offset + nbytes(b.buffer)})"
                    f" on shared bytes while both are live (program positions {la} and {lb})",
                    b.loc)


def _assign(allocs, live, scope: str, chip: Chip) -> dict:
    align, cap = chip.alignment_of(scope), chip.capacity_of(scope)
    placed: list[tuple[int, int, int, int]] = []  # (offset, end, live_start, live_end)
    out = {}
    for a in allocs:
        if a.offset is not None:  # expert mode: keep the user's offset, check it
            if a.offset % align:
                raise CompileError(f"{scope} offset {a.offset} of '{a.buffer.name}' is not "
                                   f"{align}-byte aligned", a.loc)
            out[a.buffer.name] = a.offset
            lo, hi = live.get(a.buffer.name, (0, 0))
            placed.append((a.offset, a.offset + nbytes(a.buffer), lo, hi))
            _check_fit(a, a.offset + nbytes(a.buffer), cap, scope, chip, allocs)
    for a in allocs:
        if a.offset is not None:
            continue
        size = nbytes(a.buffer)
        lo, hi = live.get(a.buffer.name, (0, 0))
        conflicts = sorted((o, e) for o, e, l2, h2 in placed if not (hi < l2 or h2 < lo))
        offset = 0
        for o, e in conflicts:
            if offset + size <= o:
                break
            offset = max(offset, -(-e // align) * align)
        _check_fit(a, offset + size, cap, scope, chip, allocs)
        placed.append((offset, offset + size, lo, hi))
        out[a.buffer.name] = offset
    return out


def _drop_dead_fills(body, names: set) -> tuple:
    """`body` without the fills of buffers in `names` that nothing reads: the next statement of
    the same block that touches the buffer overwrites all of it first (a loop of at least one
    trip whose body does, unconditionally). The fill may end a Scope (emptied Scopes go):

        with Scope("C"):                          for k in serial(2):
            fill(acc_o, 0.0)              ->          gemm(p, v, acc_o, clear_accum=True)
        for k in serial(2):                           ...
            gemm(p, v, acc_o, clear_accum=True)
            ..."""
    dead: set = set()

    def touches(s, name):
        return any(isinstance(n, (Region, Load, Store)) and n.buffer.name == name
                   for n in walk(s))

    def last_fill(s, name):  # the Fill that last writes `name` in s, through Scopes only
        if isinstance(s, Fill):
            return s if s.dst.buffer.name == name else None
        if isinstance(s, Scope):
            inner = [x for x in s.body if touches(x, name)]
            return last_fill(inner[-1], name) if inner else None
        return None

    def kills(s, name):
        loop_vars = {v for n in walk_statements((s,)) if isinstance(n, For) for v in n.vars}
        conds: list = []
        g = _Guards(conds, loop_vars)
        if isinstance(s, For) and s.kind != "parallel":
            hit = (all(isinstance(e, Const) and e.value >= 1 for e in s.extents)
                   and _body_kills(s.body, name, g))
        else:
            hit = _kills(s, name, g)
        return hit and not conds  # an unconditional overwrite

    def scan(block):
        block = list(block)
        for i, s in enumerate(block):
            for name in names:
                f = last_fill(s, name)
                if f is None:
                    continue
                nxt = next((x for x in block[i + 1:] if touches(x, name)), None)
                if nxt is not None and kills(nxt, name):
                    dead.add(id(f))
            for fld in body_fields(s):
                scan(getattr(s, fld))

    def drop(block):
        out = []
        for s in block:
            if id(s) in dead:
                continue
            changes = {f: tuple(drop(getattr(s, f))) for f in body_fields(s)}
            if isinstance(s, Scope) and not changes["body"]:
                continue
            out.append(replace(s, **changes) if changes else s)
        return out

    scan(body)
    return tuple(drop(body)) if dead else body


def _check_fit(a: Alloc, end: int, cap: int, scope: str, chip: Chip, allocs) -> None:
    if end <= cap:
        return
    listing = ", ".join(f"{x.buffer.name} {_shape(x.buffer)} {x.buffer.dtype} = "
                        f"{nbytes(x.buffer) / 1024:g} KiB" for x in allocs)
    err = BufferOverflowError(
        f"{scope} overflow on {chip.name}: '{a.buffer.name}' needs bytes up to {end / 1024:g} KiB "
        f"but {scope} has {cap / 1024:g} KiB per {'AIV' if scope == 'UB' else 'AIC'}; "
        f"{scope} buffers: {listing}. Use smaller tiles or fewer stages", a.loc)
    err.scope = scope  # the scope that overflowed (pipeline_fitting caps its versions)
    raise err


def _shape(b) -> str:
    return "x".join(str(s) for s in b.shape)


def _walk(body):
    for s in body:
        yield s
        for f in body_fields(s):
            yield from _walk(getattr(s, f))


def _live_ranges(body, within_iteration: bool = False) -> dict:
    """buffer name -> (first, last) leaf position in program order. A use inside a loop counts
    for the whole span of its outermost loop; with `within_iteration`, only of the outermost loop
    that carries the buffer's value from one iteration to the next: a loop whose every iteration
    starts by overwriting the whole buffer (see `_kills`) does not carry it, so there the use
    counts only where it is:

        for k in serial(n):
            gemm(q, kt, acc_s, clear_accum=True)   # acc_s live from here ...
            copy(acc_s, ws1)                       # ... to here
            gemm(p, v, acc_o, clear_accum=True)    # acc_o live from here ...
            copy(acc_o, ws3)                       # ... to here: acc_s and acc_o may share bytes

    A `while` loop's condition is read before the loop and again after every trip: it counts
    as a use there and at the end of the loop's body.
    """
    leaves = []  # (position, path, statement, whole); path = ((kind, node, branch), ...) outer first

    def visit(stmts, path):
        for s in stmts:
            if body_fields(s) and not (isinstance(s, For) and s.kind == "parallel"):
                leaves.append((len(leaves), path, s, False))  # the statement's own expressions
                for f in body_fields(s):
                    step = ("if", s, f) if isinstance(s, If) else (
                        ("loop", s, f) if isinstance(s, For) else ("block", s, f))
                    visit(getattr(s, f), path + (step,))
                if isinstance(s, For) and s.kind == "while":  # its condition, read again
                    leaves.append((len(leaves), path + (("loop", s, "body"),), s, False))
            else:
                leaves.append((len(leaves), path, s, True))

    visit(list(body), ())
    spans: dict[int, list[int]] = {}
    for pos, path, _, _ in leaves:
        for kind, node, _ in path:
            if kind == "loop":
                span = spans.setdefault(id(node), [pos, pos])
                span[1] = pos
    uses: dict[str, list] = {}  # name -> [(position, path, statement, whole)] in program order
    for leaf in leaves:
        _, _, s, whole = leaf
        names = {n.buffer.name for n in (walk(s) if whole else walk_own(s))
                 if isinstance(n, (Region, Load, Store))}
        for name in names:
            uses.setdefault(name, []).append(leaf)
    ranges: dict[str, tuple[int, int]] = {}
    loop_vars: dict = {}  # id(loop) -> the variables of the loops in it (for `_carries`)
    for name, mine in uses.items():
        lo = hi = None
        carried: dict = {}  # id(loop) -> whether it carries `name` (the same for every use)

        def carries(loop):
            hit = carried.get(id(loop))
            if hit is None:
                hit = carried[id(loop)] = _carries(loop, name, mine, loop_vars)
            return hit

        for pos, path, _, _ in mine:
            a, b = pos, pos
            for kind, node, _ in path:  # the outermost loop that carries the value
                if kind == "loop" and (not within_iteration or carries(node)):
                    a, b = spans[id(node)]
                    break
            lo = a if lo is None else min(lo, a)
            hi = b if hi is None else max(hi, b)
        ranges[name] = (lo, hi)
    return ranges


def _carries(loop, name: str, uses, loop_vars_of: dict | None = None) -> bool:
    """Whether `loop` may carry `name`'s value between iterations (conservative: True unless
    its first use in the loop is inside a statement that overwrites the whole buffer, reached
    on every path that uses it: the use itself, or an enclosing loop or if (see `_kills`)).
    `loop_vars_of` keeps each loop's nest variables between calls."""
    inside = [u for u in uses if any(n is loop for _, n, _ in u[1])]
    pos, path, stmt, whole = inside[0]
    below = path[[i for i, (_, n, _) in enumerate(path) if n is loop][0] + 1:]
    cands = [(i, n) for i, (_, n, _) in enumerate(below)] + ([(len(below), stmt)] if whole else [])
    loop_vars_of = {} if loop_vars_of is None else loop_vars_of
    loop_vars = loop_vars_of.get(id(loop))
    if loop_vars is None:
        loop_vars = loop_vars_of[id(loop)] = {v for n in walk_statements((loop,))
                                             if isinstance(n, For) for v in n.vars}
    cut = None
    for i, n in cands:
        guards = []  # the one-armed, loop-invariant ifs inside the kill (`if vid == 0:`)
        if _kills(n, name, _Guards(guards, loop_vars)):
            cut = i
            break
    if cut is None:
        return True
    above = below[:cut]
    bound = {v for _, n, _ in above if isinstance(n, For) for v in n.vars} | set(loop.vars)
    for kind, node, branch in above:
        if kind == "loop":
            if node.kind == "parallel" or not all(isinstance(e, Const) and e.value >= 1
                                                   for e in node.extents):
                return True
        elif kind == "if":
            if any(isinstance(n, Load) or (isinstance(n, Var) and n.name in bound)
                   for n in walk(node.cond)):
                return True  # a guard that may change between iterations
            guards.append((node.cond, branch))
    for _, other_path, _, _ in inside[1:]:  # every other use runs under the kill's guards
        theirs = [(n.cond, b) for k, n, b in other_path if k == "if"]
        if any(g not in theirs for g in guards):
            return True
    return False


class _Guards:
    """What a kill may sit under: one-armed ifs whose conditions hold for the whole loop (no
    loads, no loop variables); each one met is recorded in `conds` (every other use of the
    buffer must run under it too)."""

    def __init__(self, conds: list, loop_vars: set):
        self.conds, self.loop_vars = conds, loop_vars

    def invariant(self, cond) -> bool:
        return not any(isinstance(n, Load) or (isinstance(n, Var) and n.name in self.loop_vars)
                       for n in walk(cond))


def _body_kills(body, name: str, g: _Guards, row=None) -> bool:
    """The first statement of `body` that touches `name` overwrites all of it (with `row`, a
    loop variable: all of row `row` of it, and nothing else of it is read in `body`)."""
    for s in body:
        touched = any(isinstance(n, (Region, Load, Store)) and n.buffer.name == name
                      for n in walk(s))
        if touched:
            return _row_kills(s, name, row, g) if row is not None else _kills(s, name, g)
    return False


def _row_kills(stmt, name: str, row: str, g: _Guards) -> bool:
    """`stmt` writes row `row` (dimension 0 at loop variable `row`) of `name` whole and reads no
    element of `name` (`for b in serial(n): copy(src, kv[b, :])`)."""
    if isinstance(stmt, Scope):
        return _body_kills(stmt.body, name, g, row)
    if isinstance(stmt, If):
        return _if_kills(stmt, name, g, row)
    if not isinstance(stmt, Copy) or stmt.dst.buffer.name != name or stmt.atomic:
        return False
    d = stmt.dst
    return (stmt.src.buffer.name != name and isinstance(d.start[0], Var)
            and d.start[0].name == row and d.extent[0] == 1
            and tuple(d.extent[1:]) == tuple(d.buffer.shape[1:])
            and all(isinstance(x, Const) and x.value == 0 for x in d.start[1:])
            and not any(isinstance(n, Load) and n.buffer.name == name
                        for e in stmt.src.start for n in walk(e)))


def _if_kills(stmt, name: str, g: _Guards, row=None) -> bool:
    """Both branches kill, or only the then-branch under a loop-invariant condition."""
    if any(isinstance(n, Load) and n.buffer.name == name for n in walk(stmt.cond)):
        return False
    if not stmt.else_body:
        if not g.invariant(stmt.cond):
            return False
        g.conds.append((stmt.cond, "then_body"))
        return _body_kills(stmt.then_body, name, g, row)
    return _body_kills(stmt.then_body, name, g, row) and _body_kills(stmt.else_body, name, g, row)


def overwrites_whole(stmt, name: str) -> bool:
    """`stmt` writes every element of buffer `name` without reading it first, under no guard
    (the rule plan_memory starts a buffer's live range by)."""
    return _kills(stmt, name, _Guards([], set()))


def _kills(stmt, name: str, g: _Guards) -> bool:
    """`stmt` writes every element of buffer `name` without reading it first."""
    def reads(*exprs):
        return any(isinstance(n, Load) and n.buffer.name == name
                   for e in exprs if e is not None for n in walk(e))

    if isinstance(stmt, Gemm):
        return (stmt.clear_accum and stmt.c.buffer.name == name and stmt.c.is_full
                and name not in (stmt.a.buffer.name, stmt.b.buffer.name))
    if isinstance(stmt, Fill):
        return stmt.dst.buffer.name == name and stmt.dst.is_full and not reads(stmt.value)
    if isinstance(stmt, Copy):
        return (stmt.dst.buffer.name == name and stmt.dst.is_full and not stmt.atomic
                and stmt.src.buffer.name != name and not reads(*stmt.src.start))
    if isinstance(stmt, Reduce):
        return (stmt.clear and stmt.dst.buffer.name == name and stmt.dst.is_full
                and stmt.src.buffer.name != name)
    if isinstance(stmt, Scope):
        return _body_kills(stmt.body, name, g)
    if isinstance(stmt, If):
        return _if_kills(stmt, name, g)
    if isinstance(stmt, For) and stmt.kind != "parallel":  # row by row, every row once
        buf = next((n.buffer for n in walk(stmt) if isinstance(n, (Region, Load, Store))
                    and n.buffer.name == name), None)
        return (buf is not None and len(stmt.vars) == 1 and len(stmt.extents) == 1
                and isinstance(stmt.extents[0], Const) and stmt.extents[0].value == buf.shape[0]
                and _body_kills(stmt.body, name, g, stmt.vars[0])
                and sum(isinstance(n, (Region, Load, Store)) and n.buffer.name == name
                        for n in walk(stmt)) == sum(_row_writes(stmt.body, name)))
    if isinstance(stmt, For) and stmt.kind == "parallel":
        stores = [s for s in stmt.body if isinstance(s, Store) and s.buffer.name == name]
        if any(isinstance(s, Load) and s.buffer.name == name for s in walk(stmt)):
            return False
        full = [e.value if isinstance(e, Const) else None for e in stmt.extents]
        return any(full == list(s.buffer.shape) and
                   [i.name if isinstance(i, Var) else None for i in s.indices] == list(stmt.vars)
                   for s in stores)
    return False


def _row_writes(body, name: str):
    """1 for each destination region of `name` of the copies in `body` (nested ifs included):
    a row loop kills only when these are all its accesses of `name`."""
    for s in body:
        if isinstance(s, If):
            yield from _row_writes(s.then_body, name)
            yield from _row_writes(s.else_body, name)
        elif isinstance(s, Scope):
            yield from _row_writes(s.body, name)
        elif isinstance(s, Copy) and s.dst.buffer.name == name:
            yield 1
