"""Copies with a mode: atomic copies and transposing copies.

Atomic copies (`copy(x, C[...], atomic_add=True)`): dst = dst op src on a GM tensor that the
blocks running on other threads update too.

The blocks of a launch run on several threads, so each atomic copy holds one spin lock of the
kernel module (a global i32 taken with an acquire cmpxchg, released with a release store) while
it reads, combines and writes its destination region: the copies of different blocks are
serialised, whatever the dtype (fp16/bf16 have no native atomic add on the CPU), and a thread
sees every earlier holder's writes. Nothing inside the locked section can fail (region starts
are computed before the lock is taken), so the lock is always released.

Values combine as semantics/ops.py `_combiner` says: float32 arithmetic for float
destinations, int64 for integers, then the destination's rounding/wrapping. Source elements
outside the source buffer count as zeros and destination elements outside the tensor are
dropped, as for a plain copy.
"""
from __future__ import annotations

import llvmlite.ir as ir

from . import vecmath as vm
from .access import (
    base_offset, check_in_bounds, check_reshape, lane_mask, starts_of, valid_range, vload, vstore,
)
from .irutil import F32, I32, I64, STORAGE, VL, constant, vty

LOCK = "tlm_atomic_lock"


def _lock(g):
    m = g.e.module
    lock = m.globals.get(LOCK)
    if lock is None:
        lock = ir.GlobalVariable(m, I32, LOCK)
        lock.linkage = "internal"
        lock.initializer = ir.Constant(I32, 0)
        lock.align = 64
    return lock


def _acquire(g, lock):
    e, b = g.e, g.e.b
    spin = e.fn.append_basic_block("atomic.spin")
    held = e.fn.append_basic_block("atomic.held")
    b.branch(spin)
    b.position_at_end(spin)
    res = b.cmpxchg(lock, ir.Constant(I32, 0), ir.Constant(I32, 1), "acquire", "monotonic")
    b.cbranch(b.extract_value(res, 1), held, spin)
    b.position_at_end(held)


def _release(g, lock):
    g.e.b.store_atomic(ir.Constant(I32, 0), lock, "release", 4)


def _combine(g, kind: str, old, new, is_float: bool):
    e, b = g.e, g.e.b
    if kind == "relu":  # the FixPipe's relu mode (a plain write of max(src, 0))
        zero = ir.Constant(new.type, None)
        return vm.fmax(e, new, zero) if is_float else e.smax(new, zero)
    if kind == "add":
        return b.fadd(old, new) if is_float else b.add(old, new)
    if is_float:
        return (vm.fmax if kind == "max" else vm.fmin)(e, old, new)
    return e.smax(old, new) if kind == "max" else e.smin(old, new)


def _as_kind(g, v, src_kind: str, dst_float: bool):
    """A decoded source vector in the destination's arithmetic (f32 or i64)."""
    b = g.e.b
    if src_kind == "bool":
        v = b.zext(v, vty(I64))
        src_kind = "int"
    if dst_float and src_kind == "int":
        return b.sitofp(v, vty(F32))
    if not dst_float and src_kind == "float":
        return b.fptosi(v, vty(I64))
    return v


def atomic_copy(g, s) -> None:
    src, dst = s.src, s.dst
    check_reshape(src.extent, dst.extent, s, "atomic copy")
    si, di = g.info(src.buffer), g.info(dst.buffer)
    if si.layout != "row" or di.layout != "row":
        raise g.fail(f"internal: atomic copy with a packed buffer ({si.name} -> {di.name})")
    ss, ds = starts_of(g, src), starts_of(g, dst)
    e, b = g.e, g.e.b
    s_rng = [valid_range(g, a, x, n) for a, x, n in zip(ss, src.extent, src.buffer.shape)]
    d_rng = [valid_range(g, a, x, n) for a, x, n in zip(ds, dst.extent, dst.buffer.shape)]
    s_dims = [d for d, x in enumerate(src.extent) if x != 1] or [len(src.extent) - 1]
    d_dims = [d for d, x in enumerate(dst.extent) if x != 1] or [len(dst.extent) - 1]
    true = ir.Constant(ir.IntType(1), 1)
    s_ok, d_ok = true, true
    for d, x in enumerate(src.extent):
        if d not in s_dims:
            s_ok = b.and_(s_ok, b.icmp_signed("<", *s_rng[d]))
    for d, x in enumerate(dst.extent):
        if d not in d_dims:
            d_ok = b.and_(d_ok, b.icmp_signed("<", *d_rng[d]))
    sbase, dbase = g.buf_ptr(si), g.buf_ptr(di)
    s_off0 = base_offset(g, si, ss)
    d_off0 = base_offset(g, di, ds)
    dst_float = vm.kind_of(di.dtype) == "float"
    src_kind = vm.kind_of(si.dtype)
    exts = [src.extent[d] for d in s_dims]
    lock = _lock(g)
    _acquire(g, lock)

    def nest(q, s_in, d_in, s_off, d_off):
        sd, dd = s_dims[q], d_dims[q]
        if q == len(exts) - 1:
            with b.if_then(d_in):
                sst, dst_ = si.strides[sd], di.strides[dd]
                dlo, dhi = d_rng[dd]
                slo, shi = s_rng[sd]
                with e.loop(0, exts[q], VL, name="atom") as t0:
                    dmask = lane_mask(g, t0, dlo, dhi)
                    smask = b.and_(lane_mask(g, t0, slo, shi), e.splat(s_in))
                    raw = vload(g, si, sbase, b.add(s_off, b.mul(t0, ir.Constant(I64, sst))),
                                sst, smask)
                    zero = ir.Constant(vty(STORAGE[si.storage][0]), None)
                    raw = b.select(smask, raw, zero)
                    new = _as_kind(g, vm.decode(e, raw, si.storage), src_kind, dst_float)
                    at = b.add(d_off, b.mul(t0, ir.Constant(I64, dst_)))
                    old = vm.decode(e, vload(g, di, dbase, at, dst_, dmask), di.storage)
                    out = _combine(g, s.atomic, old, new, dst_float)
                    kind = "float" if dst_float else "int"
                    vstore(g, di, dbase, at, dst_, vm.encode(e, out, kind, di.dtype, di.storage),
                           dmask)
            return
        with e.loop(0, exts[q], name=f"atom{q}") as t:
            nest(q + 1,
                 b.and_(s_in, b.and_(b.icmp_signed(">=", t, s_rng[sd][0]),
                                     b.icmp_signed("<", t, s_rng[sd][1]))),
                 b.and_(d_in, b.and_(b.icmp_signed(">=", t, d_rng[dd][0]),
                                     b.icmp_signed("<", t, d_rng[dd][1]))),
                 b.add(s_off, b.mul(t, ir.Constant(I64, si.strides[sd]))),
                 b.add(d_off, b.mul(t, ir.Constant(I64, di.strides[dd]))))

    nest(0, s_ok, d_ok, s_off0, d_off0)
    _release(g, lock)


def transposed_copy(g, s) -> None:
    """`copy(K_l1, K_l0b, transpose=True)`: dst[j, i] = src[i, j] over the 2-D tile (extent-1
    dims aside); one source row at a time, VL columns per step, scattered into a dst column."""
    src, dst = s.src, s.dst
    si, di = g.info(src.buffer), g.info(dst.buffer)
    if si.layout != "row" or di.layout != "row":
        raise g.fail(f"internal: transposing copy with a packed buffer ({si.name} -> {di.name})")
    sd = [d for d, x in enumerate(src.extent) if x != 1]
    dd = [d for d, x in enumerate(dst.extent) if x != 1]
    if len(sd) != 2 or len(dd) != 2:
        raise g.fail("internal: a transposing copy of a tile that is not 2-D")
    ss, ds = starts_of(g, src), starts_of(g, dst)
    check_in_bounds(g, src, ss)
    check_in_bounds(g, dst, ds)
    e, b = g.e, g.e.b
    sbase, dbase = g.buf_ptr(si), g.buf_ptr(di)
    s_off0, d_off0 = base_offset(g, si, ss), base_offset(g, di, ds)
    rows, cols = src.extent[sd[0]], src.extent[sd[1]]
    s_row, s_col = si.strides[sd[0]], si.strides[sd[1]]
    d_row, d_col = di.strides[dd[0]], di.strides[dd[1]]  # dst row j <- src column j
    kind = vm.kind_of(si.dtype)
    full = constant(ir.VectorType(ir.IntType(1), VL), [1] * VL)
    with e.loop(0, rows, name="tr") as r:
        with e.loop(0, cols, VL, name="tc") as c0:
            mask = lane_mask(g, c0, ir.Constant(I64, 0), ir.Constant(I64, cols))
            mask = b.and_(mask, full)
            s_at = b.add(s_off0, b.add(b.mul(r, ir.Constant(I64, s_row)),
                                       b.mul(c0, ir.Constant(I64, s_col))))
            raw = vload(g, si, sbase, s_at, s_col, mask)
            val = vm.encode(e, vm.decode(e, raw, si.storage), kind, di.dtype, di.storage,
                            si.dtype if si.dtype in vm.FLOATS else None)
            d_at = b.add(d_off0, b.add(b.mul(r, ir.Constant(I64, d_col)),
                                       b.mul(c0, ir.Constant(I64, d_row))))
            vstore(g, di, dbase, d_at, d_row, val, mask)
