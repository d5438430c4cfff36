"""pipeline: `T.Pipelined(n, num_stages=s)` gives each buffer the loop body fills afresh in every
iteration s versions (L0 buffers at most two), and unrolls the loop by s so iteration i uses
version i % s; the remaining
n % s iterations follow as an epilogue. With its own buffers (and, from insert_sync, its own
flags), the load of iteration i+1 runs on MTE2 while the cube computes iteration i:

    for k in Pipelined(4, num_stages=2):          for k_o in serial(2):
        copy(A[k * 64 ...], A_s)           ->         copy(A[(k_o * 2) * 64 ...], A_s)
        gemm(A_s, ...)                                gemm(A_s, ...)
                                                      copy(A[(k_o * 2 + 1) * 64 ...], A_s_1)
                                                      gemm(A_s_1, ...)

A trip count read at run time (`Pipelined(N[g], 2)`) is unrolled the same way: the loop runs
N[g] // s groups and the N[g] % s iterations left run under guards on the count (see
_expand_runtime), so any count, 0 and 1 included, runs each iteration once on version k % s.
The count must stay as it was during the loop (the guards read it again after it): a loop that
writes what its count reads stays serial.

A loop whose cube work waits on vector work of its own iteration (attention's QK^T -> softmax ->
PV) is also rotated into a cross-core software pipeline, the cube running one iteration ahead:

    for k in Pipelined(n, 2):  F(k); B(k)   ->   F(0); for k_o: F(2k_o+1); B(2k_o); F(2k_o+2); B(2k_o+1); ...; B(n-1)

(for a constant n only: a run-time count gets the buffer versions without the rotation).

The versions are a performance choice (pipeline_fitting): where they would overflow a scope of
the chip (plan_memory's rule), that scope's buffers get fewer versions, one fewer at a time; if
even one version each does not fit, the pipelined loops run serially, as with num_stages=1
(TileLang's GPU stages multi-buffer shared copies only; here the fragments' L0C/UB homes would
be copied too: GQA backward's dq, qkT and dsT next to its dk and dv accumulators at dim_qk 192).
"""
from __future__ import annotations

from dataclasses import replace

from ..ir.nodes import (
    Alloc, BinOp, Const, For, If, Kernel, Scope, Var, body_fields, walk_statements,
)
from ..errors import BufferOverflowError, TileLangMiniError
from ..ir import analysis
from .util import (
    fresh_name, group_scopes, map_bodies, rebuffer,
    substitute,
)

STAGED_SCOPES = ("L1", "L0A", "L0B", "L0C", "UB", "workspace")
L0_SCOPES = ("L0A", "L0B", "L0C")


def pipeline_fitting(kernel: Kernel, chip) -> Kernel:
    """pipeline(kernel), with fewer versions of one scope's buffers where all of them would not
    fit the chip (GPU tile sizes: TileLang's pool_mqa keeps a 256x128 float32 score tile per
    stage, three stages of it overflow UB). The cap of the overflowing scope drops one version
    at a time, down to one (no versions: the loop runs its stages on one buffer); if even that
    does not fit, the uncapped result goes on and plan_memory reports the overflow.

        for k in Pipelined(n, num_stages=3): ... s_ub ...   (3 x 128 KiB > UB)
            ->  versions s_ub, s_ub_1 of iterations 3k_o, 3k_o + 1; 3k_o + 2 on s_ub again
    """
    from .plan_memory import plan_memory
    first = pipeline(kernel)
    count = lambda k: sum(isinstance(s, Alloc) for s in walk_statements(k.body))  # noqa: E731
    if count(first) == count(kernel) or fits_unshared(first, chip):  # nothing to cap
        return first
    out, caps = first, {}
    top = max((s.num_stages for s in walk_statements(kernel.body)
               if isinstance(s, For) and s.kind == "pipelined"), default=1)
    while True:
        try:
            plan_memory(out, chip)
            return out
        except BufferOverflowError as err:
            scope = getattr(err, "scope", None)
            caps[scope] = caps.get(scope, top) - 1
            if scope is None or caps[scope] < 1:
                return _serial_if_fits(kernel, chip, first)
        except TileLangMiniError:  # reported by plan_memory itself, at its own stage
            return first
        out = pipeline(kernel, caps)


def _serial_if_fits(kernel: Kernel, chip, first: Kernel) -> Kernel:
    """The kernel with every Pipelined loop run serially (one stage) if that fits the chip
    where capping one scope's versions did not; else `first` (plan_memory then names the
    overflowing buffers)."""
    from .plan_memory import plan_memory
    serial = pipeline(kernel, max_stages=1)
    try:
        plan_memory(serial, chip)
    except TileLangMiniError:
        return first
    return serial


def fits_unshared(kernel: Kernel, chip) -> bool:
    """Do the buffers of every staged scope fit the chip side by side, none sharing bytes (then
    no memory plan is needed to know the versions fit)?"""
    from .plan_memory import nbytes
    total: dict = {}  # scope -> bytes of all its buffers, aligned
    for a in walk_statements(kernel.body):
        if isinstance(a, Alloc) and a.buffer.scope in STAGED_SCOPES[:-1]:
            align = chip.alignment_of(a.buffer.scope)
            total[a.buffer.scope] = total.get(a.buffer.scope, 0) + \
                -(-nbytes(a.buffer) // align) * align
    return all(n <= chip.capacity_of(scope) for scope, n in total.items())


def pipeline(kernel: Kernel, caps: dict | None = None, max_stages: int | None = None) -> Kernel:
    """`caps`: scope -> the most versions a buffer of that scope gets (pipeline_fitting);
    `max_stages`: every Pipelined loop's stages capped (1: the loops run serially)."""
    names = {s.buffer.name for s in walk_statements(kernel.body) if isinstance(s, Alloc)}
    names |= {p.name for p in kernel.params}
    allocs: list[Alloc] = []
    readers = _reader_counts(kernel.body)

    def block(stmts):
        out = []
        for s in stmts:
            s = map_bodies(s, block)
            if isinstance(s, For) and s.kind == "pipelined":
                if max_stages is not None:
                    s = replace(s, num_stages=min(s.num_stages, max_stages))
                out += _expand(s, names, allocs, readers, caps or {})
            else:
                out.append(s)
        return out

    body = block(list(kernel.body))
    n_top = 0
    while n_top < len(body) and isinstance(body[n_top], Alloc):
        n_top += 1
    return replace(kernel, body=tuple(body[:n_top] + allocs + body[n_top:]))


def _reader_counts(body) -> dict:
    """Buffer name -> how many instructions of `body` read it."""
    out: dict = {}
    for s in analysis.instructions(body):
        for name in {b.name for b in analysis.reads(s)}:
            out[name] = out.get(name, 0) + 1
    return out


def _expand(loop: For, names: set, allocs: list, readers=None, caps=None) -> list:
    stages, extent = loop.num_stages, loop.extents[0]
    serial = replace(loop, kind="serial", num_stages=0)
    if stages <= 1:
        return [serial]
    if isinstance(extent, Const):
        if extent.value < 2:
            return [serial]
    elif not _fixed_by(extent, loop.body):  # the tail re-reads the count after the loop
        return [serial]
    staged = _private_buffers(loop.body)
    if readers is not None:  # a value read after the loop (or before it) has one home
        inside = _reader_counts(loop.body)
        staged = [b for b in staged if readers.get(b.name, 0) <= inside.get(b.name, 0)]
    if not staged:
        return [serial]
    versions = [{}]
    for j in range(1, stages):
        mapping = {}
        for b in staged:
            limit = min(2 if b.scope in L0_SCOPES else stages,  # two L0 versions suffice
                        (caps or {}).get(b.scope, stages))  # (legalize sizes for two)
            if j >= limit:
                mapping[b.name] = versions[j % limit].get(b.name, b)
                continue
            name = fresh_name(f"{b.name}_{j}", names)
            mapping[b.name] = replace(b, name=name)
            allocs.append(Alloc(mapping[b.name], None, loop.loc))
        versions.append(mapping)
    var = loop.vars[0]
    outer = fresh_name(f"{var}_o", names)
    if not isinstance(extent, Const):
        return _expand_runtime(loop, extent, stages, versions, outer)
    n = extent.value
    rotated = _rotate(loop, n, stages, versions, outer)
    if rotated is not None:
        return rotated
    body = []
    for j in range(stages):
        k = BinOp("+", BinOp("*", Var(outer), Const(stages)), Const(j)) if j else BinOp(
            "*", Var(outer), Const(stages))
        body += [rebuffer(substitute(s, {var: k}), versions[j]) for s in loop.body]
    out = []
    full = n // stages
    if full:
        out.append(For((outer,), (Const(full),), "serial", tuple(body), 0, loop.loc))
    tail = []
    for j in range(n % stages):
        k = Const(full * stages + j)
        tail += [rebuffer(substitute(s, {var: k}), versions[j]) for s in loop.body]
    if not full:  # fewer iterations than stages: still one loop region (see _one_trip)
        return [_one_trip(outer, tail, loop)]
    return out + tail


def _iteration(loop: For, k, version: dict) -> list:
    """The loop body for iteration `k` (an expression) on the buffer `version`."""
    return [rebuffer(substitute(s, {loop.vars[0]: k}), version) for s in loop.body]


def _expand_runtime(loop: For, n, stages: int, versions: list, outer: str) -> list:
    """A trip count `n` read at run time: the unrolled loop runs n // s groups, iteration
    k_o * s + j on version j; the n % s iterations left run after it, each under a guard on
    the run-time count (nested: the j-th runs only if the (j-1)-th did), version j again:

        for k in Pipelined(N[g], 2):    if N[g] >= 2:
            body(k, A_s)          ->        for k_o in serial(N[g] // 2):
                                                body(k_o * 2, A_s); body(k_o * 2 + 1, A_s_1)
                                        if N[g] > 0 and N[g] % 2 > 0:
                                            body(N[g] // 2 * 2, A_s)

    Any count works: 0 and negative counts (no iteration) skip the loop and the guards; 1 runs
    the tail alone. The loop sits in an `if` that skips it when it would run no group:
    insert_sync walks a loop as running (twice), an `if` as maybe not taken, so what is known
    after the skipped loop is only what holds without it. The cross-core rotation (_rotate)
    is left to constant counts."""
    full = BinOp("//", n, Const(stages))
    base = BinOp("*", full, Const(stages))
    tail: list = []
    for j in reversed(range(stages - 1)):
        cond = BinOp(">", BinOp("%", n, Const(stages)), Const(j))
        if j == 0:
            cond = BinOp("and", BinOp(">", n, Const(0)), cond)
        k = BinOp("+", base, Const(j)) if j else base
        tail = [If(cond, tuple(_iteration(loop, k, versions[j]) + tail), (), loop.loc)]
    body = []
    for j in range(stages):
        k = BinOp("*", Var(outer), Const(stages))
        body += _iteration(loop, BinOp("+", k, Const(j)) if j else k, versions[j])
    main = For((outer,), (full,), "serial", tuple(body), 0, loop.loc)
    return [If(BinOp(">=", n, Const(stages)), (main,), (), loop.loc)] + tail


def _fixed_by(extent, body) -> bool:
    """Does `body` leave every buffer the expression `extent` reads unwritten?"""
    read = {ld.buffer.name for ld in analysis.loads(extent)}
    if not read:
        return True
    return not read & set().union(*(analysis.written_names(s) for s in body))


# ----------------------------------------------------------------- cross-core software pipeline


def _rotate(loop: For, n: int, stages: int, versions: list, outer: str):
    """A loop whose cube work waits on vector work of the same iteration (the cube -> vector ->
    cube round trip of attention) is rotated: the cube work that needs no vector result of its
    iteration (F) runs one iteration ahead of the rest (B):

        F(0); for i in 0..n-2: F(i+1); B(i); B(n-1)

    so the cube computes F(i+1) while the vector cores work on iteration i. None when the loop
    has no such round trip or moving F(i+1) ahead of B(i) would break a dependency."""
    items = _items(loop.body)
    if any(core is None for core, _ in items):
        return None
    deps = _dependents(items)
    front = [core == "C" and not deps[i] for i, (core, _) in enumerate(items)]
    if not any(front) or not any(core == "C" and not f for (core, _), f in zip(items, front)):
        return None
    var = loop.vars[0]

    def part(i_expr, version: dict, want: bool):
        return [(core, rebuffer(substitute(st, {var: i_expr}), version))
                for (core, st), f in zip(items, front) if f == want]

    for j in range(stages):  # F(i+1) may pass B(i) only if they touch no common buffer
        f_next = [_touches(a) for _, a in part(Var(var), versions[(j + 1) % stages], True)]
        b_now = [_touches(b) for _, b in part(Var(var), versions[j], False)]
        for a in f_next:
            for b in b_now:
                if _overlap(a, b):
                    return None

    def at(i):
        return i if isinstance(i, Const) else i

    seq = part(Const(0), versions[0], True)
    groups, rest = divmod(n - 1, stages)
    if groups:
        body = []
        for j in range(stages):
            i = BinOp("+", BinOp("*", Var(outer), Const(stages)), Const(j)) if j else BinOp(
                "*", Var(outer), Const(stages))
            i1 = BinOp("+", BinOp("*", Var(outer), Const(stages)), Const(j + 1))
            body += part(i1, versions[(j + 1) % stages], True) + part(i, versions[j], False)
        seq.append((None, For((outer,), (Const(groups),), "serial", tuple(group_scopes(body)), 0,
                              loop.loc)))
    middle = []
    for j in range(rest):
        i = groups * stages + j
        middle += part(Const(i + 1), versions[(i + 1) % stages], True)
        middle += part(Const(i), versions[i % stages], False)
    if groups or not middle:
        seq += middle
    else:  # no full group: the overlapped iterations stay one loop region (see _one_trip)
        seq.append((None, _one_trip(outer, group_scopes(middle), loop)))
    seq += part(Const(n - 1), versions[(n - 1) % stages], False)
    return group_scopes(seq)


def _one_trip(var: str, body, loop: For) -> For:
    """`for var in serial(1)` around iterations that run overlapped but form no full group of
    stages. The loop keeps them one region for plan_memory, whose liveness holds a buffer used
    inside a loop for the whole loop: the stage versions, used together by concurrently running
    pipes, then never share bytes (sharing would serialise the very overlap the stages buy)."""
    return For((var,), (Const(1),), "serial", tuple(body), 0, loop.loc)


def _items(body) -> list:
    """The loop body as (core, statement): Scope blocks opened; other control flow has core None."""
    out = []
    for st in body:
        if isinstance(st, Scope):
            out += [(st.core, x) for x in st.body]
        else:
            out.append((None, st))
    return out


def _touches(st):
    reads, writes = set(), set()
    for x in [st] if not body_fields(st) else analysis.instructions([st]):
        reads |= {b.name for b in analysis.reads(x)}
        writes |= {b.name for b in analysis.writes(x)}
    return reads, writes


def _overlap(a, b) -> bool:
    """Do statements that touch `a` and `b` ((reads, writes) each) conflict?"""
    (ra, wa), (rb, wb) = a, b
    return bool(wa & (rb | wb) or wb & ra)


def _dependents(items) -> list:
    """For each item: does it depend, within the iteration, on vector work (directly or not)?"""
    out = []
    touched = [_touches(st) for _, st in items]
    for j, (core, st) in enumerate(items):
        dep = core != "C" or any(out[i] and _overlap(touched[i], touched[j]) for i in range(j))
        out.append(dep)
    return out


def _private_buffers(body) -> list:
    """On-chip buffers each iteration writes in full before reading (no value crosses iterations)."""
    written_full, read_first, seen = {}, set(), set()
    conditional = {id(x) for st in walk_statements(body) if isinstance(st, If)
                   for x in analysis.instructions([*st.then_body, *st.else_body])}
    for s in analysis.instructions(body):
        for b in analysis.reads(s):
            if b.name not in written_full and b.scope in STAGED_SCOPES:
                read_first.add(b.name)
        for region in _write_regions(s):
            b = region.buffer
            if id(s) in conditional:  # a write under an `if` may not happen: not a full write
                continue
            if b.scope in STAGED_SCOPES and b.name not in read_first:
                if region.is_full or region.extent == b.shape:
                    written_full.setdefault(b.name, b)
                elif b.name not in written_full:
                    read_first.add(b.name)
        seen |= {b.name for b in analysis.writes(s)}
    return [b for n, b in written_full.items() if n not in read_first]


def _write_regions(s):
    from ..ir.nodes import Copy, Fill, Gemm, Reduce, Region
    if isinstance(s, Copy):
        return [s.dst]
    if isinstance(s, Gemm):
        return [s.c] if s.clear_accum else []
    if isinstance(s, (Fill, Reduce)):
        return [s.dst]
    if isinstance(s, For) and s.kind == "parallel":
        return [Region.full(st.buffer) if any(st is t for t in s.body) and _covers(s, st)
                else Region(st.buffer, (), ()) for st in analysis.map_stores(s)]
    return []


def _covers(loop: For, store) -> bool:
    """A map store writes the whole buffer: indexed by the loop variables over its full shape."""
    return (tuple(store.indices) == tuple(Var(v) for v in loop.vars)
            and tuple(e.value for e in loop.extents if isinstance(e, Const)) == store.buffer.shape)
