"""tilelang-ascend's `workspace_idx` tensors are scratch GM the runtime allocates for each call.
A kernel here runs its statements in program order (developer mode splits them between the
cube and the vector cores and keeps that order with flags), so a workspace read before any
statement writes it can only see the zeros of a fresh allocation. tilelang-ascend examples
written for `TL_ASCEND_AUTO_CV_COMBINE` rely on something else: their cube and vector statements
run as two concurrent programs, each workspace read waiting for the other side's write of the
same loop iteration, wherever that write stands in the source:

    for i in T.serial(n):
        T.copy(workspace_1[cid, ...], kv_l1)       # cube: waits for the vector write below
        ...
        T.copy(kv_ub, workspace_1[cid, ...])       # vector: gathers this iteration's rows

Such a kernel is a located error (not a silent wrong number): the first read of a workspace that
comes before every write of it.
"""
from __future__ import annotations

from ..errors import CompileError
from ..ir.nodes import (Copy, Fill, Gemm, Kernel, Load, Reduce, Region, Scope, SetCrossFlag, Sort,
                        Store, WaitCrossFlag, walk_own, walk_statements)


def check_workspace_order(kernel: Kernel, workspace_idx) -> None:
    """Developer-mode kernels only: T.Scope blocks and cross-core flags are the expert's own
    concurrent programs and hand-offs."""
    if any(isinstance(s, (Scope, SetCrossFlag, WaitCrossFlag)) for s in walk_statements(kernel.body)):
        return
    names = {kernel.params[i].name for i in workspace_idx}
    written: set[str] = set()
    for s in walk_statements(kernel.body):
        writes = _writes(s) & names
        for n in walk_own(s):
            buf = n.buffer.name if isinstance(n, (Region, Load)) else None
            if buf in names and buf not in written and not _is_write_region(s, n):
                raise CompileError(
                    f"workspace '{buf}' (a workspace_idx scratch tensor) is read here before any "
                    f"statement writes it: this kernel relies on tilelang-ascend's "
                    f"TL_ASCEND_AUTO_CV_COMBINE running its cube and vector statements as two "
                    f"concurrent programs that meet at the workspaces; here statements run in "
                    f"program order. Write the producer before the consumer in the loop body, or "
                    f"spell the two programs as T.Scope(\"C\") / T.Scope(\"V\") blocks with "
                    f"T.set_cross_flag / T.wait_cross_flag (tilelang-ascend's flash_attn_bhsd.py "
                    f"form)", s.loc)
        written |= writes


def _writes(s) -> set:
    if isinstance(s, Copy):
        return {s.dst.buffer.name}
    if isinstance(s, (Fill, Reduce)):
        return {s.dst.buffer.name}
    if isinstance(s, Gemm):
        return {s.c.buffer.name}
    if isinstance(s, Store):
        return {s.buffer.name}
    if isinstance(s, Sort):
        return {s.values.buffer.name, s.indices.buffer.name}
    return set()


def _is_write_region(s, n) -> bool:
    """`n` is the region `s` writes (not read), or the destination of a plain store."""
    if isinstance(s, Copy):
        return n is s.dst and not s.atomic
    if isinstance(s, Fill):
        return n is s.dst
    if isinstance(s, Reduce):
        return n is s.dst and s.clear
    if isinstance(s, Gemm):
        return n is s.c and s.clear_accum
    return False  # a sort reads what it permutes
