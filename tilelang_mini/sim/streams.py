"""Core programs of a lowered kernel as dynamic instruction streams (docs/machine_model.md).

The program of a core is the kernel body with the other core's `Scope` blocks removed and its own
inlined. `core_stream` walks it the way the core's scalar unit does: it evaluates loop extents and
if conditions in the core's env, executes `Alloc`s on the spot and yields batches of pipe
instructions with a snapshot of the loop variables (so each instruction, a `DynInstr` made by
`dispatched` or by the consumer's own code, can execute later, at its simulated completion). The
consumer must handle an S-pipe instruction (a store to an `alloc_var` scalar, a scalar wait)
before resuming the generator: the scalar unit is synchronous with its own S work, and later if
conditions may read the scalars it stores. An if condition or loop bound that reads a buffer
comes first as a batch `(None, stmt, vars)`: the scalar unit's read of it, then and there (its
`vars` are the walk's own, valid until resumed).

`block_envs` builds the envs of one block: per core an execution env (the interpreter's) and a
walker env sharing its buffers but with its own variables.
"""
from __future__ import annotations

import math

import itertools

import numpy as np

from ..errors import CompileError, SyncError
from .. import semantics
from ..ir import dtypes
from ..ir.analysis import (
    GM_SCOPES, SYNC_OPS, issue_loads, written_names,
)
from ..ir.nodes import (
    Alloc, Const, Copy, Fill, For, Gemm, If, Load, Reduce, Region, Scope, Sort,
    SetCrossFlag, SetFlag, Store, WaitCrossFlag, WaitFlag, walk, walk_own,
    walk_statements,
)
from ..ir.happens_before import sync_pipe
from ..ir.pipes import pipe_of

CORE_NAMES = ("C", "V0", "V1")
DATA_TYPES = (Copy, Gemm, Fill, Reduce, Sort, Store, For)


_Ctx, lower_stmt, new_block = semantics._Ctx, semantics.lower_stmt, semantics.new_block
Env, Fault, as_index = semantics.Env, semantics.Fault, semantics.as_index
compile_expr, execute = semantics.compile_expr, semantics.execute


class DynInstr:
    """One dynamic instruction: the statement, its pipe, the loop variables when dispatched."""

    __slots__ = ("stmt", "pipe", "vars", "scalars", "dispatch", "dclock", "wclock", "start",
                 "end", "seq", "op", "core")

    def __init__(self, stmt, pipe: str, vars: dict, scalars: dict | None = None, op=None,
                 dispatch: int = 0, dclock=None):
        self.stmt = stmt
        self.pipe = pipe
        self.vars = vars
        self.scalars = scalars  # the scalar registers (alloc_var) it reads, as dispatched
        self.op = op            # the consumer's static facts of stmt
        self.dispatch = dispatch
        self.dclock = dclock
        self.wclock = None      # (start, end, seq, core: set before read)


# ----------------------------------------------------------------------------- per-stmt caches

_FN_CACHE: dict[int, tuple] = {}


def cached(node, make, tag=""):
    """`make(node)`, memoised per (tag, node object); the entry keeps the node alive."""
    key = (tag, id(node))
    hit = _FN_CACHE.get(key)
    if hit is None or hit[0] is not node:
        hit = (node, make(node))
        _FN_CACHE[key] = hit
    return hit[1]


def _expr_fn(e):
    return cached(e, lambda x: compile_expr(x)[0], "expr")


def if_condition(s, env) -> bool:
    """The value of `If` statement `s`'s condition in `env`; a located CompileError where it
    faults or is not a scalar."""
    try:
        c = _expr_fn(s.cond)(env)
    except Fault as e:
        raise CompileError(str(e), s.loc) from None
    if isinstance(c, np.ndarray) and c.ndim:
        raise CompileError("an if condition must be a scalar", s.loc)
    return bool(c)


def instr_pipe(stmt) -> str:
    """The pipe a statement is dispatched to (sync ops: the pipe that executes them)."""
    p = sync_pipe(stmt) or pipe_of(stmt)
    if p is None:
        raise CompileError(f"{type(stmt).__name__} is not a lowered pipe instruction (its buffer "
                           f"scopes map to no pipe); the simulator runs lowered IR only", stmt.loc)
    return p


def effect_fn(stmt):
    """The closure `fn(env)` running the data effect of a (non-sync) instruction, by the NumPy
    interpreter's own code (made once per statement object)."""
    if isinstance(stmt, For):
        return cached(stmt, lambda s: lower_stmt(s, _Ctx()), "lower")
    return semantics.ops.instruction(stmt)


def execute_effect(stmt, env: Env) -> None:
    """The data effect of one instruction, by the NumPy interpreter's own code."""
    if not isinstance(stmt, SYNC_OPS):
        effect_fn(stmt)(env)


# ------------------------------------------------------------------------------------ the walk


def block_envs(bufs: dict, kernel, block: int):
    """(execution envs, walker envs) of the cores C, V0, V1 of one block."""
    cid, vid = kernel.grid_vars
    top = new_block(bufs, {cid: block, vid: 0}, True)
    _, c, v0, v1 = top.block
    v1.vars[vid] = 1
    xenvs = (c, v0, v1)
    wenvs = tuple(Env(dict(e.vars), e.bufs, e.core, e.block) for e in xenvs)
    return xenvs, wenvs


def core_stream(body, kind: str, env: Env):
    """Yield the program of a core of kind "C" or "V", walking with `env`, in batches of
    instructions dispatched back to back (a run of pipe instructions with no control flow,
    allocation or scalar-unit instruction between them; a scalar-unit instruction ends its
    batch). A batch is `(segment, vars, bufs)`: the walk's segment, a list made once per
    statement list (`[(stmt, pipe, names of the scalar registers it reads)]`, the consumer's
    key for what it prepares once per segment), the snapshot of the loop variables its
    instructions share (a consumer that changes variables while executing, a Parallel map,
    copies it first) and the core's buffers (whose scalar registers the consumer copies as it
    dispatches: `dispatched`). An if condition or loop bound that reads a buffer is
    `(None, stmt, vars)`."""
    yield from _walk(body, kind, env, False, [None])


def dispatched(segment, vs: dict, bufs: dict) -> list:
    """The DynInstrs of a batch `(segment, vs, bufs)` of `core_stream`."""
    return [DynInstr(s, pipe, vs, {n: np.array(bufs[n], copy=True) for n in names}
                     if names else None) for s, pipe, names in segment]


_SEG, _SCOPE, _FOR, _IF, _ALLOC, _ERR = range(6)


def _items(body, kind: str, in_scope: bool) -> list:
    """The walk's items of a statement list, made once per (list, core kind, in Scope):
    (_SEG, [(stmt, pipe, scalar names)]) for a batch, (_SCOPE, body) for the core's own Scope,
    (_FOR | _IF | _ALLOC, stmt), (_ERR, raise) for a statement the walk rejects when it gets
    there. A Scope of the other core is left out."""
    out, seg = [], None
    for s in body:
        item = None
        if isinstance(s, Scope):
            if s.core not in ("C", "V"):
                item = (_ERR, _raiser(f"unknown core {s.core!r}", s.loc))
            elif in_scope:
                item = (_ERR, _raiser(f"Scope({s.core!r}) nested in another Scope", s.loc))
            elif s.core == kind:
                item = (_SCOPE, s.body)
            else:
                continue
        elif isinstance(s, For) and s.kind != "parallel":
            item = (_FOR, s)
        elif isinstance(s, If):
            item = (_IF, s)
        elif isinstance(s, Alloc):
            item = (_ALLOC, s)
        else:
            try:
                pipe, names = cached(s, _pipe_and_scalars, "walk")
            except Exception:  # noqa: BLE001 -- raised again when the walk gets there
                item = (_ERR, lambda s=s: _pipe_and_scalars(s))
            else:
                if not in_scope and pipe != "S":
                    item = (_ERR, _raiser(
                        f"{type(s).__name__} outside a Scope: lowered IR puts every pipe "
                        f"instruction in Scope(\"C\") or Scope(\"V\")", s.loc))
                else:
                    if seg is None:
                        seg = []
                        out.append((_SEG, seg))
                    seg.append((s, pipe, names))
                    if pipe == "S":
                        seg = None
                    continue
        seg = None
        out.append(item)
    return out


def _raiser(msg, loc):
    def fail():
        raise CompileError(msg, loc)
    return fail


_WALK_TAGS = {(k, i): f"walk{k}{i:d}" for k in "CV" for i in (False, True)}


def _walk(body, kind, env, in_scope, snap):
    items = cached(body, lambda b: _items(b, kind, in_scope), _WALK_TAGS[kind, in_scope])
    for code, x in items:
        if code == _SEG:
            vs = snap[0]
            if vs is None:
                vs = snap[0] = dict(env.vars)
            yield x, vs, env.bufs
        elif code == _FOR:
            yield from _walk_for(x, kind, env, in_scope, snap)
        elif code == _SCOPE:
            yield from _walk(x, kind, env, True, snap)
        elif code == _IF:
            if scalar_reads_of(x):
                yield None, x, env.vars
            yield from _walk(x.then_body if if_condition(x, env) else x.else_body, kind, env,
                             in_scope, snap)
        elif code == _ALLOC:
            execute(x, env)
        else:
            x()


def stream_pipes(body, kind: str) -> set:
    """The pipes that the program of a core of kind "C" or "V" can dispatch instructions to:
    those of its walk's items (whatever the control flow takes), and S."""
    out = {"S"}

    def visit(b, in_scope):
        for code, x in cached(b, lambda b: _items(b, kind, in_scope), _WALK_TAGS[kind, in_scope]):
            if code == _SEG:
                out.update(pipe for _, pipe, _ in x)
            elif code == _FOR:
                visit(x.body, in_scope)
            elif code == _SCOPE:
                visit(x, True)
            elif code == _IF:
                visit(x.then_body, in_scope)
                visit(x.else_body, in_scope)

    visit(body, False)
    return out


def scalar_reads_of(stmt) -> tuple:
    """The loads of buffers (not `var` registers) the scalar unit makes as it issues `stmt`
    (analysis.issue_loads), found once per statement."""
    return cached(stmt, lambda s: tuple(ld for ld in issue_loads(s) if ld.buffer.scope != "var"),
                  "issue")


def _pipe_and_scalars(stmt) -> tuple[str, tuple[str, ...]]:
    """(the pipe of an instruction, the scalar registers it reads as dispatched: none on S)."""
    pipe = instr_pipe(stmt)
    return pipe, (_scalar_reads(stmt) if pipe != "S" else ())


def _scalar_reads(stmt) -> tuple[str, ...]:
    """The scalar registers (alloc_var buffers) an instruction reads, and the on-chip tiles
    its regions' start indices load (`K[ids[i], 0]`: analysis.issue_loads), other than its own
    operands. The scalar unit computes an instruction's operands (addresses, extents, values)
    when it dispatches it: a pipe that runs it later still sees the values of then, not those
    of a later store (the simulator checks that what it read was written before). (A GM index
    tensor is read when the instruction runs: copying it per dispatch would cost too much.)"""
    own = {r.buffer.name for r in walk_own(stmt) if isinstance(r, Region)}
    picked = set() if isinstance(stmt, For) else {
        ld.buffer.name for ld in issue_loads(stmt) if ld.buffer.scope not in GM_SCOPES}
    return tuple(sorted((picked - own) | {n.buffer.name for n in walk(stmt) if isinstance(n, Load)
                                          and n.buffer.scope == "var"}))


class ScalarSnapshot(dict):
    """A core's buffers with the scalar registers as an instruction was dispatched with
    (`DynInstr.scalars`); buffers it creates on first use go to the core's own."""

    def __init__(self, bufs: dict, scalars: dict):
        super().__init__(bufs)
        self.update(scalars)
        self.base = bufs

    def __missing__(self, name):
        return self.base[name]


def _walk_for(s: For, kind, env, in_scope, snap):
    if s.kind == "while":
        yield from _walk_while(s, kind, env, in_scope, snap)
        return
    if scalar_reads_of(s):
        yield None, s, env.vars
    try:
        exts = [as_index(_expr_fn(e)(env), "a loop extent") for e in s.extents]
    except Fault as e:
        raise CompileError(str(e), s.loc) from None
    vs = env.vars
    if len(s.vars) == 1:
        name = s.vars[0]
        for i in range(exts[0]):
            vs[name] = i
            snap[0] = None
            yield from _walk(s.body, kind, env, in_scope, snap)
        return
    for idx in itertools.product(*(range(n) for n in exts)):
        for name, i in zip(s.vars, idx):
            vs[name] = i
        snap[0] = None
        yield from _walk(s.body, kind, env, in_scope, snap)


def _walk_while(s: For, kind, env, in_scope, snap):
    """`while cond:`: the scalar unit reads the condition before every trip (after the body's
    scalar stores of the trip before, which the consumer has run when the walk resumes)."""
    reads, cond = scalar_reads_of(s), _expr_fn(s.extents[0])
    while True:
        if reads:
            yield None, s, env.vars
        try:
            go = cond(env)
        except Fault as e:
            raise CompileError(str(e), s.loc) from None
        if not go:
            return
        snap[0] = None
        yield from _walk(s.body, kind, env, in_scope, snap)


def written_buffers(body, kind: str) -> set:
    """Names of the buffers written by the pipe instructions of a core kind's Scopes (static)."""
    out = set()
    for s in walk_statements(body):
        if isinstance(s, Scope) and s.core == kind:
            out |= written_names(s)
    return out


# ---------------------------------------------------------------------------------------- cost


def _bytes(r: Region) -> int:
    n = 1
    for e in r.extent:
        n *= e
    return n * dtypes.itemsize(r.buffer.dtype)


def _mat(r: Region):
    ext = [e for e in r.extent]
    while len(ext) > 2 and ext[0] == 1:
        ext.pop(0)
    return (ext[0], ext[1]) if len(ext) == 2 else (1, ext[0])


def gemm_mnk(g: Gemm) -> tuple[int, int, int]:
    """(M, N, K) of a gemm's regions (leading unit dims dropped, transposes applied)."""
    m, k = _mat(g.a)
    k2, n = _mat(g.b)
    if g.transpose_a:
        m, k = k, m
    if g.transpose_b:
        n = k2
    return m, n, k * dtypes.PACKED_K.get(g.a.buffer.dtype, 1)  # packed FP4: 2 K values a byte


def instr_cost(stmt, pipe: str, costs) -> int:
    """Cycles of one instruction on its pipe (arch/costs.py)."""
    from ..arch.costs import mmad_cycles, transfer_cycles
    if isinstance(stmt, SYNC_OPS):
        return costs.flag_cycles
    if pipe == "S":  # the scalar unit goes element by element
        n = 1
        if isinstance(stmt, For):
            for e in stmt.extents:
                n *= int(e.value) if isinstance(e, Const) else 1
            n *= len(stmt.body)
        return costs.scalar_cycles * n
    if isinstance(stmt, Gemm):
        return mmad_cycles(costs, *gemm_mnk(stmt), stmt.a.buffer.dtype)
    if isinstance(stmt, Copy) and pipe in ("MTE2", "MTE1", "FIX", "MTE3"):
        pc = {"MTE2": costs.mte2, "MTE1": costs.mte1, "FIX": costs.fix, "MTE3": costs.mte3}[pipe]
        return transfer_cycles(pc, max(_bytes(stmt.src), _bytes(stmt.dst)))
    # V work (and fills on the other pipes): bytes of the largest operand at the vector rate
    if isinstance(stmt, Sort):  # a merge sort: log2(n) passes over values and indices
        n = stmt.values.extent[-1]
        passes = max(1, math.ceil(math.log2(n))) if n > 1 else 1
        nbytes = (_bytes(stmt.values) + _bytes(stmt.indices)) * passes
    elif isinstance(stmt, (Copy, Reduce)):
        nbytes = max(_bytes(stmt.src), _bytes(stmt.dst))
    elif isinstance(stmt, Fill):
        nbytes = _bytes(stmt.dst)
    elif isinstance(stmt, For):
        n = 1
        for e in stmt.extents:
            n *= int(e.value) if isinstance(e, Const) else 1
        sizes = [dtypes.itemsize(x.buffer.dtype) for st in stmt.body for x in walk_own(st)
                 if isinstance(x, (Store, Load)) and x.buffer.scope != "var"]
        nbytes = n * max(sizes or [4])
    else:  # a single Store on V
        nbytes = dtypes.itemsize(stmt.buffer.dtype)
    return transfer_cycles(costs.vector, nbytes)


def check_sync_ids(stmt, chip) -> None:
    if isinstance(stmt, (SetFlag, WaitFlag)):
        if not 0 <= stmt.event < chip.event_ids:
            raise SyncError(f"event id {stmt.event} outside 0..{chip.event_ids - 1}", stmt.loc)
    elif isinstance(stmt, (SetCrossFlag, WaitCrossFlag)):
        if not 0 <= stmt.flag < chip.cross_flags:
            raise SyncError(f"cross-core flag id {stmt.flag} outside 0..{chip.cross_flags - 1} "
                            f"on {chip.name}", stmt.loc)
