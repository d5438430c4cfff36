"""Happens-before of lowered instructions: the one analysis `insert_sync` (which adds the flags a
kernel needs) and `check_sync` (which proves a hand-synchronised kernel's flags enough) share.

The program is a tree of items: an `Instr` (one instruction on one (core, pipe)) or a `Block`
(a serial loop or an if, whose bodies every core runs). A walk visits dynamic occurrences
(`Occ`, numbered in walk order) and keeps, per (core, pipe) thread, a vector clock `known`:
thread -> index of its latest occurrence known to have finished before the thread's next
instruction starts. The rules of the machine model (docs/machine_model.md):

* a pipe other than V runs its instructions in order; V instructions are ordered among
  themselves only by `pipe_barrier(V)` or a flag set on V (which follows every earlier V one);
* the scalar unit (S) finishes its own instructions before it dispatches the next ones, so what
  it did happens before everything the core dispatches later;
* instructions in different branches of one if never both run.

`HappensBefore.unordered(occ, accesses, known)` names, per thread, the latest earlier occurrence
whose accesses conflict with `occ`'s (overlapping bytes, one a write) and that `known` does not
order before it: what a flag must cover (insert_sync) or a race (check_sync).

    copy(A[0, 0], A_s)   # C.MTE2, occurrence 0
    gemm(A_s, ...)       # C.M, occurrence 1: unordered -> {(C, MTE2): (0, occ 0)}
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import InternalCompilerError
from . import dtypes
from .analysis import (
    GM_SCOPES, boxes_overlap, is_atomic_pair, issue_loads, operands, static_box,
)
from .nodes import (
    Alloc, For, If, PipeBarrier, Region, Scope, SetCrossFlag, SetFlag, WaitCrossFlag,
    WaitFlag,
)
from .pipes import pipe_of

__all__ = ["Instr", "Block", "Occ", "build_tree", "sync_pipe", "accesses", "conflict",
           "exclusive", "HappensBefore"]

# ---------------------------------------------------------------------------- the program tree


@dataclass(eq=False)
class Instr:
    stmt: object
    core: str
    pipe: str
    before: list = field(default_factory=list)
    after: list = field(default_factory=list)
    parent: list | None = None
    probe: bool = False       # the scalar unit reading a condition or loop bound (no statement)


@dataclass(eq=False)
class Block:
    """A loop or an if: control flow every core runs; `bodies` are lists of items."""
    stmt: object
    bodies: list
    before: list = field(default_factory=list)
    after: list = field(default_factory=list)
    parent: list | None = None


def sync_pipe(s) -> str | None:
    """The pipe that executes a sync op (a set on its source pipe, a wait on its destination)."""
    if isinstance(s, SetFlag):
        return s.src
    if isinstance(s, WaitFlag):
        return s.dst
    if isinstance(s, (PipeBarrier, SetCrossFlag, WaitCrossFlag)):
        return s.pipe
    return None


def build_tree(stmts, core=None, *, stage: str = "insert_sync", on_missing=None) -> list:
    """Items of `stmts` (Allocs kept as they are). An instruction without a core or a pipe is a
    compiler bug after split_cores, unless `on_missing(stmt, core)` handles it (check_sync
    reports the user's mistake)."""
    items = []
    for s in stmts:
        if isinstance(s, Scope):
            items += build_tree(s.body, s.core, stage=stage, on_missing=on_missing)
        elif isinstance(s, Alloc):
            items.append(s)
        elif isinstance(s, For) and s.kind != "parallel":
            body = build_tree(s.body, core, stage=stage, on_missing=on_missing)
            block = Block(s, [body])
            if s.kind == "while":  # the condition is read again after every trip
                for probe in _probes(s, block, core):
                    probe.parent = body
                    body.append(probe)
            items += _probes(s, block, core) + [block]
        elif isinstance(s, If):
            block = Block(s, [build_tree(s.then_body, core, stage=stage, on_missing=on_missing),
                              build_tree(s.else_body, core, stage=stage, on_missing=on_missing)])
            items += _probes(s, block, core) + [block]
        else:
            pipe = sync_pipe(s) or pipe_of(s, core)
            if pipe is None or core is None:
                if on_missing is None:
                    raise InternalCompilerError("an instruction without a core or pipe after "
                                                "split_cores", s.loc, stage=stage)
                on_missing(s, core)
                continue
            if pipe != "S" and issue_loads(s):  # the scalar unit reads its addresses first
                items.append(Instr(s, core, "S", probe=True))
            items.append(Instr(s, core, pipe))
    for it in items:
        if not isinstance(it, Alloc):
            it.parent = items
    return items


def _probes(s, block: Block, core) -> list:
    """An if condition or loop bound that reads buffers is evaluated by the scalar unit of each
    core that runs the block: a reading instruction on its S pipe right before the block, so
    that the data it reads is synchronised like any other read (so are the addresses of a
    pipe instruction: `build_tree` puts a probe before it)."""
    loads = [n.buffer for n in issue_loads(s)]
    if not loads:
        return []
    if core is not None:
        cores = {core}
    else:
        cores = set()
        for b in loads:  # a tile is read on its core; GM and scalars on each core inside
            if b.scope == "UB":
                cores.add("V")
            elif b.scope not in ("global", "workspace", "var"):
                cores.add("C")
        if any(b.scope in ("global", "workspace", "var") for b in loads):
            cores |= _instr_cores(block.bodies)
    return [Instr(s, c, "S", probe=True) for c in sorted(cores)]


def _instr_cores(bodies) -> set:
    out = set()
    for body in bodies:
        for it in body:
            if isinstance(it, Instr):
                out.add(it.core)
            elif isinstance(it, Block):
                out |= _instr_cores(it.bodies)
    return out


@dataclass
class Occ:
    index: int
    item: Instr
    ancestors: tuple          # ((Block, iteration or ("branch", n)), ...)


def same_trip(a: Occ, b: Occ) -> bool:
    """a and b sit in the same iterations and branches of the loops and ifs around them."""
    return len(a.ancestors) == len(b.ancestors) and all(
        ia is ib and ta == tb for (ia, ta), (ib, tb) in zip(a.ancestors, b.ancestors))


def exclusive(a: Occ, b: Occ) -> bool:
    """a and b sit in different branches of the same if: never both run."""
    for (ia, ta), (ib, tb) in zip(a.ancestors, b.ancestors):
        if ia is not ib:
            return False
        if ta != tb:
            return isinstance(ta, tuple)
    return False


# ------------------------------------------------------------------------------------ accesses


def accesses(instr: Instr, offsets: dict, box=static_box, index_box=None) -> list:
    """(memory key, box or None, is_write) for each operand of the instruction; `box(region)`
    gives its element box ((lo, hi), ...) or None when unknown (then it overlaps everything);
    `index_box(load or store)` the box an element access of a map covers over the whole map
    (default: unknown)."""
    out = []
    if instr.probe:  # a condition, loop bound or address: the scalar unit's loads in it
        for n in issue_loads(instr.stmt):
            b = index_box(n) if index_box is not None else None
            out.append((_mem(n.buffer, instr.core, offsets), b, False))
        return out
    for node, write in operands(instr.stmt):
        b = box(node) if isinstance(node, Region) else (
            index_box(node) if index_box is not None else None)
        out.append((_mem(node.buffer, instr.core, offsets), b, write))
    return out


def _mem(buf, core, offsets):
    """Memory identity: on-chip buffers by scope and byte range (so aliases conflict)."""
    if buf.scope in GM_SCOPES:
        return ("GM", buf.name, None)
    # var: per core; UB: the vector core's (per AIV when check_sync walks "V0" and "V1")
    owner = core if buf.scope == "var" else (
        core if core in ("V0", "V1") else "V") if buf.scope == "UB" else "C"
    if buf.name in offsets:
        start = offsets[buf.name]
        return (owner, buf.scope, (start, start + buf.numel * dtypes.itemsize(buf.dtype)),
                buf.name, buf)
    return (owner, buf.scope, None, buf.name, buf)


def byte_ranges(buf, offset: int, box: tuple, most: int = 64) -> list:
    """Sorted [lo, hi) byte ranges of its scope that a flat element box (lo0, hi0, lo1, hi1, ...)
    of `buf` (any rank, row-major) placed at `offset` touches: the trailing dimensions the box
    covers whole, and the one before them, make each run contiguous; the runs are enumerated
    over the leading dimensions. More than `most` runs: the leading dimensions are enumerated
    only as far as `most` allows and each such point gets the hull of what it covers (more
    bytes, never fewer).

        b: (2, 3, 4) float32 at 0; box (0, 2, 1, 2, 0, 4)  -> [(16, 32), (64, 80)]"""
    size = dtypes.itemsize(buf.dtype)
    shape = tuple(buf.shape)
    n = len(shape)
    if n == 0:
        return [(offset, offset + size)]
    los, his = box[0::2], box[1::2]
    if any(h <= lo for lo, h in zip(los, his)):
        return []
    strides = [1] * n
    for d in range(n - 2, -1, -1):
        strides[d] = strides[d + 1] * shape[d + 1]
    k = n - 1  # dims after k are covered whole: one run per point of the dims before k
    while k > 0 and los[k] == 0 and his[k] == shape[k]:
        k -= 1
    lead, count = 0, 1  # enumerate dims [0, lead) whole points, at most `most` of them
    while lead < k and count * (his[lead] - los[lead]) <= most:
        count *= his[lead] - los[lead]
        lead += 1
    out = []

    def points(d, base):
        if d == lead:
            lo = hi = base
            for e in range(lead, n):  # hull of the rest: first and last element
                lo += los[e] * strides[e]
                hi += (his[e] - 1) * strides[e]
            out.append((offset + lo * size, offset + (hi + 1) * size))
            return
        for i in range(los[d], his[d]):
            points(d + 1, base + i * strides[d])

    points(0, 0)
    merged = []  # adjacent runs (whole trailing rows) become one range
    for lo, hi in out:
        if merged and merged[-1][1] == lo:
            merged[-1] = (merged[-1][0], hi)
        else:
            merged.append((lo, hi))
    return merged


def _ranges_overlap(a: list, b: list) -> bool:
    return any(lo < hi2 and lo2 < hi for lo, hi in a for lo2, hi2 in b)


def conflict(x, y, precise: bool = False) -> bool:
    """Two accesses touch common memory and one writes. Buffers placed on common bytes conflict
    on their whole placements, or (`precise`) on the bytes their boxes touch."""
    (mx, bx, wx), (my, by, wy) = x, y
    if not (wx or wy) or is_atomic_pair(wx, wy):  # atomic adds (same kind) commute
        return False
    if mx[0] == "GM" or my[0] == "GM":
        if mx != my:
            return False
        return boxes_overlap(bx, by)
    if mx[:2] != my[:2]:
        return False
    if mx[3] == my[3]:
        return boxes_overlap(bx, by)
    if mx[2] is None or my[2] is None:
        return False
    if not (mx[2][0] < my[2][1] and my[2][0] < mx[2][1]):
        return False
    if not precise or bx is None or by is None:
        return True
    flat = [tuple(v for r in b for v in r) for b in (bx, by)]
    return _ranges_overlap(byte_ranges(mx[4], mx[2][0], flat[0]),
                           byte_ranges(my[4], my[2][0], flat[1]))


# ------------------------------------------------------------------------- the vector clocks


class HappensBefore:
    """Vector clocks of a walk over occurrences; subclasses decide where order comes from
    (insert_sync: the channels it places; check_sync: the kernel's own flags). `precise`:
    buffers placed on common bytes conflict only on the bytes their accesses touch."""

    precise = False

    def reset(self):
        self.known: dict = {}      # thread -> {thread: index known to happen before its next}
        self.cur: dict = {}        # thread -> vector clock right after its latest instruction
        self.history: list = []    # (occ, accesses, vc)
        self.by_mem: dict = {}     # memory (mem[:2]) -> {(thread, is write): [(index, occ, acc)]}
        self.count = 0
        self.vc_of: list = []      # occurrence index -> vector clock of its thread right after it
        self.last_occ: dict = {}   # id(instr) -> index of its latest occurrence

    def arrive(self, occ: Occ, scalar: dict | None = None) -> dict:
        """The clock of `occ`'s thread as it is dispatched: what the core's scalar unit did
        before it is done (the scalar unit finishes its own work before dispatching on).
        `scalar`: the clock of the core's last scalar instruction before `occ` (default: the
        latest one walked, right when instructions are walked in program order)."""
        q = (occ.item.core, occ.item.pipe)
        known = self.known.setdefault(q, {})
        if scalar is None:
            scalar = self.cur.get((q[0], "S"))
        if scalar and q[1] != "S":
            join(known, scalar)
        return known

    def unordered(self, occ: Occ, acc: list, known: dict) -> dict:
        """thread -> (index, occ) of the latest earlier occurrence on that thread that conflicts
        with `occ` and is not known to happen before it."""
        item = occ.item
        q = (item.core, item.pipe)
        needed: dict = {}
        # Earlier accesses by memory, thread and kind, newest first: on thread p everything up
        # to known[p] is ordered already, and the newest conflicting one is all that is needed.
        for p, entries in threads_to_check(self.by_mem, acc, q):
            floor = max(known.get(p, -1), needed.get(p, (-1,))[0])
            for index, prev, pacc in reversed(entries):
                if index <= floor:
                    break
                if exclusive(prev, occ):
                    continue
                if self.conflicts(prev, pacc, occ, acc):
                    needed[p] = (index, prev)
                    break
        return needed

    def conflicts(self, prev: Occ, pacc: list, occ: Occ, acc: list) -> bool:
        """Some access of `prev` and some of `occ` touch common memory, one a write."""
        return any(conflict(x, y, self.precise) for x in pacc for y in acc)

    def record(self, occ: Occ, acc: list, known: dict) -> dict:
        """Enter `occ` into the history; its thread's clock after it."""
        item = occ.item
        q = (item.core, item.pipe)
        vc = dict(known)
        vc[q] = occ.index
        self.history.append((occ, acc, vc))
        for mem, _, write in acc:
            self.by_mem.setdefault(mem[:2], {}).setdefault((q, write), []).append(
                (occ.index, occ, acc))
        self.vc_of.append(vc)
        self.last_occ[id(item)] = occ.index
        self.cur[q] = vc
        if item.pipe != "V":
            known[q] = occ.index
        return vc


def threads_to_check(by_mem: dict, acc: list, q: tuple):
    """(thread, its earlier accesses) that an instruction on thread `q` = (core, pipe) making
    the accesses `acc` may conflict with, from `by_mem` (memory -> (thread, writes) ->
    [(index, occ, accesses)]): a read meets only writes; a pipe other than the vector unit
    runs its own instructions in order; the scalar unit finishes its work before going on."""
    for mem, _, write in acc:
        for (p, pw), entries in by_mem.get(mem[:2], {}).items():
            if not (write or pw) or (p == q and q[1] != "V") or (p[1] == "S" and p[0] == q[0]):
                continue
            yield p, entries


def join(known: dict, vc: dict) -> None:
    """known := max(known, vc), component-wise."""
    for p, i in vc.items():
        if i > known.get(p, -1):
            known[p] = i
