"""Pipe-level simulator of lowered IR: the executable form of docs/machine_model.md.

`simulate_kernel` runs each block's three core programs (C, V0, V1; `streams.py`) on in-order
pipe queues with the chip's costs, executes each instruction's data effect (by the NumPy
interpreter) at its simulated completion, in completion-time order (ties: the order the
instructions started), and checks synchronisation:

* happens-before is tracked with vector clocks, one component per (core, pipe) thread that can
  run instructions of the kernel (`_Pipe.cid`; the others' components would stay 0). A non-V
  pipe is a chain. A V data instruction does not advance its thread's component, so two V
  instructions are ordered only through a later `pipe_barrier(V)`, `set_flag(V, ..)` or
  `set_cross_flag(V, ..)`, which take the next V epoch and so follow every earlier V instruction.
  A wait joins the clock of the set it consumes; a scalar wait (pipe S) joins into the core's
  dispatch clock, stamped on every instruction dispatched after it.
* each buffer instance keeps the accesses not yet known to be ordered before every later one
  (`sim/races.py`).
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

from ..errors import (
    CompileError, DeadlockError, InternalCompilerError, KernelRuntimeError, SyncError,
)
from ..gc_pause import collector_paused  # noqa: F401 (also sim.ordered's)
from ..ir.nodes import (
    PIPES, Kernel, SetCrossFlag, SetFlag, WaitFlag,
)
from .. import semantics
from .block_races import BlockRaces
from .report import (  # noqa: F401
    SimEvent, SimReport, block_events, defer_events, instr_events, instr_label,
)
from .facts import BARRIER, INSTR, SET, WAIT, XSET, XWAIT, KernelFacts, Op
from .races import RaceChecks
from .streams import (
    CORE_NAMES, DynInstr, Env, Fault, ScalarSnapshot, block_envs, cached, check_sync_ids,
    core_stream, dispatched, effect_fn, scalar_reads_of,
)
from .accesses import index_box
from .timing import TimingModel, core_private_scalars

NPIPES = len(PIPES)
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

QUEUE_CAP = 1 << 16  # instructions one pipe queue holds before the scalar unit waits


class _Pipe:
    __slots__ = ("core", "name", "tid", "cid", "queue", "busy", "free", "B", "count", "is_v",
                 "is_s", "dclock", "cycles")

    def __init__(self, core, name, tid, cid, zero):
        self.core = core
        self.name = name
        self.tid = tid          # core * len(PIPES) + pipe: the order pipes start instructions in
        self.cid = cid          # its component of clocks (None: it runs no instruction)
        self.queue = deque()
        self.busy = False
        self.free = 0
        self.B = list(zero)     # the pipe's vector clock, updated in place
        self.dclock = None      # the last dispatch clock joined into B
        self.count = 0
        self.is_v = name == "V"
        self.is_s = name == "S"
        self.cycles = None      # busy cycles, None until the first completion


class _Core:
    __slots__ = ("idx", "name", "kind", "gen", "xenv", "pipes", "plist", "queues", "D", "t_s",
                 "blocked", "done", "ename")

    def __init__(self, idx, kernel, xenv, wenv, prefix, cids, zero):
        self.idx = idx
        self.name = CORE_NAMES[idx]
        self.ename = prefix + self.name  # (as its events name it)
        self.kind = self.name[0]
        self.gen = core_stream(kernel.body, self.kind, wenv)
        self.xenv = xenv
        self.pipes = {p: _Pipe(self, p, idx * NPIPES + i, cids.get(idx * NPIPES + i), zero)
                      for i, p in enumerate(PIPES)}
        self.plist = list(self.pipes.values())
        self.queues = [p.queue for p in self.plist]
        self.D = zero
        self.t_s = 0
        self.blocked = None
        self.done = False

    def idle(self) -> bool:
        return self.done and all(not p.busy and not p.queue for p in self.pipes.values())


class _Block(RaceChecks):
    def __init__(self, sim, block: int, prefix: str = ""):
        self.sim = sim
        self.block = block
        kernel = sim.kernel
        xenvs, wenvs = block_envs(sim.bufs, kernel, block)
        cids = {t: i for i, t in enumerate(sim.clock_threads)}
        zero = (0,) * len(cids)
        self.cores = [_Core(i, kernel, xenvs[i], wenvs[i], prefix, cids, zero) for i in range(3)]
        self.by_tid = [p for c in self.cores for p in c.plist]
        self.busy_order = []    # pipes in the order of their first completion
        self.heap = []
        self.dirty = set()
        self.flags = {}
        self.deferred = None  # a SyncError raised when the block ends (see publish)
        self.pending = [defaultdict(deque) for _ in range(3)]   # receiver core -> flag -> sets
        self.half = [defaultdict(deque) for _ in range(2)]      # AIV sets not yet paired
        self.hist = {}
        self.fresh, self.suspects = [], []  # this instruction's GM records, deferred pairs
        self.done = []          # completed DynInstrs, in order: the block's events
        self.data, self.check = sim.data, sim.check
        self.blocks = sim.blocks    # races between blocks (GM accesses of every block)
        self.ninstr = 0
        self.end = 0

    # ---- scalar unit
    def advance(self, core: _Core) -> None:
        gen, dirty, check, queues = core.gen, self.dirty, self.check, core.queues
        prepared = self.sim.prepared
        while not core.done and core.blocked is None:
            try:
                seg, vs, bufs = next(gen)  # (a scalar-unit instruction ends its batch)
            except StopIteration:
                core.done = True
                break
            if seg is None:  # an if condition or loop bound that reads data: (None, stmt, vars)
                if check:
                    st, vs = vs, bufs
                    self.issue_read(core, st, vs, scalar_reads_of(st), core.D)
                continue
            prep = prepared(seg, core)
            if prep is None:  # (a statement that raises as it is dispatched)
                self.dispatch(core, dispatched(seg, vs, bufs))
                continue
            instrs, tids, blocks = prep
            t_s, d = core.t_s, core.D
            for st, pipe, names, op, pidx in instrs:
                if op.issue and check:  # the scalar unit reads the addresses first
                    d = self.issue_read(core, st, vs, op.issue, d)
                di = DynInstr(st, pipe, vs, {n: np.array(bufs[n], copy=True) for n in names}
                              if names else None, op, t_s, d)
                queues[pidx].append(di)
            dirty.update(tids)
            if blocks:
                core.blocked = di
            else:
                self.back_pressure(core)
            self.ninstr += len(instrs)

    def back_pressure(self, core: _Core) -> None:
        """A pipe queue of more than QUEUE_CAP instructions stops the scalar unit until its last
        one completes (hardware queues are finite): a loop that never ends behind a wait that is
        never satisfied then ends as a deadlock, not as memory exhausted. The cap is far above
        what a kernel that finishes queues, so it does not change their timing."""
        for q in core.queues:
            if len(q) > QUEUE_CAP:
                core.blocked = q[-1]
                return

    def dispatch(self, core: _Core, batch: list) -> None:
        """Dispatch a batch instruction by instruction, with the checks `_Sim.prepared` makes
        once per segment (raised here at the instruction that fails them)."""
        chip, op_of, plist = self.sim.chip, self.sim.op, core.plist
        t_s, d = core.t_s, core.D
        for di in batch:
            st = di.stmt
            op = di.op = op_of(st, di.pipe)
            if op.code != INSTR and op.checked is not chip:
                check_sync_ids(st, chip)  # (raises again at every dispatch until fixed)
                op.checked = chip
            if op.issue and self.check:  # the scalar unit reads the addresses first
                d = self.issue_read(core, st, di.vars, op.issue, d)
            di.dispatch = t_s
            di.dclock = d
            p = plist[op.pidx]
            if p.cid is None:  # (KernelFacts.clock_threads left out a pipe that runs it)
                raise InternalCompilerError(f"{core.name}.{p.name} has no clock component",
                                            st.loc, stage="simulate")
            p.queue.append(di)
            self.dirty.add(p.tid)
            if op.pidx == S_PIPE:
                core.blocked = di
        if core.blocked is None:
            self.back_pressure(core)
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
        clk[s.cid] = epoch
        d = core.D = tuple(clk)
        env = Env(vars, core.xenv.bufs)
        try:
            reads = [(ld.buffer, index_box(ld.buffer, ld.indices, env), False) for ld in loads]
        except Fault as e:
            raise KernelRuntimeError(str(e), st.loc) from None
        plan = self.sim.plan([r for r in reads if r[1] is not None], core.name)
        reader = SimpleNamespace(stmt=st, pipe="S")  # (as a race report names it)
        self.check_plan(plan, core, s.cid, reader, epoch, clk, None)
        return d

    # ---- completion
    def publish(self, core: _Core, p: _Pipe, di, t: int, clk, epoch: int) -> None:
        """A set_flag or set_cross_flag completes on `p` at `t` with clock `clk`: it publishes
        that every earlier instruction of this pipe is done."""
        cid = p.cid
        flag_clk = tuple(clk)
        if flag_clk[cid] != epoch:
            flag_clk = flag_clk[:cid] + (epoch,) + flag_clk[cid + 1:]
        op = di.op
        if op.code == XSET:
            self.cross_set(core, di.stmt, t, flag_clk)
            return
        key = op.fkeys[core.idx]
        old = self.flags.get(key)
        if old is not None:
            # Reported when the block ends unless a race shows the cause first: a double
            # set is usually the symptom of a pipe that ran ahead for want of a wait.
            if self.deferred is None:
                st = di.stmt
                self.deferred = SyncError(
                    f"set_flag({st.src}, {st.dst}, {st.event}) on {core.name} while the flag "
                    f"is still set by {_where(core.name, old[2])}, not yet waited for "
                    f"(block {self.block})", st.loc)
        else:
            self.flags[key] = (t, flag_clk, di)
        self.dirty.add(core.idx * NPIPES + op.didx)

    def execute(self, core: _Core, p: _Pipe, di, epoch: int, clk) -> None:
        """The data effect of instruction `di` as it completes on pipe `p` (with its access
        checks when checking)."""
        op = di.op
        env = core.xenv
        bufs = env.bufs
        scalars = di.scalars
        if scalars:  # the scalar registers as dispatched, not as now
            bufs = ScalarSnapshot(bufs, scalars)
        shared = None
        check = self.check
        if check:  # scalar accesses of UB and GM too (var registers are not memory)
            self.check_access(core, p, di, epoch, clk, bufs)  # (fresh, suspects: empty)
            touches = op.shared
            if touches is None:
                touches = op.shared = self.blocks.touches(di.stmt)
            if touches:
                shared = self.blocks.before(self.block, di, bufs)
        # (a map sets its lanes: it runs on a copy of the shared snapshot of variables)
        env.vars = vs = dict(di.vars) if op.is_for else di.vars
        if scalars:
            env = Env(vs, bufs, env.core, env.block)
        fn = op.effect
        if fn is None:  # made at the first completion: a lowering error is reported there
            fn = op.effect = effect_fn(di.stmt)
        fn(env)
        if check and self.fresh:
            self.settle(bufs)
        if shared:
            self.blocks.after(shared)

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

    # ---- main loop
    def run(self) -> int:
        """Run the block: after each completion, the pipes it may let start (`dirty`) try, in
        thread order, to start the first instruction of their queue: at once if nothing holds
        it (a wait: its flag set; a cross-core wait: its set arrived), no earlier than the pipe
        is free and the instruction dispatched. The block's cycles."""
        for core in self.cores:
            self.advance(core)
        now = seq = last = 0
        heap, by_tid, dirty, flags, pending = (
            self.heap, self.by_tid, self.dirty, self.flags, self.pending)
        pop, push = heapq.heappop, heapq.heappush
        execute, data, done = self.execute, self.data, self.done.append
        while True:
            if dirty:  # (a start adds none)
                if len(dirty) == 1:
                    todo = (dirty.pop(),)
                else:
                    todo = sorted(dirty)
                    dirty.clear()
                for tid in todo:
                    p = by_tid[tid]
                    if p.busy or not p.queue:
                        continue
                    di = p.queue[0]
                    t = now  # (a pipe not busy was freed at or before now: times only grow)
                    if di.dispatch > t:
                        t = di.dispatch
                    op = di.op
                    code = op.code
                    if code == WAIT:
                        f = flags.pop(op.fkeys[p.core.idx], None)
                        if f is None:
                            continue
                        if f[0] > t:
                            t = f[0]
                        di.wclock = f[1]
                    elif code == XWAIT:
                        q = pending[p.core.idx].get(op.key)
                        if not q:
                            continue
                        if q[0][0] > now:  # still in flight: look again when it arrives
                            seq += 1
                            push(heap, (q[0][0], seq, p, None))
                            continue
                        di.wclock = q.popleft()[1]
                    p.queue.popleft()
                    p.busy = True
                    di.start = t
                    di.end = end = t + op.cost
                    seq += 1
                    push(heap, (end, seq, p, di))
            if not heap:
                break
            now, _, p, di = pop(heap)
            if di is None:  # a cross-core set arrives
                dirty.add(p.tid)
                continue
            # the completion of di on p
            op = di.op
            code = op.code
            p.busy = False
            p.free = now
            # clk: the pipe's clock B joined with the dispatch clock (once per new one: the
            # dispatch clocks a pipe sees only grow, and B with them) and a wait's clock
            clk = p.B
            d = di.dclock
            if d is not p.dclock:
                p.dclock = d
                clk[:] = [a if a > b else b for a, b in zip(clk, d)]
            w = di.wclock
            if w is not None:
                clk[:] = [a if a > b else b for a, b in zip(clk, w)]
                di.wclock = None
            epoch = p.count = p.count + 1
            # Later instructions of an in-order pipe follow the earlier ones; on V only a
            # pipe_barrier orders vector instructions among themselves (a set_flag does not).
            if not p.is_v or code == BARRIER:
                clk[p.cid] = epoch
            core = p.core
            if p.is_s:  # the scalar unit waited for it: later dispatches follow it
                core.D = tuple(map(max, core.D, clk))
            if code == INSTR:
                if data or p.is_s:
                    execute(core, p, di, epoch, clk)
            elif code == SET:
                key = op.fkeys[core.idx]
                if key in flags or p.is_v:  # (a double set; V's own epoch: publish)
                    self.publish(core, p, di, now, clk, epoch)
                else:  # what it publishes: every earlier instruction of this pipe is done
                    flags[key] = (now, tuple(clk), di)
                    dirty.add(core.idx * NPIPES + op.didx)
            elif code == XSET:
                self.publish(core, p, di, now, clk, epoch)
            di.core = core.ename
            if di.scalars is not None:
                di.scalars = None  # (not needed any more: the events keep di)
            done(di)
            c = p.cycles
            if c is None:
                c = 0
                self.busy_order.append(p)
            p.cycles = c + now - di.start
            last = now  # (the last completion so far: completions come in time order)
            dirty.add(p.tid)
            if core.blocked is di:
                core.blocked = None
                core.t_s = now
                self.advance(core)
        self.end = last
        self.finish()
        return last

    def release(self) -> None:
        """Break the block's reference cycles (pipes and their core) once it has run, so that
        reference counting frees it while the collector is paused."""
        for core in self.cores:
            core.pipes = core.plist = core.queues = core.gen = None
        for env in self.cores[0].xenv.block or ():  # (each env lists the block's envs)
            env.block = None
        self.cores = self.by_tid = self.busy_order = None

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
        self.clock_threads = facts.clock_threads
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
        self.segments = {}  # (id(segment), core index) -> (segment, `prepared`)

    def prepared(self, seg: list, core):
        """What dispatching a segment of `core_stream` needs, found once per segment and core
        (the same for every block): ([(stmt, pipe, scalar names, Op, pipe index)], the thread
        ids it queues on, whether it ends with an S instruction); None when one of its
        instructions fails the dispatch checks (`_Block.dispatch` raises it in order)."""
        key = (id(seg), core.idx)
        hit = self.segments.get(key)
        if hit is not None and hit[0] is seg:
            return hit[1]
        chip, out, tids = self.chip, [], set()
        for st, pipe, names in seg:
            op = self.op(st, pipe)
            if op.code != INSTR and op.checked is not chip:
                try:
                    check_sync_ids(st, chip)
                except SyncError:
                    out = None
                    break
                op.checked = chip
            p = core.plist[op.pidx]
            if p.cid is None:
                out = None
                break
            out.append((st, pipe, names, op, op.pidx))
            tids.add(p.tid)
        res = None if out is None else (tuple(out), tuple(sorted(tids)),
                                        out[-1][4] == S_PIPE)
        self.segments[key] = (seg, res)
        return res


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
    # The collector stays off for the whole launch: a block's run allocates many objects that
    # are not garbage (its events) or are freed by reference counting (a finished block frees
    # its own cycles: `release`); collections between blocks would each walk every event kept.
    with np.errstate(all="ignore"), collector_paused():
        for b in todo:
            prefix = f"b{b}." if len(todo) > 1 else ""
            res = _timed_block(fast, b, seen) if fast is not None else None
            if res is None:
                blk = _Block(sim, b, prefix)
                block_cycles[b] = blk.run()
                events.append(lambda done=blk.done: instr_events(done))
                nb, busy = blk.ninstr, [(p.core.name, p.name, p.cycles) for p in blk.busy_order]
                blk.release()
            else:
                block_cycles[b], raw, nb, busy = res
                events.append(lambda ev=block_events(raw, prefix): ev)
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
    report = SimReport(cycles=max(per_core), block_cycles=block_cycles, pipe_busy=pipe_busy,
                       core_pipe_busy=dict(core_busy), instructions=ninstr, blocks=tuple(todo),
                       estimated=len(todo) < n, aic_cores=len(per_core), clock_ghz=chip.clock_ghz)
    return defer_events(report, events)  # (made when asked for: most callers never do)
