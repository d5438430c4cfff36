"""The llvm target's copy rewrites: staging copies a CPU does not need, removed.

On the NPU every transfer has one pipe, so the lowering stages data through intermediate
buffers (GM -> UB -> UB for a converting copy, workspace -> L1 -> L0A/L0B for a gemm operand).
A CPU reads any buffer directly: these passes drop the copies whose only purpose was the pipe.
Both are pure functions of the lowered IR and keep every value a later statement reads.

`fuse_copy_chains`: `copy(S, X); copy(X, Y)` (only sync instructions between them, X a whole
on-chip staging buffer used nowhere else, the two conversions composing into one) becomes
`copy(S, Y)`:

    x_ub = alloc_ub((32, 64), "float32")          x_ub = alloc_ub((32, 64), "float32")
    y_ub = alloc_ub((32, 64), "float16")          y_ub = alloc_ub((32, 64), "float16")
    copy(A[..], x_ub)                      ->     copy(A[..], y_ub)
    pipe_barrier("V")                             pipe_barrier("V")
    copy(x_ub, y_ub)

`forward_copies`: a buffer Y whose every write is a whole copy from the same buffer X (both
block-wide: workspace or the cube's L1/L0 buffers, same shape, dtype and storage) and whose every
read follows such a copy in the same statement list with X unchanged in between is read from X
instead; the copies and Y's allocation go:

    B_l1 = alloc_L1((64, 32), "float32")          B_l1 = alloc_L1((64, 32), "float32")
    B_l0b = alloc_L0B((64, 32), "float32")        copy(B[..], B_l1)
    copy(B[..], B_l1)                      ->     gemm(A_l0a, B_l1, C_l0c)
    copy(B_l1, B_l0b)
    gemm(A_l0a, B_l0b, C_l0c)

Neither output is synchronised for the NPU any more; the llvm target runs it in program order,
or as coroutines switching core at cross-core waits: no read is forwarded across a wait while
another statement list (another core) may write the source.
"""
from __future__ import annotations

import heapq
from bisect import bisect_right
from dataclasses import replace

from ..ir.analysis import (
    BLOCK_SCOPES, GM_SCOPES, SYNC_OPS, WIDENABLE_DTYPES, buffer_refs, written_names,
)
from ..ir.dtypes import FLOAT_DTYPES, exact_in
from ..ir.nodes import (
    Alloc, Buffer, Copy, Kernel, Load, Region, Store, WaitCrossFlag, body_fields, transform,
    walk_own, walk_statements,
)

# block-wide buffers: one instance per block, shared by its cores (kernel parameters aside)
_PER_BLOCK = tuple(s for s in BLOCK_SCOPES if s != "global")


def _composes(s_dtype: str, x_dtype: str, y_dtype: str) -> bool:
    """copy S -> X -> Y gives what copy S -> Y gives: the first conversion is exact, or the
    second is the identity."""
    if s_dtype == x_dtype or x_dtype == y_dtype:
        return True
    return s_dtype in FLOAT_DTYPES and x_dtype in FLOAT_DTYPES and exact_in(s_dtype, x_dtype)


def _rebuild(stmts, fn):
    """Statements with `fn(list) -> list` applied to every statement list, innermost first."""
    out = []
    for s in stmts:
        fields = {f: tuple(_rebuild(getattr(s, f), fn)) for f in body_fields(s)}
        out.append(replace(s, **fields) if fields else s)
    return fn(out)


def _next_work(stmts, i) -> int:
    j = i + 1
    while j < len(stmts) and isinstance(stmts[j], SYNC_OPS):
        j += 1
    return j


def fuse_copy_chains(kernel: Kernel) -> Kernel:
    """`copy(S, X); copy(X, Y)` -> `copy(S, Y)` (module docstring)."""
    refs = buffer_refs(kernel.body)
    params = {p.name for p in kernel.params}

    def pairs(stmts):
        out = []
        for i, s in enumerate(stmts):
            if not isinstance(s, Copy) or not s.dst.is_full or s.atomic or s.transpose:
                continue
            x = s.dst.buffer
            if x.name in params or "L0C" in (x.scope, s.src.buffer.scope):
                continue
            j = _next_work(stmts, i)
            if j == len(stmts):
                continue
            t = stmts[j]
            if (isinstance(t, Copy) and t.src.is_full and t.src.buffer == x and not t.transpose
                    and not t.atomic and t.dst.buffer.name != x.name and t.src.buffer.name != s.src.buffer.name
                    and _composes(s.src.buffer.dtype, x.dtype, t.dst.buffer.dtype)):
                out.append((i, j, x.name))
        return out

    found: dict = {}

    def scan(stmts):
        for _, _, name in pairs(stmts):
            found[name] = found.get(name, 0) + 1
        for s in stmts:
            for f in body_fields(s):
                scan(getattr(s, f))

    scan(kernel.body)
    ok = {n for n, c in found.items() if refs.get(n) == 2 * c}
    if not ok:
        return kernel

    def rewrite(stmts):
        drop = set()
        for i, j, name in pairs(stmts):
            if name in ok and i not in drop:
                stmts[i] = Copy(stmts[i].src, stmts[j].dst, stmts[i].loc)
                drop.add(j)
        return [s for k, s in enumerate(stmts) if k not in drop]

    body = _rebuild(kernel.body, rewrite)
    left = buffer_refs(body)
    unused = {n for n in ok if not left.get(n)}
    return replace(kernel, body=tuple(_rebuild(body, lambda stmts: [
        s for s in stmts if not (isinstance(s, Alloc) and s.buffer.name in unused)])))


def _same_storage(x: Buffer, y: Buffer) -> bool:
    """X and Y are stored alike on every host (on chip, the llvm target may widen 16- and 8-bit
    floats, widen_storage; in GM and workspace it never does)."""
    return x.dtype not in WIDENABLE_DTYPES or (x.scope in GM_SCOPES) == (y.scope in GM_SCOPES)


def _whole_copy(s) -> bool:
    return (isinstance(s, Copy) and s.src.is_full and s.dst.is_full and not s.transpose
            and not s.atomic)


def _block_copy(s) -> bool:
    """A copy between two block-wide buffers of one shape and dtype: what every forwarded
    buffer's writers are, before or after the buffers they read were forwarded."""
    if not isinstance(s, Copy):
        return False
    x, y = s.src.buffer, s.dst.buffer
    return (x.scope in _PER_BLOCK and y.scope in _PER_BLOCK and x.shape == y.shape
            and x.dtype == y.dtype and x.name != y.name)


class _DefUse:
    """Def/use maps of a kernel body, built in one walk, kept up to date while buffers are
    forwarded (so finding the next one never walks the kernel again).

    Statement lists are numbered in pre-order (k); a statement is (k, p), p its index in list k.
    Per statement (its nested statements included): how many regions, loads and stores name each
    buffer (`refs`), the buffers it writes (`writes`), whether it holds a cross-core wait. Per
    buffer: its leaf writers (k, p) in program order, and per list the sorted positions that
    write it and that name it. Forwarding Y to X drops Y's copies (their counts leave every
    enclosing statement) and merges what names Y into X, as the rewrite does."""

    def __init__(self, body):
        self.lists, self.parent, self.refs, self.writes, self.waits = [], [], [], [], []
        self.writers: dict = {}         # name -> [(k, p)] of leaf writers, program order
        self.values: dict = {}          # name -> Buffer (None: two different buffers)
        self.alias: dict = {}           # forwarded name -> the name it reads
        self.dropped: set = set()       # (k, p) of the copies dropped
        self._visit(body, None)
        self.wpos: dict = {}            # name -> {k: sorted positions writing it}
        self.rpos: dict = {}            # name -> {k: sorted positions naming it}
        for k, (refs, writes) in enumerate(zip(self.refs, self.writes)):
            for p, (r, w) in enumerate(zip(refs, writes)):
                for name in r:
                    self.rpos.setdefault(name, {}).setdefault(k, []).append(p)
                for name in w:
                    self.wpos.setdefault(name, {}).setdefault(k, []).append(p)
        self.total: dict = {}
        for r in self.refs[0]:
            for name, c in r.items():
                self.total[name] = self.total.get(name, 0) + c

    def _buffer(self, b: Buffer) -> None:
        old = self.values.setdefault(b.name, b)
        if old is not None and old != b:
            self.values[b.name] = None

    def _visit(self, stmts, parent) -> int:
        k = len(self.lists)
        self.lists.append(stmts)
        self.parent.append(parent)
        refs, writes, waits = [], [], [0]
        self.refs.append(refs)
        self.writes.append(writes)
        self.waits.append(waits)  # prefix counts of statements holding a cross-core wait
        for p, s in enumerate(stmts):
            r: dict = {}
            for n in walk_own(s):
                if isinstance(n, (Region, Load, Store)):
                    r[n.buffer.name] = r.get(n.buffer.name, 0) + 1
                    self._buffer(n.buffer)
                elif isinstance(n, Alloc):
                    self._buffer(n.buffer)
            fields = body_fields(s)
            if fields:
                w, wait = set(), False
                for f in fields:
                    kk = self._visit(getattr(s, f), (k, p))
                    for cr in self.refs[kk]:
                        for name, c in cr.items():
                            r[name] = r.get(name, 0) + c
                    for cw in self.writes[kk]:
                        w |= cw
                    wait = wait or self.waits[kk][-1] > 0
            else:
                w = written_names(s)
                wait = isinstance(s, WaitCrossFlag)
                for name in w:
                    self.writers.setdefault(name, []).append((k, p))
            refs.append(r)
            writes.append(w)
            waits.append(waits[-1] + wait)
        return k

    def name(self, name: str) -> str:
        """The buffer a name is read from now (forwarded names followed)."""
        while name in self.alias:
            name = self.alias[name]
        return name

    def source(self, y: str):
        """The name the first writer of Y copies from, or None."""
        ws = self.writers.get(y)
        if not ws:
            return None
        k, p = ws[0]
        w0 = self.lists[k][p]
        return self.name(w0.src.buffer.name) if isinstance(w0, Copy) else None

    def forwardable(self, y: str) -> bool:
        """Is Y a buffer `forward_copies` reads from its source now (module docstring)?"""
        xname = self.source(y)
        if xname is None:
            return False
        ws = self.writers[y]
        x, yb = self.values.get(xname), self.values.get(y)
        if (x is None or yb is None or x.scope not in _PER_BLOCK or yb.scope not in _PER_BLOCK
                or xname == y or x.shape != yb.shape or x.dtype != yb.dtype
                or not _same_storage(x, yb)
                or not all(_whole_copy(s) and self.name(s.src.buffer.name) == xname
                           for s in (self.lists[k][p] for k, p in ws))):
            return False
        seen, ok = 0, True
        wpos, rpos, xpos = self.wpos.get(y, {}), self.rpos.get(y, {}), self.wpos.get(xname, {})
        xlists = {k for k, _ in self.writers.get(xname, ())}
        for k, i in ws:
            # the reads after the copy, up to the next statement writing Y
            wl = wpos.get(k, ())
            a = bisect_right(wl, i)
            stop = wl[a] if a < len(wl) else len(self.lists[k])
            rl, refs = rpos.get(k, ()), self.refs[k]
            last = -1
            for j in range(bisect_right(rl, i), len(rl)):
                if rl[j] >= stop:
                    break
                seen += refs[rl[j]][y]
                last = rl[j]
            if last < 0:
                continue
            xl = xpos.get(k, ())
            a = bisect_right(xl, i)
            if a < len(xl) and xl[a] <= last:  # X written before a read of Y
                ok = False
            # a block whose cores run as coroutines switches core at a cross-core wait:
            # another core may write X there (Y holds the copy taken before it)
            waits = self.waits[k]
            if xlists - {k} and waits[last + 1] > waits[i + 1]:
                ok = False
        return ok and seen + len(ws) == self.total.get(y, 0)

    def forward(self, y: str) -> set:
        """Drop Y's copies and read its source X wherever Y was named; the names whose maps
        changed."""
        xname = self.source(y)
        changed = {y, xname}
        for k, p in self.writers.pop(y):
            self.dropped.add((k, p))
            for name, c in list(self.refs[k][p].items()):
                changed.add(name)
                self.total[name] -= c
                kk, pp = k, p
                while True:  # the copy and every statement enclosing it
                    r = self.refs[kk][pp]
                    r[name] -= c
                    if not r[name]:
                        del r[name]
                        self.rpos[name][kk].remove(pp)
                    if self.parent[kk] is None:
                        break
                    kk, pp = self.parent[kk]
        for k, pl in self.wpos.pop(y, {}).items():  # Y's writers were the copies
            for p in pl:
                self.writes[k][p].discard(y)
        xr = self.rpos.setdefault(xname, {})
        for k, pl in self.rpos.pop(y, {}).items():
            for p in pl:
                r = self.refs[k][p]
                r[xname] = r.get(xname, 0) + r.pop(y)
            xr[k] = sorted(set(xr.get(k, ())) | set(pl))
        self.total[xname] = self.total.get(xname, 0) + self.total.pop(y, 0)
        self.alias[y] = xname
        return changed


def forward_copies(kernel: Kernel) -> Kernel:
    """Read the source of whole-buffer copies between block-wide buffers in place, buffer by
    buffer (the first forwardable buffer in program order of its first write, again after each
    one, until none is left), from def/use maps built once (module docstring)."""
    if not any(_block_copy(s) for s in walk_statements(kernel.body)):
        return kernel  # nothing to forward: no need for the maps
    du = _DefUse(kernel.body)
    order = {name: i for i, name in enumerate(du.writers)}
    by_source: dict = {}
    for y in du.writers:
        by_source.setdefault(du.source(y), set()).add(y)
    ok = {y for y in du.writers if du.forwardable(y)}
    heap = [order[y] for y in ok]
    heapq.heapify(heap)
    names = list(du.writers)
    forwarded = []
    while heap:
        y = names[heapq.heappop(heap)]
        if y not in ok:
            continue
        xname = du.source(y)
        changed = du.forward(y)
        forwarded.append(y)
        ok.discard(y)
        by_source.setdefault(xname, set()).update(by_source.pop(y, ()))
        by_source[xname].discard(y)
        again = set().union(*(by_source.get(n, ()) for n in changed))
        again |= {n for n in changed if n in du.writers}
        for z in again:
            if z in du.writers and du.forwardable(z):
                if z not in ok:
                    ok.add(z)
                    heapq.heappush(heap, order[z])
            else:
                ok.discard(z)
    if not forwarded:
        return kernel
    gone = set(forwarded)
    lists = iter(range(len(du.lists)))

    def rebuild(stmts):  # the lists numbered as _DefUse numbered them
        k = next(lists)
        out = []
        for p, s in enumerate(stmts):
            fields = {f: tuple(rebuild(getattr(s, f))) for f in body_fields(s)}
            if (k, p) in du.dropped or (isinstance(s, Alloc) and s.buffer.name in gone):
                continue
            out.append(replace(s, **fields) if fields else s)
        return out

    to = {y: du.values[du.name(y)] for y in gone}
    kernel = replace(kernel, body=tuple(rebuild(kernel.body)))
    return transform(kernel, lambda n: to.get(n.name, n) if isinstance(n, Buffer) else n)
