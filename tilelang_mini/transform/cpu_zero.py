"""infer_uninit (llvm target): mark the allocations a block never reads before writing them whole.

Every grid block starts with its on-chip buffers zeroed (the semantics allocate them zeroed).
The llvm target keeps one arena per worker thread and would have to clear all of it before each
block; this pass finds the buffers whose first use on every path, in every core's program, is a
whole-buffer write (a copy, a fill, a clearing reduce or gemm, a Parallel map storing every
element) and marks their allocation `uninit=True`, so only the others are zeroed:

    x = alloc_ub((32, 64), "float32")                    x = alloc_ub((32, 64), "float32", uninit=True)
    s = alloc_ub((32,), "float32")                ->     s = alloc_ub((32,), "float32")
    copy(X[..], x)                                       copy(X[..], x)
    reduce_sum(x, s, dim=1, clear=False)                 reduce_sum(x, s, dim=1, clear=False)

(`s` is accumulated into before anything writes it, so it still starts zeroed.) A loop whose
extent is not a positive constant may run no iteration, so what its body writes does not count;
after an if, only what both branches write counts. Block-wide buffers (workspace, L1/L0) are one
per block, the others one per core program (the cube's, each AIV's, the code outside a Scope).
"""
from __future__ import annotations

from dataclasses import replace

from ..ir.analysis import BLOCK_SCOPES, SYNC_OPS, full_map_store, is_dual_copy
from ..ir.nodes import (
    Alloc, Const, Copy, Fill, For, Gemm, If, Kernel, Load, Reduce, Region, Scope,
    body_fields, walk, walk_own,
)

_PER_BLOCK = tuple(s for s in BLOCK_SCOPES if s != "global")


def _const_positive(x) -> bool:
    return isinstance(x, Const) and type(x.value) is int and x.value > 0


def zeroed_buffers(kernel: Kernel) -> set:
    """Names of the allocated buffers that a block may read before it has written them whole."""
    params = {p.name for p in kernel.params}
    need: set = set()

    def key(buf, ctx):
        return buf.name, ("block" if buf.scope in _PER_BLOCK else ctx)

    def read(buf, ctx, defined):
        if buf.name not in params and key(buf, ctx) not in defined:
            need.add(buf.name)

    def loads(node, ctx, defined):
        for n in walk_own(node) if isinstance(node, Fill) else walk(node):
            if isinstance(n, Load):
                read(n.buffer, ctx, defined)

    def region_reads(r: Region, ctx, defined):
        starts(r, ctx, defined)
        read(r.buffer, ctx, defined)

    def starts(r: Region, ctx, defined):
        for x in r.start:
            loads(x, ctx, defined)

    def visit(stmts, ctx, defined: set) -> set:
        for s in stmts:
            if isinstance(s, (*SYNC_OPS, Alloc)):
                continue
            if isinstance(s, Scope):
                defined = visit(s.body, s.core, defined)
            elif isinstance(s, For):
                for x in s.extents:
                    loads(x, ctx, defined)
                if s.kind == "parallel":
                    for t in s.body:
                        loads(t, ctx, defined)
                        if full_map_store(t, s):
                            defined = defined | {key(t.buffer, ctx)}
                    continue
                inner = visit(s.body, ctx, set(defined))
                if all(_const_positive(x) for x in s.extents):
                    defined = inner
            elif isinstance(s, If):
                loads(s.cond, ctx, defined)
                d1 = visit(s.then_body, ctx, set(defined))
                d2 = visit(s.else_body, ctx, set(defined))
                defined = d1 & d2
            elif isinstance(s, Copy):
                region_reads(s.src, ctx, defined)
                starts(s.dst, ctx, defined)
                if s.dst.is_full:  # the cube's L0C -> UB copy writes the AIVs' UB
                    defined = defined | {key(s.dst.buffer, "V" if is_dual_copy(s, ctx) else ctx)}
            elif isinstance(s, Fill):
                loads(s, ctx, defined)
                if s.dst.is_full:
                    defined = defined | {key(s.dst.buffer, ctx)}
            elif isinstance(s, (Reduce, Gemm)):  # reads its sources, accumulates into dst
                srcs, dst, clear = (((s.src,), s.dst, s.clear) if isinstance(s, Reduce) else
                                    ((s.a, s.b), s.c, s.clear_accum))
                for r in srcs:
                    region_reads(r, ctx, defined)
                if clear:
                    starts(dst, ctx, defined)
                else:
                    region_reads(dst, ctx, defined)
                if clear and dst.is_full:
                    defined = defined | {key(dst.buffer, ctx)}
            else:  # Store, Sort and anything else: reads only
                loads(s, ctx, defined)
                for n in walk(s):
                    if isinstance(n, Region):
                        read(n.buffer, ctx, defined)
        return defined

    visit(kernel.body, "top", set())
    return need


def infer_uninit(kernel: Kernel) -> Kernel:
    """Allocations of buffers a block writes whole before reading get `uninit=True` (module
    docstring); the others (and those already marked) are left as they are."""
    need = zeroed_buffers(kernel)

    def mark(stmts):
        out = []
        for s in stmts:
            if isinstance(s, Alloc) and not s.uninit and s.buffer.name not in need:
                s = replace(s, uninit=True)
            fields = {f: tuple(mark(getattr(s, f))) for f in body_fields(s)}
            out.append(replace(s, **fields) if fields else s)
        return out

    return replace(kernel, body=tuple(mark(kernel.body)))
