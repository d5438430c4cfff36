"""Repeated serial loops share one function: the software pipeline's prologue, steady state and
epilogue hold the same row loop several times (the softmax of flash attention four times), and
LLVM's time grows with the code it is given.

A serial loop of tile ops and maps (no gemm, sort, Scope or cross-core flag; constant extents;
no copy from a kernel argument, whose rows of the enclosing loop's next iteration the generator
prefetches during the next gemm: prenorm's A rows) has a *shape*: the loop with each maximal integer subexpression that does not depend on the
loop's own variables replaced by a parameter, and each buffer by its position::

    for row in serial(32):                                for row in serial(32):
        acc_s_1[row, j] = ... cast(3 * 64 + j >= 200)  ->      %b0[row, j] = ... cast(%p0 + j >= 200)
        copy(acc_s_1[row +: 1, 0 +: 64],                       copy(%b0[row +: 1, 0 +: 64],
             ws[vid * 32 + row +: 1, 0 +: 64])                      %b1[%p1 + row +: 1, 0 +: 64])

A shape that occurs at least twice in the kernel becomes an internal `noinline` function
`i32 (scratch, buffer pointers..., parameters...)` returning 0 or the runtime error code the body
stops with (the caller returns it). The parameters' values are computed at each call. The body
is generated assuming each parameter lies in the hull of its intervals over the loops of the
shape (or in the call's own interval when that is not inside the hull), and a call shares it
only when its parameters lie inside the assumed intervals wherever the generator consulted them:
a bounds check proven away for one call is never reused by a call it does not hold for. (Sound
because intervals only ever prove facts: a narrower interval proves at least as much.)
"""
from __future__ import annotations

from dataclasses import replace

import llvmlite.ir as ir

from tilelang_mini.ir.analysis import SYNC_OPS, interval
from tilelang_mini.ir.nodes import (
    Alloc, BinOp, Buffer, Const, Copy, Fill, For, Fused, If, Reduce, Scope, Store, Var,
    body_fields, map_children, walk_statements,
)

from . import vecmath as vm
from .irutil import I32, I64, PTR, Emitter
from .values import Val

_BODY = (For, If, Store, Copy, Fill, Reduce, Fused, Alloc) + tuple(SYNC_OPS)
_INT_OPS = ("+", "-", "*", "//", "%")
MIN_STATEMENTS = 3  # a loop of fewer tile statements is left inline


def _int_leaf(x, bound) -> bool:
    if isinstance(x, Const):
        return isinstance(x.value, int) and not isinstance(x.value, bool)
    if isinstance(x, Var):
        return x.name not in bound and vm.kind_of(x.dtype) == "int"
    return False


def _invariant(x, bound) -> bool:
    """An integer expression of constants and variables bound outside the loop."""
    if isinstance(x, BinOp):
        return x.op in _INT_OPS and _invariant(x.a, bound) and _invariant(x.b, bound)
    return _int_leaf(x, bound)


def _candidate(s) -> bool:
    if not (isinstance(s, For) and s.kind == "serial"):
        return False
    count = 0
    for t in walk_statements((s,)):
        if not isinstance(t, _BODY) or isinstance(t, Copy) and (
                t.atomic or t.dual or t.src.buffer.scope == "global"):
            return False
        if isinstance(t, For) and not all(isinstance(x, Const) for x in t.extents):
            return False
        count += not isinstance(t, (For, Alloc) + tuple(SYNC_OPS))
    return count >= MIN_STATEMENTS


def shape(s):
    """(key, loop with parameters, parameter expressions, buffers) of a candidate loop, else
    None. The loop keeps its buffers (the generator looks them up by name); the key has them
    renamed by position."""
    if not _candidate(s):
        return None
    bound = {v for t in walk_statements((s,)) if isinstance(t, For) for v in t.vars}
    params: dict = {}
    buffers: dict = {}

    def rewrite(x):
        if isinstance(x, Buffer):
            buffers.setdefault(x.name, x)
            return x
        if not isinstance(x, Const) and _invariant(x, bound):
            return Var(params.setdefault(x, f"%p{len(params)}"), "int64")
        return map_children(x, rewrite)

    loop = map_children(s, rewrite)
    names = {n: f"%b{i}" for i, n in enumerate(buffers)}

    def rename(x):
        if isinstance(x, Buffer):
            return replace(x, name=names[x.name])
        return map_children(x, rename)

    return map_children(loop, rename), loop, params, list(buffers.values())


def repeated(kernel) -> dict:
    """{key: {parameter: interval hull over its loops}} of the candidate loops that occur more
    than once in the kernel. The intervals are those of the grid and loop variables (the code
    generator's own are checked at each call: the hulls only widen what one body assumes)."""
    seen: dict = {}
    if kernel.is_npu:
        ranges = {kernel.grid_vars[0]: (0, kernel.grid[0] - 1), kernel.grid_vars[1]: (0, 0)}
    else:
        ranges = {n: (0, g - 1) for n, g in zip(kernel.grid_vars, kernel.grid)}
    _scan(kernel.body, ranges, kernel.grid_vars[1] if kernel.is_npu else None, seen)
    return {k: {p: _hull(rs) for p, rs in hulls.items()}
            for k, (n, hulls) in seen.items() if n > 1}


def _hull(rs):
    if any(r is None for r in rs):
        return None
    return (min(r[0] for r in rs), max(r[1] for r in rs))


def _scan(stmts, ranges, vid, seen):
    for t in stmts:
        if isinstance(t, For):
            sh = shape(t)
            if sh is not None:
                n, hulls = seen.setdefault(sh[0], (0, {}))
                for x, p in sh[2].items():
                    hulls.setdefault(p, []).append(interval(ranges, x))
                seen[sh[0]] = (n + 1, hulls)
            inner = dict(ranges)
            for name, x in zip(t.vars, t.extents):
                inner[name] = (0, x.value - 1) if isinstance(x, Const) and x.value > 0 else None
            _scan(t.body, inner, vid, seen)
        elif isinstance(t, Scope) and t.core == "V" and vid is not None:
            _scan(t.body, {**ranges, vid: (0, 1)}, vid, seen)
        else:
            for name in body_fields(t):
                _scan(getattr(t, name), ranges, vid, seen)


def _within(r, hull) -> bool:
    """Interval r lies inside `hull` (None: unknown, inside only an unknown hull)."""
    return hull is None or r is not None and hull[0] <= r[0] and r[1] <= hull[1]


class _Ranges(dict):
    """Variable intervals that note which parameters' intervals were consulted."""

    def __init__(self, params):
        super().__init__(params)
        self.params, self.used = set(params), set()

    def get(self, name, default=None):
        if name in self.params:
            self.used.add(name)
        return super().get(name, default)

    def __getitem__(self, name):
        if name in self.params:
            self.used.add(name)
        return super().__getitem__(name)


def call_shared(g, s) -> bool:
    """Emit loop `s` as a call of its shape's shared function when the shape repeats (False:
    emit it inline)."""
    if g.par is not None or g.core_kind is not None or not isinstance(s, For) or \
            s.kind != "serial" or not g.repeated:
        return False
    sh = shape(s)
    if sh is None or sh[0] not in g.repeated:
        return False
    key, loop, params, buffers = sh
    infos = [g.info(b) for b in buffers]
    key = (key, g.ctx, tuple((i.storage, i.layout, i.nbytes, i.param is None) for i in infos))
    ranges = {name: g.interval(x) for x, name in params.items()}
    fns = g.loop_fns.setdefault(key, [])
    entry = next((f for f in fns if all(_within(ranges[p], r) for p, r in f[1].items())), None)
    if entry is None:  # assume the intervals of all the loops of this shape where they hold
        hull = g.repeated[sh[0]]
        assumed = {p: hull[p] if _within(r, hull[p]) else r for p, r in ranges.items()}
        entry = _define(g, loop, list(params.values()), infos, assumed)
        fns.append(entry)
    fn = entry[0]
    args = [g.scratch] + [g.buf_ptr(i) for i in infos] + \
        [g.scalar_int(x, "a loop parameter") for x in params]
    b = g.e.b
    r = b.call(fn, args)
    with b.if_then(b.icmp_signed("!=", r, ir.Constant(I32, 0)), likely=False):
        b.ret(r)
    return True


def _define(g, loop, pnames, infos, ranges):
    """(function, consulted parameter intervals) of a new shared loop function."""
    fn = ir.Function(g.module, ir.FunctionType(I32, [PTR] * (1 + len(infos)) + [I64] * len(pnames)),
                     f"tlm_loop{len(g.helpers) + sum(map(len, g.loop_fns.values()))}")
    fn.linkage = "internal"
    fn.attributes.add("noinline")
    scratch, *rest = fn.args
    ptrs, values = rest[:len(infos)], rest[len(infos):]
    saved = (g.e, g.scratch, g.vars, g.ranges, g.loops, g.ptr_override)
    g.e, g.scratch, g.loops = Emitter(g.module, fn), scratch, []
    g.vars = {p: Val(v, "int") for p, v in zip(pnames, values)}
    g.ranges = _Ranges({p: ranges[p] for p in pnames})
    g.ptr_override = {i.name: p for i, p in zip(infos, ptrs)}
    try:
        g.serial_loop(loop)
        g.e.b.ret(ir.Constant(I32, 0))
        used = {p: ranges[p] for p in g.ranges.used}
    finally:
        g.e, g.scratch, g.vars, g.ranges, g.loops, g.ptr_override = saved
    return fn, used
