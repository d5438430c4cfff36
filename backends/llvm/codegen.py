"""Tile IR -> llvmlite.ir module: control flow, expressions, stores and Parallel maps.

The module exports `tlm_kernel(void **args, i64 block_begin, i64 block_end, void *scratch)`
returning 0, or 1 + the index of the runtime error (`KernelGen.errors`) that stopped it, for grid
blocks `[block_begin, block_end)` in order (a kernel whose cores must interleave at cross-core
waits gets one function per core kind instead: cores.py). Each block zeroes its on-chip buffers
and runs the body with the semantics of tilelang_mini/semantics: Scope("C") once, Scope("V") once
per vid with its own buffers; a Parallel loop is an elementwise map vectorised along its innermost
variable (VL lanes, masked tail). Tile ops live in codegen_ops.py (Copy, Fill), reduce.py,
microkernel.py (Gemm), special_copies.py (atomic, transposing), sort.py; access.py holds what
they share (region starts, bounds, vector loads and stores).
"""
from __future__ import annotations

import platform

import llvmlite.ir as ir

from tilelang_mini.errors import CompileError, InternalCompilerError, internal_error
from tilelang_mini.ir.analysis import SYNC_OPS, interval
from tilelang_mini.ir.verifier import check_grid
from tilelang_mini.ir.nodes import (
    BIT_FNS, CORES, call_arity, Alloc, BinOp, Call, Cast, Reinterpret, Const, Copy, Fill, For,
    Fused, Gemm, If, Kernel, Load, Reduce, Sort, Region, Scope, SetCrossFlag, Store, Var,
    WaitCrossFlag,
)

from . import codegen_ops, microkernel, rowpass
from . import vecmath as vm
from .irutil import (
    F32, I1, I32, I64, PTR, STORAGE, Emitter, const, contiguous, elem_type, is_vec, like,
    mark_contiguous, vty,
)
from .cores import core_scope, cross_flag, generate_cores, top_buf_ptr
from .layout import PER_BLOCK, is_dual_copy, plan_buffers
from .packing import flush_prefetch
from .reduce import reduce
from .parallel import ParallelMaps
from .values import Par, Val, vars_in
from .sort import sort
from .special_copies import atomic_copy, transposed_copy


def _is_sync(s) -> bool:
    return isinstance(s, SYNC_OPS)


class KernelGen(ParallelMaps):
    Val = Val

    def __init__(self, kernel: Kernel, features: dict, cores: bool = False):
        self.kernel = kernel
        self.features = features
        self.bf16 = bool(features.get("bf16"))
        check_grid(kernel)
        # cores: one function per core kind, run as coroutines by the runtime (cores.py)
        self.core_kind = None      # "C" | "V" while a core function is generated
        self.plan = plan_buffers(kernel, self.bf16, top_copies=3 if cores else 1)
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
        self.needs_dpbf16 = False
        self.loops: list = []  # enclosing serial loop variables, outermost first
        self.prefetch: list = []  # GM rows to prefetch, spread over the next gemm
        self.nt_ok = platform.machine().lower() in ("x86_64", "amd64")
        self.nt_used = False      # non-temporal stores emitted: fence them before returning

    # --------------------------------------------------------------------------- driver
    def generate(self) -> ir.Module:
        e, b, k = self.e, self.e.b, self.kernel
        args, begin, end, scratch = self.fn.args
        self.scratch = scratch
        self.params = [e.load(PTR, e.gep(args, 8 * i), 8) for i in range(len(k.params))]
        with e.loop(begin, end, name="block") as blk:
            if self.plan.zero_bytes:
                e.memset0(scratch, self.plan.zero_bytes)
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
        return self.e.gep(self.scratch, self.plan.arena_bytes)

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
                elif isinstance(s, Copy) and self.ctx == "C" and is_dual_copy(s):
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
        if s.kind not in ("serial", "parallel", "pipelined", "unroll"):
            raise self.fail(f"unknown loop kind {s.kind!r}")
        if len(s.vars) != len(s.extents):
            raise self.fail(f"loop has {len(s.vars)} variables but {len(s.extents)} extents")
        if self.par is not None and vars_in(s.extents) & set(self.par.names):
            raise self.fail("a loop extent must be a scalar integer; it depends on a Parallel "
                            "loop variable")
        exts, rngs = [], []
        for x in s.extents:
            v = self.scalar_int(x, "a loop extent")
            exts.append(v)
            rngs.append((0, int(x.value) - 1) if isinstance(x, Const) and x.value > 0 else None)
        if s.kind == "parallel":
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
            return
        saved = {n: (self.vars.get(n), self.ranges.get(n)) for n in s.vars}
        self.loops.extend(s.vars)
        try:
            self.nest(list(zip(s.vars, exts, rngs)), lambda: self.body_in_context(s.body))
        finally:
            del self.loops[-len(s.vars):]
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

    # ----------------------------------------------------------------------- expressions
    def scalar_int(self, x, what: str):
        v = self.expr(x)
        if v.vec:
            raise self.fail(f"{what} must be a scalar integer (does it depend on a Parallel "
                            f"loop variable?)")
        if v.kind == "float":
            raise self.fail(f"{what} must be an integer")
        return vm.to_int(self.e, v.v, v.kind)

    def expr(self, x) -> Val:
        if isinstance(x, Const):
            kind = vm.kind_of(x.dtype) if x.dtype in vm.FLOATS or x.dtype in ("int32", "bool") \
                else "int"
            if kind == "float":
                return Val(ir.Constant(F32, float(x.value)), "float")
            if kind == "bool":
                return Val(ir.Constant(I1, int(bool(x.value))), "bool")
            return Val(ir.Constant(I64, int(x.value)), "int")
        if isinstance(x, Var):
            v = self.vars.get(x.name)
            if v is None:
                raise self.fail(f"variable {x.name!r} is not bound here")
            return v
        if isinstance(x, Load):
            return self.load(x)
        if isinstance(x, Cast):
            return self.cast(x)
        if isinstance(x, Reinterpret):
            return self.reinterpret(x)
        if isinstance(x, BinOp):
            return self.binop(x)
        if isinstance(x, Call):
            return self.call(x)
        raise self.fail(f"not an expression: {x!r}")

    def load(self, x: Load) -> Val:
        info = self.info(x.buffer)
        if info.layout != "row":
            raise self.fail(f"internal: packed buffer {info.name} read elementwise")
        flat = self.flat_index(info, x.indices)
        raw = self.access(info, flat, None)
        return Val(vm.decode(self.e, raw, info.storage), vm.kind_of(info.dtype))

    def flat_index(self, info, indices):
        """i64 element offset (scalar or vector) after bounds checks of every index."""
        shape = info.shape
        if len(indices) != len(shape):
            raise self.fail(f"{info.name} has {len(shape)} dimension(s) but is indexed with "
                            f"{len(indices)}")
        e, b = self.e, self.e.b
        terms = []
        for d, (ix, n, st) in enumerate(zip(indices, shape, info.strides)):
            v = self.expr(ix)
            if v.kind == "float":
                raise self.fail(f"index {d} of {info.name} is not an integer")
            iv = vm.to_int(e, v.v, v.kind)
            rng = self.interval(ix)
            if rng is None or rng[0] < 0 or rng[1] >= n:
                bad = b.or_(b.icmp_signed("<", iv, const(iv.type, 0)),
                            b.icmp_signed(">=", iv, const(iv.type, n)))
                if is_vec(bad) and self.par is not None and self.par.mask is not None:
                    bad = b.and_(bad, self.par.mask)
                elif self.par is not None and self.par.guarded:
                    bad = b.and_(bad, self.any_lane())
                e.error_if(bad, self.error(f"index out of bounds for dimension {d} of "
                                           f"{info.name}{list(shape)}"))
            contig = st == 1 and contiguous(iv)
            terms.append((b.mul(iv, const(iv.type, st)) if st != 1 else iv, contig))
        vec_terms = [t for t in terms if is_vec(t[0])]
        contig = len(vec_terms) == 1 and vec_terms[0][1]
        flat = None
        for t, _ in terms:
            if flat is None:
                flat = t
            else:
                flat, t = e.match(flat, t)
                flat = b.add(flat, t)
        if contig:
            mark_contiguous(flat)
        if flat is None:
            flat = ir.Constant(I64, 0)
        return flat

    def access(self, info, flat, value):
        """Load (value None) or store raw storage bits at element offset(s) `flat`."""
        e, b = self.e, self.e.b
        rt, size = STORAGE[info.storage]
        base = self.buf_ptr(info)
        if not is_vec(flat):
            guarded = self.par is not None and self.par.guarded
            if guarded:  # a uniform access under an If on the lanes: only when a lane is on
                active = self.any_lane()
                flat = b.select(active, flat, ir.Constant(I64, 0))
            ptr = e.gep(base, b.mul(flat, ir.Constant(I64, size)) if size != 1 else flat)
            if value is None:
                return e.load(rt, ptr)
            if is_vec(value):
                raise self.fail("internal: vector value at a scalar address")
            if guarded:
                with b.if_then(active):
                    e.store(value, ptr)
            else:
                e.store(value, ptr)
            return None
        mask = self.par.mask
        vt = vty(rt, flat.type.count)
        if contiguous(flat):
            first = b.extract_element(flat, ir.Constant(I32, 0))
            ptr = e.gep(base, b.mul(first, ir.Constant(I64, size)) if size != 1 else first)
            if value is None:
                return e.masked_load(vt, ptr, mask)
            e.masked_store(e.splat(value, flat.type.count), ptr, mask)
            return None
        offs = b.mul(flat, const(flat.type, size)) if size != 1 else flat
        if value is None:
            return e.gather(vt, base, offs, mask)
        e.scatter(e.splat(value, flat.type.count), base, offs, mask)
        return None

    def binop(self, x: BinOp) -> Val:
        e, b = self.e, self.e.b
        op = x.op
        va, vb = self.expr(x.a), self.expr(x.b)
        if op in ("and", "or"):
            p, q = e.match(vm.to_bool(e, va.v, va.kind), vm.to_bool(e, vb.v, vb.kind))
            return Val(b.and_(p, q) if op == "and" else b.or_(p, q), "bool")
        if op == "/":
            p, q = e.match(vm.to_float(e, va.v, va.kind), vm.to_float(e, vb.v, vb.kind))
            return Val(b.fdiv(p, q), "float")
        kind = "float" if "float" in (va.kind, vb.kind) else "int"
        if kind == "float":
            p, q = e.match(vm.to_float(e, va.v, va.kind), vm.to_float(e, vb.v, vb.kind))
        else:
            p, q = e.match(vm.to_int(e, va.v, va.kind), vm.to_int(e, vb.v, vb.kind))
        contig = self._lane_affine(x, va, vb, p)
        if op in ("<", "<=", ">", ">=", "==", "!="):
            if kind == "float":
                r = b.fcmp_unordered("!=", p, q) if op == "!=" else b.fcmp_ordered(op, p, q)
            else:
                r = b.icmp_signed(op, p, q)
            return Val(r, "bool")
        if kind == "float":
            if op == "//":
                return Val(vm.floordiv_f(e, p, q), "float")
            if op == "%":
                return Val(vm.mod_f(e, p, q), "float")
            fn = {"+": b.fadd, "-": b.fsub, "*": b.fmul}.get(op)
            if fn is None:
                raise self.fail(f"unknown binary operator {op!r}")
            return Val(fn(p, q), "float")
        if op in ("//", "%"):
            return Val(self.int_divmod(p, q, op, x.b), "int")
        fn = {"+": b.add, "-": b.sub, "*": b.mul}.get(op)
        if fn is None:
            raise self.fail(f"unknown binary operator {op!r}")
        r = fn(p, q)
        if contig is not None:
            mark_contiguous(r)
        return Val(r, "int")

    def _lane_affine(self, x, va, vb, p):
        """Track offsets that are `uniform + lane` (contiguous vector accesses)."""
        if not is_vec(p) or x.op not in ("+", "-", "*"):
            return None
        ca, cb = contiguous(va.v), contiguous(vb.v)
        ua, ub = not va.vec, not vb.vec
        if x.op == "+" and ((ca and ub) or (cb and ua)):
            return True
        if x.op == "-" and ca and ub:
            return True
        if x.op == "*":
            if ca and isinstance(x.b, Const) and x.b.value == 1:
                return True
            if cb and isinstance(x.a, Const) and x.a.value == 1:
                return True
        return None

    def int_divmod(self, p, q, op, qx):
        e, b = self.e, self.e.b
        if not (isinstance(qx, Const) and isinstance(qx.value, int) and qx.value != 0):
            zero = b.icmp_signed("==", q, const(q.type, 0))
            if is_vec(zero) and self.par is not None and self.par.mask is not None:
                zero = b.and_(zero, self.par.mask)
            e.error_if(zero, self.error(f"integer division by zero in '{op}'"))
            q = b.select(b.icmp_signed("==", q, const(q.type, 0)), const(q.type, 1), q)
        quo = b.sdiv(p, q)
        rem = b.srem(p, q)
        # floor semantics: adjust when the remainder is nonzero and signs differ
        adj = b.and_(b.icmp_signed("!=", rem, const(rem.type, 0)),
                     b.icmp_signed("<", b.xor(rem, q), const(rem.type, 0)))
        if op == "//":
            return b.sub(quo, b.zext(adj, quo.type))
        return b.select(adj, b.add(rem, q), rem)

    def call(self, x: Call) -> Val:
        e, b = self.e, self.e.b
        fn = x.fn
        want = call_arity(fn)
        if len(x.args) != want:
            raise self.fail(f"{fn}() takes {want} argument(s), got {len(x.args)}")
        vals = [self.expr(a) for a in x.args]
        if fn == "select":
            return self.select(*vals)
        if fn in ("exp", "exp2", "log", "sqrt", "rsqrt"):
            (v,) = vals
            f = vm.to_float(e, v.v, v.kind)
            return Val(getattr(vm, fn)(e, f), "float")
        if fn in ("abs", "neg"):
            (v,) = vals
            val, kind = v.v, v.kind
            if kind == "bool":
                val, kind = vm.to_int(e, val, kind), "int"
            if kind == "float":
                return Val(e.unary("fabs", val) if fn == "abs" else b.fneg(val), "float")
            if fn == "neg":
                return Val(b.neg(val), "int")
            return Val(b.select(b.icmp_signed("<", val, const(val.type, 0)), b.neg(val), val),
                       "int")
        if fn == "not":
            (v,) = vals
            return Val(b.not_(vm.to_bool(e, v.v, v.kind)), "bool")
        if fn in BIT_FNS:
            return self.bitop(fn, vals, x.args)
        va, vb = vals
        if fn == "ceildiv":
            if "float" in (va.kind, vb.kind):
                raise self.fail("ceildiv takes integers")
            p, q = e.match(vm.to_int(e, va.v, va.kind), vm.to_int(e, vb.v, vb.kind))
            return Val(b.neg(self.int_divmod(b.neg(p), q, "//", x.args[1])), "int")
        if fn not in ("max", "min"):
            raise self.fail(f"unknown function {fn!r}")
        if "float" in (va.kind, vb.kind):
            p, q = vm.to_float(e, va.v, va.kind), vm.to_float(e, vb.v, vb.kind)
            return Val((vm.fmax if fn == "max" else vm.fmin)(e, p, q), "float")
        p, q = vm.to_int(e, va.v, va.kind), vm.to_int(e, vb.v, vb.kind)
        return Val(e.smax(p, q) if fn == "max" else e.smin(p, q), "int")

    def select(self, vc: Val, va: Val, vb: Val) -> Val:
        """select(cond, a, b): operands promoted as in arithmetic; vector lanes pick per lane."""
        e, b = self.e, self.e.b
        if va.kind == vb.kind == "bool":
            p, q, kind = va.v, vb.v, "bool"
        elif "float" in (va.kind, vb.kind):
            p, q, kind = vm.to_float(e, va.v, va.kind), vm.to_float(e, vb.v, vb.kind), "float"
        else:
            p, q, kind = vm.to_int(e, va.v, va.kind), vm.to_int(e, vb.v, vb.kind), "int"
        c = vm.to_bool(e, vc.v, vc.kind)
        p, q = e.match(p, q)
        if is_vec(p) and not is_vec(c):
            c = e.splat(c, p.type.count)
        elif is_vec(c) and not is_vec(p):
            p, q = e.splat(p, c.type.count), e.splat(q, c.type.count)
        return Val(b.select(c, p, q), kind)

    def bitop(self, fn, vals, args) -> Val:
        """Bit operations on i64 values (bools as 0/1); shifts are arithmetic on the value, which
        a load sign- or zero-extended from its element type."""
        e, b = self.e, self.e.b
        if any(v.kind == "float" for v in vals):
            raise self.fail(f"{fn} takes integers")
        ints = [vm.to_int(e, v.v, v.kind) for v in vals]
        if fn == "bitwise_not":
            return Val(b.not_(ints[0]), "int")
        p, q = e.match(*ints)
        if fn.startswith("shift") and not (isinstance(args[1], Const) and 0 <= args[1].value < 64):
            bad = b.icmp_unsigned(">", q, const(q.type, 63))  # a fault, as in the semantics
            e.error_if(b.and_(bad, self.par.mask) if is_vec(bad) and self.par is not None and self.par.mask
                       is not None else bad, self.error(f"{fn} by a count outside 0..63"))
            q = b.and_(q, const(q.type, 63))  # (an LLVM shift by >= 64 is poison)
        op = {"bitwise_and": b.and_, "bitwise_or": b.or_, "bitwise_xor": b.xor,
              "shift_left": b.shl, "shift_right": b.ashr}[fn]
        return Val(op(p, q), "int")

    def reinterpret(self, x: Reinterpret) -> Val:
        """The value as an element of x.source (its storage bits), read back as x.dtype."""
        e, b = self.e, self.e.b
        v = self.expr(x.value)
        raw = vm.encode(e, v.v, v.kind, x.source, x.source)
        bits_t = ir.IntType(STORAGE[x.source][1] * 8)
        if isinstance(elem_type(raw.type), ir.FloatType):
            raw = b.bitcast(raw, like(raw.type, bits_t))
        dst_t = STORAGE[x.dtype][0]
        if isinstance(dst_t, ir.FloatType):
            raw = b.bitcast(raw, like(raw.type, dst_t))
        return Val(vm.decode(e, raw, x.dtype), vm.kind_of(x.dtype))

    def cast(self, x: Cast) -> Val:
        e = self.e
        v = self.expr(x.value)
        if x.dtype in vm.INT_STORAGE and x.dtype != "int32":
            return Val(vm.decode(e, vm.encode(e, v.v, v.kind, x.dtype, x.dtype), x.dtype), "int")
        if x.dtype not in vm.FLOATS and x.dtype not in ("int32", "bool"):
            raise self.fail(f"unknown dtype {x.dtype!r}")
        if x.dtype == "float32":
            return Val(vm.to_float(e, v.v, v.kind), "float")
        if x.dtype in vm.FLOATS:
            return Val(vm.round_to(e, vm.to_float(e, v.v, v.kind), x.dtype), "float")
        if x.dtype == "int32":
            b = e.b
            if v.kind == "float":
                r = b.sext(b.fptosi(v.v, like(v.v.type, I32)), like(v.v.type, I64))
            elif v.kind == "bool":
                r = b.zext(v.v, like(v.v.type, I64))
            else:
                r = b.sext(b.trunc(v.v, like(v.v.type, I32)), like(v.v.type, I64))
            return Val(r, "int")
        return Val(vm.to_bool(e, v.v, v.kind), "bool")

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
