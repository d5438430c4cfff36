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

Such a kernel (a workspace read that comes before every write of it) becomes those two
programs with the cross flags between them (`concurrent_programs`), or, where its reads cannot
be paired with its writes, a located error (not a silent wrong number). Accesses are paired one
by one where their counts agree, else per iteration of the loop around them (a gather writing
a workspace row by row against one read; accesses under data-dependent ifs). Workspaces the
caller passes in (not workspace_idx) are hand-offs alike (`caller_hand_offs`); an on-chip tile
handed over the same way, with no workspace, is a located error (`check_cross_tile_order`).
"""
from __future__ import annotations

from dataclasses import replace

from ..errors import CompileError, InternalCompilerError
from ..ir import analysis
from ..ir.nodes import (GLOBAL_SCOPES, TILE_OPS, Alloc, BinOp, Buffer, Const, Copy, Fill, For, Gemm, If,
                        Kernel, Load, Reduce, Region, Scope, SetCrossFlag, Store, Var,
                        WaitCrossFlag, walk, walk_own, walk_statements)
from ..ir.pipes import pipe_of
from ..transform.split_rows import VID, row_split, split_alloc, split_vector
from ..transform.util import substitute


def check_workspace_order(kernel: Kernel, workspace_idx, because=None) -> None:
    """Developer-mode kernels only: T.Scope blocks and cross-core flags are the expert's own
    concurrent programs and hand-offs. `because`: (why, loc), what kept concurrent_programs
    from making the kernel two concurrent programs."""
    if any(isinstance(s, (Scope, SetCrossFlag, WaitCrossFlag)) for s in walk_statements(kernel.body)):
        return
    names = {kernel.params[i].name for i in workspace_idx}
    early = _first_early_read(kernel.body, names | caller_hand_offs(kernel))
    if early is None:
        return
    s, buf = early
    what = "a workspace_idx scratch tensor" if buf in names else \
        "a tensor the caller passes, written by one core and read by the other"
    raise CompileError(
        f"workspace '{buf}' ({what}) is read here before any statement "
        f"writes it: this kernel relies on tilelang-ascend's TL_ASCEND_AUTO_CV_COMBINE running "
        f"its cube and vector statements as two concurrent programs that meet at the "
        f"workspaces" + (", which needs a kernel without flags of its own" if because is None else
                         f", and it cannot be made two such programs: {because[0]} (line "
                         f"{because[1].line})") +
        ". Write the producer before the consumer in the loop body, or spell the two programs "
        "as T.Scope(\"C\") / T.Scope(\"V\") blocks with T.set_cross_flag / T.wait_cross_flag "
        "(tilelang-ascend's flash_attn_bhsd.py form)", s.loc)


def caller_hand_offs(kernel: Kernel) -> set:
    """Tensor parameters (not workspace_idx) that are hand-offs between the cores as a
    workspace is (written by one core only, read by the other), where one of them is read by
    the other core first, inside a loop that also holds a write, as tilelang-ascend's examples
    that pass their workspaces in do:

        for i in T.serial(n):
            T.copy(workspace_1[cid, ...], kv_l1)     # cube: this iteration's gathered rows
            ...
            T.copy(kv_ub, workspace_1[cid, r, :])    # vector

    (in program order the cube would read the previous iteration's rows, and the caller's
    data at the first). Empty where no parameter is read so; only developer-mode is_npu
    kernels (no T.Scope, no flags)."""
    if not kernel.is_npu or len(kernel.grid_vars) != 2 or analysis.is_expert(kernel):
        return set()
    params = {b.name for b in kernel.params}
    acc: dict = {}

    def visit(stmts, loops):
        for st in stmts:
            if isinstance(st, For) and st.kind != "parallel":
                visit(st.body, loops + (id(st),))
            elif isinstance(st, If):
                visit(st.then_body + st.else_body, loops)
            elif isinstance(st, (*TILE_OPS, Store)) or analysis.is_map(st):
                try:
                    core = _core(st)
                except _NotConcurrent:
                    core = "both"
                for n in walk_own(st):
                    buf = n.buffer.name if isinstance(n, (Region, Load)) else None
                    if buf in params:
                        acc.setdefault(buf, []).append(
                            ("w" if _is_write_region(st, n) else "r", core, set(loops)))
                for b in _written(st) & params:
                    acc.setdefault(b, []).append(("w", core, set(loops)))
    visit(kernel.body, ())
    out, early = set(), False
    for name, uses in acc.items():
        writers = {c for k, c, _ in uses if k == "w"}
        if len(writers) != 1 or None in writers or "both" in writers:
            continue
        other = {"C", "V"} - writers
        if not any(k == "r" and c in other for k, c, _ in uses):
            continue
        out.add(name)
        kind, core, loops = uses[0]
        early |= kind == "r" and core in other and any(k == "w" and lw & loops
                                                       for k, _, lw in uses)
    return out if early else set()


def _written(s) -> set:
    """Names an instruction writes; a map's are its Stores' (walked after it, in program order
    with the reads they hold)."""
    return set() if analysis.is_map(s) else {b.name for b in analysis.writes(s)}


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


# --------------------------------------------------------------- concurrent cube/vector programs

class _NotConcurrent(Exception):
    def __init__(self, why, loc):
        super().__init__(why)
        self.why, self.loc = why, loc


def concurrent_programs(kernel: Kernel, workspace_idx, chip: str) -> Kernel:
    """tilelang-ascend's TL_ASCEND_AUTO_CV_COMBINE + AUTO_CV_SYNC: a developer-mode is_npu
    kernel (no T.Scope, no flags) that reads a workspace before any statement writes it is two
    concurrent programs, the cube's statements and the vector cores', meeting at the
    workspaces. It becomes an expert kernel: each core's projection of the body (loops and ifs
    kept where they hold its statements) in its own Scope, and per workspace written by one
    core and read by the other, a cross flag from each write to the matching read (the i-th
    read waits for the i-th write) and one back from each read to the next write (the one
    buffer is free again):

        for k in T.serial(n):                      with Scope("C"):
            copy(ws_b[cid], b_l1)     # C              for k in T.serial(n):
            gemm(a_l1, b_l1, c_l0c)   # C                  wait_cross_flag(MTE2, 1); copy(ws_b[cid], b_l1)
            copy(c_l0c, ws_a[cid])    # C                  set_cross_flag(MTE2, 3)
            copy(ws_a[cid], x_ub)     # V    ->            gemm(...)
            ... x_ub ...              # V                  wait_cross_flag(FIX, 2); copy(c_l0c, ws_a[cid]); set_cross_flag(FIX, 0)
            copy(x_ub, ws_b[cid])     # V          with Scope("V"):
                                                       set_cross_flag(MTE2, 2); set_cross_flag(MTE2, 3)   # both free
                                                       for k in T.serial(n):
                                                           wait_cross_flag(MTE2, 0); copy(ws_a[cid], x_ub); set_cross_flag(MTE2, 2)
                                                           ...
                                                           wait_cross_flag(MTE3, 3); copy(x_ub, ws_b[cid]); set_cross_flag(MTE3, 1)

    (the first wait of each back flag is met by the reader's priming set). The body is first
    lowered as developer mode lowers it (infer_scopes, legalize); the intra-core flags are then
    insert_sync's, as for any expert kernel with only its cross flags. Other
    kernels are returned unchanged; a kernel this cannot pair is the located error of
    `check_workspace_order`, with the reason."""
    if not kernel.is_npu or analysis.is_expert(kernel):
        return kernel
    names = {kernel.params[i].name for i in workspace_idx} | caller_hand_offs(kernel) | {
        a.buffer.name for a in walk_statements(kernel.body)
        if isinstance(a, Alloc) and a.buffer.scope == "workspace"}  # cross_tiles_through_workspaces
    if _first_early_read(kernel.body, names) is None:
        return kernel
    from ..arch import get_chip
    from ..transform.infer_scopes import infer_scopes
    from ..transform.legalize import legalize
    # the developer-mode lowering each core's statements need first (scopes, L0 loads of the
    # gemms, workspaces where the chip has no copy path, which are hand-offs too). Two
    # concurrent programs meet only at workspaces: a direct L0C -> UB or UB -> L1 copy (a
    # chip with the path) would be one instruction of both programs, so it goes through one
    # too, as on a chip without the path
    lowered = legalize(infer_scopes(kernel), replace(get_chip(chip), direct_l0c_to_ub=False,
                                                     direct_ub_to_l1=False))
    names |= {a.buffer.name for a in walk_statements(lowered.body)
              if isinstance(a, Alloc) and a.buffer.scope == "workspace"}
    try:
        return _combine(lowered, names)
    except _NotConcurrent as e:
        check_workspace_order(kernel, workspace_idx, because=(e.why, e.loc))
        raise CompileError(  # hand-offs through compiler-made workspaces only
            f"this kernel's cube and vector statements meet at on-chip tiles read before they "
            f"are written, which relies on tilelang-ascend's TL_ASCEND_AUTO_CV_COMBINE running "
            f"them as two concurrent programs, and it cannot be made two such programs: "
            f"{e.why}. Spell the two programs as T.Scope(\"C\") / T.Scope(\"V\") blocks with "
            f"T.set_cross_flag / T.wait_cross_flag", e.loc) from None


def _first_early_read(body, names):
    """(statement, workspace) of the first read of a workspace before any write of it."""
    written: set[str] = set()
    for s in walk_statements(body):
        for n in walk_own(s):
            buf = n.buffer.name if isinstance(n, (Region, Load)) else None
            if buf in names and buf not in written and not _is_write_region(s, n):
                return s, buf
        written |= _written(s) & names
    return None


def _core(st) -> str | None:
    """"C" or "V" for an instruction on cube or vector buffers, None for one on neither
    (scalars, which both cores compute)."""
    bufs = [b for b in analysis.reads(st) + analysis.writes(st)]
    cube = any(b.scope in analysis.AIC_SCOPES for b in bufs)
    vector = any(b.scope == "UB" for b in bufs)
    if cube and vector:
        raise _NotConcurrent("an instruction on both cube and vector buffers", st.loc)
    if cube or vector:
        return "C" if cube else "V"
    if any(b.scope in GLOBAL_SCOPES for b in analysis.writes(st)):
        raise _NotConcurrent("a scalar store to global memory (neither core's statement)", st.loc)
    return None


def _combine(kernel: Kernel, names) -> Kernel:
    vid = Var(kernel.grid_vars[1])
    # a cube instruction written per AIV (`copy(c_l0[vid * 16 +: 16, :], ws)`, each AIV's half
    # of the result) runs once for each vid in the cube's program (`project`), into a
    # workspace of its own per AIV, as split_cores runs it
    from ..transform.split_cores import _per_vid_workspaces
    kernel = replace(kernel, body=tuple(_per_vid_workspaces(list(kernel.body), vid)))
    allocs = [s for s in kernel.body if isinstance(s, Alloc)]
    body = [s for s in kernel.body if not isinstance(s, Alloc)]
    sites = _sites(body, names)
    marks: dict = {}                 # (id(statement), side) -> ([before], [after])
    grouped: dict = {}               # id(site statement) -> (site, side, workspaces)
    prime = {"C": [], "V": []}
    n = -1                           # hand-offs so far (flags 2n, 2n + 1)
    for w, (writes, reads) in sites.items():
        writer = {c for _, c, _, _ in writes}
        if not writes:
            raise _NotConcurrent(f"workspace '{w}' is read but never written", reads[0][0].loc)
        if len(writer) != 1:
            raise _NotConcurrent(f"workspace '{w}' is written by both cores", writes[0][0].loc)
        (wc,) = writer
        rc = "V" if wc == "C" else "C"
        cross = [r for r in reads if r[1] != wc]
        if not cross:
            continue
        n += 1
        data, free = 2 * n, 2 * n + 1
        counted = all(t is not None for _, _, t, _ in writes + cross)
        nw, nr = sum(t or 0 for _, _, t, _ in writes), sum(t or 0 for _, _, t, _ in cross)
        if counted and nw == nr:
            # the i-th read of each access's own count waits for the i-th write
            for st, *_ in writes:
                _mark(marks, st, wc, WaitCrossFlag(_pipe(st), free, st.loc),
                      SetCrossFlag(_pipe(st), data, st.loc))
            for st, *_ in cross:
                _mark(marks, st, rc, WaitCrossFlag(_pipe(st), data, st.loc),
                      SetCrossFlag(_pipe(st), free, st.loc))
        else:
            why = (f"workspace '{w}' is written {nw} times by one core and read {nr} times by "
                   f"the other" if counted else "a workspace access under an if or in a loop of "
                   "run-time extent")
            ws, rs = _group_sites(w, [(st, p) for st, _, _, p in writes],
                                  [(st, p) for st, _, _, p in cross], body, vid, why)
            for side, group, (first, last) in ((wc, ws, (free, data)), (rc, rs, (data, free))):
                for site, _ in group:
                    grouped.setdefault(id(site), (site, side, set(), why))[2].add(w)
                (s0, a0), (s1, a1) = group[0], group[-1]
                _mark(marks, s0, side, WaitCrossFlag(_pipe(a0[0]), first, a0[0].loc), None)
                _mark(marks, s1, side, None, SetCrossFlag(_pipe(a1[-1]), last, a1[-1].loc))
        first_read = cross[0][0] if counted and nw == nr else rs[0][1][0]
        prime[rc].append(SetCrossFlag(_pipe(first_read), free, first_read.loc))
    # a grouped site moves its flags to its own start and end: it may hold no other hand-off
    for site, side, ws, why in grouped.values():
        for inner in walk_statements(_body_of(site)):
            if any(k in marks for k in ((id(inner), "C"), (id(inner), "V"))) \
                    and id(inner) not in grouped:
                raise _NotConcurrent(
                    f"{why}; paired per iteration of the loop around them, the accesses of "
                    f"workspace {', '.join(sorted(ws))} stand for this statement, which also "
                    "holds another workspace hand-off", site.loc)
            if id(inner) in grouped:
                raise _NotConcurrent(f"{why}; paired per iteration of the loop around them, "
                                     "the accesses stand for nested statements", site.loc)

    def project(stmts, side):
        out = []
        for st in stmts:
            if isinstance(st, Alloc):
                out.append(st)
                continue
            if isinstance(st, For) and st.kind != "parallel":
                inner = project(st.body, side)
                got = [replace(st, body=tuple(inner))] if _holds_work(inner) else []
            elif isinstance(st, If):
                then, other = project(st.then_body, side), project(st.else_body, side)
                got = []
                if _holds_work(then) or _holds_work(other):
                    if side == "C" and any(isinstance(n, Load) and n.buffer.scope == "UB"
                                           for n in walk(st.cond)):
                        raise _NotConcurrent("the cube's statements depend on vector data", st.loc)
                    got = [replace(st, then_body=tuple(then), else_body=tuple(other))]
            elif isinstance(st, (*TILE_OPS, Store)) or analysis.is_map(st):
                core = _core(st)
                if core is None and side == "C" and any(
                        isinstance(n, Load) and n.buffer.scope == "UB" for n in walk(st)):
                    raise _NotConcurrent("the cube reads a scalar of vector data", st.loc)
                got = []
                if core == "C" == side and _reads(st, vid):  # once per AIV's vid
                    got = [substitute(st, {vid.name: Const(v)}) for v in (0, 1)]
                elif core in (None, side):
                    got = [st if alone is None or core != "V" else If(alone, (st,), (), st.loc)
                           if rows is None else split_vector(st, rows)]
            else:
                raise _NotConcurrent(f"unexpected statement {type(st).__name__}", st.loc)
            before, after = marks.get((id(st), side), ((), ()))
            if (before or after) and not got:
                raise InternalCompilerError(f"a workspace hand-off of core {side} projected away")
            out += [*before, *got, *after]
        return out

    alone = None if any(isinstance(n, Var) and n.name == vid.name
                        for st in walk_statements(body) for n in walk_own(st)) \
        else BinOp("==", vid, Const(0))  # vector work not written per AIV: AIV 0 does it
    rows = None if alone is None else _vector_rows(kernel, body)
    if rows is not None:  # the rows of the vector tiles split between the AIVs, as split_cores does
        allocs = [split_alloc(a, rows) for a in allocs]
        kernel = replace(kernel, grid_vars=(kernel.grid_vars[0], VID.name))
    programs = [Scope(side, tuple(prime[side] + project(body, side)), kernel.loc)
                for side in ("C", "V")]
    return replace(kernel, body=tuple(allocs + [p for p in programs if _holds_work(p.body)]))


def _reads(st, var: Var) -> bool:
    return any(isinstance(n, Var) and n.name == var.name for n in walk(st))


def _vector_rows(kernel: Kernel, body):
    """The row split of split_cores (`row_split`) for the vector projection of a kernel whose
    body does not read vid (tilelang-ascend's `as (cid)`, threads=2: the compiler halves each
    vector tile's rows over the two AIVs), or None: then AIV 0 does all the vector work. None
    too when a variable of the body is already named as split_cores' vid."""
    if any(isinstance(n, Var) and n.name == VID.name for st in walk_statements(body)
           for n in walk_own(st)):
        return None
    return row_split(list(kernel.body))


def _pipe(st):
    pipe = pipe_of(st)
    if pipe is None:
        raise _NotConcurrent("a workspace access that is not a copy of its own pipe", st.loc)
    return pipe


def _mark(marks, st, side, before, after):
    b, a = marks.setdefault((id(st), side), ([], []))
    if before is not None:
        b.append(before)
    if after is not None:
        a.append(after)


def _body_of(st):
    if isinstance(st, For):
        return st.body
    if isinstance(st, If):
        return st.then_body + st.else_body
    return ()


def _group_sites(w, writes, reads, body, vid, why):
    """A workspace whose accesses cannot be paired one by one (`why`): pair them per iteration
    of the innermost loop L holding them all. Each access stands for the statement of L's body
    holding it (its site); the writer waits for the buffer before its first site and hands it
    over after its last, the reader likewise:

        for i in T.serial(n):                       for i in T.serial(n):          # C
            copy(ws[cid], kv_l1)          # C   ->      wait(data); copy(ws[cid], kv_l1); set(free)
            for r in T.serial(32):        # V       for i in T.serial(n):          # V
                copy(kv_ub, ws[cid, r])                 wait(free); for r ...: copy(kv_ub, ws[cid, r]); set(data)

    Needs every loop and if around L to run alike on the cube and both vector cores (not on
    `vid`), and no site to hold both cores' accesses. Returns ([(site, [access])] of the
    writer, of the reader), in program order."""
    common = _common_path(writes + reads)
    depth = max((i + 1 for i, st in enumerate(common)
                 if isinstance(st, For) and st.kind != "parallel"), default=0)
    for st in common[:depth]:
        own = [n for n in walk_own(st) if not isinstance(n, (For, If))] + \
            ([st.cond] if isinstance(st, If) else list(st.extents))
        if any(isinstance(n, Var) and n.name == vid.name for e in own for n in walk(e)):
            raise _NotConcurrent(f"{why}, and a loop or if around them depends on the vector "
                                 "core's id", st.loc)
    order = {}
    for i, st in enumerate(walk_statements(common[depth - 1].body if depth else body)):
        order.setdefault(id(st), i)

    def group(accs, k):
        out: dict = {}
        for st, path in accs:
            site = path[k] if len(path) > k else st
            out.setdefault(id(site), (site, []))[1].append(st)
        return sorted(out.values(), key=lambda g: order[id(g[0])])
    ws, rs = group(writes, depth), group(reads, depth)
    for kw, kr in sorted(((a, b) for a, ta in _own_loops(writes, depth)
                          for b, tb in _own_loops(reads, depth) if ta == tb), reverse=True):
        own_w, own_r = group(writes, kw), group(reads, kr)
        if len(own_w) == len(own_r) == 1:  # one site per core's loop body: nothing between
            ws, rs = own_w, own_r
            break
    if {id(s) for s, _ in ws} & {id(s) for s, _ in rs}:
        site = next(s for s, _ in ws if id(s) in {id(r) for r, _ in rs})
        raise _NotConcurrent(f"{why}, and one statement holds both cores' accesses of "
                             f"workspace '{w}'", site.loc)
    return ws, rs


def _own_loops(accs, depth):
    """[(k, trips)]: the serial loops of constant extent that hold all of one core's accesses
    below the common loops, each nest path[depth:k] with how often its body runs per
    iteration of the common loops. Two such nests of equal trips, one per core (tilelang-ascend's cube loop and vector loop over the same blocks, one after the
    other in the source), pair per iteration where each body holds one site: the i-th run of
    the writer's site hands the workspace to the i-th run of the reader's:

        for _ in T.serial(n):                    # cube: site `copy(ws, kv_l1)`
            T.copy(ws[cid, ...], kv_l1) ...
        for i in T.serial(n):                    # vector: site `for r ...`
            for r in T.serial(32): T.copy(row_ub, ws[cid, r, :])"""
    own = _common_path(accs)
    out, k, trips = [], depth, 1
    while k < len(own) and isinstance(own[k], For) and own[k].kind != "parallel" and all(
            isinstance(e, Const) and type(e.value) is int for e in own[k].extents):
        for e in own[k].extents:
            trips *= e.value
        k += 1
        out.append((k, trips))
    return out


def _common_path(accesses) -> tuple:
    """The loops and ifs around every one of `accesses` ((statement, path) pairs)."""
    common = accesses[0][1]
    for _, path in accesses[1:]:
        k = 0
        while k < min(len(common), len(path)) and common[k] is path[k]:
            k += 1
        common = common[:k]
    return common


def _holds_work(stmts) -> bool:
    return any(not isinstance(s, Alloc) for s in stmts)


def _sites(body, names) -> dict:
    """workspace -> ([(write instr, core, times, path)], [(read instr, core, times, path)]):
    how often each access runs, from the constant extents of the loops around it (None under
    an if or in a loop of run-time extent), and the loops and ifs around it (outermost first)."""
    out: dict = {}

    def visit(stmts, times, path):
        for st in stmts:
            if isinstance(st, For) and st.kind != "parallel":
                ext = 1
                for e in st.extents:
                    ext = ext * e.value if isinstance(e, Const) and type(e.value) is int else None
                    if ext is None:
                        break
                visit(st.body, None if ext is None or times is None else times * ext,
                      path + (st,))
            elif isinstance(st, If):
                visit(st.then_body, None, path + (st,))
                visit(st.else_body, None, path + (st,))
            elif isinstance(st, (*TILE_OPS, Store)) or analysis.is_map(st):
                ws = [b.name for b in analysis.writes(st) if b.name in names]
                rs = [b.name for b in analysis.reads(st) if b.name in names]
                if not (ws or rs):
                    continue
                core = _core(st)
                for w in ws:
                    out.setdefault(w, ([], []))[0].append((st, core, times, path))
                for r in rs:
                    out.setdefault(r, ([], []))[1].append((st, core, times, path))
    visit(body, 1, ())
    return out


def cross_tiles_through_workspaces(kernel: Kernel) -> Kernel:
    """Developer-mode is_npu kernels: an on-chip tile read before any statement writes it,
    whose writes all copy it from the other core inside the loop that holds its first read
    (sparse_flash_attn_developer_vid_reduce's `kv_l1`, gathered UB -> L1 after the gemm that
    reads it), is tilelang-ascend's AUTO_CV_COMBINE hand-off through a compiler-made workspace:
    the writer copies into a workspace of the tile's shape, the reader loads the tile from it
    where its loop body first reads it; concurrent_programs then pairs them per iteration:

        for i in T.serial(n):                      for i in T.serial(n):
            gemm(q_l1, kv_l1, s_l0c)      ->           copy(kv_l1_cv, kv_l1); gemm(q_l1, kv_l1, s_l0c)
            for r ...: copy(kv_ub, kv_l1[r, :])         for r ...: copy(kv_ub, kv_l1_cv[r, :])

    Other kernels are returned unchanged (check_cross_tile_order reports what is left)."""
    if not kernel.is_npu or analysis.is_expert(kernel):
        return kernel
    from ..transform.infer_scopes import infer_scopes
    from ..transform.util import fresh_name, map_bodies
    scoped = infer_scopes(kernel)
    early = _early_cross_tiles(scoped)
    if not early:
        return kernel
    taken = {a.buffer.name for a in walk_statements(scoped.body) if isinstance(a, Alloc)} | \
        {b.name for b in scoped.params}
    ws = {t: Buffer(fresh_name(f"{t}_cv", taken), buf.shape, buf.dtype, "workspace")
          for t, (buf, _) in early.items()}
    loads: dict = {}
    for t, (buf, site) in early.items():
        loads.setdefault(id(site), []).append(Copy(Region.full(ws[t]), Region.full(buf), site.loc))

    def rewrite(stmts):
        out = []
        for st in stmts:
            out += loads.get(id(st), [])
            if isinstance(st, Copy) and st.dst.buffer.name in ws:
                st = replace(st, dst=replace(st.dst, buffer=ws[st.dst.buffer.name]))
            out.append(map_bodies(st, rewrite))
        return out
    allocs = [Alloc(b, None, scoped.loc) for b in ws.values()]
    return replace(scoped, body=tuple(allocs + rewrite(list(scoped.body))))


def _early_cross_tiles(kernel) -> dict:
    """tile name -> (buffer, the statement of its loop's body that first reads it), for the
    tiles cross_tiles_through_workspaces hands over: written by copies from the other core's
    memory, all of them in one serial loop whose body reads the tile, and otherwise only by
    its own core after the first such copy (the vector code scaling the cube's result in place,
    `copy(s_l0c, s_ub); s_ub *= scale`); none unless one of them is read before any statement
    writes it (else the kernel is left as it is). The reader's load stands where its loop body
    first needs the tile (reads it, or writes it in place), as each core's program runs on its
    own (vid_reduce's `acc_s_ub_`, copied from L0C before the vector core's gather, is first
    read after it)."""
    writes: dict = {}
    reads: dict = {}
    early: set = set()

    def visit(stmts, loops):
        for st in stmts:
            if isinstance(st, For) and st.kind != "parallel":
                visit(st.body, loops + (st,))
            elif isinstance(st, If):
                visit(st.then_body + st.else_body, loops)
            elif isinstance(st, (*TILE_OPS, Store)) or analysis.is_map(st):
                for b in analysis.reads(st):
                    if b.name not in writes:
                        early.add(b.name)
                    reads.setdefault(b.name, (b, loops))
                for b in analysis.writes(st):
                    writes.setdefault(b.name, []).append((st, loops))
    visit(kernel.body, ())
    out = {}
    for name, ws in writes.items():
        cross = [(w, loops) for w, loops in ws if isinstance(w, Copy) and _crosses(w)]
        if name not in reads or not cross or ws[0][0] is not cross[0][0]:
            continue  # no hand-off, or the tile's own core writes it before the first one
        common = _common_path([(None, reads[name][1])] + cross)
        if not common:
            continue
        loop = common[-1]
        local = {id(w) for w, _ in ws} - {id(w) for w, _ in cross}
        site = next((st for st in loop.body if any(
            name in {b.name for b in analysis.reads(x)} or id(x) in local
            for x in analysis.instructions([st]))), None)
        if site is not None:
            out[name] = (reads[name][0], site)
    return out if early & set(out) else {}


def _crosses(s: Copy) -> bool:
    """A copy between the vector core's UB and the cube's memories (UB -> L1, L0C -> UB)."""
    scopes = {s.src.buffer.scope, s.dst.buffer.scope}
    return s.src.buffer.scope != s.dst.buffer.scope and "UB" in scopes and \
        scopes <= {"UB", *analysis.AIC_SCOPES}


def check_cross_tile_order(kernel: Kernel) -> None:
    """Developer-mode is_npu kernels (no T.Scope, no flags): an on-chip tile read before any
    statement writes it, whose writes copy it from the other core (UB -> L1, L0C -> UB), is
    tilelang-ascend's TL_ASCEND_AUTO_CV_COMBINE hand-off through the compiler's own workspaces
    (the cube's read meets the vector's write of the same iteration):

        for i in T.serial(n):
            T.gemm_v0(q_l1, kv_l1, s_l0c)      # reads kv_l1 ...
            T.copy(kv_ub, kv_l1[r, :])         # ... which the vector core writes below

    Here statements run in program order, so the first read would see an unwritten tile: a
    located error naming the workspace_idx form that says the same thing."""
    if not kernel.is_npu or analysis.is_expert(kernel):
        return
    from ..transform.infer_scopes import infer_scopes
    kernel = infer_scopes(kernel)  # alloc_shared / alloc_fragment tiles get their memories
    cross = {}
    for s in walk_statements(kernel.body):
        if isinstance(s, Copy) and s.src.buffer.scope != s.dst.buffer.scope and \
                {s.src.buffer.scope, s.dst.buffer.scope} <= {"UB", *analysis.AIC_SCOPES} and \
                "UB" in (s.src.buffer.scope, s.dst.buffer.scope):
            cross.setdefault(s.dst.buffer.name, s)
    if not cross:
        return
    guarded = {id(t) for s in walk_statements(kernel.body) if isinstance(s, If)
               for t in walk_statements(s.then_body + s.else_body)}  # e.g. `if k > 0:` reads
    written: set[str] = set()
    for s in walk_statements(kernel.body):
        if isinstance(s, (*TILE_OPS, Store)) or analysis.is_map(s):
            for b in analysis.reads(s):
                w = cross.get(b.name)
                if w is not None and b.name not in written and id(s) not in guarded:
                    here = "the vector core's UB" if w.src.buffer.scope == "UB" else \
                        f"the cube's {w.src.buffer.scope}"
                    raise CompileError(
                        f"tile '{b.name}' ({b.scope}) is read here before any statement writes "
                        f"it; its write (line {w.loc.line}) copies it from {here}: this kernel "
                        f"relies on tilelang-ascend's TL_ASCEND_AUTO_CV_COMBINE running its cube "
                        f"and vector statements as two concurrent programs that meet at "
                        f"compiler-made workspaces, which is done here only where one loop "
                        f"holds the read and every write (paired per iteration). "
                        f"Pass the tile through a workspace_idx tensor: the reading core copies "
                        f"it in (T.copy(workspace[cid, ...], {b.name})) where it reads the tile "
                        f"now, the writing core copies its data out to the workspace "
                        f"(tilelang-ascend's sparse_flash_attn_developer.py form)", s.loc)
            written |= {b.name for b in analysis.writes(s)}
