"""Tile ops Copy and Fill as explicit vector loops (VL lanes, masked tails).

Copy clips at the source bounds (zero padding) and at the destination bounds of GM tensors (a
region outside an on-chip tile is a run-time error, as a fill's), converts dtypes and may
reshape between extent-1 dimensions, exactly as tilelang_mini/semantics/ops.py. A copy into a
packed B tile (layout.py) writes the GEMM micro-panels directly.
"""
from __future__ import annotations

import llvmlite.ir as ir

from tilelang_mini.ir.analysis import GM_SCOPES

from . import vecmath as vm
from .access import (
    ALL_LANES, all_in_bounds, base_offset, check_in_bounds, check_reshape, const_mask, elem_ptr,
    lane_mask, outlined, runs, starts_of, valid_range, inside, vload, vstore,
)
from .irutil import I1, I64, STORAGE, VL, constant, vty
from .pack_cache import cached_copy, prefetch_next_slot
from .packing import copy_packed, copy_packed_fast, prefetch_next

# ----------------------------------------------------------------------------------- copy


def copy(g, s):
    src, dst = s.src, s.dst
    check_reshape(src.extent, dst.extent, s, "copy")
    si, di = g.info(src.buffer), g.info(dst.buffer)
    if si.layout != "row":
        raise g.fail(f"internal: copy from packed buffer {si.name}")
    ss, ds = starts_of(g, src), starts_of(g, dst)
    for r, starts in ((src, ss), (dst, ds)):
        if r.buffer.scope not in GM_SCOPES:  # only GM tensors clip; a tile's region must fit
            check_in_bounds(g, r, starts)
    e, b = g.e, g.e.b
    s_rng = [valid_range(g, a, x, n) for a, x, n in zip(ss, src.extent, src.buffer.shape)]
    d_rng = [valid_range(g, a, x, n) for a, x, n in zip(ds, dst.extent, dst.buffer.shape)]
    s_dims = [d for d, x in enumerate(src.extent) if x != 1]
    d_dims = [d for d, x in enumerate(dst.extent) if x != 1]
    true = ir.Constant(I1, 1)
    s_ok1, d_ok1 = true, true
    for d, x in enumerate(src.extent):
        if x == 1:
            s_ok1 = b.and_(s_ok1, b.icmp_signed("<", *s_rng[d]))
    for d, x in enumerate(dst.extent):
        if x == 1:
            d_ok1 = b.and_(d_ok1, b.icmp_signed("<", *d_rng[d]))
    sbase, dbase = g.buf_ptr(si), g.buf_ptr(di)
    s_off0, d_off0 = base_offset(g, si, ss), base_offset(g, di, ds)
    kind = vm.kind_of(si.dtype)
    exact = si.dtype if si.dtype in vm.FLOATS else None

    def convert(raw):
        return vm.encode(e, vm.decode(e, raw, si.storage), kind, di.dtype, di.storage, exact)

    if di.name in g.pack_cache.pointer:  # packed once per launch (pack_cache.py)
        cached_copy(g, s, di, s_off0, s_rng, ss, lambda dbase: _copy_to(
            g, s, si, di, sbase, dbase, s_off0, d_off0, s_dims, d_dims, s_rng, d_rng, s_ok1,
            d_ok1, convert, kind, exact, ss, ds))
        prefetch_next_slot(g, s, di)
        return
    if si.param is not None and s_dims and id(s) not in g.rows_handed:
        prefetch_next(g, src, si, s_dims)  # (a fused row copy's rows went to the gemm)
    _copy_to(g, s, si, di, sbase, dbase, s_off0, d_off0, s_dims, d_dims, s_rng, d_rng, s_ok1,
             d_ok1, convert, kind, exact, ss, ds)


def _copy_to(g, s, si, di, sbase, dbase, s_off0, d_off0, s_dims, d_dims, s_rng, d_rng, s_ok1,
             d_ok1, convert, kind, exact, ss, ds):
    b = g.e.b
    src, dst = s.src, s.dst
    fast = None
    if s_dims and si.strides[s_dims[-1]] == 1 and (di.layout != "row" or
                                                    di.strides[d_dims[-1]] == 1):
        ok_s, ok_d = all_in_bounds(g, src, ss), all_in_bounds(g, dst, ds)
        fast = b.and_(ok_s, ok_d)  # constant when both are known (the builder folds)
        if isinstance(fast, ir.Constant):
            if fast.constant:
                _copy_fast(g, s, si, di, sbase, dbase, s_off0, d_off0, s_dims, d_dims, convert)
                return
            fast = None  # known to clip: the general copy only
        elif any(fast is c for c in g.clipped):
            fast = None  # the enclosing fused row's test, false here (rowpass._branch)
    if fast is not None:
        with b.if_else(fast) as (then, other):
            with then:
                _copy_fast(g, s, si, di, sbase, dbase, s_off0, d_off0, s_dims, d_dims, convert)
            with other:
                _copy_general(g, s, si, di, sbase, dbase, s_off0, d_off0, s_dims, d_dims,
                              s_rng, d_rng, s_ok1, d_ok1, convert, kind, exact)
        return
    _copy_general(g, s, si, di, sbase, dbase, s_off0, d_off0, s_dims, d_dims, s_rng, d_rng,
                  s_ok1, d_ok1, convert, kind, exact)


def _copy_general(g, s, si, di, sbase, dbase, s_off0, d_off0, s_dims, d_dims, s_rng, d_rng,
                  s_ok1, d_ok1, convert, kind, exact):
    src = s.src
    if di.layout != "row":
        return copy_packed(g, s, si, di, sbase, dbase, s_off0, s_rng, s_dims, s_ok1, kind,
                            exact)
    if not s_dims:  # a single element
        _copy_single(g, si, di, sbase, dbase, s_off0, d_off0, s_ok1, d_ok1, convert)
        return
    # one internal function per shape, layout and dtype pair (outlined): the pointers, offsets
    # and the valid ranges of the copied dimensions are its arguments
    n = len(s_dims)

    def emit(sb, db, so, do, sok, dok, *r):
        s_r, d_r = [None] * len(s_rng), [None] * len(d_rng)
        for i, d in enumerate(s_dims):
            s_r[d] = r[2 * i:2 * i + 2]
        for i, d in enumerate(d_dims):
            d_r[d] = r[2 * n + 2 * i:2 * n + 2 * i + 2]
        _copy_rows(g, src.extent, si, di, sb, db, so, do, s_dims, d_dims, s_r, d_r, sok, dok,
                   kind, exact)

    key = ("cpg", si.storage, si.dtype, tuple(si.strides), di.storage, di.dtype,
           tuple(di.strides), tuple(src.extent), tuple(s_dims), tuple(d_dims))
    outlined(g, key, emit, sbase, dbase, s_off0, d_off0, s_ok1, d_ok1,
             *[v for d in s_dims for v in s_rng[d]], *[v for d in d_dims for v in d_rng[d]])


def _copy_rows(g, extent, si, di, sbase, dbase, s_off0, d_off0, s_dims, d_dims, s_rng, d_rng,
               s_ok1, d_ok1, kind, exact):
    """The clipping copy of a region of 1+ dimensions: zeros where the source is outside."""
    e, b = g.e, g.e.b

    def convert(raw):
        return vm.encode(e, vm.decode(e, raw, si.storage), kind, di.dtype, di.storage, exact)

    exts = [extent[d] for d in s_dims]
    outer = len(exts) - 1

    def nest(q, s_ok, d_ok, s_off, d_off):
        if q == outer:
            ls, ld = s_dims[-1], d_dims[-1]
            with b.if_then(d_ok):
                dlo, dhi = d_rng[ld]
                sst, dst_ = si.strides[ls], di.strides[ld]
                # [dlo, a) zeros, [a, z) copied, [z, dhi) zeros; a row outside the source is
                # all zeros and issues no load (a masked load of an unmapped page is slow)
                a = e.clamp(e.smax(s_rng[ls][0], dlo), dlo, dhi)
                a = b.select(s_ok, a, dlo)
                z = b.select(s_ok, e.clamp(e.smin(s_rng[ls][1], dhi), a, dhi), a)
                _zero_run(g, di, dbase, d_off, dst_, dlo, a)

                def move(t0, mask):
                    raw = vload(g, si, sbase, b.add(s_off, b.mul(t0, ir.Constant(I64, sst))),
                                sst, mask if mask is not None else ALL_LANES)
                    vstore(g, di, dbase, b.add(d_off, b.mul(t0, ir.Constant(I64, dst_))), dst_,
                           convert(raw), mask if mask is not None else ALL_LANES)

                runs(g, a, z, move)
                _zero_run(g, di, dbase, d_off, dst_, z, dhi)
            return
        sd, dd = s_dims[q], d_dims[q]
        with e.loop(0, exts[q], name=f"cp{q}") as t:
            nest(q + 1, b.and_(s_ok, inside(g, t, *s_rng[sd])),
                 b.and_(d_ok, inside(g, t, *d_rng[dd])),
                 b.add(s_off, b.mul(t, ir.Constant(I64, si.strides[sd]))),
                 b.add(d_off, b.mul(t, ir.Constant(I64, di.strides[dd]))))

    nest(0, s_ok1, d_ok1, s_off0, d_off0)




def _zero_run(g, info, base, off, stride, lo, hi):
    """Zeros (the raw bits of 0 in every storage) at tile offsets [lo, hi) of a row."""
    e, b = g.e, g.e.b
    zero = ir.Constant(vty(STORAGE[info.storage][0]), None)
    with e.loop(lo, hi, VL, name="cpz") as t0:
        vstore(g, info, base, b.add(off, b.mul(t0, ir.Constant(I64, stride))), stride, zero,
               lane_mask(g, t0, lo, hi))


def _identity(si, di) -> bool:
    """Raw bits can be copied unchanged."""
    if si.storage != di.storage:
        return False
    if si.dtype == di.dtype:
        return True
    return si.dtype in vm.FLOATS and di.dtype in vm.FLOATS and vm.exact_in(si.dtype, di.dtype)


def _copy_fast(g, s, si, di, sbase, dbase, s_off0, d_off0, s_dims, d_dims, convert):
    """Copy of a region inside both buffers, contiguous along the last dimension: no clipping,
    constant trip counts, contiguous runs merged, memcpy when no conversion is needed."""
    e, b = g.e, g.e.b
    exts = [s.src.extent[d] for d in s_dims]
    if di.layout != "row":
        return copy_packed_fast(g, s, si, di, sbase, dbase, s_off0, s_dims, convert)
    run, q = exts[-1], len(exts) - 1
    while q > 0 and si.strides[s_dims[q - 1]] == run and di.strides[d_dims[q - 1]] == run:
        q -= 1
        run *= exts[q]
    ident = _identity(si, di)
    ssz, dsz = STORAGE[si.storage][1], STORAGE[di.storage][1]
    rt = STORAGE[si.storage][0]

    stream = streams(g, di, run)

    def move(s_off, d_off):
        sp, dp = elem_ptr(g, si, sbase, s_off), elem_ptr(g, di, dbase, d_off)
        if stream:
            def value(t0, mask):
                sq = e.gep(sp, b.mul(t0, ir.Constant(I64, ssz)))
                if mask is None:
                    return convert(e.load(vty(rt), sq))
                return convert(e.masked_load(vty(rt), sq, mask, ir.Constant(vty(rt), None)))
            stream_run(g, dp, run, value)
            return
        if ident:
            e.memcpy(dp, sp, run * ssz)
            return
        nfull = run // VL

        def chunk(c, mask):
            so = b.mul(c, ir.Constant(I64, VL * ssz)) if not isinstance(c, int) else c * VL * ssz
            do = b.mul(c, ir.Constant(I64, VL * dsz)) if not isinstance(c, int) else c * VL * dsz
            if mask is None:
                raw = e.load(vty(rt), e.gep(sp, so))
                e.store(convert(raw), e.gep(dp, do))
            else:
                raw = e.masked_load(vty(rt), e.gep(sp, so), mask, ir.Constant(vty(rt), None))
                e.masked_store(convert(raw), e.gep(dp, do), mask)

        if nfull <= 8:
            for c in range(nfull):
                chunk(c, None)
        else:
            with e.loop(0, nfull, name="cf") as c:
                chunk(c, None)
        if run % VL:
            chunk(nfull, const_mask(run % VL))

    def nest(k, s_off, d_off):
        if k == q:
            move(s_off, d_off)
            return
        with e.loop(0, exts[k], name=f"cf{k}") as t:
            nest(k + 1, b.add(s_off, b.mul(t, ir.Constant(I64, si.strides[s_dims[k]]))),
                 b.add(d_off, b.mul(t, ir.Constant(I64, di.strides[d_dims[k]]))))

    nest(0, s_off0, d_off0)


STREAM_MIN_BYTES = 8 << 20  # GM outputs at least this large bypass the caches


def streams(g, info, run) -> bool:
    """Write a GM tensor with non-temporal stores: a large float32/int32 output written in
    runs of whole cache lines (x86 only), which NumPy's copy of the same bytes also does."""
    return (g.nt_ok and info.param is not None and info.esize == 4 and run >= 4 * VL
            and info.buf.numel * 4 >= STREAM_MIN_BYTES)


def stream_run(g, dp, run, value):
    """`run` elements to a 4-byte GM destination at dp, value(t0, mask) -> the raw vector of
    elements t0 + lane (mask None: all VL lanes): a masked head up to a 64-byte boundary,
    non-temporal aligned vectors, a masked tail (plain stores when dp is not 4-aligned)."""
    e, b = g.e, g.e.b
    g.nt_used = True
    addr = b.ptrtoint(dp, I64)
    n = ir.Constant(I64, run)
    head = b.lshr(b.and_(b.sub(ir.Constant(I64, 0), addr), ir.Constant(I64, 63)),
                  ir.Constant(I64, 2))
    head = b.select(b.icmp_unsigned("==", b.and_(addr, ir.Constant(I64, 3)),
                                    ir.Constant(I64, 0)), head, n)
    head = e.smin(head, n)
    zero = ir.Constant(I64, 0)

    def chunk(t0, mask, nt=False):
        dq = e.gep(dp, b.mul(t0, ir.Constant(I64, 4)))
        val = value(t0, mask)
        if mask is not None:
            e.masked_store(val, dq, mask)
        elif nt:
            e.store_nt(val, dq)
        else:
            e.store(val, dq)

    with e.loop(zero, head, VL, name="sth") as t0:  # unaligned rows: the whole run
        chunk(t0, lane_mask(g, t0, zero, head))
    end = b.add(head, b.and_(b.sub(n, head), ir.Constant(I64, -VL)))
    with e.loop(head, end, VL, name="stm") as t0:
        chunk(t0, None, True)
    with b.if_then(b.icmp_signed("<", end, n)):
        chunk(end, lane_mask(g, end, end, n))


def _copy_single(g, si, di, sbase, dbase, s_off, d_off, s_ok, d_ok, convert):
    b = g.e.b
    m1 = ir.VectorType(I1, VL)
    lane0 = constant(m1, [1] + [0] * (VL - 1))
    none = constant(m1, [0] * VL)
    smask = b.select(b.and_(s_ok, d_ok), lane0, none)
    dmask = b.select(d_ok, lane0, none)
    raw = vload(g, si, sbase, s_off, 1, smask)
    vstore(g, di, dbase, d_off, 1, convert(raw), dmask)


# ----------------------------------------------------------------------------------- fill


def fill(g, s):
    r = s.dst
    info = g.info(r.buffer)
    if info.layout != "row":
        raise g.fail(f"internal: fill of packed buffer {info.name}")
    starts = starts_of(g, r)
    check_in_bounds(g, r, starts)
    v = g.expr(s.value)
    if v.vec:
        raise g.fail("fill value must not depend on Parallel loop variables")
    e, b = g.e, g.e.b
    raw = e.splat(vm.encode(e, v.v, v.kind, info.dtype, info.storage))
    base = g.buf_ptr(info)
    off0 = base_offset(g, info, starts)
    shape, ext = r.buffer.shape, r.extent
    if not ext:
        ext, shape = (1,), (1,)
    # collapse the trailing dimensions the region covers completely into one contiguous run
    k = len(ext) - 1
    while k > 0 and ext[k] == shape[k]:
        k -= 1
    run = 1
    for n in ext[k:]:
        run *= n
    strides = info.strides or (1,)

    def nest(q, off):
        if q == k:  # whole vectors, then the tail's lanes under a constant mask
            full = run // VL * VL
            if full:
                with e.loop(0, full, VL, name="fl") as t0:
                    e.store(raw, elem_ptr(g, info, base, b.add(off, t0)))
            if run > full:
                e.masked_store(raw, elem_ptr(g, info, base, b.add(off, ir.Constant(I64, full))),
                               const_mask(run - full))
            return
        with e.loop(0, ext[q], name=f"fl{q}") as t:
            nest(q + 1, b.add(off, b.mul(t, ir.Constant(I64, strides[q]))))

    nest(0, off0)

