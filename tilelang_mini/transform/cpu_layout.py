"""infer_panels (llvm target): GEMM B tiles kept in micro-panels, marked on their allocation.

A CPU GEMM reads B in panels of a few columns, row after row (BLIS). A 2-d float tile that is only
written by whole-tile copies and only read as the whole B operand of gemms (all transposed, or
none) can be stored in that order from the start: the copy into it is the packing step (for a
transposed operand it transposes as it packs), and no gemm packs it again. Its allocation gets `panels=True` (the llvm code generator picks the panel width, and
bfloat16 pairs where the host multiplies them natively):

    B_s = alloc_L1((64, 128), "float32")              B_s = alloc_L1((64, 128), "float32", panels=True)
    copy(B[k * 64 +: 64, bx * 128 +: 128], B_s)  ->   copy(B[k * 64 +: 64, bx * 128 +: 128], B_s)
    gemm(A_s, B_s, C_f)                               gemm(A_s, B_s, C_f)

Anything else that touches the tile (an element load, a partial copy, a reduce, a copy out of
it, gemms reading it both transposed and not) keeps it row-major.
"""
from __future__ import annotations

from dataclasses import replace

from ..ir.analysis import GM_SCOPES
from ..ir.nodes import Alloc, Copy, Gemm, Kernel, Load, Region, Store, transform_statements, walk_own, \
    walk_statements

PANEL_DTYPES = ("float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2")


def panel_buffers(kernel: Kernel) -> set:
    """Names of the allocated tiles that can be kept in micro-panels (module docstring)."""
    gemm_b: dict = {}  # name -> {transpose_b of its gemms}
    other: set = set()
    for s in walk_statements(kernel.body):
        if isinstance(s, Alloc):
            continue
        fine = set()
        if isinstance(s, Copy) and not s.transpose and s.dst.is_full:
            fine.add(id(s.dst))
        if isinstance(s, Gemm) and s.b.is_full:
            fine.add(id(s.b))
            gemm_b.setdefault(s.b.buffer.name, set()).add(bool(s.transpose_b))
        for n in walk_own(s):
            if isinstance(n, (Region, Load, Store)) and id(n) not in fine:
                other.add(n.buffer.name)
    out = set()
    for s in walk_statements(kernel.body):
        b = s.buffer if isinstance(s, Alloc) else None
        if (b is not None and len(gemm_b.get(b.name, ())) == 1 and b.name not in other
                and b.scope not in GM_SCOPES and len(b.shape) == 2 and min(b.shape) >= 2
                and b.dtype in PANEL_DTYPES):
            out.add(b.name)
    return out


def infer_panels(kernel: Kernel) -> Kernel:
    """Allocations of tiles only copied into whole and read as gemm B operands get
    `panels=True` (module docstring)."""
    names = panel_buffers(kernel)
    if not names:
        return kernel

    def rewrite(node):
        if isinstance(node, Alloc) and node.buffer.name in names:
            return replace(node, panels=True)
        return node

    return replace(kernel, body=tuple(transform_statements(s, rewrite) for s in kernel.body))
