"""The ordered run: the control flow of the executable specification of the tile IR.

`lower_kernel` turns the kernel into a tree of closures once: control flow (For, If, Scope, the grid) is
handled here, single instructions by `ops.lower_instruction` (one handler per node type), so
`run_grid` never dispatches on node types per grid block.

Execution model:
- every grid block runs the body with fresh on-chip buffers (zeros, allocated when their Alloc
  first executes in the block); `workspace` buffers are per-block GM shared by all its cores;
- `Scope("C")` bodies run once, `Scope("V")` bodies run twice (vid = 0, 1), each core with its
  own on-chip buffers, in program order; flags and barriers are no-ops;
- a `parallel` For is an elementwise map evaluated vectorised: its vars are broadcasting aranges
  (element accesses affine in them are strided views: exprs.affine_view);
- an If inside a map whose condition depends on the map's variables is masked: each branch runs
  statement by statement with the map's variables bound to the coordinates of the iterations
  where its condition holds (1-D arrays), so only those iterations read and write memory.
"""
from __future__ import annotations

import itertools
from typing import Callable

import numpy as np

from tilelang_mini.errors import CompileError
from tilelang_mini.runtime.arguments import check_arrays
from tilelang_mini.ir.analysis import SYNC_OPS, independent_nest
from tilelang_mini.ir.verifier import check_grid
from tilelang_mini.ir.nodes import (
    CORES, Const, For, Fused, If, Kernel, Scope, SetCrossFlag, Store, Var, WaitCrossFlag, walk,
)

from .exprs import Buffers
from .ops import Env, Fault, as_index, compile_expr, located, lower_instruction


class _Ctx:
    def __init__(self):
        self.parallel_depth = 0
        self.par: tuple = ()  # the enclosing Parallel loop's variables, in axis order
        self.lanes: tuple = ()  # the same, also inside a masked If (where `par` is empty)
        self.core: str | None = None
        self.vid_name = "vid"  # the variable bound to the vector core index


# ----------------------------------------------------------------------------- control flow


def lower_body(stmts, ctx: _Ctx) -> Callable[[Env], None]:
    return sequence([lower_stmt(s, ctx) for s in stmts if not isinstance(s, SYNC_OPS)])


def sequence(fns: list) -> Callable[[Env], None]:
    """One closure running the closures `fns` in order (the plain and the batched run's)."""
    if not fns:
        return lambda env: None
    if len(fns) == 1:
        return fns[0]
    fns = tuple(fns)

    def body(env):
        for f in fns:
            f(env)

    return body


def lane_aranges(exts: tuple, cache: dict) -> tuple:
    """The index arrays of a Parallel map over extents `exts` (the plain and the batched run's):
    axis d's indices along dimension d, broadcasting against the others; kept in `cache`."""
    aranges = cache.get(exts)
    if aranges is None:
        nd = len(exts)
        aranges = cache[exts] = tuple(np.arange(n, dtype=np.int64).reshape(
            (1,) * d + (n,) + (1,) * (nd - d - 1)) for d, n in enumerate(exts))
    return aranges


def run_serial(names, exts, body, env) -> None:
    """A serial loop nest over `exts` (its variables `names`) running `body` each step."""
    vs = env.vars
    for idx in itertools.product(*(range(n) for n in exts)):
        for name, i in zip(names, idx):
            vs[name] = i
        body(env)


def statement_lowering(lower_for, lower_if, lower_scope, lower_body, lower_leaf):
    """A run's `lower(s, ctx)` of one statement (the plain and the batched run's): a For, If or
    Scope through its lowering, a Fused block as its body in order (a CPU target fuses it),
    anything else through `lower_leaf`."""
    control = {For: lower_for, If: lower_if, Scope: lower_scope,
               Fused: lambda s, ctx: lower_body(s.body, ctx)}

    def lower(s, ctx):
        f = control.get(type(s), lower_leaf)
        return f(s, ctx)

    return lower


def _lower_leaf(s, ctx: _Ctx) -> Callable[[Env], None]:
    try:
        return lower_instruction(s, ctx.par)
    except TypeError:
        raise CompileError(f"the numpy backend cannot execute {type(s).__name__}", s.loc) from None


def _extent_fns(s: For):
    if len(s.vars) != len(s.extents):
        raise CompileError(f"loop has {len(s.vars)} variables but {len(s.extents)} extents", s.loc)
    if all(isinstance(e, Const) for e in s.extents):
        exts = tuple(int(e.value) for e in s.extents)
        return lambda env: exts
    fns = [compile_expr(e)[0] for e in s.extents]
    return lambda env: tuple(as_index(f(env), "a loop extent") for f in fns)


def _lower_for(s: For, ctx: _Ctx):
    if s.kind == "while":
        return _lower_while(s, ctx)
    if s.kind not in ("serial", "parallel", "pipelined", "unroll"):
        raise CompileError(f"unknown loop kind {s.kind!r}", s.loc)
    if s.kind != "parallel" and not ctx.parallel_depth and (m := independent_nest(s)):
        return _lower_for(m, ctx)     # iterations that cannot see each other: one map
    extents = _extent_fns(s)
    names = s.vars
    if s.kind == "parallel":
        if ctx.parallel_depth:
            raise NotImplementedError(
                f"{s.loc}: nested Parallel loops are not supported by the numpy backend; "
                f"bind all the variables in one loop (`for i, j in T.Parallel(m, n)`)")
        ctx.parallel_depth += 1
        ctx.par = ctx.lanes = tuple(names)
        try:
            body = lower_body(s.body, ctx)
        finally:
            ctx.parallel_depth -= 1
            ctx.par = ctx.lanes = ()
        cache: dict = {}

        def parallel(env):
            exts = extents(env)
            vs = env.vars
            for name, a in zip(names, lane_aranges(exts, cache)):
                vs[name] = a
            if all(exts):
                body(env)

        return located(parallel, s)

    outer = ctx.par
    ctx.par = tuple(v for v in outer if v not in names)   # a serial variable shadows
    try:
        body = lower_body(s.body, ctx)
    finally:
        ctx.par = outer
    if len(names) == 1:
        name = names[0]

        def serial1(env):
            (n,) = extents(env)
            vs = env.vars
            for i in range(n):
                vs[name] = i
                body(env)

        return located(serial1, s)

    def serial(env):
        run_serial(names, extents(env), body, env)

    return located(serial, s)


def _lower_while(s: For, ctx: _Ctx):
    """`while cond:` (a For of kind "while", nodes.py): the condition read before every trip."""
    if ctx.parallel_depth:
        raise CompileError("a `while` loop inside a Parallel map", s.loc)
    cond, _ = compile_expr(s.extents[0])
    body = lower_body(s.body, ctx)

    def while_(env):
        while cond(env):
            body(env)

    return located(while_, s)


def _lower_if(s: If, ctx: _Ctx):
    if ctx.lanes and any(isinstance(n, Var) and n.name in ctx.lanes for n in walk(s.cond)):
        return _lower_masked_if(s, ctx)
    cond, _ = compile_expr(s.cond)
    then_body = lower_body(s.then_body, ctx)
    else_body = lower_body(s.else_body, ctx)
    loc = s.loc

    def if_(env):
        c = cond(env)
        if isinstance(c, np.ndarray) and c.ndim:
            raise NotImplementedError(
                f"{loc}: an If whose condition depends on Parallel loop variables is not "
                f"supported by the numpy backend (use a select-style expression instead)")
        (then_body if c else else_body)(env)

    return located(if_, s)


def _lower_masked_if(s: If, ctx: _Ctx):
    """An If in a map whose condition varies over the map's iterations (module docstring)."""
    names = ctx.lanes
    cond, _ = compile_expr(s.cond)
    outer, ctx.par = ctx.par, ()   # lanes are compressed: no strided views in the branches
    try:
        branches = [lower_body(b, ctx) if b else None for b in (s.then_body, s.else_body)]
    finally:
        ctx.par = outer

    def masked_if(env):
        vs = env.vars
        saved = [vs[n] for n in names]
        *lanes, mask = np.broadcast_arrays(*saved, np.asarray(cond(env), dtype=bool))
        try:
            for body, sel in zip(branches, (mask, ~mask)):
                if body is not None and sel.any():
                    for n, a in zip(names, lanes):
                        vs[n] = a[sel]
                    body(env)
        finally:
            for n, a in zip(names, saved):
                vs[n] = a

    return located(masked_if, s)


def _lower_scope(s: Scope, ctx: _Ctx):
    if s.core not in CORES:
        raise CompileError(f"unknown core {s.core!r} (expected one of {CORES})", s.loc)
    if ctx.core is not None:
        raise CompileError(f"Scope({s.core!r}) nested in Scope({ctx.core!r})", s.loc)
    if ctx.parallel_depth:
        raise CompileError(f"Scope({s.core!r}) inside a Parallel loop", s.loc)
    return lower_scope(s, ctx, lower_body)


def lower_scope(s: Scope, ctx, lower_body):
    """A Scope's runner (the plain and the batched run's): its body lowered by `lower_body` with
    `ctx.core` set, run on the scope's core(s)."""
    ctx.core = s.core
    try:
        body = lower_body(s.body, ctx)
    finally:
        ctx.core = None
    return scope_runner(s.core, body, ctx.vid_name, scalars_stored(s))


def scalars_stored(s: Scope) -> tuple[str, ...]:
    """The scalars (alloc_var buffers) a Scope writes."""
    return tuple(sorted({n.buffer.name for n in walk(s) if isinstance(n, Store)
                         and n.buffer.scope == "var"}))


def scope_runner(core_kind: str, body, vid_name: str, scalars: tuple[str, ...] = ()):
    """Run a Scope's lowered `body` on its core(s) of the block (env.block: the block, the cube,
    vector core 0, vector core 1): the cube once, the vector cores each with its `vid`.

    Control flow outside Scopes runs at block level, but on the machine every core runs it
    itself, reading its own registers: the `scalars` the Scope writes are copied to the block
    level afterwards, so an `if`/loop bound outside the Scopes reads their current values
    (split_cores gives the cube and the vector cores the same store of a scalar both read;
    a scalar only the vector cores write is read as vector core 0 left it)."""
    def publish(env, core):
        for name in scalars:
            if name in core.bufs:
                env.bufs[name] = np.array(core.bufs[name], copy=True)

    if core_kind == "C":
        def scope_c(env):
            core = env.block[1]
            core.vars.update(env.vars)
            body(core)
            publish(env, core)
        return scope_c

    def scope_v(env):
        for vid, core in ((0, env.block[2]), (1, env.block[3])):
            core.vars.update(env.vars)
            core.vars[vid_name] = vid
            body(core)
        publish(env, env.block[2])

    return scope_v


# ---------------------------------------------------------------------------------- backend


def new_block(bufs: dict, grid_vals: dict, with_cores: bool) -> Env:
    """The block-level env of one grid block; with_cores adds the C and two V core envs."""
    top = Env(dict(grid_vals), Buffers(bufs))
    if with_cores:
        c = Env(dict(grid_vals), Buffers(bufs), "C")
        v0 = Env(dict(grid_vals), Buffers(bufs), "V")
        v1 = Env(dict(grid_vals), Buffers(bufs), "V")
        top.block = c.block = v0.block = v1.block = (top, c, v0, v1)
    return top


def check_args(kernel: Kernel, args) -> dict:
    """Every parameter's array by name (ArgumentError on a wrong number, type, shape, dtype)."""
    arrays = check_arrays(kernel, args)
    return {p.name: a for p, a in zip(kernel.params, arrays)}


def lower_kernel(kernel: Kernel) -> Callable[[Env], None]:
    """The kernel body as one closure run once per grid block (`run_grid`)."""
    check_grid(kernel)
    ctx = _Ctx()
    if kernel.is_npu:
        ctx.vid_name = kernel.grid_vars[1]
    return lower_body(kernel.body, ctx)


def kernel_traits(kernel: Kernel) -> tuple[bool, bool]:
    """(has Scope blocks, has cross-core flags)."""
    nodes = [n for s in kernel.body for n in walk(s)]
    has_scopes = any(isinstance(n, Scope) for n in nodes)
    cross = any(isinstance(n, (SetCrossFlag, WaitCrossFlag)) for n in nodes)
    return has_scopes, cross


def run_grid(kernel: Kernel, body: Callable[[Env], None], has_scopes: bool, args,
             batched=None) -> str:
    """Run every grid block of `kernel` in program order (its cores one after the other).
    With `batched` (batched.lower_batched) the blocks run as groups when that gives the same
    values; returns which run ran ("batched", "partly batched" or "plain")."""
    bufs = check_args(kernel, args)
    with np.errstate(all="ignore"):
        if batched is not None:
            ran = batched.run(bufs, lambda vals: body(new_block(bufs, vals, has_scopes)))
            if ran != "plain":
                return ran
        _run_blocks(kernel, body, has_scopes, bufs)
    return "plain"


def _run_blocks(kernel: Kernel, body, has_scopes: bool, bufs: dict) -> None:
    """The plain run: block after block."""
    if kernel.is_npu:
        cid, vid = kernel.grid_vars
        for c in range(kernel.grid[0]):
            body(new_block(bufs, {cid: c, vid: 0}, has_scopes))
        return
    names = kernel.grid_vars
    for idx in itertools.product(*(range(n) for n in kernel.grid)):
        body(new_block(bufs, dict(zip(names, idx)), has_scopes))


lower_stmt = statement_lowering(_lower_for, _lower_if, _lower_scope, lower_body, _lower_leaf)

__all__ = ["Env", "Fault", "new_block", "check_args", "lower_body", "lower_stmt", "lower_kernel",
           "kernel_traits", "run_grid", "sequence"]
