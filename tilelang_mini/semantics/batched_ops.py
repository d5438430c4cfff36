"""Expressions and instructions of the batched run (batched.py): the handlers of ops.py and
exprs.py for a group of blocks, each one NumPy operation over the blocks' axis where it can."""
from __future__ import annotations

import numpy as np

from tilelang_mini.ir import dtypes
from tilelang_mini.ir.analysis import BLOCK_SCOPES, GM_SCOPES, SYNC_OPS, is_map, reads, writes
from tilelang_mini.ir.nodes import (
    Alloc, BinOp, Call, Const, Copy, Fill, For, Gemm, If, Kernel, Load, Reduce, Scope,
    Sort, Store, Var, body_fields, walk,
)

from .exprs import (
    EXPR_HANDLERS, F32, _uses, _wrap_f32, affine_dims, compile_expr, kind_of, to_f32, to_int,
)
from .groups import (
    Bail, BEnv, box_layout, element_offsets, flat, get_buf, in_bounds, per_block, read_box,
    slices_of, slice_of, strided, write_box,
)
from .ops import (
    _COMBINE, _squeezed, accumulate, c_order, dual_copy_parts, gemm_shape, matrix_ext,
    read_padded, reduce_axis, sort_rows, unpack_int4, write_clipped,
)


def _load(e: Load, par, table, params):
    buf = e.buffer
    name, kind = buf.name, kind_of(buf.dtype)
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
        arr = get_buf(env, name)
        idx = _gather_indices(env, buf, [f(env) for f in idx_fns], aligned, rank)
        return conv(_gather(arr, idx))

    return load, kind


def _gather(arr, idx):
    """arr[idx] for in-bounds integer indices (`_gather_indices`): one take at the flat
    offsets when there are several (NumPy's indexing by several index arrays is 2-4x slower)."""
    if len(idx) > 1 and arr.flags.c_contiguous:
        return arr.reshape(-1).take(np.ravel_multi_index(idx, arr.shape))
    return arr[idx]


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
        arr = get_buf(env, name)
        vs, n = env.vars, env.n
        starts = tuple(per_block(rest(env), n) for rest, _, _ in dims)
        ext = tuple(1 if a is None else vs[par[a]].shape[a] for _, a, _ in dims)
        if not in_bounds(shape, starts, ext, steps):
            raise Bail("an element access out of bounds")
        if all(type(s) is int for s in starts):
            sl = tuple(slice_of(s, e, st, None) if k else s
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
        arr = get_buf(env, name)
        vs = env.vars
        ext = tuple([vs[v].size for v in par])     # (each variable's lane indices)
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


def store(s: Store, par, table, params):
    buf = s.buffer
    name, aligned, rank = buf.name, buf.name not in params, len(par)
    fv, _ = compile_expr(s.value, par, table)
    wrap = dtypes.to_numpy(buf.dtype).kind in "iu" and not _uses(s.value, par)
    dt = dtypes.store_rounding(buf.dtype) or dtypes.to_numpy(buf.dtype)
    form = affine_dims(buf, s.indices, par, table)
    if form is None:
        idx_fns = [compile_expr(i, par, table)[0] for i in s.indices]

        def scatter(env):
            arr = get_buf(env, name)
            idx = _gather_indices(env, buf, [f(env) for f in idx_fns], aligned, rank)
            v = _value(fv(env), wrap, dt)
            target = np.broadcast_shapes(*(np.shape(i) for i in idx))
            _fits(v, target)
            arr[idx] = v
            if not aligned:
                env.marks.mark(name, idx, int(np.prod(target)))

        return scatter
    view = _affine(buf, form, par, aligned)
    dims, perm, expand = form
    steps = tuple(st or 1 for _, _, st in dims)
    keep = tuple(a is not None for _, a, _ in dims)
    into = _into(s.value, par, table) if aligned and buf.dtype == "float32" else None

    def store(env):
        if into is not None:
            target, uniform = view(env)
            if uniform:
                into(env, target)
                return
        v = _value(fv(env), wrap, dt)
        if aligned:
            target, uniform = view(env)
            if uniform:
                _fits(v, target.shape)
                target[...] = v
                return
        # a parameter, or blocks at different places: block by block, as the plain run
        arr, n, vs = get_buf(env, name), env.n, env.vars
        starts = tuple(per_block(rest(env), n) for rest, _, _ in dims)
        ext = tuple(1 if a is None else vs[par[a]].shape[a] for _, a, _ in dims)
        if not in_bounds(arr.shape[aligned:], starts, ext, steps):
            raise Bail("an element store out of bounds")
        batched = np.ndim(v) == rank + 1
        for k in range(n):
            sl = tuple(sl if kp else sl.start for sl, kp in zip(
                slices_of(starts, ext, steps, k), keep))
            t = arr[k][sl] if aligned else arr[sl]
            if perm is not None:
                t = t.transpose(perm)
            if expand is not None:
                t = t[expand]
            vk = v[k] if batched else v
            _fits(vk, t.shape)
            t[...] = vk
            if not aligned:
                env.marks.mark(name, sl, t.size)

    return store


_UFUNCS = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide}
_CALLS = {"exp": np.exp, "exp2": np.exp2, "log": np.log, "sqrt": np.sqrt,  # unary, float
          "sin": np.sin, "cos": np.cos}
_PICKS = {"max": np.maximum, "min": np.minimum}


def _into(e, par, table):
    """fn(env, out) computing a float arithmetic value (a + - * /, exp, exp2, log, sqrt, a
    float max or min) straight into a float32 `out` (one pass less than computing it and then
    storing it: the same float32 operation; NumPy's ufuncs read overlapping inputs as they
    were), or None."""
    if isinstance(e, Call) and e.fn in _CALLS and len(e.args) == 1:
        fa, ka = compile_expr(e.args[0], par, table)
        fa, call = (fa if ka == "float" else _wrap_f32(fa)), _CALLS[e.fn]
        return lambda env, out: call(fa(env), out=out)
    if isinstance(e, Call) and e.fn in _PICKS and len(e.args) == 2:
        (fa, ka), (fb, kb) = (compile_expr(a, par, table) for a in e.args)
        if "float" not in (ka, kb):
            return None
        fa = fa if ka == "float" else _wrap_f32(fa)
        fb = fb if kb == "float" else _wrap_f32(fb)
        pick = _PICKS[e.fn]
        return lambda env, out: pick(fa(env), fb(env), out=out)
    if not (isinstance(e, BinOp) and e.op in _UFUNCS):
        return None
    fa, ka = compile_expr(e.a, par, table)
    fb, kb = compile_expr(e.b, par, table)
    if "float" not in (ka, kb) and e.op != "/":
        return None
    fa = fa if ka == "float" else _wrap_f32(fa)
    fb = fb if kb == "float" else _wrap_f32(fb)
    ufunc = _UFUNCS[e.op]

    def into(env, out):
        ufunc(fa(env), fb(env), out=out)

    return into


def _value(v, wrap, dt):
    """A stored value: integers wrap as the element type does (the plain run's scalar rule);
    `dt` a rounding function (dtypes.store_rounding) rounds the value by it."""
    if wrap:
        return np.asarray(v, np.int64).astype(dt)
    if callable(dt):
        return dt(v)
    return v


def _fits(v, target):
    shape = getattr(v, "shape", ())
    if shape and shape != target and np.broadcast_shapes(target, shape) != tuple(target):
        raise Bail("a value that does not fit the stored elements")



# ----------------------------------------------------------------------- instructions


class Ctx:
    """What lowering a kernel for the batched run knows: the parameters (one array for all
    blocks), the expression handlers, the enclosing Parallel loop's variables and core."""

    def __init__(self, kernel: Kernel, pairs: bool = False):
        self.params = frozenset(p.name for p in kernel.params)
        self.pairs = pairs      # a vector program run on both cores of each block at once
        self.table = expr_table(self.params)
        self.par: tuple = ()
        self.core = None
        self.vid_name = kernel.grid_vars[1] if kernel.is_npu else None
        self.overwritten = overwritten_first(kernel)
        # the grid variables held as arrays of block ids (none rebound by a loop)
        looped = {v for st in kernel.body for n in walk(st) if isinstance(n, For) for v in n.vars}
        grid = kernel.grid_vars if pairs or not kernel.is_npu else kernel.grid_vars[:1]
        self.grid = frozenset(grid) - looped


def overwritten_first(kernel: Kernel) -> frozenset:
    """Buffers whose first use (in program order) is a copy or fill of the whole buffer that
    runs whenever the block runs (outside any loop or if): their initial zeros are never read."""
    seen, out = set(), set()

    def visit(stmts, cond):
        for s in stmts:
            if isinstance(s, Scope):
                visit(s.body, cond)
            elif isinstance(s, (For, If)) and not is_map(s):
                for f in body_fields(s):
                    visit(getattr(s, f), True)
            elif not isinstance(s, Alloc):
                read = {b.name for b in reads(s)}
                full = None
                if not cond and isinstance(s, (Copy, Fill)) and not getattr(s, "atomic", None):
                    r = s.dst
                    if r.extent == r.buffer.shape and all(
                            isinstance(a, Const) and a.value == 0 for a in r.start):
                        full = r.buffer.name
                for name in read | {b.name for b in writes(s)}:
                    if name not in seen:
                        seen.add(name)
                        if name == full and name not in read:
                            out.add(name)

    visit(kernel.body, False)
    return frozenset(out)


def _starts(r, ctx):
    fns = [compile_expr(s, (), ctx.table)[0] for s in r.start]
    if all(isinstance(s, Const) for s in r.start):
        fixed = tuple(int(s.value) for s in r.start)
        return lambda env: fixed
    return lambda env: tuple(per_block(f(env), env.n) for f in fns)


def _region(r, ctx):
    """region(env) -> [n] + extent: each block's elements of an in-bounds region (a view of
    an on-chip buffer when every block's start is the same)."""
    starts, name, ext = _starts(r, ctx), r.buffer.name, tuple(r.extent)
    aligned, shape = name not in ctx.params, r.buffer.shape
    ones = (1,) * len(ext)

    if aligned and all(isinstance(a, Const) for a in r.start):
        fixed = tuple(int(a.value) for a in r.start)
        sl = (slice(None),) + slices_of(fixed, ext, ones)
        inside = in_bounds(shape, fixed, ext, ones)

        def fixed_region(env):
            if not inside:
                raise Bail("a region out of bounds")
            return get_buf(env, name)[sl]

        return fixed_region

    def region(env):
        s = starts(env)
        if not in_bounds(shape, s, ext, ones):
            raise Bail("a region out of bounds")
        return flat(read_box(get_buf(env, name), s, ext, ones, env.n, aligned), env.n, ext)

    return region


def _grid_region(r, ctx, marks: bool = False):
    """A faster form of reading a parameter's region, or of writing it (with `marks`: the same
    elements of its write marks, `Marks.of`), None when it does not apply: when each
    start is a sum of terms that depend on the grid variables alone and terms free of them
    (rows `cid // 4 * 64 + vid * 32`, columns `k * 64`), the blocks' offsets form the same grid
    all through a group, so `box_layout` and the bounds of the grid terms are found once per
    group; each call adds the other terms as integers and checks the bounds. read(env) -> the
    G + extent view (read_box's), or None: out of bounds, or terms that are not one integer
    (the caller's general path handles both)."""
    name, shape, ext = r.buffer.name, r.buffer.shape, tuple(r.extent)
    if name not in ctx.params:
        return None
    dims = []       # per start: ([(sign, grid term)], [(sign, other term)])
    for a in r.start:
        terms = _summands(a, 1)
        on_grid = [(sg, t) for sg, t in terms if _uses(t, ctx.grid)]
        if any(isinstance(n, Load) or isinstance(n, Var) and n.name not in ctx.grid
               for _, t in on_grid for n in walk(t)):
            return None     # a term mixing the grid with other variables
        dims.append(([(sg, compile_expr(t, (), ctx.table)[0]) for sg, t in on_grid],
                     [(sg, compile_expr(t, (), ctx.table)[0]) for sg, t in terms
                      if not _uses(t, ctx.grid)]))
    if not any(g for g, _ in dims):
        return None
    ones = (1,) * len(ext)
    strides = tuple(int(np.prod(shape[d + 1:])) for d in range(len(shape)))
    varying = [(d, other) for d, (_, other) in enumerate(dims) if other]
    last = [None]       # (the group's grid, first element, bounds of the grid terms, layout)

    def group(env, arr):
        """What holds for the whole group: the grid terms' offsets and layout, the bounds of
        the dimensions without other terms checked (layout None when out of bounds)."""
        starts = [per_block(sum(sg * f(env) for sg, f in g), env.n) for g, _ in dims]
        off = np.broadcast_to(element_offsets(shape, starts), (env.n,))
        layout = box_layout(arr, off, ext, ones)
        bounds = [(int(np.min(a)), int(np.max(a))) for a in starts]
        if any(lo < 0 or hi + e > n for (_, other), (lo, hi), e, n in zip(dims, bounds, ext, shape)
               if not other):
            layout = None
        return env.grid, int(off[0]), bounds, layout

    def read(env):
        arr = env.marks.of(name) if marks else get_buf(env, name)
        hit = last[0]
        if hit is None or hit[0] is not env.grid:
            hit = last[0] = group(env, arr)
        _, first, bounds, layout = hit
        if layout is None or not arr.flags.c_contiguous:
            return None
        for d, other in varying:
            v = 0
            for sg, f in other:
                v += sg * f(env)
            if type(v) is not int:
                v = per_block(v, env.n)
                if type(v) is not int:
                    return None
            lo, hi = bounds[d]
            if lo + v < 0 or hi + v + ext[d] > shape[d]:
                return None
            first += v * strides[d]
        return strided(arr, first, layout)

    return read


def _summands(e, sign):
    """[(sign, term)] with e == sum(sign * term) (e's top-level + and -)."""
    if isinstance(e, BinOp) and e.op in ("+", "-"):
        return _summands(e.a, sign) + _summands(e.b, sign if e.op == "+" else -sign)
    return [(sign, e)]


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
    zero = name not in ctx.overwritten    # else no element is read before it is written
    if ctx.pairs and scope in BLOCK_SCOPES:
        return _no_alloc        # the cube's (batched.vector_pairs: never touched here)

    def alloc(env):
        if scope in BLOCK_SCOPES:
            targets = env.block or (env,)
            arr = next((e.bufs[name] for e in targets if name in e.bufs), None)
            if arr is None:
                arr = env.bufs.pool.zeros((env.n,) + shape, dt, zero)
            for e in targets:
                e.bufs.setdefault(name, arr)
        elif env.core is None and env.block:
            for e in env.block:
                if name not in e.bufs:
                    e.bufs.declared[name] = (shape, dt, zero)
        elif name not in env.bufs:      # made on first use: a core may never touch it
            env.bufs.declared[name] = (shape, dt, zero)

    return alloc


def _no_alloc(env):
    pass


def _copy(s: Copy, ctx):
    if s.src.buffer.scope == "L0C" and s.dst.buffer.scope == "UB":
        return _dual_copy(s, ctx)
    return _plain_copy(s, ctx)


def _dual_copy(s: Copy, ctx):
    """ops._dual_copy for a group: the cube core's L0C tile to both vector cores' UB."""
    split, copies = dual_copy_parts(s)
    d_name, d_shape = s.dst.buffer.name, s.dst.buffer.shape
    d_dt = dtypes.to_numpy(s.dst.buffer.dtype)
    parts = [_plain_copy(c, ctx) for c in copies]

    def copy(env):
        if env.block is None or env.core != "C":
            if split:
                raise Bail("a dual-destination copy off the cube core")
            parts[0](env)
            return
        for v, part in enumerate(parts):
            venv = env.block[2 + v]
            if d_name not in venv.bufs:
                venv.bufs[d_name] = venv.bufs.pool.zeros((env.n,) + d_shape, d_dt)
            part(BEnv(env.vars, venv.bufs, env.n, env.grid, env.marks, "V"))

    return copy


def _plain_copy(s: Copy, ctx):
    src, dst = s.src, s.dst
    s_starts, d_starts = _starts(src, ctx), _starts(dst, ctx)
    s_name, d_name = src.buffer.name, dst.buffer.name
    s_al, d_al = s_name not in ctx.params, d_name not in ctx.params
    s_ext, d_ext = tuple(src.extent), tuple(dst.extent)
    s_shape, d_shape = src.buffer.shape, dst.buffer.shape
    s_dt = dtypes.to_numpy(src.buffer.dtype)
    s_chip, d_chip = src.buffer.scope not in GM_SCOPES, dst.buffer.scope not in GM_SCOPES
    ones = (1,) * len(s_ext), (1,) * len(d_ext)
    transpose, reshape = s.transpose, s_ext != d_ext
    s_sl, d_sl = _fixed_slices(src, s_al), _fixed_slices(dst, d_al)
    s_grid = _grid_region(src, ctx) if s_sl is None else None
    d_grid = _grid_region(dst, ctx) if d_sl is None else None
    d_marks = _grid_region(dst, ctx, marks=True) if d_grid is not None else None
    rnd = dtypes.store_rounding(dst.buffer.dtype)

    def copy(env):
        n = env.n
        sarr, darr = get_buf(env, s_name), get_buf(env, d_name)
        if s_sl is not None:
            tile = sarr[s_sl]
        elif s_grid is not None and (tile := s_grid(env)) is not None:
            pass
        else:
            ss = s_starts(env)
            if in_bounds(s_shape, ss, s_ext, ones[0]):
                tile = read_box(sarr, ss, s_ext, ones[0], n, s_al)
            elif s_chip:
                raise Bail("a copy region out of an on-chip tile")
            else:   # zero-padded, block by block
                tile = np.stack([read_padded(sarr[k] if s_al else sarr, _at(ss, k), s_ext,
                                             s_dt) for k in range(n)])
        if transpose:
            tile = tile.reshape((n,) + _squeezed(s_ext)).swapaxes(1, 2)
        if reshape:
            tile = tile.reshape((n,) + d_ext)
        if rnd is not None:
            tile = rnd(tile)
        if d_sl is not None:
            t = darr[d_sl]
            lead = tile.shape[:tile.ndim - len(d_ext)]
            if len(lead) > 1:
                t = t.reshape(lead + d_ext)       # splits the blocks' axis: still a view
            _assign(t, tile)
            return
        if d_grid is not None and (t := d_grid(env)) is not None:
            if d_name in env.marks.private:     # a block's own elements: nothing to mark
                _assign(t, tile.reshape(t.shape))
                return
            if (m := d_marks(env)) is not None:
                _assign(t, tile.reshape(t.shape))
                m[...] = 1
                env.marks.count += t.size
                return
        ds = d_starts(env)
        if in_bounds(d_shape, ds, d_ext, ones[1]):
            write_box(env, d_name, darr, ds, d_ext, ones[1], tile, d_al)
            return
        if d_chip:
            raise Bail("a copy region out of an on-chip tile")
        tile = flat(tile, n, d_ext)
        for k in range(n):
            box = write_clipped(darr[k] if d_al else darr, _at(ds, k), d_ext, tile[k])
            if box is not None and not d_al:
                env.marks.mark(d_name, box, int(np.prod([b.stop - b.start for b in box])))

    return copy


def _assign(dst, src):
    """dst[...] = src, visiting the elements in the source's memory order (a grid view of a
    parameter: NumPy would follow the destination's order, striding through the source)."""
    if src.shape != dst.shape or src.ndim < 3 or src.flags.c_contiguous:
        dst[...] = src
        return
    perm = sorted(range(src.ndim), key=lambda d: (src.strides[d] != 0, -abs(src.strides[d])))
    dst.transpose(perm)[...] = src.transpose(perm)


def _fixed_slices(r, aligned):
    """The slices of an on-chip region at constant in-bounds starts (blocks' axis first), or
    None."""
    if not aligned or not all(isinstance(a, Const) for a in r.start):
        return None
    fixed, ones = tuple(int(a.value) for a in r.start), (1,) * len(r.extent)
    if not in_bounds(r.buffer.shape, fixed, r.extent, ones):
        return None
    return (slice(None),) + slices_of(fixed, r.extent, ones)


def _at(starts, k):
    return tuple(s if type(s) is int else int(s[k]) for s in starts)


def _fill(s: Fill, ctx):
    fv, _ = compile_expr(s.value, (), ctx.table)
    r = s.dst
    starts, name, ext = _starts(r, ctx), r.buffer.name, tuple(r.extent)
    aligned, shape, ones = name not in ctx.params, r.buffer.shape, (1,) * len(ext)
    rnd = dtypes.store_rounding(r.buffer.dtype) or (lambda v: v)

    def fill(env):
        v = rnd(fv(env))
        if np.ndim(v):
            v = np.reshape(v, (env.n,) + ones)
        st = starts(env)
        if not in_bounds(shape, st, ext, ones):
            raise Bail("a fill out of bounds")
        write_box(env, name, get_buf(env, name), st, ext, ones, v, aligned)

    return fill


def _reduce(s: Reduce, ctx):
    ndim = len(s.src.extent)
    dim = s.dim % ndim + 1
    vs, vd = _region(s.src, ctx), _dest(s.dst, ctx)
    comb = _COMBINE[s.kind]
    absolute, clear, d_ext = s.kind.startswith("abs"), s.clear, tuple(s.dst.extent)
    rnd = dtypes.store_rounding(s.dst.buffer.dtype) or (lambda v: v)

    def reduce(env):
        x = to_f32(vs(env))
        if absolute:
            x = np.abs(x)
        r = reduce_axis(comb, x, dim).reshape((env.n,) + d_ext)
        d = vd(env)
        if not clear:
            r = comb(d.astype(F32), r)
        d[...] = rnd(r)

    return reduce


def _gemm(s: Gemm, ctx):
    gemm_shape(s)
    va, vb, vc = _region(s.a, ctx), _region(s.b, ctx), _dest(s.c, ctx)
    a2, b2, c2 = (matrix_ext(r, s, "") for r in (s.a, s.b, s.c))
    ta, tb, clear = s.transpose_a, s.transpose_b, s.clear_accum
    # packed int4 operands: two values a byte along the last dim
    operand = (lambda v: unpack_int4(v, 2)) if s.a.buffer.dtype == "int4x2" else to_f32

    def gemm(env):
        n = env.n
        a = operand(va(env).reshape((n,) + a2))
        b = operand(vb(env).reshape((n,) + b2))
        if ta:
            a = a.swapaxes(1, 2)
        if tb:
            b = b.swapaxes(1, 2)
        a, b = c_order(a), c_order(b)
        cv = vc(env)
        c = cv.reshape((n,) + c2)
        if not np.may_share_memory(c, cv):
            raise Bail("an accumulator that is not a view")
        shape = a.shape[:-1] + b.shape[-1:]
        if clear and c.dtype == F32 and c.shape == shape and c.flags.c_contiguous and not (
                np.may_share_memory(c, a) or np.may_share_memory(c, b)):
            np.matmul(a, b, out=c)      # the product straight into the accumulator
            return
        accumulate(c, np.matmul(a, b, out=env.bufs.pool.scratch(shape, F32)), clear)

    return gemm


def _sort(s: Sort, ctx):
    vname, iname, desc = s.values.buffer.name, s.indices.buffer.name, s.descending

    def sort(env):
        sort_rows(get_buf(env, vname), get_buf(env, iname), desc)

    return sort


def _nop(s, ctx):
    return None


INSTR = {Alloc: _alloc, Copy: _copy, Fill: _fill, Reduce: _reduce, Gemm: _gemm, Sort: _sort,
         **dict.fromkeys(SYNC_OPS, _nop)}
