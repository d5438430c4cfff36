"""Packed B tiles of read-only inputs, packed once per launch and reused by every block.

A copy from a kernel input into a packed GEMM tile (packing.py) gives the same panels wherever
it runs with the same source offset and valid ranges: a prenorm's or skinny GEMM's B tile k is
packed again by every row block, the same bytes each time. When every write of a packed tile is
such a copy from an input the kernel never writes (the runtime refuses outputs that overlap other
arguments), the tile goes through a cache in the worker's scratch arena:

    copy(B[0 +: 32, k * 128 +: 128], B_s)      slot = the tile's position (k); on a tag miss
    gemm(A_s, B_s, C)                          pack into the slot's panels and set its tag; B_s's
                                               pointer word := the slot's panels; gemm reads
                                               B_s there

The cache lives in [arena_bytes, arena_bytes + nbytes) of the scratch (temporaries follow): per
packed tile and copy shape, one entry of panels and one tag row [1, offset, lo0, hi0, lo1, hi1,
...] per tile position of the source (direct-mapped: the slot is the tile's position in the
source, floor(start / extent) per dimension in mixed radix, so tiles at multiples of their
extent never collide; any other start shares a slot and a tag mismatch re-packs), then one
pointer word per cached tile.
Tags are cleared when tlm_kernel starts (a worker's arena outlives a launch and inputs change
between launches) unless block_begin carries RESUME: the runtime sets it on a worker's later
chunks of the same launch, so a worker packs each tile once per launch, not once per chunk (a
2-thread 2048^3 GEMM's 19 guided chunks packed 28 column panels of B for 16, a tail chunk of one
block a whole panel again); each worker thread has its own cache. Only sources whose tables fit the budget
are cached: BUDGET, or twice the cached inputs' bytes as float32 where that is more (a table per
pipeline stage tile; a stage sees its own positions only, and pages no tile position touches are
never touched). A tile that would be evicted before its reuse would cost a tag test and no saving.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import llvmlite.ir as ir

from tilelang_mini.ir.analysis import AIC_SCOPES, TILE_OPS, writes
from tilelang_mini.ir.nodes import Copy, Store, walk

from .access import outlined
from .irutil import I1, I64, PTR, Emitter
from .packing import next_starts

BUDGET = 8 << 20          # bytes of cached panels per kernel at least (each worker thread)
LIMIT = 1 << 30           # and at most
PREFETCH_ROW = 1024       # bytes of a slot prefetched per step of the next gemm
RESUME = 1 << 62          # flag in tlm_kernel's block_begin: keep the tags (same launch)


@dataclass
class Site:
    """The cache of one copy shape: `slots` entries of `entry` bytes of panels at `data`, their
    tag rows of `words` i64 at `tags` (byte offsets in the scratch arena); `radix` is the number
    of tile positions along each source dimension (`slots` is their product)."""
    slots: int
    entry: int
    words: int
    radix: tuple = ()
    tags: int = 0
    data: int = 0


@dataclass
class PackCache:
    sites: dict = field(default_factory=dict)     # copy shape -> Site
    pointer: dict = field(default_factory=dict)   # packed tile name -> offset of its pointer word
    tags: tuple = (0, 0)                          # (offset, bytes) of all tag rows
    nbytes: int = 0


def _shape_key(s: Copy, info):
    """One cache per packed tile and copy shape. Never one per shape alone: a pipeline's two
    stage tiles are live together, and a miss of one must not overwrite the slot the other
    reads (a tile's slot is only replaced by a copy into that tile, which ends its use)."""
    return (info.name, s.src.buffer.name, tuple(s.src.extent))


def _elements(shape) -> int:
    n = 1
    for x in shape:
        n *= x if isinstance(x, int) else 1 << 30
    return n


def _plain(s) -> bool:
    return isinstance(s, Copy) and not (s.atomic or s.transpose or s.dual)


def plan_pack_cache(kernel, plan, base: int) -> PackCache:
    """The cache of `kernel`'s packed tiles whose every write is a plain copy from an input the
    kernel never writes (block-scope tiles only: one instance per block), laid out from `base`."""
    written, writers = set(), {}
    for n in walk(kernel):
        if isinstance(n, (*TILE_OPS, Store)):
            for buf in writes(n):
                written.add(buf.name)
                writers.setdefault(buf.name, []).append(n)
    params = {p.name for p in kernel.params}
    out, need, inputs = PackCache(), {}, {}
    for name, ws in writers.items():
        info = plan.infos.get(name)
        if info is None or info.layout == "row" or info.buf.scope not in AIC_SCOPES:
            continue
        if not all(_plain(w) and w.src.buffer.name in params and w.src.buffer.name not in written
                   for w in ws):
            continue
        sites, read = {}, {}
        for w in ws:
            radix = tuple(-(-n // x) if isinstance(n, int) and isinstance(x, int) else 1 << 30
                          for n, x in zip(w.src.buffer.shape, w.src.extent))
            slots = 1
            for r in radix:
                slots *= r
            sites[_shape_key(w, info)] = Site(slots, (info.nbytes + 63) // 64 * 64,
                                              2 + 2 * len(w.src.extent), radix)
            read[w.src.buffer.name] = 4 * _elements(w.src.buffer.shape)
        budget = min(LIMIT, max(BUDGET, 2 * sum({**inputs, **read}.values())))
        if sum(st.slots * st.entry for st in {**need, **sites}.values()) > budget:
            continue
        need.update(sites)
        inputs.update(read)
        out.pointer[name] = 0
    off = base
    for key, st in need.items():
        st.data, off = off, off + st.slots * st.entry
        out.sites[key] = st
    tags = off
    for st in out.sites.values():
        st.tags, off = off, off + st.slots * st.words * 8
    for name in out.pointer:
        out.pointer[name], off = off, off + 8
    out.tags = (tags, off - tags)
    out.nbytes = (off - base + 63) // 64 * 64 if out.pointer else 0
    return out


def cached_copy(g, s: Copy, dinfo, s_off0, s_rng, starts, pack) -> None:
    """Pack `s` (source region starting at `starts`) through its cache: `pack(dst)` packs into
    `dst` on a tag miss; the tile's pointer word then names the slot's panels."""
    e, b = g.e, g.e.b
    st = g.pack_cache.sites[_shape_key(s, dinfo)]
    words = [ir.Constant(I64, 1), s_off0] + [v for r in s_rng for v in r]
    slot = slot_of(g, st, starts, s.src.extent)
    tag = e.gep(g.scratch, b.add(ir.Constant(I64, st.tags),
                                 b.mul(slot, ir.Constant(I64, st.words * 8))))
    entry = e.gep(g.scratch, b.add(ir.Constant(I64, st.data),
                                   b.mul(slot, ir.Constant(I64, st.entry))))
    with b.if_then(b.call(_tag_test(g, len(words)), [tag] + words[1:]), likely=False):
        pack(entry)

        def set_tag(row, *rest):
            for i, v in enumerate(words[:1] + list(rest)):
                g.e.store(v, g.e.gep(row, 8 * i), 8)
        outlined(g, ("tags", len(words)), set_tag, tag, *words[1:])
    e.store(entry, e.gep(g.scratch, g.pack_cache.pointer[dinfo.name]), 8)


def _tag_test(g, n: int):
    """`i1 tlm_tagt(ptr row, i64 w1, ..., i64 w{n-1})`: the tag row of n words is not
    [1, w1, ...] (a miss). One shared function per row length: a cached copy's test is a call,
    not n loads and compares of its own (compile time; once per copy per block at run time)."""
    fn = g.helpers.get(("tagt", n))
    if fn is None:
        fn = ir.Function(g.module, ir.FunctionType(I1, [PTR] + [I64] * (n - 1)),
                         f"tlm_tagt{len(g.helpers)}")
        fn.linkage = "internal"
        fn.attributes.add("noinline")
        g.helpers[("tagt", n)] = fn
        e = Emitter(g.module, fn)
        row, *rest = fn.args
        hit = ir.Constant(I1, 1)
        for i, v in enumerate([ir.Constant(I64, 1)] + rest):
            hit = e.b.and_(hit, e.b.icmp_signed("==", e.load(I64, e.gep(row, 8 * i), 8), v))
        e.b.ret(e.b.not_(hit))
    return fn


def slot_of(g, st: Site, starts, extent):
    """The slot of the tile at `starts` (i64 per source dimension): its position in the source,
    floor(start / extent) per dimension in mixed radix, wrapped into [0, slots) (a start outside
    the source, or off the extent grid, may share a slot: its tag tells them apart)."""
    b = g.e.b
    idx = ir.Constant(I64, 0)
    for a, x, r in zip(starts, extent, st.radix):
        pos = b.sdiv(a, ir.Constant(I64, x)) if x != 1 else a
        idx = b.add(b.mul(idx, ir.Constant(I64, r)), pos)
    return b.urem(idx, ir.Constant(I64, st.slots)) if st.slots > 1 else ir.Constant(I64, 0)


def prefetch_next_slot(g, s: Copy, dinfo) -> None:
    """Hand the next gemm the panels of the slot this copy reads in the next iteration of its
    loop, to prefetch while it computes (a cached tile is read from memory the copy did not
    just write)."""
    starts = next_starts(g, s.src)
    if starts is None:
        return
    st = g.pack_cache.sites[_shape_key(s, dinfo)]
    e, b = g.e, g.e.b
    entry = e.gep(g.scratch, b.add(ir.Constant(I64, st.data), b.mul(
        slot_of(g, st, starts, s.src.extent), ir.Constant(I64, st.entry))))
    g.prefetch.append((entry, st.entry // PREFETCH_ROW, PREFETCH_ROW, PREFETCH_ROW // 64))


def packed_ptr(g, info):
    """Where a packed tile's panels are: its pointer word when cached, else its own storage."""
    off = g.pack_cache.pointer.get(info.name)
    if off is None:
        return g.buf_ptr(info)
    return g.e.load(PTR, g.e.gep(g.scratch, off), 8)


def start_launch(g, begin):
    """Clear the tags (before the first block) unless `begin` has the RESUME bit (a later chunk
    of the same launch on this worker: the cache still holds this launch's tiles); returns
    `begin` without that bit."""
    e, b = g.e, g.e.b
    flag = ir.Constant(I64, RESUME)
    off, n = g.pack_cache.tags
    if n:
        with b.if_then(b.icmp_unsigned("==", b.and_(begin, flag), ir.Constant(I64, 0))):
            e.memset0(e.gep(g.scratch, off), n)
    return b.and_(begin, ir.Constant(I64, ~RESUME))


def start_block(g) -> None:
    """Every cached tile's pointer word names its own storage until a copy packs it."""
    for name, off in g.pack_cache.pointer.items():
        g.e.store(g.buf_ptr(g.plan.infos[name]), g.e.gep(g.scratch, off), 8)
