"""The ordered run: each block's core programs (`semantics.coroutines`) execute as coroutines in
program order, switching core only at an unsatisfied cross-core wait; local flags and barriers are
no-ops there. The numpy target runs kernels whose cores meet at cross-core flags this way."""
from __future__ import annotations

from collections import defaultdict

import numpy as np

from .. import semantics
from ..errors import DeadlockError
from ..ir.nodes import Kernel, SetCrossFlag, WaitCrossFlag
from ..semantics.coroutines import lower_core_program
from .report import instr_label
from .simulator import check_lowered, collector_paused
from .streams import CORE_NAMES, block_envs, cached


def run_ordered(kernel: Kernel, args: list, batched=None) -> str:
    """Execute each block's core programs in program order as coroutines, switching core only at
    an unsatisfied cross-core wait; DeadlockError when every unfinished core is stuck. With
    `batched` (lower_ordered_batched) groups of blocks run together when that gives the same
    values (semantics/batched.py); returns which run ran ("batched", "partly batched",
    "plain")."""
    check_lowered(kernel)
    bufs = semantics.check_args(kernel, args)
    cid = kernel.grid_vars[0]
    with np.errstate(all="ignore"):
        if batched is not None:
            ran = batched.run(bufs, lambda vals: _run_block_ordered(kernel, bufs, vals[cid]))
            if ran != "plain":
                return ran
        for b in range(kernel.grid[0]):
            _run_block_ordered(kernel, bufs, b)
    return "plain"


def lower_ordered_batched(kernel: Kernel):
    """(BatchedKernel, None): the ordered run of a group of blocks at once, every instruction
    one NumPy operation over the group's blocks (the cores' coroutines switch where one
    block's would: control flow and flags are the same for every block of a group, else the
    group bails and runs block by block); or (None, why the kernel runs block by block).
    When the two vector cores of a block see each other only through parameters
    (batched.vector_pairs), one coroutine runs both halves of every block of the group."""
    from ..semantics.batched import BatchedKernel, lower_batched_programs
    programs, pairs, why = lower_batched_programs(kernel)
    if programs is None:
        return None, why
    cid, vid = kernel.grid_vars
    params = frozenset(p.name for p in kernel.params)
    pair_grids: dict = {}

    def group(top):
        _, c, v0, v1 = top.block
        if not pairs:
            v1.vars[vid] = 1
            _schedule([programs["C"](c), programs["V"](v0), programs["V"](v1)],
                      "a group of blocks")
            return
        v = _pairs_env(top, cid, vid, pair_grids)
        _schedule([programs["C"](c), programs["V"](v)], "a group of blocks")
        top.bufs.pool.release((v,), params)

    return BatchedKernel(kernel, group, True), None


def _pairs_env(top, cid: str, vid: str, grids: dict):
    """The vector program's env of a group of n blocks as 2n members: block k's V0 and V1 at
    2k and 2k + 1 (their grid arrays kept per group, as BatchedKernel keeps the blocks')."""
    from ..semantics.groups import BBuffers, BEnv
    ids = top.grid[cid]
    n = ids.size
    grid = grids.get((int(ids[0]), n))
    if grid is None:
        if len(grids) > 1024:
            grids.clear()
        grid = grids[int(ids[0]), n] = {cid: np.repeat(ids, 2),
                                        vid: np.tile(np.arange(2, dtype=np.int64), n)}
    return BEnv(dict(grid), BBuffers(top.bufs, 2 * n, top.bufs.pool), 2 * n, grid, top.marks,
                "V")


def _run_block_ordered(kernel, bufs, block):
    xenvs, wenvs = block_envs(bufs, kernel, block)
    # each core's program runs its own instructions and yields its cross-core flags
    programs = cached(kernel, lambda k: {c: lower_core_program(k, c) for c in "CV"}, "cores")
    _schedule([programs[CORE_NAMES[i][0]](wenvs[i]) for i in range(3)], f"block {block}")


def _schedule(gens, where: str) -> None:
    """Run the core programs C, V0, V1 (generators of their cross-core flags) as coroutines
    (the cyclic garbage collector paused meanwhile, as the simulator does per block)."""
    with collector_paused():
        _switch(gens, where)


def _switch(gens, where: str) -> None:
    """gens: C, V0, V1; or C and one program of both vector cores (a set of it is both
    halves' set)."""
    cores = len(gens)
    pending = [defaultdict(int) for _ in range(cores)]
    half = [defaultdict(int) for _ in range(2)]
    waiting = [None] * cores
    done = [False] * cores

    def step(i):
        """Run core i until it finishes or blocks; True when it made progress."""
        w = waiting[i]
        if w is not None:
            if pending[i][w.flag] <= 0:
                return False
            pending[i][w.flag] -= 1
            waiting[i] = None
        for st in gens[i]:
            if isinstance(st, WaitCrossFlag):
                if pending[i][st.flag] > 0:
                    pending[i][st.flag] -= 1
                    continue
                waiting[i] = st
                return True
            if isinstance(st, SetCrossFlag):
                if i == 0:
                    for v in range(1, cores):
                        pending[v][st.flag] += 1
                elif cores == 2:
                    pending[0][st.flag] += 1
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
        for k in range(cores):
            i = (cur + k) % cores
            if not done[i] and step(i):
                progressed = True
                cur = i
                break
        if not progressed:
            stuck = [f"{CORE_NAMES[i]} waits at `{instr_label(waiting[i])}` ({waiting[i].loc})"
                     for i in range(cores) if waiting[i] is not None]
            first = next(w for w in waiting if w is not None)
            raise DeadlockError(f"deadlock in {where} (ordered run): every unfinished core "
                                f"waits for a cross-core flag: " + "; ".join(stuck), first.loc)
