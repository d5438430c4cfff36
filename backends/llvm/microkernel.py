"""Gemm on tiles: a BLIS-style register-blocked micro-kernel.

C (M x N, float32) += A (M x K) @ B (K x N), accumulated in float32 (transposes and clear_accum
as backends/numpy). The micro-kernel keeps an MR x NR (8 x 32) block of C in 16 `<16 x float>`
accumulators and streams K:

* f32 path: per k, two vector loads of a B micro-panel row, MR broadcasts of A (scalar loads
  at constant displacements: any row/column stride works, so row-major or transposed A tiles
  are read in place) and 2*MR FMAs. float16/float8 on-chip tiles are stored widened to float32
  (layout.py), so they use this path without conversions.
* bf16 path (host with avx512_bf16, both operands bfloat16): `vdpbf16ps` on K pairs; A pairs
  are adjacent bf16 values of a row, B is in the VNNI pair layout.

B micro-panels come packed from the copy into the tile (layout.py), or are read in place (f32
row-major B), or are packed here into the scratch arena (anything else). A is packed here only
when it is not float32 (f32 path) or not row-major bf16 with even K (bf16 path). C is updated in
place when it is float32, else through a float32 temporary (rounded back to C's dtype after).
The K loop is unrolled by 4 (f32) / 2 (bf16 pairs); tile tails use masked loads and stores and
separate micro-kernels for the last rows. An f32 kernel whose last column vector holds at most 8
columns (the 8/24-column narrow kernels, tails) runs over K pairs (kpairs.py) where A's rows are
contiguous in K; otherwise it computes the last 8 columns for two rows in one full vector:
lanes [0, 8) row r, [8, 16) row r+1, from a blend of the two rows' A broadcasts and B's half row
loaded into both halves (a 24-column kernel of 8 rows: 12 FMAs per k, not 16): on hosts with
full-width FMA units a 512-bit FMA costs what a 256-bit one does (the development host: 7.2 G
FMA instructions/s at either width, one thread).
"""
from __future__ import annotations

import llvmlite.ir as ir

from tilelang_mini.ir.nodes import Const
from tilelang_mini.semantics.ops import gemm_shape

from . import kpairs, vecmath as vm
from .access import (
    base_offset, check_in_bounds, elem_ptr, lane_mask, outlined, starts_of, vload, vstore,
)
from .irutil import F32, I1, I32, I64, PTR, VL, Emitter, vty
from .layout import MR, NR
from .pack_cache import packed_ptr
from .packing import (
    flush_prefetch, prefetch_lines, prefetch_rows, store_pair, store_transposed, transposed_blocks,
)

UNROLL = 4
DPBF16 = "tlm_dpbf16"

DPBF16_IR = r"""
define linkonce_odr <16 x float> @tlm_dpbf16(<16 x float> %acc, <16 x i32> %a, <16 x i32> %b) alwaysinline {
  %a1 = bitcast <16 x i32> %a to <32 x bfloat>
  %b1 = bitcast <16 x i32> %b to <32 x bfloat>
  %r = call <16 x float> @llvm.x86.avx512bf16.dpbf16ps.512(<16 x float> %acc, <32 x bfloat> %a1, <32 x bfloat> %b1)
  ret <16 x float> %r
}
declare <16 x float> @llvm.x86.avx512bf16.dpbf16ps.512(<16 x float>, <32 x bfloat>, <32 x bfloat>)
"""


def _mstrides(info):
    st = info.strides
    return st[-2], st[-1]


def gemm(g, s):
    M, N_tile, K = gemm_shape(s)
    N = _static_columns(g, s, N_tile)  # columns of C nothing can observe (transform/cpu_columns.py)
    ai, bi, ci = g.info(s.a.buffer), g.info(s.b.buffer), g.info(s.c.buffer)
    if bi.layout == "packBT2" and not kpairs.usable(False, N, 2, 4):
        # layout.py chose the K-pair panels for the tile's columns (1..8 or 17..24); fewer
        # observed columns that the K-pair kernel does not serve (9..16: a 10-column tensor
        # in a 24-column tile) compute the tile's unobserved columns too
        N = N_tile
    if ai.layout != "row" or ci.layout != "row":
        raise g.fail("internal: packed gemm operand A or C")
    sa, sb, sc = starts_of(g, s.a), starts_of(g, s.b), starts_of(g, s.c)
    for r, st in ((s.a, sa), (s.b, sb), (s.c, sc)):
        check_in_bounds(g, r, st)
    e, b = g.e, g.e.b
    # the native bfloat16 product where the host has it and both operands are stored as bfloat16
    # (not widened: transform/cpu_storage.py)
    bf16 = g.bf16 and ai.storage == "bfloat16" and bi.storage == "bfloat16"
    transposed = bi.layout in ("packBT", "packBT2")
    if bi.layout == "packB_vnni" and not bf16 or bi.layout in ("packB", "packBT", "packBT2") \
            and bf16 or transposed != (bi.layout != "row" and s.transpose_b):
        raise g.fail("internal: packed B layout does not match the gemm mode")
    KP = -(-K // 2)
    npan = -(-N // NR)

    # ---- temporaries: [A pack][B pack][C]
    a_r, a_c = _mstrides(ai)
    a_rs, a_cs = (a_c, a_r) if s.transpose_a else (a_r, a_c)
    b_r, b_c = _mstrides(bi) if bi.layout == "row" else (0, 0)
    b_rs, b_cs = (b_c, b_r) if s.transpose_b else (b_r, b_c)
    a_direct = (ai.storage == "float32") if not bf16 else (
        ai.storage == "bfloat16" and a_cs == 1 and K % 2 == 0)
    b_direct = bi.layout != "row" or (not bf16 and bi.storage == "float32" and b_cs == 1)
    same = s.c.buffer.name in (s.a.buffer.name, s.b.buffer.name)
    c_direct = ci.storage == "float32" and ci.dtype == "float32" and not same
    sizes = [0 if a_direct else (M * KP * 4 if bf16 else M * K * 4),
             0 if b_direct else npan * (KP if bf16 else K) * NR * 4,
             0 if c_direct else M * N * 4]
    offs, total = [], 0
    for n in sizes:
        offs.append(total)
        total += (n + 63) // 64 * 64
    tmp = g.temp(total) if total else None

    abase = elem_ptr(g, ai, g.buf_ptr(ai), base_offset(g, ai, sa))
    bbase = packed_ptr(g, bi) if bi.layout != "row" else elem_ptr(g, bi, g.buf_ptr(bi),
                                                              base_offset(g, bi, sb))
    cbase = elem_ptr(g, ci, g.buf_ptr(ci), base_offset(g, ci, sc))

    # ---- A
    if a_direct:
        esz = 2 if bf16 else 4
        a_ptr, a_rs_b, a_cs_b = abase, a_rs * esz, a_cs * esz
    else:
        a_ptr = e.gep(tmp, offs[0])
        outlined(g, ("pa", ai.dtype, ai.storage, a_rs, a_cs, M, K, bf16),
                  lambda src, dst: _pack_a(g, ai, src, a_rs, a_cs, M, K, dst, bf16), abase, a_ptr)
        a_rs_b, a_cs_b = (KP * 4, 2) if bf16 else (K * 4, 4)
    # ---- B: (panel pointer function, row stride bytes, masked loads)
    if bi.layout in ("packB", "packBT"):  # panels of B, or of the transposed tile's B
        pan_b, ldb_b, bmask = K * NR * 4, NR * 4, False
        b_ptr = bbase
    elif bi.layout == "packBT2":  # K pairs: ldb_b is a pair row's bytes
        pan_b, ldb_b, bmask = KP * 2 * NR * 4, 2 * NR * 4, False
        b_ptr = bbase
    elif bi.layout == "packB_vnni":
        pan_b, ldb_b, bmask = KP * NR * 4, NR * 4, False
        b_ptr = bbase
    elif b_direct:
        pan_b, ldb_b, bmask = NR * 4, b_rs * 4, True
        b_ptr = bbase
    else:
        b_ptr = e.gep(tmp, offs[1])
        outlined(g, ("pb", bi.dtype, bi.storage, b_rs, b_cs, K, N, bf16),
                  lambda src, dst: _pack_b(g, bi, src, b_rs, b_cs, K, N, dst, bf16), bbase, b_ptr)
        pan_b, ldb_b, bmask = (KP if bf16 else K) * NR * 4, NR * 4, False
    # ---- C
    zero = s.clear_accum
    if c_direct:
        c_ptr, ldc_b = cbase, ci.strides[-2] * 4
    else:
        c_ptr, ldc_b = e.gep(tmp, offs[2]), N * 4
        if not zero:
            outlined(g, ("ci", ci.dtype, ci.storage, ci.strides[-2], M, N),
                      lambda src, dst: _c_through(g, ci, src, ci.strides[-2], M, N, dst, True),
                      cbase, c_ptr)
    steps = KP if bf16 else K
    pending, g.prefetch = g.prefetch, []
    calls = npan * (M // MR)
    if calls == 0 and pending:
        flush_prefetch(g, pending)
        pending = []

    nv = _valid_columns(g, s, N)
    dyn_calls = None
    if nv is not None and pending and calls:
        # only the panels up to the valid columns run: spread the rows over those calls
        ran = b.sdiv(b.add(nv, ir.Constant(I64, NR - 1)), ir.Constant(I64, NR))
        ran = b.select(b.icmp_signed(">", ran, ir.Constant(I64, 1)), ran, ir.Constant(I64, 1))
        dyn_calls = b.mul(ran, ir.Constant(I64, M // MR))

    def prefetch(call_index):
        for desc in pending:
            if dyn_calls is None:
                per = -(-desc[1] // calls)
                first = b.mul(call_index, ir.Constant(I64, per))
                prefetch_rows(g, desc, first, b.add(first, ir.Constant(I64, per)))
                continue
            rows = ir.Constant(I64, desc[1])
            per = b.sdiv(b.add(rows, b.sub(dyn_calls, ir.Constant(I64, 1))), dyn_calls)
            first = b.mul(call_index, per)
            last = b.add(first, per)
            last = b.select(b.icmp_signed("<", last, rows), last, rows)
            prefetch_rows(g, desc, first, last)

    # a packed B panel is read by every row group's call: the calls of one panel bring the
    # next panel into L1, so its first call does not wait on L2 (a cached panel, pack_cache.py,
    # was not just written by a copy)
    next_panel = npan > 1 and not bmask and M // MR > 1

    def panel(jp, ncols):
        bp = e.gep(b_ptr, b.mul(jp, ir.Constant(I64, pan_b)))
        cp = e.gep(c_ptr, b.mul(jp, ir.Constant(I64, NR * 4)))
        common = (bf16, ncols, steps, a_rs_b, a_cs_b, ldb_b, ldc_b, zero, bmask,
                  bi.layout == "packBT2")
        if M // MR:
            # each call's share of the next panel, into L1 (packed panels only): prefetched by
            # the micro-kernel (one copy of the prefetches, not one per call site)
            step = -(-pan_b // 64 // (M // MR)) if next_panel else 0
            fn = _microkernel(g, (MR,) + common + (step,))
            with e.loop(0, M // MR, name="mi") as ip:
                if pending:
                    prefetch(b.add(b.mul(jp, ir.Constant(I64, M // MR)), ip))
                args = [e.gep(a_ptr, b.mul(ip, ir.Constant(I64, MR * a_rs_b))), bp,
                        e.gep(cp, b.mul(ip, ir.Constant(I64, MR * ldc_b)))]
                if step:
                    args.append(e.gep(bp, b.add(ir.Constant(I64, pan_b),
                                                b.mul(ip, ir.Constant(I64, step * 64)))))
                _call(g, fn, args)
        if M % MR:
            fn = _microkernel(g, (M % MR,) + common + (0,))
            m0 = M // MR * MR
            _call(g, fn, [e.gep(a_ptr, m0 * a_rs_b), bp, e.gep(cp, m0 * ldc_b)])

    if nv is None:
        if N // NR:
            with e.loop(0, N // NR, name="nj") as jp:
                panel(jp, NR)
        if N % NR:
            panel(ir.Constant(I64, N // NR), N % NR)
    else:  # stop at the block's valid columns: whole panels, then a narrow one
        full = b.sdiv(nv, ir.Constant(I64, NR))
        if N // NR:  # (a tile narrower than a panel has none: no whole-panel kernel)
            with e.loop(0, full, name="nj") as jp:
                panel(jp, NR)
        rem = b.sub(nv, b.mul(full, ir.Constant(I64, NR)))
        with e.if_then(b.icmp_signed(">", rem, ir.Constant(I64, 0))):
            _narrow_panel(g, panel, full, rem, N, bi.layout == "packBT2")
    if not c_direct:
        outlined(g, ("co", ci.dtype, ci.storage, ci.strides[-2], M, N),
                  lambda dst, src: _c_through(g, ci, dst, ci.strides[-2], M, N, src, False),
                  cbase, c_ptr)


NARROW = (8, 16, 24)  # the narrow micro-kernels' widths (columns) below a whole panel


def _narrow_panel(g, panel, jp, rem, N, paired=False):
    """Panel jp holding the last `rem` (1..NR-1, i64) valid columns: the narrowest of the
    8/16/24-column micro-kernels that covers them and stays inside C, else the whole panel (or
    the tile's static tail). Only kernels that can run are made: none wider than the tile
    (an 8-column tile has no 16-column kernel), and in the K-pair panels of a transposed B
    (`paired`) only the widths the K-pair kernel serves (8, 24: kpairs.usable)."""
    b = g.e.b
    base = b.mul(jp, ir.Constant(I64, NR))
    widths = [w for w in NARROW if w <= N and not (paired and VL // 2 < w <= VL)]

    def choose(i):
        if i == len(widths):
            if N < NR:  # the tile's one (narrow) panel
                panel(jp, N)
            elif N % NR:
                with b.if_else(b.icmp_signed("<", jp, ir.Constant(I64, N // NR))) as (whole, tail):
                    with whole:
                        panel(jp, NR)
                    with tail:
                        panel(jp, N % NR)
            else:
                panel(jp, NR)
            return
        w = widths[i]
        fits = b.and_(b.icmp_signed("<=", rem, ir.Constant(I64, w)),
                      b.icmp_signed("<=", b.add(base, ir.Constant(I64, w)), ir.Constant(I64, N)))
        with b.if_else(fits) as (yes, no):
            with yes:
                panel(jp, w)
            with no:
                choose(i + 1)

    choose(0)


def _static_columns(g, s, N):
    """The columns of C any block computes: the gemm's `columns` when constant, else their
    upper bound over the grid, at most N."""
    cols = s.columns
    if isinstance(cols, Const):
        return min(N, cols.value) if cols.value > 0 else N
    rng = g.interval(cols) if cols is not None else None
    return min(N, rng[1]) if rng is not None and rng[1] > 0 else N


def _valid_columns(g, s, N):
    """The columns of C this block's observers can see (an i64 in [0, N]) when the gemm's
    `columns` depend on the grid variables, else None. Columns past them are never computed:
    a GEMM's last block column stops at N."""
    if s.columns is None or isinstance(s.columns, Const):
        return None
    b = g.e.b
    x = g.scalar_int(s.columns, "a column count")
    nv = ir.Constant(I64, 0)
    nv = b.select(b.icmp_signed(">", x, nv), x, nv)
    return b.select(b.icmp_signed("<", nv, ir.Constant(I64, N)), nv, ir.Constant(I64, N))


def _call(g, fn, args):
    """Call micro-kernel `fn`. From its second call site on it is `noinline`: LLVM would otherwise
    inline (and optimise) a copy of it at each site (the gemm example's kernel function held
    three); a kernel called from one site stays inlinable (no copy, and no call per block)."""
    if fn.name in g.mk_sites:
        fn.attributes.add("noinline")
    g.mk_sites.add(fn.name)
    g.e.b.call(fn, args)


def _microkernel(g, key):
    fn = g.helpers.get(key)
    if fn is not None:
        return fn
    mr, bf16, ncols, steps, a_rs_b, a_cs_b, ldb_b, ldc_b, zero, bmask, paired, lines = key
    name = f"tlm_mk{len(g.helpers)}"
    fn = ir.Function(g.module, ir.FunctionType(ir.VoidType(), [PTR] * (4 if lines else 3)),
                     name)
    fn.linkage = "internal"
    g.helpers[key] = fn
    e = Emitter(g.module, fn)
    b = e.b
    a, bp, c = fn.args[:3]
    if lines:  # (the fourth argument: `lines` cache lines to bring into L1)
        prefetch_lines(g, fn.args[3], lines, locality=3, e=e)
    nvec = -(-ncols // VL)
    # f32: a last vector of at most 8 columns is a half-width (ymm) vector, of two rows at once
    # where the kernel has row pairs (below)
    widths = [VL if bf16 or ncols - v * VL > VL // 2 else VL // 2 for v in range(nvec)]
    masks = []
    for v, w in enumerate(widths):
        n = min(w, ncols - v * VL)
        masks.append(None if n == w else ir.Constant(vty(I1, w), [1] * n + [0] * (w - n)))
    fv = vty(F32)
    fvs = [vty(F32, w) for w in widths]

    def cptr(r, v):
        return e.gep(c, r * ldc_b + v * VL * 4)

    def c_load(r, v):
        zero_v = ir.Constant(fvs[v], None)
        if masks[v] is None:
            return e.load(fvs[v], cptr(r, v), 4)
        return e.masked_load(fvs[v], cptr(r, v), masks[v], zero_v)

    def c_store(x, r, v):
        if not zero:
            x = b.fadd(c_load(r, v), x)
        if masks[v] is None:
            e.store(x, cptr(r, v), 4)
        else:
            e.masked_store(x, cptr(r, v), masks[v])

    if kpairs.usable(bf16, ncols, steps, a_cs_b):
        kpairs.kernel(e, fn.args[:3], mr, ncols, steps, a_rs_b, ldb_b, bmask, c_store, paired)
        b.ret_void()
        return fn
    if paired:  # layout.py chose the pair panels for the K-pair kernel only
        raise g.fail(f"internal: K-pair B panels for a {ncols}-column gemm kernel")

    # a half-width last vector of rows r, r+1 shares one full vector: lanes [0, 8) row r,
    # [8, 16) row r+1 (a blend of their A broadcasts, B's half row in both halves), so on hosts
    # whose 512-bit FMAs cost what 256-bit ones do the narrow columns take half the FMAs
    half = not bf16 and widths[-1] == VL // 2
    pairs = mr // 2 if half else 0
    slots = [(r, v, 0) for r in range(mr) for v in range(nvec)
             if not (v == nvec - 1 and r < 2 * pairs)]
    slots += [(2 * i, nvec - 1, 1) for i in range(pairs)]  # the accumulators (row, vector, pair)
    lo_hi = [ir.Constant(vty(I32, VL // 2), list(range(o, o + VL // 2))) for o in (0, VL // 2)]

    # the accumulators start at zero and C is added when they are stored: C's loads depend on
    # nothing the K loop computes, so they are issued early and their latency (C is a tile of
    # up to 64 KB, read from L2) does not delay the first FMAs
    init = [ir.Constant(fv if pair else fvs[v], None) for r, v, pair in slots]
    if bf16:
        g.needs_dpbf16 = True
        dp = e.declare(DPBF16, fv, [fv, vty(I32), vty(I32)])
    if pairs:
        # the upper half's lanes, opaque: LLVM folds a blend of two broadcasts with constant
        # lanes into a two-source permute (vpermt2ps); with an opaque mask it stays a masked
        # register move (vmovaps zmm{k}), which the development host runs beside the FMAs
        # (prenorm 4096x24x8192: 14.4 -> 13.0 ms, median of 4 alternating processes)
        upper = ((1 << VL // 2) - 1) << VL // 2
        hi = b.bitcast(e.opaque(ir.Constant(ir.IntType(VL), upper)), vty(I1, VL))

    def step(acc, kvar, u):
        """One k (or k pair) step at k = kvar + u; returns the new accumulators."""
        def at(stride):  # (kvar + u) * stride as kvar * stride + constant: a displacement
            off = b.mul(kvar, ir.Constant(I64, stride))
            return b.add(off, ir.Constant(I64, u * stride)) if u else off

        boff = at(ldb_b)
        bv = []
        for v in range(nvec):
            bt = vty(I32) if bf16 else fvs[v]
            p = e.gep(bp, b.add(boff, ir.Constant(I64, v * VL * 4)))
            if bmask and masks[v] is not None:
                bv.append(e.masked_load(bt, p, masks[v], ir.Constant(bt, None)))
            else:
                bv.append(e.load(bt, p, 4))
        b2 = b.shuffle_vector(bv[-1], bv[-1], ir.Constant(
            vty(I32, VL), list(range(VL // 2)) * 2)) if pairs else None
        aoff = at(4 if bf16 else a_cs_b)
        av = []
        for r in range(mr):
            p = e.gep(a, b.add(aoff, ir.Constant(I64, r * a_rs_b)))
            a1 = e.load(I32 if bf16 else F32, p, 2 if bf16 else 4)
            av.append({w: e.splat(a1, w) for w in set(widths) | {VL}})
        out = []
        for x, (r, v, pair) in zip(acc, slots):
            if bf16:
                out.append(b.call(dp, [x, av[r][VL], bv[v]]))
            elif pair:
                mixed = b.select(hi, av[r + 1][VL], av[r][VL])
                out.append(e.intr("fma", fv, [mixed, b2, x]))
            else:
                out.append(e.intr("fma", fvs[v], [av[r][widths[v]], bv[v], x]))
        return out

    unroll = 2 if bf16 else UNROLL
    main = steps // unroll * unroll

    def body(cur, k):
        for u in range(unroll):
            cur = step(cur, k, u)
        return cur

    acc = kpairs.k_loop(b, init, main, unroll, body)
    for kk in range(main, steps):
        acc = step(acc, ir.Constant(I64, kk), 0)

    for (r, v, pair), x in zip(slots, acc):
        if pair:
            c_store(b.shuffle_vector(x, x, lo_hi[0]), r, v)
            c_store(b.shuffle_vector(x, x, lo_hi[1]), r + 1, v)
        else:
            c_store(x, r, v)
    b.ret_void()
    return fn


# ------------------------------------------------------------------------------- packing


def _pack_a(g, ai, abase, rs, cs, M, K, dst, bf16):
    """A (M x K, any storage/strides) -> float32 rows of K, or bf16 rows of 2*ceil(K/2)."""
    e, b = g.e, g.e.b
    kk = 2 * (-(-K // 2)) if bf16 else K
    zero = ir.Constant(I64, 0)
    with e.loop(0, M, name="pa") as i:
        row = b.mul(i, ir.Constant(I64, rs))
        with e.loop(0, kk, VL, name="pak") as k0:
            mask = lane_mask(g, k0, zero, ir.Constant(I64, K))
            raw = vload(g, ai, abase, b.add(row, b.mul(k0, ir.Constant(I64, cs))), cs, mask)
            f = vm.to_float(e, vm.decode(e, raw, ai.storage), vm.kind_of(ai.dtype))
            out = b.add(b.mul(i, ir.Constant(I64, kk)), k0)
            if bf16:
                v = vm.encode_float(e, f, "bfloat16")
                e.masked_store(v, e.gep(dst, b.mul(out, ir.Constant(I64, 2))),
                               lane_mask(g, k0, zero, ir.Constant(I64, kk)))
            else:
                e.masked_store(f, e.gep(dst, b.mul(out, ir.Constant(I64, 4))), mask)


def _pack_b(g, bi, bbase, rs, cs, K, N, dst, bf16):
    """B (K x N, any storage/strides) -> micro-panels (float32 or VNNI bf16 pairs)."""
    e, b = g.e, g.e.b
    npan = -(-N // NR)
    KP = -(-K // 2)
    zero = ir.Constant(I64, 0)

    def values(k, c0, valid):
        mask = b.and_(lane_mask(g, c0, zero, ir.Constant(I64, N)), e.splat(valid))
        raw = vload(g, bi, bbase, b.add(b.mul(k, ir.Constant(I64, rs)),
                                        b.mul(c0, ir.Constant(I64, cs))), cs, mask)
        return vm.to_float(e, vm.decode(e, raw, bi.storage), vm.kind_of(bi.dtype))

    true = ir.Constant(I1, 1)
    if not bf16 and rs == 1 and cs != 1:
        return _pack_bt(g, bi, bbase, cs, K, N, dst)
    if not bf16:
        with e.loop(0, K, name="pb") as k:
            with e.loop(0, npan, name="pbj") as jp:
                for v in range(NR // VL):
                    c0 = b.add(b.mul(jp, ir.Constant(I64, NR)), ir.Constant(I64, v * VL))
                    pos = b.add(b.mul(b.add(b.mul(jp, ir.Constant(I64, K)), k),
                                      ir.Constant(I64, NR)), ir.Constant(I64, v * VL))
                    e.store(values(k, c0, true), e.gep(dst, b.mul(pos, ir.Constant(I64, 4))), 4)
        return
    with e.loop(0, KP, name="pb") as kp:
        k0 = b.mul(kp, ir.Constant(I64, 2))
        k1 = b.add(k0, ir.Constant(I64, 1))
        has1 = b.icmp_signed("<", k1, ir.Constant(I64, K))
        k1 = b.select(has1, k1, k0)
        with e.loop(0, npan, name="pbj") as jp:
            for v in range(NR // VL):
                c0 = b.add(b.mul(jp, ir.Constant(I64, NR)), ir.Constant(I64, v * VL))
                h0 = vm.encode_float(e, values(k0, c0, true), "bfloat16")
                h1 = vm.encode_float(e, values(k1, c0, has1), "bfloat16")
                store_pair(e, h0, h1, dst, jp, kp, KP, v)


def _pack_bt(g, bi, bbase, cs, K, N, dst):
    """float32 micro-panels of a B whose K dimension is contiguous (a transposed operand):
    16 x 16 blocks loaded as rows of K and transposed in registers (no gathers)."""
    e, b = g.e, g.e.b
    zero = ir.Constant(vty(F32), None)
    kind = vm.kind_of(bi.dtype)

    def block(j, k0, nk, nrows):
        """The 16 x 16 block of B rows 16j.. (the first `nrows` inside N)."""
        kmask = ir.Constant(vty(I1), [1] * nk + [0] * (VL - nk))
        first = b.mul(j if isinstance(j, ir.Value) else ir.Constant(I64, j), ir.Constant(I64, VL))
        row0 = b.add(b.mul(first, ir.Constant(I64, cs)), k0)
        rows = []
        for r in range(VL):
            if r >= nrows:
                rows.append(zero)
                continue
            raw = vload(g, bi, bbase, b.add(row0, ir.Constant(I64, r * cs)), 1, kmask)
            rows.append(vm.to_float(e, vm.decode(e, raw, bi.storage), kind))
        store_transposed(e, rows, nk, dst, k0, j, K, opaque=g.zmm)

    transposed_blocks(e, N, K, block, "pbt")


def _c_through(g, ci, cbase, ldc, M, N, tmp, load: bool):
    """The (M, N) C tile at `cbase` (row stride ldc, C's dtype and storage) converted into the
    float32 scratch `tmp` (row stride N) when `load`, else converted back from it."""
    e, b = g.e, g.e.b
    zero = ir.Constant(I64, 0)
    with e.loop(0, M, name="ci" if load else "co") as i:
        with e.loop(0, N, VL, name="cij" if load else "coj") as j0:
            mask = lane_mask(g, j0, zero, ir.Constant(I64, N))
            at = b.add(b.mul(i, ir.Constant(I64, ldc)), j0)
            pos = b.add(b.mul(i, ir.Constant(I64, N)), j0)
            slot = e.gep(tmp, b.mul(pos, ir.Constant(I64, 4)))
            if load:
                raw = vload(g, ci, cbase, at, 1, mask)
                f = vm.to_float(e, vm.decode(e, raw, ci.storage), vm.kind_of(ci.dtype))
                e.masked_store(f, slot, mask)
            else:
                f = e.masked_load(vty(F32), slot, mask)
                vstore(g, ci, cbase, at, 1, vm.encode(e, f, "float", ci.dtype, ci.storage), mask)


__all__ = ["gemm", "DPBF16_IR", "DPBF16"]
