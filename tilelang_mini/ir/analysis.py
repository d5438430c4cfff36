"""What every pass, the simulator and the backends ask of an instruction, written once.

Op groups and scope groups (import these; never write a second list of sync ops or GM scopes):

    SYNC_OPS     set_flag, wait_flag, pipe_barrier, set_cross_flag, wait_cross_flag
    TILE_OPS     copy, gemm, fill, reduce
    GM_SCOPES    global, workspace                one instance per launch / per block, off chip
    AIC_SCOPES   L1, L0A, L0B, L0C                the cube core's buffers
    BLOCK_SCOPES GM_SCOPES + AIC_SCOPES           one instance per block (UB and var: per core)

An *instruction* is a tile op, a scalar Store, a Parallel map (`For` of kind "parallel", taken
whole) or a sync op. Its *operands* are the regions, loads and stores it touches, each with its
direction; `reads`/`writes` are the buffers behind them (a region's start expressions are reads
too: an index loaded from a buffer reads it). A gemm without clear_accum and a reduce without
clear read their destination as well as writing it.

    copy(A[i, 0 +: 32], A_s)     operands: (A[i, 0 +: 32], read), (A_s, write)
    gemm(A_s, B_s, C_f)          operands: (A_s, read), (B_s, read), (C_f, read), (C_f, write)
"""
from __future__ import annotations

from .nodes import (
    GLOBAL_SCOPES, SYNC_OPS, TILE_OPS, Alloc, BinOp, Buffer, Call, Const, Copy, Fill, For, Gemm,
    If, Load, Reduce, Sort, Var,
    Region, Scope, Store, body_fields, walk, walk_own, walk_statements,
)

GM_SCOPES = GLOBAL_SCOPES
AIC_SCOPES = ("L1", "L0A", "L0B", "L0C")
BLOCK_SCOPES = GM_SCOPES + AIC_SCOPES
# dtypes an on-chip tile may be stored widened to float32 (Alloc.widened; GM never is)
WIDENABLE_DTYPES = ("float16", "bfloat16", "float8_e4m3fn", "float8_e5m2")

__all__ = ["SYNC_OPS", "TILE_OPS", "GM_SCOPES", "AIC_SCOPES", "BLOCK_SCOPES", "is_map",
           "is_sync", "core_instructions", "instructions", "loads", "map_stores", "operands", "reads", "writes",
           "accesses", "written_names", "static_box", "boxes_overlap", "buffer_refs",
           "full_map_store", "interval", "attained_interval", "exact_boxes", "is_expert",
           "is_dual_copy", "can_widen", "WIDENABLE_DTYPES", "aiv_uniform", "issue_loads",
           "independent_nest"]


def is_map(s) -> bool:
    """A Parallel loop: an elementwise map, one instruction."""
    return isinstance(s, For) and s.kind == "parallel"


def independent_nest(s: For) -> For | None:
    """The Parallel map that computes what serial loop nest `s` computes, or None: a perfect
    nest of serial loops of constant extents whose innermost body holds only Stores and Ifs,
    where every Store writes an on-chip buffer at indices holding each of the nest's variables
    bare (so no two iterations write one element), the Stores to a buffer all at the same
    indices, and every Load of a buffer stored in the nest at those indices (an iteration reads
    of it only the element it writes itself); no division by a non-constant (a fault of one
    iteration stays a fault). Its iterations are independent, so the map, which runs each
    statement for all iterations in turn, gives the same values (an interpreter runs it as one
    vector operation per statement instead of one scalar operation per iteration).

        for j in serial(32):                    for j, k in Parallel(32, 64):
            for k in serial(64):        ->          if j + vid * 32 < k:
                if j + vid * 32 < k:                    acc[j, k] = zero[j, k]
                    acc[j, k] = zero[j, k]
    """
    names, exts, body = [], [], (s,)
    while len(body) == 1 and isinstance(body[0], For) and body[0].kind in ("serial", "unroll"):
        f = body[0]
        if f.num_stages or len(f.vars) != len(f.extents) or not all(
                isinstance(e, Const) for e in f.extents):
            return None
        names, exts, body = names + list(f.vars), exts + list(f.extents), f.body
    if not names or len(set(names)) != len(names):
        return None
    stored: dict = {}
    for st in walk_statements(body):
        if isinstance(st, If):
            continue
        if not isinstance(st, Store) or st.buffer.scope in GM_SCOPES:
            return None
        bare = sorted(i.name for i in st.indices if isinstance(i, Var) and i.name in names)
        if bare != sorted(names) or stored.setdefault(st.buffer.name, st.indices) != st.indices:
            return None
    for st in walk_statements(body):
        for n in walk_own(st):
            if isinstance(n, Load) and stored.get(n.buffer.name, n.indices) != n.indices:
                return None
            if (isinstance(n, BinOp) and n.op in ("/", "//", "%") and not isinstance(n.b, Const)
                    or isinstance(n, Call) and n.fn == "ceildiv"):
                return None
    return For(tuple(names), tuple(exts), "parallel", tuple(body), loc=s.loc)


def is_sync(s) -> bool:
    return isinstance(s, SYNC_OPS)


def is_dual_copy(s, core) -> bool:
    """An L0C -> UB copy on the cube core (`core` "C"): the FixPipe writes the UB of both vector
    cores of the block, not a buffer of the core that runs it."""
    return (isinstance(s, Copy) and core == "C" and s.src.buffer.scope == "L0C"
            and s.dst.buffer.scope == "UB")


def can_widen(b: Buffer) -> bool:
    """Whether buffer `b` may be stored as float32 (Alloc.widened): an on-chip 16-/8-bit float."""
    return b.dtype in WIDENABLE_DTYPES and b.scope not in GM_SCOPES


def is_expert(kernel) -> bool:
    """Expert-mode kernels place their own Scopes and flags; the compiler only checks them."""
    return any(isinstance(s, (Scope, *SYNC_OPS)) for s in walk_statements(kernel.body))


def core_instructions(body, core: str | None = None):
    """(instruction, core) in program order: Scope blocks, serial loops and ifs are entered
    (core: the enclosing Scope's, or `core`), Parallel maps are not; Allocs are skipped."""
    for s in body:
        if is_map(s):
            yield s, core
        elif isinstance(s, Scope):
            yield from core_instructions(s.body, s.core)
        elif body_fields(s):
            for f in body_fields(s):
                yield from core_instructions(getattr(s, f), core)
        elif not isinstance(s, Alloc):
            yield s, core


def instructions(body):
    """The instructions of `body` in program order (as `core_instructions`, without the core)."""
    return (s for s, _ in core_instructions(body))


def loads(node) -> list[Load]:
    """The Load nodes of `node` (an expression, region or statement, not its nested statements)."""
    if not hasattr(node, "__dataclass_fields__"):
        return []
    return [n for n in walk_own(node) if isinstance(n, Load)]


def map_stores(stmt) -> list[Store]:
    """The Stores of a scalar Store or a Parallel map (at any depth of its body)."""
    if isinstance(stmt, Store):
        return [stmt]
    if is_map(stmt):
        return [s for s in walk_statements(stmt.body) if isinstance(s, Store)]
    return []


def issue_loads(stmt) -> list[Load]:
    """The element reads the scalar unit makes as it issues `stmt` (docs/machine_model.md): it
    evaluates an if's condition, a loop's extents (a Parallel map's too) and the start indices
    of a tile op's regions before any pipe runs the statement, so these reads are S reads
    ordered by flags to S, whatever pipe then runs the instruction:

        copy(K[ids[i] +: 1, 0 +: 32], k)      ids[i]: read by S as the copy is issued (MTE2 then)
        if row[kb] != 0: ...                   row[kb]: read by S
        for i, j in Parallel(n[0], 32): ...    n[0]: read by S; the body's reads: V's"""
    if isinstance(stmt, If):
        return loads(stmt.cond)
    if isinstance(stmt, For):
        return [ld for e in stmt.extents for ld in loads(e)]
    if isinstance(stmt, (*TILE_OPS, Sort)):
        return [ld for r in walk_own(stmt) if isinstance(r, Region) for e in r.start
                for ld in loads(e)]
    return []


# The write flag of an atomic copy's destination: a read-modify-write that commutes with the
# other atomic writes of the same kind (two of them never conflict; anything else does).
ATOMIC = "atomic"


def is_atomic_pair(w1, w2) -> bool:
    """Two accesses that are atomic read-modify-writes of the same kind: they commute."""
    return isinstance(w1, tuple) and w1 == w2


def operands(stmt, accumulate: bool = True) -> list[tuple]:
    """[(Region | Load | Store, is_write)] of an instruction, reads before writes. With
    `accumulate=False` an accumulating gemm/reduce lists its destination as a write only.
    An atomic copy's destination is one operand whose write flag is (ATOMIC, kind): truthy,
    a read as well as a write (`reads`), commuting with atomic writes of the same kind."""
    if isinstance(stmt, Copy):
        if stmt.atomic and stmt.atomic != "relu":  # relu: the FixPipe mode, a plain write
            return [(stmt.src, False), (stmt.dst, (ATOMIC, stmt.atomic))]
        return [(stmt.src, False), (stmt.dst, True)]
    if isinstance(stmt, Gemm):
        acc = [] if stmt.clear_accum or not accumulate else [(stmt.c, False)]
        scales = [(r, False) for r in (stmt.scale_a, stmt.scale_b) if r is not None]
        return [(stmt.a, False), (stmt.b, False), *scales, *acc, (stmt.c, True)]
    if isinstance(stmt, Reduce):
        acc = [] if stmt.clear or not accumulate else [(stmt.dst, False)]
        return [(stmt.src, False), *acc, (stmt.dst, True)]
    if isinstance(stmt, Fill):
        return [(ld, False) for ld in loads(stmt.value)] + [(stmt.dst, True)]
    if isinstance(stmt, Sort):
        return [(stmt.values, False), (stmt.indices, False), (stmt.values, True),
                (stmt.indices, True)]
    out = []
    if is_map(stmt):  # the conditions of the ifs that guard some of its stores
        out += [(ld, False) for s in walk_statements(stmt.body) if isinstance(s, If)
                for ld in loads(s)]
    for st in map_stores(stmt):
        out += [(ld, False) for ld in loads(st)]
        out.append((st, True))
    return out


def reads(stmt) -> list[Buffer]:
    """Buffers an instruction reads (operands, and loads in its regions' start indices)."""
    out = []
    for node, write in operands(stmt):
        if isinstance(node, Region):
            out += [ld.buffer for ld in loads(node)]
        if not write or isinstance(write, tuple):
            out.append(node.buffer)
    return out


def writes(stmt) -> list[Buffer]:
    """Buffers an instruction writes."""
    return [node.buffer for node, write in operands(stmt) if write]


def exact_boxes(stmt, accumulate: bool = True) -> list[bool]:
    """Per operand of `operands(stmt, accumulate)`: is its element box (a region's box, or the
    box of a map's indices over the map's whole index space) exactly the set of elements the
    instruction touches, for every value of the variables outside it? A region, a scalar Store
    and its loads: yes. In a Parallel map, an access is exact when it is not under an if of the
    map's body and each index is a map variable plus (or minus) an expression free of map
    variables, or free of them altogether, no map variable indexing two dimensions:

        for i, j in Parallel(8, 4): Y[r + i, j] = X[i, 2 * j]     Y: exact; X: not (stride 2)
        for i in Parallel(8): if m[i] > 0: Y[i] = 1.0             Y: not (guarded); m: exact

    A box that is not exact over-approximates: an overlap with it proves nothing."""
    ops = operands(stmt, accumulate)
    if not is_map(stmt):
        return [True] * len(ops)
    mvars = set(stmt.vars)
    guarded: set = set()  # ids of the Stores (and their loads) under an if of the map's body

    def visit(body, under):
        for st in body:
            if isinstance(st, Store):
                if under:
                    guarded.add(id(st))
                    guarded.update(id(ld) for ld in loads(st))
            elif isinstance(st, If):
                if under:  # a condition evaluated only where an outer one holds
                    guarded.update(id(ld) for ld in loads(st))
                visit(st.then_body, True)
                visit(st.else_body, True)
            else:  # a nested loop or anything else: its accesses repeat, not a box
                for inner in walk_statements([st]):
                    guarded.add(id(inner))
                    guarded.update(id(ld) for ld in loads(inner))
    visit(stmt.body, False)

    def free(x) -> bool:
        return not any(isinstance(n, Var) and n.name in mvars for n in walk(x))

    def var_of(x):
        """The map variable of an index `v`, `v + e`, `e + v`, `v - e`; "" if free; else None."""
        if free(x):
            return ""
        if isinstance(x, Var):
            return x.name
        if isinstance(x, BinOp) and x.op in ("+", "-"):
            if isinstance(x.a, Var) and x.a.name in mvars and free(x.b):
                return x.a.name
            if x.op == "+" and isinstance(x.b, Var) and x.b.name in mvars and free(x.a):
                return x.b.name
        return None

    def exact(node) -> bool:
        if isinstance(node, Region):
            return True
        if id(node) in guarded:
            return False
        used = [var_of(ix) for ix in node.indices]
        named = [v for v in used if v]
        return None not in used and len(named) == len(set(named))
    return [exact(node) for node, _ in ops]


def accesses(stmt) -> tuple[set[str], set[str]]:
    """(names of the buffers read, names of the buffers written) by an instruction."""
    return {b.name for b in reads(stmt)}, {b.name for b in writes(stmt)}


def written_names(stmt) -> set[str]:
    """Names of the buffers `stmt` and every statement nested in it write."""
    out = set()
    for n in walk_statements((stmt,)):  # (writers are statements: no need to visit expressions)
        if isinstance(n, (*TILE_OPS, Store)):
            out.update(b.name for b in writes(n))
    return out


def static_box(r: Region):
    """((lo, hi), ...) per dimension when every start is a constant, else None."""
    if all(isinstance(s, Const) for s in r.start):
        return tuple((s.value, s.value + n) for s, n in zip(r.start, r.extent))
    return None


def boxes_overlap(a, b) -> bool:
    """Do two boxes overlap? None is an unknown box and overlaps everything."""
    return a is None or b is None or all(a0 < b1 and b0 < a1 for (a0, a1), (b0, b1) in zip(a, b))


def buffer_refs(body) -> dict:
    """{buffer name: how many regions, loads and stores below the statements `body` name it}."""
    refs: dict = {}
    for s in body:
        for n in walk(s):
            if isinstance(n, (Region, Load, Store)):
                refs[n.buffer.name] = refs.get(n.buffer.name, 0) + 1
    return refs


def full_map_store(s, loop) -> bool:
    """Store `s` of Parallel loop `loop` writes every element of its buffer exactly once
    (`for i, j in Parallel(M, N): X[i, j] = ...` with X of shape (M, N))."""
    return (isinstance(s, Store) and len(s.indices) == len(loop.vars) == len(s.buffer.shape)
            and all(type(ix).__name__ == "Var" and ix.name == n
                    for ix, n in zip(s.indices, loop.vars))
            and all(isinstance(x, Const) and type(x.value) is int and x.value == n
                    for x, n in zip(loop.extents, s.buffer.shape)))


def interval(ranges, x):
    """(lo, hi) bounds of an integer expression under variable ranges, or None."""
    if isinstance(x, Const):
        if isinstance(x.value, bool) or not isinstance(x.value, int):
            return None
        return (x.value, x.value)
    if isinstance(x, Var):
        return ranges.get(x.name)
    if isinstance(x, BinOp) and x.op in ("+", "-", "*", "//", "%"):
        a, c = interval(ranges, x.a), interval(ranges, x.b)
        if x.op == "%" and a is None and c is not None and c[0] == c[1] and c[0] > 0:
            return (0, c[0] - 1)  # floor modulo by a positive constant, whatever the dividend
        if a is None or c is None:
            return None
        if x.op == "+":
            return (a[0] + c[0], a[1] + c[1])
        if x.op == "-":
            return (a[0] - c[1], a[1] - c[0])
        if x.op == "*":
            ps = [p * q for p in a for q in c]
            return (min(ps), max(ps))
        if c[0] != c[1] or c[0] <= 0:
            return None
        d = c[0]
        if x.op == "//":
            return (a[0] // d, a[1] // d)
        return (a[0], a[1]) if a[0] >= 0 and a[1] < d else (0, d - 1)
    if isinstance(x, Call) and x.fn in ("max", "min") and len(x.args) == 2:
        a, c = interval(ranges, x.args[0]), interval(ranges, x.args[1])
        if a is None or c is None:
            return None
        f = max if x.fn == "max" else min
        return (f(a[0], c[0]), f(a[1], c[1]))
    return None


def aiv_uniform(body, vid: str) -> set[int]:
    """ids of the instructions of `body` that do the same on both vector cores (vid 0 and 1)
    at the same point of their programs: nothing in them, in the conditions and loop extents
    around them, or in the data they read depends on `vid`. A buffer's data depends on it
    once a dependent instruction writes it; a GM buffer the body writes at all is read as
    dependent (another core may write it between the two AIVs' reads). Two AIVs running such
    a write put the same bytes at the same place, in either order:

        copy(X[cid, 0], x); ... x ...; copy(x, Y[cid, 0])      uniform (both write Y[cid] alike)
        copy(X[cid, vid * 8], x); copy(x, Y[cid, 0])           not: x differs per AIV"""
    def mentions_vid(nodes):
        return any(isinstance(n, Var) and n.name == vid for x in nodes for n in walk(x))
    gm_written = {b.name for s in instructions(body) for b in writes(s)
                  if b.scope in GLOBAL_SCOPES}
    varying = set(gm_written)
    while True:
        bad: set[int] = set()
        before = len(varying)

        def visit(stmts, ctrl):
            for st in stmts:
                if isinstance(st, For) and st.kind != "parallel" or isinstance(st, If):
                    heads = list(st.extents) if isinstance(st, For) else [st.cond]
                    dep = ctrl or mentions_vid(heads) or any(
                        ld.buffer.name in varying for h in heads for ld in loads(h))
                    for f in body_fields(st):
                        visit(getattr(st, f), dep)
                elif isinstance(st, Scope):
                    visit(st.body, ctrl)
                elif is_map(st) or isinstance(st, (*TILE_OPS, Store)):
                    if ctrl or mentions_vid([st]) or any(
                            b.name in varying for b in reads(st)):
                        bad.add(id(st))
                        varying.update(b.name for b in writes(st))
        visit(body, False)
        if len(varying) == before:
            return {id(s) for s in instructions(body)} - bad


def attained_interval(ranges, x):
    """(lo, hi) of an integer expression where both ends are values it takes for some values of
    its variables, each ranging independently over all of `ranges` (grid and loop variables),
    or None when that is not shown. It is shown when every variable occurs once and each
    operation reaches its extremes at the ends of its operands' ranges: +, -, *, // by a
    positive constant, % by a constant larger than its operand, max, min (then both ends are
    corners of the box of variables):

        i + 2 * j  (i 0..63, j 0..3)   ->  (0, 69)
        i - i, i % 4 (i 0..63), X[i]   ->  None (a repeated variable, not reached, data)
    """
    names = [n.name for n in walk(x) if isinstance(n, Var)]
    if len(names) != len(set(names)) or not _reaches_ends(x, ranges):
        return None
    return interval(ranges, x)


def _reaches_ends(x, ranges) -> bool:
    if isinstance(x, (Const, Var)):
        return True
    if isinstance(x, BinOp) and x.op in ("+", "-", "*"):
        return _reaches_ends(x.a, ranges) and _reaches_ends(x.b, ranges)
    if isinstance(x, BinOp) and x.op in ("//", "%") and isinstance(x.b, Const):
        if x.op == "%":
            a = interval(ranges, x.a)
            if a is None or not 0 <= a[0] <= a[1] < x.b.value:
                return False
        return _reaches_ends(x.a, ranges)
    if isinstance(x, Call) and x.fn in ("max", "min") and len(x.args) == 2:
        return all(_reaches_ends(a, ranges) for a in x.args)
    return False
