"""Copies into packed GEMM B tiles (micro-panels, layout.py) and software prefetch of GM tiles.

A copy into a packed tile writes panels `[N/NR][K][NR]` of float32 (or VNNI bf16 pairs
`[N/NR][K/2][NR][2]`, or float32 K pairs of a transposed tile, packBT2), zero-padding columns past N and the odd K row: it is the packing step of
the BLIS-style GEMM. A copy from GM inside a serial loop prefetches (into L2) the tile it will
read in the next iteration; the rows are handed to the next gemm, which spreads the prefetches
over its micro-kernel calls (a burst of prefetches would stall on the miss buffers).
"""
from __future__ import annotations

import llvmlite.ir as ir

from tilelang_mini.ir.nodes import Load, walk

from . import vecmath as vm
from .access import (
    ALL_LANES, NO_LANES, base_offset, const_mask, elem_ptr, inside, lane_mask, load_if, outlined,
    vload,
)
from .irutil import F32, I1, I32, I64, PTR, STORAGE, VL, vty
from .layout import NR
from .values import Val, vars_in


def _key(what, si, di, s_dims):
    """What a packing function's code depends on besides its arguments."""
    return (what, si.storage, si.dtype, tuple(si.strides), di.layout, tuple(di.shape), di.dtype,
            tuple(s_dims))


def copy_packed(g, s, si, di, sbase, dbase, s_off0, s_rng, s_dims, s_ok1, kind, exact):
    """Copy into a packed B tile (K, N): micro-panels [N/NR][K][NR] of float32, or the VNNI
    bf16 pair layout [N/NR][K/2][NR][2]. Columns past N are written as zeros. One internal
    function per shape and layout (outlined): the source, destination, offset and the valid
    ranges of the two copied dimensions are its arguments."""
    if len(s_dims) != 2:
        raise g.fail("internal: packed copy needs a 2-d source")
    d0, d1 = s_dims

    def emit(sb, db, off, ok1, lo0, hi0, lo1, hi1):
        rng = [None] * len(s_rng)  # (the caller's values are not this function's)
        rng[d0], rng[d1] = (lo0, hi0), (lo1, hi1)
        _copy_packed(g, si, di, sb, db, off, rng, s_dims, ok1, kind, exact)

    outlined(g, _key("pkc", si, di, s_dims), emit, sbase, dbase, s_off0, s_ok1,
             *s_rng[d0], *s_rng[d1])


def _copy_packed(g, si, di, sbase, dbase, s_off0, s_rng, s_dims, s_ok1, kind, exact):
    e, b = g.e, g.e.b
    if di.layout in ("packBT", "packBT2"):
        return _copy_transposed(g, si, di, sbase, dbase, s_off0, s_dims, kind, exact,
                                lambda n: b.and_(s_ok1, inside(g, n, *s_rng[s_dims[0]])),
                                s_rng[s_dims[1]])
    K, N = di.shape
    sk, sn = s_dims
    vnni = di.layout == "packB_vnni"
    npan = -(-N // NR)
    kp_total = -(-K // 2)
    zero = ir.Constant(I64, 0)

    def row(k):
        """(ok, slo, shi, src offset) of source row k."""
        ok = b.and_(s_ok1, inside(g, k, *s_rng[sk]))
        slo = b.select(ok, s_rng[sn][0], zero)
        shi = b.select(ok, s_rng[sn][1], zero)
        return slo, shi, b.add(s_off0, b.mul(k, ir.Constant(I64, si.strides[sk])))

    rt = STORAGE[si.storage][0]

    def values(slo, shi, off, c0):
        mask = lane_mask(g, c0, slo, shi)
        some = b.and_(b.icmp_signed("<", c0, shi),
                      b.icmp_signed(">", b.add(c0, ir.Constant(I64, VL)), slo))
        raw = load_if(g, some, lambda: vload(
            g, si, sbase, b.add(off, b.mul(c0, ir.Constant(I64, si.strides[sn]))),
            si.strides[sn], mask), ir.Constant(vty(rt), None))
        return vm.decode(e, raw, si.storage)

    if not vnni:
        # column vectors outer, rows inner: the loads of one vector's rows are independent and
        # close together (many in flight: a clipped tile's rows are often cache misses), and a
        # vector with no valid column is only zeros, without a test per row
        clo, chi = s_rng[sn]
        zero_f = ir.Constant(vty(F32), None)
        with e.loop(0, npan, name="pj") as jp:
            for v in range(NR // VL):
                c0 = b.add(b.mul(jp, ir.Constant(I64, NR)), ir.Constant(I64, v * VL))
                some = b.and_(b.icmp_signed("<", c0, chi),
                              b.icmp_signed(">", b.add(c0, ir.Constant(I64, VL)), clo))
                mask = lane_mask(g, c0, clo, chi)
                col = b.mul(c0, ir.Constant(I64, si.strides[sn]))

                def stores(value):
                    with e.loop(0, K, name="pk") as k:
                        pos = b.add(b.mul(b.add(b.mul(jp, ir.Constant(I64, K)), k),
                                          ir.Constant(I64, NR)), ir.Constant(I64, v * VL))
                        e.store(value(k), e.gep(dbase, b.mul(pos, ir.Constant(I64, 4))), 4)

                def loaded(k):
                    ok = b.and_(s_ok1, inside(g, k, *s_rng[sk]))
                    off = b.add(b.add(s_off0, b.mul(k, ir.Constant(I64, si.strides[sk]))), col)
                    raw = load_if(g, ok, lambda: vload(g, si, sbase, off, si.strides[sn], mask),
                                  ir.Constant(vty(rt), None))
                    return vm.encode(e, vm.decode(e, raw, si.storage), kind, di.dtype,
                                     "float32", exact)

                with b.if_else(some) as (then, other):
                    with then:
                        stores(loaded)
                    with other:
                        stores(lambda k: zero_f)
        return
    with e.loop(0, kp_total, name="pk") as kp:
        k0 = b.mul(kp, ir.Constant(I64, 2))
        k1 = b.add(k0, ir.Constant(I64, 1))
        r0 = row(k0)
        slo1, shi1, off1 = row(k1)
        has1 = b.icmp_signed("<", k1, ir.Constant(I64, K))
        r1 = (b.select(has1, slo1, zero), b.select(has1, shi1, zero), off1)
        with e.loop(0, npan, name="pj") as jp:
            for v in range(NR // VL):
                c0 = b.add(b.mul(jp, ir.Constant(I64, NR)), ir.Constant(I64, v * VL))
                h0 = vm.encode(e, values(*r0, c0), kind, "bfloat16", "bfloat16", exact)
                h1 = vm.encode(e, values(*r1, c0), kind, "bfloat16", "bfloat16", exact)
                store_pair(e, h0, h1, dbase, jp, kp, kp_total, v)


def store_transposed(e, rows, nk, dst, k0, j, K, paired=False, opaque=False):
    """A 16 x 16 block of B (rows: the VL columns 16j.. of B^T, lanes: K from k0, even)
    transposed in registers, its first `nk` K rows stored at their place in the float32
    micro-panels, or with `paired` in the K-pair panels [N/NR][K/2][NR][2] (packBT2: rows k, k+1
    interleaved, column c's pair at 2c; an odd last K row paired with zeros). `j`: the block's
    index, an int or an i64 value (a loop over blocks). `opaque`: see transpose16."""
    b = e.b
    cols = transpose16(e, rows, opaque)
    per = NR // VL
    if isinstance(j, int):
        jp, lane = ir.Constant(I64, j // per), ir.Constant(I64, j % per * VL)
    else:
        jp = b.udiv(j, ir.Constant(I64, per))
        lane = b.mul(b.urem(j, ir.Constant(I64, per)), ir.Constant(I64, VL))
    if paired:
        zero = ir.Constant(vty(F32), None)
        halves = [ir.Constant(vty(I32), [x for i in range(h, h + VL // 2) for x in (i, i + VL)])
                  for h in (0, VL // 2)]
        kp0 = b.add(b.udiv(k0, ir.Constant(I64, 2)), b.mul(jp, ir.Constant(I64, -(-K // 2))))
        for c in range(0, nk, 2):
            x1 = cols[c + 1] if c + 1 < nk else zero
            pos = b.add(b.mul(b.add(kp0, ir.Constant(I64, c // 2)), ir.Constant(I64, 2 * NR)),
                        b.mul(lane, ir.Constant(I64, 2)))
            for h, idx in enumerate(halves):
                at = b.add(pos, ir.Constant(I64, h * VL))
                e.store(b.shuffle_vector(cols[c], x1, idx),
                        e.gep(dst, b.mul(at, ir.Constant(I64, 4))), 4)
        return
    k0 = b.add(k0, b.mul(jp, ir.Constant(I64, K)))
    for c in range(nk):
        pos = b.add(b.mul(b.add(k0, ir.Constant(I64, c)), ir.Constant(I64, NR)), lane)
        e.store(cols[c], e.gep(dst, b.mul(pos, ir.Constant(I64, 4))), 4)


def transposed_blocks(e, N, K, block, name):
    """`block(j, k0, nk, nrows)` for every 16 x 16 block of a transposed B's micro-panels: rows
    16j.. (the first `nrows` inside N, the others zeros), K lanes k0.. (the first `nk`). The
    whole blocks run in one loop (their code is emitted once, not once per block), then the
    partial block and the zero blocks that pad the last panel."""
    whole, blocks = N // VL, -(-N // NR) * (NR // VL)

    def along_k(j, nrows):
        if K // VL:
            with e.loop(0, K // VL * VL, VL, name=name) as k0:
                block(j, k0, VL, nrows)
        if K % VL:
            block(j, ir.Constant(I64, K // VL * VL), K % VL, nrows)

    if whole:
        with e.loop(0, whole, name=name + "b") as j:
            along_k(j, VL)
    for j in range(whole, blocks):
        along_k(j, max(0, N - j * VL))


def store_pair(e, h0, h1, dst, jp, kp, n_kp, v):
    """The bfloat16 lanes v*VL.. of K rows 2kp (h0) and 2kp+1 (h1) of panel jp, interleaved
    into VNNI pairs (one 32-bit word per column) at their place in a packed B panel of n_kp
    pair rows."""
    b = e.b
    pair = b.shuffle_vector(h0, h1, ir.Constant(vty(I32, 2 * VL),
                                                [x for i in range(VL) for x in (i, i + VL)]))
    pos = b.add(b.mul(b.add(b.mul(jp, ir.Constant(I64, n_kp)), kp), ir.Constant(I64, NR)),
                ir.Constant(I64, v * VL))
    e.store(pair, e.gep(dst, b.mul(pos, ir.Constant(I64, 4))), 4)


def copy_packed_fast(g, s, si, di, sbase, dbase, s_off0, s_dims, convert_unused):
    """In-bounds copy into a packed B tile: unmasked loads, constant tail masks (outlined as
    copy_packed's, the source, destination and offset its arguments)."""
    outlined(g, _key("pkf", si, di, s_dims),
             lambda sb, db, off: _copy_packed_fast(g, si, di, sb, db, off, s_dims),
             sbase, dbase, s_off0)


def _copy_packed_fast(g, si, di, sbase, dbase, s_off0, s_dims):
    e, b = g.e, g.e.b
    kind = vm.kind_of(si.dtype)
    exact = si.dtype if si.dtype in vm.FLOATS else None
    if di.layout in ("packBT", "packBT2"):
        true, k_all = ir.Constant(I1, 1), (ir.Constant(I64, 0), ir.Constant(I64, di.shape[1]))
        return _copy_transposed(g, si, di, sbase, dbase, s_off0, s_dims, kind, exact,
                                lambda n: true, k_all)
    K, N = di.shape
    sk, sn = s_dims
    vnni = di.layout == "packB_vnni"
    npan = -(-N // NR)
    kp_total = -(-K // 2)
    rt = STORAGE[si.storage][0]
    zero_f = ir.Constant(vty(F32), None)

    def values(row_off, col):
        n = min(VL, N - col)
        if n <= 0:
            return zero_f
        p = elem_ptr(g, si, sbase, b.add(row_off, ir.Constant(I64, col)))
        raw = e.load(vty(rt), p) if n == VL else e.masked_load(vty(rt), p, const_mask(n),
                                                              ir.Constant(vty(rt), None))
        return vm.decode(e, raw, si.storage)

    def row_off(k):
        return b.add(s_off0, b.mul(k, ir.Constant(I64, si.strides[sk])))

    if not vnni:
        with e.loop(0, K, name="pk") as k:
            ro = row_off(k)
            for jp in range(npan):
                for v in range(NR // VL):
                    f = vm.encode(e, values(ro, jp * NR + v * VL), kind, di.dtype, "float32",
                                  exact)
                    pos = b.add(b.mul(ir.Constant(I64, jp * K), ir.Constant(I64, NR)),
                                b.add(b.mul(k, ir.Constant(I64, NR)), ir.Constant(I64, v * VL)))
                    e.store(f, e.gep(dbase, b.mul(pos, ir.Constant(I64, 4))), 4)
        return
    shuffle = ir.Constant(vty(I32, 2 * VL), [x for i in range(VL) for x in (i, i + VL)])

    def pair_rows(kp, last):
        k0 = b.mul(kp, ir.Constant(I64, 2))
        r0, r1 = row_off(k0), row_off(b.add(k0, ir.Constant(I64, 1)))
        for jp in range(npan):
            for v in range(NR // VL):
                col = jp * NR + v * VL
                h0 = vm.encode(e, values(r0, col), kind, "bfloat16", "bfloat16", exact)
                h1 = vm.encode(e, zero_f if last else values(r1, col), kind, "bfloat16",
                               "bfloat16", exact)
                pos = b.add(b.mul(ir.Constant(I64, jp * kp_total + 0), ir.Constant(I64, NR)),
                            b.add(b.mul(kp, ir.Constant(I64, NR)), ir.Constant(I64, v * VL)))
                e.store(b.shuffle_vector(h0, h1, shuffle),
                        e.gep(dbase, b.mul(pos, ir.Constant(I64, 4))), 4)

    with e.loop(0, K // 2, name="pk") as kp:
        pair_rows(kp, False)
    if K % 2:
        pair_rows(ir.Constant(I64, K // 2), True)


def _copy_transposed(g, si, di, sbase, dbase, s_off0, s_dims, kind, exact, row_ok, k_rng):
    """Copy into a tile (N, K) read as a transposed gemm B: float32 micro-panels of its
    transpose, [N/NR][K][NR]. 16 x 16 blocks (16 rows of N, 16 of K) are loaded as rows and
    transposed in registers (no gathers); rows past N and outside the source are zeros.
    `row_ok(n)`: source row n exists (true on an interval of n); `k_rng`: the valid (lo, hi)
    of K."""
    e, b = g.e, g.e.b
    N, K = di.shape
    sn, sk = s_dims
    zero = ir.Constant(vty(F32), None)
    lo, hi = k_rng

    def block(j, k0, nk, nrows):
        """The 16 x 16 block of rows 16j.. (the first `nrows` inside N)."""
        first = b.mul(j if isinstance(j, ir.Value) else ir.Constant(I64, j), ir.Constant(I64, VL))
        row0 = b.add(s_off0, b.mul(first, ir.Constant(I64, si.strides[sn])))
        koff = b.mul(k0, ir.Constant(I64, si.strides[sk]))
        # the K lanes to load, the same for every row: none to check when K is whole and the
        # block inside it
        whole = isinstance(lo, ir.Constant) and isinstance(hi, ir.Constant) and \
            lo.constant <= 0 and hi.constant >= K
        kmask = ALL_LANES if whole else lane_mask(g, k0, lo, hi)
        if nk < VL:
            kmask = const_mask(nk) if whole else b.and_(kmask, const_mask(nk))

        def load(r, ok=None):
            """Row r of the block; `ok` (an i1 value): whether the row exists, else it is
            zeros, read from the source's first element with no lane enabled (a mapped
            address, so the masked load costs no microcode assist: no branch per row)."""
            at = b.add(b.add(row0, ir.Constant(I64, r * si.strides[sn])), koff)
            mask = kmask
            if ok is not None:
                at = b.select(ok, at, ir.Constant(I64, 0))
                mask = b.select(ok, kmask, NO_LANES)
            raw = vload(g, si, sbase, at, si.strides[sk], mask)
            return vm.encode(e, vm.decode(e, raw, si.storage), kind, di.dtype, "float32", exact)

        rows = []
        for r in range(max(0, min(nrows, VL))):
            ok = row_ok(b.add(first, ir.Constant(I64, r)))
            if not isinstance(ok, ir.Constant):
                rows.append(load(r, ok))
            else:  # known inside (a load) or outside (zeros)
                rows.append(load(r) if ok.constant else zero)
        rows += [zero] * (VL - len(rows))
        store_transposed(e, rows, nk, dbase, k0, j, K, di.layout == "packBT2", g.zmm)

    transposed_blocks(e, N, K, block, "pkt")


def _lanes(pairs):
    """A 16-lane shuffle mask from (source, element) pairs: source 0 or 1."""
    return ir.Constant(vty(I32), [src * VL + i for src, i in pairs])


# the four rounds of transpose16, each one x86 instruction (AVX-512): 32-bit then 64-bit
# elements of two rows interleaved within each 128-bit lane (vunpck{l,h}ps, vunpck{l,h}pd), then
# twice the even and the odd 128-bit lanes of two vectors side by side (vshuff32x4)
_UNPACK32 = [_lanes((s, 4 * q + i) for q in range(4) for i in (h, h + 1) for s in (0, 1))
             for h in (0, 2)]
_UNPACK64 = [_lanes((s, 4 * q + i) for q in range(4) for s in (0, 1) for i in (h, h + 1))
             for h in (0, 2)]
_LANES128 = [_lanes((s, 4 * q + i) for s in (0, 1) for q in (h, h + 2) for i in range(4))
             for h in (0, 1)]


def transpose16(e, rows, opaque=False):
    """Transpose a 16 x 16 block held as 16 vectors (rows[r][c] -> out[c][r]) in four rounds
    of 16 two-source shuffles: after the two in-lane rounds, vector g+m (g = 0, 4, 8, 12) holds
    in its 128-bit lane q column 4q+m of rows g..g+3; the two lane rounds gather the four lanes
    of a column. With `opaque` (x86 with 512-bit registers) each round's results pass through
    an empty inline asm: otherwise LLVM's instruction selection tries to merge the whole network
    of 64 shuffles (recursively, through all four rounds) before it selects the same 64
    instructions, about 10 ms per transpose, a fifth of the object emission of flash attention
    or prenorm."""
    assert VL == 16 and len(rows) == VL
    b = e.b

    def pair(x, y, masks):
        out = [b.shuffle_vector(x, y, m) for m in masks]
        return [e.opaque(v) for v in out] if opaque else out

    t = [None] * VL
    for r in range(0, VL, 2):
        t[r], t[r + 1] = pair(rows[r], rows[r + 1], _UNPACK32)
    u = [None] * VL  # u[g+m] lane q: column 4q+m of rows g..g+3
    for g in range(0, VL, 4):
        for k in (0, 1):
            u[g + 2 * k], u[g + 2 * k + 1] = pair(t[g + k], t[g + k + 2], _UNPACK64)
    x = {}  # x[g, m, h]: lanes h, h+2 of u[g+m] then of u[g+4+m]
    for m in range(4):
        for g in (0, 8):
            x[g, m, 0], x[g, m, 1] = pair(u[g + m], u[g + 4 + m], _LANES128)
    cols = [None] * VL
    for m in range(4):
        for h in (0, 1):
            lo, hi = (b.shuffle_vector(x[0, m, h], x[8, m, h], mk) for mk in _LANES128)
            cols[4 * h + m], cols[8 + 4 * h + m] = lo, hi
    return cols


def next_starts(g, r, skip=()):
    """The starts (i64) of region `r` in the next iteration of the innermost enclosing serial
    loop its start depends on (loops over `skip` variables aside), or None."""
    used = vars_in(r.start)
    var = next((v for v in reversed(g.loops) if v in used and v not in skip), None)
    if var is None or any(isinstance(n, Load) for x in r.start for n in walk(x)):
        return None  # a start read from a tensor: the next iteration's index may not exist
    old = g.vars[var]
    g.vars[var] = Val(g.e.b.add(old.v, ir.Constant(I64, 1)), "int")
    try:
        return [g.scalar_int(x, "a region start") for x in r.start]
    finally:
        g.vars[var] = old


def prefetch_next(g, r, info, dims, skip=()):
    """Prefetch (into L2) the region this copy reads in the next iteration of the innermost
    enclosing serial loop its start depends on (loops over `skip` variables aside: a loop over
    the rows of a tile, whose next row is no further away than this one): GM tiles arrive
    while the current one is computed on."""
    starts = next_starts(g, r, skip)
    if starts is None:
        return
    e, b = g.e, g.e.b
    base = elem_ptr(g, info, g.buf_ptr(info), base_offset(g, info, starts))
    esz = STORAGE[info.storage][1]
    lines = -(-r.extent[dims[-1]] * esz // 64) + 1
    if lines > 64:
        return
    if len(dims) == 2:  # rows are prefetched a few at a time by the next gemm
        g.prefetch.append((base, r.extent[dims[0]], info.strides[dims[0]] * esz, lines))
        return

    def nest(k, ptr):
        if k == len(dims) - 1:
            prefetch_lines(g, ptr, lines)
            return
        d = dims[k]
        with e.loop(0, r.extent[d], name=f"pf{k}") as t:
            nest(k + 1, e.gep(ptr, b.mul(t, ir.Constant(I64, info.strides[d] * esz))))

    nest(0, base)


def prefetch_lines(g, ptr, lines, locality=2, e=None):
    """Prefetch `lines` cache lines from `ptr` (locality 2: into L2, 3: into L1), emitted by
    `e` (default: the kernel function's emitter)."""
    e = e or g.e
    for i in range(lines):
        e.intr("prefetch", ir.VoidType(), [e.gep(ptr, i * 64), ir.Constant(I32, 0),
                                           ir.Constant(I32, locality), ir.Constant(I32, 1)],
               [PTR])


def prefetch_rows(g, desc, first, last):
    """Prefetch rows [first, last) (i64s) of a pending 2-d descriptor, through one shared
    helper per (row stride, lines per row): the kernel function holds a call, not a loop of
    its own per gemm call site (LLVM's loop passes cost grows with the loops of a function)."""
    base, _nrows, stride, lines = desc

    def emit(ptr, lo, hi):
        e = g.e
        with e.loop(lo, hi, name="pfr") as row:
            prefetch_lines(g, e.gep(ptr, e.b.mul(row, ir.Constant(I64, stride))), lines)

    outlined(g, ("pfr", stride, lines), emit, base, first, last)


def flush_prefetch(g, pending):
    """Prefetch every row of the descriptors no gemm consumed."""
    for desc in pending:
        prefetch_rows(g, desc, ir.Constant(I64, 0), ir.Constant(I64, desc[1]))
