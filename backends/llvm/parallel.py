"""Parallel maps: a `parallel` For is an elementwise map, evaluated like NumPy evaluates it.

The split_maps pass (transform/cpu_maps.py) has made every map body one group of stores that can
run in one lane loop (temporaries, serial loops and uniform ifs moved out), or an `if` on the
map's variables. A group runs vectorised along the innermost loop variable: VL lanes with a tail
mask; loads and stores whose flat offset is `uniform + lane` are contiguous (masked) vector
accesses, other varying offsets use gathers/scatters, uniform ones scalar accesses. An `if`
whose condition depends on the map's variables is masked: each store under it runs with the
condition, evaluated per lane, and-ed into the lane mask, so only the lanes where it holds load
or store (uniform accesses run when any lane does).
"""
from __future__ import annotations

import llvmlite.ir as ir

from tilelang_mini.ir.analysis import SYNC_OPS
from tilelang_mini.ir.nodes import Alloc, Call, For, If, Load, Scope, Store, walk
from tilelang_mini.transform.cpu_maps import map_group_ok

from . import vecmath as vm
from .irutil import VL, constant, mark_contiguous
from .reduce import reduce
from .values import Par, vars_in



class ParallelMaps:
    """Mixin of KernelGen (codegen.py) emitting Parallel loop bodies."""

    def par_body(self, stmts):
        """The body of a map as transform/cpu_maps.py `split_maps` leaves it: stores that run in
        one lane loop, or an `if` on the map's variables (masked); what it left in place for
        us to report (a loop or tile op in a map) goes to `statement`, which does."""
        stores = [s for s in stmts if isinstance(s, Store)]
        if stores:
            if len(stores) != len([s for s in stmts if not isinstance(s, (*SYNC_OPS, Alloc))]) \
                    or not map_group_ok(stores):
                raise self.fail("internal: a Parallel map the split_maps pass did not split",
                                stores[0])
            self.store_group(stores)
            return
        for s in stmts:
            if isinstance(s, (*SYNC_OPS, Alloc)):
                continue
            if isinstance(s, If) and vars_in((s.cond,)) & set(self.par.names):
                self.masked_if(s, ())
            elif isinstance(s, (If, For)):
                self.statement(s)
            elif isinstance(s, Scope):
                raise self.fail(f"Scope({s.core!r}) inside a Parallel loop", s)
            else:
                raise self.fail(f"{type(s).__name__} inside a Parallel loop is not supported", s)

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
        """One lane loop (inside loops over the other map variables) storing each of `stores`
        in turn, under `guards` (the conditions of the masked ifs around them)."""
        par = self.par
        for s in stores:
            self.check_map_store(s)
            if not map_group_ok([s]):
                raise self.fail("internal: a store reading its own target elsewhere was not "
                                "given a temporary by the split_maps pass", s)
        names, exts = list(par.names), list(par.extents)
        outer = list(zip(names[:-1], exts[:-1], [self.ranges.get(n) for n in names[:-1]]))
        inner_name, inner_ext = names[-1], exts[-1]
        prev = self.stmt

        def lanes(fn):
            with self.e.loop(0, inner_ext, VL, name=inner_name) as j0:
                b = self.e.b
                lane = b.add(self.e.splat(j0), self.e.iota())
                mark_contiguous(lane, lambda _b, j0=j0: j0)
                par.mask = b.icmp_signed("<", lane, self.e.splat(inner_ext))
                self.vars[inner_name] = self.Val(lane, "int")
                fn(j0)
                par.mask = None

        def emit(j0):
            for s in stores:
                self.stmt = s
                saved_mask = self.guard(guards)
                info = self.info(s.buffer)
                flat = self.flat_index(info, s.indices)
                self.store_value(info, flat, self.expr(s.value))
                self.unguard(saved_mask)

        saved = {n: (self.vars.get(n), self.ranges.get(n)) for n in names}
        try:
            self.nest(outer, lambda: lanes(emit))
        finally:
            self.stmt = prev
            self.restore(saved)

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
            mark_contiguous(lane, lambda _b, t0=t0: t0)
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

    def check_map_store(self, s: Store):
        used = vars_in(s.indices)
        for n in self.par.names:
            if self.ranges.get(n) == (0, 0):   # an extent-1 variable is 0: no reduction
                continue
            if n in vars_in((s.value,)) and n not in used:
                raise self.fail(f"value of the store to {s.buffer.name} depends on Parallel "
                                f"variable {n!r}, which its indices do not use (that would be a "
                                f"reduction)", s)
        for x in s.indices:
            for n in walk(x):
                if isinstance(n, Load) and n.buffer.name == s.buffer.name:
                    raise self.fail(f"the indices of a store to {s.buffer.name} read "
                                    f"{s.buffer.name}", s)
