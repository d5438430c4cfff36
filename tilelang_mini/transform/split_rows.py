"""split_rows: the vector row split of split_cores. Vector work on tiles whose first dimension
is the block's rows runs on both AIVs, each on its half of the rows (`vid * half` in the global
memory regions, half-height tiles); vector work off the split tiles that ends in a global
memory write runs on AIV 0 alone:

    x_ub = alloc_ub((32, 64))                       x_ub = alloc_ub((16, 64))
    copy(X[cid * 32 +: 32, 0 +: 64], x_ub)    ->    copy(X[cid * 32 + vid * 16 +: 16, 0 +: 64], x_ub)
    for i, j in Parallel(32, 64): ...               for i, j in Parallel(16, 64): ...
"""
from __future__ import annotations

from dataclasses import replace

from ..ir.nodes import (
    Alloc, BinOp, Const, Copy, Fill, For, If, Load, Reduce, Region, Sort, Store, Var,
    body_fields, transform, walk, walk_own, walk_statements,
)
from ..ir.pipes import pipe_of
from ..ir import analysis, dtypes

CUBE_PIPES = ("MTE1", "M", "FIX")


def core_of(stmt) -> str | None:
    pipe = pipe_of(stmt)
    if pipe is None:
        return None
    if pipe in CUBE_PIPES:
        return "C"
    if pipe == "MTE2":
        return "C" if stmt.dst.buffer.scope == "L1" else "V"
    return "V"


def portable(store: Store) -> bool:
    """A scalar store any core can execute itself: it reads only GM, scalars and constants."""
    return store.buffer.scope == "var" and all(
        n.buffer.scope in ("global", "workspace", "var")
        for n in walk_own(store) if isinstance(n, Load))


# ------------------------------------------------------------------------- vector row split

VID = Var("vid")


def row_split(body):
    """(R, split, once): the row count R of the vector tiles if the vector work splits in two
    halves by rows, else None. The UB tiles of R rows that the data flow ties to the block's
    rows are split (`_row_tiles`; of the row counts that have such tiles, the one whose tiles
    hold the most bytes and split cleanly); the others are read by both AIVs, or written by
    vector work off the split buffers that ends in a global memory write: AIV 0 alone runs
    that work (`once`, the ids of its instructions)."""
    ub = {s.buffer.name: s.buffer for s in walk_statements(body)
          if isinstance(s, Alloc) and s.buffer.scope == "UB"}
    if not ub:
        return None
    # a tile read in a copy's indices (a gather's row numbers) is whole on each AIV that reads it
    index_tiles = {ld.buffer.name for st in analysis.instructions(body) if isinstance(st, Copy)
                   for r in (st.src, st.dst) for x in r.start for ld in analysis.loads(x)}
    candidates = []
    for rows in {b.shape[0] for b in ub.values() if b.shape[0] % 2 == 0}:
        split = _row_tiles(body, ub, rows, index_tiles)
        if split:
            size = sum(_nbytes(ub[n]) for n in split)
            candidates.append((-size, -len(split), -rows, split))
    for _size, _count, neg_rows, split in sorted(candidates, key=lambda c: c[:3]):
        found = _checked_split(body, -neg_rows, split)
        if found is not None:
            return found
    return None


def _nbytes(buf) -> int:
    n = 1
    for d in buf.shape:
        n *= d
    return n * dtypes.itemsize(buf.dtype)


def _row_tiles(body, ub, rows, index_tiles) -> frozenset:
    """The UB tiles whose first dimension holds the block's `rows`, by the data flow. Tiles
    tied row for row by an instruction (a map indexing both with its row variable, a reduction
    along a later dimension, a copy of whole rows) form one flow; a flow counts where a tile of
    it is exchanged whole with memory outside UB along a dimension of that memory (a copy,
    `copy(X[cid * 32 +: 32, 0 +: 64], x_ub)`, the cube's `copy(s_l0c, s_ub)`; a map reading or
    storing global memory at its row variable). The tiles split are the largest such flow and
    every flow whose tiles are rows there (not a stretch of a wider buffer's contiguous last
    dimension, as a gathered 64-element key row is in a kernel of 64-row tiles). A tile is in
    no flow where an instruction uses its first dimension otherwise (a map indexing it with
    another variable, `y[i, j] = x[i, j] * gamma[j]`; part of its rows, `copy(K[idx[r], 0 +:
    64], k_ub[r, 0 +: 64])`; a reduction along it), nor where a copy reads row numbers from it."""
    cand = {n for n, b in ub.items() if b.shape[0] == rows} - index_tiles
    root = {n: n for n in cand}
    along: dict = {}  # tile -> "rows" / "stretch": how memory outside UB holds its first dim
    off = set()

    def find(n):
        while root[n] != n:
            root[n] = root[root[n]]
            n = root[n]
        return n

    def tie(names):
        names = [n for n in names if n in cand]
        for n in names[1:]:
            root[find(n)] = find(names[0])

    def exchanged(tile, buf, dim):
        kind = "rows" if len(buf.shape) == 1 or dim < len(buf.shape) - 1 else "stretch"
        if along.get(tile) != "rows":
            along[tile] = kind

    for s in analysis.instructions(body):
        if isinstance(s, Copy):
            regions = [r for r in (s.src, s.dst) if r.buffer.name in cand]
            off |= {r.buffer.name for r in regions if r.extent[0] != rows}
            whole = [r for r in regions if r.extent[0] == rows]
            if len(whole) == 2:
                tie([r.buffer.name for r in whole])
            for mine, other in ((s.src, s.dst), (s.dst, s.src)):
                if mine in whole and other.buffer.scope != "UB":
                    d = _row_dim(other, rows)
                    if d is not None:
                        exchanged(mine.buffer.name, other.buffer, d)
        elif isinstance(s, Reduce):
            if s.src.buffer.name in cand:
                if s.dim == 0 or s.src.extent[0] != rows or s.dst.buffer.name not in cand:
                    off.add(s.src.buffer.name)
                else:
                    tie([s.src.buffer.name, s.dst.buffer.name])
        elif isinstance(s, Sort):
            tie([s.values.buffer.name, s.indices.buffer.name])
        elif isinstance(s, For) and s.kind == "parallel":
            row = Var(s.vars[0])
            tied, gm = [], []
            for n in walk(s):
                if not isinstance(n, (Load, Store)):
                    continue
                if n.buffer.name in cand:
                    if n.indices[0] == row and s.extents[0] == Const(rows):
                        tied.append(n.buffer.name)
                    else:
                        off.add(n.buffer.name)
                elif n.buffer.scope in analysis.GM_SCOPES and s.extents[0] == Const(rows):
                    gm += [(n.buffer, d) for d, x in enumerate(n.indices)
                           if any(v == row for v in walk(x))]
            tie(tied)
            for buf, d in gm:
                for t in tied:
                    exchanged(t, buf, d)
    flows: dict = {}
    for n in cand - off:
        flows.setdefault(find(n), set()).add(n)
    flows = {k: f - off for k, f in flows.items() if f & set(along) and not f & off}
    if not flows:
        return frozenset()
    largest = max(flows.values(), key=lambda f: (sum(_nbytes(ub[n]) for n in f), sorted(f)))
    out = set(largest)
    for f in flows.values():
        if any(along.get(n) == "rows" for n in f):
            out |= f
    return frozenset(out)


def _checked_split(body, rows, split):
    """row_split's result for the tiles `split` of `rows` rows, or None where some instruction
    cannot run on half the rows (nor on AIV 0 alone)."""
    heads = {ld.buffer.name for h in _control_heads(body) for ld in analysis.loads(h)}
    if heads & split:
        return None  # each AIV would decide on its own half of the rows
    whole = []  # vector instructions off the split buffers that write global memory
    for s in analysis.instructions(body):
        if core_of(s) == "V" and not _splittable(s, split, rows):
            if not _aiv0_only(s, split):
                return None
            whole.append(s)
        if core_of(s) == "C" and not _cube_splittable(s, split, rows):
            return None
    once = _aiv0_work(body, whole, split, heads)
    if _crosses_aivs(body, once) or _reads_other_rows(body, once):
        return None
    return rows, frozenset(split), once


def _reads_other_rows(body, once) -> bool:
    """Whether global memory that vector work of both AIVs writes is also read by such work
    at other elements than it writes (a copy of another region, an element access at another
    index): with the rows split, AIV 0 could read rows that AIV 1 wrote, with no order
    between the two vector cores. Where every access is the same region (or element index),
    each AIV reads back what it wrote itself:

        copy(t, ws[bx * 8 +: 8, ...])                           (t split by rows)
        for i, j in Parallel(8, 32): u[i, j] = ws[bx * 8 + 7 - i, j]   ->  not split
    """
    keys, written, read = {}, set(), set()
    for s in analysis.instructions(body):
        if core_of(s) != "V" or id(s) in once:
            continue
        for node, w in analysis.operands(s):
            buf = node.buffer
            if buf.scope not in analysis.GM_SCOPES:
                continue
            key = (node.start, node.extent) if isinstance(node, Region) else node.indices
            keys.setdefault(buf.name, set()).add(key)
            (written if w else read).add(buf.name)
    return any(len(keys[n]) > 1 for n in written & read)


def _crosses_aivs(body, once) -> bool:
    """Whether global memory that AIV 0's own instructions (`once`) write is touched by vector
    work both AIVs run, or the reverse: AIV 1 would read what only AIV 0 wrote (or AIV 0 what
    AIV 1 writes) with no order between the two vector cores."""
    def gm(bufs):  # memory both AIVs share: global memory and the cube's L1
        return {b.name for b in bufs if b.scope in analysis.GM_SCOPES or b.scope == "L1"}
    mine_w, mine_r, both_w, both_r = set(), set(), set(), set()
    for s in analysis.instructions(body):
        if core_of(s) != "V":
            continue
        w, r = gm(analysis.writes(s)), gm(analysis.reads(s))
        if id(s) in once:
            mine_w |= w
            mine_r |= r
        else:
            both_w |= w
            both_r |= r
    return bool(mine_w & (both_w | both_r) or mine_r & both_w)


def _aiv0_only(s, split) -> bool:
    """A vector instruction that touches no split buffer and writes global memory or the cube's
    L1 (a gathered row staged to L1, through a workspace or directly; a value stored once):
    both AIVs would write the same elements (twice for an atomic add), so AIV 0 alone runs it,
    the AIVs' rows still split."""
    touched = {b.name for b in analysis.reads(s) + analysis.writes(s)}
    return not touched & split and any(b.scope in analysis.GM_SCOPES or b.scope == "L1"
                                       for b in analysis.writes(s))


def _aiv0_work(body, whole, split, heads) -> frozenset:
    """ids of the vector instructions AIV 0 alone runs in a row split: those of `whole`, and
    those that only feed them (they write a whole UB tile no other instruction reads, nor a
    control-flow head: AIV 1 would compute it for nothing):

        copy(Idx[..], idx_ub)                       if vid == 0: copy(Idx[..], idx_ub)
        for r in serial(64):                 ->     for r in serial(64):
            copy(KV[idx_ub[r], 0 +: 512], kv_ub)        if vid == 0: copy(KV[idx_ub[r], 0 +: 512], kv_ub)
            copy(kv_ub, ws[r, 0 +: 512])                if vid == 0: copy(kv_ub, ws[r, 0 +: 512])"""
    if not whole:
        return frozenset()
    vector = [s for s in analysis.instructions(body) if core_of(s) == "V"]
    once = {id(s) for s in whole}
    grew = True
    while grew:
        grew = False
        for s in vector:
            if id(s) in once:
                continue
            out = {b.name for b in analysis.writes(s)}
            if not out or out & (split | heads) or any(
                    b.scope != "UB" for b in analysis.writes(s)):
                continue
            readers = [x for x in analysis.instructions(body) if x is not s and out & {
                b.name for b in analysis.reads(x)}]
            if readers and all(id(x) in once for x in readers):
                once.add(id(s))
                grew = True
    return frozenset(once)


def _control_heads(body):
    """The conditions and loop bounds of the control flow that every core runs (not the ifs
    inside a Parallel map, which are per element)."""
    for st in body:
        if isinstance(st, If):
            yield st.cond
        elif isinstance(st, For) and st.kind != "parallel":
            yield from st.extents
        if not (isinstance(st, For) and st.kind == "parallel"):
            for f in body_fields(st):
                yield from _control_heads(getattr(st, f))


def _cube_splittable(s, split, rows) -> bool:
    """A cube instruction may touch a split buffer only as FixPipe's destination, whole rows."""
    touched = {b.name for b in analysis.reads(s) + analysis.writes(s)} & split
    if not touched:
        return True
    return (isinstance(s, Copy) and touched == {s.dst.buffer.name}
            and s.dst.extent[0] == rows and s.src.extent[0] == rows)


def _splittable(s, split, rows) -> bool:
    if isinstance(s, Store) and portable(s):
        return True  # each AIV computes the scalar itself
    if isinstance(s, Copy):
        a, b = s.src.buffer.name in split, s.dst.buffer.name in split
        if not (a or b):
            return s.dst.buffer.scope in ("UB", "var")
        region = s.src if a else s.dst
        other = s.dst if a else s.src
        return region.extent[0] == rows and _row_dim(other, rows) is not None and (
            a == b or other.buffer.scope not in ("UB",))
    if isinstance(s, Fill):
        return s.dst.buffer.name not in split or s.dst.extent[0] == rows
    if isinstance(s, Reduce):
        a, b = s.src.buffer.name in split, s.dst.buffer.name in split
        return a == b and (not a or (s.dim != 0 and s.src.extent[0] == rows))
    if isinstance(s, Sort):  # rows sort independently: each AIV sorts its half
        a, b = s.values.buffer.name in split, s.indices.buffer.name in split
        return a == b and (not a or (len(s.values.extent) > 1 and s.values.extent[0] == rows))
    if isinstance(s, For):
        writes = {st.buffer.name for st in analysis.map_stores(s)}
        if _gm_row_map(s, split, rows):
            return True
        if not writes & split:
            return not writes - {b.name for b in _var_buffers(s)}
        return s.extents[0] == Const(rows) and writes <= split and _rows_indexed(s, split)
    return False


def _gm_row_map(s, split, rows) -> bool:
    """A Parallel map over a split tile's rows that stores to GM what it reads of the tile, row
    by row (varlen attention's masked output store, `if i < len: O[.., i, d] = O_s[i, d]`):
    each AIV runs the rows of its half, writing the GM elements of those rows (iterations of a
    Parallel map are independent, so the two halves write what the whole map writes)."""
    if not (isinstance(s, For) and s.kind == "parallel" and s.extents[0] == Const(rows)):
        return False
    stores = analysis.map_stores(s)
    reads = {ld.buffer.name for st in s.body for ld in walk(st) if isinstance(ld, Load)}
    return (bool(reads & split) and bool(stores)
            and all(st.buffer.scope == "global" for st in stores)
            and _rows_indexed(s, split, stores=False))


def _var_buffers(s):
    return [st.buffer for st in analysis.map_stores(s) if st.buffer.scope == "var"]


def _rows_indexed(loop: For, split, stores: bool = True) -> bool:
    """Every access of a split buffer in the map indexes dim 0 with the map's first variable
    (`stores`: and so does every store of the map)."""
    row = loop.vars[0]
    ok = True

    def check(n):
        nonlocal ok
        if isinstance(n, (Load, Store)) and n.buffer.name in split:
            if n.indices[0] != Var(row):
                ok = False
        return n
    for st in loop.body:
        transform(st, check)
    for st in analysis.map_stores(loop) if stores else ():
        if st.indices[0] != Var(row):
            ok = False
    return ok


def split_alloc(a: Alloc, rows):
    if rows is None or a.buffer.name not in rows[1]:
        return a
    shape = (rows[0] // 2,) + a.buffer.shape[1:]
    return replace(a, buffer=replace(a.buffer, shape=shape))


def _half(rows, split):
    """Buffer rewriting for the split: split buffers get half the rows."""
    half = rows // 2

    def rw(n):
        from ..ir.nodes import Buffer
        if isinstance(n, Buffer) and n.name in split and n.scope == "UB":
            return replace(n, shape=(half,) + n.shape[1:])
        return n
    return rw


def split_vector(s, rows):
    if isinstance(s, Store) and portable(s):
        return s  # a scalar from GM: every AIV loads its own
    if rows is None or id(s) in rows[2]:
        return If(BinOp("==", VID, Const(0)), (s,), (), s.loc)
    n, split = rows[:2]
    half = n // 2
    s = transform(s, _half(n, split))
    offset = BinOp("*", VID, Const(half))
    if isinstance(s, Copy):
        src_split, dst_split = s.src.buffer.name in split, s.dst.buffer.name in split
        if not (src_split or dst_split):
            # A tile that is not split (a scale, a bias, a (1,) value): each AIV has its own UB
            # and needs all of it, so both load it (_splittable admits only UB destinations).
            return s
        src = _rows(s.src, half, None if src_split else offset)
        dst = _rows(s.dst, half, None if dst_split else offset)
        return replace(s, src=src, dst=dst)
    if isinstance(s, (Fill, Reduce)):
        if isinstance(s, Fill) and s.dst.buffer.name in split:
            return replace(s, dst=_rows(s.dst, half, None))
        if isinstance(s, Reduce) and s.src.buffer.name in split:
            return replace(s, src=_rows(s.src, half, None), dst=_rows(s.dst, half, None))
        return s
    if isinstance(s, Sort):
        if s.values.buffer.name in split:
            return replace(s, values=_rows(s.values, half, None),
                           indices=_rows(s.indices, half, None))
        return s
    if isinstance(s, For):
        if not any(st.buffer.name in split for st in analysis.map_stores(s)) and \
                not _gm_row_map(s, split, n):
            return s
        # The map runs over this AIV's half of the rows: its row variable `i` stands for the
        # block row `i + vid * half` everywhere (values, conditions, index expressions, other
        # buffers), except as the row index of a split buffer, whose rows are the half's own.
        row = Var(s.vars[0])
        moved = BinOp("+", row, offset)

        def shift(n):
            if n == row:
                return moved
            if isinstance(n, (Load, Store)) and n.buffer.name in split and n.indices[0] == moved:
                return replace(n, indices=(row,) + tuple(n.indices[1:]))
            return n
        body = tuple(transform(st, shift) for st in s.body)
        return replace(s, extents=(Const(half),) + s.extents[1:], body=body)
    return s


def split_cube(s, rows):
    """A cube instruction that writes a split UB buffer (FixPipe L0C -> UB on chips with the
    path) delivers half the rows to each AIV: its destination is the halved buffer."""
    n, split = rows[:2]
    s = transform(s, _half(n, split))
    if isinstance(s, Copy) and s.dst.buffer.name in split:
        return replace(s, dst=_rows(s.dst, n // 2, None))
    return s


def _row_dim(r: Region, rows: int):
    """The dimension of `r` that holds the tile's rows: the first one not of extent 1."""
    for d, e in enumerate(r.extent):
        if e == rows:
            return d
        if e != 1:
            return None
    return None


def _rows(r: Region, half: int, offset):
    """Region `r` restricted to this AIV's rows (offset by vid * half when `offset` is given)."""
    d = 0 if offset is None else _row_dim(r, 2 * half)
    if offset is None:
        start = r.start[d]
    elif isinstance(r.start[d], Const) and r.start[d].value == 0:
        start = offset
    else:
        start = BinOp("+", r.start[d], offset)
    return Region(r.buffer, r.start[:d] + (start,) + r.start[d + 1:],
                  r.extent[:d] + (half,) + r.extent[d + 1:])
