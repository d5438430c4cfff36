"""What the simulator finds once and reuses: per statement (Op: its pipe, cycles, sync kind,
flag key, data effect) and per kernel (KernelFacts: which threads may access each buffer, which
buffers are race-checked, plan_memory's placements and aliases, and the access plans of
instructions: the buffer instances and boxes an access check visits)."""
from __future__ import annotations

from collections import defaultdict

from ..errors import CompileError, KernelRuntimeError
from ..ir.analysis import (
    AIC_SCOPES, GM_SCOPES, SYNC_OPS, accesses, is_map, issue_loads, loads, operands,
    written_names,
)
from ..ir.nodes import (
    PIPES, Const, For, If, Kernel, PipeBarrier, Region, Scope, SetCrossFlag, SetFlag, WaitCrossFlag,
    WaitFlag, walk_statements,
)
from .aliasing import alias_boxes, aliases, byte_ranges, placements
from .accesses import (
    GENERAL, affine_box_fn, instr_accesses, lane_extents, operands_exact, region_box_fn,
)
from .streams import (
    CORE_NAMES, Env, Fault, cached, instr_cost, instr_pipe, scalar_reads_of, stream_pipes,
    written_buffers,
)

INSTR, SET, WAIT, XSET, XWAIT, BARRIER = range(6)


class Op:
    """What the simulator needs of one statement, found once per statement and chip: its pipe
    (index into PIPES), cycles, kind (INSTR or a sync op), flag key, data effect, and the
    element reads of its addresses that the scalar unit makes as it issues it (`issue`)."""

    __slots__ = ("stmt", "pidx", "cost", "code", "key", "effect", "didx", "checked", "fkeys",
                 "plans", "issue", "label", "is_for", "shared")

    def __init__(self, st, pipe: str, costs):
        self.stmt = st
        self.effect = None      # the data effect's closure (streams.effect_fn), once needed
        self.checked = None     # the chip whose flag and event ids it was checked against
        self.label = None       # (IR text, location) of its events (report.instr_events)
        self.didx = None        # a set_flag's destination pipe (index into PIPES)
        self.plans = [False, False, False]  # KernelFacts.static_plan per core, once asked
        self.shared = None      # BlockRaces.touches, once asked
        self.pidx = PIPES.index(pipe)
        self.is_for = isinstance(st, For)  # (a map: its effect sets its lanes' variables)
        self.cost = instr_cost(st, pipe, costs)
        self.issue = () if pipe == "S" or isinstance(st, SYNC_OPS) else scalar_reads_of(st)
        self.code, self.key = INSTR, None
        if isinstance(st, SetFlag):
            self.code, self.key = SET, (st.src, st.dst, st.event)
            self.didx = PIPES.index(st.dst)
        elif isinstance(st, WaitFlag):
            self.code, self.key = WAIT, (st.src, st.dst, st.event)
        elif isinstance(st, SetCrossFlag):
            self.code, self.key = XSET, st.flag
        elif isinstance(st, WaitCrossFlag):
            self.code, self.key = XWAIT, st.flag
        elif isinstance(st, PipeBarrier):
            self.code = BARRIER
        # a flag's key as each core (0: C, 1: V0, 2: V1) holds it
        self.fkeys = tuple((c,) + self.key for c in range(3)) if self.code in (SET, WAIT) else None


def static_threads(kernel: Kernel) -> dict:
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
                if pipe != "S":  # the scalar unit reads its addresses (Op.issue)
                    for ld in issue_loads(x):
                        out[ld.buffer.name].add((s.core, "S"))
            for x in walk_statements(s.body):  # and the conditions and loop bounds
                if isinstance(x, (If, For)):
                    for ld in issue_loads(x):
                        out[ld.buffer.name].add((s.core, "S"))
    return out


def instances(buf, core: str):
    """(history key, owner for threads_of) of the buffer instances an access of `core` touches:
    GM and the AIC's buffers are one per block (AIVs write L1 on chips with UB -> L1); UB is per
    AIV, and the cube's FixPipe writes both AIVs' UB (dual destination)."""
    if buf.scope in GM_SCOPES or buf.scope in AIC_SCOPES:
        return ((("G", buf.name), "G"),)
    if core == "C":
        return (((name, buf.name), name) for name in ("V0", "V1"))
    return (((core, buf.name), core),)


class KernelFacts:
    """What the simulator finds once per kernel: the threads that may access each buffer, the
    buffers race-checked, plan_memory's placements and aliases, and caches of per-statement
    facts (Op per chip, access plans, threads of buffer instances)."""

    def __init__(self, kernel):
        self.static = static_threads(kernel)
        self.tracked = written_buffers(kernel.body, "C") | written_buffers(kernel.body, "V")
        self.placed = placements(kernel)
        self.aliases = aliases(self.placed)
        self.tracked |= {y.name for x in list(self.tracked) for y in self.aliases.get(x, ())}
        self.gm_written = set().union(*(written_names(s) for s in kernel.body))  # BlockRaces
        # the (core, pipe) threads that can run instructions, as indices core * len(PIPES) +
        # pipe, ascending: the components of the simulator's vector clocks
        pipes = {kind: stream_pipes(kernel.body, kind) for kind in "CV"}
        self.clock_threads = tuple(c * len(PIPES) + i for c, name in enumerate(CORE_NAMES)
                                   for i, pipe in enumerate(PIPES) if pipe in pipes[name[0]])
        self.threads: dict = {}
        self.plans: dict = {}
        self.ops: dict = {}     # id(chip costs) -> (costs, {id(stmt): Op})

    def ops_for(self, costs) -> dict:
        """{id(stmt): Op} of the chip with these costs."""
        hit = self.ops.get(id(costs))
        if hit is None or hit[0] is not costs:
            hit = self.ops[id(costs)] = (costs, {})
        return hit[1]

    def plan(self, accesses, core: str) -> list:
        """[(history key, owner, buffer, box, is_write)] that `accesses` of `core` check, in
        order: each tracked buffer itself, then the buffers plan_memory placed on some of its
        bytes, on the bytes the access touches (sim/aliasing.py): reusing memory needs
        ordering."""
        out = []
        for buf, box, w in accesses:
            if buf.name not in self.tracked:
                continue
            views = [(buf, box)]
            shared = self.aliases.get(buf.name)
            if shared:
                placed = self.placed
                ranges = byte_ranges(buf, placed[buf.name][1], box)
                views += [(y, bx) for y in shared
                          for bx in alias_boxes(ranges, y, placed[y.name][1])]
            for b, bx in views:
                for key, owner in instances(b, core):
                    out.append((key, owner, b, bx, w))
        return out

    def static_plan(self, st, core: str):
        """`plan` of an instruction whose accesses do not depend on variables (every operand a
        region with constant starts), made once; for one whose operands are regions with
        starts that do (and read no buffer), a function of the variables giving it; None for
        the others."""
        key = (id(st), core)
        hit = self.plans.get(key)
        if hit is None or hit[0] is not st:
            hit = self.plans[key] = (st, self._make_plan(st, core))
        return hit[1]

    def _make_plan(self, st, core: str):
        ops = cached(st, lambda s: operands(s, accumulate=False), "operands")
        if not all(isinstance(n, Region) for n, _ in ops):
            return self._element_plan(st, core)
        if all(isinstance(x, Const) for n, _ in ops for x in n.start):
            return self.plan(instr_accesses(st, {}, {}), core)
        if any(loads(n) for n, _ in ops):
            return None
        if not any(self.aliases.get(n.buffer.name) for n, _ in ops):
            # (only tracked buffers are checked: an untracked operand's start is evaluated by
            # the instruction's effect, which reports a fault there at the same statement)
            ops = [(n, w) for n, w in ops if n.buffer.name in self.tracked]
            if all(isinstance(x, Const) for n, _ in ops for x in n.start):  # (those checked)
                return self.plan([(n.buffer, box, w) for n, w in ops
                                  for box in [region_box_fn(n)(None)] if box is not None], core)
        # (with aliases every operand's box is found, in order, as instr_accesses does)
        parts = [(n, w, self._instances(n.buffer, core), region_box_fn(n)) for n, w in ops]

        def plan(vars):
            out = []
            env = Env(vars, {})
            for n, w, inst, box_of in parts:
                try:
                    box = box_of(env)
                except Fault as e:
                    raise KernelRuntimeError(str(e), st.loc) from None
                except (ValueError, OverflowError) as e:
                    raise KernelRuntimeError(f"{type(st).__name__} failed at run time: {e}",
                                             st.loc) from None
                if box is not None:
                    self._add(out, n.buffer, box, w, inst, core)
            return out

        return plan

    def _add(self, out: list, buf, box, w: bool, inst, core: str) -> None:
        """Append to plan `out` the entries of an access to `buf` (`inst`: its `_instances`)."""
        if inst is None:
            out += self.plan(((buf, box, w),), core)
        else:
            for key, owner in inst:
                out.append((key, owner, buf, box, w))

    def _instances(self, buf, core: str):
        """The (history key, owner) pairs an access of `core` to `buf` checks, for a plan:
        none when `buf` is not checked; None when it shares bytes with other buffers (`plan`
        finds their boxes from the access's)."""
        if buf.name not in self.tracked:
            return ()
        return None if self.aliases.get(buf.name) else tuple(instances(buf, core))

    def _element_plan(self, st, core: str):
        """`static_plan` of an instruction with element accesses (a map, a store): where every
        load and store has indices affine in the variables (accesses.affine_box_fn) and each
        checked one an exact box, a function of the variables giving the plan, or None where
        `instr_accesses` decides (a variable that holds no int, a lane extent that faults: it
        raises there as before); else None. Unchecked accesses are visited too, so that what
        makes `instr_accesses` raise still goes to it."""
        parts = []
        for (n, w), exact in operands_exact(st):
            if isinstance(n, Region):
                return None
            b = n.buffer
            if b.scope == "var":
                continue
            box_of = affine_box_fn(n)
            checked = b.name in self.tracked
            if box_of is None or checked and not exact:
                return None
            parts.append((b, w, self._instances(b, core), box_of))
        parts = tuple(parts)
        lanes_of = lane_extents if is_map(st) else None

        def plan(vars):
            lanes = None
            if lanes_of is not None:
                try:
                    lanes = lanes_of(st, vars)
                except Exception:  # noqa: BLE001 -- instr_accesses raises it, located
                    return None
            out = []
            for b, w, inst, box_of in parts:
                box = box_of(vars, lanes)
                if box is GENERAL:
                    return None
                if box is not None:
                    self._add(out, b, box, w, inst, core)
            return out

        return plan

    def threads_of(self, buf, owner: str):
        key = (buf.name, owner)
        t = self.threads.get(key)
        if t is None:
            users = self.static.get(buf.name, ())
            if owner == "G":
                cores = range(3)
            else:
                cores = (CORE_NAMES.index(owner),)
            t = tuple((c, pipe) for c in cores for kind, pipe in users if CORE_NAMES[c][0] == kind)
            self.threads[key] = t
        return t
