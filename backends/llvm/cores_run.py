"""Running a block's cores as coroutines (kernels compiled to core functions, cores.py).

`block_runner` runs them natively where the C library has ucontext (cores_native.py: one thread,
the scheduler below in machine code, about a microsecond a switch); elsewhere, with threads:
each core of a block (0 = AIC, 1 = AIV0, 2 = AIV1) runs its function on a thread of its own, but
only the core holding the block's baton runs: like the numpy target's ordered run
(sim.ordered.run_ordered), a core runs until it finishes or reaches a cross-core wait with no
pending set, then the baton passes to the next core that can go on (round robin from it). The
result is the same deterministic interleaving on both targets. Cross-core flags are counters
with the hardware's release rule: a set by the AIC releases both AIVs, the AIC is released once
both AIVs have set.

Nothing can hang: when a core blocks (or finishes) and no unfinished core can go on, that is a
deadlock, raised as DeadlockError naming every waiting statement; a fault in one core
(KernelRuntimeError) makes the others return at their next cross-core flag.
"""
from __future__ import annotations

import ctypes
import itertools
import os
import threading
from collections import Counter

from tilelang_mini.errors import (
    DeadlockError, InternalCompilerError, KernelRuntimeError, TileLangMiniError,
)

from .cores import OP_SET

ABORT = -1
CORE_NAMES = ("C", "V0", "V1")   # as the numpy target's ordered run names them
SYNC_T = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int64, ctypes.c_int32, ctypes.c_int32,
                          ctypes.c_int32)
CORE_T = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p,
                          ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64)

_BLOCKS: dict = {}            # handle // 4 -> _Block
_KEYS = itertools.count(1)
_REG_LOCK = threading.Lock()


class _Block:
    """The shared state of one grid block's three cores."""

    def __init__(self, block: int, errors: list):
        self.block, self.errors = block, errors
        self.cv = threading.Condition()
        self.turn = 0
        self.pending = [Counter() for _ in range(3)]   # sets each core may consume, per flag
        self.half = [Counter(), Counter()]              # AIV sets not yet paired, per flag
        self.waiting: list = [None, None, None]         # (flag, site) of a blocked core
        self.done = [False, False, False]
        self.failure: TileLangMiniError | None = None

    # ------------------------------------------------------------------ with self.cv held
    def _runnable(self, j: int) -> bool:
        if self.done[j]:
            return False
        w = self.waiting[j]
        return w is None or self.pending[j][w[0]] > 0

    def _next(self, i: int):
        for k in (1, 2, 3):
            j = (i + k) % 3
            if self._runnable(j):
                return j
        return None

    def _fail(self, err: TileLangMiniError) -> None:
        if self.failure is None:
            self.failure = err
        self.cv.notify_all()

    def _deadlock(self) -> DeadlockError:
        stuck, first = [], None
        for i, w in enumerate(self.waiting):
            if w is None or self.done[i]:
                continue
            what, loc = self.errors[w[1] - 1]
            first = first or loc
            stuck.append(f"{CORE_NAMES[i]} waits at `{what}` ({loc})")
        return DeadlockError(f"deadlock in block {self.block}: every unfinished core waits for "
                             f"a cross-core flag that no core will set: " + "; ".join(stuck),
                             first)

    def _wait_turn(self, i: int) -> bool:
        while self.turn != i and self.failure is None:
            self.cv.wait()
        return self.failure is None

    # ------------------------------------------------------------------------- the cores
    def sync(self, core: int, op: int, flag: int, site: int) -> int:
        with self.cv:
            if self.failure is not None:
                return ABORT
            if op == OP_SET:
                if core == 0:
                    self.pending[1][flag] += 1
                    self.pending[2][flag] += 1
                else:
                    half = self.half
                    half[core - 1][flag] += 1
                    if half[0][flag] and half[1][flag]:
                        half[0][flag] -= 1
                        half[1][flag] -= 1
                        self.pending[0][flag] += 1
                return 0
            if self.pending[core][flag] > 0:
                self.pending[core][flag] -= 1
                return 0
            self.waiting[core] = (flag, site)
            nxt = self._next(core)
            if nxt is None:
                self._fail(self._deadlock())
                return ABORT
            self.turn = nxt
            self.cv.notify_all()
            if not self._wait_turn(core):
                return ABORT
            self.pending[core][flag] -= 1   # chosen only when its flag is pending
            self.waiting[core] = None
            return 0

    def run_core(self, i: int, call) -> None:
        with self.cv:
            ok = self._wait_turn(i)
        code = ABORT
        try:
            if ok:
                code = call()
        finally:
            with self.cv:
                self.done[i] = True
                if code > 0:
                    message, loc = self.errors[code - 1]
                    self._fail(KernelRuntimeError(message, loc))
                if self.failure is None:
                    nxt = self._next(i)
                    if nxt is not None:
                        self.turn = nxt
                    elif not all(self.done):
                        self._fail(self._deadlock())
                self.cv.notify_all()


def _sync(handle: int, op: int, flag: int, site: int) -> int:
    blk = _BLOCKS.get(handle >> 2)
    if blk is None:
        return ABORT
    try:
        return blk.sync(handle & 3, op, flag, site)
    except BaseException as err:  # noqa: BLE001 - never let an exception cross native frames
        with blk.cv:
            blk._fail(InternalCompilerError(f"{type(err).__name__}: {err}",
                                            stage="the llvm core scheduler"))
        return ABORT


def _after_fork_in_child() -> None:
    """A forked child has only the forking thread: a registry lock another thread held stays
    held there, and the parent's blocks are not the child's."""
    global _REG_LOCK
    _REG_LOCK = threading.Lock()
    _BLOCKS.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


SYNC_FN = SYNC_T(_sync)
SYNC_ADDR = ctypes.cast(SYNC_FN, ctypes.c_void_p).value


def run_block(fns, errors, ptrs, block: int, scratch: int, zero_bytes: int, arena_bytes: int,
              temp_bytes: int) -> None:
    """Run grid block `block`: its three cores as coroutines on `scratch` (the block's arena,
    then one temporary area per core). Raises the block's DeadlockError/KernelRuntimeError."""
    if zero_bytes:
        ctypes.memset(scratch, 0, zero_bytes)
    blk = _Block(block, errors)
    with _REG_LOCK:
        key = next(_KEYS)
        _BLOCKS[key] = blk
    fn_c, fn_v = fns
    try:
        def core(i):
            fn, vid = (fn_c, 0) if i == 0 else (fn_v, i - 1)
            temp = scratch + arena_bytes + i * temp_bytes
            blk.run_core(i, lambda: fn(ptrs, block, scratch, temp, vid, SYNC_ADDR, key * 4 + i))

        helpers = [threading.Thread(target=core, args=(i,), name=f"tlm-core{i}", daemon=True)
                   for i in (1, 2)]
        for t in helpers:
            t.start()
        core(0)
        for t in helpers:
            t.join()
    finally:
        with _REG_LOCK:
            del _BLOCKS[key]
    if blk.failure is not None:
        raise blk.failure


def block_runner(artifact, target):
    """fn(ptrs, begin, end, scratch) running blocks [begin, end) of `artifact` one after the
    other: 0, or the TileLangMiniError that stopped a block. `target`: the host's (the native
    scheduler is compiled for it)."""
    from . import cores_native
    a = artifact
    nat = cores_native.native(target)
    if nat is None:
        def threaded(ptrs, begin, end, scratch):
            for block in range(begin, end):
                try:
                    run_block(a.cfunc, a.errors, ptrs, block, scratch, a.zero_bytes,
                              a.arena_bytes, a.temp_bytes)
                except TileLangMiniError as err:
                    return err
            return 0
        return threaded

    def native(ptrs, begin, end, scratch):
        out = cores_native.run_blocks(nat, a, ptrs, begin, end, scratch)
        return 0 if out == 0 else _native_error(a.errors, *out)

    return native


def _native_error(errors, code, block, state) -> TileLangMiniError:
    """The error of a block the native scheduler stopped (cores_native.py's result codes)."""
    from . import cores_native as n
    if code > 0:
        message, loc = errors[code - 1]
        return KernelRuntimeError(message, loc)
    if code == n.DEADLOCK:
        blk = _Block(block, errors)
        for i in range(3):
            blk.done[i] = bool(state[n.DONE + i])
            if state[n.WAIT_FLAG + i] >= 0:
                blk.waiting[i] = (int(state[n.WAIT_FLAG + i]), int(state[n.WAIT_SITE + i]))
        return blk._deadlock()
    what = "a cross-core flag id past the table" if code == n.BAD_FLAG else f"code {code}"
    return InternalCompilerError(f"block {block}: {what}", stage="the llvm core scheduler")
