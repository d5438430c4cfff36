"""Pipe-level simulator of lowered IR: the executable form of docs/machine_model.md.

`simulate_kernel` runs each block's three core programs (C, V0, V1; `streams.py`) on in-order
pipe queues with the chip's costs, executes each instruction's data effect (by the NumPy
interpreter) at its simulated completion, in completion-time order (ties: the order the
instructions started), and checks synchronisation:

* happens-before is tracked with vector clocks, one component per (core, pipe) thread. A non-V
  pipe is a chain. A V data instruction does not advance its thread's component, so two V
  instructions are ordered only through a later `pipe_barrier(V)`, `set_flag(V, ..)` or
  `set_cross_flag(V, ..)`, which take the next V epoch and so follow every earlier V instruction.
  A wait joins the clock of the set it consumes; a scalar wait (pipe S) joins into the core's
  dispatch clock, stamped on every instruction dispatched after it.
* each buffer instance (global/workspace: per block; L1/L0*: the AIC's; UB: each AIV's) keeps
  the accesses not yet known to be ordered before every later access: an access is dropped when a
  later ordered access covers its box (a write covers anything, a read covers reads), and, when
  the history grows, when it happens before the current clock of every thread that can still
  access the buffer.
* `RaceError` / `DeadlockError` / `SyncError` as the contract says.

`run_ordered` executes the core programs as coroutines in program order, switching core only at
an unsatisfied cross-core wait; local flags and barriers are no-ops there.

Cycles of the launch (`SimReport.cycles`): blocks are dealt round-robin to the chip's AIC cores
(block b on core b % aic_cores); a core runs its blocks one after another; the makespan is the
busiest core's total. When only some blocks are simulated, each block that was not simulated is
counted with the mean cycles of the simulated ones, and `SimReport.estimated` says so.

Known simplifications: the scalar unit dispatches without cost (only S instructions and scalar
waits take time); if conditions are evaluated at dispatch, so one reading data that a pipe writes
later sees the value at dispatch time; `var` scalars are not race-checked.
"""
from __future__ import annotations

import heapq
from collections import defaultdict, deque
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from ..errors import CompileError, DeadlockError, RaceError, SyncError
from ..ir.analysis import AIC_SCOPES, GM_SCOPES, SYNC_OPS, accesses, is_atomic_pair
from ..ir.graph import print_ir_line
from ..ir.nodes import (
    PIPES, Alloc, Kernel, PipeBarrier, Scope, SetCrossFlag, SetFlag, WaitCrossFlag, WaitFlag,
    walk_statements,
)
from .. import semantics
from ..semantics.coroutines import lower_core_program
from .aliasing import alias_boxes, aliases, byte_ranges, placements
from .streams import (
    CORE_NAMES, Env, Hull, ScalarSnapshot, block_envs, box_elements, cached, check_sync_ids,
    core_stream, execute_effect, instr_accesses, instr_cost, instr_pipe, shared_accesses,
    written_buffers,
)

NPIPES = len(PIPES)
NTHREADS = len(CORE_NAMES) * NPIPES
ZERO = (0,) * NTHREADS


class SimEvent(NamedTuple):
    core: str    # "C", "V0", "V1" (prefixed "b<block>." when several blocks were simulated)
    pipe: str
    start: int
    end: int
    label: str   # IR text of the instruction
    loc: str     # file:line:col


@dataclass
class SimReport:
    cycles: int
    block_cycles: dict
    pipe_busy: dict                 # "MTE2" -> busy cycles summed over cores and blocks
    core_pipe_busy: dict            # "C.MTE2" / "V0.V" -> busy cycles summed over blocks
    events: list = field(default_factory=list)
    instructions: int = 0
    blocks: tuple = ()              # the simulated blocks
    estimated: bool = False         # cycles include blocks counted at the mean of the simulated
    aic_cores: int = 1              # the chip's: where each block ran (block b on core b % n)
    clock_ghz: float = 1.0

    def to_perfetto(self, path) -> None:
        """Write the simulated blocks as Chrome-trace JSON (Perfetto, chrome://tracing): one
        track per pipe per core, each block placed on its AIC after the blocks before it."""
        from ..report.timeline import report_to_perfetto
        report_to_perfetto(self, path)


def _join(a, b):
    if a is b:
        return a
    return tuple(map(max, a, b))


_LABEL_CACHE: dict[int, tuple] = {}


def _label(stmt) -> str:  # noqa: N802
    hit = _LABEL_CACHE.get(id(stmt))
    if hit is None or hit[0] is not stmt:
        hit = (stmt, print_ir_line(stmt))
        _LABEL_CACHE[id(stmt)] = hit
    return hit[1]


def _where(core: str, di) -> str:
    return f"{core}.{di.pipe} `{_label(di.stmt)}` ({di.stmt.loc})"


# --------------------------------------------------------------------------------- static info


def _check_kernel(kernel: Kernel) -> None:
    if not kernel.is_npu or len(kernel.grid) != 1 or len(kernel.grid_vars) != 2:
        raise CompileError("the simulator runs lowered kernels: is_npu=True with grid (n,) "
                           "and variables (cid, vid)", kernel.loc)


def _static_threads(kernel: Kernel) -> dict:
    """buffer name -> set of (core kind, pipe) whose instructions may access it."""
    out = defaultdict(set)
    for s in walk_statements(kernel.body):
        if isinstance(s, Scope):
            for x in walk_statements(s.body):
                if isinstance(x, SYNC_OPS) or not hasattr(x, "loc"):
                    continue
                try:
                    pipe = instr_pipe(x)
                except CompileError:
                    continue
                r, w = accesses(x)
                for name in r | w:
                    out[name].add((s.core, pipe))
    return out


# ------------------------------------------------------------------------------- block model


class _Pipe:
    __slots__ = ("core", "name", "tid", "queue", "busy", "free", "B", "count", "is_v")

    def __init__(self, core, name, tid):
        self.core = core
        self.name = name
        self.tid = tid
        self.queue = deque()
        self.busy = False
        self.free = 0
        self.B = ZERO
        self.count = 0
        self.is_v = name == "V"


class _Core:
    __slots__ = ("idx", "name", "kind", "gen", "xenv", "pipes", "D", "t_s", "blocked", "done")

    def __init__(self, idx, kernel, xenv, wenv):
        self.idx = idx
        self.name = CORE_NAMES[idx]
        self.kind = self.name[0]
        self.gen = core_stream(kernel.body, self.kind, wenv)
        self.xenv = xenv
        self.pipes = {p: _Pipe(self, p, idx * NPIPES + i) for i, p in enumerate(PIPES)}
        self.D = ZERO
        self.t_s = 0
        self.blocked = None
        self.done = False

    def idle(self) -> bool:
        return self.done and all(not p.busy and not p.queue for p in self.pipes.values())


class _Hist:
    __slots__ = ("items", "limit", "threads")

    def __init__(self, threads):
        self.items = []
        self.limit = 64
        self.threads = threads


class _Block:
    def __init__(self, sim, block: int):
        self.sim = sim
        self.block = block
        kernel = sim.kernel
        xenvs, wenvs = block_envs(sim.bufs, kernel, block)
        self.cores = [_Core(i, kernel, xenvs[i], wenvs[i]) for i in range(3)]
        self.heap = []
        self.seq = 0
        self.dirty = set()
        self.flags = {}
        self.deferred = None  # a SyncError raised when the block ends (see complete)
        self.pending = [defaultdict(deque) for _ in range(3)]   # receiver core -> flag -> sets
        self.half = [defaultdict(deque) for _ in range(2)]      # AIV sets not yet paired
        self.hist = {}
        self.events = []
        self.busy = defaultdict(int)
        self.ninstr = 0
        self.end = 0

    # ---- scalar unit
    def advance(self, core: _Core) -> None:
        chip = self.sim.chip
        while not core.done and core.blocked is None:
            try:
                di = next(core.gen)
            except StopIteration:
                core.done = True
                break
            check_sync_ids(di.stmt, chip)
            di.dispatch = core.t_s
            di.dclock = core.D
            p = core.pipes[di.pipe]
            p.queue.append(di)
            self.dirty.add(p)
            self.ninstr += 1
            if di.pipe == "S":
                core.blocked = di

    # ---- issue
    def try_start(self, p: _Pipe, now: int) -> None:
        if p.busy or not p.queue:
            return
        di = p.queue[0]
        t = max(now, p.free, di.dispatch)
        st = di.stmt
        core = p.core
        if isinstance(st, WaitFlag):
            key = (core.idx, st.src, st.dst, st.event)
            f = self.flags.pop(key, None)
            if f is None:
                return
            t = max(t, f[0])
            di.wclock = f[1]
        elif isinstance(st, WaitCrossFlag):
            q = self.pending[core.idx].get(st.flag)
            if not q:
                return
            if q[0][0] > now:  # still in flight: look again when it arrives
                self.seq += 1
                heapq.heappush(self.heap, (q[0][0], self.seq, p, None))
                return
            arrival, clk = q.popleft()
            di.wclock = clk
        p.queue.popleft()
        p.busy = True
        di.start = t
        di.end = t + cached(st, lambda s: instr_cost(s, instr_pipe(s), self.sim.chip.costs),
                              self.sim.chip.costs)
        self.seq += 1
        heapq.heappush(self.heap, (di.end, self.seq, p, di))

    # ---- completion
    def complete(self, p: _Pipe, di, t: int) -> None:
        core = p.core
        st = di.stmt
        p.busy = False
        p.free = t
        clk = _join(p.B, di.dclock)
        if di.wclock is not None:
            clk = _join(clk, di.wclock)
        p.count += 1
        epoch = p.count
        is_sync = isinstance(st, SYNC_OPS)
        tid = p.tid
        # What a flag set here publishes: every earlier instruction of this pipe is done.
        flag_clk = clk[:tid] + (epoch,) + clk[tid + 1:]
        # Later instructions of an in-order pipe follow the earlier ones; on V only a
        # pipe_barrier orders vector instructions among themselves (a set_flag does not).
        if not p.is_v or isinstance(st, PipeBarrier):
            clk = flag_clk
        p.B = clk
        if p.name == "S":  # the scalar unit waited for it: later dispatches follow it
            core.D = _join(core.D, clk)
        if not is_sync and (self.sim.data or p.name == "S"):
            shared = None
            if self.sim.check:  # scalar accesses of UB and GM too (var registers are not memory)
                self.check_access(core, p, di, epoch, clk)
                shared = self.sim.blocks.before(self.block, di, core.xenv.bufs)
            env = core.xenv
            env.vars = di.vars
            if di.scalars:  # the scalar registers as dispatched, not as now
                env = Env(di.vars, ScalarSnapshot(env.bufs, di.scalars), env.core, env.block)
            execute_effect(st, env)
            if shared:
                self.sim.blocks.after(shared)
        elif isinstance(st, SetFlag):
            key = (core.idx, st.src, st.dst, st.event)
            old = self.flags.get(key)
            if old is not None:
                # Reported when the block ends unless a race shows the cause first: a double
                # set is usually the symptom of a pipe that ran ahead for want of a wait.
                if self.deferred is None:
                    self.deferred = SyncError(
                        f"set_flag({st.src}, {st.dst}, {st.event}) on {core.name} while the flag "
                        f"is still set by {_where(core.name, old[2])}, not yet waited for "
                        f"(block {self.block})", st.loc)
            else:
                self.flags[key] = (t, flag_clk, di)
            self.dirty.add(core.pipes[st.dst])
        elif isinstance(st, SetCrossFlag):
            self.cross_set(core, st, t, flag_clk)
        self.events.append((core.name, p.name, di.start, t, st))
        self.busy[(core.name, p.name)] += t - di.start
        if t > self.end:
            self.end = t
        self.dirty.add(p)
        if core.blocked is di:
            core.blocked = None
            core.t_s = t
            self.advance(core)

    def cross_set(self, core: _Core, st, t: int, clk) -> None:
        chip = self.sim.chip
        arrival = t + chip.costs.cross_flag_latency
        limit = chip.cross_flag_pending

        def push(q, item, who):
            if len(q) >= limit:
                raise SyncError(f"more than {limit} pending sets on cross-core flag {st.flag} "
                                f"of {who} (block {self.block})", st.loc)
            q.append(item)

        if core.kind == "C":
            for v in (1, 2):
                push(self.pending[v][st.flag], (arrival, clk), CORE_NAMES[v])
                self.dirty.update(self.cores[v].pipes.values())
            return
        vid = core.idx - 1
        push(self.half[vid][st.flag], (arrival, clk), core.name)
        h0, h1 = self.half[0][st.flag], self.half[1][st.flag]
        if h0 and h1:
            a0, c0 = h0.popleft()
            a1, c1 = h1.popleft()
            push(self.pending[0][st.flag], (max(a0, a1), _join(c0, c1)), "C")
            self.dirty.update(self.cores[0].pipes.values())

    # ---- races
    def check_access(self, core: _Core, p: _Pipe, di, epoch: int, clk) -> None:
        tracked = self.sim.tracked
        bufs = core.xenv.bufs if not di.scalars else ScalarSnapshot(core.xenv.bufs, di.scalars)
        for buf, box, w in instr_accesses(di.stmt, di.vars, bufs):
            if buf.name not in tracked:
                continue
            # The buffer itself, then the buffers plan_memory placed on some of its bytes, on
            # the bytes this access touches (sim/aliasing.py): reusing memory needs ordering.
            views = [(buf, box)]
            shared = self.sim.aliases.get(buf.name)
            if shared:
                placed = self.sim.placed
                ranges = byte_ranges(buf, placed[buf.name][1], box)
                views += [(y, bx) for y in shared
                          for bx in alias_boxes(ranges, y, placed[y.name][1])]
            for b, bx in views:
                for key, owner in _instances(b, core.name):
                    h = self.hist.get(key)
                    if h is None:
                        h = self.hist[key] = _Hist(self.sim.threads_of(b, owner))
                    self.access(h, key, b, bx, w, p.tid, epoch, clk, core, di)

    def access(self, h, key, buf, box, w, tid, epoch, clk, core, di) -> None:
        keep = []
        n = len(box)
        for a in h.items:
            if a[4] is di:  # the instruction's own other operand
                keep.append(a)
                continue
            a_tid, a_ep, a_box, a_w = a[0], a[1], a[2], a[3]
            overlap = True
            covers = True
            for i in range(0, n, 2):
                lo, hi, alo, ahi = box[i], box[i + 1], a_box[i], a_box[i + 1]
                if lo >= ahi or alo >= hi:
                    overlap = False
                    break
                if lo > alo or hi < ahi:
                    covers = False
            if overlap:
                if a_ep <= clk[a_tid]:
                    if covers and (w or not a_w) and not isinstance(box, Hull):
                        continue
                elif (w or a_w) and not is_atomic_pair(w, a_w) and (  # atomic adds commute
                        self.touch_common(buf, box, a_box, core.name, a[5])):
                    self.race(buf, key, a, (tid, epoch, box, w, di, core.name))
            keep.append(a)
        keep.append((tid, epoch, box, w, di, core.name))
        if len(keep) > h.limit:
            keep = self.prune(keep, h.threads)
            h.limit = max(64, 2 * len(keep))
        h.items = keep

    @staticmethod
    def touch_common(buf, box, a_box, core, a_core) -> bool:
        """Two overlapping boxes: do the accesses touch common elements? Yes unless one is the
        Hull of a strided map whose elements miss the other's, or (between the two AIVs, on
        GM, as check_sync decides) the Hull of a guarded map, whose elements are unknown."""
        if not isinstance(box, Hull) and not isinstance(a_box, Hull):
            return True
        e1, e2 = box_elements(box, buf.shape), box_elements(a_box, buf.shape)
        if e1 is None or e2 is None:
            return not ({core, a_core} == {"V0", "V1"} and buf.scope in GM_SCOPES)
        return np.intersect1d(e1, e2, assume_unique=True).size > 0

    def prune(self, items, threads):
        front = None
        for c, pname in threads:
            core = self.cores[c]
            if core.idle():
                continue
            b = core.pipes[pname].B
            front = b if front is None else tuple(map(min, front, b))
        if front is None:
            return []
        return [a for a in items if a[1] > front[a[0]]]

    def race(self, buf, key, a, b) -> None:
        def desc(x):
            kind = "writes" if x[3] else "reads"
            return f"{x[5]}.{x[4].pipe} `{_label(x[4].stmt)}` at {x[4].stmt.loc} {kind} it"
        where = "workspace " if buf.scope == "workspace" else ""
        owner = "" if key[0] == "G" else f" of {key[0]}"
        box = ", ".join(f"{a[2][i]}:{a[2][i + 1]}" for i in range(0, len(a[2]), 2))
        shared = self.sim.aliases.get(buf.name)
        alias = (f" (plan_memory placed {', '.join(x.name for x in shared)} on bytes of "
                 f"{buf.name}: an access through either name to common bytes counts)"
                 ) if shared else ""
        raise RaceError(
            f"data race on {where}{buf.scope} buffer {buf.name}{owner} in block {self.block}: "
            f"{desc(a)} (elements [{box}]) and {desc(b)}, and no flag or barrier orders them"
            f"{alias}", b[4].stmt.loc)

    # ---- main loop
    def run(self) -> int:
        for core in self.cores:
            self.advance(core)
        now = 0
        heap = self.heap
        while True:
            dirty, self.dirty = self.dirty, set()
            for p in sorted(dirty, key=lambda p: p.tid):
                self.try_start(p, now)
            if not heap:
                if self.dirty:
                    continue
                break
            now, _, p, di = heapq.heappop(heap)
            if di is None:  # a cross-core set arrives
                self.dirty.add(p)
            else:
                self.complete(p, di, now)
        self.finish()
        return self.end

    def finish(self) -> None:
        if self.deferred is not None:
            raise self.deferred
        # blocked waits, the one stuck the longest first: the root of a wait chain blocks first
        # a wait whose set is nowhere in the queues is a root cause: name it first
        queued = set()
        for core in self.cores:
            for p in core.pipes.values():
                for di in p.queue:
                    st = di.stmt
                    if isinstance(st, SetFlag):
                        queued.add((core.idx, st.src, st.dst, st.event))
                    elif isinstance(st, SetCrossFlag):
                        queued.update((c, st.flag) for c in ((1, 2) if core.idx == 0 else (0,)))

        def blocked_on_queued(core, di):
            st = di.stmt
            if isinstance(st, WaitFlag):
                return (core.idx, st.src, st.dst, st.event) in queued
            return (core.idx, st.flag) in queued

        stuck = sorted(((blocked_on_queued(core, p.queue[0]), max(p.free, p.queue[0].dispatch),
                         p.tid, core, p)
                        for core in self.cores for p in core.pipes.values() if p.queue),
                       key=lambda x: x[:3])
        stuck = [x[1:] for x in stuck]
        if stuck:
            parts = [f"{core.name}.{p.name} waits at `{_label(p.queue[0].stmt)}` "
                     f"({p.queue[0].stmt.loc}) since cycle {t}" for t, _, core, p in stuck]
            raise DeadlockError(f"deadlock in block {self.block}: pipes have work left and none "
                                f"can progress; " + "; ".join(parts),
                                stuck[0][3].queue[0].stmt.loc)
        if self.flags:
            (t, _, di) = next(iter(self.flags.values()))
            st = di.stmt
            raise SyncError(f"flag ({st.src}, {st.dst}, {st.event}) of "
                            f"{CORE_NAMES[next(iter(self.flags))[0]]} is still set when block "
                            f"{self.block} ends: set_flag without a matching wait_flag", st.loc)


def _instances(buf, core: str):
    """(history key, owner for threads_of) of the buffer instances an access of `core` touches:
    GM and the AIC's buffers are one per block (AIVs write L1 on chips with UB -> L1); UB is per
    AIV, and the cube's FixPipe writes both AIVs' UB (dual destination)."""
    if buf.scope in GM_SCOPES or buf.scope in AIC_SCOPES:
        return ((("G", buf.name), "G"),)
    if core == "C":
        return (((name, buf.name), name) for name in ("V0", "V1"))
    return (((core, buf.name), core),)


class _Sim:
    def __init__(self, kernel, args, chip, check, data=True):
        _check_kernel(kernel)
        self.kernel = kernel
        self.chip = chip
        self.data = data
        self.check = check and data
        if args is None and not data:
            args = zero_args(kernel)
        self.bufs = semantics.check_args(kernel, args)
        self.static = _static_threads(kernel)
        self.tracked = written_buffers(kernel.body, "C") | written_buffers(kernel.body, "V")
        self.placed = placements(kernel)
        self.aliases = aliases(self.placed)
        self.tracked |= {y.name for x in list(self.tracked) for y in self.aliases.get(x, ())}
        self._threads = {}
        self.blocks = _BlockRaces(kernel, self.bufs)

    def threads_of(self, buf, owner: str):
        key = (buf.name, owner)
        t = self._threads.get(key)
        if t is None:
            users = self.static.get(buf.name, ())
            if owner == "G":
                cores = range(3)
            else:
                cores = (CORE_NAMES.index(owner),)
            t = tuple((c, pipe) for c in cores for kind, pipe in users if CORE_NAMES[c][0] == kind)
            self._threads[key] = t
        return t


class _BlockRaces:
    """Races between blocks on global tensors. Blocks run concurrently and nothing orders them;
    the simulator runs them one after another, so it records every access of a global tensor
    that some instruction writes, with the values it read (or, for a write, the values before
    and after), where the access's box is exactly the elements touched (analysis.exact_boxes).
    After the last block, two accesses of different blocks to common elements, one writing
    and not both atomic updates of one kind, are a race when the result depends on the blocks'
    order: two writes of different values, or a read that would have seen other values had the
    writing block run on the other side of it. Same-value writes (both AIVs' or blocks'
    identical stores) are not reported."""
    BUDGET = 20000  # value comparisons of overlapping pairs per tensor

    def __init__(self, kernel, bufs):
        from ..ir.analysis import written_names
        self.bufs = bufs
        written = set()
        for s in kernel.body:
            written |= written_names(s)
        self.written = {n for n in written if n in bufs}
        self.recs = defaultdict(list)  # name -> [block, box, write, stmt, values, values after]

    def before(self, block, di, bufs):
        if not self.written:
            return None
        out = []
        for buf, box, w in shared_accesses(di.stmt, di.vars, bufs):
            arr = self.bufs.get(buf.name)
            if arr is None or buf.name not in self.written:
                continue
            sl = tuple(slice(box[i], box[i + 1]) for i in range(0, len(box), 2))
            rec = [block, box, w, di.stmt, np.array(arr[sl]), None]
            self.recs[buf.name].append(rec)
            if w:
                out.append((rec, arr, sl))
        return out

    def after(self, shared) -> None:
        for rec, arr, sl in shared:
            rec[5] = np.array(arr[sl])

    def check(self) -> None:
        """Raise a located RaceError for the first order-dependent pair of blocks."""
        for name, recs in self.recs.items():
            if len({r[0] for r in recs}) < 2 or not any(r[2] for r in recs):
                continue
            blk = np.array([r[0] for r in recs])
            lo = np.array([r[1][0::2] for r in recs])
            hi = np.array([r[1][1::2] for r in recs])
            budget = self.BUDGET
            for i, r in enumerate(recs):
                if not r[2]:
                    continue
                hit = (blk != r[0]) & (lo < hi[i]).all(axis=1) & (lo[i] < hi).all(axis=1)
                hit[:i + 1] &= np.array([not recs[j][2] for j in range(i + 1)])  # pairs once
                for j in np.flatnonzero(hit):
                    o = recs[j]
                    if r[2] and o[2] and is_atomic_pair(r[2], o[2]):
                        continue
                    budget -= 1
                    if budget < 0:
                        break
                    if not self.benign(r, o, lo[i], hi[i], lo[j], hi[j]):
                        self.report(name, r, o, np.maximum(lo[i], lo[j]),
                                    np.minimum(hi[i], hi[j]))
                if budget < 0:
                    break

    @staticmethod
    def benign(w, o, wlo, whi, olo, ohi) -> bool:
        """Would the values be the same had the two blocks run in the other order?"""
        ov_lo, ov_hi = np.maximum(wlo, olo), np.minimum(whi, ohi)

        def part(vals, lo):
            return np.ascontiguousarray(vals[tuple(slice(a - b, c - b) for a, c, b in
                                                   zip(ov_lo, ov_hi, lo))]).tobytes()
        if o[2]:  # both write: the same values either way
            return part(w[5], wlo) == part(o[5], olo)
        # o reads: had it run on the other side of the write, it would have read the values
        # after the write (it ran first) or before it (it ran after)
        seen = w[5] if o[0] < w[0] else w[4]
        return part(seen, wlo) == part(o[4], olo)

    @staticmethod
    def report(name, a, b, lo, hi) -> None:
        if b[0] < a[0]:
            a, b = b, a
        elems = ", ".join(f"{x}:{y}" for x, y in zip(lo.tolist(), hi.tolist()))

        def desc(r):
            return (f"block {r[0]} `{_label(r[3])}` at {r[3].loc} "
                    f"{'writes' if r[2] else 'reads'} it")
        raise RaceError(
            f"race between blocks on global buffer {name}[{elems}]: {desc(a)} and {desc(b)}; "
            f"blocks run concurrently and nothing orders them, and the result depends on "
            f"which runs first ({'different values written' if a[2] and b[2] else 'the read sees the write or not'}). "
            f"Give each block its own part of {name} (index it by the block), or accumulate "
            f"with T.atomic_add", b[3].loc)


def zero_args(kernel: Kernel) -> list:
    """Zero-filled arguments of a kernel (np.zeros: pages are only touched when written)."""
    from ..ir import dtypes
    return [np.zeros(p.shape, dtypes.to_numpy(p.dtype)) for p in kernel.params]


def simulate_kernel(kernel: Kernel, args: list | None, chip, *, check: bool = True,
                    blocks=None, data: bool = True) -> SimReport:
    """Simulate the blocks of a lowered kernel on `chip`; outputs are written into `args`.

    `data=False` is the timing-only mode of the performance model (`sim/estimate.py`): no
    data effects (only the scalar unit's own stores run, since later control flow may read
    them), no race checks; `args` may be None (zero-filled arguments). Cycles are the same as
    with data whenever control flow does not depend on the data."""
    sim = _Sim(kernel, args, chip, check, data)
    n = kernel.grid[0]
    todo = list(range(n)) if blocks is None else sorted(set(int(b) for b in blocks))
    for b in todo:
        if not 0 <= b < n:
            raise CompileError(f"block {b} is outside the grid of {n} blocks", kernel.loc)
    block_cycles, events = {}, []
    core_busy, pipe_busy = defaultdict(int), {p: 0 for p in PIPES}
    ninstr = 0
    with np.errstate(all="ignore"):
        for b in todo:
            blk = _Block(sim, b)
            block_cycles[b] = blk.run()
            ninstr += blk.ninstr
            prefix = f"b{b}." if len(todo) > 1 else ""
            for core, pipe, s, e, st in blk.events:
                events.append(SimEvent(prefix + core, pipe, s, e, _label(st), str(st.loc)))
            for (core, pipe), c in blk.busy.items():
                core_busy[f"{core}.{pipe}"] += c
                pipe_busy[pipe] += c
    if sim.check:
        sim.blocks.check()
    mean = -(-sum(block_cycles.values()) // len(block_cycles)) if block_cycles else 0
    per_core = [0] * max(1, chip.aic_cores)
    for b in range(n):
        per_core[b % len(per_core)] += block_cycles.get(b, mean)
    return SimReport(cycles=max(per_core), block_cycles=block_cycles, pipe_busy=pipe_busy,
                     core_pipe_busy=dict(core_busy), events=events, instructions=ninstr,
                     blocks=tuple(todo), estimated=len(todo) < n, aic_cores=len(per_core),
                     clock_ghz=chip.clock_ghz)


# ---------------------------------------------------------------------------- ordered executor


def run_ordered(kernel: Kernel, args: list) -> None:
    """Execute each block's core programs in program order as coroutines, switching core only at
    an unsatisfied cross-core wait; DeadlockError when every unfinished core is stuck."""
    _check_kernel(kernel)
    bufs = semantics.check_args(kernel, args)
    with np.errstate(all="ignore"):
        for b in range(kernel.grid[0]):
            _run_block_ordered(kernel, bufs, b)


def _run_block_ordered(kernel, bufs, block):
    xenvs, wenvs = block_envs(bufs, kernel, block)
    # each core's program runs its own instructions and yields its cross-core flags
    programs = cached(kernel, lambda k: {c: lower_core_program(k, c) for c in "CV"}, "cores")
    gens = [programs[CORE_NAMES[i][0]](wenvs[i]) for i in range(3)]
    pending = [defaultdict(int) for _ in range(3)]
    half = [defaultdict(int) for _ in range(2)]
    waiting = [None, None, None]
    done = [False, False, False]

    def step(i):
        """Run core i until it finishes or blocks; True when it made progress."""
        progressed = False
        w = waiting[i]
        if w is not None:
            if pending[i][w.flag] <= 0:
                return False
            pending[i][w.flag] -= 1
            waiting[i] = None
            progressed = True
        for st in gens[i]:
            progressed = True
            if isinstance(st, WaitCrossFlag):
                if pending[i][st.flag] > 0:
                    pending[i][st.flag] -= 1
                    continue
                waiting[i] = st
                return True
            if isinstance(st, SetCrossFlag):
                if i == 0:
                    pending[1][st.flag] += 1
                    pending[2][st.flag] += 1
                else:
                    half[i - 1][st.flag] += 1
                    if half[0][st.flag] and half[1][st.flag]:
                        half[0][st.flag] -= 1
                        half[1][st.flag] -= 1
                        pending[0][st.flag] += 1
        done[i] = True
        return True

    cur = 0
    while not all(done):
        progressed = False
        for k in range(3):
            i = (cur + k) % 3
            if not done[i] and step(i):
                progressed = True
                cur = i
                break
        if not progressed:
            stuck = [f"{CORE_NAMES[i]} waits at `{_label(waiting[i])}` ({waiting[i].loc})"
                     for i in range(3) if waiting[i] is not None]
            first = next(w for w in waiting if w is not None)
            raise DeadlockError(f"deadlock in block {block} (ordered run): every unfinished core "
                                f"waits for a cross-core flag: " + "; ".join(stuck), first.loc)
