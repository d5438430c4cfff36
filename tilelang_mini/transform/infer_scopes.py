"""infer_scopes: developer-mode buffers (shared/fragment) get chip scopes from how they are used.

A gemm operand lives in L1, a gemm accumulator in L0C, anything the vector unit touches in UB. A
buffer used in several ways gets one version per scope, and the values flow between them with
explicit copies (the cube/vector hand-offs that legalize then routes and split_cores separates):

    A_s = alloc_shared((64, 32), "bfloat16")       A_s = alloc_L1((64, 32), "bfloat16")
    copy(A[...], A_s)                               A_s_ub = alloc_ub((64, 32), "bfloat16")
    gemm(A_s, B_s, C_f)                     ->      copy(A[...], A_s)
    for i, j in Parallel(64, 32):                   copy(A[...], A_s_ub)
        sq[i, j] = A_s[i, j] * A_s[i, j]            gemm(A_s, B_s, C_f)        # C_f: L0C
                                                    for i, j in Parallel(64, 32):
                                                        sq[i, j] = A_s_ub[i, j] * A_s_ub[i, j]

An accumulator that the vector unit also updates (flash attention's output) stays in UB; each
`gemm(A, B, O)` then computes into the L0C version with clear_accum and is added on the vector unit.
"""
from __future__ import annotations

from dataclasses import replace

from ..errors import CompileError, InternalCompilerError
from ..ir.nodes import (
    Alloc, BinOp, Buffer, Const, Copy, Fill, For, Gemm, If, Kernel, Load, Reduce, Region, Scope,
    Sort, Store,
    Var, walk, walk_own, walk_statements,
)
from ..ir import analysis
from .util import rebuffer

DEV = ("shared", "fragment")
ORDER = ("L0C", "L1", "UB")
SUFFIX = {"L0C": "_l0c", "L1": "_l1", "UB": "_ub"}
# Logical paths between chip scopes (legalize routes those the chip lacks through GM).
PATHS = {("L0C", "UB"), ("L0C", "L1"), ("UB", "L1"), ("UB", "UB")}


def infer_scopes(kernel: Kernel) -> Kernel:
    dev = {}
    for s in walk_statements(kernel.body):
        if isinstance(s, Alloc) and s.buffer.scope in DEV:
            dev[s.buffer.name] = s.buffer
    if not dev:
        return kernel
    homes = _homes(kernel, dev)
    versions = {}
    for name, buf in dev.items():
        hs = homes[name]
        versions[name] = {h: replace(buf, name=name if i == 0 else name + SUFFIX[h], scope=h)
                          for i, h in enumerate(hs)}
    rewriter = _Rewriter(versions)
    # Before its first write a tile holds its initial (zero) value in every version alike, so
    # a path that never writes it (an `if` on data around a gemm) leaves it valid everywhere.
    body, _ = rewriter.block(list(kernel.body), {n: frozenset(versions[n]) for n in dev})
    extra = [Alloc(b, None, kernel.loc) for b in rewriter.extra.values()]
    return replace(kernel, body=tuple(extra + body))


def _homes(kernel: Kernel, dev: dict) -> dict:
    """Scopes each developer buffer needs, from its uses."""
    need = {n: set() for n in dev}

    def add(buf, scope):
        if buf.name in need and buf.scope in DEV:
            need[buf.name].add(scope)

    for s in walk_statements(kernel.body):
        if isinstance(s, If) or (isinstance(s, For) and s.kind != "parallel"):
            for n in walk_own(s):  # a condition or loop bound reads the tile on the AIV
                if isinstance(n, Load):
                    add(n.buffer, "UB")
        if isinstance(s, Gemm):
            for r in (s.a, s.b, s.scale_a, s.scale_b):
                if r is not None:
                    add(r.buffer, "L1")
            add(s.c.buffer, "L0C")
        elif isinstance(s, (Reduce, Sort, Store)) or (isinstance(s, For) and s.kind == "parallel"):
            for b in analysis.reads(s) + analysis.writes(s):
                add(b, "UB")
    for name, hs in need.items():
        if not hs:  # only copied and filled: a staging buffer of the vector unit
            hs.add("UB")
    _copy_sources(kernel, need)
    return {n: tuple(h for h in ORDER if h in hs) for n, hs in need.items()}


def _copy_sources(kernel: Kernel, need: dict) -> None:
    """A tile copied out must have a version the destination can be written from: a gemm
    operand (L1 only) copied to global memory or into a vector tile also gets a UB version,
    which the writes of its value keep current (TileLang's recurrent state: `T.copy(state_s,
    state_frag)` and `T.copy(state_s, H[...])` of a tile the next gemm reads). A gemm
    accumulator (L0C only) that a copy sets gets a UB version too: its value lives there and
    each gemm adds its product on the vector unit. Repeated until no copy changes a tile's
    scopes (a destination's scopes can grow in turn):

        copy(G[...], s)  gemm(w, s, f)  copy(s, H[...])   s: L1 -> L1, UB
        copy(s, acc)  gemm(k, v, acc)                     acc: L0C -> L0C, UB
    """
    copies = [s for s in walk_statements(kernel.body)
              if isinstance(s, Copy) and s.src.buffer.scope in DEV and s.src.buffer.name in need]
    changed = True
    while changed:
        changed = False
        for s in copies:
            src, dst = s.src.buffer, s.dst.buffer
            if dst.scope in DEV and dst.name in need:
                if need[dst.name] == {"L0C"}:  # a copy sets the accumulator: its value in UB
                    need[dst.name].add("UB")
                    changed = True
                ends = need[dst.name] - {"L0C"}
            elif dst.scope in ("global", "workspace"):
                ends = {None}
            elif dst.scope == "UB":
                ends = {"UB"}
            else:
                continue
            if ends and not any((h in ("L0C", "UB")) if e is None else (h, e) in PATHS
                                for h in need[src.name] for e in ends):
                need[src.name].add("UB")
                changed = True


class _Rewriter:
    def __init__(self, versions: dict):
        self.versions = versions
        self.extra: dict[str, Buffer] = {}

    def v(self, buf: Buffer, scope: str) -> Buffer:
        return self.versions[buf.name][scope]

    def homes(self, buf: Buffer):
        return tuple(self.versions[buf.name])

    def is_dev(self, buf: Buffer) -> bool:
        return buf.scope in DEV and buf.name in self.versions

    # -------------------------------------------------------------------------------- blocks

    def block(self, stmts, state):
        out = []
        for s in stmts:
            new, state = self.stmt(s, state)
            out += new
        return out, state

    def stmt(self, s, state):
        if isinstance(s, Alloc) and self.is_dev(s.buffer):
            return [Alloc(b, None, s.loc) for b in self.versions[s.buffer.name].values()], state
        if isinstance(s, For) and s.kind != "parallel":
            pre, s, state = self.own_reads(s, "extents", state)
            _, end = self.block(list(s.body), state)
            pre += self.enter_loop(s, state, end)
            head = {n: state[n] & end[n] for n in state}
            body, end = self.block(list(s.body), head)
            return pre + [replace(s, body=tuple(body))], end
        if isinstance(s, If):
            pre, s, state = self.own_reads(s, "cond", state)
            then, st1 = self.block(list(s.then_body), state)
            other, st2 = self.block(list(s.else_body), state)
            then, other, st1, st2 = self.agree(s, then, other, dict(st1), dict(st2))
            return pre + [replace(s, then_body=tuple(then), else_body=tuple(other))], {
                n: st1[n] & st2[n] for n in state}
        if isinstance(s, Scope):
            body, state = self.block(list(s.body), state)
            return [replace(s, body=tuple(body))], state
        if isinstance(s, Copy):
            return self.copy(s, dict(state))
        if isinstance(s, Gemm):
            return self.gemm(s, dict(state))
        if isinstance(s, Fill) and self.is_dev(s.dst.buffer):
            b = s.dst.buffer
            targets = [h for h in self.homes(b) if h != "L1"] or ["L1"]
            state = dict(state)
            state[b.name] = frozenset(targets)
            return [replace(s, dst=replace(s.dst, buffer=self.v(b, h))) for h in targets], state
        # Everything else runs on the vector unit: its buffers in UB. A map that reads what an
        # earlier statement of its own body wrote (`a[i] = ...; b[i] = a[i] + 1`) needs no
        # earlier value of it.
        state = dict(state)
        pre = []
        for b in _reads_before_writes(s):
            if self.is_dev(b):
                pre += self.ensure(b, "UB", state, s)
        for b in _partial_writes(s):  # the elements it leaves keep their value: in UB first
            if self.is_dev(b) and state[b.name]:
                pre += self.ensure(b, "UB", state, s)
        for b in analysis.writes(s):
            if self.is_dev(b):
                state[b.name] = frozenset({"UB"})
        mapping = {b.name: self.v(b, "UB") for b in analysis.reads(s) + analysis.writes(s)
                   if self.is_dev(b)}
        return pre + [rebuffer(s, mapping)], state

    def agree(self, s, then, other, st1, st2):
        """After an if whose branches leave a tile's value in different places (TileLang's
        `if kr == 0: acc_s[i, j] = select(...)` after a gemm: the then-branch's map leaves it in
        UB, the empty else-branch in L0C), copies at the end of one branch put it where the
        other has it, so that after the if it is valid somewhere:

            if c: map on acc_ub              if c: map on acc_ub
                                     ->      else: copy(acc, acc_ub)
        """
        then, other = list(then), list(other)
        for n in st1:
            if not st1[n] or not st2[n] or st1[n] & st2[n]:
                continue
            buf = next(iter(self.versions[n].values()))  # the version with the user's name
            for scope in [h for h in ORDER if h in st1[n]] + [h for h in ORDER if h in st2[n]]:
                src_state, body = (st2, other) if scope in st1[n] else (st1, then)
                if any(h in src_state[n] and (h, scope) in PATHS for h in ORDER):
                    body += self.ensure(buf, scope, src_state, s)
                    break
        return then, other, st1, st2

    def enter_loop(self, s, state, end) -> list:
        """Copies before a loop whose body leaves a tile's value somewhere the loop does not
        find it (T.tile row ops in a serial loop on a gemm accumulator: L0C on entry, UB after
        a trip), so that every trip starts with the value in one place (`state` is updated):

            gemm(a, b, acc)                       gemm(a, b, acc)
            for i in serial(M):           ->      copy(acc, acc_ub)
                relu(acc[i, :])                   for i in serial(M):
                                                      relu(acc_ub[i, :])
        """
        out = []
        for n in state:
            if not state[n] or not end[n] or state[n] & end[n]:
                continue
            buf = next(iter(self.versions[n].values()))  # the version with the user's name
            scope = next((h for h in ORDER if h in end[n] and any(
                g in state[n] and (g, h) in PATHS for g in ORDER)), None)
            if scope is not None:
                out += self.ensure(buf, scope, state, s)
        return out

    def own_reads(self, s, field: str, state):
        """A loop's extents or an if's condition read tiles on the scalar unit of the vector
        core: their UB versions, made valid first."""
        state = dict(state)
        exprs = getattr(s, field)
        exprs = exprs if isinstance(exprs, tuple) else (exprs,)
        bufs = [n.buffer for e in exprs for n in walk(e)
                if isinstance(n, Load) and self.is_dev(n.buffer)]
        if not bufs:
            return [], s, state
        pre = []
        for b in bufs:
            pre += self.ensure(b, "UB", state, s)
        mapping = {b.name: self.v(b, "UB") for b in bufs}
        new = tuple(rebuffer(e, mapping) for e in exprs)
        return pre, replace(s, **{field: new if field == "extents" else new[0]}), state

    # ------------------------------------------------------------------------------ value flow

    def ensure(self, buf: Buffer, scope: str, state, stmt) -> list:
        """Copies that make `buf`'s current value available in `scope`."""
        valid = state[buf.name]
        if scope in valid:
            return []
        if scope not in self.versions[buf.name]:
            raise InternalCompilerError(f"'{buf.name}' has no {scope} version", stmt.loc,
                                            stage="infer_scopes")
        for src in ORDER:
            if src in valid and (src, scope) in PATHS:
                state[buf.name] = valid | {scope}
                return [Copy(Region.full(self.v(buf, src)), Region.full(self.v(buf, scope)), stmt.loc)]
        have = ", ".join(sorted(valid)) or "nowhere (never written)"
        raise CompileError(f"'{buf.name}' is needed in {scope} but its value is in {have}, and the "
                           f"chip has no path from there; copy it from global memory instead",
                           stmt.loc)

    def copy(self, s: Copy, state):
        """A copy into a buffer with several versions writes one (UB when the value comes from
        on-chip, since the vector unit can convert) and moves it to the others without casts."""
        pre, picked = [], [n.buffer for r in (s.src, s.dst) for e in r.start for n in walk(e)
                           if isinstance(n, Load) and self.is_dev(n.buffer)]
        for b in picked:  # an index the scalar unit reads from a tile (a gather's row ids): UB
            pre += self.ensure(b, "UB", state, s)
        if picked:
            mapping = {b.name: self.v(b, "UB") for b in picked}
            s = replace(s, **{f: replace(r, start=tuple(rebuffer(e, mapping) for e in r.start))
                              for f, r in (("src", s.src), ("dst", s.dst))})
        src, dst = s.src.buffer, s.dst.buffer
        if self.is_dev(dst):
            targets = [h for h in self.homes(dst) if h != "L0C"]
            if not targets:
                raise CompileError(f"'{dst.name}' is a gemm accumulator; it cannot be the "
                                   "destination of a copy", s.loc)
            if self.is_dev(src) and "UB" in targets and len(targets) > 1:
                targets = ["UB"]
        else:
            targets = [None]
        out = []
        for t in targets:
            if self.is_dev(src):
                want = _source_scope(state[src.name], t)
                if want is None:
                    pre += self.ensure(src, "UB", state, s)
                    want = "UB"
                new_src = replace(s.src, buffer=self.v(src, want))
            else:
                new_src = s.src
            new_dst = replace(s.dst, buffer=self.v(dst, t)) if t else s.dst
            out.append(replace(s, src=new_src, dst=new_dst))
        if self.is_dev(dst):
            state[dst.name] = frozenset(targets)
        return pre + out, state

    def gemm(self, s: Gemm, state):
        pre = []
        for r in (s.a, s.b, s.scale_a, s.scale_b):
            if r is not None and self.is_dev(r.buffer):
                pre += self.ensure(r.buffer, "L1", state, s)

        def on_l1(r):
            return replace(r, buffer=self.v(r.buffer, "L1")) if r is not None and self.is_dev(
                r.buffer) else r

        a, b = on_l1(s.a), on_l1(s.b)
        s = replace(s, scale_a=on_l1(s.scale_a), scale_b=on_l1(s.scale_b))
        c = s.c.buffer
        if not self.is_dev(c):
            return pre + [replace(s, a=a, b=b)], state
        c_l0c = self.v(c, "L0C")
        if s.clear_accum or "L0C" in state[c.name] or "UB" not in self.homes(c):
            state[c.name] = frozenset({"L0C"})
            return pre + [replace(s, a=a, b=b, c=replace(s.c, buffer=c_l0c))], state
        # The accumulator's value lives in UB: compute the product alone, add it on the vector unit.
        c_ub = self.v(c, "UB")
        part = self.part_buffer(c_ub)
        gemm = replace(s, a=a, b=b, c=replace(s.c, buffer=c_l0c), clear_accum=True)
        move = Copy(Region.full(c_l0c), Region.full(part), s.loc)
        names = tuple(f"i{d}" for d in range(len(c_ub.shape)))
        idx = tuple(Var(n) for n in names)
        add = For(names, tuple(Const(e) for e in c_ub.shape), "parallel",
                  (Store(c_ub, idx, BinOp("+", Load(c_ub, idx), Load(part, idx)), s.loc),), 0, s.loc)
        state[c.name] = frozenset({"UB"})
        return pre + [gemm, move, add], state

    def part_buffer(self, c_ub: Buffer) -> Buffer:
        name = c_ub.name + "_part"
        if name not in self.extra:
            self.extra[name] = replace(c_ub, name=name)
        return self.extra[name]


def _source_scope(valid, target):
    """A scope holding the value from which `target` (None = global memory) can be written."""
    for src in ORDER:
        if src not in valid:
            continue
        if target is None and src in ("L0C", "UB"):
            return src
        if target is not None and (src, target) in PATHS:
            return src
    return None



def _reads_before_writes(s) -> list:
    """Buffers `s` reads before writing them; in a map, statement by statement."""
    if not analysis.is_map(s):
        return analysis.reads(s)
    out, written = [], set()
    for st in analysis.map_stores(s):
        out += [b for b in analysis.reads(st) if b.name not in written]
        written |= {b.name for b in analysis.writes(st)}
    return out


def _partial_writes(s) -> list:
    """Buffers a vector statement writes in part, keeping the other elements: a scalar Store,
    and a map's stores except one at the top of its body whose indices are the map's
    variables in order over the whole buffer (`acc[i, j] = ...` in `Parallel(M, N)` of an
    (M, N) tile). A store under an `if` of the map (`if i <= j: acc[i, j] = 0`, TileLang's
    masked triangle after a gemm) writes only where the condition holds."""
    if isinstance(s, Store):
        return [s.buffer]
    if not analysis.is_map(s):
        return []
    full = set()
    for st in s.body:
        if isinstance(st, Store) and len(st.indices) == len(s.vars) and all(
                isinstance(ix, Var) and ix.name == v for ix, v in zip(st.indices, s.vars)) and \
                all(isinstance(e, Const) and e.value == n
                    for e, n in zip(s.extents, st.buffer.shape)):
            full.add(st.buffer.name)
    return [st.buffer for st in analysis.map_stores(s) if st.buffer.name not in full]
