"""insert_sync: the flags that order dependent instructions of different pipes and cores.

For each instruction, every earlier instruction that touches the same bytes (one of them writing)
on another pipe must happen before it. Unless that order already follows (in-order pipes and the
flags placed so far, tracked with vector clocks), a channel is added: `set_flag` right after the
producer (as early as possible), `wait_flag` right before the consumer (as late as possible);
`pipe_barrier(V)` between dependent vector instructions; `set_cross_flag`/`wait_cross_flag`
between the cube and the vector cores. A dependency that crosses a loop's back edge gets its
flag primed before the loop and drained after it:

    for k_o in serial(4):                      set_flag(M, MTE2, 0)
        copy(A[...], A_s)       # MTE2         for k_o in serial(4):
        gemm(A_s, ...)          # M      ->        wait_flag(M, MTE2, 0)
                                                   copy(A[...], A_s)
                                                   set_flag(MTE2, M, 1)
                                                   wait_flag(MTE2, M, 1)
                                                   gemm(A_s, ...)
                                                   set_flag(M, MTE2, 0)
                                               wait_flag(M, MTE2, 0)

Channels share an event id (0-7 per pipe pair) only where the recorded run proves each wait
happens before the next set of that id; with more flags than ids, the flags of a pipe pair
are chained until they can share (sync_chain).
The analysis runs on the program unrolled twice per loop (once where the trip count is one); after
a loop whose trip count is only known at run time, what is known is what also holds with no trip.
"""
from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, replace

from ..arch import Chip
from ..ir.happens_before import (
    HappensBefore, Instr, Occ, accesses as _accesses, build_tree as _tree, conflict, exclusive,
    join, threads_to_check,
)
from ..ir.nodes import (
    Alloc, Const, For, Kernel, PipeBarrier, SetCrossFlag, SetFlag, WaitFlag,
    walk_statements,
)
from .plan_memory import _live_ranges
from .sync_clocks import clocks_equal, copy_clocks, meet_clocks
from .sync_chain import by_instr, fit_event_ids
from .sync_events import assign_events
from .sync_place import (first_consumer, in_loop_branch, last_producer, meet, placement,
                         position, set_level, uniform)
from .sync_render import render

# ----------------------------------------------------------------------------------- channels


@dataclass(eq=False)
class Channel:
    kind: str                 # "flag" | "cross" | "barrier"
    src: tuple                # (core, pipe)
    dst: tuple
    set_at: object            # item the set follows
    wait_at: object           # item the wait precedes
    primed: object = None     # loop Block whose back edge the channel crosses
    last_set: dict | None = None
    loc: object = None
    event: int = -1
    sets: list | None = None   # (trace position, vector clock of the src pipe) per dynamic set
    waits: list | None = None  # trace position of the first instruction after each dynamic wait
    wait_after: bool = False  # the wait follows the set at once (a producer inside an if branch)
    seq: int = 0              # creation order
    ends: tuple | None = None  # (producer, consumer) instructions of the dependency it was made for
    branch_set: bool = False  # primed, its set inside an if branch of the loop body: it may not run
    prime_set: dict | None = None  # the src pipe's clock at the prime before the loop

    @property
    def wait_key(self):
        return ("after", id(self.set_at)) if self.wait_after else id(self.wait_at)


def insert_sync(kernel: Kernel, chip: Chip, intra_only: bool = False,
                v_only: bool = False) -> Kernel:
    """`intra_only`: the kernel orders its cores itself (its own cross-core flags, kept as
    they are): only the flags and barriers between the pipes of each core are added.
    `v_only`: the kernel places its own flags; only the `pipe_barrier(V)` between dependent
    vector instructions that its own barriers leave unordered are added (what the Ascend C
    compiler adds to the kernels tilelang-ascend emits, docs/machine_model.md), and the flags
    between instructions of different pipes that only plan_memory's shared bytes make
    dependent (two buffers on common bytes), on event ids the kernel's own flags leave free."""
    if not kernel.is_npu:
        return kernel
    allocs = [s for s in kernel.body if isinstance(s, Alloc)]
    offsets = {a.buffer.name: a.offset for a in walk_statements(kernel.body)
               if isinstance(a, Alloc) and a.offset is not None}
    tree = _tree([s for s in kernel.body if not isinstance(s, Alloc)])
    modes = {"intra_only": intra_only or v_only, "v_only": v_only,
             "live": _live_ranges(kernel.body) if v_only else None,
             "releases": intra_only and not v_only}
    channels = _Analysis(offsets, **modes).run(tree)
    if v_only and not channels:
        return kernel
    taken = _own_event_ids(kernel) if v_only else {}

    def analyse(extra):  # out of ids: again, fewer flags (sync_chain)
        tree = _tree([s for s in kernel.body if not isinstance(s, Alloc)])
        return tree, _Analysis(offsets, coalesce=True, extra=extra, **modes).run(tree)
    tree, channels = fit_event_ids(analyse, lambda chs: assign_events(chs, chip, kernel, taken),
                                   (tree, channels), chain=not v_only)
    body = render(tree, channels)
    return replace(kernel, body=tuple(allocs + body))


def _own_event_ids(kernel) -> dict:
    """(src pipe, dst pipe) -> the event ids the kernel's own flags use (left to them)."""
    out: dict = {}
    for st in walk_statements(kernel.body):
        if isinstance(st, (SetFlag, WaitFlag)):
            ids = out.setdefault((st.src, st.dst), set())
            e = st.event.value if isinstance(st.event, Const) else st.event
            ids.add(e) if isinstance(e, int) else ids.update(range(64))  # a run-time id: any
    return out


def _scalar_after_vector(p, q) -> bool:
    """A scalar-unit access of UB after a vector instruction of the same core: the Ascend C
    compiler's automatic synchronisation orders it (a V -> S flag), as it does V -> V
    (docs/machine_model.md)."""
    return p[0] == q[0] and p[1] == "V" and q[1] == "S"


class _Uncovered(Exception):
    pass


class _Analysis(HappensBefore):
    def __init__(self, offsets, coalesce=False, intra_only=False, v_only=False, live=None,
                 releases=False, extra=None):
        self.offsets = offsets
        self.extra = extra or {}   # instruction position -> added accesses (sync_chain's tokens)
        self.releases = releases   # the kernel's own cross sets release shared GM (_index_releases)
        self.release: dict = {}    # id(set_cross_flag item) -> the accesses it is checked against
        self.coalesce = coalesce
        self.intra_only = intra_only  # dependencies between cores are the kernel's own
        self.v_only = v_only          # ... and those between pipes: only V -> V barriers
        self.ranges = live or {}      # (v_only) buffer name -> live range (plan_memory's)
        self.channels: list[Channel] = []
        self.by_wait: dict = {}    # id(item) -> channels waiting before it
        self.by_key: dict = {}     # what a channel is looked up by (channel()) -> channels
        self.set_here: dict = {}   # id(item) -> channels set or primed there (first walk)
        self.frozen = False        # replaying: a dependency no channel covers raises _Uncovered
        self.accesses: dict = {}   # id(instr) -> its accesses (fixed for the whole pass)
        self.dependent: dict = {}  # (id(earlier instr), id(instr)) -> accesses that conflict
        self.plans: dict = {}      # occurrence index -> [(thread, its accesses, how many earlier)]
        self.history, self.by_mem = [], {}
        self.snaps = None          # top-level item -> the replay's state before it
        self.reset()

    def reused(self, x, y) -> bool:
        """Accesses of two on-chip buffers whose live ranges plan_memory found apart (it may
        place them on common bytes; buffers placed over each other while both live are the
        placement's error, not a dependency to order)."""
        if x[0][0] == "GM" or y[0][0] == "GM" or x[0][3] == y[0][3]:
            return False
        a, b = self.ranges.get(x[0][3]), self.ranges.get(y[0][3])
        return a is not None and b is not None and (a[1] < b[0] or b[1] < a[0])

    def reset(self):
        # Every walk visits the same occurrences with the same accesses (only the clocks depend
        # on the channels): the first walk indexes them for all later ones.
        history, by_mem = self.history, self.by_mem
        super().reset()
        self.history, self.by_mem = history, by_mem
        self.exit_vc: dict = {}    # id(block) -> {pipe: vc at its latest exit}
        self.branch_exit: dict = {}  # ancestors of an if branch -> known clocks at its end

    def record(self, occ: Occ, acc: list, known: dict) -> dict:
        if occ.index < len(self.history):  # a replay: the occurrence is indexed already
            q = (occ.item.core, occ.item.pipe)
            vc = dict(known)
            vc[q] = occ.index
            self.cur[q] = vc
            if occ.item.pipe != "V":
                known[q] = occ.index
            return vc
        return super().record(occ, acc, known)

    def own_accesses(self, it) -> list:
        return _accesses(it, self.offsets) + self.extra.get(id(it), [])

    def run(self, tree):
        self.extra = by_instr(tree, self.extra)
        if self.releases:
            self._index_releases(tree)
        self.walk(tree, ())
        self._index(tree)
        # A channel placed early may be covered by ones placed later (a flag round trip that
        # also orders two vector instructions): drop each channel the others make redundant.
        # Removing one changes the walk only from its first item on, and once the state at a
        # top-level item after its last one equals the last good walk's, the rest is that walk.
        local = self.replay(tree)
        for ch in reversed(list(self.channels)):
            at = self.channels.index(ch)
            self.channels.remove(ch)
            self.by_wait[ch.wait_key].remove(ch)
            self._unplace(ch)
            if not (self.replay_without(tree, ch) if local else self.replay(tree)):
                self.channels.insert(at, ch)
                self.by_wait[ch.wait_key].append(ch)
                self._place(ch)
        # The final replay records when each flag is set and waited for (for the event ids).
        if not self.replay(tree, record=True):
            raise AssertionError("insert_sync: the channels no longer cover the dependencies")
        return self.channels

    def _index_releases(self, tree):
        """(intra_only) A kernel's own set_cross_flag releases every GM tensor both the cube and
        the vector cores access: every earlier access of them on the core's other pipes is
        ordered before the set (it is checked as writing them), and every later write after it
        (it is recorded as reading them, so its flag alternates with its wait like a consumer's):

            copy(W[...], x)       # V.MTE2    ->   copy(W[...], x)
            copy(y, W2[...])      # V.MTE3         copy(y, W2[...])
            set_cross_flag(1)     # V.MTE3         set_flag(MTE2, MTE3, 0); wait_flag(MTE2, MTE3, 0)
                                                   set_cross_flag(1)
        (the other core may overwrite W once the flag arrives)."""
        users: dict = {}
        sets = []

        def scan(items):
            for it in items:
                if isinstance(it, Instr):
                    acc = self.accesses[id(it)] = self.own_accesses(it)
                    for key, _, _ in acc:
                        if key[0] == "GM":
                            users.setdefault(key, set()).add(it.core[0])
                    if isinstance(it.stmt, SetCrossFlag):
                        sets.append(it)
                elif not isinstance(it, Alloc):
                    for body in it.bodies:
                        scan(body)
        scan(tree)
        shared = [key for key, cores in users.items() if len(cores) > 1]
        for it in sets if shared else ():
            self.release[id(it)] = [(key, None, True) for key in shared]
            self.accesses[id(it)] = [(key, None, False) for key in shared]

    def _index(self, tree):
        """Top-level item and list position of every item; per top-level item, the channels
        with points both before and at or after it (their last set is walk state there)."""
        self.top, self.pos = {}, {}

        def mark(items, k):
            for n, it in enumerate(items):
                if isinstance(it, Alloc):
                    continue
                self.top[id(it)], self.pos[id(it)] = k, n
                for body in getattr(it, "bodies", ()):
                    mark(body, k)
        for k, it in enumerate(tree):
            if not isinstance(it, Alloc):
                mark([it], k)
                self.pos[id(it)] = k
        self.span, self.straddle = {}, {}
        for ch in self.channels:
            points = [self.top[id(x)] for x in (ch.set_at, ch.wait_at, ch.primed)
                      if x is not None]
            lo, hi = min(points), max(points)
            self.span[ch] = (lo, hi)
            for k in range(lo + 1, hi + 1):
                self.straddle.setdefault(k, []).append(ch)
        # the channels cannot change while replaying: index them by where they are set
        self.live, self.placed = set(), {}
        for ch in self.channels:
            self._place(ch)

    def _place(self, ch: Channel):
        self.live.add(ch)
        for at in {id(x) for x in (ch.set_at, ch.primed) if x is not None}:
            here = self.placed.setdefault(at, [])
            here.append(ch)
            here.sort(key=lambda c: c.seq)

    def _unplace(self, ch: Channel):
        self.live.discard(ch)
        for at in {id(x) for x in (ch.set_at, ch.primed) if x is not None}:
            self.placed[at].remove(ch)

    def _freeze(self, record: bool = False, clear: bool = True):
        """Start a replay (`clear`: no flag set yet; `record`: note every set and wait)."""
        self.reset()
        if clear:
            for ch in self.channels:
                ch.last_set = None
                ch.sets, ch.waits = ([], []) if record else (None, None)
        self.frozen = True

    def _state(self, k: int) -> tuple:
        return (self.count, copy_clocks(self.known), copy_clocks(self.cur),
                dict(self.branch_exit),
                {ch: ch.last_set for ch in self.straddle.get(k, ()) if ch in self.live})

    def _same_state(self, k: int) -> bool:
        count, known, cur, branch_exit, last_set = self.snaps[k]
        return (clocks_equal(self.known, known) and clocks_equal(self.cur, cur)
                and self.branch_exit == branch_exit
                and all(last_set.get(ch) == ch.last_set
                        for ch in self.straddle.get(k, ()) if ch in self.live))

    def replay(self, tree, record: bool = False) -> bool:
        """Walk again with the channels fixed: True when they cover every dependency (the
        state before every top-level item is kept for `replay_without`)."""
        self._freeze(record)
        snaps = []
        try:
            for k, it in enumerate(tree):
                snaps.append(self._state(k))
                self.walk([it], ())
            self.snaps = snaps
            return True
        except _Uncovered:
            self.snaps = None
            return False
        finally:
            self.frozen = False

    def replay_without(self, tree, gone: Channel) -> bool:
        """`replay` after `gone` was removed from the channels of the last good replay: from
        the state before its first item to the first later item whose state is unchanged."""
        lo, hi = self.span[gone]
        # A channel's first event in a walk is a set (or its prime before the loop): only the
        # channels set before `lo` and waited for after it carry their last set in.
        self._freeze(clear=False)
        count, known, cur, branch_exit, last_set = self.snaps[lo]
        self.count, self.known, self.cur = count, copy_clocks(known), copy_clocks(cur)
        self.branch_exit = dict(branch_exit)
        for ch in self.straddle.get(lo, ()):
            if ch in self.live:
                ch.last_set = last_set.get(ch)
        fresh = {}
        try:
            for k in range(lo, len(tree)):
                if k > hi and self._same_state(k):
                    break
                fresh[k] = self._state(k)
                self.walk([tree[k]], ())
        except _Uncovered:
            return False
        finally:
            self.frozen = False
        for k, st in fresh.items():
            self.snaps[k] = st
        return True

    def record_set(self, ch: Channel, vc: dict):
        if ch.sets is not None:
            ch.sets.append((self.count, dict(vc)))

    def record_wait(self, ch: Channel, position: int):
        if ch.waits is not None:
            ch.waits.append(position)

    def walk(self, items, ancestors):
        for it in items:
            if isinstance(it, Alloc):
                continue
            if isinstance(it, Instr):
                self.visit(Occ(self.count, it, ancestors))
                self.count += 1
                continue
            for ch in self.by_wait.get(id(it), []):  # waits hoisted before this block
                self.apply(ch, self.known.setdefault(ch.dst, {}))
                self.record_wait(ch, self.count)
            for ch in self._placed_at(it):  # flags primed before this loop are set now
                if ch.primed is it:
                    ch.last_set = dict(self.cur.get(ch.src, {}))
                    ch.prime_set = ch.last_set
                    self.record_set(ch, ch.last_set)
            stmt = it.stmt
            if isinstance(stmt, For):
                ext = stmt.extents[0]
                if isinstance(ext, Const):
                    for t in range(min(ext.value, 2)):
                        self.walk(it.bodies[0], ancestors + ((it, t),))
                else:  # a run-time trip count (a while, bounds read from data): maybe none
                    self._walk_maybe_skipped(it, ancestors)
            elif not uniform((it, ("branch", 0))):
                # split_cores' `if vid == 0`: every such if takes the same branch on a core, and
                # what follows either runs under the same condition or is sync of its own. A
                # pipe's order within itself learnt in a branch (a pipe_barrier placed there)
                # holds on the cores that take it alone: neither the other branch (an expert
                # kernel's `if vid == 0: ... else: ...`, walked after it) nor what follows the
                # if counts on it
                own = {p: v.get(p) for p, v in self.known.items()}
                for branch, body in enumerate(it.bodies):
                    if branch:
                        self._forget_vector_order(own)
                    self.walk(body, ancestors + ((it, ("branch", branch)),))
                self._forget_vector_order(own)
            else:
                # Only one branch runs: what is known after the if is what both branches
                # establish (an empty else establishes nothing beyond the state before).
                start = (copy_clocks(self.known), copy_clocks(self.cur))
                ends, spans, first = [], [], self.count
                for branch, body in enumerate(it.bodies):
                    self.known, self.cur = copy_clocks(start[0]), copy_clocks(start[1])
                    begin = self.count
                    key = ancestors + ((it, ("branch", branch)),)
                    self.walk(body, key)
                    self.branch_exit[key] = self.known
                    ends.append((self.known, self.cur))
                    spans.append((begin, self.count))
                ran = self.ran_per_branch(first, spans, ancestors)
                self.known = meet_clocks([k for k, _ in ends], ran, self.count - 1)
                self.cur = meet_clocks([c for _, c in ends], ran, self.count - 1)
            self.exit_vc[id(it)] = {p: dict(v) for p, v in self.cur.items()}
            for ch in self._placed_at(it):
                if ch.set_at is it:
                    ch.last_set = dict(self.exit_vc[id(it)].get(ch.src, {}))
                    self.record_set(ch, ch.last_set)
                if ch.primed is it:  # the drain after the loop: its consumer knows the last set
                    # (a set in a branch may have run in no trip: the drain then takes the prime)
                    self.apply(ch, self.known.setdefault(ch.dst, {}), snapshot=meet(
                        ch.prime_set, ch.last_set) if ch.branch_set else None)
                    self.record_wait(ch, self.count)
            self.waits_after(it, self.count)

    def _forget_vector_order(self, own: dict):
        """Put back each vector pipe's knowledge of its own order to `own` (pipe -> index)."""
        for p, v in self.known.items():
            if p[1] == "V" and v.get(p) != own.get(p):
                if own.get(p) is None:
                    v.pop(p, None)
                else:
                    v[p] = own[p]

    def _walk_maybe_skipped(self, it, ancestors):
        """A loop of run-time trip count, walked twice: what is known after it is what both
        two trips and no trip establish (as after an if with an empty else), so an order a
        flag inside the body gives does not cover a producer before the loop when it runs no
        trip."""
        start = (copy_clocks(self.known), copy_clocks(self.cur))
        first = self.count
        for t in range(2):
            self.walk(it.bodies[0], ancestors + ((it, t),))
        spans = [(first, self.count), (self.count, self.count)]
        ran = self.ran_per_branch(first, spans, ancestors)
        self.known = meet_clocks([self.known, start[0]], ran, self.count - 1)
        self.cur = meet_clocks([self.cur, start[1]], ran, self.count - 1)

    def visit(self, occ: Occ):
        item = occ.item
        q = (item.core, item.pipe)
        known = self.known.setdefault(q, {})
        for ch in self.by_wait.get(id(item), []):  # flags already placed before this instruction
            self.apply(ch, known)
            self.record_wait(ch, occ.index)
        known = self.arrive(occ)
        if isinstance(item.stmt, PipeBarrier) and item.pipe == "V":  # the kernel's own barrier
            join(known, {q: self.cur.get(q, {}).get(q, -1)})
        acc = self.accesses.get(id(item))
        if acc is None:  # fixed for the whole pass: computed once per instruction
            acc = self.accesses[id(item)] = self.own_accesses(item)
        check = self.release.get(id(item), acc)  # what earlier accesses are checked against
        needed = []  # every unordered conflicting producer: one in a branch covers no other
        seen = set()
        # earlier accesses of the same memory, per thread, newest first (a replay walks the
        # occurrences of the first walk, which indexed them all: looked up once per occurrence)
        plan = self.plans.get(occ.index) if self.frozen else None
        if plan is None:
            plan = [(p, entries, bisect_left(entries, occ.index, key=_first))
                    for p, entries in threads_to_check(self.by_mem, check, q)
                    if not (self.intra_only and p[0] != q[0])]
            self.plans[occ.index] = plan if self.frozen else None
        for p, entries, j in plan:
            floor = known.get(p, -1)  # everything up to it is ordered before `occ` already
            while j:
                j -= 1
                index, prev, pacc = entries[j]
                if index <= floor:
                    break
                if index in seen:
                    continue
                seen.add(index)
                pair = (id(prev.item), id(item))  # fixed accesses: decided once per pair
                dependent = self.dependent.get(pair)
                if dependent is None:
                    # v_only: between pipes only plan_memory's shared bytes, or S after V
                    dependent = self.dependent[pair] = any(
                        conflict(x, y) and (p == q or not self.v_only or self.reused(x, y)
                                            or _scalar_after_vector(p, q))
                        for x in pacc for y in check)
                if dependent and not (self.covered(prev, occ, q, known)
                                      or exclusive(prev, occ)):
                    needed.append(prev)
        # Latest producers first: the order one of them establishes may cover the others.
        for prev in sorted(needed, key=lambda o: -o.index):
            if self.covered(prev, occ, q, known):
                continue
            if self.frozen:
                raise _Uncovered
            p = (prev.item.core, prev.item.pipe)
            ch = self.channel(prev, occ, p, q)
            snap = self.snapshot(prev, occ, ch)
            if ch.wait_after:  # known only where the producer's branch ran
                for st in self.exits_of(prev, occ, set_level(prev, ch.set_at)):
                    self.apply(ch, st.setdefault(q, {}), snapshot=snap)
            else:
                self.apply(ch, known, snapshot=snap)
        vc = self.record(occ, acc, known)
        for ch in self._placed_at(item):
            if ch.set_at is item:
                ch.last_set = dict(vc)
                self.record_set(ch, vc)
        self.waits_after(item, occ.index + 1)

    def exits_of(self, prev: Occ, occ: Occ, level: int = 0) -> list:
        """The known clocks at the exits of the if branches that hold `prev` but not `occ` (the
        branch instances: a branch in an earlier trip of a loop both are in counts), at
        `level` or deeper: true on every path on which `prev` ran. A wait placed right after
        its set in the branch at `level` runs on every path through that branch, not on every
        path through a branch around it (the set's own branch may not be taken there)."""
        out = []
        for j, (_, tag) in enumerate(prev.ancestors):
            if (j >= level and isinstance(tag, tuple)
                    and occ.ancestors[:j + 1] != prev.ancestors[:j + 1]):
                st = self.branch_exit.get(prev.ancestors[:j + 1])
                if st is not None:
                    out.append(st)
        return out

    def covered(self, prev: Occ, occ: Occ, q, known: dict) -> bool:
        """Is `prev` known to happen before `occ` (on pipe q) on every path where it ran?"""
        p = (prev.item.core, prev.item.pipe)
        if known.get(p, -1) >= prev.index:
            return True
        return any(st.get(q, {}).get(p, -1) >= prev.index for st in self.exits_of(prev, occ))

    def waits_after(self, item, position: int):
        """The waits placed right after the set they pair with (producers inside a branch)."""
        for ch in self.by_wait.get(("after", id(item)), []):
            self.apply(ch, self.known.setdefault(ch.dst, {}))
            self.record_wait(ch, position)

    def ran_per_branch(self, first: int, spans, ancestors) -> list:
        """Per branch of an if: pipe -> indices of the instructions that run when that branch
        is taken (those before the if on the path to it, and the branch's own)."""
        before, inside = {}, [{} for _ in spans]
        here = Occ(-1, None, ancestors)
        for occ, _, _ in self.history:
            p = (occ.item.core, occ.item.pipe)
            if occ.index < first:
                if exclusive(occ, here):  # in another branch of an enclosing if
                    continue
                before.setdefault(p, []).append(occ.index)
                continue
            for b, (lo, hi) in enumerate(spans):
                if lo <= occ.index < hi:
                    inside[b].setdefault(p, []).append(occ.index)
        return [{p: before.get(p, []) + ins.get(p, []) for p in set(before) | set(ins)}
                for ins in inside]

    def _placed_at(self, item) -> list:
        """The channels set or primed at `item`, in channel order."""
        if self.frozen:
            return self.placed.get(id(item), ())
        return tuple(self.set_here.get(id(item), ()))

    def snapshot(self, prev: Occ, occ: Occ, ch: Channel) -> dict:
        if ch.kind == "barrier":
            return {ch.src: prev.index}
        if isinstance(ch.set_at, Instr):  # its latest run: `prev` itself, or a later producer
            return dict(self.vc_of[self.last_occ.get(id(ch.set_at), prev.index)])
        return dict(self.exit_vc.get(id(ch.set_at), {}).get(ch.src, {ch.src: prev.index}))

    def apply(self, ch: Channel, known: dict, snapshot=None):
        vc = snapshot if snapshot is not None else ch.last_set
        if ch.kind == "barrier":
            vc = {ch.src: self.cur.get(ch.src, {}).get(ch.src, -1)}
        if vc:
            join(known, vc)

    def channel(self, prev: Occ, occ: Occ, p, q) -> Channel:
        after = False
        if p == q:  # two vector instructions: a barrier right before the later one
            kind, set_at, wait_at, primed = "barrier", None, occ.item, None
        else:
            kind = "flag" if p[0] == q[0] else "cross"
            set_at, wait_at, primed, after = placement(prev, occ)
            if self.coalesce and not after:
                set_at = last_producer(set_at, wait_at, prev.item)
                wait_at = first_consumer(wait_at, occ.item)
        key = (kind, p, q, id(wait_at), id(primed), after)
        for ch in self.by_key.get(key, ()):
            if after:
                if ch.set_at is set_at:
                    return ch
                continue
            if ch.set_at is set_at:
                return ch
            if kind != "barrier" and getattr(ch.set_at, "parent", 0) is getattr(set_at, "parent", 1):
                # One wait point, two sets on one pipe in one list: the later set covers both.
                if position(set_at) > position(ch.set_at):
                    self._move_set(ch, set_at)
                return ch
        ch = Channel(kind, p, q, set_at, wait_at, primed, loc=prev.item.stmt.loc, wait_after=after,
                     seq=len(self.channels), ends=(prev.item, occ.item),
                     branch_set=in_loop_branch(prev, primed))
        self.channels.append(ch)
        self.by_key.setdefault(key, []).append(ch)
        self.by_wait.setdefault(ch.wait_key, []).append(ch)
        for at in {id(x) for x in (set_at, primed) if x is not None}:
            self.set_here.setdefault(at, []).append(ch)
        return ch

    def _move_set(self, ch: Channel, set_at):
        if ch.set_at is not ch.primed:
            self.set_here[id(ch.set_at)].remove(ch)
        ch.set_at = set_at
        here = self.set_here.setdefault(id(set_at), [])
        if ch not in here:
            here.append(ch)
            here.sort(key=lambda c: c.seq)


def _first(entry):
    return entry[0]
