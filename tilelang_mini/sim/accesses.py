"""The element boxes a data instruction of the simulator accesses (`sim/races.py` checks them;
`sim/block_races.py` those of GM shared by blocks): a region's box from its starts, a load's or
store's from its indices over a map's lanes (in closed form where they are affine in the
variables), `Hull`s for the accesses whose box is not exactly the elements they touch."""
from __future__ import annotations

import numpy as np

from ..errors import KernelRuntimeError
from .. import semantics
from ..ir.analysis import exact_boxes, is_map, loads, operands
from ..ir.nodes import Const, For, If, Region, Store, Var
from .streams import Env, Fault, _expr_fn, as_index, cached


def _starts_fn(r: Region):
    if all(isinstance(x, Const) for x in r.start):
        st = tuple(int(x.value) for x in r.start)
        return lambda env: st
    fns = [_expr_fn(x) for x in r.start]

    def starts(env):
        out = []
        for f in fns:
            a = f(env)
            out.append(a if type(a) is int else as_index(a, "a region start"))
        return out

    return semantics.ops.affine_starts(r.start, starts)


def region_box(r: Region, env):
    """The element box [(lo, hi), ...] of a region, clipped to its buffer; None when empty."""
    return region_box_fn(r)(env)


def region_box_fn(r: Region):
    """`region_box` of region `r` as a function of the env, made once per region (a constant
    box when every start is)."""
    return cached(r, _box_fn, "box")


def _box_fn(r: Region):
    starts = _starts_fn(r)
    dims = tuple(zip(r.extent, r.buffer.shape))

    def box(env):
        out = []
        for a, (e, n) in zip(starts(env), dims):
            lo = a if a > 0 else 0
            hi = a + e
            if hi > n:
                hi = n
            if hi <= lo:
                return None
            out.append(lo)
            out.append(hi)
        return tuple(out)

    if all(isinstance(x, Const) for x in r.start):
        fixed = box(None)
        return lambda env: fixed
    return box


def index_box(buf, indices, env, lanes=None):
    """The element box of a load or store, clipped to its buffer; None when empty. `lanes`: a
    map's lane variables and their extents (a lane variable as an index spans 0..extent, what
    the min and max of its index array give)."""
    box = []
    for x, n in zip(indices, buf.shape):
        if lanes is not None and type(x) is Var and x.name in lanes:
            lo, hi = 0, lanes[x.name]
            if not hi:
                return None
        else:
            v = _expr_fn(x)(env)
            if isinstance(v, np.ndarray):
                if not v.size:
                    return None
                lo, hi = int(v.min()), int(v.max()) + 1
            else:
                lo = int(v)
                hi = lo + 1
        lo, hi = max(lo, 0), min(hi, n)
        if hi <= lo:
            return None
        box.append(lo)
        box.append(hi)
    return tuple(box)


def lane_extents(s: For, vars: dict) -> dict:
    """{lane variable: extent} of a map."""
    return dict(zip(s.vars, (int(e.value) if isinstance(e, Const) else
                             as_index(_expr_fn(e)(Env(vars, {})), "extent") for e in s.extents)))


def _parallel_vars(s: For, vars: dict, lanes: dict) -> dict:
    """The variables of a map's lanes: `vars` and each lane's index array (`lanes`: their
    extents, `lane_extents`)."""
    env_vars = dict(vars)
    exts = tuple(lanes.values())
    arrays = cached(s, lambda _: {}, "lanes")  # extents -> the lane index arrays (read only)
    aranges = arrays.get(exts)
    if aranges is None:
        nd = len(exts)
        aranges = arrays[exts] = tuple(
            np.arange(n, dtype=np.int64).reshape((1,) * d + (n,) + (1,) * (nd - d - 1))
            for d, n in enumerate(exts))
    for name, a in zip(s.vars, aranges):
        env_vars[name] = a
    return env_vars


GENERAL = object()


def affine_box_fn(node):
    """`_affine_box` of load or store `node`, made once per node."""
    return cached(node, _affine_box, "affine_box")


def _affine_box(node):
    """`index_box` of load or store `node` in closed form where each index is affine in the
    variables (ops.int_affine: c + sum(k * v)), as `box(vars, lanes)`: over a lane of extent
    n, k * v spans k * 0 .. k * (n - 1), so an index's minimum and maximum over the map's
    index space are the sums of its terms' (what the min and max of its index array give);
    `GENERAL` when a variable is not a lane and holds no int (`index_box` decides). None
    when some index is not affine."""
    forms = [semantics.ops.int_affine(x) for x in node.indices]
    shape = node.buffer.shape
    if len(forms) != len(shape) or any(f is None for f in forms):
        return None
    dims = tuple((c, tuple(steps.items()), n) for (c, steps), n in zip(forms, shape))

    def box(vars, lanes):
        out = []
        for c, steps, n in dims:
            lo = hi = c
            for v, k in steps:
                ext = lanes.get(v) if lanes is not None else None
                if ext is None:
                    x = vars.get(v)
                    if type(x) is not int:
                        return GENERAL
                    lo += k * x
                    hi += k * x
                elif not ext:  # (an empty index array)
                    return None
                elif k > 0:
                    hi += k * (ext - 1)
                else:
                    lo += k * (ext - 1)
            if lo < 0:
                lo = 0
            hi = n if hi >= n else hi + 1
            if hi <= lo:
                return None
            out.append(lo)
            out.append(hi)
        return tuple(out)

    return box


class _Operands:
    """What the boxes of an instruction's operands are found in: the instruction's env, a
    map's lane extents (None for other instructions) and, made when first asked for (`lane_env`),
    the env where its indices see the lane variables as index arrays."""

    __slots__ = ("stmt", "env", "lanes", "_lane_env")

    def __init__(self, stmt, vars: dict, bufs: dict):
        self.stmt = stmt
        self.env = Env(vars, bufs)
        self.lanes = lane_extents(stmt, vars) if is_map(stmt) else None
        self._lane_env = None

    def lane_env(self):
        if self._lane_env is None:
            env = self.env
            self._lane_env = env if self.lanes is None else Env(
                _parallel_vars(self.stmt, env.vars, self.lanes), env.bufs)
        return self._lane_env

    def box(self, node):
        """The box of operand `node` (a region, or a load or store of a buffer)."""
        if isinstance(node, Region):
            return region_box(node, self.env)
        fast = affine_box_fn(node)
        if fast is not None:
            box = fast(self.env.vars, self.lanes)
            if box is not GENERAL:
                return box
        return index_box(node.buffer, node.indices, self.lane_env(), self.lanes)


def instr_accesses(stmt, vars: dict, bufs: dict):
    """[(buffer, box, is_write)] of a data instruction (scalar `var` buffers left out). A region
    start or index that is not a valid integer at run time (e.g. nan) is a KernelRuntimeError at
    the instruction, as on the other targets."""
    try:
        return _instr_accesses(stmt, vars, bufs)
    except Fault as e:
        raise KernelRuntimeError(str(e), stmt.loc) from None
    except (ValueError, OverflowError) as e:
        raise KernelRuntimeError(f"{type(stmt).__name__} failed at run time: {e}", stmt.loc) from None


class Hull(tuple):
    """The element box of a map access that is not exactly the elements it touches (a strided
    or guarded map: analysis.exact_boxes). `elements`: the sorted flat indices it touches when
    the map has no if around it (a strided one), else None (unknown: only the box bounds it)."""
    elements = None


def _instr_accesses(stmt, vars: dict, bufs: dict):
    acc = _Operands(stmt, vars, bufs)
    out = []
    ops = operands_exact(stmt)
    unguarded = cached(stmt, _unguarded_map, "unguarded") if acc.lanes is not None else False
    masked = _masked_boxes(stmt, acc) if acc.lanes is not None and not unguarded else None
    for (node, w), exact in ops:
        if not isinstance(node, Region) and node.buffer.scope == "var":
            continue
        box = masked.get(node) if masked is not None else acc.box(node)
        if box is not None and not exact and not isinstance(node, Region):
            box = Hull(box)
            if unguarded:
                box.elements = _elements(node.buffer, node.indices, acc.lane_env())
        if box is not None:
            out.append((node.buffer, box, w))
    return out


def operands_exact(stmt) -> list:
    """[((operand, write flag), exact box)] of a data instruction (analysis.operands and
    exact_boxes), found once per statement."""
    return cached(stmt, lambda s: list(zip(operands(s, accumulate=False),
                                           exact_boxes(s, accumulate=False))), "operands_exact")


def _masked_boxes(stmt: For, acc: _Operands) -> dict:
    """{load or store: box} of a map with ifs in its body, each access over the iterations
    where the ifs around it hold, as the run masks them (semantics/run.py: the lanes
    compressed to the coordinates where a condition holds). An index a guard keeps inside its
    tensor, `w[ids[s + i]]` under `if i < n:`, is read only there (over every lane it would
    read ids past its end). Accesses of one node under several ifs: the box around them."""
    names = stmt.vars
    boxes = {}

    def note(node, env):
        box = index_box(node.buffer, node.indices, env)
        if box is None:
            return
        old = boxes.get(node)
        boxes[node] = box if old is None else tuple(
            min(a, b) if k % 2 == 0 else max(a, b) for k, (a, b) in enumerate(zip(old, box)))

    def visit(body, env):
        for s in body:
            if isinstance(s, If):
                for ld in loads(s):
                    note(ld, env)
                vs = env.vars
                *lanes, mask = np.broadcast_arrays(*[vs[n] for n in names],
                                                   np.asarray(_expr_fn(s.cond)(env), dtype=bool))
                for branch, sel in ((s.then_body, mask), (s.else_body, ~mask)):
                    if branch and sel.any():
                        sub = dict(vs)
                        sub.update((n, a[sel]) for n, a in zip(names, lanes))
                        visit(branch, Env(sub, env.bufs))
            elif isinstance(s, Store):
                for ld in loads(s):
                    note(ld, env)
                note(s, env)

    visit(stmt.body, acc.lane_env())
    return boxes


def _unguarded_map(stmt) -> bool:
    """A map whose body is stores only (no if, no nested loop): every access happens at every
    point of its index space."""
    return all(isinstance(s, Store) for s in stmt.body)


def _elements(buf, indices, env):
    """The sorted distinct flat (row-major) indices of `buf` an element access touches over a
    map's index space (those inside the buffer)."""
    vals = np.broadcast_arrays(*[np.asarray(_expr_fn(x)(env), dtype=np.int64) for x in indices])
    shape = tuple(buf.shape)
    ok = np.ones(vals[0].shape, dtype=bool)
    for v, n in zip(vals, shape):
        ok &= (v >= 0) & (v < n)
    flat = np.ravel_multi_index(tuple(v[ok] for v in vals), shape) if shape else np.zeros(1, np.int64)
    return np.unique(flat)


def box_elements(box, shape):
    """The sorted flat indices of an element box (lo0, hi0, lo1, hi1, ...) of a buffer."""
    if isinstance(box, Hull):
        return box.elements
    grids = np.meshgrid(*[np.arange(box[i], box[i + 1]) for i in range(0, len(box), 2)],
                        indexing="ij")
    return np.unique(np.ravel_multi_index(tuple(g.ravel() for g in grids), tuple(shape)))


def shared_operands(stmt) -> list:
    """[(operand, write flag)] of a data instruction's accesses to global tensors whose box is
    exactly the elements touched (analysis.exact_boxes), found once per statement."""
    return cached(stmt, lambda s: [(n, w) for (n, w), ok in zip(
        operands(s, accumulate=False), exact_boxes(s, accumulate=False))
        if ok and n.buffer.scope == "global"], "shared_operands")


def shared_accesses(stmt, vars: dict, bufs: dict):
    """[(buffer, box, write flag)] of the accesses of a data instruction to global tensors
    (shared by every block) whose box is exactly the elements touched (analysis.exact_boxes);
    the other accesses are left out (a box that over-approximates proves no race)."""
    ops = shared_operands(stmt)
    if not ops:
        return []
    acc = _Operands(stmt, vars, bufs)
    out = []
    for node, w in ops:
        box = acc.box(node)
        if box is not None:
            out.append((node.buffer, box, w))
    return out
