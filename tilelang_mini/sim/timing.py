"""Timing-only simulation: the engine of the estimate (docs/performance_model.md).

The same machine as `simulator.py` (in-order pipe queues, the scalar unit dispatching in program
order and stopping at each S instruction until it completes, flags, cross-core flags with their
latency and pending limits, deadlocks and flag misuse), without data and without race checks, so
it can be much faster:

* Compiled streams. Each core kind's program is compiled once per kernel into items: an
  instruction is a small tuple (code, pipe, cycles, flag key, statement); loops, ifs, allocations
  and the scalar unit's own stores stay as items. A block's stream is the expansion of the
  items in its env. A loop whose body holds no control flow, allocation or scalar effect
  expands the same way on every iteration: its body is expanded once and repeated
  (`body * trips`), so a 256-step K loop costs one body.
* Event-driven time: a heap of completions; a pipe is looked at again only when something it
  may wait for happened (its own completion, a flag set for it, a cross-core arrival).
* The scalar unit's stores (`alloc_var` scalars, scalar maps) run while the stream expands, in
  program order, exactly where the scalar unit would run them before dispatching on; later
  control flow reads them. This equals the simulator whenever a core's control flow does not
  read what another core's scalar unit stored (the simulator runs the store at its completion
  time).
* Memory: a block keeps its expanded streams and per-pipe queues, nothing per earlier block.

`time_block` returns what `simulate_kernel(..., data=False)` reports for that block: cycles,
busy cycles per (core, pipe), the dynamic instruction count and (optionally) the events.
`control_signature` is the list of a block's control values (loop trip counts, if outcomes) with
the same expansion: blocks with equal signatures run the same instructions, so take the same
cycles (the estimate's block classes for kernels whose control flow reads data).
"""
from __future__ import annotations

import heapq
import operator
from collections import defaultdict, deque

from ..errors import CompileError, DeadlockError, SyncError
from ..gc_pause import collector_paused
from ..ir.analysis import SYNC_OPS
from ..ir.nodes import (
    PIPES, Alloc, For, If, PipeBarrier, Scope, SetCrossFlag, SetFlag, WaitCrossFlag, WaitFlag,
)
from .streams import (
    CORE_NAMES, Fault, _expr_fn, as_index, block_envs, check_sync_ids, execute, execute_effect,
    if_condition, instr_cost, instr_pipe,
)

NPIPES = len(PIPES)
PIPE_INDEX = {p: i for i, p in enumerate(PIPES)}
S_PIPE = PIPE_INDEX["S"]
INSTR, SET, WAIT, XSET, XWAIT, BARRIER = range(6)
_OP_ALLOC, _OP_EFFECT, _OP_FOR, _OP_IF, _OP_ERROR = range(5)
MAX_WHILE_TRIPS = 1 << 16  # trips of one `while` loop before the estimate calls it endless


# ------------------------------------------------------------------------------ compilation


class Program:
    """The compiled items of one core kind's program (module docstring)."""

    def __init__(self, kernel, kind: str, chip):
        self.kind = kind
        self.chip = chip
        self.items = self._body(kernel.body, False)

    def _op(self, s):
        pipe = instr_pipe(s)
        code, key = INSTR, None
        if isinstance(s, SetFlag):
            code, key = SET, (s.src, s.dst, s.event)
        elif isinstance(s, WaitFlag):
            code, key = WAIT, (s.src, s.dst, s.event)
        elif isinstance(s, SetCrossFlag):
            code, key = XSET, s.flag
        elif isinstance(s, WaitCrossFlag):
            code, key = XWAIT, s.flag
        elif isinstance(s, PipeBarrier):
            code = BARRIER
        return (code, PIPE_INDEX[pipe], instr_cost(s, pipe, self.chip.costs), key, s)

    def _body(self, body, in_scope) -> tuple:
        out = []
        for s in body:
            if isinstance(s, Scope):
                if s.core not in ("C", "V"):
                    out.append((_OP_ERROR, CompileError(f"unknown core {s.core!r}", s.loc)))
                elif in_scope:
                    out.append((_OP_ERROR, CompileError(
                        f"Scope({s.core!r}) nested in another Scope", s.loc)))
                elif s.core == self.kind:
                    out.extend(self._body(s.body, True))
            elif isinstance(s, For) and s.kind != "parallel":
                inner = self._body(s.body, in_scope)
                out.append((_OP_FOR, s, inner, _static(inner)))
            elif isinstance(s, If):
                out.append((_OP_IF, s, self._body(s.then_body, in_scope),
                            self._body(s.else_body, in_scope)))
            elif isinstance(s, Alloc):
                out.append((_OP_ALLOC, s))
            else:
                try:
                    op = self._op(s)
                except CompileError as e:
                    out.append((_OP_ERROR, e))
                    continue
                if not in_scope and op[1] != S_PIPE:
                    out.append((_OP_ERROR, CompileError(
                        f"{type(s).__name__} outside a Scope: lowered IR puts every pipe "
                        f"instruction in Scope(\"C\") or Scope(\"V\")", s.loc)))
                    continue
                if op[0] != INSTR or op[1] == S_PIPE:
                    try:
                        check_sync_ids(s, self.chip)
                    except SyncError as e:
                        out.append((_OP_ERROR, e))
                        continue
                if op[1] == S_PIPE and not isinstance(s, SYNC_OPS):
                    out.append((_OP_EFFECT, s))
                out.append(op)
        return tuple(out)


def _programs(kernel, chip) -> dict:
    """{core kind: Program} of a kernel for a chip, compiled once per (kernel, chip) object."""
    from .streams import cached
    per_chip = cached(kernel, lambda _: {}, "timing_programs")
    hit = per_chip.get(id(chip))
    if hit is None or hit[0] is not chip:
        hit = per_chip[id(chip)] = (chip, {k: Program(kernel, k, chip) for k in ("C", "V")})
    return hit[1]


def core_private_scalars(kernel) -> bool:
    """Does the scalar unit store only into its own core's state (no store to a GM buffer)?
    Then each core's control flow reads nothing another core changes while the block runs (the
    arguments, its own registers and UB), so expanding each core's stream before timing it gives
    the control path the simulator takes, which runs the stores at their completion."""
    from ..ir.analysis import GM_SCOPES
    from ..ir.nodes import Store, walk
    return not any(isinstance(n, Store) and n.buffer.scope in GM_SCOPES
                   for s in kernel.body for n in walk(s))


def _static(items) -> bool:
    """Does the item list expand the same way whatever the env: only instructions and loops of
    constant extents over such lists?"""
    from ..ir.nodes import Const
    return all(len(it) == 5 or (it[0] == _OP_FOR and len(it) == 4 and it[3]
                                and it[1].kind != "while"
                                and all(isinstance(e, Const) for e in it[1].extents))
               for it in items)


class _Expander:
    """Expands compiled items into a flat instruction list in a core's env."""

    def __init__(self, env, sig=None):
        self.env = env
        self.sig = sig          # a list receiving control values, or None

    def run(self, items, out: list) -> None:
        env = self.env
        for it in items:
            if len(it) == 5:
                out.append(it)
                continue
            tag = it[0]
            if tag == _OP_EFFECT:
                execute_effect(it[1], env)
            elif tag == _OP_ALLOC:
                execute(it[1], env)
            elif tag == _OP_FOR:
                self._for(it, out)
            elif tag == _OP_IF:
                s = it[1]
                c = if_condition(s, env)
                if self.sig is not None:
                    self.sig.append(c)
                self.run(it[2] if c else it[3], out)
            else:
                raise it[1]

    def _for(self, it, out):
        _, s, inner, static = it
        env = self.env
        if s.kind == "while":
            self._while(s, inner, out)
            return
        try:
            exts = [as_index(_expr_fn(e)(env), "a loop extent") for e in s.extents]
        except Fault as e:
            raise CompileError(str(e), s.loc) from None
        if self.sig is not None:
            self.sig.append(tuple(exts))
        trips = 1
        for n in exts:
            trips *= max(n, 0)
        if not trips:
            return
        if static:
            body = []
            self.run(inner, body)
            out.extend(body * trips)
            return
        vs = env.vars
        if len(s.vars) == 1:
            name = s.vars[0]
            for i in range(exts[0]):
                vs[name] = i
                self.run(inner, out)
            return
        import itertools
        for idx in itertools.product(*(range(n) for n in exts)):
            for name, i in zip(s.vars, idx):
                vs[name] = i
            self.run(inner, out)


    def _while(self, s, inner, out):
        """`while cond:`: the condition read before every trip, after the scalar unit's stores
        of the trip before (which `run` executes); its trip count joins the signature."""
        cond = _expr_fn(s.extents[0])
        trips = 0
        while True:
            try:
                go = cond(self.env)
            except Fault as e:
                raise CompileError(str(e), s.loc) from None
            if not go:
                break
            trips += 1
            if trips > MAX_WHILE_TRIPS:
                raise CompileError(
                    f"this `while` loop ran {MAX_WHILE_TRIPS} trips in the estimate and its "
                    f"condition still holds: the estimate runs without the data that vector and "
                    f"cube instructions compute, so a condition that reads it never changes "
                    f"here; bound the loop by scalar values (`alloc_var` counters, arguments)",
                    s.loc)
            self.run(inner, out)
        if self.sig is not None:
            self.sig.append(("while", trips))


class TimingModel:
    """Compiled programs of a lowered kernel for a chip; `time_block` simulates one block."""

    def __init__(self, kernel, chip, bufs):
        self.kernel = kernel
        self.chip = chip
        self.bufs = bufs
        self.programs = _programs(kernel, chip)

    def streams(self, block: int, sig=None) -> list:
        """The three cores' expanded instruction lists of one block."""
        _, wenvs = block_envs(self.bufs, self.kernel, block)
        out = []
        for i, name in enumerate(CORE_NAMES):
            lst: list = []
            _Expander(wenvs[i], sig).run(self.programs[name[0]].items, lst)
            if sig is not None:
                sig.append("|")
            out.append(lst)
        return out

    def control_signature(self, block: int) -> tuple:
        sig: list = []
        self.streams(block, sig)
        return tuple(sig)

    def time_block(self, block: int, events: bool = False) -> "BlockTiming":
        return self.time_streams(block, self.streams(block), events)

    def time_block_reusing(self, block: int, seen: dict) -> "BlockTiming":
        """`time_block(block, events=True)`, or the timing of an earlier block whose streams
        hold the same items, one by one (the engine's result is a function of the streams; the
        block number only appears in its error messages, and a block that raises is never
        kept). `seen`: the earlier blocks' (streams, timing) by their streams' lengths, a few
        per length."""
        streams = self.streams(block)
        same = seen.setdefault(tuple(map(len, streams)), [])
        for old, timing in same:
            if all(all(map(operator.is_, a, b)) for a, b in zip(old, streams)):
                return timing
        timing = self.time_streams(block, streams, events=True)
        if len(same) < 4 and len(seen) < 64:
            same.append((streams, timing))
        return timing

    def time_streams(self, block: int, streams: list, events: bool = False) -> "BlockTiming":
        # the loop allocates a small list per instruction and frees it soon: the cyclic
        # collector's passes over a large process would cost more than the simulation
        with collector_paused():
            return _run_block(self, block, streams, events)


# ----------------------------------------------------------------------------------- engine


class BlockTiming:
    __slots__ = ("cycles", "busy", "instructions", "events", "order")

    def __init__(self, cycles, busy, instructions, events, order=()):
        self.cycles = cycles
        self.busy = busy                  # {(core name, pipe name): busy cycles}
        self.instructions = instructions
        self.events = events              # [(core, pipe, start, end, stmt)] or None
        self.order = order                # [(core, pipe, busy cycles)] in first-completion order


def _run_block(model, block: int, streams: list, want_events: bool) -> BlockTiming:
    """The event loop of one block. Pipes are numbered tid = core * NPIPES + pipe; `dirty`
    holds the pipes to look at before the next completion, visited in tid order (the
    simulator's order, so ties resolve the same way)."""
    chip = model.chip
    xlat, limit = chip.costs.cross_flag_latency, chip.cross_flag_pending
    ntid = 3 * NPIPES
    queue = [deque() for _ in range(ntid)]
    busy = [False] * ntid
    free = [0] * ntid
    busy_cycles = [0] * ntid
    ran, order = [False] * ntid, []     # the pipes in the order of their first completion
    pos = [0, 0, 0]
    t_s = [0, 0, 0]
    blocked = [None, None, None]
    heap: list = []
    push, pop = heapq.heappush, heapq.heappop
    seq = 0
    dirty: set = set()
    flags: dict = {}
    pending = [defaultdict(deque) for _ in range(3)]
    half = [defaultdict(deque) for _ in range(2)]
    events = [] if want_events else None
    deferred = None
    end = 0

    def advance(c):
        stream = streams[c]
        i, n, t, base = pos[c], len(stream), t_s[c], c * NPIPES
        while i < n:
            op = stream[i]
            i += 1
            entry = [op, t, 0]
            tid = base + op[1]
            queue[tid].append(entry)
            dirty.add(tid)
            if op[1] == S_PIPE:
                blocked[c] = entry
                break
        pos[c] = i

    def xpush(q, item, who, op):
        if len(q) >= limit:
            raise SyncError(f"more than {limit} pending sets on cross-core flag {op[3]} of {who} "
                            f"(block {block})", op[4].loc)
        q.append(item)

    for c in range(3):
        advance(c)
    now = 0
    while True:
        while dirty:
            todo = sorted(dirty)
            dirty.clear()
            for tid in todo:
                q = queue[tid]
                if busy[tid] or not q:
                    continue
                entry = q[0]
                op = entry[0]
                t = now if now > entry[1] else entry[1]
                if free[tid] > t:
                    t = free[tid]
                code = op[0]
                if code == WAIT:
                    f = flags.pop((tid // NPIPES,) + op[3], None)
                    if f is None:
                        continue
                    if f[0] > t:
                        t = f[0]
                elif code == XWAIT:
                    pq = pending[tid // NPIPES].get(op[3])
                    if not pq:
                        continue
                    if pq[0] > now:  # still in flight: look again when it arrives
                        seq += 1
                        push(heap, (pq[0], seq, tid, None))
                        continue
                    pq.popleft()
                q.popleft()
                busy[tid] = True
                entry[2] = t
                seq += 1
                push(heap, (t + op[2], seq, tid, entry))
            break
        if not heap:
            break
        now, _, tid, entry = pop(heap)
        dirty.add(tid)
        if entry is None:  # a cross-core set arrives
            continue
        c = tid // NPIPES
        op, _, start = entry
        busy[tid] = False
        free[tid] = now
        code = op[0]
        if code == SET:
            key = (c,) + op[3]
            if key in flags:
                if deferred is None:
                    st = op[4]
                    deferred = SyncError(
                        f"set_flag({st.src}, {st.dst}, {st.event}) on {CORE_NAMES[c]} while "
                        f"the flag is still set, not yet waited for (block {block})", st.loc)
            else:
                flags[key] = (now, op)
            dirty.add(c * NPIPES + PIPE_INDEX[op[3][1]])
        elif code == XSET:
            arrival = now + xlat
            flag = op[3]
            if c == 0:
                for v in (1, 2):
                    xpush(pending[v][flag], arrival, CORE_NAMES[v], op)
                    dirty.update(range(v * NPIPES, (v + 1) * NPIPES))
            else:
                xpush(half[c - 1][flag], arrival, CORE_NAMES[c], op)
                h0, h1 = half[0][flag], half[1][flag]
                if h0 and h1:
                    a0, a1 = h0.popleft(), h1.popleft()
                    xpush(pending[0][flag], a0 if a0 > a1 else a1, "C", op)
                    dirty.update(range(NPIPES))
        if events is not None:
            events.append((CORE_NAMES[c], PIPES[tid % NPIPES], start, now, op[4]))
        if not ran[tid]:
            ran[tid] = True
            order.append(tid)
        busy_cycles[tid] += now - start
        if now > end:
            end = now
        if blocked[c] is entry:
            blocked[c] = None
            t_s[c] = now
            advance(c)
    if deferred is not None:
        raise deferred
    _finish(block, queue, free, flags)
    out = {(CORE_NAMES[t // NPIPES], PIPES[t % NPIPES]): v
           for t, v in enumerate(busy_cycles) if v}
    first = [(CORE_NAMES[t // NPIPES], PIPES[t % NPIPES], busy_cycles[t]) for t in order]
    return BlockTiming(end, out, sum(pos), events, first)


def _finish(block, queue, free, flags) -> None:
    stuck = [(max(free[t], q[0][1]), t) for t, q in enumerate(queue) if q]
    if stuck:
        stuck.sort()
        from .report import instr_label

        def at(t):
            st = queue[t][0][0][4]
            return f"`{instr_label(st)}` ({st.loc})"
        parts = [f"{CORE_NAMES[t // NPIPES]}.{PIPES[t % NPIPES]} waits at {at(t)} since cycle "
                 f"{t0}" for t0, t in stuck]
        raise DeadlockError(f"deadlock in block {block}: pipes have work left and none can "
                            f"progress; " + "; ".join(parts), queue[stuck[0][1]][0][0][4].loc)
    if flags:
        key, (_, op) = next(iter(flags.items()))
        st = op[4]
        raise SyncError(f"flag ({st.src}, {st.dst}, {st.event}) of {CORE_NAMES[key[0]]} is still "
                        f"set when block {block} ends: set_flag without a matching wait_flag",
                        st.loc)
