"""Native coroutines for kernels compiled to core functions (cores.py): the scheduler of
cores_run.py in machine code, switching cores with the C library's ucontext (one OS thread,
no Python between two switches).

The threaded scheduler of cores_run.py hands a block's baton between three Python threads
through a condition variable: every switch wakes a thread and moves the GIL (about 80 us on a
loaded two-core machine, 6 switches per key block of an expert flash attention). Here one
worker thread runs

    i32 tlm_run_blocks(i64 *state, i64 begin, i64 end)

which, for each block, zeroes the block's arena, makes one context per core (AIC, AIV0, AIV1)
on its own stack and runs them with the same rule as cores_run.py: a core runs until it
finishes or reaches a cross-core wait with no pending set; then the next core that can go on,
round robin from it, runs. `tlm_sync` (the `sync_fn` of the core functions) counts the sets with
the hardware's release rule (an AIC set releases both AIVs, the AIC is released once both AIVs
have set) and, at a wait with nothing pending, swaps back to the scheduler. The interleaving is
the one cores_run.py and the numpy target's ordered run produce.

The result is 0, or: a core's error code (> 0, an entry of the artifact's error list), DEADLOCK
(no unfinished core can go on: `state` holds each core's waiting site), BAD_FLAG (a flag id past
the table: a compiler bug). `state[BLOCK_OUT]` is the block that stopped the run. Available
where the C library has getcontext/makecontext/swapcontext (Linux, macOS); cores_run.py uses its
threads elsewhere.
"""
from __future__ import annotations

import ctypes
import mmap
import threading

import llvmlite.ir as ir
import numpy as np

from .cores import OP_SET, Callee
from .irutil import I32, I64, PTR

NFLAGS = 64                     # flag ids 0..63 (the presets use 0..15)
CTX_BYTES = 8192                # >= sizeof(ucontext_t) on every libc we run on
STACK_BYTES = 8 << 20           # per core: virtual memory, touched only as deep as it runs
# ucontext_t: uc_flags, uc_link, then uc_stack {ss_sp, ss_flags (int), ss_size} (glibc, musl,
# x86_64 and aarch64 alike)
UC_LINK, SS_SP, SS_SIZE = 8, 16, 32
DEADLOCK, BAD_FLAG = -2, -3

# state slots (i64)
(ARGS, SCRATCH, ZERO, TEMP0, TEMP_BYTES, FN_C, FN_V, SCHED, CTX0, STACK0, STACK_SIZE,
 STACK_STRIDE, BLOCK, TURN, FAILURE, BLOCK_OUT) = range(16)     # from TURN on: zeroed per block
DONE, RESULT, WAIT_FLAG, WAIT_SITE = 16, 19, 22, 25    # three slots each
PENDING = 32                                             # [3][NFLAGS]
HALF = PENDING + 3 * NFLAGS                              # [2][NFLAGS]
SLOTS = HALF + 2 * NFLAGS

_LIBC_FNS = ("getcontext", "makecontext", "swapcontext")


def _libc():
    try:
        libc = ctypes.CDLL(None)
        return {n: ctypes.cast(getattr(libc, n), ctypes.c_void_p).value for n in _LIBC_FNS}
    except (OSError, AttributeError):
        return None


def _module(triple: str) -> ir.Module:
    m = ir.Module("tlm_cores")
    m.triple = triple
    get = ir.Function(m, ir.FunctionType(I32, [PTR]), "getcontext")
    make = ir.Function(m, ir.FunctionType(ir.VoidType(), [PTR, PTR, I32], var_arg=True),
                       "makecontext")
    swap = ir.Function(m, ir.FunctionType(I32, [PTR, PTR]), "swapcontext")
    core_t = ir.FunctionType(I32, [PTR, I64, PTR, PTR, I64, PTR, I64])
    sync = ir.Function(m, ir.FunctionType(I32, [I64, I32, I32, I32]), "tlm_sync")
    entry = ir.Function(m, ir.FunctionType(ir.VoidType(), [I64, I64]), "tlm_core_entry")
    run = ir.Function(m, ir.FunctionType(I32, [PTR, I64, I64]), "tlm_run_blocks")
    memset = m.declare_intrinsic("llvm.memset", [PTR, I64])
    c32 = lambda v: ir.Constant(I32, v)  # noqa: E731
    c64 = lambda v: ir.Constant(I64, v)  # noqa: E731

    def slot(b, st, i):
        return b.gep(st, [i if isinstance(i, ir.Value) else c64(i)], inbounds=True,
                     source_etype=I64)

    def ld(b, st, i):
        return b.load(slot(b, st, i), typ=I64, align=8)

    def byte(b, p, off):
        return b.gep(p, [off], source_etype=ir.IntType(8))

    def sto(b, v, st, i):
        b.store(v, slot(b, st, i), align=8)

    def ptr_at(b, st, i):
        return b.inttoptr(ld(b, st, i), PTR)

    # ---- tlm_sync(handle, op, flag, site)
    handle, op, flag, site = sync.args
    b = ir.IRBuilder(sync.append_basic_block("entry"))
    st = b.inttoptr(b.and_(handle, c64(~7)), PTR)
    core = b.and_(handle, c64(7))
    fl = b.sext(flag, I64)
    ok_b, fail_b, bad_b, flag_ok = (sync.append_basic_block(n) for n in
                                    ("ok", "failed", "bad", "flag_ok"))
    b.cbranch(b.icmp_signed("!=", ld(b, st, FAILURE), c64(0)), fail_b, ok_b)
    b.position_at_end(fail_b)
    b.ret(c32(-1))
    b.position_at_end(ok_b)
    inrange = b.and_(b.icmp_signed(">=", fl, c64(0)), b.icmp_signed("<", fl, c64(NFLAGS)))
    b.cbranch(inrange, flag_ok, bad_b)
    b.position_at_end(bad_b)
    sto(b, c64(BAD_FLAG), st, FAILURE)
    b.ret(c32(-1))
    b.position_at_end(flag_ok)
    set_b, wait_b = sync.append_basic_block("set"), sync.append_basic_block("wait")
    b.cbranch(b.icmp_signed("==", op, c32(OP_SET)), set_b, wait_b)
    # set: the AIC's releases both AIVs; an AIV's is paired with the other AIV's
    b.position_at_end(set_b)
    from_c, from_v = sync.append_basic_block("set_c"), sync.append_basic_block("set_v")
    b.cbranch(b.icmp_signed("==", core, c64(0)), from_c, from_v)
    b.position_at_end(from_c)
    for j in (1, 2):
        i = b.add(c64(PENDING + j * NFLAGS), fl)
        sto(b, b.add(ld(b, st, i), c64(1)), st, i)
    b.ret(c32(0))
    b.position_at_end(from_v)
    mine = b.add(b.add(c64(HALF), b.mul(b.sub(core, c64(1)), c64(NFLAGS))), fl)
    sto(b, b.add(ld(b, st, mine), c64(1)), st, mine)
    h0, h1 = b.add(c64(HALF), fl), b.add(c64(HALF + NFLAGS), fl)
    v0, v1 = ld(b, st, h0), ld(b, st, h1)
    pair, done_b = sync.append_basic_block("pair"), sync.append_basic_block("set_done")
    b.cbranch(b.and_(b.icmp_signed(">", v0, c64(0)), b.icmp_signed(">", v1, c64(0))),
              pair, done_b)
    b.position_at_end(pair)
    sto(b, b.sub(v0, c64(1)), st, h0)
    sto(b, b.sub(v1, c64(1)), st, h1)
    pc = b.add(c64(PENDING), fl)
    sto(b, b.add(ld(b, st, pc), c64(1)), st, pc)
    b.branch(done_b)
    b.position_at_end(done_b)
    b.ret(c32(0))
    # wait: take a pending set, or record the wait and swap to the scheduler, which resumes
    # this core only once its flag is pending
    b.position_at_end(wait_b)
    pi = b.add(b.add(c64(PENDING), b.mul(core, c64(NFLAGS))), fl)
    have, block_b = sync.append_basic_block("have"), sync.append_basic_block("block")
    b.cbranch(b.icmp_signed(">", ld(b, st, pi), c64(0)), have, block_b)
    b.position_at_end(have)
    sto(b, b.sub(ld(b, st, pi), c64(1)), st, pi)
    b.ret(c32(0))
    b.position_at_end(block_b)
    sto(b, fl, st, b.add(c64(WAIT_FLAG), core))
    sto(b, b.sext(site, I64), st, b.add(c64(WAIT_SITE), core))
    ctx = byte(b, ptr_at(b, st, CTX0), b.mul(core, c64(CTX_BYTES)))
    b.call(swap, [ctx, ptr_at(b, st, SCHED)])
    sto(b, b.sub(ld(b, st, pi), c64(1)), st, pi)
    sto(b, c64(-1), st, b.add(c64(WAIT_FLAG), core))
    b.ret(c32(0))

    # ---- tlm_core_entry(state, core): a core's context starts here; returning resumes the
    # scheduler (uc_link)
    sv, core = entry.args
    b = ir.IRBuilder(entry.append_basic_block("entry"))
    st = b.inttoptr(sv, PTR)
    is_c = b.icmp_signed("==", core, c64(0))
    fn = b.inttoptr(b.select(is_c, ld(b, st, FN_C), ld(b, st, FN_V)), PTR)
    vid = b.select(is_c, c64(0), b.sub(core, c64(1)))
    temp = b.add(ld(b, st, TEMP0), b.mul(core, ld(b, st, TEMP_BYTES)))
    rc = b.call(Callee(fn, core_t), [ptr_at(b, st, ARGS), ld(b, st, BLOCK), ptr_at(b, st, SCRATCH),
                     b.inttoptr(temp, PTR), vid, sync, b.or_(sv, core)])
    sto(b, b.sext(rc, I64), st, b.add(c64(RESULT), core))
    sto(b, c64(1), st, b.add(c64(DONE), core))
    b.ret_void()

    # ---- tlm_run_blocks(state, begin, end)
    stp, begin, end = run.args
    b = ir.IRBuilder(run.append_basic_block("entry"))
    st = stp
    sv = b.ptrtoint(stp, I64)
    loop, body, finish = (run.append_basic_block(n) for n in ("blocks", "block", "finish"))
    pre = b.block
    b.branch(loop)
    b.position_at_end(loop)
    blk = b.phi(I64)
    blk.add_incoming(begin, pre)
    b.cbranch(b.icmp_signed("<", blk, end), body, finish)
    b.position_at_end(finish)
    b.ret(c32(0))

    b.position_at_end(body)
    b.call(memset, [ptr_at(b, st, SCRATCH), ir.Constant(ir.IntType(8), 0), ld(b, st, ZERO),
                    ir.Constant(ir.IntType(1), 0)])
    b.call(memset, [slot(b, st, TURN), ir.Constant(ir.IntType(8), 0),
                    c64(8 * (SLOTS - TURN)), ir.Constant(ir.IntType(1), 0)])
    sto(b, blk, st, BLOCK)
    sched = ptr_at(b, st, SCHED)
    for i in range(3):
        sto(b, c64(-1), st, WAIT_FLAG + i)
        ctx = byte(b, ptr_at(b, st, CTX0), c64(i * CTX_BYTES))
        b.call(get, [ctx])
        b.store(sched, byte(b, ctx, c64(UC_LINK)), align=8)
        stack = b.add(ld(b, st, STACK0), b.mul(c64(i), ld(b, st, STACK_STRIDE)))
        b.store(b.inttoptr(stack, PTR), byte(b, ctx, c64(SS_SP)), align=8)
        b.store(ld(b, st, STACK_SIZE), byte(b, ctx, c64(SS_SIZE)), align=8)
        b.call(make, [ctx, entry, c32(2), sv, c64(i)])
    sched_loop = run.append_basic_block("switch")
    b.branch(sched_loop)

    b.position_at_end(sched_loop)
    turn = ld(b, st, TURN)
    b.call(swap, [sched, byte(b, ptr_at(b, st, CTX0), b.mul(turn, c64(CTX_BYTES)))])
    # core `turn` blocked or finished: a nonzero result of a finished core is the block's
    res = ld(b, st, b.add(c64(RESULT), turn))
    fail = ld(b, st, FAILURE)
    fail = b.select(b.icmp_signed("==", fail, c64(0)), res, fail)
    stop, pick = run.append_basic_block("stop"), run.append_basic_block("pick")
    b.cbranch(b.icmp_signed("!=", fail, c64(0)), stop, pick)
    b.position_at_end(stop)
    sto(b, fail, st, FAILURE)
    sto(b, blk, st, BLOCK_OUT)
    b.ret(b.trunc(fail, I32))

    # the next core that can go on, round robin from `turn`
    b.position_at_end(pick)
    found = run.append_basic_block("found")
    for k in (1, 2, 3):
        j = b.urem(b.add(turn, c64(k)), c64(3))
        done = b.icmp_signed("!=", ld(b, st, b.add(c64(DONE), j)), c64(0))
        wf = ld(b, st, b.add(c64(WAIT_FLAG), j))
        free = b.icmp_signed("<", wf, c64(0))
        pend_i = b.add(b.add(c64(PENDING), b.mul(j, c64(NFLAGS))), b.select(free, c64(0), wf))
        released = b.icmp_signed(">", ld(b, st, pend_i), c64(0))
        runnable = b.and_(b.not_(done), b.or_(free, released))
        nxt = run.append_basic_block(f"not{k}")
        take = run.append_basic_block(f"take{k}")
        b.cbranch(runnable, take, nxt)
        b.position_at_end(take)
        sto(b, j, st, TURN)
        b.branch(sched_loop)
        b.position_at_end(nxt)
    # nobody can go on: the block is finished, or deadlocked
    d = [b.icmp_signed("!=", ld(b, st, DONE + i), c64(0)) for i in range(3)]
    all_done = b.and_(b.and_(d[0], d[1]), d[2])
    dead = run.append_basic_block("deadlock")
    b.cbranch(all_done, found, dead)
    b.position_at_end(dead)
    sto(b, c64(DEADLOCK), st, FAILURE)
    sto(b, blk, st, BLOCK_OUT)
    b.ret(c32(DEADLOCK))
    b.position_at_end(found)
    nb = b.add(blk, c64(1))
    blk.add_incoming(nb, found)
    b.branch(loop)
    return m


class _Native:
    """The compiled scheduler (one per process)."""

    def __init__(self, t):
        import llvmlite.binding as llvm
        addrs = _libc()
        if addrs is None:
            raise OSError("no ucontext functions in the C library")
        for name, addr in addrs.items():
            llvm.add_symbol(name, addr)
        mod = llvm.parse_assembly(str(_module(t.triple)))
        mod.verify()
        self.engine = llvm.create_mcjit_compiler(mod, t.new_machine())
        self.engine.finalize_object()
        self.run_blocks = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_int64,
                                           ctypes.c_int64)(
            self.engine.get_function_address("tlm_run_blocks"))


_NATIVE: list = []
_LOCK = threading.Lock()
_TLS = threading.local()


def native(target):
    """The compiled scheduler for `target` (runtime.HostTarget, the host's), or None where the
    C library has no ucontext."""
    with _LOCK:
        if not _NATIVE:
            try:
                _NATIVE.append(_Native(target))
            except OSError:
                _NATIVE.append(None)
        return _NATIVE[0]


class _Stacks:
    """This thread's scheduler state, contexts and three core stacks (each above a page that
    faults, so a stack overflow stops the process instead of writing over memory)."""

    def __init__(self):
        page = mmap.PAGESIZE
        self.state = np.zeros(SLOTS, np.int64)
        self.ctx = np.zeros(4 * CTX_BYTES + 64, np.uint8)
        self.size = STACK_BYTES
        # private: a forked child writes its own copy (a shared one would be one stack for two
        # processes)
        self.map = mmap.mmap(-1, 3 * (self.size + page), flags=mmap.MAP_PRIVATE)
        base = ctypes.addressof(ctypes.c_char.from_buffer(self.map))
        try:
            mprotect = ctypes.CDLL(None).mprotect
            for i in range(3):
                mprotect(ctypes.c_void_p(base + i * (self.size + page)), ctypes.c_size_t(page), 0)
            self.stack0 = base + page
            self.stride = self.size + page
        except AttributeError:
            self.stack0, self.stride = base, self.size


def run_blocks(nat: _Native, artifact, ptrs, begin: int, end: int, scratch: int):
    """Run blocks [begin, end) of a core-function kernel on this thread with the scheduler
    `nat` (`native`): 0, or (code, block, state) of the block that stopped (module docstring)."""
    s = getattr(_TLS, "stacks", None)
    if s is None:
        s = _TLS.stacks = _Stacks()
    st = s.state
    ctx0 = (s.ctx.ctypes.data + 63) // 64 * 64
    fn_c, fn_v = (ctypes.cast(f, ctypes.c_void_p).value for f in artifact.cfunc)
    st[:] = 0
    st[ARGS] = ctypes.cast(ptrs, ctypes.c_void_p).value
    st[SCRATCH], st[ZERO] = scratch, artifact.zero_bytes
    st[TEMP0], st[TEMP_BYTES] = scratch + artifact.arena_bytes, artifact.temp_bytes
    st[FN_C], st[FN_V] = fn_c, fn_v
    st[SCHED], st[CTX0] = ctx0, ctx0 + CTX_BYTES
    # context 0 is the scheduler's, 1..3 the cores'; a guard page below each stack
    st[STACK0], st[STACK_SIZE], st[STACK_STRIDE] = s.stack0, s.size, s.stride
    code = nat.run_blocks(st.ctypes.data, begin, end)
    if code == 0:
        return 0
    return code, int(st[BLOCK_OUT]), st.copy()
