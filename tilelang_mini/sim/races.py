"""Race checks of the simulator (`sim/simulator.py`'s blocks mix in `RaceChecks`).

Each buffer instance (global/workspace: per block; L1/L0*: the AIC's; UB: each AIV's) keeps the
accesses not yet known to be ordered before every later access (`_Hist`): an access is dropped
when a later ordered access covers its box (a write covers anything, a read covers reads), and,
when the history grows, when it happens before the current clock of every thread that can still
access the buffer. Two unordered accesses to common elements, one writing and not both atomic
updates of one kind, are a `RaceError`, unless both are GM accesses whose values show that no
order of the two can give other values (`settle`).

A clock is indexed by a thread's clock index (`_Pipe.cid`): its position among the (core, pipe)
threads that can run instructions of the kernel."""
from __future__ import annotations

import numpy as np

from ..errors import RaceError
from ..ir.analysis import GM_SCOPES, is_atomic_pair
from .report import instr_label
from .accesses import Hull, box_elements, instr_accesses


def _snapshot(bufs, buf, box):
    """A copy of the elements of `box` (lo0, hi0, lo1, hi1, ...) of GM buffer `buf`."""
    try:
        arr = bufs[buf.name]
    except KeyError:
        return None
    sl = tuple(slice(box[i], box[i + 1]) for i in range(0, len(box), 2))
    if len(sl) != np.ndim(arr):
        return None
    return np.array(arr[sl], copy=True)


def _part(vals, box, over):
    """The elements of `over` in a snapshot of `box` (None when the snapshot does not hold
    them: a box past the buffer's end)."""
    if vals is None:
        return None
    sl = tuple(slice(over[i] - box[i], over[i + 1] - box[i]) for i in range(0, len(box), 2))
    part = vals[sl]
    want = tuple(over[i + 1] - over[i] for i in range(0, len(over), 2))
    if part.shape != want:
        return None
    return np.ascontiguousarray(part)


class _Hist:
    __slots__ = ("items", "limit", "threads")

    def __init__(self, threads):
        self.items = []
        self.limit = 64
        self.threads = threads


class RaceChecks:
    """The race checks of a block (mixed into the simulator's `_Block`: `sim`, `hist`, `fresh`,
    `suspects`, `cores` and `block` are its)."""

    def check_access(self, core, p, di, epoch: int, clk, bufs) -> None:
        """Check the accesses of `di` (its buffers `bufs`: the core's, with the scalar
        registers as dispatched) against the history of each buffer instance it touches."""
        # A static plan reads no buffer (its region starts are constants or loop variables):
        # an instruction that reads scalar registers has its accesses found from `bufs`.
        plan = None
        if not di.scalars:  # (static_plan, kept on the statement's Op per core)
            plans = di.op.plans
            plan = plans[core.idx]
            if plan is False:
                plan = plans[core.idx] = self.sim.static_plan(di.stmt, core.name)
            if plan is not None and type(plan) is not list:  # (a function of the variables;
                plan = plan(di.vars)                            # None: instr_accesses decides)
        if plan is None:
            plan = self.sim.plan(instr_accesses(di.stmt, di.vars, bufs), core.name)
        self.check_plan(plan, core, p.cid, di, epoch, clk, bufs)

    def check_plan(self, plan, core, tid: int, di, epoch: int, clk, bufs) -> None:
        """Check the accesses of an access plan (KernelFacts.plan) by thread `tid` at `epoch`
        with clock `clk` against the history of each buffer instance, and record each there:
        an access is (thread, epoch, box, write, DynInstr, core name, GM values or None)."""
        hist, name = self.hist, core.name
        for key, owner, buf, box, w in plan:
            h = hist.get(key)
            if h is None:
                h = hist[key] = _Hist(self.sim.threads_of(buf, owner))
            # GM accesses keep their values (settle): the bytes read, or the bytes before and
            # after a write, so that unordered accesses that cannot differ are not races
            rec = None
            hull = type(box) is Hull
            if bufs is not None and not hull and buf.scope in GM_SCOPES:
                rec = [_snapshot(bufs, buf, box), None]
                self.fresh.append((buf, box, w, rec))
            new = (tid, epoch, box, w, di, name, rec)
            keep = []
            for a in h.items:
                a_tid, a_ep, a_box, a_w, a_di, _, _ = a
                if a_di is di:  # the instruction's own other operand
                    keep.append(a)
                    continue
                overlap = covers = True
                if a_box != box:  # (equal boxes, e.g. a tile loaded again: overlap and cover)
                    for i in range(0, len(box), 2):
                        lo, hi, alo, ahi = box[i], box[i + 1], a_box[i], a_box[i + 1]
                        if lo >= ahi or alo >= hi:
                            overlap = False
                            break
                        if lo > alo or hi < ahi:
                            covers = False
                if overlap:
                    if a_ep <= clk[a_tid]:
                        if covers and (w or not a_w) and not hull:
                            continue
                    elif (w or a_w) and not is_atomic_pair(w, a_w) and (  # atomic adds commute
                            self.touch_common(buf, box, a_box, name, a[5])):
                        if rec is not None and a[6] is not None:
                            self.suspects.append((buf, key, a, new, h, clk))  # settle decides
                        else:
                            self.race(buf, key, a, new)
                keep.append(a)
            keep.append(new)
            if len(keep) > h.limit:
                keep = self.prune(keep, h.threads)
                h.limit = max(64, 2 * len(keep))
            h.items = keep

    def settle(self, bufs) -> None:
        """After the instruction's effect: record what its GM writes wrote, then decide each
        unordered pair `check_plan` deferred. Not a race when no order of the two can give other
        values: two writes of the same bytes; a write of the bytes a read got; a read of bytes a
        write left as they were, or that another write ordered before the read wrote the same.
        Anything else raises RaceError as before."""
        for buf, box, w, rec in self.fresh:
            rec[1] = _snapshot(bufs, buf, box) if w else rec[0]
        for buf, key, a, new, h, clk in self.suspects:
            if not self.benign(a, new, h, clk):
                self.race(buf, key, a, new)
        self.fresh, self.suspects = [], []

    @staticmethod
    def benign(a, new, h, clk) -> bool:
        box, a_box = new[2], a[2]
        over = tuple(x for i in range(0, len(box), 2)
                     for x in (max(box[i], a_box[i]), min(box[i + 1], a_box[i + 1])))
        a_vals, vals = _part(a[6][1], a_box, over), _part(new[6][1], box, over)
        if a_vals is None or vals is None or a_vals.tobytes() != vals.tobytes():
            return False
        if new[3]:  # a write: of the bytes the earlier write wrote or the earlier read got
            return True
        # a read of what an unordered write wrote: the same without that write?
        if _part(a[6][0], a_box, over).tobytes() == a_vals.tobytes():
            return True  # the write left the bytes as they were
        for t in h.items:  # another write ordered before the read wrote the same bytes
            if t is a or not t[3] or t[6] is None or t[6][1] is None:
                continue
            if t[1] > clk[t[0]]:
                continue
            t_vals = _part(t[6][1], t[2], over)
            if t_vals is not None and t_vals.tobytes() == a_vals.tobytes():
                return True
        return False

    @staticmethod
    def touch_common(buf, box, a_box, core, a_core) -> bool:
        """Two overlapping boxes: do the accesses touch common elements? Yes unless one is the
        Hull of a strided map whose elements miss the other's, or (between the two AIVs, on
        GM, as check_sync decides) the Hull of a guarded map, whose elements are unknown."""
        if not isinstance(box, Hull) and not isinstance(a_box, Hull):
            return True
        e1, e2 = box_elements(box, buf.shape), box_elements(a_box, buf.shape)
        if e1 is None or e2 is None:
            return not ({core, a_core} == {"V0", "V1"} and buf.scope in GM_SCOPES)
        return np.intersect1d(e1, e2, assume_unique=True).size > 0

    def prune(self, items, threads):
        """The accesses a thread that may still access the buffer has not seen. An idle pipe
        sees at least core.D (later dispatches carry it), nothing once its core is done (else
        an idle V pipe kept every scalar access of SIMT lanes: a quadratic history)."""
        front = None
        for c, pname in threads:
            core = self.cores[c]
            if core.idle():
                continue
            p = core.pipes[pname]
            b = p.B
            if not p.busy and not p.queue:
                if core.done:
                    continue
                b = tuple(map(max, b, core.D))
            front = b if front is None else tuple(map(min, front, b))
        if front is None:
            return []
        return [a for a in items if a[1] > front[a[0]]]

    def race(self, buf, key, a, b) -> None:
        def desc(x):
            kind = "writes" if x[3] else "reads"
            return f"{x[5]}.{x[4].pipe} `{instr_label(x[4].stmt)}` at {x[4].stmt.loc} {kind} it"
        where = "workspace " if buf.scope == "workspace" else ""
        owner = "" if key[0] == "G" else f" of {key[0]}"
        box = ", ".join(f"{a[2][i]}:{a[2][i + 1]}" for i in range(0, len(a[2]), 2))
        shared = self.sim.aliases.get(buf.name)
        alias = (f" (plan_memory placed {', '.join(x.name for x in shared)} on bytes of "
                 f"{buf.name}: an access through either name to common bytes counts)"
                 ) if shared else ""
        raise RaceError(
            f"data race on {where}{buf.scope} buffer {buf.name}{owner} in block {self.block}: "
            f"{desc(a)} (elements [{box}]) and {desc(b)}, and no flag or barrier orders them"
            f"{alias}", b[4].stmt.loc)
