"""check: shapes, dtypes, regions and constant indices of every tile op, the indices of on-chip
tiles that provably leave them (check_bounds.py), and the limits of the
chip being compiled for (event ids, cross-core flags, the bytes of each buffer scope, the
elements of a Parallel loop) -> located errors.

The IR is unchanged (`check(k, chip) is k`); every problem found is reported, the first with its
source line and caret, the rest listed after it:

    copy(A[0 +: 64, 0 +: 32], A_s)      # A_s is (64, 64)
    -> gemm.py:14:13: copy shapes differ: source (64, 32), destination (64, 64)
    set_cross_flag(MTE3, 13)           # on ascend910b
    -> k.py:9:17: cross-core flag id 13 is out of range on ascend910b; expected 0-10
"""
from __future__ import annotations

from dataclasses import fields

from ..arch import DEFAULT_CHIP, Chip, get_chip
from ..errors import CompileError
from ..ir import dtypes
from ..ir.analysis import GM_SCOPES
from ..ir.verifier import IRVerificationError, verify_kernel
from .util import map_bodies, with_body
from .check_bounds import bound_problems
from ..ir.nodes import (
    Loc, body_fields, Alloc, Const, Copy, Fill, For, Gemm, If, Kernel, Load, PipeBarrier, Reduce,
    Region, Scope, Sort,
    SetCrossFlag, SetFlag, Store, WaitCrossFlag, WaitFlag, walk_own, walk_statements,
)

# Deeper expressions are rejected here, before any recursive pass meets them.
MAX_EXPR_DEPTH = 128
# Block ids are 32-bit on the device (and a launch of more blocks would not finish here).
MAX_BLOCKS = 2 ** 31 - 1

# A developer-mode tile may be split or staged by the lowering passes (plan_memory reports
# what does not fit after them); here it only has to fit the largest on-chip scope.
_DEV_SCOPES = ("shared", "fragment")


def without_noop_flags(kernel: Kernel, chip: Chip) -> Kernel:
    """tilelang-ascend's target="pto" flags of an event id outside the chip's range do nothing
    (its templates skip them), so they are dropped:

        set_flag(MTE2, MTE3, 10); copy(...); wait_flag(MTE2, MTE3, 10)   ->   copy(...)"""
    def keep(stmts):
        return [map_bodies(s, keep) for s in stmts
                if not (isinstance(s, (SetFlag, WaitFlag)) and not 0 <= s.event < chip.event_ids)]
    return with_body(kernel, keep(list(kernel.body)))


def check(kernel: Kernel, chip: Chip | str | None = None) -> Kernel:
    """Located CompileErrors for what is wrong in `kernel` on `chip` (default: the default
    chip preset)."""
    if not isinstance(chip, Chip):
        chip = get_chip(chip or DEFAULT_CHIP)
    errors: list[CompileError] = []
    for p in kernel.params:
        if any(type(n) is not int or n <= 0 for n in p.shape):
            errors.append(CompileError(f"parameter '{p.name}' has shape {p.shape}; expected "
                                       f"positive ints", kernel.loc))
    blocks = 1
    for n in kernel.grid:
        blocks *= n if type(n) is int else 1
    if blocks > MAX_BLOCKS:
        errors.append(CompileError(f"the grid {tuple(kernel.grid)} has {blocks} blocks; at most "
                                   f"{MAX_BLOCKS} (block ids are 32-bit): give each block more "
                                   f"work", kernel.loc))
    declared: dict = {p.name: kernel.loc for p in kernel.params}
    for stmt in walk_statements(kernel.body):
        depth = expr_depth(stmt)
        if depth > MAX_EXPR_DEPTH:
            errors.append(CompileError(
                f"an expression nested {depth} levels deep; the compiler takes at most "
                f"{MAX_EXPR_DEPTH} (split it with intermediate tiles or variables)", stmt.loc))
            continue
        if isinstance(stmt, Gemm) and stmt.a.buffer.dtype in ("float8_e4m3fn", "float8_e5m2") \
                and not chip.fp8_cube and stmt.scale_a is None:
            # also expert gemm_v0/mma, which legalize leaves alone (a block-scaled gemm gets
            # legalize's own message)
            errors.append(CompileError(
                f"gemm on {stmt.a.buffer.dtype} operands: the cube of {chip.name} has no FP8; "
                "widen the tiles to bfloat16 first (T.copy to a bfloat16 tile) or compile for a "
                "chip with FP8 (ascend950)", stmt.loc))
            continue
        if isinstance(stmt, Gemm) and stmt.a.buffer.dtype == "int4x2" and not chip.int4_cube:
            errors.append(CompileError(
                f"gemm on int4 operands: the cube of {chip.name} has no int4; unpack the nibbles "
                "into int8 tiles on the vector unit first (`t8[i, k] = t4[i, k]` in a "
                "T.Parallel map) and gemm those, or compile for ascend910b", stmt.loc))
            continue
        if isinstance(stmt, Alloc):  # edited IR text may declare a name twice
            name = stmt.buffer.name
            if name in declared:
                errors.append(CompileError(f"'{name}' is declared twice (first at {declared[name]});"
                                           f" give each buffer its own name", stmt.loc))
            declared.setdefault(name, stmt.loc)
        for node in walk_own(stmt):
            for message in _problems(node):
                errors.append(CompileError(message, stmt.loc))
            for message in _chip_problems(node, chip):
                errors.append(CompileError(message, stmt.loc))
    errors += bound_problems(kernel)
    if not errors:  # the structure of the input itself (IR text may be edited by hand)
        try:
            verify_kernel(kernel, "check")
        except IRVerificationError as err:
            errors.append(CompileError(f"malformed kernel: {err.message}", err.loc or kernel.loc))
    if errors:
        first = errors[0]
        if len(errors) > 1:
            rest = "\n".join(f"  also {e.loc}: {e.message}" for e in errors[1:])
            raise CompileError(first.message, first.loc, notes=rest)
        raise first
    return kernel


def expr_depth(stmt) -> int:
    """How deeply the expressions `stmt` holds nest (its nested statements not included);
    iterative, so any depth is measured."""
    skip = set(body_fields(stmt))
    best = 0
    stack = [(getattr(stmt, f.name), 0) for f in fields(stmt)
             if f.name != "loc" and f.name not in skip]
    while stack:
        value, d = stack.pop()
        if isinstance(value, tuple):
            stack.extend((v, d) for v in value)
        elif hasattr(value, "__dataclass_fields__") and not isinstance(value, Loc):
            best = max(best, d + 1)
            stack.extend((getattr(value, f.name), d + 1) for f in fields(value) if f.name != "loc")
    return best


def deepest_statement(kernel: Kernel):
    """The statement holding the most deeply nested expression (where a RecursionError most
    likely came from), or None."""
    best, where = 0, None
    stack = list(kernel.body)
    while stack:
        s = stack.pop()
        d = expr_depth(s)
        if d > best:
            best, where = d, s
        for name in body_fields(s):
            stack.extend(getattr(s, name))
    return where


def _squeeze(extent) -> tuple[int, ...]:
    return tuple(e for e in extent if e != 1)


def _region_problems(r: Region, role: str):
    b = r.buffer
    if len(r.start) != len(b.shape) or len(r.extent) != len(b.shape):
        yield f"{role} region of '{b.name}' has rank {len(r.extent)}, the buffer {len(b.shape)}"
        return
    for d, (s, n) in enumerate(zip(r.start, r.extent)):
        if isinstance(s, Const) and type(s.value) is not int:
            yield f"{role} start {s.value!r} in dim {d} of '{b.name}' must be an integer"
            continue
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


# The cube's own memories: the vector and scalar units reach neither (IR text may say so).
_CUBE_SCOPES = ("L1", "L0A", "L0B", "L0C")
_VECTOR_TILES = "the vector unit works on UB/fragment tiles, not L1/L0A/L0B/L0C"


def _scope_problems(node):
    """Tiles used by a unit that cannot reach their memory (IR text edited by hand)."""
    if isinstance(node, (Reduce, Sort, Fill)):
        op = {Reduce: "reduce_{}", Sort: "sort", Fill: "fill"}[type(node)].format(
            getattr(node, "kind", ""))
        regions = {Reduce: ("src", "dst"), Sort: ("values", "indices"), Fill: ("dst",)}[type(node)]
        for r in (getattr(node, f) for f in regions):
            if r.buffer.scope in GM_SCOPES:
                yield (f"{op} works on on-chip tiles, but '{r.buffer.name}' is a global tensor; "
                       f"T.copy it into a tile first (or {op} a tile and T.copy that out)")
    if isinstance(node, (Reduce, Sort)):
        op = f"reduce_{node.kind}" if isinstance(node, Reduce) else "sort"
        regions = (node.src, node.dst) if isinstance(node, Reduce) else (node.values, node.indices)
        for r in regions:
            if r.buffer.scope in _CUBE_SCOPES:
                yield (f"{op} runs on the vector unit, but '{r.buffer.name}' is an "
                       f"{r.buffer.scope} tile; {_VECTOR_TILES} (copy it to a UB tile first)")
    elif isinstance(node, (Store, Load)) and node.buffer.scope in _CUBE_SCOPES:
        yield (f"'{node.buffer.name}' is an {node.buffer.scope} tile, read or written element by "
               f"element (a Parallel map or a scalar access); {_VECTOR_TILES} (copy it to a UB "
               f"tile first)")
    elif isinstance(node, Gemm):
        bad = {"A": ("UB", "L0B", "L0C"), "B": ("UB", "L0A", "L0C"), "C": ("UB", "L1", "L0A", "L0B")}
        got = [f"{role} '{r.buffer.name}' in {r.buffer.scope}"
               for role, r in (("A", node.a), ("B", node.b), ("C", node.c))
               if r.buffer.scope in bad[role]]
        if got:
            yield (f"a cube gemm reads A from L0A and B from L0B (or L1/shared tiles staged "
                   f"there) and accumulates C in L0C (or a fragment); got {', '.join(got)}")
        for role, r in (("scale_A", node.scale_a), ("scale_B", node.scale_b)):
            if r is not None and r.buffer.scope not in ("L1", "shared"):
                yield (f"the cube reads block scales from L1: {role} '{r.buffer.name}' must be a "
                       f"shared (L1) tile, got {r.buffer.scope}")


ATOMIC_DTYPES = ("float32", "float16", "bfloat16", "int32")  # what the atomic copy-out combines


def _problems(node):
    yield from _scope_problems(node)
    if isinstance(node, Const):
        yield from _literal_problems(node)
    elif isinstance(node, Copy):
        yield from _region_problems(node.src, "source")
        yield from _region_problems(node.dst, "destination")
        dual = (node.src.buffer.scope, node.dst.buffer.scope) == ("L0C", "UB") and (
            node.src.extent[0] == 2 * node.dst.extent[0]
            and node.src.extent[1:] == node.dst.extent[1:])  # FixPipe feeds both AIVs a half
        if node.transpose:
            sq = _squeeze(node.src.extent)
            if len(sq) != 2 or _squeeze(node.dst.extent) != sq[::-1]:
                yield (f"a transposing copy takes a 2-D tile and gives its transpose; got "
                       f"source {node.src.extent}, destination {node.dst.extent}")
            if (node.src.buffer.scope, node.dst.buffer.scope) not in (("L1", "L0A"),
                                                                       ("L1", "L0B")):
                yield (f"a transposing copy is an L1 -> L0A/L0B load; got "
                       f"{node.src.buffer.scope} -> {node.dst.buffer.scope}")
        elif not dual and _squeeze(node.src.extent) != _squeeze(node.dst.extent):
            yield (f"copy shapes differ: source {node.src.extent}, destination "
                   f"{node.dst.extent}")
        kinds = {node.src.buffer.dtype, node.dst.buffer.dtype}
        if "int4x2" in kinds and len(kinds) == 2:
            other = (kinds - {"int4x2"}).pop()
            yield (f"a copy between int4 and {other} would move packed bytes, not values; "
                   "convert element by element in T.Parallel (`t8[i, k] = t4[i, k]`)")
        if node.atomic == "relu":
            if node.src.buffer.scope not in ("L0C", "fragment"):
                yield (f"a relu copy (enable_relu=True) is the FixPipe's mode: its source is an "
                       f"L0C accumulator; got {node.src.buffer.scope}")
        elif node.atomic and (node.dst.buffer.scope not in GM_SCOPES
                            or node.src.buffer.scope in GM_SCOPES):
            yield (f"an atomic_{node.atomic} copy combines an on-chip tile into a GM tensor; got "
                   f"{node.src.buffer.scope} -> {node.dst.buffer.scope}")
        if node.atomic and node.atomic != "relu" and node.dst.buffer.dtype not in ATOMIC_DTYPES:
            yield (f"atomic_{node.atomic} into {node.dst.buffer.dtype}: the atomic unit combines "
                   f"{', '.join(ATOMIC_DTYPES)}")
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
        if node.a.buffer.dtype == "float8_e8m0fnu":
            yield ("float8_e8m0fnu is a scale format, not a gemm operand; pass it as scale_A / "
                   "scale_B of an FP8 gemm")
        if node.a.buffer.dtype != node.b.buffer.dtype:
            yield (f"gemm A and B dtypes differ: {node.a.buffer.dtype} and "
                   f"{node.b.buffer.dtype}")
        if node.c.buffer.dtype not in ("float32", "int32"):
            dt = node.c.buffer.dtype
            yield (f"gemm accumulates in float32 (int32 for integer operands); C is {dt}: the "
                   f"cube's L0C has no {dt} accumulator. Allocate C as float32 and cast where "
                   f"it is stored (T.copy(C_local, C_out) into a {dt} tile or tensor)")
        if node.scale_gran or node.scale_a is not None or node.scale_b is not None:
            yield from _scale_problems(node)
        elif node.a.buffer.dtype == "int4x2":
            yield from _int4_problems(node)
        elif node.a.buffer.dtype in dtypes.PACKED_K:
            yield (f"{node.a.buffer.dtype} operands (two e2m1 codes a byte) are multiplied by the "
                   f"block-scaled MMAD only: pass scale_A, scale_B and scale_gran")
    elif isinstance(node, Fill):
        yield from _region_problems(node.dst, "fill")
        if node.dst.buffer.dtype == "int4x2" and node.value != Const(0):
            yield ("a fill of an int4 tile would write bytes, not values; T.clear it, or "
                   "store the values element by element in a T.serial loop")
    elif isinstance(node, Reduce):
        yield from _region_problems(node.src, "reduce source")
        yield from _region_problems(node.dst, "reduce destination")
        src = list(node.src.extent)
        want = tuple(src[:node.dim] + src[node.dim + 1:])
        keep = tuple(src[:node.dim] + [1] + src[node.dim + 1:])
        if node.dst.extent not in (want, keep) and _squeeze(node.dst.extent) != _squeeze(want):
            hint = ""
            if len(node.dst.extent) == len(want) and all(
                    isinstance(d, int) and isinstance(w, int) and d >= w
                    for d, w in zip(node.dst.extent, want)):
                part = ", ".join(f"0:{w}" for w in want)
                hint = (f" (a longer destination, e.g. padded to 32 bytes, takes the result in "
                        f"its leading part: pass {node.dst.buffer.name}[{part}])")
            yield (f"reduce_{node.kind} over dim {node.dim} of {tuple(src)} gives {want}; the "
                   f"destination is {node.dst.extent}{hint}")
    elif isinstance(node, Sort):
        v, i = node.values.buffer, node.indices.buffer
        if not (node.values.is_full and node.indices.is_full):
            yield "sort takes whole tiles (values and indices), not regions"
        elif v.shape != i.shape:
            yield f"sort values {v.shape} and indices {i.shape} must have one shape"
        if not (dtypes.is_float(v.dtype) or dtypes.is_int(v.dtype)):
            yield f"sort values must be numbers, got {v.dtype}"
        if i.dtype != "int32":
            yield f"sort indices must be int32, got {i.dtype}"
        if v.scope in ("global", "workspace") or i.scope in ("global", "workspace"):
            yield "sort works on on-chip tiles; copy the data into a fragment first"
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
        if any(type(n) is not int or n <= 0 for n in node.buffer.shape):
            yield f"'{node.buffer.name}' has shape {node.buffer.shape}; expected positive ints"
    elif isinstance(node, (SetFlag, WaitFlag)):
        if node.src == node.dst:
            yield f"a flag orders two different pipes; use pipe_barrier({node.src}) within one"
    elif isinstance(node, Scope):
        for inner in walk_statements(node.body):
            if isinstance(inner, Scope):
                yield "T.Scope blocks do not nest"
                break
    elif isinstance(node, For):
        for e in node.extents if node.kind != "while" else ():  # a while's is its condition
            if isinstance(e, Const) and (type(e.value) is not int or e.value < 0):
                yield (f"a loop extent must be a non-negative integer, got {e.value!r}")
        if node.kind == "parallel":
            for s in walk_statements(node.body):
                if not isinstance(s, (Store, If)):
                    yield "a Parallel loop body holds element assignments only"
                    break
    elif isinstance(node, (If, PipeBarrier)):
        return


def _int4_problems(node: Gemm):
    """An int4 gemm: both operands packed along K (their last dim), an int32 accumulator."""
    if node.transpose_a or not node.transpose_b:
        yield ("an int4 gemm takes A [M, K] and B [N, K] (transpose_B=True): int4 tiles are "
               "packed two a byte along their last dim, which must be K")
    if node.c.buffer.dtype != "int32":
        yield f"an int4 gemm accumulates in int32; C is {node.c.buffer.dtype}"


def _scale_problems(node: Gemm):
    """A block-scaled gemm: FP8 operands, both scale tiles, their shapes (semantics.ops)."""
    from ..semantics.ops import scale_groups
    for r, role in ((node.scale_a, "scale_A"), (node.scale_b, "scale_B")):
        if r is not None:
            yield from _region_problems(r, f"gemm {role}")
    if node.a.buffer.dtype not in ("float8_e4m3fn", "float8_e5m2", "float4_e2m1fn_x2"):
        yield (f"a block-scaled gemm takes FP8 operands (float8_e4m3fn / float8_e5m2) or packed "
               f"FP4 (float4_e2m1fn_x2), got {node.a.buffer.dtype}")
        return
    try:
        scale_groups(node)
    except CompileError as err:
        yield err.message


def _chip_problems(node, chip: Chip):
    """What does not fit `chip`: flag ids, buffer bytes, Parallel loop sizes, scaled MMADs."""
    if isinstance(node, Gemm) and node.scale_gran:
        if not chip.mx_gran:
            yield (f"a block-scaled gemm (scale_A/scale_B) needs a cube that applies block scales "
                   f"itself; {chip.name} has none (apply the scales on the vector unit, or "
                   f"compile for ascend950)")
        elif node.scale_gran % chip.mx_gran:
            yield (f"scale_gran={node.scale_gran}: the cube of {chip.name} scales K groups of "
                   f"{chip.mx_gran}; use a multiple of {chip.mx_gran}")
    if isinstance(node, (SetFlag, WaitFlag)):
        if not 0 <= node.event < chip.event_ids:
            yield (f"event id {node.event} is out of range on {chip.name}; expected "
                   f"0-{chip.event_ids - 1}")
    elif isinstance(node, (SetCrossFlag, WaitCrossFlag)):
        if not 0 <= node.flag < chip.cross_flags:
            yield (f"cross-core flag id {node.flag} is out of range on {chip.name}; expected "
                   f"0-{chip.cross_flags - 1}")
    elif isinstance(node, Alloc):
        b = node.buffer
        if b.dtype not in dtypes.DTYPES:
            return
        size = b.numel * dtypes.itemsize(b.dtype)
        if b.scope in _DEV_SCOPES:
            homes = (max(chip.capacity, key=lambda x: x[1])[0],)
        else:
            homes = (b.scope,) if b.scope in dict(chip.capacity) else ()
        if homes and all(size > chip.capacity_of(h) for h in homes):
            room = " or ".join(f"{h} holds {chip.capacity_of(h)}" for h in homes)
            yield (f"'{b.name}' {b.shape} {b.dtype} takes {size} bytes; on {chip.name} {room} "
                   f"bytes; use a smaller tile")
    elif isinstance(node, For) and node.kind == "parallel":
        n = 1
        for e in node.extents:
            n *= e.value if isinstance(e, Const) and isinstance(e.value, int) else 1
        most = max(c for _, c in chip.capacity)
        if n > most:
            yield (f"T.Parallel over {n} elements is larger than any tile on {chip.name} (the "
                   f"largest buffer, {max(chip.capacity, key=lambda x: x[1])[0]}, holds {most} "
                   f"bytes); a Parallel loop works on a tile, so tile the loop")


def _squeeze_to_2d(extent):
    if len(extent) == 2:
        return extent
    squeezed = _squeeze(extent)
    if len(squeezed) == 2:
        return squeezed
    return None


