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

The ordered run (`sim/ordered.py`, `run_ordered`) executes the same core programs as coroutines
in program order.

Cycles of the launch (`SimReport.cycles`): blocks are dealt round-robin to the chip's AIC cores
(block b on core b % aic_cores); a core runs its blocks one after another; the makespan is the
busiest core's total. When only some blocks are simulated, each block that was not simulated is
counted with the mean cycles of the simulated ones, and `SimReport.estimated` says so.

The scalar unit reads the elements in an if condition, a loop bound or an instruction's addresses
(analysis.issue_loads: `ids[i]` of `copy(K[ids[i], 0], k)`) as it dispatches: an S access at
dispatch (`issue_read`), race-checked like any other, and the instruction uses the values of then.

Known simplifications: the scalar unit dispatches without cost (only S instructions and scalar
waits take time); `var` scalars are not race-checked.
"""
from __future__ import annotations

import heapq
from collections import defaultdict, deque
from types import SimpleNamespace

import numpy as np

from ..errors import CompileError, DeadlockError, KernelRuntimeError, RaceError, SyncError
from ..gc_pause import collector_paused  # noqa: F401 (also sim.ordered's)
from ..ir.analysis import GM_SCOPES, is_atomic_pair
from ..ir.nodes import (
    PIPES, For, Kernel, SetCrossFlag, SetFlag, WaitFlag,
)
from .. import semantics
from .block_races import BlockRaces
from .report import SimEvent, SimReport, block_events, instr_label  # noqa: F401
from .facts import BARRIER, INSTR, SET, WAIT, XSET, XWAIT, KernelFacts, Op
from .streams import (
    CORE_NAMES, Env, Fault, Hull, ScalarSnapshot, block_envs, box_elements, cached,
    check_sync_ids, core_stream, effect_fn, index_box, instr_accesses, scalar_reads_of,
)
from .timing import TimingModel, core_private_scalars

NPIPES = len(PIPES)
NTHREADS = len(CORE_NAMES) * NPIPES
ZERO = (0,) * NTHREADS
S_PIPE = PIPES.index("S")


def _join(a, b):
    if a is b:
        return a
    return tuple(map(max, a, b))


def _where(core: str, di) -> str:
    return f"{core}.{di.pipe} `{instr_label(di.stmt)}` ({di.stmt.loc})"


# --------------------------------------------------------------------------------- static info


def check_lowered(kernel: Kernel) -> None:
    """A located CompileError unless the kernel is lowered (is_npu, grid (n,), (cid, vid))."""
    if not kernel.is_npu or len(kernel.grid) != 1 or len(kernel.grid_vars) != 2:
        raise CompileError("the simulator runs lowered kernels: is_npu=True with grid (n,) "
                           "and variables (cid, vid)", kernel.loc)


# ------------------------------------------------------------------------------- block model


def _snapshot(bufs, buf, box):
    """A copy of the elements of `box` (lo0, hi0, lo1, hi1, ...) of GM buffer `buf`."""
    try:
        arr = bufs[buf.name]
    except KeyError:
        return None
    sl = tuple(slice(box[i], box[i + 1]) for i in range(0, len(box), 2))
    if len(sl) != np.ndim(arr):
        return None
    return np.array(arr[sl], copy=True)


def _part(vals, box, over):
    """The elements of `over` in a snapshot of `box` (None when the snapshot does not hold
    them: a box past the buffer's end)."""
    if vals is None:
        return None
    sl = tuple(slice(over[i] - box[i], over[i + 1] - box[i]) for i in range(0, len(box), 2))
    part = vals[sl]
    want = tuple(over[i + 1] - over[i] for i in range(0, len(over), 2))
    if part.shape != want:
        return None
    return np.ascontiguousarray(part)


class _Pipe:
    __slots__ = ("core", "name", "tid", "queue", "busy", "free", "B", "count", "is_v", "is_s",
                 "dclock", "cycles")

    def __init__(self, core, name, tid):
        self.core = core
        self.name = name
        self.tid = tid
        self.queue = deque()
        self.busy = False
        self.free = 0
        self.B = list(ZERO)     # the pipe's vector clock, updated in place
        self.dclock = None      # the last dispatch clock joined into B
        self.count = 0
        self.is_v = name == "V"
        self.is_s = name == "S"
        self.cycles = None      # busy cycles, None until the first completion


class _Core:
    __slots__ = ("idx", "name", "kind", "gen", "xenv", "pipes", "plist", "D", "t_s", "blocked",
                 "done")

    def __init__(self, idx, kernel, xenv, wenv):
        self.idx = idx
        self.name = CORE_NAMES[idx]
        self.kind = self.name[0]
        self.gen = core_stream(kernel.body, self.kind, wenv)
        self.xenv = xenv
        self.pipes = {p: _Pipe(self, p, idx * NPIPES + i) for i, p in enumerate(PIPES)}
        self.plist = list(self.pipes.values())
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
        self.by_tid = [p for c in self.cores for p in c.plist]
        self.busy_order = []    # pipes in the order of their first completion
        self.heap = []
        self.seq = 0
        self.dirty = set()
        self.flags = {}
        self.deferred = None  # a SyncError raised when the block ends (see complete)
        self.pending = [defaultdict(deque) for _ in range(3)]   # receiver core -> flag -> sets
        self.half = [defaultdict(deque) for _ in range(2)]      # AIV sets not yet paired
        self.hist = {}
        self.fresh, self.suspects = [], []  # this instruction's GM records, deferred pairs
        self.events = []
        self.data, self.check = sim.data, sim.check
        self.blocks = sim.blocks    # races between blocks (GM accesses of every block)
        self.ninstr = 0
        self.end = 0

    # ---- scalar unit
    def advance(self, core: _Core) -> None:
        chip = self.sim.chip
        ops, op_of = self.sim.ops, self.sim.op
        gen, plist, dirty = core.gen, core.plist, self.dirty
        while not core.done and core.blocked is None:
            try:
                batch = next(gen)  # (a scalar-unit instruction ends its batch)
            except StopIteration:
                core.done = True
                break
            if batch[0].pipe is None:  # an if condition or loop bound that reads data
                if self.check:
                    di = batch[0]
                    self.issue_read(core, di.stmt, di.vars, scalar_reads_of(di.stmt), core.D)
                continue
            t_s, d = core.t_s, core.D
            for di in batch:
                st = di.stmt
                op = ops.get(id(st))  # (op_of, inline: once per dynamic instruction)
                if op is None or op.stmt is not st:
                    op = op_of(st, di.pipe)
                di.op = op
                if op.code != INSTR and op.checked is not chip:
                    check_sync_ids(st, chip)  # (raises again at every dispatch until fixed)
                    op.checked = chip
                if op.issue and self.check:  # the scalar unit reads the addresses first
                    d = self.issue_read(core, st, di.vars, op.issue, d)
                di.dispatch = t_s
                di.dclock = d
                p = plist[op.pidx]
                p.queue.append(di)
                dirty.add(p.tid)
                if op.pidx == S_PIPE:
                    core.blocked = di
            self.ninstr += len(batch)

    def issue_read(self, core: _Core, st, vars: dict, loads, d: tuple) -> tuple:
        """The scalar unit reads the elements `loads` (Op.issue: `ids[i]` of
        `copy(K[ids[i], 0], k)`; an if condition's or loop bound's) as it issues statement `st`,
        after what its dispatch clock `d` orders: an S access, checked against each buffer's
        history like any other, that what the core dispatches from here on follows. The
        dispatch clock with it."""
        s = core.pipes["S"]
        epoch = s.count = s.count + 1
        clk = list(d)
        clk[s.tid] = epoch
        d = core.D = tuple(clk)
        env = Env(vars, core.xenv.bufs)
        try:
            reads = [(ld.buffer, index_box(ld.buffer, ld.indices, env), False) for ld in loads]
        except Fault as e:
            raise KernelRuntimeError(str(e), st.loc) from None
        plan = self.sim.plan([r for r in reads if r[1] is not None], core.name)
        reader = SimpleNamespace(stmt=st, pipe="S")  # (as a race report names it)
        self.check_plan(plan, core, s.tid, reader, epoch, clk, None)
        return d

    # ---- issue
    def try_start(self, p: _Pipe, now: int) -> None:
        if p.busy or not p.queue:
            return
        di = p.queue[0]
        t = now if now > p.free else p.free
        if di.dispatch > t:
            t = di.dispatch
        op = di.op
        code = op.code
        if code == WAIT:
            f = self.flags.pop(op.fkeys[p.core.idx], None)
            if f is None:
                return
            if f[0] > t:
                t = f[0]
            di.wclock = f[1]
        elif code == XWAIT:
            q = self.pending[p.core.idx].get(op.key)
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
        di.end = t + op.cost
        self.seq += 1
        heapq.heappush(self.heap, (di.end, self.seq, p, di))

    # ---- completion
    def complete(self, p: _Pipe, di, t: int) -> None:
        core = p.core
        st = di.stmt
        op = di.op
        code = op.code
        p.busy = False
        p.free = t
        # clk: the pipe's clock B joined with the dispatch clock (once per new one: the
        # dispatch clocks a pipe sees only grow, and B with them) and a wait's clock
        clk = p.B
        d = di.dclock
        if d is not p.dclock:
            p.dclock = d
            clk[:] = [a if a > b else b for a, b in zip(clk, d)]
        if di.wclock is not None:
            clk[:] = [a if a > b else b for a, b in zip(clk, di.wclock)]
        epoch = p.count = p.count + 1
        tid = p.tid
        # Later instructions of an in-order pipe follow the earlier ones; on V only a
        # pipe_barrier orders vector instructions among themselves (a set_flag does not).
        if not p.is_v or code == BARRIER:
            clk[tid] = epoch
        if p.is_s:  # the scalar unit waited for it: later dispatches follow it
            core.D = tuple(map(max, core.D, clk))
        if code == INSTR and (self.data or p.is_s):
            env = core.xenv
            bufs = env.bufs
            if di.scalars:  # the scalar registers as dispatched, not as now
                bufs = ScalarSnapshot(bufs, di.scalars)
            shared = None
            if self.check:  # scalar accesses of UB and GM too (var registers are not memory)
                self.fresh, self.suspects = [], []
                self.check_access(core, p, di, epoch, clk, bufs)
                shared = self.blocks.before(self.block, di, bufs)
            # (a map sets its lanes: it runs on a copy of the shared snapshot of variables)
            env.vars = vs = dict(di.vars) if isinstance(st, For) else di.vars
            if di.scalars:
                env = Env(vs, bufs, env.core, env.block)
            fn = op.effect
            if fn is None:  # made at the first completion: a lowering error is reported there
                fn = op.effect = effect_fn(st)
            fn(env)
            if self.check and self.fresh:
                self.settle(bufs)
            if shared:
                self.blocks.after(shared)
        elif code == SET:
            # What a flag set here publishes: every earlier instruction of this pipe is done.
            flag_clk = tuple(clk)
            if flag_clk[tid] != epoch:
                flag_clk = flag_clk[:tid] + (epoch,) + flag_clk[tid + 1:]
            key = op.fkeys[core.idx]
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
            self.dirty.add(core.idx * NPIPES + op.didx)
        elif code == XSET:
            flag_clk = tuple(clk)
            if flag_clk[tid] != epoch:
                flag_clk = flag_clk[:tid] + (epoch,) + flag_clk[tid + 1:]
            self.cross_set(core, st, t, flag_clk)
        start = di.start
        self.events.append((core.name, p.name, start, t, st))
        if p.cycles is None:
            p.cycles = 0
            self.busy_order.append(p)
        p.cycles += t - start
        if t > self.end:
            self.end = t
        self.dirty.add(p.tid)
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
                self.dirty.update(range(v * NPIPES, (v + 1) * NPIPES))
            return
        vid = core.idx - 1
        push(self.half[vid][st.flag], (arrival, clk), core.name)
        h0, h1 = self.half[0][st.flag], self.half[1][st.flag]
        if h0 and h1:
            a0, c0 = h0.popleft()
            a1, c1 = h1.popleft()
            push(self.pending[0][st.flag], (max(a0, a1), _join(c0, c1)), "C")
            self.dirty.update(range(NPIPES))

    # ---- races
    def check_access(self, core: _Core, p: _Pipe, di, epoch: int, clk, bufs) -> None:
        """Check the accesses of `di` (its buffers `bufs`: the core's, with the scalar
        registers as dispatched) against the history of each buffer instance it touches."""
        sim = self.sim
        # A static plan reads no buffer (its region starts are constants or loop variables):
        # an instruction that reads scalar registers has its accesses found from `bufs`.
        plan = None
        if not di.scalars:  # (static_plan, kept on the statement's Op per core)
            plans = di.op.plans
            plan = plans[core.idx]
            if plan is False:
                plan = plans[core.idx] = sim.static_plan(di.stmt, core.name)
        if callable(plan):
            plan = plan(di.vars)
        elif plan is None:
            plan = sim.plan(instr_accesses(di.stmt, di.vars, bufs), core.name)
        self.check_plan(plan, core, p.tid, di, epoch, clk, bufs)

    def check_plan(self, plan, core: _Core, tid: int, di, epoch: int, clk, bufs) -> None:
        """Check the accesses of an access plan (KernelFacts.plan) against their histories."""
        hist = self.hist
        for key, owner, b, bx, w in plan:
            h = hist.get(key)
            if h is None:
                h = hist[key] = _Hist(self.sim.threads_of(b, owner))
            self.access(h, key, b, bx, w, tid, epoch, clk, core, di, bufs)

    def access(self, h, key, buf, box, w, tid, epoch, clk, core, di, bufs=None) -> None:
        keep = []
        n = len(box)
        # GM accesses keep their values (settle): the bytes read, or the bytes before and
        # after a write, so that unordered accesses that cannot differ are not races
        rec = None
        if bufs is not None and buf.scope in GM_SCOPES and not isinstance(box, Hull):
            rec = [_snapshot(bufs, buf, box), None]
            self.fresh.append((buf, box, w, rec))
        new = (tid, epoch, box, w, di, core.name, rec)
        for a in h.items:
            if a[4] is di:  # the instruction's own other operand
                keep.append(a)
                continue
            a_tid, a_ep, a_box, a_w = a[0], a[1], a[2], a[3]
            overlap = True
            covers = True
            if a_box != box:  # (equal boxes, e.g. a tile loaded again: they overlap and cover)
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
                    if rec is not None and len(a) > 6 and a[6] is not None:
                        self.suspects.append((buf, key, a, new, h, clk))  # settle decides
                    else:
                        self.race(buf, key, a, new)
            keep.append(a)
        keep.append(new)
        if len(keep) > h.limit:
            keep = self.prune(keep, h.threads)
            h.limit = max(64, 2 * len(keep))
        h.items = keep

    def settle(self, bufs) -> None:
        """After the instruction's effect: record what its GM writes wrote, then decide each
        unordered pair `access` deferred. Not a race when no order of the two can give other
        values: two writes of the same bytes; a write of the bytes a read got; a read of bytes a
        write left as they were, or that another write ordered before the read wrote the same.
        Anything else raises RaceError as before."""
        for buf, box, w, rec in self.fresh:
            rec[1] = _snapshot(bufs, buf, box) if w else rec[0]
        for buf, key, a, new, h, clk in self.suspects:
            if not self.benign(a, new, h, clk):
                self.race(buf, key, a, new)

    @staticmethod
    def benign(a, new, h, clk) -> bool:
        box, a_box = new[2], a[2]
        over = tuple(x for i in range(0, len(box), 2)
                     for x in (max(box[i], a_box[i]), min(box[i + 1], a_box[i + 1])))
        a_vals, vals = _part(a[6][1], a_box, over), _part(new[6][1], box, over)
        if a_vals is None or vals is None or a_vals.tobytes() != vals.tobytes():
            return False
        if new[3]:  # a write: of the bytes the earlier write wrote or the earlier read got
            return True
        # a read of what an unordered write wrote: the same without that write?
        if _part(a[6][0], a_box, over).tobytes() == a_vals.tobytes():
            return True  # the write left the bytes as they were
        for t in h.items:  # another write ordered before the read wrote the same bytes
            if t is a or not t[3] or len(t) < 7 or t[6] is None or t[6][1] is None:
                continue
            if t[1] > clk[t[0]]:
                continue
            t_vals = _part(t[6][1], t[2], over)
            if t_vals is not None and t_vals.tobytes() == a_vals.tobytes():
                return True
        return False

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
        """The accesses a thread that may still access the buffer has not seen. An idle pipe
        sees at least core.D (later dispatches carry it), nothing once its core is done (else
        an idle V pipe kept every scalar access of SIMT lanes: a quadratic history)."""
        front = None
        for c, pname in threads:
            core = self.cores[c]
            if core.idle():
                continue
            p = core.pipes[pname]
            b = p.B
            if not p.busy and not p.queue:
                if core.done:
                    continue
                b = tuple(map(max, b, core.D))
            front = b if front is None else tuple(map(min, front, b))
        if front is None:
            return []
        return [a for a in items if a[1] > front[a[0]]]

    def race(self, buf, key, a, b) -> None:
        def desc(x):
            kind = "writes" if x[3] else "reads"
            return f"{x[5]}.{x[4].pipe} `{instr_label(x[4].stmt)}` at {x[4].stmt.loc} {kind} it"
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
        heap, by_tid, dirty = self.heap, self.by_tid, self.dirty
        pop, try_start, complete = heapq.heappop, self.try_start, self.complete
        while True:
            if dirty:  # (try_start adds none)
                todo = sorted(dirty)
                dirty.clear()
                for tid in todo:
                    p = by_tid[tid]
                    if p.queue and not p.busy:
                        try_start(p, now)
            if not heap:
                break
            now, _, p, di = pop(heap)
            if di is None:  # a cross-core set arrives
                dirty.add(p.tid)
            else:
                complete(p, di, now)
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
            parts = [f"{core.name}.{p.name} waits at `{instr_label(p.queue[0].stmt)}` "
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


class _Sim:
    def __init__(self, kernel, args, chip, check, data=True):
        check_lowered(kernel)
        self.kernel = kernel
        self.chip = chip
        self.data = data
        self.check = check and data
        if args is None and not data:
            args = zero_args(kernel)
        self.bufs = semantics.check_args(kernel, args)
        # what depends on the kernel alone is found once per kernel object (the IR is immutable)
        facts = cached(kernel, KernelFacts, "sim")
        self.tracked, self.aliases = facts.tracked, facts.aliases
        self.plan, self.static_plan, self.threads_of = (
            facts.plan, facts.static_plan, facts.threads_of)
        ops, costs = facts.ops_for(chip.costs), chip.costs
        self.blocks = BlockRaces(facts.gm_written, self.bufs)

        def op(st, pipe: str) -> Op:
            """The static facts of statement `st` (found once per statement object and chip)."""
            hit = ops.get(id(st))
            if hit is None or hit.stmt is not st:
                hit = ops[id(st)] = Op(st, pipe, costs)
            return hit

        self.op, self.ops = op, ops


def zero_args(kernel: Kernel) -> list:
    """Zero-filled arguments of a kernel (np.zeros: pages are only touched when written)."""
    from ..ir import dtypes
    return [np.zeros(p.shape, dtypes.to_numpy(p.dtype)) for p in kernel.params]


def _timed_block(model, block: int, seen: dict):
    """(cycles, events, instructions, [(core, pipe, busy cycles)] in the order of the pipes'
    first completions) of one block by the timing engine (the simulator's machine without data,
    on compiled streams; a block with the streams of one timed before takes its timing); None
    where it raises: the block then runs here, which reports the problem as it always has."""
    try:
        r = model.time_block_reusing(block, seen)
    except Exception:  # noqa: BLE001 -- the simulator's own run reports it
        return None
    return r.cycles, r.events, r.instructions, r.order


def simulate_kernel(kernel: Kernel, args: list | None, chip, *, check: bool = True,
                    blocks=None, data: bool = True) -> SimReport:
    """Simulate the blocks of a lowered kernel on `chip`; outputs are written into `args`.

    `data=False` is the timing-only mode of the performance model (`sim/estimate.py`): no
    data effects (only the scalar unit's own stores run, since later control flow may read
    them), no race checks; `args` may be None (zero-filled arguments). Cycles are the same as
    with data whenever control flow does not depend on the data. Unless a scalar-unit store
    writes GM, its blocks run on the estimate's engine (`timing.py`), which gives the same
    cycles, busy cycles, events and counts as this machine (`tests/test_timing.py`)."""
    sim = _Sim(kernel, args, chip, check, data)
    fast, seen = None, {}
    if not data and cached(kernel, core_private_scalars, "private_scalars"):
        fast = TimingModel(kernel, chip, sim.bufs)
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
            prefix = f"b{b}." if len(todo) > 1 else ""
            with collector_paused():
                res = _timed_block(fast, b, seen) if fast is not None else None
                if res is None:
                    blk = _Block(sim, b)
                    res = (blk.run(), blk.events, blk.ninstr,
                           [(p.core.name, p.name, p.cycles) for p in blk.busy_order])
                block_cycles[b], raw, nb, busy = res
                events += block_events(raw, prefix)
            ninstr += nb
            for core, pipe, cycles in busy:
                core_busy[f"{core}.{pipe}"] += cycles
                pipe_busy[pipe] += cycles
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
