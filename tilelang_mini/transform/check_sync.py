"""check_sync: an expert (hand-synchronised) kernel is legal and its flags are enough, or a
located CompileError says what the hardware would do wrong. The IR is unchanged.

Legality, per instruction in its `T.Scope`: a cube `gemm` reads L0A and L0B and writes L0C; a copy
takes one of the chip's paths (no GM -> L0A, no L1 -> GM; L0C -> UB and UB -> L1 only on chips
with those paths) on the core that owns it; a tile is used only in its own core's scope (L1/L0*
on the cube, UB on the vector cores); every pipe instruction sits in a Scope.

Synchronisation, by the happens-before analysis insert_sync uses (`ir/happens_before.py`), run
on the kernel's own flags: each core's program is walked in order (loops unrolled, fully when
small, else their first and last trips with whole periods of their `% m` indices skipped
between; the element boxes of a map's loads and stores evaluated over its index space; ifs whose condition is known at the walk taken as the hardware would take them), the
two vector cores separately (`vid` 0 and 1: V0 and V1, each with its own UB, scalars and
flags), a `wait_flag` joins the vector clock of the `set_flag` it consumes, a cross-core wait
the clock of the matching cross-core set (the cube's wait: both AIVs' sets). Rejected, naming
both instructions and their lines:

    copy(A[...], A_L1)        # C.MTE2
    copy(A_L1, A_L0)          # C.MTE1   -> race: MTE1 reads A_L1 that MTE2 writes, no flag orders them

* a race: two accesses to overlapping bytes (planned offsets included), one a write, on
  different pipes (or two V instructions without a pipe_barrier), not ordered by flags; also
  the two AIVs writing common GM elements, or one reading what the other writes, with no
  cross-core flags through the cube between them (only where both element boxes are known
  at compile time: a data-dependent index between the AIVs is left to `simulate`);
* a deadlock: a wait no set can satisfy (both cores waiting, or a wait never set);
* a flag misuse: a set while the flag is still set (or not ordered after the wait that consumed
  the previous set), a wait reached before its set in program order, a flag set at the end.
"""
from __future__ import annotations

from collections import deque
from dataclasses import replace

from ..arch import Chip
from ..errors import CompileError
from ..ir.analysis import AIC_SCOPES, GM_SCOPES, SYNC_OPS, aiv_uniform, core_instructions, is_map
from ..ir.happens_before import (
    Block, HappensBefore, Instr, Occ, accesses, build_tree, conflict, join, same_trip,
)
from ..ir.nodes import (
    Alloc, Const, Copy, For, Gemm, If, Kernel, PipeBarrier, Region, SetCrossFlag, SetFlag,
    WaitCrossFlag, WaitFlag, walk, walk_statements,
)
from ..ir.pipes import COPY_PIPES, pipe_of
from .check_blocks import check_blocks
from .loop_cuts import cross_period, trips
from .util import map_bodies, with_body
from .sync_facts import Infeasible, bind, implied_values, no_trip, readonly_params, truth
from ..ir.printer import print_ir_line

CUBE_PIPES = ("MTE1", "M", "FIX")
VECTOR_PIPES = ("V", "MTE3")
FULL_UNROLL_BUDGET = 1000   # occurrences walked with loops fully unrolled; else cut (_trips)
MAX_SCENARIOS = 8           # branch choices tried for data-dependent ifs holding flags


def sync_expert(kernel: Kernel, chip: Chip, auto_sync: bool = False) -> Kernel:
    """The insert_sync stage of a kernel that places its own scopes: its flags are checked
    (check_sync); a kernel with no flag at all (tilelang-ascend's TL_ASCEND_AUTO_SYNC, or IR
    printed before insert_sync) gets them from insert_sync, after the same legality check; a
    kernel with cross-core flags only (it orders its cores, TL_ASCEND_AUTO_SYNC the pipes of
    each core) gets the intra-core flags and barriers from insert_sync, its own kept, and the
    whole is then checked:

        wait_cross_flag(0)  # V      ->   wait_cross_flag(0)
        copy(W[...], x)     # MTE2        copy(W[...], x)
        ... map on x        # V           set_flag(MTE2, V, 0); wait_flag(MTE2, V, 0)
                                          ... map on x"""
    from .insert_sync import insert_sync
    if not kernel.is_npu or len(kernel.grid_vars) != 2:
        return kernel
    if auto_sync:  # TL_ASCEND_AUTO_SYNC: the compiler's intra-core flags replace the kernel's
        kernel = without_intra_core_sync(kernel)
    ops = [s for s in walk_statements(kernel.body) if isinstance(s, SYNC_OPS)]
    check_legal(kernel, chip)
    if any(not isinstance(s, (SetCrossFlag, WaitCrossFlag)) for s in ops):
        # the barriers between dependent vector instructions, as the Ascend C compiler adds
        # them to tilelang-ascend's kernels (docs/machine_model.md); the flags are the kernel's
        return check_sync(insert_sync(kernel, chip, v_only=True), chip)
    if not ops:
        return insert_sync(kernel, chip)
    return check_sync(insert_sync(kernel, chip, intra_only=True), chip)


def without_intra_core_sync(kernel: Kernel) -> Kernel:
    """An expert kernel compiled with tilelang-ascend's TL_ASCEND_AUTO_SYNC (its examples place
    some flags and barriers of their own and leave the rest to the compiler): its flags and
    barriers between the pipes of one core are dropped, for insert_sync to place every one
    that is needed; cross-core flags stay (they order the cores, which insert_sync then keeps):

        copy(X, x_ub)                        copy(X, x_ub)
        pipe_barrier(V)              ->      exp(x_ub, x_ub)     # insert_sync: MTE2 -> V
        exp(x_ub, x_ub)                      ..."""
    intra = (SetFlag, WaitFlag, PipeBarrier)

    def strip(stmts):
        return [map_bodies(s, strip) for s in stmts if not isinstance(s, intra)]
    return with_body(kernel, strip(kernel.body))


def check_sync(kernel: Kernel, chip: Chip) -> Kernel:
    if not kernel.is_npu or len(kernel.grid_vars) != 2:
        return kernel
    check_legal(kernel, chip)
    offsets = {a.buffer.name: a.offset for a in walk_statements(kernel.body)
               if isinstance(a, Alloc) and a.offset is not None}
    tree = build_tree([s for s in kernel.body if not isinstance(s, Alloc)])
    ifs = [it for it in _blocks(tree) if isinstance(it.stmt, If) and _has_sync(it)]
    # one choice per condition: the cube's and the vector cores' copies of an if on values
    # every core sees alike (scalars, GM) take the same branch
    conds = {id(it.stmt): _uniform_cond(it.stmt.cond, kernel) for it in ifs}
    keys = list(dict.fromkeys(conds.values()))
    # blocks 0 and 1: an if on the block index (`cid % 2 == 0`) takes each branch in one of them
    for block in range(min(2, kernel.grid[0])):
        for n in range(min(2 ** len(keys), MAX_SCENARIOS)):
            bit = {key: bool(n >> k & 1) for k, key in enumerate(keys)}
            choice = {i: bit[key] for i, key in conds.items()}
            _Verifier(kernel, offsets, chip, choice, block).run(tree)
    # GM races between blocks (nothing orders blocks): check_blocks
    check_blocks(kernel, tree, lambda block: _Verifier(kernel, offsets, chip, {}, block))
    return kernel


# ------------------------------------------------------------------------------------ legality


def _where(s) -> str:
    return f"`{print_ir_line(s)}` ({s.loc})"


def check_legal(kernel: Kernel, chip: Chip) -> None:
    errors: list[CompileError] = []

    def bad(message, s):
        errors.append(CompileError(message, s.loc))

    for s, core in core_instructions(kernel.body):
        if isinstance(s, SYNC_OPS):
            if core is None:  # e.g. IR text whose flag line lost its indentation
                bad(f"{print_ir_line(s).split('(')[0]} outside a T.Scope: in an is_npu "
                    f"kernel with T.Scope blocks every flag and barrier sits in the "
                    f"T.Scope(\"C\") or T.Scope(\"V\") of the core that runs it", s)
        else:
            for m in _illegal(s, core, chip):
                bad(m, s)
    if errors:
        first = errors[0]
        rest = "\n".join(f"  also {e.loc}: {e.message}" for e in errors[1:])
        raise CompileError(first.message, first.loc, notes=rest)


def _illegal(s, core, chip: Chip):
    pipe = pipe_of(s, core)
    if isinstance(s, Gemm):
        ops = (s.a.buffer, s.b.buffer, s.c.buffer)
        if tuple(b.scope for b in ops) != ("L0A", "L0B", "L0C"):
            got = ", ".join(f"{r} '{b.name}' in {b.scope}" for r, b in zip("ABC", ops))
            yield (f"a cube gemm reads A from L0A and B from L0B and accumulates C in L0C; got "
                   f"{got} (copy L1 tiles to L0A/L0B with T.copy first)")
            return
        for role, r in (("scale_A", s.scale_a), ("scale_B", s.scale_b)):
            if r is not None and r.buffer.scope != "L1":
                yield (f"the cube reads block scales from L1; {role} '{r.buffer.name}' is in "
                       f"{r.buffer.scope}")
    if isinstance(s, Copy):
        src, dst = s.src.buffer.scope, s.dst.buffer.scope
        space = ["GM" if x in GM_SCOPES else x for x in (src, dst)]
        if pipe is None:
            paths = ", ".join(f"{a}->{b}" for a, b in COPY_PIPES)
            yield f"no copy path {space[0]} -> {space[1]} on the chip; the paths are {paths}"
            return
        if tuple(space) == ("L0C", "UB") and not chip.direct_l0c_to_ub:
            yield (f"{chip.name} has no direct L0C -> UB path; copy L0C to a GM workspace "
                   f"(FIX) and GM to UB on the vector core (MTE2)")
        if tuple(space) == ("UB", "L1") and not chip.direct_ub_to_l1:
            yield (f"{chip.name} has no direct UB -> L1 path; copy UB to a GM workspace (MTE3) "
                   f"and GM to L1 on the cube core (MTE2)")
    if core is None:
        if pipe != "S":
            yield ("in an is_npu kernel with T.Scope blocks every tile operation sits in "
                   "T.Scope(\"C\") or T.Scope(\"V\")")
        return
    if pipe is None:
        yield (f"no pipe of the {'cube' if core == 'C' else 'vector'} core runs this "
               f"{type(s).__name__.lower()} (its buffers' scopes have no such unit)")
        return
    own = "C" if pipe in CUBE_PIPES else "V" if pipe in VECTOR_PIPES else None
    if pipe == "MTE2" and isinstance(s, Copy):
        own = "C" if s.dst.buffer.scope == "L1" else "V"
    if own is not None and own != core:
        yield (f"this runs on the {'cube' if own == 'C' else 'vector'} core's {pipe} pipe but "
               f"sits in T.Scope(\"{core}\")")
        return
    for b in _buffers(s):
        if core == "V" and b.scope in AIC_SCOPES and not (
                chip.direct_ub_to_l1 and isinstance(s, Copy) and s.dst.buffer is b
                and b.scope == "L1"):
            yield f"'{b.name}' is a cube-core {b.scope} tile, used in T.Scope(\"V\")"
        elif core == "C" and b.scope == "UB" and not (
                chip.direct_l0c_to_ub and isinstance(s, Copy) and s.dst.buffer is b):
            yield f"'{b.name}' is a vector-core UB tile, used in T.Scope(\"C\")"


def _buffers(s):
    from ..ir.analysis import operands
    seen = []
    for node, _ in operands(s):
        if node.buffer not in seen:
            seen.append(node.buffer)
    return seen


# ------------------------------------------------------------------------------ synchronisation

class _Hull(tuple):
    """An element box that over-approximates the elements an access touches (a strided or
    guarded map): an overlap with it proves no race between the two AIVs."""


AIVS = ("V0", "V1")  # the vector cores of the block: vid 0 and vid 1


def _uniform_cond(cond, kernel):
    """The key of an if's branch choice: its condition where every core computes it alike
    (no `vid`, no load from a core's own buffers), else the if alone (`object()`)."""
    from ..ir.nodes import Load, Var
    for n in walk(cond):
        if isinstance(n, Var) and n.name == kernel.grid_vars[1] or \
                isinstance(n, Load) and n.buffer.scope not in GM_SCOPES:
            return object()
    try:
        hash(cond)
    except TypeError:
        return object()
    return cond


def _blocks(items):
    for it in items:
        if isinstance(it, Block):
            yield it
            for body in it.bodies:
                yield from _blocks(body)


def _has_sync(item) -> bool:
    if isinstance(item, Instr):
        return isinstance(item.stmt, SYNC_OPS)
    if isinstance(item, Block):
        return any(_has_sync(x) for body in item.bodies for x in body)
    return False


class _Budget(Exception):
    pass


class _Verifier(HappensBefore):
    precise = True  # a race on buffers sharing bytes only where the accesses share bytes

    def __init__(self, kernel, offsets, chip, choice, block=0):
        from ..semantics.ops import Env, Fault, compile_expr
        self.kernel, self.offsets, self.chip, self.choice = kernel, offsets, chip, choice
        self.Env, self.Fault, self.compile_expr = Env, Fault, compile_expr
        self.cid, self.vid = kernel.grid_vars
        self.block = block
        self.uniform = aiv_uniform(kernel.body, self.vid)  # what both AIVs do alike
        self.readonly = None  # names of the parameters nothing writes (implied)
        self.fns: dict = {}  # id(expression) -> (expression, compiled closure)
        self.reset()
        self.cross_period = cross_period(kernel)

    # ---- phase 1: each core's dynamic program (occurrences with their loop variables)
    def streams(self, tree, cap):
        """core -> [(instruction, ancestors, loop variables)]: the cube's program ("C"), and
        each vector core's ("V0", "V1": the scope's instructions with `vid` 0 and 1)."""
        out = {"C": [], "V0": [], "V1": []}
        self.walked = 0
        copies: dict = {}

        chosen: list = []  # (condition, branch) of the data-dependent ifs the scenario chose

        def walk(items, ancestors, env, cores, assume=(), facts=()):
            for it in items:
                if isinstance(it, Alloc):
                    continue
                if isinstance(it, Instr):
                    core = cores.get(it.core)
                    if core is None:
                        continue
                    self.walked += 1
                    if cap is None and self.walked > FULL_UNROLL_BUDGET:
                        raise _Budget
                    if core != it.core:
                        key = (id(it), core)
                        if key not in copies:
                            copies[key] = replace(it, core=core)
                        it = copies[key]
                    out[core].append((it, ancestors, dict(env)))
                    continue
                s = it.stmt
                if isinstance(s, For):
                    # a while loop: two trips like a run-time count, its condition no count
                    n = None if s.kind == "while" else self.value(s.extents[0], env, assume)
                    inner = assume
                    if n is None and s.kind != "while":  # a run-time trip count: walked as two
                        # trips, the second the last, so a condition on the count (`t + 1 < n`)
                        # agrees with it
                        inner = assume + ((s.extents[0], 2),)
                        no_trip(self.implied(s.extents[0], env, facts + tuple(chosen)))
                    for t in trips(s, n, cap, self.cross_period.get(id(s))):
                        env2 = dict(env)
                        env2.update(zip(s.vars, (t,)))
                        walk(it.bodies[0], ancestors + ((it, t),), env2, cores, inner, facts)
                    continue
                c = self.value(s.cond, env, assume)
                if c is None:
                    c = truth(self.implied(s.cond, env, facts + tuple(chosen)))
                if c is None and id(s) in self.choice:  # data-dependent, with flags inside
                    c = self.choice[id(s)]
                    chosen.append((bind(s.cond, env), c))
                if c is None:  # data-dependent, no flags: both branches, never both run
                    cond = bind(s.cond, env)
                    for branch, body in enumerate(it.bodies):
                        walk(body, ancestors + ((it, ("branch", branch)),), env, cores, assume,
                             facts + ((cond, branch == 0),))
                else:
                    walk(it.bodies[0 if c else 1], ancestors + ((it, ("branch", 0)),), env,
                         cores, assume, facts)

        try:
            for vid, cores in ((0, {"C": "C", "V": "V0"}), (1, {"V": "V1"})):
                chosen.clear()
                walk(tree, (), {self.cid: self.block, self.vid: vid}, cores)
        except Infeasible:  # the scenario's choices leave a run-time loop no trip
            return None
        return out

    def implied(self, e, env, facts):
        """The values of run-time `e` where the walk's `facts` hold (sync_facts), or None."""
        self.readonly = self.readonly or readonly_params(self.kernel)
        return implied_values(bind(e, env), facts, lambda i: self.value(i, env), self.fn,
                              self.readonly) if facts else None

    def fn(self, e):
        """The compiled closure of expression `e` (compiled once per node)."""
        hit = self.fns.get(id(e))
        if hit is None or hit[0] is not e:
            hit = self.fns[id(e)] = (e, self.compile_expr(e)[0])
        return hit[1]

    def value(self, e, env, assume=()):
        """The value of an expression from loop variables and constants, or None. `assume`:
        (expression, value) pairs of run-time loop trip counts as the walk takes them; an
        expression that reads data is evaluated with those sub-expressions replaced."""
        if isinstance(e, Const):
            return e.value
        try:
            return int(self.fn(e)(self.Env(env, {})))
        except (self.Fault, TypeError, ValueError, OverflowError, ZeroDivisionError, KeyError):
            pass
        if not assume:
            return None
        from ..ir.nodes import transform

        def known(node):
            for expr, n in assume:
                if node == expr:
                    return Const(n)
            return node
        e2 = transform(e, known)
        if e2 == e:
            return None
        return self.value(e2, env)

    def exact_index_box(self, stmt, env):
        """index_box, with the box of an access that is not exactly the elements it touches
        (a strided or guarded map: analysis.exact_boxes) marked as a _Hull."""
        from ..ir.analysis import exact_boxes, operands
        node_box = self.index_box(stmt, env)
        hull = {id(n) for (n, _), ok in zip(operands(stmt), exact_boxes(stmt)) if not ok}
        if not hull:
            return node_box

        def box(node):
            b = node_box(node)
            return _Hull(b) if b is not None and id(node) in hull else b
        return box

    def box(self, env):
        def region_box(r: Region):
            out = []
            for s, n in zip(r.start, r.extent):
                v = self.value(s, env)
                if v is None:
                    return None
                out.append((v, v + n))
            return tuple(out)
        return region_box

    def index_box(self, stmt, env):
        """The element box each load or store of instruction `stmt` covers: its indices
        evaluated over the whole index space of a map (a Parallel loop's variables as ranges),
        or None where an index reads data or a variable unknown here."""
        import numpy as np
        scope = dict(env)
        if is_map(stmt):
            exts = [self.value(e, env) for e in stmt.extents]
            if any(n is None or n <= 0 for n in exts):
                return lambda node: None
            nd = len(exts)
            for d, (name, n) in enumerate(zip(stmt.vars, exts)):
                scope[name] = np.arange(n, dtype=np.int64).reshape(
                    (1,) * d + (n,) + (1,) * (nd - d - 1))
        where = self.Env(scope, {})

        def node_box(node):
            out = []
            for x, n in zip(node.indices, node.buffer.shape):
                try:
                    v = np.asarray(self.fn(x)(where))
                    if not v.size or not np.issubdtype(v.dtype, np.integer):
                        return None
                    lo, hi = max(int(v.min()), 0), min(int(v.max()) + 1, n)
                except (self.Fault, TypeError, ValueError, OverflowError, ZeroDivisionError,
                        KeyError):
                    return None
                if hi <= lo:
                    return None
                out.append((lo, hi))
            return tuple(out)
        return node_box

    # ---- phase 2: run every pipe's queue in order; a wait nothing has set yet blocks its pipe
    # only (the scalar unit dispatches on), a scalar instruction blocks what follows it
    def run(self, tree):
        try:
            streams = self.streams(tree, None)
        except _Budget:
            streams = self.streams(tree, 2)
        if streams is None:
            return
        self.flags: dict = {}       # (core, src, dst, id) -> (clock, occ) of the pending set
        self.last_wait: dict = {}   # (core, src, dst, id) -> occ of the last wait
        self.cross = {"C": {}, "V0": {}, "V1": {}}  # receiver -> flag -> deque of (clock, occ)
        self.half = {v: {} for v in AIVS}  # an AIV's sets the cube waits for with the other's
        self.last: dict = {}        # thread -> index of its latest occurrence
        queues: dict = {}
        prev_s: dict = {}           # (core, position) -> position of the last S before it
        for c, stream in streams.items():
            last_s = -1
            for pos, (item, ancestors, env) in enumerate(stream):
                queues.setdefault((c, item.pipe), deque()).append((pos, item, ancestors, env))
                prev_s[(c, pos)] = last_s
                if item.pipe == "S":
                    last_s = pos
        s_clock: dict = {}          # (core, position of an S instruction) -> its clock
        while any(queues.values()):
            progressed = False
            for (c, pipe), queue in sorted(queues.items()):
                while queue:
                    pos, item, ancestors, env = queue[0]
                    ps = prev_s[(c, pos)]
                    if ps >= 0 and (c, ps) not in s_clock:
                        break  # dispatched only after the scalar unit's earlier work
                    occ = Occ(self.count, item, ancestors)
                    if not self.step(occ, env, s_clock.get((c, ps))):
                        break
                    if pipe == "S":
                        s_clock[(c, pos)] = self.vc_of[-1]
                    self.count += 1
                    queue.popleft()
                    progressed = True
            if not progressed:
                self.deadlock(list(queues.values()))
        for (c, src, dst, e), (_, occ) in self.flags.items():
            raise CompileError(f"set_flag({src}, {dst}, {e}) is still set when the kernel ends: "
                               f"no wait_flag consumes it", occ.item.stmt.loc)

    def deadlock(self, queues):
        """Nothing can proceed: name the waits whose set is nowhere left (the root causes),
        else the cycle of waits whose sets are queued behind other waits."""
        queued = set()
        for queue in queues:
            for _, it, _, _ in queue:
                st = it.stmt
                if isinstance(st, SetFlag):
                    queued.add((it.core, st.src, st.dst, st.event))
                elif isinstance(st, SetCrossFlag):
                    queued.update(((v, st.flag) for v in AIVS) if it.core == "C"
                                  else (("C", it.core, st.flag),))
        waits = [q[0][1] for q in queues if q and isinstance(q[0][1].stmt, (WaitFlag,
                                                                            WaitCrossFlag))]

        def root(it):  # no set is left to release it
            st = it.stmt
            if isinstance(st, WaitFlag):
                return (it.core, st.src, st.dst, st.event) not in queued
            if it.core == "C":  # both AIVs' sets: one of them queued or done on each
                return any(("C", v, st.flag) not in queued and not self.half[v].get(st.flag)
                           for v in AIVS)
            return (it.core, st.flag) not in queued

        roots = [it for it in waits if root(it)]
        local = [it for it in roots if isinstance(it.stmt, WaitFlag)]
        if local:
            s = local[0].stmt
            raise CompileError(
                f"wait_flag({s.src}, {s.dst}, {s.event}) on {local[0].core} is never satisfied: "
                f"no set_flag({s.src}, {s.dst}, {s.event}) is left to set it, so the {s.dst} "
                f"pipe would wait forever", s.loc)
        if roots:
            parts = [f"{it.core}.{it.pipe} waits at {_where(it.stmt)}" for it in roots]
            raise CompileError("deadlock: no set_cross_flag is left to release "
                               + "; ".join(parts), roots[0].stmt.loc)
        parts = [f"{it.core}.{it.pipe} waits at {_where(it.stmt)}" for it in waits]
        raise CompileError("deadlock: each waiting pipe's set is queued behind another wait: "
                           + "; ".join(parts), waits[0].stmt.loc)

    def step(self, occ: Occ, env, scalar) -> bool:
        """Process one occurrence; False (nothing done) when it is a wait nothing has set.
        `scalar`: the clock of the core's last scalar instruction before it, if any."""
        item, s = occ.item, occ.item.stmt
        q = (item.core, item.pipe)
        if isinstance(s, WaitCrossFlag):
            pending = self.cross[item.core].get(s.flag)
            if not pending:
                return False
            clock, _ = pending.popleft()
            known = self.arrive(occ, scalar)
            join(known, clock)
            self.record(occ, [], known)
            self.last[q] = occ.index  # a later set on this pipe is issued after the wait
            return True
        if isinstance(s, WaitFlag):
            key = (item.core, s.src, s.dst, s.event)
            hit = self.flags.pop(key, None)
            if hit is None:
                return False
            known = self.arrive(occ, scalar)
            join(known, hit[0])
            self.record(occ, [], known)
            self.last_wait[key] = occ
            self.last[q] = occ.index  # a later set on this pipe is issued after the wait
            return True
        known = self.arrive(occ, scalar)
        if isinstance(s, PipeBarrier):
            if q in self.last:
                known[q] = max(known.get(q, -1), self.last[q])
            self.last[q] = occ.index
            self.record(occ, [], known)
            return True
        if isinstance(s, (SetFlag, SetCrossFlag)):
            vc = dict(known)
            if q in self.last:  # a set follows every earlier instruction of its pipe (V too)
                vc[q] = max(vc.get(q, -1), self.last[q])
            if isinstance(s, SetFlag):
                self.set_flag(occ, s, vc)
            else:
                self.set_cross(occ, s, vc)
            self.last[q] = occ.index
            self.record(occ, [], known)
            return True
        acc = accesses(item, self.offsets, box=self.box(env),
                       index_box=self.exact_index_box(s, env))
        if item.core == "C":  # the cube's FixPipe writes into both AIVs' UB (dual destination)
            acc = [(m, b, w) for mem, b, w in acc
                   for m in ([(v,) + mem[1:] for v in AIVS] if mem[0] == "V" else [mem])]
        needed = self.unordered(occ, acc, known)
        if needed:
            index, prev = max(needed.values(), key=lambda x: x[0])
            self.race(prev, occ, acc)
        self.last[q] = occ.index
        self.record(occ, acc, known)
        return True

    def set_flag(self, occ, s, vc):
        key = (occ.item.core, s.src, s.dst, s.event)
        if key in self.flags:
            prev = self.flags[key][1].item.stmt
            raise CompileError(
                f"set_flag({s.src}, {s.dst}, {s.event}) while the flag is still set by "
                f"{_where(prev)}, not yet waited for: a flag holds one set", s.loc)
        last = self.last_wait.get(key)
        if last is not None and vc.get((occ.item.core, s.dst), -1) < last.index:
            raise CompileError(
                f"set_flag({s.src}, {s.dst}, {s.event}) may run before "
                f"{_where(last.item.stmt)} has consumed the previous set: nothing orders "
                f"that wait before this set, so the {s.src} pipe can set the flag twice",
                s.loc)
        self.flags[key] = (vc, occ)

    def set_cross(self, occ, s, vc):
        """The cube's set reaches both AIVs; an AIV's set reaches the cube once the other AIV
        has set the flag too (the cube's wait joins both)."""
        def push(queue):
            if len(queue) >= self.chip.cross_flag_pending:
                raise CompileError(f"more than {self.chip.cross_flag_pending} sets of cross-core "
                                   f"flag {s.flag} pending at once (the counter holds "
                                   f"{self.chip.cross_flag_pending}): wait for them on the other "
                                   f"core before setting again", s.loc)
            queue.append((vc, occ))

        core = occ.item.core
        if core == "C":
            for v in AIVS:
                push(self.cross[v].setdefault(s.flag, deque()))
            return
        push(self.half[core].setdefault(s.flag, deque()))
        h0, h1 = (self.half[v].get(s.flag) for v in AIVS)
        if h0 and h1:
            (c0, _), (c1, _) = h0.popleft(), h1.popleft()
            both = dict(c0)
            join(both, c1)
            vc = both
            push(self.cross["C"].setdefault(s.flag, deque()))

    def conflicts(self, prev, pacc, occ, acc) -> bool:
        """Accesses of the two AIVs conflict only where both element boxes are known and exact
        (a data-dependent index, a strided or guarded map, is left to `simulate`, not a false
        alarm)."""
        return any(self._conflict(prev, x, occ, y) for x in pacc for y in acc)

    def _conflict(self, prev, x, occ, y) -> bool:
        if not conflict(x, y, True):
            return False
        cores = {prev.item.core, occ.item.core}
        if x[2] and y[2] and prev.item.stmt is occ.item.stmt and id(occ.item.stmt) in \
                self.uniform and same_trip(prev, occ):  # both AIVs write the same bytes alike
            return False
        return cores != set(AIVS) or (x[1] is not None and y[1] is not None and not isinstance(
            x[1], _Hull) and not isinstance(y[1], _Hull))

    def race(self, prev: Occ, occ: Occ, acc):
        pacc = next(a for o, a, _ in self.history if o is prev)
        x, y = next((x, y) for x in pacc for y in acc if self._conflict(prev, x, occ, y))
        name = x[0][1] if x[0][0] == "GM" else x[0][3]
        other = y[0][1] if y[0][0] == "GM" else y[0][3]
        what = name if name == other else f"{name} and {other} (plan_memory placed them on " \
                                          f"common bytes)"

        def desc(o, a):
            return f"{o.item.core}.{o.item.pipe} {_where(o.item.stmt)} {'writes' if a[2] else 'reads'}"

        hint = ("a pipe_barrier(V) between them" if prev.item.pipe == occ.item.pipe == "V"
                else f"set_flag/wait_flag({prev.item.pipe}, {occ.item.pipe}, id)"
                if prev.item.core == occ.item.core
                else "vid to the GM indices so that each vector core (vid 0, vid 1) has its own "
                     "part, or set_cross_flag/wait_cross_flag through the cube core between them"
                if {prev.item.core, occ.item.core} == set(AIVS)
                else "set_cross_flag/wait_cross_flag")
        raise CompileError(
            f"race on {what}: {desc(prev, x)} and {desc(occ, y)} it, and no flag or barrier "
            f"orders them (the pipes run concurrently); add {hint}", occ.item.stmt.loc)
