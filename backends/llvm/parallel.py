"""Parallel maps: a `parallel` For is an elementwise map, evaluated like NumPy evaluates it.

Each Store of the body runs over the whole iteration space before the next statement (NumPy
computes every element of the right-hand side, then assigns), vectorised along the innermost
loop variable: VL lanes with a tail mask; loads and stores whose flat offset is `uniform + lane`
are contiguous (masked) vector accesses, other varying offsets use gathers/scatters, uniform ones
scalar accesses. Consecutive stores are fused into one lane loop when no statement reads (at other
indices) what an earlier one writes; a store that reads its own target at other indices goes
through a temporary. A serial For inside a map must not depend on the map's variables; an If
whose condition does is masked: each store under it runs (as a group of its own) with the
condition, evaluated per lane, and-ed into the lane mask, so only the lanes where it holds load
or store (uniform accesses run when any lane does).
"""
from __future__ import annotations

import llvmlite.ir as ir

from tilelang_mini.ir.analysis import SYNC_OPS
from tilelang_mini.ir.nodes import Alloc, Call, For, If, Load, Scope, Store, walk

from . import vecmath as vm
from .irutil import F32, I64, I8, VL, const, constant, elem_type, like, mark_contiguous, vty
from .reduce import reduce
from .values import Par, vars_in



class ParallelMaps:
    """Mixin of KernelGen (codegen.py) emitting Parallel loop bodies."""

    def par_body(self, stmts):
        group: list = []
        for s in stmts:
            if isinstance(s, Store):
                if group and not _fusable(group, s):
                    self.store_group(group)
                    group = []
                group.append(s)
                continue
            if group:
                self.store_group(group)
                group = []
            if isinstance(s, (*SYNC_OPS, Alloc)):
                continue
            if isinstance(s, If) and vars_in((s.cond,)) & set(self.par.names):
                self.masked_if(s, ())
            elif isinstance(s, (If, For, Store)):
                self.statement(s)
            elif isinstance(s, Scope):
                raise self.fail(f"Scope({s.core!r}) inside a Parallel loop", s)
            else:
                raise self.fail(f"{type(s).__name__} inside a Parallel loop is not supported", s)
        if group:
            self.store_group(group)

    def masked_if(self, s: If, guards: tuple):
        """An If whose condition varies over the lanes: each store of a branch on its own, under
        the guards of every enclosing If and this branch's condition."""
        cond_reads = {n.buffer.name for n in walk(s.cond) if isinstance(n, Load)}
        written = {n.buffer.name for b in (s.then_body, s.else_body) for t in b
                   for n in walk(t) if isinstance(n, Store)}
        if cond_reads & written:
            raise self.fail(f"the condition of an `if` inside T.Parallel reads "
                            f"{sorted(cond_reads & written)[0]}, which the `if` writes; compute "
                            f"the condition into a tile in a Parallel loop of its own first", s)
        for body, g in ((s.then_body, s.cond), (s.else_body, Call("not", (s.cond,)))):
            for t in body:
                if isinstance(t, If):
                    self.masked_if(t, guards + (g,))
                elif isinstance(t, Store):
                    self.store_group([t], guards + (g,))
                elif not isinstance(t, (*SYNC_OPS, Alloc)):
                    raise self.fail("an `if` inside T.Parallel holds element assignments only", t)

    def guard(self, guards):
        """And the guards (conditions, outermost first) into the lane mask; returns the mask
        to restore."""
        par, e = self.par, self.e
        saved = par.mask
        for g in guards:
            c = self.expr(g)
            m = vm.to_bool(e, c.v, c.kind)
            par.mask = e.b.and_(par.mask, e.splat(m, VL) if not m.type == par.mask.type else m)
            par.guarded = True
        return saved

    def unguard(self, saved):
        self.par.mask = saved
        self.par.guarded = False

    def any_lane(self):
        """i1: some lane of a guarded map is active (uniform accesses run only then)."""
        return self.e.reduce_or(self.par.mask)

    def store_group(self, stores, guards=()):
        par = self.par
        for s in stores:
            self.check_map_store(s)
        hazard = len(stores) == 1 and _self_hazard(stores[0])
        names, exts = list(par.names), list(par.extents)
        outer = list(zip(names[:-1], exts[:-1], [self.ranges.get(n) for n in names[:-1]]))
        inner_name, inner_ext = names[-1], exts[-1]
        prev = self.stmt

        def lanes(fn):
            with self.e.loop(0, inner_ext, VL, name=inner_name) as j0:
                b = self.e.b
                lane = b.add(self.e.splat(j0), self.e.iota())
                mark_contiguous(lane)
                par.mask = b.icmp_signed("<", lane, self.e.splat(inner_ext))
                self.vars[inner_name] = self.Val(lane, "int")
                fn(j0)
                par.mask = None

        saved = {n: (self.vars.get(n), self.ranges.get(n)) for n in names}
        try:
            if not hazard:
                def emit(j0):
                    for s in stores:
                        self.stmt = s
                        saved_mask = self.guard(guards)
                        info = self.info(s.buffer)
                        flat = self.flat_index(info, s.indices)
                        self.store_value(info, flat, self.expr(s.value))
                        self.unguard(saved_mask)
                self.nest(outer, lambda: lanes(emit))
            else:
                self._hazard_store(stores[0], outer, lanes, guards)
        finally:
            self.stmt = prev
            self.restore(saved)

    def _hazard_store(self, s, outer, lanes, guards=()):
        """A store whose value reads its own target elsewhere: evaluate every element into a
        temporary first (NumPy evaluates the whole right-hand side before assigning)."""
        par = self.par
        total = 1
        for x in par.extents:
            if not isinstance(x, ir.Constant):
                raise self.fail("a Parallel map that reads the buffer it writes needs constant "
                                "extents in the llvm backend")
            total *= int(x.constant)
        inner = int(par.extents[-1].constant)
        self.stmt = s
        val_kind = [None]
        tmp = self.temp(total * 8)
        e = self.e

        def row_offset():
            b = e.b
            off = ir.Constant(I64, 0)
            for n, x in zip(par.names[:-1], par.extents[:-1]):
                off = b.add(b.mul(off, x), self.vars[n].v)
            return b.mul(off, ir.Constant(I64, inner))

        def phase1(j0):
            saved_mask = self.guard(guards)
            v = self.expr(s.value)
            val_kind[0] = v.kind
            raw, t = self._tmp_raw(v)
            ptr = e.gep(tmp, e.b.mul(e.b.add(row_offset(), j0), ir.Constant(I64, 8)))
            e.masked_store(e.splat(raw), ptr, par.mask)
            self.unguard(saved_mask)

        def phase2(j0):
            saved_mask = self.guard(guards)
            kind = val_kind[0]
            t = {"float": F32, "int": I64, "bool": I8}[kind]
            ptr = e.gep(tmp, e.b.mul(e.b.add(row_offset(), j0), ir.Constant(I64, 8)))
            raw = e.masked_load(vty(t), ptr, par.mask)
            v = raw if kind != "bool" else e.b.icmp_unsigned("!=", raw, const(raw.type, 0))
            info = self.info(s.buffer)
            flat = self.flat_index(info, s.indices)
            self.store_value(info, flat, self.Val(v, kind))
            self.unguard(saved_mask)

        self.nest(outer, lambda: lanes(phase1))
        self.nest(outer, lambda: lanes(phase2))

    def map_reduce(self, loop, red, before=None):
        """A Parallel map filling tile X fused with the reduction of X along its last dim (a
        fused("map_reduce") block, transform/cpu_fuse.py): the map's values, rounded to X's
        dtype, feed the reduction's accumulators; X is never written. before(t0, mask), if
        given, is emitted ahead of each vector of values (rowpass.py: the copy-in of what the
        map reads)."""
        st = loop.body[0]
        info = self.info(st.buffer)
        names = list(loop.vars)
        exts = [self.scalar_int(x, "a loop extent") for x in loop.extents]
        saved = {n: (self.vars.get(n), self.ranges.get(n)) for n in names}
        for n, x in zip(names, loop.extents):
            self.ranges[n] = (0, int(x.value) - 1)
        par = self.par = Par(names, exts)
        e = self.e
        every = constant(ir.VectorType(ir.IntType(1), VL), [1] * VL)

        def producer(idx, t0, mask):
            b = e.b
            if before is not None:
                before(t0, mask)
            for n, i in zip(names[:-1], idx):
                self.vars[n] = self.Val(i, "int")
            lane = b.add(e.splat(t0), e.iota())
            mark_contiguous(lane)
            self.vars[names[-1]] = self.Val(lane, "int")
            par.mask = every if mask is None else mask
            self.stmt = st
            v = self.expr(st.value)
            return e.splat(vm.encode(e, v.v, v.kind, info.dtype, info.storage))

        prev = self.stmt
        try:
            self.stmt = st
            self.check_map_store(st)
            self.stmt = red
            reduce(self, red, producer)
        finally:
            self.par = None
            self.stmt = prev
            self.restore(saved)

    def _tmp_raw(self, v):
        if v.kind == "bool":
            return self.e.b.zext(v.v, like(v.v.type, I8)), I8
        return v.v, elem_type(v.v.type)

    def check_map_store(self, s: Store):
        used = vars_in(s.indices)
        for n in self.par.names:
            if n in vars_in((s.value,)) and n not in used:
                raise self.fail(f"value of the store to {s.buffer.name} depends on Parallel "
                                f"variable {n!r}, which its indices do not use (that would be a "
                                f"reduction)", s)
        for x in s.indices:
            for n in walk(x):
                if isinstance(n, Load) and n.buffer.name == s.buffer.name:
                    raise self.fail(f"the indices of a store to {s.buffer.name} read "
                                    f"{s.buffer.name}", s)



def _loads(x):
    return [n for n in walk(x) if isinstance(n, Load)]


def _self_hazard(s: Store) -> bool:
    return any(ld.buffer.name == s.buffer.name and ld.indices != s.indices
               for ld in _loads(s.value))


def _fusable(group, s: Store) -> bool:
    """Can `s` run lane-chunk by lane-chunk together with the earlier stores of `group`?"""
    if _self_hazard(s) or any(_self_hazard(g) for g in group):
        return False
    for g in group:
        if g.buffer.name == s.buffer.name and g.indices != s.indices:
            return False
        for ld in _loads(s.value) + [n for x in s.indices for n in _loads(x)]:
            if ld.buffer.name == g.buffer.name and ld.indices != g.indices:
                return False
        for ld in _loads(g.value) + [n for x in g.indices for n in _loads(x)]:
            if ld.buffer.name == s.buffer.name and ld.indices != s.indices:
                return False
    return True
