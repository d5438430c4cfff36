"""Tile IR -> llvmlite.ir module: control flow, buffers, stores and Parallel maps.

The module exports `tlm_kernel(void **args, i64 block_begin, i64 block_end, void *scratch)`
returning 0, or 1 + the index of the runtime error (`KernelGen.errors`) that stopped it, for grid
blocks `[block_begin, block_end)` in order (block_begin may carry pack_cache.RESUME: a later
chunk of the same launch on this worker keeps its packed-tile cache; a kernel whose cores must interleave at cross-core
waits gets one function per core kind instead: cores.py). Each block zeroes its on-chip buffers
and runs the body with the semantics of tilelang_mini/semantics: Scope("C") once, Scope("V") once
per vid with its own buffers; a Parallel loop is an elementwise map vectorised along its innermost
variable (VL lanes, masked tail). Expressions and element accesses live in exprs.py; tile ops in
codegen_ops.py (Copy, Fill), reduce.py, microkernel.py (Gemm), special_copies.py (atomic,
transposing), sort.py; access.py holds what they share (region starts, bounds, vector loads and
stores). A serial loop whose shape repeats in the kernel is a call of one shared function
(outline.py).
"""
from __future__ import annotations

import platform

import llvmlite.ir as ir

from tilelang_mini.errors import CompileError, InternalCompilerError, internal_error
from tilelang_mini.ir.analysis import SYNC_OPS, interval
from tilelang_mini.ir.verifier import check_grid
from tilelang_mini.ir.nodes import (
    CORES, Alloc, BinOp, Const, Copy, Fill, For, Fused, Gemm, If, Kernel, Reduce, Sort, Region,
    Scope, SetCrossFlag, Store, Var, WaitCrossFlag,
)

from . import codegen_ops, microkernel, outline, pack_cache, rowpass
from . import vecmath as vm
from .irutil import I32, I64, PTR, Emitter
from .cores import core_scope, cross_flag, generate_cores, top_buf_ptr
from .layout import PER_BLOCK, plan_buffers
from .pack_cache import PackCache, plan_pack_cache
from .packing import flush_prefetch
from .reduce import reduce, row_groups
from .parallel import ParallelMaps
from .exprs import Expressions
from .values import Par, Val, vars_in
from .sort import sort
from .special_copies import atomic_copy, transposed_copy


def _is_sync(s) -> bool:
    return isinstance(s, SYNC_OPS)


class KernelGen(ParallelMaps, Expressions):
    Val = Val

    def __init__(self, kernel: Kernel, features: dict, cores: bool = False):
        self.kernel = kernel
        self.features = features
        self.bf16 = bool(features.get("bf16"))
        self.zmm = bool(features.get("zmm"))  # 512-bit vectors may pass through inline asm
        check_grid(kernel)
        # cores: one function per core kind, run as coroutines by the runtime (cores.py)
        self.core_kind = None      # "C" | "V" while a core function is generated
        self.plan = plan_buffers(kernel, self.bf16, top_copies=3 if cores else 1)
        self.pack_cache = PackCache() if cores else plan_pack_cache(kernel, self.plan,
                                                                    self.plan.arena_bytes)
        self.module = ir.Module(name=kernel.name)
        if not cores:
            fnty = ir.FunctionType(I32, [PTR, I64, I64, PTR])
            self.fn = ir.Function(self.module, fnty, "tlm_kernel")
            self.e = Emitter(self.module, self.fn)
        self.errors: list = []
        self.temp_bytes = 0
        self.vars: dict = {}
        self.ranges: dict = {}
        self.ctx = "top"
        self.vid = None
        self.vid_name = kernel.grid_vars[1] if kernel.is_npu else "vid"
        self.par: Par | None = None
        self.stmt = None
        self.helpers: dict = {}
        self.mk_sites: set = set()  # micro-kernels called so far (microkernel._call)
        self.repeated = outline.repeated(kernel)  # loop shapes that get a shared function
        self.loop_fns: dict = {}   # shape key -> [(function, consulted parameter intervals)]
        self.ptr_override: dict = {}  # buffer name -> pointer argument (in a shared loop)
        self.needs_dpbf16 = False
        self.loops: list = []  # enclosing serial loop variables, outermost first
        self.prefetch: list = []  # GM rows to prefetch, spread over the next gemm
        self.rows_handed: set = set()  # fused row copy-ins whose rows went to self.prefetch
        self.row_reads: list = []  # the innermost row loop's copy-ins (rowpass.next_row_reads)
        self.row_group = None     # (Reduces, slot): the row's lanes go to the slot (reduce.py)
        self.clipped: list = []   # conditions known false here (a fused row's clipped path)
        self.nt_ok = platform.machine().lower() in ("x86_64", "amd64")
        self.nt_used = False      # non-temporal stores emitted: fence them before returning

    # --------------------------------------------------------------------------- driver
    def generate(self) -> ir.Module:
        e, b, k = self.e, self.e.b, self.kernel
        args, begin, end, scratch = self.fn.args
        self.scratch = scratch
        self.params = [e.load(PTR, e.gep(args, 8 * i), 8) for i in range(len(k.params))]
        begin = pack_cache.start_launch(self, begin)
        with e.loop(begin, end, name="block") as blk:
            if self.plan.zero_bytes:
                e.memset0(scratch, self.plan.zero_bytes)
            pack_cache.start_block(self)
            if k.is_npu:
                cid, vid = k.grid_vars
                self.bind(cid, blk, (0, k.grid[0] - 1))
                self.bind(vid, ir.Constant(I64, 0), (0, 0))
            else:
                rest = blk
                for name, n in reversed(list(zip(k.grid_vars, k.grid))):
                    self.bind(name, b.srem(rest, ir.Constant(I64, n)) if n > 1
                              else ir.Constant(I64, 0), (0, n - 1))
                    rest = b.sdiv(rest, ir.Constant(I64, n)) if n > 1 else rest
            self.body(k.body)
        if self.nt_used:
            e.intr("x86.sse.sfence", ir.VoidType(), [], [])
        b.ret(ir.Constant(I32, 0))
        return self.module

    def bind(self, name, value, rng=None):
        self.vars[name] = Val(value, "int")
        self.ranges[name] = rng

    def error(self, message: str) -> int:
        loc = getattr(self.stmt, "loc", None)
        self.errors.append((message, loc))
        return len(self.errors)

    def fail(self, message: str, stmt=None):
        loc = getattr(stmt if stmt is not None else self.stmt, "loc", None)
        if message.startswith("internal: "):  # a case the code generator should not meet
            return InternalCompilerError(message[len("internal: "):], loc,
                                         stage="the llvm code generator")
        return CompileError(message, loc)

    def temp(self, nbytes: int):
        """Pointer to `nbytes` of per-statement temporary arena space (64-byte aligned)."""
        self.temp_bytes = max(self.temp_bytes, (nbytes + 63) // 64 * 64)
        if self.core_kind is not None:  # each core of a block has its own temporaries
            return self.temp_base
        return self.e.gep(self.scratch, self.plan.arena_bytes + self.pack_cache.nbytes)

    # ------------------------------------------------------------------------ statements
    def body(self, stmts, carry: bool = False, inherit: bool = False):
        """Emit `stmts`. GM rows their copies will read next (self.prefetch) are prefetched by
        the next gemm in the body, or all at its end; with `carry`, the rows no gemm took are
        returned instead (a Scope's body hands them to the gemm after the Scope), and with
        `inherit` the enclosing body's pending rows are the first ones here."""
        saved, self.prefetch = self.prefetch, []
        if inherit:
            saved, self.prefetch = self.prefetch, saved
        for s in stmts:
            self.statement(s)
        pending, self.prefetch = self.prefetch, saved
        if carry:
            return pending
        if pending:
            flush_prefetch(self, pending)
        return []

    def statement(self, s):
        prev, self.stmt = self.stmt, s
        try:
            if self.core_kind is not None and isinstance(s, (SetCrossFlag, WaitCrossFlag)):
                cross_flag(self, s)
                return
            if _is_sync(s) or isinstance(s, Alloc):
                return
            if isinstance(s, Fused):
                self.fused(s)
            elif isinstance(s, For):
                self.for_(s)
            elif isinstance(s, If):
                self.if_(s)
            elif isinstance(s, Scope):
                self.scope(s)
            elif isinstance(s, Store):
                self.store_scalar(s)
            elif isinstance(s, Sort):
                sort(self, s)
            elif isinstance(s, (Copy, Fill, Reduce, Gemm)):
                if self.par is not None:
                    raise self.fail(f"{type(s).__name__} inside a Parallel loop is not supported")
                if isinstance(s, Copy) and s.atomic:
                    atomic_copy(self, s)
                elif isinstance(s, Copy) and s.transpose:
                    transposed_copy(self, s)
                elif isinstance(s, Copy) and s.dual:  # transform/cpu_dual.py
                    self.dual_copy(s)
                elif isinstance(s, Gemm):
                    microkernel.gemm(self, s)
                elif isinstance(s, Reduce):
                    reduce(self, s)
                elif isinstance(s, Fill):
                    codegen_ops.fill(self, s)
                else:
                    codegen_ops.copy(self, s)
            else:
                raise self.fail(f"the llvm backend cannot execute {type(s).__name__}")
        except (CompileError, InternalCompilerError) as err:
            if err.loc.line or not getattr(s, "loc", None) or not s.loc.line:
                raise
            raise err.at(s.loc) from None
        except Exception as err:  # noqa: BLE001 -- a generator bug: located at this statement
            if not getattr(s, "loc", None) or not s.loc.line:
                raise
            raise internal_error(err, "the llvm code generator", s.loc) from err
        finally:
            self.stmt = prev

    def fused(self, s: Fused):
        """One pass over the elements of a fused block's statements (transform/cpu_fuse.py):
        a map into a reduction (parallel.py), a row's copy-in feeding one, or a row map and its
        copy-out (rowpass.py)."""
        if self.par is not None:
            raise self.fail("a fused block inside a Parallel loop")
        parts = [t for t in s.body if not _is_sync(t)]
        if s.kind == "map_reduce":
            self.map_reduce(*parts)
        elif s.kind == "copy_map_reduce":
            rowpass.copy_in_map_reduce(self, *parts)
        elif s.kind == "map_copy":
            rowpass.map_copy_out(self, *parts)
        else:
            raise self.fail(f"internal: unknown fused kind {s.kind!r}")

    def for_(self, s: For):
        if s.kind == "while":
            self.while_(s)
            return
        if s.kind not in ("serial", "parallel", "pipelined", "unroll"):
            raise self.fail(f"unknown loop kind {s.kind!r}")
        if len(s.vars) != len(s.extents):
            raise self.fail(f"loop has {len(s.vars)} variables but {len(s.extents)} extents")
        if self.par is not None and vars_in(s.extents) & set(self.par.names):
            raise self.fail("a loop extent must be a scalar integer; it depends on a Parallel "
                            "loop variable")
        if s.kind == "parallel":
            exts, rngs = self.extents(s)
            if self.par is not None:
                raise self.fail("nested Parallel loops are not supported; bind all the "
                                "variables in one loop (`for i, j in T.Parallel(m, n)`)")
            saved = {n: (self.vars.get(n), self.ranges.get(n)) for n in s.vars}
            for n, r in zip(s.vars, rngs):
                self.ranges[n] = r
            self.par = Par(s.vars, exts)
            try:
                self.par_body(s.body)
            finally:
                self.par = None
                self.restore(saved)
        elif not outline.call_shared(self, s):
            self.serial_loop(s)

    def extents(self, s: For):
        """(i64 values, intervals) of a loop's extents."""
        exts, rngs = [], []
        for x in s.extents:
            v = self.scalar_int(x, "a loop extent")
            exts.append(v)
            rngs.append((0, int(x.value) - 1) if isinstance(x, Const) and x.value > 0 else None)
        return exts, rngs

    def serial_loop(self, s: For):
        if row_groups(self, s):
            return
        exts, rngs = self.extents(s)
        saved = {n: (self.vars.get(n), self.ranges.get(n)) for n in s.vars}
        handed = rowpass.hand_row_prefetch(self, s)
        reads, self.row_reads = self.row_reads, rowpass.next_row_reads(self, s)
        self.loops.extend(s.vars)
        try:
            self.nest(list(zip(s.vars, exts, rngs)), lambda: self.body_in_context(s.body))
        finally:
            del self.loops[-len(s.vars):]
            self.rows_handed -= handed
            self.row_reads = reads
        self.restore(saved)

    def restore(self, saved):
        for n, (v, r) in saved.items():
            if v is None:
                self.vars.pop(n, None)
            else:
                self.vars[n] = v
            self.ranges[n] = r

    def nest(self, loops, inner):
        if not loops:
            inner()
            return
        (name, ext, rng), rest = loops[0], loops[1:]
        with self.e.loop(0, ext, name=name) as i:
            self.bind(name, i, rng)
            self.nest(rest, inner)

    def body_in_context(self, stmts):
        if self.par is not None:
            self.par_body(stmts)
        else:
            self.body(stmts)

    def while_(self, s: For):
        """`while cond:` (a For of kind "while"): the condition is evaluated in the loop's
        header, before every trip."""
        if self.par is not None:
            raise self.fail("a `while` loop inside a Parallel loop is not supported")

        def cond():
            c = self.expr(s.extents[0])
            return vm.to_bool(self.e, c.v, c.kind)

        with self.e.while_loop(cond):
            self.body(s.body)

    def if_(self, s: If):
        par_dep = self.par is not None and vars_in((s.cond,)) & set(self.par.names)
        if par_dep:  # masked: only where the Parallel body is emitted (parallel.py)
            self.masked_if(s, ())
            return
        c = self.expr(s.cond)
        if c.vec:
            raise self.fail("an If whose condition depends on Parallel loop variables is not "
                            "supported (use a select-style expression instead)")
        cond = vm.to_bool(self.e, c.v, c.kind)
        b = self.e.b
        if s.else_body:
            with b.if_else(cond) as (then, other):
                with then:
                    self.body_in_context(s.then_body)
                with other:
                    self.body_in_context(s.else_body)
        else:
            with b.if_then(cond):
                self.body_in_context(s.then_body)

    def scope(self, s: Scope):
        if s.core not in CORES:
            raise self.fail(f"unknown core {s.core!r} (expected one of {CORES})")
        if self.ctx != "top":
            raise self.fail(f"Scope({s.core!r}) nested in Scope({self.ctx!r})")
        if self.par is not None:
            raise self.fail(f"Scope({s.core!r}) inside a Parallel loop")
        if self.core_kind is not None:
            core_scope(self, s)
            return
        saved = (self.vars.get(self.vid_name), self.ranges.get(self.vid_name))
        self.ctx = s.core
        try:
            if s.core == "C":
                self.prefetch.extend(self.body(s.body, carry=True, inherit=True))
            else:
                slots = []
                with self.e.loop(0, 2, name="vid") as vid:
                    self.vid = vid
                    self.bind(self.vid_name, vid, (0, 1))
                    pending = self.body(s.body, carry=True)
                    for base, *rest in pending:  # each AIV's row base, kept for after the loop
                        two = (self.e.alloca(PTR), self.e.alloca(PTR))
                        first = self.e.b.icmp_signed("==", vid, ir.Constant(I64, 0))
                        self.e.store(base, self.e.b.select(first, *two), 8)
                        slots.append((two, rest))
                for two, rest in slots:
                    for slot in two:
                        self.prefetch.append((self.e.load(PTR, slot, 8), *rest))
        finally:
            self.ctx = "top"
            self.vid = None
            self.restore({self.vid_name: saved})

    def dual_copy(self, s: Copy):
        """FixPipe L0C -> UB feeds both AIVs (as tilelang_mini/semantics/ops.py `_dual_copy`): AIV v gets
        rows [v * h, (v + 1) * h) of the source when the UB tile has h = half the rows."""
        half = s.dst.extent[0]
        split = s.src.extent[0] == 2 * half
        saved = (self.vars.get(self.vid_name), self.ranges.get(self.vid_name))
        self.ctx = "V"
        try:
            with self.e.loop(0, 2, name="vid") as vid:
                self.vid = vid
                self.bind(self.vid_name, vid, (0, 1))
                src = s.src
                if split:
                    start0 = BinOp("+", src.start[0], BinOp("*", Var(self.vid_name), Const(half)))
                    src = Region(src.buffer, (start0,) + src.start[1:], (half,) + src.extent[1:])
                codegen_ops.copy(self, Copy(src, s.dst, s.loc))
        finally:
            self.ctx = "C"
            self.vid = None
            self.restore({self.vid_name: saved})

    # --------------------------------------------------------------------------- buffers
    def info(self, buf):
        info = self.plan.infos.get(buf.name)
        if info is None:
            raise self.fail(f"buffer {buf.name!r} is used before it is allocated")
        return info

    def buf_ptr(self, info):
        if info.name in self.ptr_override:
            return self.ptr_override[info.name]
        if info.param is not None:
            return self.params[info.param]
        if self.core_kind is not None and self.ctx == "top":
            return top_buf_ptr(self, info)
        ctx = self.plan.top_source.get(info.name, "top") if self.ctx == "top" else self.ctx
        off = info.slots.get(ctx)
        if off is None:
            raise self.fail(f"buffer {info.name!r} is not available in this core's program")
        p = self.e.gep(self.scratch, off)
        if self.ctx == "V" and info.buf.scope not in PER_BLOCK:
            size = (info.nbytes + 63) // 64 * 64
            p = self.e.gep(p, self.e.b.mul(self.vid, ir.Constant(I64, size)))
        return p

    # ------------------------------------------------------------------------ intervals
    def interval(self, x):
        """(lo, hi) bounds of an integer expression, or None when unknown."""
        return interval(self.ranges, x)

    # --------------------------------------------------------------------------- stores
    def store_value(self, info, flat, v: Val):
        raw = vm.encode(self.e, v.v, v.kind, info.dtype, info.storage)
        self.access(info, flat, raw)

    def store_scalar(self, s: Store):
        if self.par is not None:
            raise self.fail("internal: store in a Parallel body outside a map")
        info = self.info(s.buffer)
        if info.layout != "row":
            raise self.fail(f"internal: packed buffer {info.name} written elementwise")
        flat = self.flat_index(info, s.indices)
        self.store_value(info, flat, self.expr(s.value))


def build(kernel: Kernel, features: dict, cores: bool = False):
    """Generate the module; returns (module, KernelGen) (errors, temp sizes, plan). With
    `cores`, the module holds one function per core kind instead of `tlm_kernel` (cores.py)."""
    gen = KernelGen(kernel, features, cores)
    if cores:
        generate_cores(gen)
    else:
        gen.generate()
    return gen.module, gen
