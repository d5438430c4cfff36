"""tilelang-ascend's `T.sync_all()` (AscendC SyncAll) and TileLang's `T.sync_grid()` (the grid
barrier of persistent kernels, deepseek_mla's example_mla_decode_persistent): a barrier of every
core (block) of the launch. At the top level of a `T.Kernel` body it splits the launch in two, run in order over the
same grid (the machine model's launches: every block of the first ends before any block of
the second starts), which is what the barrier orders:

    with T.Kernel(n, is_npu=True) as (cid, vid):       with T.Kernel(n, ...) as (cid, vid):
        <allocations>                                       <allocations>
        with T.Scope("V"): ... copy(x, W[cid])   ->         with T.Scope("V"): ... copy(x, W[cid])
        T.sync_all()                                    with T.Kernel(n, ...) as (cid, vid):
        with T.Scope("V"): ... copy(W[...], y)             <allocations>
                                                            with T.Scope("V"): ... copy(W[...], y)

Values cross the barrier through global memory (xattention: per-core partial results in
workspaces, merged after it). An on-chip tile or scalar variable (UB, L1, L0, alloc_var)
written before the barrier and read after it would need the core's memory to survive the
split: a located error names it. A `T.sync_all()` nested in a scope, loop or if is a located
error too (the split needs a point every core reaches once)."""
from __future__ import annotations

from ..errors import CompileError
from ..ir.analysis import reads, writes
from ..ir.nodes import (
    Alloc, Const, For, Load, PipeBarrier, Region, Scope, Store, walk, walk_statements,
)
from ..transform.plan_memory import overwrites_whole

# the pipe of the PipeBarrier op_sync_all / op_sync_grid leave for split_launch -> its spelling
MARKS = {"SYNC_ALL": "T.sync_all()", "SYNC_GRID": "T.sync_grid()"}


def advice(mark) -> str:
    return (f"{MARKS[mark.pipe]} is a barrier of every core of the launch; here it must stand "
            "at the top level of the T.Kernel body (not in a T.Scope, loop or if), where it "
            "splits the launch in two; or split the kernel into two T.Kernel launches yourself "
            "and pass on-chip values through global memory")


def is_mark(s) -> bool:
    return isinstance(s, PipeBarrier) and s.pipe in MARKS


def scalars_per_core(body: list) -> list:
    """A kernel body with `T.Scope` blocks runs its top-level statements on every core
    (tilelang-ascend compiles the body for the AIC and the AIV, each scope a branch on the core
    type): a top-level scalar store, such as `T.alloc_var(dtype, init=v)`'s, becomes one copy
    per core that has a scope, each in a scope of its own where the store stands (before: an
    instruction of no core, an internal error):

        s = T.alloc_var("int32", init=0)        ->   with T.Scope("C"): s[0] = 0
        with T.Scope("C"): ...                       with T.Scope("V"): s[0] = 0
        with T.Scope("V"): ... s ...                 with T.Scope("C"): ...
                                                     with T.Scope("V"): ... s ..."""
    cores = [c for c in ("C", "V") if any(isinstance(s, Scope) and s.core == c for s in body)]
    if not cores:
        return body
    out: list = []
    for s in body:
        if isinstance(s, Store) and s.buffer.scope == "var":
            out.extend(Scope(c, (s,), s.loc) for c in cores)
        else:
            out.append(s)
    return out


def split_launch(body: list) -> list[list]:
    """The statement lists of the launches a kernel body's top-level sync_all marks split it
    into (the body itself when it has none); each part keeps the allocations it uses."""
    for s in body:
        for sub in walk_statements([s]) if not is_mark(s) else ():
            if is_mark(sub):
                raise CompileError(advice(sub), sub.loc)
    if not any(is_mark(s) for s in body):
        return [body]
    allocs = [s for s in body if isinstance(s, Alloc)]
    n = 0  # the prologue: allocations and constant scalar inits, which every part repeats
    while n < len(body) and (isinstance(body[n], Alloc) or _constant_init(body[n])):
        n += 1
    inits = [s for s in body[:n] if not isinstance(s, Alloc)]
    parts, cur, marks = [], [], []
    for k, s in enumerate(body):
        if is_mark(s):
            parts.append(cur)
            marks.append(s)
            cur = []
        elif not isinstance(s, Alloc) and k >= n:
            cur.append(s)
    parts.append(cur)
    on_chip = {a.buffer.name for a in allocs if a.buffer.scope not in ("global",)}
    written: dict = {}
    for i, part in enumerate(parts):
        for s in walk_statements(part):
            for b in reads(s):
                if b.name in written and b.name in on_chip and not _first_touch_kills(part, b.name):
                    raise CompileError(
                        f"'{b.name}' ({b.scope}) is written before {MARKS[marks[i - 1].pipe]} "
                        f"({written[b.name]}) and read after it: the barrier splits the launch "
                        f"in two here, so on-chip values do not cross it; pass the value "
                        f"through global memory (a workspace tensor)", s.loc)
        for s in walk_statements(part):
            for b in writes(s):
                written.setdefault(b.name, s.loc)
    return [_used(allocs, inits, part) for part in parts]


def _used(allocs: list, inits: list, part: list) -> list:
    """A part with the allocations and scalar inits of the buffers it touches (each launch
    allocates what it uses)."""
    def touched(stmts, both=True):
        return {b.name for s in walk_statements(stmts) for b in (*(reads(s) if both else ()),
                                                                  *writes(s))}
    names = touched(part)
    kept = [s for s in inits if touched([s], both=False) & names]
    return [a for a in allocs if a.buffer.name in names] + kept + part


def _constant_init(s) -> bool:
    """`with T.Scope(c): s[0] = <constant>` (scalars_per_core's copy of an alloc_var init)."""
    return isinstance(s, Scope) and len(s.body) == 1 and isinstance(s.body[0], Store) and \
        s.body[0].buffer.scope == "var" and not any(isinstance(n, Load) for n in walk(s.body[0]))


def _first_touch_kills(body, name: str) -> bool:
    """The first statement of `body` that touches buffer `name` overwrites all of it without
    reading it (plan_memory's rule), looking into scopes and serial loops that run at least
    once: the value from before the barrier is never read."""
    for s in body:
        if not any(isinstance(n, (Region, Load, Store)) and n.buffer.name == name for n in walk(s)):
            continue
        if isinstance(s, Scope):
            return _first_touch_kills(s.body, name)
        if isinstance(s, For) and s.kind != "parallel" and all(
                isinstance(e, Const) and e.value >= 1 for e in s.extents) and \
                _first_touch_kills(s.body, name):
            return True
        return overwrites_whole(s, name)
    return True
