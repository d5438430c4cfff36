"""The batched run: many grid blocks of a block-independent kernel as one array computation.

The specification is the plain run (run.py): block after block, each with fresh on-chip buffers.
When no block can see what another block does, running instruction by instruction for a whole
group of blocks at once gives the same values, and costs one Python dispatch per instruction
per group instead of per block. Before -> after, RMSNorm 512x512 in 64 blocks:

    for cid in range(64): for vid in (0, 1): copy, map, reduce, map, map, copy   (768 calls)
    for vid in (0, 1): copy, map, reduce, map, map, copy over arrays [64, ...]    (12 calls)

Representation: a group of n blocks runs in one `BEnv` per core (block level, C, V0, V1, as in
the plain run: the two vector cores still run one after the other, so their order within a block
is the plain one). The grid variables are int64 arrays of the n block ids; every on-chip and
workspace buffer has a leading axis of n (block k's copy at [k]); kernel parameters (GM) are
the caller's arrays. Serial loop counters stay Python ints: loop extents and if conditions must
be the same for every block of the group. A region or element access whose start differs
between blocks reads a strided view when the blocks' starts form a regular grid (`_grid`), else
a gather, block by block.

When it applies (`why_not_batched` is None for the kernel):
- no parameter is both read and written (so no block reads what another writes; this also
  makes a rerun safe), and no parameter written shares memory with another (checked per call);
- no atomic copy, no dual-destination L0C -> UB copy, no block-scaled gemm, no sort of a
  parameter (those run plainly).
During the run, anything the batched form does not reproduce exactly raises `Bail`: control flow
that differs between the blocks of a group, an access out of bounds (the plain run reports it
at its block), an element of a parameter written twice (`_Marks`: by two blocks, or twice by
one; either may order differently). `run_batched` then returns False and the caller runs the
plain run, which rewrites every element the batched run wrote (it writes a superset: each block
ran a prefix of its own plain instructions) and reads only parameters nobody writes.
"""
from __future__ import annotations

import itertools

import numpy as np

from tilelang_mini.ir import dtypes
from tilelang_mini.ir.analysis import BLOCK_SCOPES, SYNC_OPS, core_instructions, reads, writes
from tilelang_mini.ir.nodes import (
    Alloc, Const, Copy, Fill, For, Gemm, If, Kernel, Load, Reduce, Scope, Sort, Store, walk,
)

from .exprs import EXPR_HANDLERS, F32, _uses, affine_dims, compile_expr, kind_of, to_f32, to_int
from .ops import _COMBINE, _squeezed, gemm_shape, matrix_ext, read_padded, write_clipped

GROUP_BYTES = 1 << 20     # the largest buffer of a group of blocks (stays in cache)


class Bail(Exception):
    """The batched run cannot reproduce the plain run from here on."""


# ------------------------------------------------------------------------- when it applies


def why_not_batched(kernel: Kernel) -> str | None:
    """Why `kernel` must run block by block (None: it may run batched)."""
    params = {p.name for p in kernel.params}
    read, written = set(), set()
    for s, _ in core_instructions(kernel.body):
        if isinstance(s, Copy) and s.atomic:
            return "an atomic copy"
        if isinstance(s, Copy) and s.src.buffer.scope == "L0C" and s.dst.buffer.scope == "UB":
            return "a dual-destination L0C -> UB copy"
        if isinstance(s, Gemm) and s.scale_gran > 0:
            return "a block-scaled gemm"
        if isinstance(s, Sort) and {s.values.buffer.name, s.indices.buffer.name} & params:
            return "a sort of a parameter"
        read |= {b.name for b in reads(s)}
        written |= {b.name for b in writes(s)}
    for s in kernel.body:
        read |= {n.buffer.name for n in walk(s) if isinstance(n, Load)}
    both = sorted(read & written & params)
    if both:
        return f"parameter {both[0]} is read and written"
    return None


# ------------------------------------------------------------------------------ state


class BEnv:
    """One core's state for a group of `n` blocks (as semantics.Env): `grid` holds the grid
    variables' arrays of block ids, `marks` the written-element marks of the run."""

    __slots__ = ("vars", "bufs", "core", "block", "n", "grid", "marks")

    def __init__(self, vars, bufs, n, grid, marks, core=None):
        self.vars, self.bufs, self.n, self.grid, self.marks = vars, bufs, n, grid, marks
        self.core, self.block = core, None


class BBuffers(dict):
    """A core's buffers by name (as exprs.Buffers), each on-chip one with a leading axis n."""

    __slots__ = ("declared", "n", "pool")

    def __init__(self, arrays, n, pool):
        super().__init__(arrays)
        self.declared, self.n, self.pool = {}, n, pool

    def __missing__(self, name):
        shape, dtype = self.declared[name]
        arr = self[name] = self.pool.zeros((self.n,) + shape, dtype)
        return arr


class _Pool:
    """Arrays of zeros for the groups of one run: a group's buffers, zeroed again, serve the
    next group (cheaper than fresh memory, whose pages fault in on first use)."""

    def __init__(self):
        self.free: dict = {}

    def zeros(self, shape, dtype):
        stack = self.free.get((shape, dtype))
        if stack:
            arr = stack.pop()
            arr.fill(0)
            return arr
        return np.zeros(shape, dtype)

    def release(self, envs, params):
        seen = set()
        for e in envs:
            for name, arr in e.bufs.items():
                if name not in params and id(arr) not in seen:
                    seen.add(id(arr))
                    self.free.setdefault((arr.shape, arr.dtype), []).append(arr)


class _Marks:
    """Which elements of each written parameter the run wrote, and how many writes: a count
    above the number of marked elements means an element was written twice."""

    def __init__(self, arrays: dict, spare: dict):
        self.shapes = {k: a.shape for k, a in arrays.items()}
        self.spare = spare      # mark arrays of earlier runs, reused (cleared)
        self.marks: dict = {}
        self.count = 0

    def of(self, name):
        m = self.marks.get(name)
        if m is None:
            m = self.spare.pop(name, None)     # taken: a concurrent run allocates its own
            if m is None or m.shape != self.shapes[name]:
                m = np.zeros(self.shapes[name], np.uint8)
            else:
                m.fill(0)
            self.marks[name] = m
        return m

    def clean(self) -> bool:
        """No element was written twice (the mark arrays go back to `spare`)."""
        ok = self.count == sum(int(np.count_nonzero(m)) for m in self.marks.values())
        self.spare.update(self.marks)
        return ok


def _buf(env, name):
    try:
        return env.bufs[name]
    except KeyError:
        raise Bail(f"buffer {name} used before it is allocated") from None


def _uniform(x) -> int:
    """A loop extent, if condition or start that must be one integer for the whole group."""
    if type(x) is int:
        return x
    a = np.asarray(x)
    if a.dtype.kind not in "iub" or a.size == 0:
        raise Bail("not an integer")
    flat = a.reshape(-1)
    if a.ndim and not (flat == flat[0]).all():
        raise Bail("differs between the blocks of the group")
    return int(flat[0])


def _per_block(x, n):
    """A region start: a Python int (the same for every block) or an int64 array [n]."""
    if type(x) is int:
        return x
    a = np.asarray(x)
    if a.dtype.kind not in "iub":
        raise Bail("not an integer")
    if a.size == 1:
        return int(a.reshape(-1)[0])
    if a.size != n:
        raise Bail("an index that depends on a Parallel loop variable")
    return a.reshape(n).astype(np.int64, copy=False)


# ------------------------------------------------------------------ accesses of a group


_GRIDS: dict = {}


def _grid(off: np.ndarray):
    """[(count, step)], outer to inner, with off[k] == off[0] + sum(i * step) over the
    row-major multi-index i of k; None when the offsets are not such a grid."""
    key = (off - off[0]).tobytes()
    hit = _GRIDS.get(key, False)
    if hit is False:
        if len(_GRIDS) > 4096:
            _GRIDS.clear()
        hit = _GRIDS[key] = _find_grid(off)
    return hit


def _find_grid(off: np.ndarray):
    dims = []
    while off.size > 1:
        step = off[1] - off[0]
        bad = np.flatnonzero(np.diff(off) != step)
        run = off.size if not bad.size else int(bad[0]) + 1
        if off.size % run:
            return None
        rows = off.reshape(-1, run)
        if not np.array_equal(rows - rows[:, :1], np.broadcast_to(np.arange(run) * step,
                                                                  rows.shape)):
            return None
        dims.append((run, int(step)))
        off = rows[:, 0]
    return dims[::-1]


def _linear(shape, starts):
    """Row-major element offsets of the starts (ints or arrays [n]) in an array of `shape`."""
    off, stride = 0, 1
    for s, size in zip(reversed(starts), reversed(shape)):
        off = off + s * stride
        stride *= size
    return np.asarray(off, np.int64)


def _box_view(arr, starts, ext, steps, n):
    """The elements arr[starts[d] + steps[d] * t] (t < ext[d]) of each block as one strided
    view with the blocks' axes first (a grid, `_grid`), or None. `arr` is C-contiguous."""
    if not arr.flags.c_contiguous:
        return None
    off = np.broadcast_to(_linear(arr.shape, starts), (n,))
    grid = _grid(off)
    if grid is None:
        return None
    size = arr.itemsize
    inner, stride = [], 1
    for d in reversed(range(arr.ndim)):
        inner.append(stride * steps[d] * size)
        stride *= arr.shape[d]
    flat = arr.reshape(-1)[int(off[0]):]
    return np.lib.stride_tricks.as_strided(
        flat, tuple(c for c, _ in grid) + tuple(ext),
        tuple(s * size for _, s in grid) + tuple(inner[::-1]))


def _in_bounds(shape, starts, ext, steps) -> bool:
    for s, e, st, n in zip(starts, ext, steps, shape):
        lo, hi = (s, s) if type(s) is int else (int(s.min()), int(s.max()))
        if lo < 0 or hi + st * (e - 1) >= n:
            return False
    return True


def _slices(starts, ext, steps, k=None):
    """The slices of one block's elements (k: its index in the group; None: every start is
    an int)."""
    return tuple(_slice1(s, e, st, k) for s, e, st in zip(starts, ext, steps))


def _slice1(s, e, st, k):
    a = s if type(s) is int else int(s[k])
    return slice(a, a + st * (e - 1) + 1, st)


def read_box(arr, starts, ext, steps, n, aligned):
    """Each block's elements (in bounds) as an array of shape G + ext, G the blocks' axes
    (their product n: (n,), or a grid of strided views). `aligned`: arr has the blocks' axis."""
    ext = tuple(ext)
    if all(type(s) is int for s in starts):
        if aligned:
            return arr[(slice(None),) + _slices(starts, ext, steps)]
        return np.broadcast_to(arr[_slices(starts, ext, steps)], (n,) + ext)
    if aligned:
        starts, steps = (np.arange(n),) + tuple(starts), (1,) + tuple(steps)
        v = _box_view(arr, starts, (1,) + ext, steps, n)
        if v is not None:
            return v.reshape(v.shape[:-len(ext) - 1] + ext)    # drop the extent-1 axis
        return np.stack([arr[_slices(starts, (1,) + ext, steps, k)][0] for k in range(n)])
    v = _box_view(arr, starts, ext, steps, n)
    if v is not None:
        return v
    return np.stack([arr[_slices(starts, ext, steps, k)] for k in range(n)])


def flat(v, n, ext):
    """An array of shape G + ext (read_box) as [n] + ext."""
    return v.reshape((n,) + tuple(ext))


def _lead(value, ext):
    """The blocks' axes G of a value of shape G + ext (() for a scalar)."""
    nd = np.ndim(value)
    return np.shape(value)[:nd - len(ext)] if nd > len(ext) else ()


def write_box(env, name, arr, starts, ext, steps, value, aligned):
    """Write `value` to each block's elements (in bounds): a scalar, an array of shape
    [n] + (ext or extent-1 axes), or G + ext as read_box gives. A parameter's elements are
    marked (`_Marks`)."""
    n, ext = env.n, tuple(ext)
    lead = _lead(value, ext)
    if all(type(s) is int for s in starts):
        if aligned:
            t = arr[(slice(None),) + _slices(starts, ext, steps)]
            if len(lead) > 1:
                t = t.reshape(lead + ext)          # splits the blocks' axis: still a view
            t[...] = value
            return
        if n > 1:
            raise Bail("every block writes the same elements")
    ext1 = ext
    if aligned:       # the blocks' axis of arr is one more dimension, block k at start k
        starts, steps, ext1 = (np.arange(n),) + tuple(starts), (1,) + tuple(steps), (1,) + ext
    v = _box_view(arr, starts, ext1, steps, n)
    if len(lead) > 1 and (v is None or aligned or lead != v.shape[:len(lead)]):
        value, lead = flat(value, n, ext), (n,)
    if v is not None:
        if lead == (n,):
            grid = v.shape[:v.ndim - len(ext1)]
            value = value.reshape(grid + (1,) * (len(ext1) - len(ext)) + value.shape[1:])
        v[...] = value
        if not aligned:
            _box_view(env.marks.of(name), starts, ext, steps, n)[...] = 1
    else:
        value = np.broadcast_to(value, (n,) + ext)
        for k in range(n):
            sl = _slices(starts, ext1, steps, k)
            arr[sl] = value[k].reshape(ext1)
            if not aligned:
                env.marks.of(name)[sl] = 1
    if not aligned:
        env.marks.count += n * int(np.prod(ext))


# ----------------------------------------------------------------------- expressions


def _load(e: Load, par, table, params):
    buf = e.buffer
    name, shape, kind = buf.name, buf.shape, kind_of(buf.dtype)
    aligned = name not in params
    conv = {"float": to_f32, "int": to_int, "bool": lambda x: x if isinstance(x, np.ndarray)
            else bool(x)}[kind]
    form = affine_dims(buf, e.indices, par, table)
    if form is not None:
        view = _affine(buf, form, par, aligned)
        if buf.dtype == "float32":
            return (lambda env: view(env)[0]), kind
        return (lambda env: conv(view(env)[0])), kind
    idx_fns = [compile_expr(i, par, table)[0] for i in e.indices]
    rank = len(par)

    def load(env):
        arr = _buf(env, name)
        idx = _gather_indices(env, buf, [f(env) for f in idx_fns], aligned, rank)
        return conv(arr[idx])

    return load, kind


def _gather_indices(env, buf, idx, aligned, rank):
    """The index tuple of a gather (bounds checked; the blocks' axis first when aligned)."""
    if len(idx) != len(buf.shape):
        raise Bail("a wrong number of indices")
    for d, (i, n) in enumerate(zip(idx, buf.shape)):
        a = np.asarray(i)
        if a.dtype.kind not in "iub" or (a.size and (a.min() < 0 or a.max() >= n)):
            raise Bail("a gather index out of bounds")
        if a.dtype.kind == "b":
            idx[d] = a.astype(np.int64)
    if aligned:
        idx = [np.arange(env.n).reshape((env.n,) + (1,) * rank)] + idx
    return tuple(idx)


def _affine(buf, form, par, aligned):
    """view(env) -> (the elements of an affine Parallel access as the plain view with the
    blocks' axis first, or the plain view itself when no block differs; write target or None)."""
    dims, perm, expand = form
    name, shape = buf.name, buf.shape
    steps = tuple(st or 1 for _, _, st in dims)
    keep = tuple(a is not None for _, a, _ in dims)
    bperm = None if perm is None else (0,) + tuple(p + 1 for p in perm)
    bexpand = None if expand is None else (slice(None),) + expand

    if aligned and all(hasattr(rest, "value") for rest, _, _ in dims):
        return _fixed_affine(buf, form, par)

    def view(env):
        arr = _buf(env, name)
        vs, n = env.vars, env.n
        starts = tuple(_per_block(rest(env), n) for rest, _, _ in dims)
        ext = tuple(1 if a is None else vs[par[a]].shape[a] for _, a, _ in dims)
        if not _in_bounds(shape, starts, ext, steps):
            raise Bail("an element access out of bounds")
        if all(type(s) is int for s in starts):
            sl = tuple(_slice1(s, e, st, None) if k else s
                       for s, e, st, k in zip(starts, ext, steps, keep))
            if aligned:
                v = arr[(slice(None),) + sl]
                if bperm is not None:
                    v = v.transpose(bperm)
                return (v if bexpand is None else v[bexpand]), True
            v = arr[sl]
            if perm is not None:
                v = v.transpose(perm)
            return (v if expand is None else v[expand]), False
        v = flat(read_box(arr, starts, ext, steps, n, aligned), n, ext)
        v = v[(slice(None),) + tuple(slice(None) if k else 0 for k in keep)]
        if bperm is not None:
            v = v.transpose(bperm)
        return (v if bexpand is None else v[bexpand]), None

    return view


def _fixed_affine(buf, form, par):
    """`_affine` of an on-chip buffer at constant offsets: its slices computed once per loop
    shape."""
    dims, perm, expand = form
    name, shape = buf.name, buf.shape
    bperm = None if perm is None else (0,) + tuple(p + 1 for p in perm)
    bexpand = None if expand is None else (slice(None),) + expand
    slices: dict = {}

    def view(env):
        arr = _buf(env, name)
        vs = env.vars
        ext = tuple(vs[v].shape[a] for v, a in zip(par, range(len(par))))
        sl = slices.get(ext)
        if sl is None:
            sl = []
            for d, (rest, a, st) in enumerate(dims):
                o = rest.value
                last = o if a is None else o + st * (ext[a] - 1)
                if o < 0 or last >= shape[d]:
                    raise Bail("an element access out of bounds")
                sl.append(o if a is None else slice(o, last + 1, st))
            sl = slices[ext] = (slice(None),) + tuple(sl)
        v = arr[sl]
        if bperm is not None:
            v = v.transpose(bperm)
        return (v if bexpand is None else v[bexpand]), True

    return view


def expr_table(params) -> dict:
    """EXPR_HANDLERS with the batched loads (`params`: the names of the kernel parameters)."""
    return {**EXPR_HANDLERS, Load: lambda e, par, table: _load(e, par, table, params)}


def _store(s: Store, par, table, params):
    buf = s.buffer
    name, aligned, rank = buf.name, buf.name not in params, len(par)
    fv, _ = compile_expr(s.value, par, table)
    wrap = dtypes.to_numpy(buf.dtype).kind in "iu" and not _uses(s.value, par)
    dt = dtypes.to_numpy(buf.dtype)
    form = affine_dims(buf, s.indices, par, table)
    if form is None:
        idx_fns = [compile_expr(i, par, table)[0] for i in s.indices]

        def scatter(env):
            arr = _buf(env, name)
            idx = _gather_indices(env, buf, [f(env) for f in idx_fns], aligned, rank)
            v = _value(fv(env), wrap, dt)
            target = np.broadcast_shapes(*(np.shape(i) for i in idx))
            _fits(v, target)
            arr[idx] = v
            if not aligned:
                env.marks.of(name)[idx] = 1
                env.marks.count += int(np.prod(target))

        return scatter
    view = _affine(buf, form, par, aligned)
    dims, perm, expand = form
    steps = tuple(st or 1 for _, _, st in dims)
    keep = tuple(a is not None for _, a, _ in dims)

    def store(env):
        v = _value(fv(env), wrap, dt)
        if aligned:
            target, uniform = view(env)
            if uniform:
                _fits(v, target.shape)
                target[...] = v
                return
        # a parameter, or blocks at different places: block by block, as the plain run
        arr, n, vs = _buf(env, name), env.n, env.vars
        starts = tuple(_per_block(rest(env), n) for rest, _, _ in dims)
        ext = tuple(1 if a is None else vs[par[a]].shape[a] for _, a, _ in dims)
        if not _in_bounds(arr.shape[aligned:], starts, ext, steps):
            raise Bail("an element store out of bounds")
        batched = np.ndim(v) == rank + 1
        for k in range(n):
            sl = tuple(sl if kp else sl.start for sl, kp in zip(
                _slices(starts, ext, steps, k), keep))
            t = arr[k][sl] if aligned else arr[sl]
            if perm is not None:
                t = t.transpose(perm)
            if expand is not None:
                t = t[expand]
            vk = v[k] if batched else v
            _fits(vk, t.shape)
            t[...] = vk
            if not aligned:
                env.marks.of(name)[sl] = 1
                env.marks.count += t.size

    return store


def _value(v, wrap, dt):
    """A stored value: integers wrap as the element type does (the plain run's scalar rule)."""
    if wrap:
        return np.asarray(v, np.int64).astype(dt)
    return v


def _fits(v, target):
    shape = getattr(v, "shape", ())
    if shape and shape != target and np.broadcast_shapes(target, shape) != tuple(target):
        raise Bail("a value that does not fit the stored elements")


# ----------------------------------------------------------------------- instructions


class _Ctx:
    def __init__(self, kernel: Kernel):
        self.params = frozenset(p.name for p in kernel.params)
        self.table = expr_table(self.params)
        self.par: tuple = ()
        self.core = None
        self.vid_name = kernel.grid_vars[1] if kernel.is_npu else None


def _starts(r, ctx):
    fns = [compile_expr(s, (), ctx.table)[0] for s in r.start]
    if all(isinstance(s, Const) for s in r.start):
        fixed = tuple(int(s.value) for s in r.start)
        return lambda env: fixed
    return lambda env: tuple(_per_block(f(env), env.n) for f in fns)


def _region(r, ctx):
    """region(env) -> [n] + extent: each block's elements of an in-bounds region (a view of
    an on-chip buffer when every block's start is the same)."""
    starts, name, ext = _starts(r, ctx), r.buffer.name, tuple(r.extent)
    aligned, shape = name not in ctx.params, r.buffer.shape
    ones = (1,) * len(ext)

    if aligned and all(isinstance(a, Const) for a in r.start):
        fixed = tuple(int(a.value) for a in r.start)
        sl = (slice(None),) + _slices(fixed, ext, ones)
        inside = _in_bounds(shape, fixed, ext, ones)

        def fixed_region(env):
            if not inside:
                raise Bail("a region out of bounds")
            return _buf(env, name)[sl]

        return fixed_region

    def region(env):
        s = starts(env)
        if not _in_bounds(shape, s, ext, ones):
            raise Bail("a region out of bounds")
        return flat(read_box(_buf(env, name), s, ext, ones, env.n, aligned), env.n, ext)

    return region


def _dest(r, ctx):
    """dest(env) -> a writable [n] + extent view of an on-chip region (else Bail)."""
    region = _region(r, ctx)
    name = r.buffer.name
    if name in ctx.params:
        def not_on_chip(env):
            raise Bail("a tile op writing a parameter")
        return not_on_chip

    def dest(env):
        v = region(env)
        if not np.may_share_memory(v, env.bufs[name]):
            raise Bail("blocks at different places of an on-chip buffer")
        return v

    return dest


def _alloc(s: Alloc, ctx):
    buf = s.buffer
    name, shape, dt, scope = buf.name, buf.shape, dtypes.to_numpy(buf.dtype), buf.scope

    def alloc(env):
        if scope in BLOCK_SCOPES:
            targets = env.block or (env,)
            arr = next((e.bufs[name] for e in targets if name in e.bufs), None)
            if arr is None:
                arr = env.bufs.pool.zeros((env.n,) + shape, dt)
            for e in targets:
                e.bufs.setdefault(name, arr)
        elif env.core is None and env.block:
            for e in env.block:
                if name not in e.bufs:
                    e.bufs.declared[name] = (shape, dt)
        elif name not in env.bufs:
            env.bufs[name] = env.bufs.pool.zeros((env.n,) + shape, dt)

    return alloc


def _copy(s: Copy, ctx):
    src, dst = s.src, s.dst
    s_starts, d_starts = _starts(src, ctx), _starts(dst, ctx)
    s_name, d_name = src.buffer.name, dst.buffer.name
    s_al, d_al = s_name not in ctx.params, d_name not in ctx.params
    s_ext, d_ext = tuple(src.extent), tuple(dst.extent)
    s_shape, d_shape = src.buffer.shape, dst.buffer.shape
    s_dt = dtypes.to_numpy(src.buffer.dtype)
    ones = (1,) * len(s_ext), (1,) * len(d_ext)
    transpose, reshape = s.transpose, s_ext != d_ext
    s_sl, d_sl = _fixed_slices(src, s_al), _fixed_slices(dst, d_al)

    def copy(env):
        n = env.n
        sarr, darr = _buf(env, s_name), _buf(env, d_name)
        if s_sl is not None:
            tile = sarr[s_sl]
        else:
            ss = s_starts(env)
            if _in_bounds(s_shape, ss, s_ext, ones[0]):
                tile = read_box(sarr, ss, s_ext, ones[0], n, s_al)
            else:   # zero-padded, block by block
                tile = np.stack([read_padded(sarr[k] if s_al else sarr, _at(ss, k), s_ext,
                                             s_dt) for k in range(n)])
        if transpose:
            tile = tile.reshape((n,) + _squeezed(s_ext)).swapaxes(1, 2)
        if reshape:
            tile = tile.reshape((n,) + d_ext)
        if d_sl is not None:
            t = darr[d_sl]
            lead = tile.shape[:tile.ndim - len(d_ext)]
            if len(lead) > 1:
                t = t.reshape(lead + d_ext)       # splits the blocks' axis: still a view
            t[...] = tile
            return
        ds = d_starts(env)
        if _in_bounds(d_shape, ds, d_ext, ones[1]):
            write_box(env, d_name, darr, ds, d_ext, ones[1], tile, d_al)
            return
        tile = flat(tile, n, d_ext)
        for k in range(n):
            box = write_clipped(darr[k] if d_al else darr, _at(ds, k), d_ext, tile[k])
            if box is not None and not d_al:
                env.marks.of(d_name)[box] = 1
                env.marks.count += int(np.prod([b.stop - b.start for b in box]))

    return copy


def _fixed_slices(r, aligned):
    """The slices of an on-chip region at constant in-bounds starts (blocks' axis first), or
    None."""
    if not aligned or not all(isinstance(a, Const) for a in r.start):
        return None
    fixed, ones = tuple(int(a.value) for a in r.start), (1,) * len(r.extent)
    if not _in_bounds(r.buffer.shape, fixed, r.extent, ones):
        return None
    return (slice(None),) + _slices(fixed, r.extent, ones)


def _at(starts, k):
    return tuple(s if type(s) is int else int(s[k]) for s in starts)


def _fill(s: Fill, ctx):
    fv, _ = compile_expr(s.value, (), ctx.table)
    r = s.dst
    starts, name, ext = _starts(r, ctx), r.buffer.name, tuple(r.extent)
    aligned, shape, ones = name not in ctx.params, r.buffer.shape, (1,) * len(ext)

    def fill(env):
        v = fv(env)
        if np.ndim(v):
            v = np.reshape(v, (env.n,) + ones)
        st = starts(env)
        if not _in_bounds(shape, st, ext, ones):
            raise Bail("a fill out of bounds")
        write_box(env, name, _buf(env, name), st, ext, ones, v, aligned)

    return fill


def _reduce(s: Reduce, ctx):
    ndim = len(s.src.extent)
    dim = s.dim % ndim + 1
    vs, vd = _region(s.src, ctx), _dest(s.dst, ctx)
    comb = _COMBINE[s.kind]
    absolute, clear, d_ext = s.kind.startswith("abs"), s.clear, tuple(s.dst.extent)

    def reduce(env):
        x = vs(env).astype(F32, copy=False)
        if absolute:
            x = np.abs(x)
        r = comb.reduce(x, axis=dim).reshape((env.n,) + d_ext)
        d = vd(env)
        if not clear:
            r = comb(d.astype(F32), r)
        d[...] = r

    return reduce


def _gemm(s: Gemm, ctx):
    gemm_shape(s)
    va, vb, vc = _region(s.a, ctx), _region(s.b, ctx), _dest(s.c, ctx)
    a2, b2, c2 = (matrix_ext(r, s, "") for r in (s.a, s.b, s.c))
    ta, tb, clear = s.transpose_a, s.transpose_b, s.clear_accum

    def gemm(env):
        n = env.n
        a = va(env).reshape((n,) + a2).astype(F32, copy=False)
        b = vb(env).reshape((n,) + b2).astype(F32, copy=False)
        if ta:
            a = a.swapaxes(1, 2)
        if tb:
            b = b.swapaxes(1, 2)
        cv = vc(env)
        c = cv.reshape((n,) + c2)
        if not np.may_share_memory(c, cv):
            raise Bail("an accumulator that is not a view")
        prod = np.matmul(a, b)
        if clear:
            c[...] = prod
        elif c.dtype == F32:
            np.add(c, prod, out=c)
        else:
            c[...] = c.astype(F32) + prod

    return gemm


def _sort(s: Sort, ctx):
    vname, iname, desc = s.values.buffer.name, s.indices.buffer.name, s.descending

    def sort(env):
        v, ix = _buf(env, vname), _buf(env, iname)
        n = v.shape[-1]
        vv, ii = v.reshape(-1, n), ix.reshape(-1, n)
        for r in range(vv.shape[0]):
            key = vv[r].astype(np.float64)
            order = np.lexsort((ii[r], -key if desc else key))
            vv[r], ii[r] = vv[r][order], ii[r][order]

    return sort


def _nop(s, ctx):
    return None


INSTR = {Alloc: _alloc, Copy: _copy, Fill: _fill, Reduce: _reduce, Gemm: _gemm, Sort: _sort,
         **dict.fromkeys(SYNC_OPS, _nop)}


# ----------------------------------------------------------------------- control flow


def _body(stmts, ctx):
    fns = [f for f in (_stmt(s, ctx) for s in stmts) if f is not None]
    if len(fns) == 1:
        return fns[0]
    fns = tuple(fns)

    def body(env):
        for f in fns:
            f(env)

    return body


def _stmt(s, ctx):
    if isinstance(s, For):
        return _for(s, ctx)
    if isinstance(s, If):
        return _if(s, ctx)
    if isinstance(s, Scope):
        return _scope(s, ctx)
    if isinstance(s, Store):
        return _store(s, ctx.par, ctx.table, ctx.params)
    return INSTR[type(s)](s, ctx)


def _for(s: For, ctx):
    ext_fns = [compile_expr(e, (), ctx.table)[0] for e in s.extents]
    names = s.vars
    if s.kind == "parallel":
        ctx.par = tuple(names)
        try:
            body = _body(s.body, ctx)
        finally:
            ctx.par = ()
        nd, cache = len(names), {}

        def parallel(env):
            exts = tuple(_uniform(f(env)) for f in ext_fns)
            aranges = cache.get(exts)
            if aranges is None:
                aranges = cache[exts] = tuple(np.arange(n, dtype=np.int64).reshape(
                    (1,) * d + (n,) + (1,) * (nd - d - 1)) for d, n in enumerate(exts))
            vs, shape = env.vars, (env.n,) + (1,) * nd
            for name, a in zip(names, aranges):
                vs[name] = a
            for name, ids in env.grid.items():
                vs[name] = ids.reshape(shape)
            if all(exts):
                body(env)
            for name, ids in env.grid.items():
                vs[name] = ids

        return parallel

    outer = ctx.par
    ctx.par = tuple(v for v in outer if v not in names)
    try:
        body = _body(s.body, ctx)
    finally:
        ctx.par = outer

    def serial(env):
        vs = env.vars
        for idx in itertools.product(*(range(_uniform(f(env))) for f in ext_fns)):
            for name, i in zip(names, idx):
                vs[name] = i
            body(env)

    return serial


def _if(s: If, ctx):
    cond, _ = compile_expr(s.cond, ctx.par, ctx.table)
    then_body, else_body = _body(s.then_body, ctx), _body(s.else_body, ctx)
    by_element = _uses(s.cond, ctx.par)

    def if_(env):
        if by_element:
            raise Bail("an if on a Parallel loop variable")
        (then_body if _uniform(cond(env)) else else_body)(env)

    return if_


def _scope(s: Scope, ctx):
    ctx.core = s.core
    try:
        body = _body(s.body, ctx)
    finally:
        ctx.core = None
    vid_name = ctx.vid_name
    if s.core == "C":
        def scope_c(env):
            core = env.block[1]
            core.vars.update(env.vars)
            body(core)
        return scope_c

    def scope_v(env):
        for vid, core in ((0, env.block[2]), (1, env.block[3])):
            core.vars.update(env.vars)
            core.vars[vid_name] = vid
            body(core)

    return scope_v


# ------------------------------------------------------------------------------ driver


class BatchedKernel:
    """A kernel lowered for the batched run (`lower_batched`)."""

    def __init__(self, kernel: Kernel, body, has_scopes: bool):
        self.kernel, self.body, self.has_scopes = kernel, body, has_scopes
        largest = max((int(np.prod(s.buffer.shape)) * dtypes.to_numpy(s.buffer.dtype).itemsize
                       for st in kernel.body for s in walk(st)
                       if isinstance(s, Alloc) and s.buffer.scope != "global"), default=1)
        self.group = max(1, GROUP_BYTES // max(1, largest))
        self.spare: dict = {}
        self.written = frozenset(b.name for s, _ in core_instructions(kernel.body)
                                 for b in writes(s)) & frozenset(p.name for p in kernel.params)

    def run(self, bufs: dict) -> bool:
        """Run every block batched; False when the plain run must run instead (nothing the
        plain run does not overwrite was written)."""
        for name in self.written:
            if any(other is not bufs[name] and np.may_share_memory(bufs[name], other)
                   for other in bufs.values()):
                return False
        kernel, marks = self.kernel, _Marks({k: bufs[k] for k in self.written}, self.spare)
        ids = (np.arange(kernel.grid[0], dtype=np.int64),) if kernel.is_npu else tuple(
            a.reshape(-1) for a in np.indices(kernel.grid, dtype=np.int64))
        total, pool = ids[0].size, _Pool()
        params = {p.name for p in kernel.params}
        try:
            for lo in range(0, total, self.group):
                grid = {name: a[lo:lo + self.group] for name, a in zip(
                    kernel.grid_vars[:1] if kernel.is_npu else kernel.grid_vars, ids)}
                n = next(iter(grid.values())).size
                fixed = {kernel.grid_vars[1]: 0} if kernel.is_npu else {}
                top = self._group(bufs, grid, fixed, n, marks, pool)
                self.body(top)
                pool.release(top.block or (top,), params)
        except Exception:  # noqa: BLE001 - Bail, or a fault the plain run reports at its block
            return False
        return marks.clean()

    def _group(self, bufs, grid, fixed, n, marks, pool) -> BEnv:
        def env(core=None):
            return BEnv({**grid, **fixed}, BBuffers(bufs, n, pool), n, grid, marks, core)
        top = env()
        if self.has_scopes:
            block = (top, env("C"), env("V"), env("V"))
            for e in block:
                e.block = block
        return top


def lower_batched(kernel: Kernel, has_scopes: bool):
    """(BatchedKernel, None) or (None, why the kernel runs block by block)."""
    why = why_not_batched(kernel)
    if why is not None:
        return None, why
    ctx = _Ctx(kernel)
    try:
        body = _body(kernel.body, ctx)
    except Exception as e:  # noqa: BLE001 - a construct the batched form lacks: run plainly
        return None, f"{type(e).__name__}: {e}"
    return BatchedKernel(kernel, body, has_scopes), None
