"""Per-thread (SIMT) TileLang code: a block's threads run in lockstep as maps over the threads.

A TileLang kernel that uses `T.get_thread_binding(d)` as a value (an index, arithmetic, a
comparison) is written for one GPU thread of `threads=` (an int or up to three extents, 128 if
not given). The Ascend vector core has no threads; it works on whole tiles. Lockstep execution
of the threads is one schedule every race-free SIMT program allows, and statement by statement
it is a map over the thread extents, which is what the vector core runs:

    with T.Kernel(n, threads=T0) as bx:         with T.Kernel(n) as bx:
        tx = T.get_thread_binding()                 acc: fragment (T0, 4)
        acc = T.alloc_local((4,), f32)     ->       for tx in T.Parallel(T0):
        acc[0] = X[bx, tx]                              acc[tx, 0] = X[bx, tx]
        if tx < 4:                                  for tx in T.Parallel(T0):
            Y[tx] = acc[0]                              if tx < 4: Y[tx] = acc[tx, 0]

- `T.alloc_local` tiles are per thread: they gain the thread extents as leading dimensions and
  every element access names the thread's own row.
- an element assignment that mentions a thread index becomes a T.Parallel map over the thread
  dimensions it mentions (the others compute the same value); one that does not runs once.
- a run-time `if` on a thread-dependent condition is a per-thread predicate: it moves into the
  maps of its branches (the `then` branch's first, as a warp runs a divergent branch); one
  that reads what its branches write is evaluated once per thread first (condition_snapshot).
- `T.atomic_add` (max, min) on an on-chip element runs once per thread of the block, in thread
  order (a serial loop over all threads).
- `T.tvm_warp_shuffle(mask, v, lane, width, warp_size)` is `v` as the thread
  `tx - tx % width + lane % width` computes it: `v` with that thread's index.
- `T.sync_threads()` is a no-op: lockstep threads are synchronised after every statement.

The first trace treats `T.get_thread_binding()` as GPU-only (the one-thread guard `tx == 0` and
the thread groups `tx < c` of tile work keep their meaning there); at the first per-thread use
(`SimtUse`) the kernel block is traced again in this mode. What has no lockstep meaning here
(a loop trip count or a tile operation's region that depends on the thread, a tile operation
under a per-thread condition, a per-thread write of a `T.alloc_var` scalar) is a located
CompileError.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field

from ..ir.analysis import written_names
from ..ir.nodes import Alloc, Buffer, Call, For, If, Load, Store, Var, transform, walk, walk_own
from .common import SIMT_ADVICE, SimtUse, ThreadIndex, ThreadScalar
from .exprs import as_expr, binop, plain_number as plain


@dataclass
class Threads:
    """The block's threads in per-thread mode: IR variable names and extents per dimension."""
    names: tuple
    extents: tuple
    per_thread: set = field(default_factory=set)  # names of the per-thread tiles (alloc_local)
    serial: set = field(default_factory=set)  # loop variables of the per-thread atomic loops
    scalar_names: set = field(default_factory=set)  # T.alloc_var scalars made one per thread


class Simt:
    simt: Threads | None = None

    def traced_block(self, stmt):
        """kernel_block(stmt), traced again in per-thread mode when the first trace meets a
        per-thread use of a thread index, and again with each T.alloc_var scalar that a
        per-thread assignment writes made one per thread (the builder's state is restored
        before each trace)."""
        saved = {k: (v.copy() if isinstance(v, (list, dict, set)) else v)
                 for k, v in vars(self).items()}
        self.simt_scalars = set()
        while True:
            try:
                return self.kernel_block(stmt)
            except SimtUse:
                retry = {"simt_pending": True, "simt_scalars": set()}
            except ThreadScalar as e:
                if e.name in self.simt_scalars:
                    raise
                retry = {"simt_pending": True, "simt_scalars": self.simt_scalars | {e.name}}
            finally:
                self.simt_pending = False
            vars(self).clear()
            vars(self).update({k: (v.copy() if isinstance(v, (list, dict, set)) else v)
                               for k, v in saved.items()}, **retry)

    def stored_value(self, node):
        """The value of the right-hand side of `buf[...] = value`; a GPU thread index stored
        makes the code per-thread (SIMT): traced again in that mode."""
        value = self.eval(node)
        if isinstance(value, ThreadIndex):
            raise self.simt_use(node)
        return value

    def simt_use(self, node) -> SimtUse:
        """The error at a per-thread use of a thread index outside per-thread mode."""
        e = self.error(node, SIMT_ADVICE)
        return SimtUse(e.loc, e.source_line)

    def start_threads(self, call) -> None:
        """In per-thread mode, the threads of the block `call` (a T.Kernel) launches."""
        self.simt = None
        pending = getattr(self, "simt_pending", False)
        self.simt_pending = False  # not for the kernel blocks after this one
        if not pending:
            return
        node = next((k.value for k in call.keywords if k.arg == "threads"), None)
        value = 128 if node is None else self.eval(node)  # TileLang's default block size
        extents = tuple(value) if isinstance(value, (list, tuple)) else (value,)
        extents = tuple(self.resolved(e, node) for e in extents)
        if not 1 <= len(extents) <= 3 or not all(type(e) is int and e > 0 for e in extents):
            raise self.error(node or call, "per-thread code (T.get_thread_binding() used as a "
                                           "value) needs threads= of 1-3 positive constant ints")
        names = tuple(self.fresh_var("tx") for _ in extents)
        self.simt = Threads(names, extents, scalar_names=set(self.simt_scalars))
        self.var_ranges.update({n: (0, e - 1) for n, e in zip(names, extents)})

    def thread_index(self, dim: int):
        return Var(self.simt.names[dim]) if dim < len(self.simt.names) else as_expr(0)

    def per_thread_alloc(self, name: str, kind: str, shape: tuple, scope: str) -> tuple:
        """(shape, scope) of a tile allocated in per-thread code: T.alloc_local gets one row
        per thread, and so does a T.alloc_var scalar that a per-thread assignment writes."""
        if self.simt is None or not (kind == "alloc_local" and scope != "var"
                                     or scope == "var" and name in self.simt.scalar_names):
            return shape, scope
        self.simt.per_thread.add(name)
        return self.simt.extents + shape, "fragment"

    def is_scalar(self, buf: Buffer) -> bool:
        """Whether a name of `buf` reads and writes its one element (T.alloc_var)."""
        return buf.scope == "var" or (self.simt is not None and buf.name in self.simt.scalar_names)

    def scalar_index(self, buf: Buffer) -> tuple:
        return self.own_row(buf, (as_expr(0),))

    def bound_thread(self, n):
        """TileLang's `T.thread_binding(0, extent, thread="threadIdx.x")` as a value: the
        index of thread dimension x (y, z), the same as `T.get_thread_binding(0)` (1, 2)."""
        a = self.args(n, ["begin", "end", "thread"], {})
        begin, end = (self.resolved(self.eval(a[k]), a[k]) for k in ("begin", "end"))
        thread = self.eval(a["thread"])
        dims = {"threadIdx.x": 0, "threadIdx.y": 1, "threadIdx.z": 2}
        if thread not in dims or begin != 0 or type(end) is not int:
            raise self.error(n, 'T.thread_binding(0, extent, thread="threadIdx.x") (or .y, .z) '
                                "names a thread index of the block")
        if self.simt is None:
            return ThreadIndex(dims[thread])
        extents = self.simt.extents + (1, 1)
        if end != extents[dims[thread]]:
            raise self.error(n, f"{thread} has extent {extents[dims[thread]]} in this block "
                                f"(threads= of T.Kernel), not {end}")
        return self.thread_index(dims[thread])

    def own_row(self, buf: Buffer, idx: tuple) -> tuple:
        """The indices of a per-thread tile's element: the thread's own row first."""
        if self.simt is None or buf.name not in self.simt.per_thread:
            return idx
        return tuple(Var(n) for n in self.simt.names) + idx

    def per_thread_dims(self, buf: Buffer) -> int:
        return len(self.simt.names) if self.simt and buf.name in self.simt.per_thread else 0

    def warp_shuffle(self, n):
        """`T.tvm_warp_shuffle(mask, value, lane, width, warp_size)`: `value` as thread
        `t - t % width + lane % width` computes it (t the linear thread index)."""
        if self.simt is None:
            raise self.simt_use(n)
        if len(n.args) != 5 or n.keywords:
            raise self.error(n, "T.tvm_warp_shuffle(mask, value, lane, width, warp_size)")
        _, value, lane, width, _ = (self.eval(a) for a in n.args)
        names, extents = self.simt.names, self.simt.extents
        t, stride = as_expr(0), 1
        for name, e in zip(names, extents):
            t, stride = binop("+", t, binop("*", Var(name), stride)), stride * e
        src = binop("+", binop("-", t, binop("%", t, width)), binop("%", lane, width))
        source, stride = {}, 1
        for name, e in zip(names, extents):
            source[name], stride = binop("%", binop("//", src, stride), e), stride * e
        return transform(as_expr(value), lambda x: source.get(x.name, x)
                         if isinstance(x, Var) else x)

    def thread_atomic(self, kind: str, buf: Buffer, idx: tuple, update, call) -> list:
        """An atomic update in per-thread code: once per thread of the block, in thread order.

            T.atomic_add(s[tn], v)   ->   for t0 in serial(T0): for t1 in serial(T1): s[t0] += v
        """
        return [self.thread_loop([Store(buf, idx, as_expr(update), self.loc(call))], call)]

    def thread_atomic_value(self, buf: Buffer, idx: tuple, update_of, call):
        """`old = T.atomic_add(s[k], v, return_prev=True)` in per-thread code: each thread's
        old value in a per-thread tile, the threads in thread order:

            for t in serial(T0): prev[t, 0] = s[k]; s[k] = prev[t, 0] + v
        """
        prev = Buffer(self.fresh_buffer_name("atomic_prev"), self.simt.extents + (1,),
                      buf.dtype, "fragment")
        self.simt.per_thread.add(prev.name)
        self.hoisted_allocs[prev.name] = Alloc(prev, None, self.loc(call))
        old = Load(prev, self.scalar_index(prev))
        loc = self.loc(call)
        loop = self.thread_loop([Store(prev, old.indices, Load(buf, idx), loc),
                                 Store(buf, idx, as_expr(update_of(old)), loc)], call)
        self.open_bodies[-1].append(loop)
        self.stale_reads_of([loop], call)
        return old

    def thread_gm_atomic(self, kind: str, dst, value, call) -> list:
        """`T.atomic_add(Y[r], v)` of one GM element in per-thread code: each thread's value
        into a per-thread tile (a map over the threads), then one element's atomic copy per
        thread, in thread order (an index read from a tile goes through a scalar first):

            T.atomic_add(Y[bx * 4 + tx], acc[0])  ->  t[tx, 0] = acc[tx, 0]
                                                      for t0 in serial(T0):
                                                          copy(t[t0, 0], Y[bx * 4 + t0], atomic_add=True)
        """
        from ..ir.nodes import Copy, Region
        tmp = self.temp_tile(self.simt.extents + (1,), dst.buffer.dtype, call)
        self.simt.per_thread.add(tmp.name)
        loc = self.loc(call)
        idx = self.scalar_index(tmp)
        body, starts = [], []
        for ix in dst.start:
            if any(isinstance(n, Load) for n in walk(ix)):
                at = Buffer(self.fresh_buffer_name("atomic_at"), (1,), "int32", "var")
                self.hoisted_allocs[at.name] = Alloc(at, None, loc)
                body.append(Store(at, (as_expr(0),), as_expr(ix), loc))
                ix = Load(at, (as_expr(0),))
            starts.append(ix)
        body.append(Copy(Region(tmp, idx, (1,) * len(idx)),
                         Region(dst.buffer, tuple(starts), dst.extent), loc, atomic=kind))
        return [Store(tmp, idx, as_expr(value), loc), self.thread_loop(body, call)]

    def thread_loop(self, stores, call) -> For:
        """`stores` once per thread of the block, in thread order (serial loops over the
        thread dimensions, their variables in place of the thread indices)."""
        loops = {n: self.fresh_var("t") for n in self.simt.names}
        self.simt.serial.update(loops.values())
        body = tuple(transform(st, lambda x: Var(loops[x.name]) if isinstance(x, Var)
                               and x.name in loops else x) for st in stores)
        for name, e in reversed(list(zip(self.simt.names, self.simt.extents))):
            body = (For((loops[name],), (as_expr(e),), "serial", body, 0, self.loc(call)),)
        return body[0]

    def thread_allreduce(self, s):
        """TVM's cross-thread reduction, as TileLang's split-K GEMV writes it:

            with T.attr(T.comm_reducer(lambda x, y: x + y, [init]), "reduce_scope", ...):
                T.evaluate(T.tvm_thread_allreduce(T.uint32(1), v, True, out[0], tk, ...))

        gives every thread `out` = the reducer over the threads that differ only in the
        listed thread indices of their `v`; in lockstep (hidden tile r over the other thread
        dimensions, the threads in thread order):

            r[tn] = init;  for t in serial(threads): r[tn] = r[tn] + v;  out[tn, tk] = r[tn]
        """
        call = s.items[0].context_expr
        red = call.args[0] if call.args else None
        body = s.body[0].value if len(s.body) == 1 and isinstance(s.body[0], ast.Expr) else None
        inner = body.args[0] if self.named_call(body, "evaluate") and body.args else body
        if not (self.named_call(red, "comm_reducer") and len(red.args) == 2
                and isinstance(red.args[0], ast.Lambda) and len(red.args[0].args.args) == 2
                and self.named_call(inner, "tvm_thread_allreduce")):
            raise self.error(call, "T.attr is supported only as TVM's cross-thread reduction "
                                   "(T.attr(T.comm_reducer(lambda x, y: ..., [init]), "
                                   "'reduce_scope', ...) around T.evaluate(T.tvm_thread_"
                                   "allreduce(...))); otherwise write nothing (TVM attributes "
                                   "have no meaning here)")
        args = [self.eval(a) for a in inner.args]
        if len(args) < 5 or plain(args[0]) != 1 or args[2] is not True \
                or not isinstance(args[3], Load):
            raise self.error(inner, "T.tvm_thread_allreduce(T.uint32(1), value, True, "
                                    "out[...], *thread_indices): one value, no condition")
        if any(isinstance(t, ThreadIndex) for t in args[4:]):
            raise self.simt_use(inner)
        names = [t.name if isinstance(t, Var) else None for t in args[4:]]
        if self.simt is None or not all(n in self.simt.names for n in names):
            raise self.error(inner, "T.tvm_thread_allreduce reduces over thread indices "
                                    "(T.get_thread_binding(d)) of the block")
        lam = red.args[0]
        inits = red.args[1].elts if isinstance(red.args[1], (ast.List, ast.Tuple)) else []
        if len(inits) != 1:
            raise self.error(red, "T.comm_reducer(lambda x, y: ..., [init]): one init value")
        out = args[3]
        kept = tuple(n for n in self.simt.names if n not in names)
        acc = Buffer(self.fresh_buffer_name("allreduce"),
                     tuple(e for n, e in zip(self.simt.names, self.simt.extents) if n in kept)
                     or (1,), out.buffer.dtype, "fragment")
        self.hoisted_allocs[acc.name] = Alloc(acc, None, self.loc(call))
        at = tuple(Var(n) for n in kept) or (as_expr(0),)
        self.scopes.append({lam.args.args[0].arg: Load(acc, at), lam.args.args[1].arg: args[1]})
        try:
            combined = self.eval(lam.body)
        finally:
            self.scopes.pop()
        loc = self.loc(inner)
        return [Store(acc, at, as_expr(self.eval(inits[0])), loc),
                self.thread_loop([Store(acc, at, as_expr(combined), loc)], inner),
                Store(out.buffer, out.indices, Load(acc, at), loc)]

    def named_call(self, node, name: str) -> bool:
        """`T.<name>(...)` by its attribute name (TVM names with no value of their own here)."""
        return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
            and node.func.attr == name

    # --------------------------------------------------------------------------- statements

    def threads_of(self, node) -> set:
        names = set(self.simt.names)
        return {x.name for x in walk(node) if isinstance(x, Var) and x.name in names}

    def thread_maps(self, items, s, pred=None) -> list:
        """The statements `items` (traced at statement `s`) with their per-thread element
        assignments as maps over the threads, under the per-thread predicate `pred`."""
        out = []
        for x in items:
            if isinstance(x, Store):
                out.append(self.map_store(x, s, pred))
            elif isinstance(x, For) and x.kind == "parallel":
                out.append(self.widened_map(x, pred))
            elif isinstance(x, For) and x.vars and x.vars[0] in self.simt.serial:
                # a per-thread atomic
                out.append(self.predicated_atomic(x, pred, s))
            elif isinstance(x, For):
                if any(self.threads_of(e) for e in x.extents):
                    raise self.error(s, "a loop whose trip count depends on the thread index "
                                        "has no lockstep meaning; loop to the largest count and "
                                        "guard the body with `if`")
                self.check_predicate(pred, x, s)
                out.append(For(x.vars, x.extents, x.kind, tuple(self.thread_maps(x.body, s, pred)),
                               x.num_stages, x.loc))
            elif isinstance(x, If) and self.threads_of(x.cond):
                cond = x.cond
                if self.reads_written(cond, x):  # evaluated once, before its branches
                    cond, snap = self.condition_snapshot(cond, x)
                    out.append(self.map_store(snap, s, pred))
                out += self.thread_maps(x.then_body, s, _and(pred, cond))
                out += self.thread_maps(x.else_body, s, _and(pred, Call("not", (cond,))))
            elif isinstance(x, If):
                self.check_predicate(pred, x, s)
                out.append(If(x.cond, tuple(self.thread_maps(x.then_body, s, pred)),
                              tuple(self.thread_maps(x.else_body, s, pred)), x.loc))
            elif isinstance(x, Alloc):
                out.append(x)
            else:
                if pred is not None:
                    raise self.error(s, "a tile operation under a per-thread condition (an `if` "
                                        "on the thread index) has no lockstep meaning; run it "
                                        "for the whole block, outside the `if`")
                if any(self.threads_of(n) for n in walk_own(x)):
                    raise self.error(s, "a tile operation whose region depends on the thread "
                                        "index: write the threads' work as element assignments "
                                        "(a map over the threads) or one tile operation for "
                                        "the block")
                out.append(x)
        return out

    def map_store(self, st: Store, s, pred):
        dims = self.threads_of(st) | (self.threads_of(pred) if pred is not None else set())
        if not dims:
            return st
        if st.buffer.scope == "var":  # traced again with the scalar one per thread
            e = self.error(s, f"'{st.buffer.name}' is one scalar of the block, and this "
                              "per-thread assignment writes it as each thread's own")
            raise ThreadScalar(st.buffer.name, e.message, e.loc, e.source_line)
        if not dims <= {n for i in st.indices for n in self.threads_of(i)}:
            # several threads write one element (`if hit: s[0] = tx`): in thread order
            return self.predicated_atomic(self.thread_loop([st], s), pred, s)
        names = tuple(n for n in self.simt.names if n in dims)
        body = st if pred is None else If(pred, (st,), (), st.loc)
        return For(names, self.thread_extents(names), "parallel", (body,), 0, st.loc)

    def widened_map(self, loop: For, pred):
        dims = self.threads_of(loop) | (self.threads_of(pred) if pred is not None else set())
        names = tuple(n for n in self.simt.names if n in dims and n not in loop.vars)
        body = loop.body if pred is None else (If(pred, loop.body, (), loop.loc),)
        if not names and pred is None:
            return loop
        return For(names + loop.vars, self.thread_extents(names) + loop.extents, "parallel",
                   body, loop.num_stages, loop.loc)

    def predicated_atomic(self, loop: For, pred, s):
        """A per-thread atomic loop (thread_loop) under a per-thread predicate: the predicate
        of each thread inside, on the loop variables."""
        if pred is None:
            return loop
        self.check_predicate(pred, loop, s)
        nest = [loop]
        for _ in self.simt.names[1:]:
            nest.append(nest[-1].body[0])
        rename = {n: Var(f.vars[0]) for n, f in zip(self.simt.names, nest)}
        body = (If(transform(pred, lambda x: rename.get(x.name, x) if isinstance(x, Var) else x),
                   nest[-1].body, (), loop.loc),)
        for f in reversed(nest):
            body = (For(f.vars, f.extents, f.kind, body, f.num_stages, f.loc),)
        return body[0]

    def reads_written(self, cond, stmt) -> bool:
        return bool({x.buffer.name for x in walk(cond) if isinstance(x, Load)}
                    & written_names(stmt))

    def condition_snapshot(self, cond, stmt):
        """(a read of `cond` as each thread evaluated it before its `if`, the store keeping
        it): a per-thread condition that reads what its branches write (a per-thread `break`
        flag, `if s[tx] > 0: s[tx] = 0`) is evaluated once per thread, as a GPU thread does,
        not again inside each of its branches' maps:

            if s[tx] > 0:          c[tx, 0] = select(s[tx] > 0, 1, 0)
                s[tx] = 0    ->    if c[tx, 0] != 0: s[tx] = 0
                Y[tx] = s[tx]      if c[tx, 0] != 0: Y[tx] = s[tx]
        """
        buf = Buffer(self.fresh_buffer_name("cond"), self.simt.extents + (1,), "int32",
                     "fragment")
        self.simt.per_thread.add(buf.name)
        self.hoisted_allocs[buf.name] = Alloc(buf, None, stmt.loc)
        idx = self.scalar_index(buf)
        snap = Store(buf, idx, Call("select", (cond, as_expr(1), as_expr(0))), stmt.loc)
        return binop("!=", Load(buf, idx), 0), snap

    def check_predicate(self, pred, stmt, s) -> None:
        """A per-thread condition moved into its branches' statements must not read what
        they write (it is evaluated again at each of them)."""
        if pred is None:
            return
        read = {x.buffer.name for x in walk(pred) if isinstance(x, Load)}
        hit = read & written_names(stmt)
        if hit:
            raise self.error(s, f"this per-thread condition reads '{sorted(hit)[0]}', which its "
                                "branch writes; copy the value into a per-thread local "
                                "(T.alloc_local) before the `if`")

    def thread_extents(self, names) -> tuple:
        ext = dict(zip(self.simt.names, self.simt.extents))
        return tuple(as_expr(ext[n]) for n in names)


def _and(pred, cond):
    return cond if pred is None else binop("and", pred, cond)

