"""check_blocks: GM races between different blocks of an expert kernel, at compile time.

Blocks run concurrently and no flag orders them, so two blocks that touch common elements of a
global tensor, one of them writing (not both atomic adds of one kind), race. Every pair of
blocks is compared, not a sample:

1. one walk of the program for all blocks at once: the block index `cid` is the vector of the
   block numbers, loops and ifs whose extent or condition is the same for every block are
   walked once, and where they differ the walk splits the blocks into groups that agree (loops
   cut as check_sync cuts them when the walk is long);
2. each GM access's element box evaluated per block on that vector (a map's indices over its
   whole index space), then all boxes of one tensor swept along the dimension where they are
   thinnest: two boxes of different blocks that overlap, one writing, are a race. Only boxes
   that are exactly the elements touched take part (analysis.exact_boxes): a strided map
   (`Y[2 * i + cid]`) or a store under an if in a map would be a false alarm.

Accesses whose index or guard depends on data are left to `simulate` (no false alarm). Only a
walk or a sweep beyond its budget falls back to comparing a sample of blocks (0, 1, the last,
and k for every `cid // k`, `cid % k` in the indices).

    with Kernel(5, is_npu=True) as (cid, vid):
        copy(x, Y[(cid * 3) % 4 * 8, 0])    # V.MTE3   -> race between blocks 0 and 4 on Y[0:8]
"""
from __future__ import annotations

import numpy as np

from ..errors import CompileError
from ..ir.analysis import exact_boxes, is_map, operands
from ..ir.happens_before import Instr
from ..ir.nodes import BinOp, Const, For, SYNC_OPS, Var, walk

__all__ = ["check_blocks", "partner_blocks"]

WALK_BUDGET = 3000        # instruction visits of a cut walk (each for a group of blocks at once)
PAIR_BUDGET = 4_000_000   # box pairs the sweep compares


def partner_blocks(kernel, cid: str) -> list[int]:
    """The sample compared when the exhaustive check is over budget: block 0, 1, the last, and
    k for every `cid // k`, `cid % k` (the blocks sharing a row or a column of a 2-D split)."""
    n = kernel.grid[0]
    out = {0, 1, n - 1}
    for node in walk(kernel):
        if (isinstance(node, BinOp) and node.op in ("//", "%") and node.a == Var(cid)
                and isinstance(node.b, Const) and type(node.b.value) is int):
            out.add(node.b.value)
    return sorted(k for k in out if 0 <= k < n)


def check_blocks(kernel, tree, verifier) -> None:
    """Raise a located CompileError for two blocks that access common GM elements, one
    writing. `verifier(block)`: a check_sync walker (its compiled expressions and values)."""
    from .check_sync import _Budget
    n = kernel.grid[0]
    if not isinstance(n, int) or n < 2:
        return
    v = verifier(0)
    sample = np.asarray(partner_blocks(kernel, kernel.grid_vars[0]), dtype=np.int64)
    found = None
    for blocks, cap in ((np.arange(n, dtype=np.int64), None), (np.arange(n, dtype=np.int64), 2),
                        (sample, 2)):
        try:
            found = _Walk(v, cap).run(tree, blocks)
            break
        except _Budget:
            continue
    if found is None:
        return
    for name, recs in found.items():
        hit = _sweep(recs)
        if hit == "budget":
            keep = np.isin(recs[0], sample)
            hit = _sweep(tuple(x[keep] for x in recs[:5]) + recs[5:])
        if hit not in (None, "budget"):
            _report(name, recs, *hit)


class _Walk:
    """The GM accesses of every block: buffer name -> (block, lo, hi, kind, statement) arrays."""

    def __init__(self, v, cap):
        self.v, self.cap = v, cap
        self.cid, self.vid = v.cid, v.vid
        self.visits = 0
        self.stmts: list = []          # statement number -> statement
        self.sid: dict = {}            # id(statement) -> its number
        self.kinds: dict = {False: 0, True: 1}   # read 0, write 1, each atomic kind 2, 3, ...
        self.out: dict = {}            # name -> [(blocks, lo, hi, kind, sid)]

    def run(self, tree, blocks):
        for vid, cores in ((0, ("C", "V")), (1, ("V",))):
            self.walk(tree, {self.cid: blocks, self.vid: vid}, blocks, cores, False)
        out = {}
        for name, parts in self.out.items():
            out[name] = tuple(np.concatenate([p[k] for p in parts]) for k in range(5)) + (
                self.stmts,)
        return out

    def walk(self, items, env, blocks, cores, guarded):
        from .check_sync import FULL_UNROLL_BUDGET, _Budget
        from .loop_cuts import trips
        for it in items:
            if isinstance(it, Instr):
                if it.core not in cores:
                    continue
                self.visits += 1
                if self.visits > (WALK_BUDGET if self.cap else FULL_UNROLL_BUDGET):
                    raise _Budget
                if not (guarded or it.probe or isinstance(it.stmt, SYNC_OPS)):
                    self.instr(it.stmt, env, blocks)
                continue
            if not hasattr(it, "bodies"):  # an Alloc
                continue
            s = it.stmt
            if isinstance(s, For) and s.kind == "while":  # state carried by data: its
                self.walk(it.bodies[0], env, blocks, cores, True)  # accesses left to simulate
                continue
            if isinstance(s, For):
                n = self.values(s.extents[0], env, blocks)
                for nv, sub in _groups(n, blocks):
                    env2 = self.narrow(env, blocks, sub)
                    for t in trips(s, nv, self.cap):
                        env3 = dict(env2)
                        env3[s.vars[0]] = t
                        self.walk(it.bodies[0], env3, sub, cores, guarded)
                continue
            c = self.values(s.cond, env, blocks)
            if c is None:  # data-dependent: both branches, their accesses left to simulate
                for body in it.bodies:
                    self.walk(body, env, blocks, cores, True)
                continue
            for cv, sub in _groups(c != 0, blocks):
                self.walk(it.bodies[0 if cv else 1], self.narrow(env, blocks, sub), sub, cores,
                          guarded)

    def narrow(self, env, blocks, sub):
        if len(sub) == len(blocks):
            return env
        env = dict(env)
        env[self.cid] = sub
        return env

    def values(self, e, env, blocks, par=None):
        """`e` per block (an int64 vector over `blocks`, or with `par` (name -> extent) an
        array (blocks, *extents) over a map's index space), or None where it reads data."""
        v = self.v
        if isinstance(e, Const):
            shape = (len(blocks),) + tuple((par or {}).values())
            return np.full(shape, int(e.value), dtype=np.int64)
        scope = dict(env)
        nd = len(par or ())
        scope[self.cid] = blocks.reshape((-1,) + (1,) * nd)
        for d, (name, n) in enumerate((par or {}).items()):
            scope[name] = np.arange(n, dtype=np.int64).reshape(
                (1,) * (d + 1) + (n,) + (1,) * (nd - d - 1))
        shape = (len(blocks),) + tuple((par or {}).values())
        try:
            with np.errstate(all="ignore"):
                r = np.asarray(v.fn(e)(v.Env(scope, {})))
            if r.dtype.kind not in "iub":
                raise TypeError
            return np.broadcast_to(r, shape).astype(np.int64)
        except (v.Fault, KeyError):
            return None  # reads a buffer or a variable unknown here: data
        except (TypeError, ValueError, OverflowError, ZeroDivisionError, IndexError):
            pass  # an operation that takes Python scalars only: block by block
        rows = []
        for b in blocks:
            scope[self.cid] = int(b)
            if par is None:
                x = v.value(e, scope)
                if x is None:
                    return None
                rows.append(np.int64(x))
                continue
            try:
                with np.errstate(all="ignore"):
                    x = np.asarray(v.fn(e)(v.Env(scope, {})))
                if x.dtype.kind not in "iub":
                    return None
                rows.append(np.broadcast_to(x, shape[1:]).astype(np.int64))
            except (v.Fault, TypeError, ValueError, OverflowError, ZeroDivisionError, KeyError,
                    IndexError):
                return None
        return np.stack(rows) if rows else np.zeros(shape, dtype=np.int64)

    def instr(self, s, env, blocks):
        par = None
        for (node, write), exact in zip(operands(s), exact_boxes(s)):
            buf = node.buffer
            if buf.scope != "global" or not exact:
                continue  # a strided or guarded map's box over-approximates: no proof of a race
            if par is None and is_map(s):
                exts = [self.values(x, env, blocks) for x in s.extents]
                if any(x is None or (x != x[0]).any() or x[0] <= 0 for x in exts):
                    return  # a map whose extent reads data or differs between blocks
                par = dict(zip(s.vars, (int(x[0]) for x in exts)))
            box = self.box(node, env, blocks, par if is_map(s) else None)
            if box is None:
                continue
            lo, hi = box
            shape = [n if isinstance(n, int) else np.iinfo(np.int64).max for n in buf.shape]
            lo, hi = np.maximum(lo, 0), np.minimum(hi, np.asarray(shape, dtype=np.int64))
            keep = (hi > lo).all(axis=1)
            if not keep.any():
                continue
            key = write if isinstance(write, tuple) else bool(write)
            kind = self.kinds.setdefault(key, len(self.kinds))
            if id(s) not in self.sid:
                self.sid[id(s)] = len(self.stmts)
                self.stmts.append(s)
            k = int(keep.sum())
            self.out.setdefault(buf.name, []).append(
                (blocks[keep], lo[keep], hi[keep], np.full(k, kind, dtype=np.int64),
                 np.full(k, self.sid[id(s)], dtype=np.int64)))

    def box(self, node, env, blocks, par):
        """(lo, hi): (blocks, rank) element boxes of one operand, or None (data-dependent)."""
        from ..ir.nodes import Region
        los, his = [], []
        if isinstance(node, Region):
            for start, n in zip(node.start, node.extent):
                x = self.values(start, env, blocks)
                if x is None or not isinstance(n, int):
                    return None
                los.append(x)
                his.append(x + n)
        else:  # an element load or store (of a map: over its whole index space)
            for idx in node.indices:
                x = self.values(idx, env, blocks, par)
                if x is None:
                    return None
                if x.ndim > 1:
                    axes = tuple(range(1, x.ndim))
                    los.append(x.min(axis=axes))
                    his.append(x.max(axis=axes) + 1)
                else:
                    los.append(x)
                    his.append(x + 1)
        if not los:
            return None
        return np.stack(los, axis=1), np.stack(his, axis=1)


def _groups(values, blocks):
    """(value, blocks) per distinct value of a per-block vector (None: unknown, one group)."""
    if values is None:
        return [(None, blocks)]
    first = values[0]
    if (values == first).all():
        return [(int(first), blocks)]
    return [(int(u), blocks[values == u]) for u in np.unique(values)]


def _sweep(recs):
    """(i, j): two records of different blocks whose boxes overlap, i writing and the pair not
    two atomic adds of one kind; None without one; "budget" when too many pairs to compare."""
    blk, lo, hi, kind, sid = recs[:5]
    if not (kind != 0).any() or (blk == blk[0]).all():
        return None
    # one record per distinct (block, box, kind, statement): loop trips often repeat a box
    table = np.column_stack([blk, kind, sid, lo, hi])
    _, first = np.unique(table, axis=0, return_index=True)
    first.sort()
    rank = lo.shape[1]
    writes = first[kind[first] != 0]
    best = None
    for d in range(rank):  # the dimension along which the boxes are thinnest
        order = first[np.argsort(lo[first, d], kind="stable")]
        keys = lo[order, d]
        longest = int((hi[first, d] - lo[first, d]).max())
        start = np.searchsorted(keys, lo[writes, d] - longest + 1, "left")
        end = np.searchsorted(keys, hi[writes, d], "left")
        total = int((end - start).sum())
        if best is None or total < best[0]:
            best = (total, order, start, end)
    total, order, start, end = best
    if total > PAIR_BUDGET:
        return "budget"
    counts = end - start
    chunk = 1 << 20
    i = 0
    while i < len(writes):  # candidate pairs in batches of about `chunk`
        cum = np.cumsum(counts[i:])
        j = i + max(1, int(np.searchsorted(cum, chunk, "right")))
        c = counts[i:j]
        w = np.repeat(writes[i:j], c)
        offs = np.arange(int(c.sum())) - np.repeat(np.cumsum(c) - c, c)
        o = order[np.repeat(start[i:j], c) + offs]
        hit = ((blk[w] != blk[o]) & (lo[w] < hi[o]).all(axis=1) & (lo[o] < hi[w]).all(axis=1)
               & ~((kind[w] >= 2) & (kind[w] == kind[o])))
        if hit.any():
            k = int(np.argmax(hit))
            return int(w[k]), int(o[k])
        i = j
    return None


def _report(name, recs, i, j):
    from .check_sync import _where
    blk, lo, hi, kind, sid, stmts = recs[0], recs[1], recs[2], recs[3], recs[4], recs[5]
    if kind[j] != 0 and blk[j] < blk[i]:  # both write: the lower block first
        i, j = j, i
    s0, s1 = stmts[sid[i]], stmts[sid[j]]
    both_lo, both_hi = np.maximum(lo[i], lo[j]), np.minimum(hi[i], hi[j])
    elems = ", ".join(f"{a}:{b}" for a, b in zip(both_lo.tolist(), both_hi.tolist()))
    w0 = "writes" if kind[i] else "reads"
    w1 = "writes" if kind[j] else "reads"
    raise CompileError(
        f"race between blocks on {name}[{elems}]: block {blk[i]} {_where(s0)} {w0} it and "
        f"block {blk[j]} {_where(s1)} {w1} it; blocks run concurrently and nothing orders "
        f"them. Index the global tensor by the block index so that each block has its own "
        f"part, or accumulate with T.atomic_add", s1.loc)
