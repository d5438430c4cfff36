"""Code for kernels whose cores must run as coroutines: one function per core kind.

A block's cores run in program order in `tlm_kernel` (the cube program, then the two vector
programs) when that order provably satisfies every cross-core wait (semantics/order.py). An
expert kernel whose cube waits on the vector cores and the vector cores on the cube (flags both
ways inside one loop) has no such order; it is compiled instead to

    i32 tlm_core_c(void **args, i64 block, void *scratch, void *temp, i64 vid, sync_fn, i64 handle)
    i32 tlm_core_v(... the same ...)

each running the program of one core of one block, as the simulator's `core_stream` walks it:
the code outside any Scope (on the core's own copy of its buffers), then the Scopes of its kind;
`tlm_core_v` runs the AIV `vid`. A cross-core flag becomes a call of the runtime's

    i32 sync_fn(i64 handle, i32 op (0 set, 1 wait), i32 flag, i32 site)

(runtime: cores_run.py) which counts the sets and, at a wait with nothing pending, switches to
another core; a nonzero result (a deadlock or a fault in another core) makes the core return
it at once. `site` is 1 + the index of the wait's entry in the kernel's error list, so a
deadlock names every waiting statement's line.
"""
from __future__ import annotations

import llvmlite.ir as ir

from .irutil import I32, I64, PTR, Emitter
from .layout import PER_BLOCK

CORE_FNS = {"C": "tlm_core_c", "V": "tlm_core_v"}
CORE_ARGS = (PTR, I64, PTR, PTR, I64, PTR, I64)
SYNC_FN_T = ir.FunctionType(I32, [I64, I32, I32, I32])
OP_SET, OP_WAIT = 0, 1


def generate_cores(gen) -> None:
    """The two core functions of `gen.kernel` (an is_npu kernel with cross-core flags)."""
    k = gen.kernel
    cid, vid_name = k.grid_vars
    for kind, name in CORE_FNS.items():
        fn = ir.Function(gen.module, ir.FunctionType(I32, list(CORE_ARGS)), name)
        gen.fn, gen.e = fn, Emitter(gen.module, fn)
        args, block, scratch, temp, vid, sync_fn, handle = fn.args
        gen.scratch, gen.temp_base, gen.sync = scratch, temp, (Callee(sync_fn), handle)
        gen.vars, gen.ranges = {}, {}
        gen.core_kind, gen.ctx, gen.vid = kind, "top", None
        gen.core_vid = vid if kind == "V" else None
        gen.nt_used = False
        gen.params = [gen.e.load(PTR, gen.e.gep(args, 8 * i), 8) for i in range(len(k.params))]
        gen.bind(cid, block, (0, k.grid[0] - 1))
        if kind == "V":
            gen.bind(vid_name, vid, (0, 1))
        else:
            gen.bind(vid_name, ir.Constant(I64, 0), (0, 0))
        gen.body(k.body)
        if gen.nt_used:
            gen.e.intr("x86.sse.sfence", ir.VoidType(), [], [])
        gen.e.b.ret(ir.Constant(I32, 0))
    gen.core_kind = None


class Callee:
    """An (opaque) function pointer as llvmlite's call instruction wants its callee."""

    def __init__(self, value, function_type=SYNC_FN_T):
        self.value, self.type, self.function_type = value, value.type, function_type

    def get_reference(self):
        return self.value.get_reference()


def core_scope(gen, s) -> None:
    """A Scope in a core function: its body when it is this core's kind, else nothing."""
    if s.core != gen.core_kind:
        return
    gen.ctx = s.core
    if s.core == "V":
        gen.vid = gen.core_vid
    try:
        gen.body(s.body)
    finally:
        gen.ctx = "top"
        gen.vid = None


def cross_flag(gen, s) -> None:
    """set_cross_flag / wait_cross_flag: a call of the runtime's sync function; a wait returns
    the function's nonzero result from the core (deadlock, or another core failed)."""
    from tilelang_mini.ir.nodes import WaitCrossFlag
    e, b = gen.e, gen.e.b
    wait = isinstance(s, WaitCrossFlag)
    site = gen.error(f"wait_cross_flag({s.pipe}, {s.flag})") if wait else 0
    fn, handle = gen.sync
    rc = b.call(fn, [handle, ir.Constant(I32, OP_WAIT if wait else OP_SET),
                     ir.Constant(I32, int(s.flag)), ir.Constant(I32, site)])
    with b.if_then(b.icmp_signed("!=", rc, ir.Constant(I32, 0)), likely=False):
        b.ret(rc)


def top_buf_ptr(gen, info):
    """A buffer used by code outside any Scope, in a core function: the core's own copy (its
    kind's when the Scopes use it, else its one of the three copies of the top-level ones)."""
    e, b = gen.e, gen.e.b
    kind = gen.core_kind
    size = (info.nbytes + 63) // 64 * 64
    if info.buf.scope in PER_BLOCK:
        return e.gep(gen.scratch, info.slots["top"])
    off = info.slots.get(kind)
    if off is not None:
        p = e.gep(gen.scratch, off)
        return e.gep(p, b.mul(gen.core_vid, ir.Constant(I64, size))) if kind == "V" else p
    off = info.slots.get("top")
    if off is None:
        raise gen.fail(f"buffer {info.name!r} is not available in this core's program")
    p = e.gep(gen.scratch, off)
    if kind == "C":
        return p
    return e.gep(p, b.mul(b.add(gen.core_vid, ir.Constant(I64, 1)), ir.Constant(I64, size)))
