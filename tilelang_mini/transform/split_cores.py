"""split_cores: one program for the cube core (AIC) and one for the vector cores (AIV).

The grid becomes `Kernel(blocks, is_npu=True) as (cid, vid)` (block variables are recomputed
from cid) and each run of instructions is wrapped in the Scope of the core whose pipes run it
(MTE2->L1, MTE1, M, FIX on the AIC; MTE2->UB, V, MTE3, S on the AIVs). Vector work on tiles
whose first dimension is the block's rows is split between the two AIVs by `vid`; vector work
that cannot be split runs on AIV 0 alone (`if vid == 0`):

    with Kernel(4, 2) as (bx, by):             with Kernel(8, is_npu=True) as (cid, vid):
        copy(A[by * 64 +: 64, 0 +: 32], A_s)        with Scope("C"):
        gemm(...)                          ->           copy(A[cid // 4 * 64 +: 64, 0 +: 32], A_s)
        copy(X[by * 64 +: 64, 0 +: 32], X_ub)           ...
        ...                                         with Scope("V"):
                                                        copy(X[cid // 4 * 64 + vid * 32 +: 32, 0 +: 32], X_ub)
"""
from __future__ import annotations

from dataclasses import replace

from ..ir.nodes import (
    Alloc, BinOp, Const, Copy, For, If, Kernel, Load, Region, Scope, Store,
    Var,
    TILE_OPS, transform, walk, walk_own, walk_statements,
)
from ..ir import analysis
from ..ir.analysis import is_expert
from .util import substitute
from .split_rows import (
    VID, core_of, portable, row_split, split_alloc, split_cube, split_vector,
)
from ..errors import CompileError

def split_cores(kernel: Kernel) -> Kernel:
    """A grid kernel, or a developer-mode `Kernel(n, is_npu=True) as (cid, vid)` kernel (no
    Scope of its own: the block's program, the compiler splits it), becomes per-core programs."""
    per_aiv = False
    if kernel.is_npu:
        if is_expert(kernel):
            return kernel
        user_cid, user_vid = kernel.grid_vars
        blocks = kernel.grid[0]
        per_aiv = _reads_vid(kernel.body, user_vid)
        mapping = {user_cid: Var("cid")} if user_cid != "cid" else {}
        if per_aiv and user_vid != "vid":
            mapping[user_vid] = VID
    else:
        blocks = 1
        for g in kernel.grid:
            blocks *= g
        cid = Var("cid")
        mapping, stride = {}, 1
        for name, g in zip(kernel.grid_vars, kernel.grid):
            e = cid if stride == 1 else BinOp("//", cid, Const(stride))
            mapping[name] = e if stride * g == blocks else BinOp("%", e, Const(g))
            stride *= g
    body = _cube_conditions([substitute(s, mapping) for s in kernel.body])
    rows = None if per_aiv else row_split(body)
    once = frozenset()
    if per_aiv:
        body = _per_vid_workspaces(body)
        once = _same_on_both_aivs(body)
    body = _wrap(body, rows, _cube_scalars(body), per_aiv, once)
    return replace(kernel, grid=(blocks,), grid_vars=("cid", "vid"), is_npu=True, body=tuple(body))


def _reads_vid(body, vid: str) -> bool:
    """Whether the developer-mode body reads `vid` itself: then it is written per vector core
    (tilelang-ascend's developer mode: each AIV handles the part of the block its vid names),
    and the compiler does not split its vector work again."""
    return any(isinstance(n, Var) and n.name == vid
               for st in walk_statements(body) for n in walk_own(st))


def _mentions_vid(node) -> bool:
    return any(isinstance(n, Var) and n.name == VID.name for n in walk(node))


def _per_vid_workspaces(body, vid: Var = VID) -> list:
    """Per-AIV mode: a cube instruction that reads `vid` runs once for each AIV (_wrap), so a
    block workspace it writes or reads (legalize's staging of an L0C -> UB or UB -> L1 copy the
    chip has no path for: each AIV stages its own part) gets one copy per AIV, indexed by vid
    everywhere:

        ws = alloc_workspace((16, 32))                ws = alloc_workspace((2, 16, 32))
        copy(acc[vid * 16 +: 16, 0 +: 32], ws)   ->   copy(acc[vid * 16 +: 16, 0 +: 32], ws[vid +: 1, 0 +: 16, 0 +: 32])
        copy(ws, c_ub)                                copy(ws[vid +: 1, 0 +: 16, 0 +: 32], c_ub)"""
    from ..ir.nodes import Buffer
    local = {s.buffer.name for s in walk_statements(body)
             if isinstance(s, Alloc) and s.buffer.scope == "workspace"}
    names = {b.name for st in analysis.instructions(body) if core_of(st) == "C" and
             _mentions_vid_named(st, vid.name)
             for b in analysis.writes(st) + analysis.reads(st)} & local
    if not names:
        return list(body)

    def rw(n):
        if isinstance(n, Buffer) and n.name in names:
            return replace(n, shape=(2,) + tuple(n.shape))
        if isinstance(n, Region) and n.buffer.name in names and len(n.start) < len(n.buffer.shape):
            return Region(n.buffer, (vid,) + tuple(n.start), (1,) + tuple(n.extent))
        if isinstance(n, (Load, Store)) and n.buffer.name in names and len(n.indices) < len(
                n.buffer.shape):
            return replace(n, indices=(vid,) + tuple(n.indices))
        return n
    return [transform(st, rw) for st in body]


def _same_on_both_aivs(body) -> frozenset:
    """ids of the vector instructions of a per-AIV (developer-mode vid) body that write global
    memory (not atomically) the same on both AIVs: they read neither `vid` nor a buffer whose
    contents may differ between the AIVs, and no if/loop around them does. Both AIVs would
    write the same bytes to the same elements (an unordered write-write pair on the hardware);
    AIV 0 alone writes them. A buffer may differ between the AIVs when a vector instruction
    that reads `vid` or such a buffer writes it (cube instructions run once: never). A tensor
    that vector code reads back is left written by both (each AIV reads its own write)."""
    differs: set = set()

    reads_vid = _mentions_vid

    def depends(st, ctl) -> bool:
        return ctl or reads_vid(st) or any(b.name in differs for b in analysis.reads(st))

    def visit(stmts, ctl, out):
        for st in stmts:
            if isinstance(st, Scope):
                visit(st.body, ctl, out)
            elif isinstance(st, If):
                c = ctl or any(reads_vid(n) or (isinstance(n, Load) and n.buffer.name in differs)
                               for n in walk(st.cond))
                visit(st.then_body, c, out)
                visit(st.else_body, c, out)
            elif isinstance(st, For) and st.kind != "parallel":
                c = ctl or any(reads_vid(n) or (isinstance(n, Load) and n.buffer.name in differs)
                               for e in st.extents for n in walk(e))
                visit(st.body, c, out)
            elif isinstance(st, Alloc) or core_of(st) == "C":
                continue
            elif out is None:
                if depends(st, ctl):
                    differs.update(b.name for b in analysis.writes(st))
            elif not depends(st, ctl) and not (isinstance(st, Copy) and st.atomic) and any(
                    b.scope in analysis.GM_SCOPES for b in analysis.writes(st)) and not (
                    {b.name for b in analysis.writes(st)} & vector_reads):
                out.add(id(st))

    # a tensor the vector code reads back keeps both writes: each AIV then reads its own
    vector_reads = {b.name for st in analysis.instructions(body) if core_of(st) != "C"
                    for b in analysis.reads(st)}
    size = -1
    while size != len(differs):
        size = len(differs)
        visit(body, False, None)
    once: set = set()
    visit(body, False, once)
    return frozenset(once)


def _wrap(stmts, rows, cube_vars=frozenset(), per_aiv=False, once=frozenset()) -> list:
    """Group consecutive instructions of one core into Scope blocks. A scalar the cube reads
    (`cube_vars`) is computed by the cube core too: each core loads it itself. `per_aiv`: the
    body spells the vector core's part with `vid` (developer mode), so each vector instruction
    runs on both AIVs as written (vid 0 and vid 1 of ONE block), except that a global-memory
    write the same on both (`once`, _same_on_both_aivs) is AIV 0's alone:

        with Kernel(n, is_npu=True) as (c, v):        with Kernel(n, is_npu=True) as (cid, vid):
            gemm(A_l1, B_l1, C_l0)               ->       with Scope("C"): gemm(...); copy(C_l0, W[cid])
            copy(C_l0, W[c])                              with Scope("V"):
            copy(W[c, v * 16 +: 16], x_ub)                    copy(W[cid, vid * 16 +: 16], x_ub)"""
    out, run, run_core = [], [], None

    def flush():
        nonlocal run, run_core
        if run:
            out.append(Scope(run_core, tuple(run), run[0].loc))
        run, run_core = [], None

    for s in stmts:
        core = core_of(s) if isinstance(s, (*TILE_OPS, Store)) or (
            isinstance(s, For) and s.kind == "parallel") else None
        if per_aiv and core is None and _vid_head(s):
            core = "V"  # an if / loop on vid around vector work: the AIV's own control flow
        if core is None:
            flush()
            if isinstance(s, Alloc):
                out.append(split_alloc(s, rows))
            elif rows is None and not per_aiv and _aiv0_while(s, cube_vars):
                out.append(Scope("V", (If(BinOp("==", VID, Const(0)), (s,), (), s.loc),), s.loc))
            elif isinstance(s, For):
                out.append(replace(s, body=tuple(_wrap(list(s.body), rows, cube_vars, per_aiv, once))))
            elif isinstance(s, If):
                out.append(replace(
                    s, then_body=tuple(_wrap(list(s.then_body), rows, cube_vars, per_aiv, once)),
                    else_body=tuple(_wrap(list(s.else_body), rows, cube_vars, per_aiv, once))))
            else:
                out.append(s)
            continue
        if isinstance(s, Store) and s.buffer.scope == "var" and s.buffer.name in cube_vars:
            if per_aiv and _mentions_vid(s):
                raise CompileError(
                    f"the scalar '{s.buffer.name}' is read by the cube core (a gemm or a cube "
                    f"copy, or the if/loop around one), but is computed here from vid: the "
                    f"cube core runs once per block and has no vid. Compute it without vid, "
                    f"or keep it to vector work", s.loc)
            flush()
            out.append(Scope("C", (s,), s.loc))
        if core != run_core:
            flush()
            run_core = core
        if core == "V" and not per_aiv:
            s = split_vector(s, rows)
        elif core == "V" and id(s) in once:
            s = If(BinOp("==", VID, Const(0)), (s,), (), s.loc)
        elif per_aiv and core == "C" and _mentions_vid(s):
            dual = aiv_rows_copy(s, VID.name)
            if dual is not None:  # FixPipe's dual destination: each AIV gets its own rows
                run.append(dual)
                continue
            if isinstance(s, Copy) and s.dst.buffer.scope == "UB":
                raise CompileError(  # (legalize stages the others through a workspace)
                    "internal: an L0C -> UB copy that reads vid reached split_cores", s.loc)
            # the cube runs once per block: it does the work of both AIVs' vid, one after the other
            run.extend(substitute(s, {VID.name: Const(v)}) for v in (0, 1))
            continue
        elif rows is not None:
            s = split_cube(s, rows)
        run.append(s)
    flush()
    return out


def aiv_rows_copy(s, vid: str):
    """The one dual-destination copy of a per-AIV L0C -> UB copy whose two AIVs' sources are
    consecutive row blocks of the accumulator (FixPipe delivers the first half of the rows to
    AIV 0, the second to AIV 1), or None when it is not of that form:

        copy(C_L0[vid * 16 +: 16, 0 +: 32], c_ub)   ->   copy(C_L0[0 +: 32, 0 +: 32], c_ub)

    (Substituting vid = 0 and vid = 1 instead would give two copies that each deliver to both
    AIVs: the second would overwrite the first AIV's rows.)"""
    from ..frontend.exprs import constant_difference
    if not (isinstance(s, Copy) and s.src.buffer.scope == "L0C" and s.dst.buffer.scope == "UB"):
        return None
    if _mentions_vid_named(s.dst, vid) or s.transpose or s.atomic:
        return None
    src = s.src
    if not src.extent or src.extent[0] != s.dst.extent[0]:
        return None
    v0 = [substitute(x, {vid: Const(0)}) for x in src.start]
    v1 = [substitute(x, {vid: Const(1)}) for x in src.start]
    if constant_difference(v1[0], v0[0]) != src.extent[0]:
        return None
    if any(constant_difference(b, a) != 0 for a, b in zip(v0[1:], v1[1:])):
        return None
    whole = Region(src.buffer, tuple(v0), (2 * src.extent[0],) + tuple(src.extent[1:]))
    return replace(s, src=whole)


def _mentions_vid_named(node, vid: str) -> bool:
    return any(isinstance(n, Var) and n.name == vid for n in walk(node))


def _vid_head(s) -> bool:
    """An if whose condition, or a serial loop whose bounds, read `vid` (per-AIV mode): the
    AIV's own control flow, so it may hold vector work only (a located CompileError else)."""
    if isinstance(s, If):
        heads = [s.cond]
    elif isinstance(s, For) and s.kind != "parallel":
        heads = list(s.extents)
    else:
        return False
    if not any(_mentions_vid(h) for h in heads):
        return False
    cube = next((x for x in analysis.instructions([s]) if core_of(x) == "C"), None)
    if cube is not None:
        raise CompileError(
            f"this {'if' if isinstance(s, If) else 'loop'} reads vid (the vector core index) "
            f"in its {'condition' if isinstance(s, If) else 'bounds'} but holds cube work "
            f"(line {cube.loc.line if cube.loc else '?'}): the cube core runs once per block "
            f"and has no vid. Keep the cube work outside it (index the cube's data by vid "
            f"instead: the cube then does both vector cores' parts)", s.loc)
    return True


# ------------------------------------------------------------------------- scalars of the cube


def _cube_scalars(body) -> frozenset:
    """Scalars (alloc_var) the cube core reads: in its instructions, or in the condition or bound
    of control flow around cube work; and the scalars those are computed from. Each must be
    computable on the cube (from GM, other such scalars and constants): the cube has no access
    to the vector cores' registers or UB, so a scalar computed from UB data is rejected here."""
    need, stores = set(), {}

    def var_loads(node):
        return {n.buffer.name for n in walk_own(node) if isinstance(n, Load)
                and n.buffer.scope == "var"}

    def visit(stmts):
        for st in stmts:
            if isinstance(st, Store) and st.buffer.scope == "var":
                stores.setdefault(st.buffer.name, []).append(st)
            if isinstance(st, (If, For)) and not (isinstance(st, For) and st.kind == "parallel"):
                if any(core_of(x) == "C" for x in analysis.instructions([st])):
                    need.update(var_loads(st))
                for f in ("then_body", "else_body") if isinstance(st, If) else ("body",):
                    visit(getattr(st, f))
            elif core_of(st) == "C":
                for n in walk(st):
                    if isinstance(n, Load) and n.buffer.scope == "var":
                        need.add(n.buffer.name)
    visit(body)
    todo = list(need)
    while todo:
        name = todo.pop()
        for st in stores.get(name, []):
            if not portable(st):
                raise CompileError(
                    f"the scalar '{name}' is read by the cube core (a gemm or a cube copy, or "
                    f"the if/loop around one), but is computed here from on-chip vector data; "
                    f"the cube core cannot read it. Compute it from global memory (each core "
                    f"then loads it itself), or move the value through a global tensor", st.loc)
            for dep in var_loads(st) - need:
                need.add(dep)
                todo.append(dep)
    return frozenset(need)


# --------------------------------------------------------------- conditions around cube work


def _cube_conditions(body) -> list:
    """An if condition or loop bound around cube work that reads a vector tile: the cube core
    cannot read UB. A tile that is a whole copy of a GM region (of a tensor the kernel never
    writes), its only write, made before in the same statement list or in one enclosing it, is
    read from GM there instead, by each core itself;
    any other vector tile there is a located CompileError (a hang or a wrong branch otherwise):

        copy(Mask[cid +: 1, 0 +: 4], m)             copy(Mask[cid +: 1, 0 +: 4], m)
        for k in serial(4):                  ->     for k in serial(4):
            if m[k] != 0:  gemm(...) ...                if Mask[cid, k] != 0:  gemm(...) ..."""
    counts: dict = {}
    copies: dict = {}  # tile name -> the copy that writes it
    for st in analysis.instructions(body):
        for b in analysis.writes(st):
            counts[b.name] = counts.get(b.name, 0) + 1
            if isinstance(st, Copy):
                copies[b.name] = st
    written = set(counts)
    # the only write of the tile, a copy of GM; it holds the copy wherever it precedes a use
    # in the same statement list or one enclosing it (its start then still means the same)
    sources = {name: c for name, c in copies.items() if counts.get(name) == 1
               and _gm_index_map(c, written) is not None}

    def to_gm(n, seen):
        if isinstance(n, Load) and n.buffer.scope == "UB" and n.buffer.name in seen:
            c = sources[n.buffer.name]
            return Load(c.src.buffer, _gm_index_map(c, written)(n.indices))
        return n

    def rewrite(stmts, seen):
        out = []
        for st in stmts:
            if isinstance(st, Copy) and st.dst.buffer.name in sources and sources[
                    st.dst.buffer.name] is st:
                seen = seen | {st.dst.buffer.name}
            if isinstance(st, (If, For)) and not (isinstance(st, For) and st.kind == "parallel"):
                cube = any(core_of(x) == "C" for x in analysis.instructions([st]))
                if cube:
                    st = _read_from_gm(st, lambda n: to_gm(n, seen))
                st = replace(st, **{f: tuple(rewrite(list(getattr(st, f)), seen)) for f in
                                    (("then_body", "else_body") if isinstance(st, If)
                                     else ("body",))})
            out.append(st)
        return out
    return rewrite(list(body), frozenset())


def _read_from_gm(st, rw):
    """`st` (an if or a serial loop around cube work) with its condition / bounds rewritten by
    `rw`; a vector tile still read there is a located CompileError."""
    if isinstance(st, If):
        st = replace(st, cond=transform(st.cond, rw))
        heads = [st.cond]
    else:
        st = replace(st, extents=tuple(transform(e, rw) for e in st.extents))
        heads = list(st.extents)
    what, head = ("if", "condition") if isinstance(st, If) else (
        ("while loop", "condition") if st.kind == "while" else ("loop", "bound"))
    for h in heads:
        for n in walk(h):
            if isinstance(n, Load) and n.buffer.scope == "UB":
                raise CompileError(
                    f"this {what} holds cube work (a gemm or a cube copy) but its {head} "
                    f"reads '{n.buffer.name}', a vector-core tile computed on chip: the cube "
                    f"core cannot read it. Read the value from a global tensor (a tile that is "
                    f"only a copy of global memory is read from there), or keep the cube work "
                    f"outside the {what}", st.loc)
    return st


def _gm_index_map(c: Copy, written):
    """For a copy of a GM region (of a tensor the kernel never writes) into a whole tile of the
    same dtype, within the tensor's bounds on every copied dimension: the function from the
    tile's indices to the tensor's; else None."""
    src, dst = c.src, c.dst
    if (src.buffer.scope not in ("global",) or src.buffer.name in written
            or src.buffer.dtype != dst.buffer.dtype or c.atomic
            or tuple(dst.extent) != tuple(dst.buffer.shape)
            or any(not (isinstance(x, Const) and x.value == 0) for x in dst.start)
            or any(isinstance(n, Load) for x in src.start for n in walk(x))):
        return None
    tile = [d for d, n in enumerate(dst.buffer.shape) if n != 1]
    gm = [d for d, n in enumerate(src.extent) if n != 1]
    if [dst.buffer.shape[d] for d in tile] != [src.extent[d] for d in gm]:
        return None
    for d in gm:
        x = src.start[d]
        n = src.buffer.shape[d]
        if not (isinstance(x, Const) and isinstance(n, int) and 0 <= x.value
                and x.value + src.extent[d] <= n):
            return None
    pairs = dict(zip(gm, tile))

    def index(indices):
        return tuple(src.start[d] if d not in pairs else indices[pairs[d]]
                     if src.start[d] == Const(0) else BinOp("+", src.start[d], indices[pairs[d]])
                     for d in range(len(src.extent)))
    return index


def _aiv0_while(s, cube_vars) -> bool:
    """A while loop of vector work alone whose condition reads a UB tile, when the vector work
    is not split (it runs on AIV 0, `if vid == 0`): only AIV 0 has the tile's values, so the
    loop is AIV 0's (AIV 1, reading its own UB, would loop on other values, or forever)."""
    return (isinstance(s, For) and s.kind == "while"
            and any(ld.buffer.scope == "UB" for ld in analysis.loads(s.extents[0]))
            and all(core_of(x) == "V" or (isinstance(x, Store) and x.buffer.scope == "var")
                    for x in analysis.instructions([s]))
            and not any(isinstance(x, Store) and x.buffer.name in cube_vars
                        for x in walk_statements(s.body)))
