"""Is the program order of a lowered kernel a valid interleaving of its cores?

Backends that run a block's cores one statement at a time in program order (the LLVM backend; the
NumPy interpreter outside its coroutine mode) need every `wait_cross_flag` to find a pending set
when program order reaches it. Code from insert_sync always satisfies this; hand-written expert
kernels (one big cube Scope, then one big vector Scope with flags both ways) may not, and must
then be rejected rather than computed wrongly.
"""
from __future__ import annotations

from collections import Counter

from ..errors import CompileError
from ..ir.nodes import (
    Const, For, Fused, If, Kernel, Scope, SetCrossFlag, Var, WaitCrossFlag, walk,
)

STEP_LIMIT = 200_000  # statements walked before giving up (the check then passes)


class _Stop(Exception):
    pass


def check_program_order(kernel: Kernel) -> None:
    """CompileError at the first cross-core wait that program order reaches with nothing set."""
    _walk_block0(kernel)


def _walk_block0(kernel: Kernel) -> bool:
    """Walk block 0 in program order (CompileError at an unsatisfied wait); False when the walk
    stopped before the end (a data-dependent bound or condition, or STEP_LIMIT)."""
    if not kernel.is_npu or not any(isinstance(n, (SetCrossFlag, WaitCrossFlag))
                                    for n in walk(kernel)):
        return True
    from .. import semantics  # the executable semantics (the core)
    cid, vid = kernel.grid_vars
    walker = _Walker(semantics.Env, semantics.compile_expr)
    try:
        walker.body(kernel.body, walker.Env({cid: 0, vid: 0}, {}), None, vid)
    except _Stop:
        return False
    return True


def program_order_is_valid(kernel: Kernel) -> bool:
    """True when program order provably satisfies every cross-core wait of every block: the
    walk of block 0 reaches its end without an unsatisfied wait, and no loop bound or if
    condition reads the block index (so every block takes block 0's path). False when that
    cannot be shown (the caller then runs the cores as coroutines)."""
    if not kernel.is_npu:
        return False
    cid = kernel.grid_vars[0]
    for n in walk(kernel):
        if isinstance(n, For) and len(n.vars) > 1 and n.kind != "parallel":
            return False          # the walk binds one variable per loop
        control = n.extents if isinstance(n, For) else (n.cond,) if isinstance(n, If) else ()
        if any(isinstance(x, Var) and x.name == cid for e in control for x in walk(e)):
            return False
    try:
        return _walk_block0(kernel)
    except CompileError:
        return False


class _Walker:
    def __init__(self, env_type, compile_expr):
        self.Env, self.compile_expr = env_type, compile_expr
        self.steps = 0
        self.cube = Counter()             # sets pending for the AIC, per flag
        self.vec = [Counter(), Counter()]  # sets pending for each AIV
        self.vec_sets = [Counter(), Counter()]
        self.cube_released = Counter()

    def body(self, stmts, env, core, vid_name):
        for s in stmts:
            self.steps += 1
            if self.steps > STEP_LIMIT:
                raise _Stop
            if isinstance(s, Scope):
                if s.core == "C":
                    self.body(s.body, env, "C", vid_name)
                else:
                    for v in (0, 1):
                        venv = self.Env({**env.vars, vid_name: v}, {})
                        self.body(s.body, venv, ("V", v), vid_name)
            elif isinstance(s, For) and s.kind == "while":
                raise _Stop  # a trip count only known by running it on data
            elif isinstance(s, For) and s.kind != "parallel":
                extent = s.extents[0]
                if not isinstance(extent, Const):
                    extent_fn, _ = self.compile_expr(extent)
                    try:
                        n = int(extent_fn(env))
                    except Exception:  # read from a tensor: cannot tell statically
                        raise _Stop from None
                else:
                    n = int(extent.value)
                for i in range(n):
                    self.body(s.body, self.Env({**env.vars, s.vars[0]: i}, {}), core, vid_name)
            elif isinstance(s, If):
                cond, _ = self.compile_expr(s.cond)
                try:
                    taken = bool(cond(env))
                except Exception:  # depends on data: cannot tell statically
                    raise _Stop from None
                self.body(s.then_body if taken else s.else_body, env, core, vid_name)
            elif isinstance(s, Fused):
                self.body(s.body, env, core, vid_name)
            elif isinstance(s, SetCrossFlag):
                self.set(s, core)
            elif isinstance(s, WaitCrossFlag):
                self.wait(s, core)

    def set(self, s, core):
        if core == "C":
            for v in (0, 1):
                self.vec[v][s.flag] += 1
        elif core is not None:
            v = core[1]
            self.vec_sets[v][s.flag] += 1
            both = min(self.vec_sets[0][s.flag], self.vec_sets[1][s.flag])
            if both > self.cube_released[s.flag]:
                self.cube[s.flag] += both - self.cube_released[s.flag]
                self.cube_released[s.flag] = both

    def wait(self, s, core):
        pending = self.cube if core == "C" else self.vec[core[1]] if core else None
        if pending is None:
            return
        if pending[s.flag] <= 0:
            raise CompileError(
                f"wait_cross_flag({s.pipe}, {s.flag}) is reached in program order before any "
                f"matching set_cross_flag; this target runs a block's cores in program order, so "
                f"order the Scope blocks so each wait follows its set (the numpy target runs "
                f"cores as coroutines and accepts this kernel)", s.loc)
        pending[s.flag] -= 1
