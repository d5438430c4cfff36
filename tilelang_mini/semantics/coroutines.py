"""The programs of a block's cores as coroutines: the ordered run of kernels whose cores wait on
each other (sim.ordered.run_ordered, the numpy target's run of such kernels).

The program of a core kind is the kernel body with the other kind's Scopes removed and its own
inlined (as sim/streams.py walks it). `lower_core_program` turns it into closures once, like
run.py does for the whole block, except that a statement holding a cross-core flag becomes a
generator function: the program, run on one core's env, executes every other instruction
itself and yields only the `SetCrossFlag` / `WaitCrossFlag` statements, at which the ordered
run counts sets or switches core. Before -> after, one core of an expert flash attention:

    for k in range(8): copy, gemm, copy, set_cross_flag(FIX, 0), wait_cross_flag(1), ...
    def program(env): for k in range(8): copy(env); gemm(env); copy(env); yield set0; yield wait1

so a dynamic instruction costs one closure call, not a walk of the IR and a dispatch.
"""
from __future__ import annotations

import itertools
from typing import Callable, NamedTuple

from tilelang_mini.errors import CompileError, KernelRuntimeError
from tilelang_mini.ir.analysis import SYNC_OPS
from tilelang_mini.ir.nodes import (
    CORES, For, Fused, If, Kernel, Scope, SetCrossFlag, WaitCrossFlag, walk,
)

from .ops import Fault, compile_expr, located
from .run import _Ctx, _extent_fns, lower_stmt

CROSS = (SetCrossFlag, WaitCrossFlag)


class Lowering(NamedTuple):
    """How a core program's pieces become closures: the plain run's (one block, run.py) or
    the batched run's (a group of blocks, batched.py)."""
    stmt: Callable      # (statement, ctx) -> fn(env)
    extents: Callable   # (For, ctx) -> fn(env) -> the loop's extents
    cond: Callable      # (condition expression, ctx) -> fn(env) -> its truth


PLAIN = Lowering(lower_stmt, lambda s, ctx: _extent_fns(s),
                 lambda e, ctx: compile_expr(e)[0])


def lower_core_program(kernel: Kernel, kind: str, lowering: Lowering = PLAIN, ctx=None):
    """program(env) -> a generator of the cross-core flag statements of a core of `kind`
    ("C" or "V") running `kernel`'s body on `env` (module docstring); `lowering` and its
    `ctx` (default: the plain run's)."""
    gen = _gen_body(kernel.body, kind, _Ctx() if ctx is None else ctx, False, lowering)

    def program(env):
        yield from gen(env)

    return program


def _has_flags(s) -> bool:
    return any(isinstance(n, CROSS) for n in walk(s))


def _parts(stmts, kind, ctx, in_scope, low):
    """[(is_generator, fn)] of a statement list, the other kind's Scopes dropped and this
    kind's inlined."""
    out = []
    for s in stmts:
        if isinstance(s, Scope):
            if s.core not in CORES:
                raise CompileError(f"unknown core {s.core!r} (expected one of {CORES})", s.loc)
            if in_scope:
                raise CompileError(f"Scope({s.core!r}) nested in another Scope", s.loc)
            if s.core == kind:
                ctx.core = kind
                try:
                    out += _parts(s.body, kind, ctx, True, low)
                finally:
                    ctx.core = None
        elif isinstance(s, CROSS):
            out.append((True, _flag(s)))
        elif isinstance(s, SYNC_OPS):
            continue
        elif isinstance(s, Fused):
            out += _parts(s.body, kind, ctx, in_scope, low)
        elif isinstance(s, For) and s.kind != "parallel" and _needs_own(s):
            out.append((_has_flags(s), _loop(s, kind, ctx, in_scope, low)))
        elif isinstance(s, If) and _needs_own(s):
            out.append((_has_flags(s), _branch(s, kind, ctx, in_scope, low)))
        else:
            out.append((False, low.stmt(s, ctx)))
    return out


def _needs_own(s) -> bool:
    """Control flow lowered here (it holds a flag or a Scope); else run.py's closure."""
    return any(isinstance(n, CROSS + (Scope,)) for n in walk(s))


def _flag(s):
    def flag(env):
        yield s
    return flag


def _gen_body(stmts, kind, ctx, in_scope, low):
    """The statements as one generator function (generator parts delegated to)."""
    parts = tuple(_parts(stmts, kind, ctx, in_scope, low))

    def body(env):
        for is_gen, f in parts:
            if is_gen:
                yield from f(env)
            else:
                f(env)

    return body


def _plain_body(stmts, kind, ctx, in_scope, low):
    """The statements (holding no flag) as one plain function."""
    fns = tuple(f for _, f in _parts(stmts, kind, ctx, in_scope, low))

    def body(env):
        for f in fns:
            f(env)

    return body


def _loop(s: For, kind, ctx, in_scope, low):
    if s.kind == "while":
        return _while(s, kind, ctx, in_scope, low)
    extents, names = low.extents(s, ctx), s.vars
    if not _has_flags(s):
        body = _plain_body(s.body, kind, ctx, in_scope, low)

        def loop(env):
            vs = env.vars
            for idx in itertools.product(*(range(n) for n in extents(env))):
                vs.update(zip(names, idx))
                body(env)

        return located(loop, s)
    body = _gen_body(s.body, kind, ctx, in_scope, low)

    def gen_loop(env):
        vs = env.vars
        try:
            exts = extents(env)
        except Fault as e:
            raise KernelRuntimeError(str(e), s.loc) from None
        for idx in itertools.product(*(range(n) for n in exts)):
            vs.update(zip(names, idx))
            yield from body(env)

    return gen_loop


def _while(s: For, kind, ctx, in_scope, low):
    """`while cond:` (a For of kind "while"), its condition read before every trip."""
    cond = low.cond(s.extents[0], ctx)
    if not _has_flags(s):
        body = _plain_body(s.body, kind, ctx, in_scope, low)

        def loop(env):
            while cond(env):
                body(env)

        return located(loop, s)
    body = _gen_body(s.body, kind, ctx, in_scope, low)

    def gen_loop(env):
        while True:
            try:
                go = cond(env)
            except Fault as e:
                raise KernelRuntimeError(str(e), s.loc) from None
            if not go:
                return
            yield from body(env)

    return gen_loop


def _branch(s: If, kind, ctx, in_scope, low):
    cond = low.cond(s.cond, ctx)
    make = _gen_body if _has_flags(s) else _plain_body
    then_body = make(s.then_body, kind, ctx, in_scope, low)
    else_body = make(s.else_body, kind, ctx, in_scope, low)
    if make is _plain_body:
        return located(lambda env: (then_body if cond(env) else else_body)(env), s)

    def gen_if(env):
        yield from (then_body if cond(env) else else_body)(env)

    return gen_if
