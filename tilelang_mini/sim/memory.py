"""The memory hierarchy of the estimate: an L2 shared by all cores in front of the HBM.

The pipe model (`simulator.py`) charges each core's transfers at its own MTE/FIX rates; nothing
there knows that all cores share one L2 and one HBM. This module adds the two chip-wide roofs
(docs/performance_model.md):

* L2 traffic: every byte a transfer instruction moves between GM and a core crosses the L2, so a
  launch takes at least `traffic bytes / L2 bandwidth`.
* HBM traffic: the bytes that miss in the L2. Each GM transfer statement of a block touches a
  *footprint*: the bounding box of its regions over the loops around it (`site_boxes`), exact for
  the affine tile walks of GEMM-like kernels. Blocks run in waves (block b in wave b // cores);
  the footprints of a wave are fetched once (blocks of a wave share what they read through the
  L2) and kept in an LRU of the chip's L2 capacity across waves. A footprint that is not
  resident costs its bytes at the HBM, capped by the bytes the block's instructions actually
  move for that buffer; an output footprint is written back once. Workspace buffers (on-chip
  hand-offs through GM) cost HBM bytes only when read after eviction.
* A launch takes at least `max(HBM bytes, every argument once) / HBM bandwidth`.

Before -> after on a 1024^3 bf16 GEMM on ascend950: 6.0 us (360 TFLOP/s, 57 FLOP per moved byte,
above the 4 TB/s roof of those bytes) -> at least the 37.7 MB of GM traffic at the L2 bandwidth.
"""
from __future__ import annotations

import itertools
from collections import OrderedDict, defaultdict
from dataclasses import dataclass

import numpy as np

from ..ir import dtypes
from ..ir.nodes import BinOp, Copy, For, If, Load, Scope, Var, walk

GM_SCOPES = ("global", "workspace")


@dataclass(frozen=True)
class Site:
    """A GM transfer statement with the loops and conditions around it in its core program."""

    stmt: Copy
    region: object            # the GM side of the copy
    write: bool
    core: str                 # "C" or "V"
    loops: tuple              # enclosing non-parallel For statements, outermost first
    conds: tuple              # (If, taken branch is then) around it


@dataclass
class MemoryTraffic:
    hbm_read: int = 0         # bytes read from HBM (L2 misses)
    hbm_write: int = 0        # bytes written back to HBM
    l2_bytes: int = 0         # bytes moved between the cores and the L2

    @property
    def hbm_bytes(self) -> int:
        return self.hbm_read + self.hbm_write


def gm_sites(kernel) -> list:
    """Every GM <-> on-chip copy of the kernel body, with its loop nest and conditions."""
    out = []

    def visit(body, core, loops, conds):
        for s in body:
            if isinstance(s, Scope):
                visit(s.body, s.core, loops, conds)
            elif isinstance(s, For) and s.kind != "parallel":
                visit(s.body, core, loops + (s,), conds)
            elif isinstance(s, If):
                visit(s.then_body, core, loops, conds + ((s, True),))
                visit(s.else_body, core, loops, conds + ((s, False),))
            elif isinstance(s, Copy) and core is not None:
                src, dst = s.src.buffer.scope in GM_SCOPES, s.dst.buffer.scope in GM_SCOPES
                if src != dst:
                    r = s.src if src else s.dst
                    out.append(Site(s, r, dst, core, loops, conds))

    visit(kernel.body, None, (), ())
    return out


def _names(e) -> set:
    return {n.name for n in walk(e) if isinstance(n, Var)}


def _monotone(e, loop_vars: set) -> bool:
    """Is `e` monotone in each loop variable on a box (so its extremes are at the corners)?
    `%` of a loop variable and data reads are not."""
    for n in walk(e):
        if isinstance(n, Load):
            return False
        if isinstance(n, BinOp) and n.op == "%" and _names(n.a) & loop_vars:
            return False
    return True


class _Footprints:
    """Per block: the bounding box of each site's regions (module docstring). All blocks are
    evaluated at once (`cid` an array of block ids) when the expressions allow it."""

    def __init__(self, kernel, bufs, expr_fn, env_type):
        self.kernel = kernel
        self.sites = gm_sites(kernel)
        self.bufs = bufs
        self.fn = expr_fn
        self.Env = env_type
        self.cid, self.vid = kernel.grid_vars
        self.info = []
        for site in self.sites:
            loop_vars = {v for f in site.loops for v in f.vars}
            # a condition on loop variables or data: taken (a larger footprint, never smaller)
            conds = tuple((c.cond, then) for c, then in site.conds
                          if not (_names(c.cond) & loop_vars) and _monotone(c.cond, set()))
            exact = tuple(_monotone(x, loop_vars) for x in site.region.start)
            self.info.append((site, conds, exact))

    def all_boxes(self, n: int) -> list:
        """[{(buffer name, is write): box}] of blocks 0..n-1."""
        try:
            with np.errstate(all="ignore"):
                return self._all_vector(n)
        except Exception:  # noqa: BLE001 - expressions NumPy cannot evaluate for all blocks
            return [self.boxes(b) for b in range(n)]

    def _vals(self, e, vars, n):
        v = np.asarray(self.fn(e)(self.Env(vars, self.bufs)))
        if v.ndim == 0:
            v = np.broadcast_to(v, (n,))
        if v.shape != (n,):
            raise ValueError("not one value per block")
        return v

    def _all_vector(self, n: int) -> list:
        blocks = np.arange(n, dtype=np.int64)
        hull: dict = {}
        for site, conds, exact in self.info:
            r = site.region
            shape = r.buffer.shape
            for vid in ((0, 1) if site.core == "V" else (0,)):
                base = {self.cid: blocks, self.vid: vid}
                valid = np.ones(n, bool)
                for cond, then in conds:
                    valid &= self._vals(cond, base, n).astype(bool) == then
                lo = [np.full(n, np.iinfo(np.int64).max) for _ in shape]
                hi = [np.full(n, np.iinfo(np.int64).min) for _ in shape]
                seen = np.zeros(n, bool)
                for vars, ok in self._corners_vec(site.loops, dict(base), np.ones(n, bool), n):
                    seen |= ok
                    for d, (st, e, size) in enumerate(zip(r.start, r.extent, shape)):
                        if exact[d]:
                            a = self._vals(st, vars, n).astype(np.int64)
                            b = a + e
                        else:
                            a, b = 0, size
                        lo[d] = np.where(ok, np.minimum(lo[d], a), lo[d])
                        hi[d] = np.where(ok, np.maximum(hi[d], b), hi[d])
                valid &= seen
                for d, size in enumerate(shape):
                    lo[d] = np.maximum(lo[d], 0)
                    hi[d] = np.minimum(hi[d], size)
                    valid &= hi[d] > lo[d]
                key = (r.buffer.name, site.write)
                old = hull.get(key)
                if old is not None:
                    ovalid, olo, ohi = old
                    lo = [np.where(ovalid, np.where(valid, np.minimum(x, y), y), x)
                          for x, y in zip(lo, olo)]
                    hi = [np.where(ovalid, np.where(valid, np.maximum(x, y), y), x)
                          for x, y in zip(hi, ohi)]
                    valid = valid | ovalid
                hull[key] = (valid, lo, hi)
        out = [{} for _ in range(n)]
        for key, (valid, lo, hi) in hull.items():
            rows = list(zip(*[c.tolist() for pair in zip(lo, hi) for c in pair]))
            for b in np.nonzero(valid)[0].tolist():
                out[b][key] = rows[b]
        return out

    def _corners_vec(self, loops, vars, ok, n):
        """(vars, blocks for which the corner exists) of the loop nest's corner assignments."""
        if not loops:
            yield vars, ok
            return
        f, rest = loops[0], loops[1:]
        exts = [self._vals(e, vars, n).astype(np.int64) for e in f.extents]
        inner_ok = ok.copy()
        for x in exts:
            inner_ok &= x > 0
        if not inner_ok.any():
            return
        lasts = [np.maximum(x - 1, 0) for x in exts]
        for pick in itertools.product((0, 1), repeat=len(exts)):
            inner = dict(vars)
            for name, p, last in zip(f.vars, pick, lasts):
                inner[name] = last if p else 0
            yield from self._corners_vec(rest, inner, inner_ok, n)

    def boxes(self, block: int) -> dict:
        """{(buffer name, is write): box} of one block: the hull of the footprints of its sites
        on that buffer (a pipelined loop's prologue and steady state read one panel)."""
        out: dict = {}
        for site, conds, exact in self.info:
            for vid in ((0, 1) if site.core == "V" else (0,)):
                box = self._box(site, conds, exact, {self.cid: block, self.vid: vid})
                if box is None:
                    continue
                key = (site.region.buffer.name, site.write)
                old = out.get(key)
                if old is not None:
                    box = tuple(min(a, b) if i % 2 == 0 else max(a, b)
                                for i, (a, b) in enumerate(zip(old, box)))
                out[key] = box
        return out

    def _eval(self, e, vars):
        return int(self.fn(e)(self.Env(vars, self.bufs)))

    def _box(self, site, conds, exact, base):
        for cond, then in conds:
            if bool(self._eval(cond, base)) != then:
                return None
        r = site.region
        shape = r.buffer.shape
        lo = [None] * len(shape)
        hi = [None] * len(shape)
        for vars in self._corners(site.loops, dict(base)):
            for d, (s, e, n) in enumerate(zip(r.start, r.extent, shape)):
                if not exact[d]:
                    a, b = 0, n
                else:
                    a = self._eval(s, vars)
                    b = a + e
                lo[d] = a if lo[d] is None else min(lo[d], a)
                hi[d] = b if hi[d] is None else max(hi[d], b)
        if lo and lo[0] is None:
            return None
        box = []
        for a, b, n in zip(lo, hi, shape):
            a, b = max(a, 0), min(b, n)
            if b <= a:
                return None
            box += (a, b)
        return tuple(box)

    def _corners(self, loops, vars):
        """The corner assignments of the loop nest (first and last iteration of each loop)."""
        if not loops:
            yield vars
            return
        f, rest = loops[0], loops[1:]
        try:
            exts = [self._eval(e, vars) for e in f.extents]
        except Exception:  # noqa: BLE001 - an extent the walk cannot evaluate: no footprint
            return
        if any(n <= 0 for n in exts):
            return
        for idx in itertools.product(*({0, n - 1} for n in exts)):
            inner = dict(vars)
            inner.update(zip(f.vars, idx))
            yield from self._corners(rest, inner)


def _box_bytes(buf, box) -> int:
    n = dtypes.itemsize(buf.dtype)
    for i in range(0, len(box), 2):
        n *= box[i + 1] - box[i]
    return n


def memory_traffic(kernel, bufs, class_of: dict, buffer_traffic: dict, ncores: int,
                   l2_capacity: int, expr_fn, env_type) -> MemoryTraffic:
    """HBM and L2 bytes of the launch (module docstring). `class_of`: block -> representative;
    `buffer_traffic`: representative -> {buffer name: (read bytes, write bytes)} its
    instructions move."""
    fp = _Footprints(kernel, bufs, expr_fn, env_type)
    buffers = {s.region.buffer.name: s.region.buffer for s in fp.sites}
    params = {p.name for p in kernel.params}
    out = MemoryTraffic()
    lru: OrderedDict = OrderedDict()
    resident = 0
    written = set()
    n = kernel.grid[0]
    boxes = fp.all_boxes(n)
    sizes: dict = {}  # (buffer name, box) -> bytes

    def nbytes(key):
        size = sizes.get(key)
        if size is None:
            size = sizes[key] = _box_bytes(buffers[key[0]], key[1])
        return size

    for w0 in range(0, n, max(1, ncores)):
        wave_reads: dict = {}
        wave_writes: dict = {}
        cap_r: dict = defaultdict(int)
        cap_w: dict = defaultdict(int)
        wave = range(w0, min(n, w0 + ncores))
        count: dict = defaultdict(int)  # representative -> blocks of the wave in its class
        for b in wave:
            count[class_of[b]] += 1
        for rep, k in count.items():  # (a class's blocks move the same bytes)
            for name, (rd, wr) in buffer_traffic.get(rep, {}).items():
                out.l2_bytes += (rd + wr) * k
                cap_r[name] += rd * k
                cap_w[name] += wr * k
        for b in wave:
            for (name, write), box in boxes[b].items():
                (wave_writes if write else wave_reads)[(name, box)] = True
        miss_r: dict = defaultdict(int)
        for key in wave_reads:
            if key in lru:
                lru.move_to_end(key)
                continue
            miss_r[key[0]] += nbytes(key)
        miss_w: dict = defaultdict(int)
        for key in wave_writes:
            if key[0] in params and key not in written:
                written.add(key)
                miss_w[key[0]] += nbytes(key)
        # never more than the wave's instructions move for the buffer
        out.hbm_read += sum(min(v, cap_r[name]) for name, v in miss_r.items())
        out.hbm_write += sum(min(v, cap_w[name]) for name, v in miss_w.items())
        for key in itertools.chain(wave_reads, wave_writes):
            if key in lru:
                lru.move_to_end(key)
                continue
            size = lru[key] = nbytes(key)
            resident += size
        while resident > l2_capacity and lru:
            _, size = lru.popitem(last=False)
            resident -= size
    return out
