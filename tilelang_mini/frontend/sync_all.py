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
written before the barrier and read after it needs the core's memory to survive the split:
a vector scope's UB tile is carried over through a per-core GM slot (`split_launch`), any
other is a located error naming it. A `T.sync_all()` in a loop or if is a located error too
(the split needs a point every core reaches once); at the top level of a `T.Scope` it is
tilelang-ascend's form (every core calls SyncAll in its own scope)."""
from __future__ import annotations

from ..errors import CompileError
from ..ir.analysis import aiv_uniform, instructions, reads, writes
from ..ir.nodes import (
    Alloc, Const, Copy, For, Load, PipeBarrier, Region, Scope, Store, walk, walk_statements,
)
from ..transform.plan_memory import overwrites_whole
from .tile_ascend import full_barrier

# the pipe of the PipeBarrier op_sync_all / op_sync_grid leave for split_launch -> its spelling
MARKS = {"SYNC_ALL": "T.sync_all()", "SYNC_GRID": "T.sync_grid()"}


def advice(mark) -> str:
    return (f"{MARKS[mark.pipe]} is a barrier of every core of the launch; here it must stand "
            "at the top level of the T.Kernel body or of a T.Scope there (not in a loop or "
            "if), where it splits the launch in two; or split the kernel into two T.Kernel "
            "launches yourself and pass on-chip values through global memory")


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


def split_launch(body: list, keep=None) -> list[list]:
    """The statement lists of the launches a kernel body's sync_all marks split it into (the
    body itself when it has none); each part keeps the allocations it uses. A mark stands at
    the top level of the body or of a `T.Scope` there (tilelang-ascend's form: every core
    calls SyncAll in its own scope; the k-th mark of each core's scopes is one barrier):

        with T.Scope("C"): T.sync_all()                 launch 1: with T.Scope("V"): <a>
        with T.Scope("V"): <a>; T.sync_all(); <b>  ->  launch 2: with T.Scope("V"): <b>

    A UB tile of the vector scopes written before a barrier and read after it lives on in the
    core's UB on the machine; across the split it is copied out to a per-core GM buffer at the
    end of the one launch and back in at the start of the next (`keep(name, shape, dtype)`
    makes that hidden buffer, `keep.cid`/`keep.vid` index it). Other on-chip values crossing
    a barrier are located errors."""
    for s in body:
        inner = s.body if isinstance(s, Scope) else () if is_mark(s) else (s,)
        for x in inner:
            for sub in walk_statements([x]) if not (is_mark(x) and isinstance(s, Scope)) else ():
                if is_mark(sub):
                    raise CompileError(advice(sub), sub.loc)
    if not any(is_mark(x) for s in body for x in (s.body if isinstance(s, Scope) else (s,))):
        return [body]
    allocs = [s for s in body if isinstance(s, Alloc)]
    n = 0  # the prologue: allocations and constant scalar inits, which every part repeats
    while n < len(body) and (isinstance(body[n], Alloc) or _constant_init(body[n])):
        n += 1
    inits = [s for s in body[:n] if not isinstance(s, Alloc)]
    parts: list = [[]]
    marks: dict = {}                  # part -> the mark that starts it
    level = {"C": 0, "V": 0}          # each core's part so far

    def put(i, stmt):
        while len(parts) <= i:
            parts.append([])
        parts[i].append(stmt)
    for s in body[n:]:
        if isinstance(s, Alloc):
            continue
        if is_mark(s):
            top = max(level.values()) + 1
            level = dict.fromkeys(level, top)
            marks.setdefault(top, s)
        elif isinstance(s, Scope) and any(is_mark(x) for x in s.body):
            i, seg = level[s.core], []
            for x in (*s.body, None):
                if x is None or is_mark(x):
                    if seg:
                        put(i, Scope(s.core, tuple(seg), s.loc))
                    if x is not None:
                        i, seg = i + 1, []
                        marks.setdefault(i, x)
                else:
                    seg.append(x)
            level[s.core] = i
        else:
            put(level[s.core] if isinstance(s, Scope) else max(level.values()), s)
    while len(parts) <= max(level.values()):
        parts.append([])
    on_chip = {a.buffer.name: a.buffer for a in allocs if a.buffer.scope not in ("global",)}
    kept = _kept(parts, on_chip, marks, keep)
    for i, names in kept.items():  # out at the end of part i, back in at the start of i + 1
        loc, tiles = marks[i + 1].loc, [on_chip[b] for b in sorted(names)]
        alike = _alike(parts[:i + 1], tiles, keep.vid.name)
        slots = [(keep(t.name, t.shape, t.dtype), Const(0) if t.name in alike else keep.vid)
                 for t in tiles]
        out = [_keep_copy(t, g, keep.cid, v, True, loc) for t, (g, v) in zip(tiles, slots)]
        back = [_keep_copy(t, g, keep.cid, v, False, loc) for t, (g, v) in zip(tiles, slots)]
        parts[i].append(Scope("V", (*full_barrier("V", loc), *out), loc))
        parts[i + 1].insert(0, Scope("V", (*back, *full_barrier("V", loc)), loc))
    return [_used(allocs, inits, part) for part in parts]


def _kept(parts, on_chip, marks, keep) -> dict:
    """part i -> the on-chip buffers whose values cross the barrier after part i (written in a
    part up to i, read in a later part before being overwritten whole). UB tiles of vector
    scopes only (`keep` given); any other is a located error."""
    written: dict = {}
    out: dict = {}
    for i, part in enumerate(parts):
        for s in walk_statements(part):
            for b in reads(s):
                if b.name in written and b.name in on_chip and not _first_touch_kills(part, b.name):
                    if keep is None or b.scope != "UB" or not _in_vector_scopes(parts, b.name):
                        raise CompileError(
                            f"'{b.name}' ({b.scope}) is written before "
                            f"{MARKS[marks[i].pipe] if i in marks else 'the barrier'} "
                            f"({written[b.name][0]}) and read after it: the barrier splits the "
                            f"launch in two here, so on-chip values other than the vector "
                            f"scopes' UB tiles do not cross it; pass the value through global "
                            f"memory (a workspace tensor)", s.loc)
                    for j in range(written[b.name][1], i):
                        out.setdefault(j, set()).add(b.name)
        for s in walk_statements(part):
            for b in writes(s):
                written.setdefault(b.name, (s.loc, i))
                written[b.name] = (written[b.name][0], i)
    return out


def _in_vector_scopes(parts, name) -> bool:
    """Every access of buffer `name` stands in a `T.Scope("V")`."""
    def touches(s):
        return any(isinstance(n, (Region, Load, Store)) and n.buffer.name == name for n in walk(s))
    return all(isinstance(s, Scope) and s.core == "V" for part in parts for s in part
               if touches(s))


def _alike(parts, tiles, vid: str) -> set:
    """Names of the `tiles` both AIVs hold alike after `parts` (aiv_uniform writes only): kept
    in one slot (vid 0), so that what is computed from them stays alike after the barrier."""
    body = [s for part in parts for s in part]
    uniform = aiv_uniform(body, vid)
    return {t.name for t in tiles if all(id(s) in uniform for s in instructions(body)
                                         if t.name in {b.name for b in writes(s)})}


def _keep_copy(tile, kept, cid, vid, out: bool, loc):
    """`copy(tile, kept[cid, vid])` (out) or `copy(kept[cid, vid], tile)`."""
    whole = Region.full(tile)
    slot = Region(kept, (cid, vid, *whole.start), (1, 1, *tile.shape))
    return Copy(whole, slot, loc) if out else Copy(slot, whole, loc)


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
