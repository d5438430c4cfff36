"""The batched run: many grid blocks of a block-independent kernel as one array computation.

The specification is the plain run (run.py): block after block, each with fresh on-chip buffers.
When no block can see what another block does, running instruction by instruction for a whole
group of blocks at once gives the same values, and costs one Python dispatch per instruction
per group instead of per block. Before -> after, RMSNorm 512x512 in 64 blocks:

    for cid in range(64): for vid in (0, 1): copy, map, reduce, map, map, copy   (768 calls)
    for vid in (0, 1): copy, map, reduce, map, map, copy over arrays [64, ...]    (12 calls)

Representation (groups.py): a group of n blocks runs in one `BEnv` per core (block level, C,
V0, V1, as in the plain run: the two vector cores still run one after the other, so their order
within a block is the plain one). The grid variables are int64 arrays of the n block ids; every
on-chip and workspace buffer has a leading axis of n; kernel parameters (GM) are the caller's
arrays. Serial loop counters stay Python ints: loop extents and if conditions must be the same
for every block of the group. The instructions are in batched_ops.py.

When it applies (`why_not_batched` is None for the kernel):
- no parameter is both read and written (so no block reads what another writes, in any order
  of the blocks) unless every access to it is at the block's own index (`block_private`: a
  per-block GM workspace), and no parameter written shares memory with another parameter the
  kernel accesses (checked per call; a parameter it never names, such as the tensor of which a
  written `T.Tensor(shape, dtype, out.data)` is a view, cannot see the order of the blocks);
- no atomic copy, no block-scaled gemm, no sort of a parameter (those run plainly).
During the run, anything the batched form does not reproduce exactly raises `Bail`: control flow
that differs between the blocks of a group, an access out of bounds (the plain run reports it
at its block), a construct it lacks. The group's blocks then run again block by block, in order
(each block's batched part was a prefix of its own plain instructions, so the plain run rewrites
every element it wrote; the group's elements of block-private parameters, which a block may
read before writing, are put back first), and later groups are smaller. At the end, an element
of a parameter written twice (`Marks`: by two blocks, whose order the batched run may have
swapped) sends the whole launch to the plain run, which rewrites every element written.

The ordered run of kernels whose cores wait on each other (sim/ordered.py) runs groups the same
way: the core programs of coroutines.py lowered with `BATCHED`, one coroutine per core over
the group's BEnvs, switching where a single block's would (`lower_batched_programs`).
"""
from __future__ import annotations


import numpy as np

from tilelang_mini.ir import dtypes
from tilelang_mini.ir.analysis import BLOCK_SCOPES, core_instructions, reads, writes
from tilelang_mini.ir.nodes import (
    Alloc, Buffer, Const, Copy, For, Gemm, If, Kernel, Load, Region, Scope, Sort, Store, Var,
    body_fields, walk, walk_own,
)

from .batched_ops import INSTR, Ctx, store
from .coroutines import Lowering, lower_core_program
from .exprs import _uses, compile_expr
from .groups import Bail, BBuffers, BEnv, Marks, Pool, uniform
from .run import lane_aranges, lower_scope, run_serial, sequence, statement_lowering

GROUP_BYTES = 1 << 20     # the largest buffer of a group of blocks (stays in cache)


# ------------------------------------------------------------------------- when it applies


def why_not_batched(kernel: Kernel) -> str | None:
    """Why `kernel` must run block by block (None: it may run batched)."""
    params = {p.name for p in kernel.params}
    read, written = set(), set()
    for s, _ in core_instructions(kernel.body):
        if isinstance(s, Copy) and s.atomic:
            return "an atomic copy"
        if isinstance(s, Gemm) and s.scale_gran > 0:
            return "a block-scaled gemm"
        if isinstance(s, Sort) and {s.values.buffer.name, s.indices.buffer.name} & params:
            return "a sort of a parameter"
        read |= {b.name for b in reads(s)}
        written |= {b.name for b in writes(s)}
    for s in kernel.body:
        read |= {n.buffer.name for n in walk(s) if isinstance(n, Load)}
    both = sorted(read & written & params - set(block_private(kernel)))
    if both:
        return f"parameter {both[0]} is read and written"
    return None


def block_private(kernel: Kernel) -> dict:
    """{parameter: dimension} of the parameters each block touches only at its own index:
    every access (a region, a load, a store) indexes that dimension by the block id itself
    (`ws[cid, ...]`, extent 1), so no two blocks share an element (e.g. a per-block GM
    workspace both cores read and write). Such a parameter may be read and written in a
    batched run."""
    grid = kernel.grid_vars[:1] if kernel.is_npu else kernel.grid_vars
    nodes = [n for s in kernel.body for n in walk(s)]
    if len(grid) != 1 or any(isinstance(n, For) and grid[0] in n.vars for n in nodes):
        return {}
    bid = grid[0]

    def own_dims(n) -> set:
        if isinstance(n, Region):
            return {d for d, (a, e) in enumerate(zip(n.start, n.extent))
                    if isinstance(a, Var) and a.name == bid and e == 1}
        if isinstance(n, (Load, Store)):
            return {d for d, a in enumerate(n.indices) if isinstance(a, Var) and a.name == bid}
        return set()

    params = {p.name for p in kernel.params}
    dims: dict = {}
    for n in nodes:
        b = getattr(n, "buffer", None)
        if b is not None and b.name in params:
            dims[b.name] = dims.get(b.name, own_dims(n)) & own_dims(n)
    return {name: min(ds) for name, ds in dims.items() if ds}


# ----------------------------------------------------------------------- control flow


def _body(stmts, ctx):
    return sequence([f for f in (_stmt(s, ctx) for s in stmts) if f is not None])


def _leaf(s, ctx):
    if isinstance(s, Store):
        return store(s, ctx.par, ctx.table, ctx.params)
    return INSTR[type(s)](s, ctx)


def _for(s: For, ctx):
    if s.kind == "while":
        return _while(s, ctx)
    ext_fns = [compile_expr(e, (), ctx.table)[0] for e in s.extents]
    names = s.vars
    if s.kind == "parallel":
        ctx.par = tuple(names)
        try:
            body = _body(s.body, ctx)
        finally:
            ctx.par = ()
        nd, cache = len(names), {}
        fixed = (tuple(int(e.value) for e in s.extents)
                 if all(isinstance(e, Const) for e in s.extents) else None)

        shaped = [None]     # (a group's grid, its arrays shaped to broadcast over the lanes)

        def parallel(env):
            exts = fixed or tuple(uniform(f(env)) for f in ext_fns)
            vs, grid = env.vars, env.grid
            for name, a in zip(names, lane_aranges(exts, cache)):
                vs[name] = a
            hit = shaped[0]
            if hit is None or hit[0] is not grid:
                shape = (env.n,) + (1,) * nd
                hit = shaped[0] = (grid, [(k, ids.reshape(shape)) for k, ids in grid.items()])
            vs.update(hit[1])
            if all(exts):
                body(env)
            vs.update(grid)

        return parallel

    outer = ctx.par
    ctx.par = tuple(v for v in outer if v not in names)
    try:
        body = _body(s.body, ctx)
    finally:
        ctx.par = outer

    by_element = any(_uses(e, outer) for e in s.extents)   # the plain run faults there

    def serial(env):
        if by_element:
            raise Bail("a loop extent on a Parallel loop variable")
        run_serial(names, [uniform(f(env)) for f in ext_fns], body, env)

    return serial


def _while(s: For, ctx):
    """`while cond:`, run while the condition holds in every block of the group (blocks whose
    trip counts differ bail out to the plain run)."""
    cond, _ = compile_expr(s.extents[0], ctx.par, ctx.table)
    body = _body(s.body, ctx)
    by_element = _uses(s.extents[0], ctx.par)

    def while_(env):
        if by_element:
            raise Bail("a while condition on a Parallel loop variable")
        while uniform(cond(env)):
            body(env)

    return while_


def _if(s: If, ctx):
    cond, _ = compile_expr(s.cond, ctx.par, ctx.table)
    then_body, else_body = _body(s.then_body, ctx), _body(s.else_body, ctx)
    by_element = _uses(s.cond, ctx.par)

    def if_(env):
        if by_element:
            raise Bail("an if on a Parallel loop variable")
        (then_body if uniform(cond(env)) else else_body)(env)

    return if_


def _scope(s: Scope, ctx):
    return lower_scope(s, ctx, _body)


_stmt = statement_lowering(_for, _if, _scope, _body, _leaf)


# ------------------------------------------------------------------------------ driver


class BatchedKernel:
    """A kernel lowered for the batched run (`lower_batched`)."""

    def __init__(self, kernel: Kernel, body, has_scopes: bool):
        self.kernel, self.body, self.has_scopes = kernel, body, has_scopes
        largest = max((int(np.prod(s.buffer.shape)) * dtypes.to_numpy(s.buffer.dtype).itemsize
                       for st in kernel.body for s in walk(st)
                       if isinstance(s, Alloc) and s.buffer.scope != "global"), default=1)
        self.group = max(1, GROUP_BYTES // max(1, largest))
        self.spare: dict = {}
        self.bailed = None      # why the last run fell back to the plain run
        self.pools: list = []   # the buffers of the last run, for the next
        self.grids: dict = {}   # (first block, end) -> the group's grid (`_grid`)
        self.written = frozenset(b.name for s, _ in core_instructions(kernel.body)
                                 for b in writes(s)) & frozenset(p.name for p in kernel.params)
        # the parameters the kernel reads or writes (a written one may not alias them)
        self.accessed = frozenset(n.buffer.name for st in kernel.body for n in walk(st)
                                  if isinstance(n, (Load, Store, Region))) & frozenset(
                                      p.name for p in kernel.params)
        # written parameters private to each block: {name: the dimension of the block id}
        self.private = {k: d for k, d in block_private(kernel).items() if k in self.written}

    def run(self, bufs: dict, plain_block) -> str:
        """Run every block: in groups, a group that bails again block by block
        (`plain_block(grid values)`, in block order; later groups are smaller). Returns
        "batched", "partly batched", or "plain" when the plain run must run instead (an
        element written twice, a written parameter sharing memory: nothing the plain run does
        not overwrite was written)."""
        for name in self.written:
            if any(bufs[other] is not bufs[name] and np.may_share_memory(bufs[name], bufs[other])
                   for other in self.accessed):
                self.bailed = f"parameter {name} shares memory with another"
                return "plain"
        kernel = self.kernel
        marks = Marks({k: bufs[k] for k in self.written}, self.spare, frozenset(self.private))
        names = kernel.grid_vars[:1] if kernel.is_npu else kernel.grid_vars
        shape = tuple(kernel.grid[:1]) if kernel.is_npu else tuple(kernel.grid)
        fixed = {kernel.grid_vars[1]: 0} if kernel.is_npu else {}
        params = {p.name for p in kernel.params}
        try:
            pool = self.pools.pop()     # taken (atomic): a concurrent run makes its own
        except IndexError:
            pool = Pool()
        lo, total, size, self.bailed = 0, int(np.prod(shape)), self.group, None
        while lo < total:  # the block ids of one group at a time (a grid may be huge)
            grid = self._grid(lo, min(lo + size, total), names, shape)
            n = next(iter(grid.values())).size
            # the group's elements of the private parameters, put back if it bails (a block
            # may read its own before writing them)
            saved = [(bufs[k], sl, bufs[k][sl].copy()) for k, sl in (
                (k, (slice(None),) * d + (slice(lo, lo + n),)) for k, d in self.private.items())]
            try:
                if size == 1:
                    raise Bail("groups of one block run plainly")
                top = self._group(bufs, grid, fixed, n, marks, pool)
                self.body(top)
                pool.release(top.block or (top,), params)
            except Exception as e:  # noqa: BLE001 - Bail, or a fault the plain run reports
                self.bailed = self.bailed or f"{type(e).__name__}: {e}"
                for arr, sl, old in saved:
                    arr[sl] = old
                for k in range(n):
                    plain_block({**{name: int(a[k]) for name, a in grid.items()}, **fixed})
                size = max(1, size // 2)
            lo += n
        if pool.nbytes() <= Pool.KEEP:
            self.pools.append(pool)
        if not marks.clean():
            self.bailed = "an element of a parameter written twice"
            return "plain"
        return "batched" if self.bailed is None else "partly batched"

    def _grid(self, lo, hi, names, shape) -> dict:
        """{grid variable: its int64 array of the block ids lo..hi-1}, the same dict for the
        same group in every run (what a region finds per group, `_grid_region`, it finds once)."""
        grid = self.grids.get((lo, hi))
        if grid is None:
            if len(self.grids) > 1024:
                self.grids.clear()
            ids = np.unravel_index(np.arange(lo, hi, dtype=np.int64), shape)
            grid = self.grids[lo, hi] = {name: a for name, a in zip(names, ids)}
        return grid

    def _group(self, bufs, grid, fixed, n, marks, pool) -> BEnv:
        def env(core=None):
            return BEnv({**grid, **fixed}, BBuffers(bufs, n, pool), n, grid, marks, core)
        top = env()
        if self.has_scopes:
            block = (top, env("C"), env("V"), env("V"))
            for e in block:
                e.block = block
        return top


def _extents(s: For, ctx):
    fns = [compile_expr(e, (), ctx.table)[0] for e in s.extents]
    return lambda env: tuple(uniform(f(env)) for f in fns)


def _cond(e, ctx):
    cond, _ = compile_expr(e, ctx.par, ctx.table)
    return lambda env: uniform(cond(env))


BATCHED = Lowering(_stmt, _extents, _cond)   # a core program's pieces for a group (coroutines)


def lower_batched_programs(kernel: Kernel):
    """({"C": program, "V": program}, pairs, None): the core programs of coroutines.py for a
    group of blocks (each program's env a BEnv; with `pairs` (`vector_pairs`) the V program's
    env holds both vector cores of each block), or (None, False, why the kernel runs block by
    block)."""
    why = why_not_batched(kernel)
    if why is not None:
        return None, False, why
    pairs = vector_pairs(kernel)
    try:
        return {c: lower_core_program(kernel, c, BATCHED, Ctx(kernel, pairs and c == "V"))
                for c in "CV"}, pairs, None
    except Exception as e:  # noqa: BLE001 - a construct the batched form lacks: run plainly
        return None, False, f"{type(e).__name__}: {e}"


def vector_pairs(kernel: Kernel) -> bool:
    """May the two vector cores of each block run as one group member each (block k's V0 and
    V1 at 2k and 2k + 1 of a group of 2n: one coroutine and one dispatch per instruction for
    both)? Yes when no cube instruction writes a vector core's UB (an L0C -> UB copy) and the
    vector program touches no buffer but its UB and the parameters: the halves and the cube
    then see each other only through parameters, which the cross-core flags order. Control
    flow that differs between the halves bails like any other difference in a group."""
    params = {p.name for p in kernel.params}
    if any(isinstance(s, Copy) and s.src.buffer.scope == "L0C" and s.dst.buffer.scope == "UB"
           for s, _ in core_instructions(kernel.body)):
        return False
    return not any(b.scope in BLOCK_SCOPES and b.name not in params
                   for b in _vector_buffers(kernel.body))


def _vector_buffers(stmts):
    """The buffers the vector program's statements access (not their Allocs)."""
    for s in stmts:
        if isinstance(s, Scope) and s.core == "C":
            continue
        if not isinstance(s, Alloc):
            yield from (n.buffer for n in walk_own(s)
                        if isinstance(getattr(n, "buffer", None), Buffer))
        for f in body_fields(s):
            yield from _vector_buffers(getattr(s, f))


def lower_batched(kernel: Kernel, has_scopes: bool):
    """(BatchedKernel, None) or (None, why the kernel runs block by block)."""
    why = why_not_batched(kernel)
    if why is not None:
        return None, why
    ctx = Ctx(kernel)
    try:
        body = _body(kernel.body, ctx)
    except Exception as e:  # noqa: BLE001 - a construct the batched form lacks: run plainly
        return None, f"{type(e).__name__}: {e}"
    return BatchedKernel(kernel, body, has_scopes), None
