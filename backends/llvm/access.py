"""Tile regions in generated code: starts, bounds, offsets and vector memory accesses.

What every tile-op emitter shares (codegen_ops.py, reduce.py, packing.py, microkernel.py, ...):
a region's start values and bounds checks, element pointers of a row-major buffer, masked or
strided vector loads and stores, lane masks, and runs of whole vectors with a masked tail.
"""
from __future__ import annotations

import llvmlite.ir as ir

from tilelang_mini.errors import CompileError

from .irutil import I1, I32, I64, STORAGE, VL, Emitter, const, constant, vty

ALL_LANES = ir.Constant(ir.VectorType(I1, VL), [1] * VL)
NO_LANES = ir.Constant(ir.VectorType(I1, VL), [0] * VL)


def squeezed(ext) -> tuple:
    return tuple(n for n in ext if n != 1)


def check_reshape(src_ext, dst_ext, stmt, what: str) -> None:
    n_src = n_dst = 1
    for n in src_ext:
        n_src *= n
    for n in dst_ext:
        n_dst *= n
    if n_src != n_dst or squeezed(src_ext) != squeezed(dst_ext):
        raise CompileError(f"{what}: shapes {list(src_ext)} and {list(dst_ext)} do not match "
                           f"(they must be equal after dropping extent-1 dimensions)", stmt.loc)


def starts_of(g, r):
    nd = len(r.buffer.shape)
    if len(r.start) != nd or len(r.extent) != nd:
        raise g.fail(f"region of {r.buffer.name} has {len(r.start)} starts and "
                     f"{len(r.extent)} extents for a {nd}-d buffer")
    return [g.scalar_int(s, f"a start of the region of {r.buffer.name}") for s in r.start]


def check_in_bounds(g, r, starts):
    """Runtime error unless the region lies inside its buffer (tile ops other than copy)."""
    e, b = g.e, g.e.b
    for d, (sx, sv, n, ext) in enumerate(zip(r.start, starts, r.buffer.shape, r.extent)):
        rng = g.interval(sx)
        if rng is not None and rng[0] >= 0 and rng[1] + ext <= n:
            continue
        bad = b.or_(b.icmp_signed("<", sv, ir.Constant(I64, 0)),
                    b.icmp_signed(">", sv, ir.Constant(I64, n - ext)))
        e.error_if(bad, g.error(f"region out of bounds for dimension {d} of "
                                f"{r.buffer.name}{list(r.buffer.shape)}"))


def base_offset(g, info, starts):
    b = g.e.b
    off = ir.Constant(I64, 0)
    for sv, st in zip(starts, info.strides):
        off = b.add(off, b.mul(sv, ir.Constant(I64, st)))
    return off


def elem_ptr(g, info, base, off):
    """Pointer to element offset `off` (i64 scalar) of a row-major buffer at `base`."""
    size = STORAGE[info.storage][1]
    return g.e.gep(base, g.e.b.mul(off, ir.Constant(I64, size)) if size != 1 else off)


def vload(g, info, base, off, stride, mask):
    """VL raw elements at element offsets off + lane * stride (masked)."""
    e, b = g.e, g.e.b
    rt, size = STORAGE[info.storage]
    if stride == 1:
        return e.masked_load(vty(rt), elem_ptr(g, info, base, off), mask,
                             ir.Constant(vty(rt), None))
    offs = b.mul(b.add(e.splat(off), b.mul(e.iota(), const(vty(I64), stride))),
                 const(vty(I64), size))
    return e.gather(vty(rt), base, offs, mask, ir.Constant(vty(rt), None))


def vstore(g, info, base, off, stride, raw, mask):
    e, b = g.e, g.e.b
    size = STORAGE[info.storage][1]
    if stride == 1:
        e.masked_store(raw, elem_ptr(g, info, base, off), mask)
        return
    offs = b.mul(b.add(e.splat(off), b.mul(e.iota(), const(vty(I64), stride))),
                 const(vty(I64), size))
    e.scatter(raw, base, offs, mask)


def load_if(g, ok, load, zero):
    """`load()` when the i1 `ok` holds, else `zero`, behind a branch: a masked load whose mask
    is all false still costs a memory access, and a slow one (a microcode assist on x86) when
    its address lies outside any mapping, e.g. a clipped tile's rows past the tensor's end."""
    if isinstance(ok, ir.Constant):
        return load() if ok.constant else zero
    b = g.e.b
    with b.if_else(ok) as (then, other):
        with then:
            val = load()
            then_bb = b.block
        with other:
            other_bb = b.block
    phi = b.phi(zero.type)
    phi.add_incoming(val, then_bb)
    phi.add_incoming(zero, other_bb)
    return phi


def lane_mask(g, t0, lo, hi):
    """Lanes t0 + i with lo <= t0 + i < hi (the bounds clamped to a lane index in i32)."""
    e, b = g.e, g.e.b
    lim_lo, lim_hi = ir.Constant(I64, -1), ir.Constant(I64, VL)
    a = b.trunc(e.clamp(b.sub(lo, t0), lim_lo, lim_hi), I32)
    z = b.trunc(e.clamp(b.sub(hi, t0), lim_lo, lim_hi), I32)
    lane = e.iota(VL, I32)
    return b.and_(b.icmp_signed(">=", lane, e.splat(a)), b.icmp_signed("<", lane, e.splat(z)))


def const_mask(n: int):
    """Constant mask of the first n lanes (None when all VL lanes)."""
    if n >= VL:
        return None
    return constant(ir.VectorType(I1, VL), [1] * n + [0] * (VL - n))


def all_in_bounds(g, r, starts):
    """i1: the region lies inside its buffer (constant true when the intervals prove it)."""
    b = g.e.b
    ok = ir.Constant(I1, 1)
    for sx, sv, n, ext in zip(r.start, starts, r.buffer.shape, r.extent):
        rng = g.interval(sx)
        if rng is not None and rng[0] >= 0 and rng[1] + ext <= n:
            continue
        ok = b.and_(ok, b.and_(b.icmp_signed(">=", sv, ir.Constant(I64, 0)),
                               b.icmp_signed("<=", sv, ir.Constant(I64, n - ext))))
    return ok


def valid_range(g, start, ext, n):
    """[lo, hi) of the tile offsets whose element start + t lies inside [0, n)."""
    e, b = g.e, g.e.b
    lo = e.clamp(b.neg(start), ir.Constant(I64, 0), ir.Constant(I64, ext))
    hi = e.clamp(b.sub(ir.Constant(I64, n), start), ir.Constant(I64, 0), ir.Constant(I64, ext))
    return lo, hi


def inside(g, t, lo, hi):
    b = g.e.b
    return b.and_(b.icmp_signed(">=", t, lo), b.icmp_signed("<", t, hi))


def runs(g, lo, hi, fn):
    """fn(t0, mask) over [lo, hi) (hi >= lo): whole vectors unmasked (mask None), then one
    masked tail."""
    e, b = g.e, g.e.b
    end = b.add(lo, b.and_(b.sub(hi, lo), ir.Constant(I64, -VL)))
    if not (isinstance(end, ir.Constant) and isinstance(lo, ir.Constant)
            and end.constant <= lo.constant):  # (no whole vector: no loop)
        with e.loop(lo, end, VL, name="cpv") as t0:
            fn(t0, None)
    tail = b.icmp_signed("<", end, hi)
    if isinstance(tail, ir.Constant):  # known (constant bounds): no tail, or one always run
        if tail.constant:
            fn(end, lane_mask(g, end, lo, hi))
        return
    with b.if_then(tail):
        fn(end, lane_mask(g, end, lo, hi))


def outlined(g, key, emit, *args):
    """Call the internal function `emit(*its arguments)` generates, once per `key`, with `args`
    (LLVM values; the function's parameters take their types): the loops of every tile op with
    the same shapes and layouts share one copy (a pipelined loop's prologue, body and epilogue
    hold the same copy or gemm several times; LLVM's time grows with the code it is given). The
    key holds everything static the body depends on; what differs between calls (pointers,
    offsets, bounds) are the arguments, constants included: building call sites' constants into
    the body duplicated it (prologue constants, loop values) and cost more LLVM time than the
    folding saved (measured on six examples). `noinline`: LLVM optimises the body once."""
    fn = g.helpers.get(key)
    if fn is None:
        fn = ir.Function(g.module, ir.FunctionType(ir.VoidType(), [a.type for a in args]),
                         f"tlm_{key[0]}{len(g.helpers)}")
        fn.linkage = "internal"
        fn.attributes.add("noinline")
        g.helpers[key] = fn
        outer = g.e
        g.e = Emitter(g.module, fn)
        try:
            emit(*fn.args)
            g.e.b.ret_void()
        finally:
            g.e = outer
    g.e.b.call(fn, list(args))
