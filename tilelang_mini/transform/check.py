"""check: shapes, dtypes, regions and constant indices of every tile op -> located errors.

The IR is unchanged (`check(k) is k`); every problem found is reported, the first with its
source line and caret, the rest listed after it:

    copy(A[0 +: 64, 0 +: 32], A_s)      # A_s is (64, 64)
    -> gemm.py:14:13: copy shapes differ: source (64, 32), destination (64, 64)
"""
from __future__ import annotations

from ..errors import CompileError
from ..ir import dtypes
from ..ir.nodes import (
    Alloc, Const, Copy, Fill, For, Gemm, If, Kernel, Load, PipeBarrier, Reduce, Region, Scope,
    SetCrossFlag, SetFlag, Store, WaitCrossFlag, WaitFlag, walk_own, walk_statements,
)

MAX_EVENT_ID = 7
MAX_CROSS_FLAG = 15


def check(kernel: Kernel) -> Kernel:
    errors: list[CompileError] = []
    for stmt in walk_statements(kernel.body):
        for node in walk_own(stmt):
            for message in _problems(node):
                errors.append(CompileError(message, stmt.loc))
    if errors:
        first = errors[0]
        if len(errors) > 1:
            rest = "\n".join(f"  also {e.loc}: {e.message}" for e in errors[1:])
            raise CompileError(first.message, first.loc, notes=rest)
        raise first
    return kernel


def _squeeze(extent) -> tuple[int, ...]:
    return tuple(e for e in extent if e != 1)


def _region_problems(r: Region, role: str):
    b = r.buffer
    if len(r.start) != len(b.shape) or len(r.extent) != len(b.shape):
        yield f"{role} region of '{b.name}' has rank {len(r.extent)}, the buffer {len(b.shape)}"
        return
    for d, (s, n) in enumerate(zip(r.start, r.extent)):
        if n <= 0:
            yield f"{role} region of '{b.name}' has extent {n} in dim {d}; expected > 0"
        if isinstance(s, Const):
            if s.value < 0 or s.value >= b.shape[d]:
                yield (f"{role} index {s.value} in dim {d} is outside '{b.name}' of shape "
                       f"{b.shape}")
            elif b.scope != "global" and s.value + n > b.shape[d]:
                yield (f"{role} region [{s.value}, {s.value + n}) in dim {d} does not fit "
                       f"'{b.name}' of shape {b.shape}")
        elif b.scope != "global" and n > b.shape[d]:
            yield f"{role} extent {n} in dim {d} exceeds '{b.name}' of shape {b.shape}"


INT_MIN, INT_MAX = -(1 << 63), (1 << 63) - 1   # integer arithmetic is 64-bit on every target
FLOAT32_MAX = 3.4028234663852886e38


def _literal_problems(c: Const):
    """A literal the targets cannot represent: they would wrap or overflow differently."""
    v = c.value
    if isinstance(v, bool):
        return
    if isinstance(v, int) and not INT_MIN <= v <= INT_MAX:
        yield (f"integer literal {v} is out of range: integers are computed in 64 bits "
               f"({INT_MIN} to {INT_MAX})")
    elif isinstance(v, float) and c.dtype == "float32" and abs(v) != float("inf") \
            and abs(v) > FLOAT32_MAX:
        yield f"float literal {v!r} overflows float32 (largest finite value {FLOAT32_MAX:.8g})"


def _problems(node):
    if isinstance(node, Const):
        yield from _literal_problems(node)
    elif isinstance(node, Copy):
        yield from _region_problems(node.src, "source")
        yield from _region_problems(node.dst, "destination")
        dual = (node.src.buffer.scope, node.dst.buffer.scope) == ("L0C", "UB") and (
            node.src.extent[0] == 2 * node.dst.extent[0]
            and node.src.extent[1:] == node.dst.extent[1:])  # FixPipe feeds both AIVs a half
        if not dual and _squeeze(node.src.extent) != _squeeze(node.dst.extent):
            yield (f"copy shapes differ: source {node.src.extent}, destination "
                   f"{node.dst.extent}")
    elif isinstance(node, Gemm):
        for r, role in ((node.a, "A"), (node.b, "B"), (node.c, "C")):
            yield from _region_problems(r, f"gemm {role}")
        shapes = [_squeeze_to_2d(r.extent) for r in (node.a, node.b, node.c)]
        if any(s is None for s in shapes):
            yield "gemm operands must be 2-D tiles"
            return
        (m, k), (k2, n), (mc, nc) = shapes
        if node.transpose_a:
            m, k = k, m
        if node.transpose_b:
            k2, n = n, k2
        if k != k2 or (m, n) != (mc, nc):
            yield (f"gemm shapes do not match: A {m}x{k}, B {k2}x{n}, C {mc}x{nc}; expected "
                   f"A MxK, B KxN, C MxN (after transpose_A/transpose_B)")
        if node.a.buffer.dtype != node.b.buffer.dtype:
            yield (f"gemm A and B dtypes differ: {node.a.buffer.dtype} and "
                   f"{node.b.buffer.dtype}")
        if node.c.buffer.dtype not in ("float32", "int32"):
            yield f"gemm accumulates in float32; C is {node.c.buffer.dtype}"
    elif isinstance(node, Fill):
        yield from _region_problems(node.dst, "fill")
    elif isinstance(node, Reduce):
        yield from _region_problems(node.src, "reduce source")
        yield from _region_problems(node.dst, "reduce destination")
        src = list(node.src.extent)
        want = tuple(src[:node.dim] + src[node.dim + 1:])
        keep = tuple(src[:node.dim] + [1] + src[node.dim + 1:])
        if node.dst.extent not in (want, keep) and _squeeze(node.dst.extent) != _squeeze(want):
            yield (f"reduce_{node.kind} over dim {node.dim} of {tuple(src)} gives {want}; the "
                   f"destination is {node.dst.extent}")
    elif isinstance(node, (Store, Load)):
        b = node.buffer
        if len(node.indices) != len(b.shape):
            yield f"'{b.name}' has {len(b.shape)} dimensions, got {len(node.indices)} indices"
        for d, i in enumerate(node.indices):
            if isinstance(i, Const) and not 0 <= i.value < b.shape[min(d, len(b.shape) - 1)]:
                yield f"index {i.value} in dim {d} is outside '{b.name}' of shape {b.shape}"
    elif isinstance(node, Alloc):
        if node.buffer.dtype not in dtypes.DTYPES:
            yield f"unsupported dtype {node.buffer.dtype}"
    elif isinstance(node, (SetFlag, WaitFlag)):
        if not 0 <= node.event <= MAX_EVENT_ID:
            yield f"event id {node.event} is out of range; expected 0-{MAX_EVENT_ID}"
        if node.src == node.dst:
            yield f"a flag orders two different pipes; use pipe_barrier({node.src}) within one"
    elif isinstance(node, (SetCrossFlag, WaitCrossFlag)):
        if not 0 <= node.flag <= MAX_CROSS_FLAG:
            yield f"cross-core flag id {node.flag} is out of range; expected 0-{MAX_CROSS_FLAG}"
    elif isinstance(node, Scope):
        for inner in walk_statements(node.body):
            if isinstance(inner, Scope):
                yield "T.Scope blocks do not nest"
                break
    elif isinstance(node, For) and node.kind == "parallel":
        for s in node.body:
            if not isinstance(s, Store):
                yield "a Parallel loop body holds element assignments only"
    elif isinstance(node, (If, PipeBarrier)):
        return


def _squeeze_to_2d(extent):
    if len(extent) == 2:
        return extent
    squeezed = _squeeze(extent)
    if len(squeezed) == 2:
        return squeezed
    return None


