"""Races between blocks on global tensors (`simulate_kernel` records, `BlockRaces.check`
reports): blocks run concurrently and nothing orders them, so two accesses of different blocks to
common elements of a global tensor, one writing, race when the result depends on the blocks'
order."""
from __future__ import annotations

from collections import defaultdict

import numpy as np

from ..errors import RaceError
from ..ir.analysis import is_atomic_pair
from ..ir.printer import print_ir_line
from .accesses import shared_accesses, shared_operands


class BlockRaces:
    """Races between blocks on global tensors. Blocks run concurrently and nothing orders them;
    the simulator runs them one after another, so it records every access of a global tensor
    that some instruction writes, with the values it read (or, for a write, the values before
    and after), where the access's box is exactly the elements touched (analysis.exact_boxes).
    After the last block, two accesses of different blocks to common elements, one writing
    and not both atomic updates of one kind, are a race when the result depends on the blocks'
    order: two writes of different values, or a read that would have seen other values had the
    writing block run on the other side of it. Same-value writes (both AIVs' or blocks'
    identical stores) are not reported."""
    BUDGET = 20000  # value comparisons of overlapping pairs per tensor

    def __init__(self, written, bufs):
        self.bufs = bufs
        self.written = {n for n in written if n in bufs}  # (KernelFacts.gm_written)
        self.recs = defaultdict(list)  # name -> [block, box, write, stmt, values, values after]

    def touches(self, st) -> bool:
        """Does statement `st` access a global tensor that some instruction writes (exactly:
        shared_operands)? (`before` records nothing for one that does not.)"""
        return any(n.buffer.name in self.written for n, _ in shared_operands(st))

    def before(self, block, di, bufs):
        """Record the accesses of `di`, about to run in `block`, to global tensors that some
        instruction writes; the records of its writes, for `after` once the effect ran."""
        out = []
        for buf, box, w in shared_accesses(di.stmt, di.vars, bufs):
            arr = self.bufs.get(buf.name)
            if arr is None or buf.name not in self.written:
                continue
            sl = tuple(slice(box[i], box[i + 1]) for i in range(0, len(box), 2))
            rec = [block, box, w, di.stmt, np.array(arr[sl]), None]
            self.recs[buf.name].append(rec)
            if w:
                out.append((rec, arr, sl))
        return out

    def after(self, shared) -> None:
        """Complete the records of writes with the values after them."""
        for rec, arr, sl in shared:
            rec[5] = np.array(arr[sl])

    def check(self) -> None:
        """Raise a located RaceError for the first order-dependent pair of blocks."""
        for name, recs in self.recs.items():
            if len({r[0] for r in recs}) < 2 or not any(r[2] for r in recs):
                continue
            blk = np.array([r[0] for r in recs])
            lo = np.array([r[1][0::2] for r in recs])
            hi = np.array([r[1][1::2] for r in recs])
            reads = np.array([not r[2] for r in recs])
            near = _Neighbours(lo, hi)
            budget = self.BUDGET
            for i, r in enumerate(recs):
                if not r[2]:
                    continue
                cand = near.of(lo[i], hi[i])
                hit = ((blk[cand] != r[0]) & (lo[cand] < hi[i]).all(axis=1)
                       & (lo[i] < hi[cand]).all(axis=1) & ((cand > i) | reads[cand]))  # pairs once
                for j in np.sort(cand[hit]):
                    o = recs[j]
                    if r[2] and o[2] and is_atomic_pair(r[2], o[2]):
                        continue
                    budget -= 1
                    if budget < 0:
                        break
                    if not self.benign(r, o, lo[i], hi[i], lo[j], hi[j]):
                        self.report(name, r, o, np.maximum(lo[i], lo[j]),
                                    np.minimum(hi[i], hi[j]))
                if budget < 0:
                    break

    @staticmethod
    def benign(w, o, wlo, whi, olo, ohi) -> bool:
        """Would the values be the same had the two blocks run in the other order?"""
        ov_lo, ov_hi = np.maximum(wlo, olo), np.minimum(whi, ohi)

        def part(vals, lo):
            return np.ascontiguousarray(vals[tuple(slice(a - b, c - b) for a, c, b in
                                                   zip(ov_lo, ov_hi, lo))]).tobytes()
        if o[2]:  # both write: the same values either way
            return part(w[5], wlo) == part(o[5], olo)
        # o reads: had it run on the other side of the write, it would have read the values
        # after the write (it ran first) or before it (it ran after)
        seen = w[5] if o[0] < w[0] else w[4]
        return part(seen, wlo) == part(o[4], olo)

    @staticmethod
    def report(name, a, b, lo, hi) -> None:
        if b[0] < a[0]:
            a, b = b, a
        elems = ", ".join(f"{x}:{y}" for x, y in zip(lo.tolist(), hi.tolist()))

        def desc(r):
            return (f"block {r[0]} `{print_ir_line(r[3])}` at {r[3].loc} "
                    f"{'writes' if r[2] else 'reads'} it")
        raise RaceError(
            f"race between blocks on global buffer {name}[{elems}]: {desc(a)} and {desc(b)}; "
            f"blocks run concurrently and nothing orders them, and the result depends on "
            f"which runs first ({'different values written' if a[2] and b[2] else 'the read sees the write or not'}). "
            f"Give each block its own part of {name} (index it by the block), or accumulate "
            f"with T.atomic_add", b[3].loc)


class _Neighbours:
    """The records whose boxes may overlap a given box, found along one axis (the one where
    the boxes are shortest against their spread) in the records sorted by their start there:
    a box [lo, hi) can only overlap boxes that start before hi and after lo minus the longest
    box. Linear in the records for tiles of a grid, where checking every pair was quadratic."""

    def __init__(self, lo, hi):
        n, nd = lo.shape
        self.all = np.arange(n)
        self.axis = None
        if not nd or not n:
            return
        length = (hi - lo).max(axis=0)
        spread = hi.max(axis=0) - lo.min(axis=0)
        d = int(np.argmin(length / np.maximum(spread, 1)))
        self.axis, self.longest = d, int(length[d])
        self.order = np.argsort(lo[:, d], kind="stable")
        self.starts = lo[self.order, d]

    def of(self, lo, hi) -> np.ndarray:
        """Indices (in no particular order) of the records that may overlap [lo, hi)."""
        d = self.axis
        if d is None:
            return self.all
        a = np.searchsorted(self.starts, lo[d] - self.longest, side="right")
        b = np.searchsorted(self.starts, hi[d], side="left")
        return self.order[a:b]
