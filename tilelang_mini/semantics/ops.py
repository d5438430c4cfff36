"""Single instructions of the NumPy interpreter (expressions: semantics/exprs.py).

`compile_expr(e)` turns an expression into a closure `fn(env) -> value`; `lower_instruction(s)`
turns a leaf statement (tile op, Store, Alloc, sync) into a closure `fn(env) -> None`. Both are
resolved once, by one handler per node type (`EXPR_HANDLERS`, `INSTR_HANDLERS`), so running a
closure never dispatches on node types. `execute(stmt, env)` runs one instruction: the pipe-level
simulator feeds instructions through it one at a time; control flow lives in interpreter.py.

Values: integers are Python ints (scalars) or int64 arrays (inside Parallel loops), floats are
np.float32 scalars or float32 arrays, booleans are bools / bool arrays.
"""
from __future__ import annotations

import numpy as np

from tilelang_mini.errors import CompileError
from tilelang_mini.ir import dtypes
from tilelang_mini.ir.analysis import BLOCK_SCOPES, GM_SCOPES, SYNC_OPS
from tilelang_mini.ir.nodes import (
    Alloc, BinOp, Const, Copy, Fill, Gemm, Reduce, Region, Sort, Store, Var,
)
from .exprs import (  # noqa: F401 - Env, Fault, as_index, eval_expr, located: the package's names
    Env, Fault, affine_view, as_index, check_indices, compile_expr, eval_expr, kind_of, located,
    to_f32, to_f32_fn,
)
from .groups import get_buf

F32 = np.float32
# Scopes with one instance per block (BLOCK_SCOPES): GM, and the AIC's buffers (which the AIVs can
# write on chips with a UB -> L1 path). UB and scalars are per core.



# ----------------------------------------------------------------------------------- regions


def _squeezed(ext) -> tuple:
    return tuple(n for n in ext if n != 1)


def check_reshape(src_ext, dst_ext, stmt, what: str) -> None:
    n_src = int(np.prod(src_ext)) if src_ext else 1
    n_dst = int(np.prod(dst_ext)) if dst_ext else 1
    if n_src != n_dst or _squeezed(src_ext) != _squeezed(dst_ext):
        raise CompileError(f"{what}: shapes {list(src_ext)} and {list(dst_ext)} do not match "
                           f"(they must be equal after dropping extent-1 dimensions)", stmt.loc)


def compile_starts(r: Region):
    """Closure returning the region's start as a tuple of ints."""
    if len(r.start) != len(r.buffer.shape) or len(r.extent) != len(r.buffer.shape):
        raise CompileError(f"region of {r.buffer.name} has {len(r.start)} starts and "
                           f"{len(r.extent)} extents for a {len(r.buffer.shape)}-d buffer")
    if all(isinstance(s, Const) for s in r.start):
        fixed = tuple(int(s.value) for s in r.start)
        return lambda env: fixed
    fns = [compile_expr(s)[0] for s in r.start]
    what = f"a start of the region of {r.buffer.name}"

    def starts(env):
        out = []
        for f in fns:
            a = f(env)
            out.append(a if type(a) is int else as_index(a, what))
        return tuple(out)

    return affine_starts(r.start, starts)


def int_affine(e):
    """`(c, {variable: k})` with e == c + sum(k * variable), for an integer expression of
    constants, variables, `+`, `-`, `*` by a constant and `// 1` or `% 1` (lowering's
    `cid // 1 * 64`; `% 1` keeps its variable with step 0, so that its value is still read);
    None for any other expression."""
    if isinstance(e, Const):
        return (e.value, {}) if type(e.value) is int and kind_of(e.dtype) == "int" else None
    if isinstance(e, Var):
        return (0, {e.name: 1}) if kind_of(e.dtype) == "int" else None
    if not isinstance(e, BinOp) or e.op not in ("+", "-", "*", "//", "%"):
        return None
    a, b = int_affine(e.a), int_affine(e.b)
    if a is None or b is None:
        return None
    if e.op in ("+", "-"):
        sign = 1 if e.op == "+" else -1
        steps = dict(a[1])
        for v, k in b[1].items():
            steps[v] = steps.get(v, 0) + sign * k
        return a[0] + sign * b[0], steps
    if e.op == "*":
        if a[1] and b[1]:
            return None
        (c, k), (x, steps) = (a, b) if not a[1] else (b, a)
        return c * x, {v: c * s for v, s in steps.items()}
    if b[1] or b[0] != 1:  # x // 1 == x, x % 1 == 0 (integers)
        return None
    return (a[0], a[1]) if e.op == "//" else (0, dict.fromkeys(a[1], 0))


def affine_starts(exprs, general):
    """The closure `general(env) -> starts` of integer index expressions `exprs` made fast where
    every one is affine in the variables (`int_affine`): each start is its constant plus its
    steps times the variables' values, a tuple of ints. Whatever else a variable holds (an
    index array, a NumPy integer, nothing) goes to `general`, which gives its value or its
    fault."""
    forms = [int_affine(e) for e in exprs]
    if any(f is None for f in forms):
        return general
    forms = tuple((c, tuple(steps.items())) for c, steps in forms)

    def starts(env):
        vs = env.vars
        out = []
        for c, steps in forms:
            for v, k in steps:
                x = vs.get(v)
                if type(x) is not int:
                    return general(env)
                c += k * x
            out.append(c)
        return tuple(out)

    return starts


def _buffer(env, name):
    return get_buf(env, name, Fault)


def compile_region(r: Region):
    """Closure returning (starts, slices, inside) of a region: its start, the slices of its
    elements and whether they lie inside the buffer (computed once when the start is constant)."""
    starts = compile_starts(r)
    ext, shape = r.extent, r.buffer.shape

    def region(env):
        s = starts(env)
        inside = True
        sl = []
        for a, e, n in zip(s, ext, shape):
            if a < 0 or a + e > n:
                inside = False
            sl.append(slice(a, a + e))
        return s, tuple(sl), inside

    if all(isinstance(a, Const) for a in r.start):
        fixed = region(None)
        return lambda env: fixed
    return region


def region_view(r: Region):
    """Closure returning a writable view of an in-bounds region (tile ops other than copy)."""
    region = compile_region(r)
    ext, shape, name = r.extent, r.buffer.shape, r.buffer.name

    def view(env):
        s, sl, inside = region(env)
        if not inside:
            raise region_fault(s, ext, shape, name)
        return _buffer(env, name)[sl]

    if all(isinstance(a, Const) for a in r.start):
        s, sl, inside = region(None)
        if inside:  # (a constant region inside its buffer: the slice alone)
            if not any(s) and tuple(ext) == tuple(shape):
                sl = ...  # (the whole buffer)

            def fixed(env):
                try:
                    return env.bufs[name][sl]
                except KeyError:
                    return _buffer(env, name)[sl]  # (raises the Fault)
            return fixed
    return view


def region_fault(start, ext, shape, name) -> Fault:
    """The fault of a region at `start` not inside buffer `name` (a tile op's region, or a
    copy's region of an on-chip tile: only GM tensors clip)."""
    for d, (a, e, n) in enumerate(zip(start, ext, shape)):
        if a < 0 or a + e > n:
            return Fault(f"region [{a}, {a + e}) out of bounds for dimension {d} of "
                         f"{name}{list(shape)}")
    return Fault(f"region out of bounds of {name}{list(shape)}")


# ------------------------------------------------------------------------------ instructions


def _alloc(s: Alloc, par=()):
    buf = s.buffer
    name, shape, dt, scope = buf.name, buf.shape, dtypes.to_numpy(buf.dtype), buf.scope

    def alloc(env):
        # First execution in a block allocates zeros; later executions keep the buffer.
        if scope in BLOCK_SCOPES:
            targets = env.block or (env,)
            arr = next((e.bufs[name] for e in targets if name in e.bufs), None)
            if arr is None:
                arr = np.zeros(shape, dt)
            for e in targets:
                e.bufs.setdefault(name, arr)
        elif env.core is None and env.block:
            for e in env.block:  # block-level on-chip buffer: one copy per core, on first use
                if name not in e.bufs:
                    e.bufs.declare(name, shape, dt)
        elif name not in env.bufs:
            env.bufs[name] = np.zeros(shape, dt)

    return alloc


def _copy(s: Copy, par=()):
    if s.src.buffer.scope == "L0C" and s.dst.buffer.scope == "UB":
        return _dual_copy(s)
    return _plain_copy(s)


def dual_copy_parts(s: Copy) -> tuple[bool, list]:
    """(split, [copy to vector core 0, copy to vector core 1]) of an L0C -> UB copy: with a UB
    tile of half the source rows (split) each core gets its half, else each gets all of it."""
    half = s.dst.extent[0]
    split = s.src.extent[0] == 2 * half
    copies = []
    for v in range(2):
        src = s.src
        if split:
            start0 = src.start[0] if v == 0 else BinOp("+", src.start[0], Const(half))
            src = Region(src.buffer, (start0,) + src.start[1:], (half,) + src.extent[1:])
        copies.append(Copy(src, s.dst, s.loc))
    return split, copies


def _dual_copy(s: Copy):
    """FixPipe L0C -> UB delivers to both vector cores of the block: each gets its half of the
    rows when the UB tile has half the rows of the source (dual destination), else all of it."""
    split, copies = dual_copy_parts(s)
    d_name, d_shape = s.dst.buffer.name, s.dst.buffer.shape
    d_dt = dtypes.to_numpy(s.dst.buffer.dtype)
    parts = [_plain_copy(c) for c in copies]
    whole = parts[0] if not split else None

    def copy(env):
        if env.block is None or env.core != "C":
            if whole is None:
                raise Fault("a dual-destination copy runs on the cube core of an NPU block")
            whole(env)
            return
        for v, part in enumerate(parts):
            venv = env.block[2 + v]
            if d_name not in venv.bufs:  # the AIV has not reached its Alloc yet
                venv.bufs[d_name] = np.zeros(d_shape, d_dt)
            part(Env(env.vars, venv.bufs, "V", env.block))

    return copy


def _plain_copy(s: Copy):
    src, dst = s.src, s.dst
    if not s.transpose:
        check_reshape(src.extent, dst.extent, s, "copy")
    s_region, d_region = compile_region(src), compile_region(dst)
    s_ext, d_ext = src.extent, dst.extent
    s_name, d_name = src.buffer.name, dst.buffer.name
    s_dt = dtypes.to_numpy(src.buffer.dtype)
    s_chip, d_chip = src.buffer.scope not in GM_SCOPES, dst.buffer.scope not in GM_SCOPES
    transpose = s.transpose
    reshape = s_ext != d_ext
    if transpose:
        _check_transpose(src.extent, dst.extent, s)

    def copy(env):
        ss, s_sl, s_inside = s_region(env)
        ds, d_sl, d_inside = d_region(env)
        if not s_inside and s_chip:
            raise region_fault(ss, s_ext, src.buffer.shape, s_name)
        if not d_inside and d_chip:
            raise region_fault(ds, d_ext, dst.buffer.shape, d_name)
        bufs = env.bufs
        try:
            sarr, darr = bufs[s_name], bufs[d_name]
        except KeyError:
            sarr, darr = _buffer(env, s_name), _buffer(env, d_name)  # (raises the Fault)
        tile = sarr[s_sl] if s_inside else read_padded(sarr, ss, s_ext, s_dt)
        if transpose:
            tile = tile.reshape(_squeezed(s_ext)).T
        if reshape:
            tile = tile.reshape(d_ext)
        if d_inside:
            darr[d_sl] = tile if combine is None else combine(darr[d_sl], tile)
        else:
            write_clipped(darr, ds, d_ext, tile, combine)

    combine = _combiner(s.atomic, dst.buffer.dtype) if s.atomic else None
    rnd = dtypes.store_rounding(dst.buffer.dtype)
    if rnd is not None:   # the stored values rounded by our rule (atomic: after combining)
        combine = _rounded(combine, rnd)
    if combine is None and not transpose and not reshape:
        return _fixed_copy(src, dst, copy)
    return copy


def _fixed_copy(src: Region, dst: Region, general):
    """A plain copy between two constant regions inside their buffers (an L1 -> L0 load):
    `dst[sl] = src[sl]`, its slices found once; `general` (the same copy) otherwise, and for
    a buffer not allocated yet (its fault)."""
    if not all(isinstance(a, Const) for r in (src, dst) for a in r.start):
        return general
    (_, s_sl, s_in), (_, d_sl, d_in) = compile_region(src)(None), compile_region(dst)(None)
    if not (s_in and d_in):
        return general
    s_name, d_name = src.buffer.name, dst.buffer.name

    def copy(env):
        bufs = env.bufs
        if s_name in bufs and d_name in bufs:
            bufs[d_name][d_sl] = bufs[s_name][s_sl]
        else:
            general(env)

    return copy


def _rounded(combine, rnd):
    """combine(old, tile) followed by the destination's rounding (just the rounding for a
    plain copy)."""
    if combine is None:
        return lambda old, tile: rnd(tile)
    return lambda old, tile: rnd(combine(old, tile))


def read_padded(arr, start, ext, dtype) -> np.ndarray:
    """The region of `arr` at `start` with extent `ext`, its out-of-bounds part zeros."""
    tile = np.zeros(ext, dtype)
    shape = arr.shape
    lo = [min(max(a, 0), n) for a, n in zip(start, shape)]
    hi = [max(min(a + e, n), 0) for a, e, n in zip(start, ext, shape)]
    if all(h > l for l, h in zip(lo, hi)):
        tile[tuple(slice(l - a, h - a) for l, h, a in zip(lo, hi, start))] = \
            arr[tuple(slice(l, h) for l, h in zip(lo, hi))]
    return tile


def write_clipped(arr, start, ext, tile, combine=None):
    """Write the in-bounds part of `tile` to the region of `arr` at `start` (cast by
    assignment; `combine(old, new)` for atomic copies); the box written, or None."""
    shape = arr.shape
    lo = [min(max(a, 0), n) for a, n in zip(start, shape)]
    hi = [max(min(a + e, n), 0) for a, e, n in zip(start, ext, shape)]
    if not all(h > l for l, h in zip(lo, hi)):
        return None
    box = tuple(slice(l, h) for l, h in zip(lo, hi))
    tile = tile[tuple(slice(l - a, h - a) for l, h, a in zip(lo, hi, start))]
    arr[box] = tile if combine is None else combine(arr[box], tile)
    return box


def _check_transpose(src_ext, dst_ext, stmt) -> None:
    sq, dq = _squeezed(src_ext), _squeezed(dst_ext)
    if len(sq) != 2 or dq != sq[::-1]:
        raise CompileError(f"a transposing copy takes a 2-D tile and gives its transpose; got "
                           f"source {list(src_ext)}, destination {list(dst_ext)}", stmt.loc)


def _combiner(kind: str, dtype: str):
    """old, tile -> the combined values of an atomic copy, before the store's cast: float32
    arithmetic for float destinations (int64 for integers), as the Ascend atomic unit (a relu
    copy: max(tile, 0))."""
    wide = np.int64 if dtypes.is_int(dtype) else F32
    if kind == "relu":  # the FixPipe's relu mode: max(src, 0), the old value unread
        return lambda old, tile: np.maximum(np.asarray(tile).astype(wide), 0)
    op = {"add": np.add, "max": np.maximum, "min": np.minimum}[kind]

    def combine(old, tile):
        return op(old.astype(wide), np.asarray(tile).astype(wide))

    return combine


def matrix_ext(r: Region, stmt, what: str) -> tuple[int, int]:
    """The (rows, cols) of gemm operand `r`, leading extent-1 dims dropped."""
    ext = list(r.extent)
    while len(ext) > 2 and ext[0] == 1:
        ext.pop(0)
    if len(ext) != 2:
        raise CompileError(f"gemm operand {what} ({r.buffer.name}) must be a 2-d tile "
                           f"(leading extent-1 dims allowed), got extent {list(r.extent)}",
                           stmt.loc)
    return ext[0], ext[1]


def gemm_shape(s: Gemm) -> tuple[int, int, int]:
    """(M, N, K) of `s` after its transposes; a CompileError where A, B and C disagree."""
    am, ak = matrix_ext(s.a, s, "A")
    bk, bn = matrix_ext(s.b, s, "B")
    cm, cn = matrix_ext(s.c, s, "C")
    if s.transpose_a:
        am, ak = ak, am
    if s.transpose_b:
        bk, bn = bn, bk
    if ak != bk or (am, bn) != (cm, cn):
        raise CompileError(f"gemm shapes do not agree: A is ({am}, {ak}), B is ({bk}, {bn}), "
                           f"C is ({cm}, {cn})", s.loc)
    return cm, cn, ak * dtypes.PACKED_K.get(s.a.buffer.dtype, 1)


def unpack_fp4(x: np.ndarray, axis: int) -> np.ndarray:
    """float32 values of packed e2m1 codes (two per byte, the even index in the low nibble),
    unpacked along `axis` (twice as long)."""
    x = np.moveaxis(np.asarray(x).astype(np.uint8), axis, -1)
    codes = np.stack([x & 15, x >> 4], axis=-1).reshape(x.shape[:-1] + (2 * x.shape[-1],))
    vals = codes.view(dtypes.to_numpy("float4_e2m1fn")).astype(F32)
    return np.moveaxis(vals, -1, axis)


def unpack_int4(x: np.ndarray, axis: int) -> np.ndarray:
    """float32 values of packed int4 pairs (int4x2 bytes, the even index in the low nibble),
    unpacked along `axis` (twice as long)."""
    x = np.moveaxis(np.asarray(x).astype(np.uint8), axis, -1)
    nib = np.stack([x & 15, x >> 4], axis=-1).reshape(x.shape[:-1] + (2 * x.shape[-1],))
    vals = nib.astype(np.int8) - ((nib & 8).astype(np.int8) << 1)
    return np.moveaxis(vals.astype(F32), -1, axis)


SCALE_DTYPES = ("uint16", "float8_e8m0fnu")  # packed UE8M0 pairs (MN-major) or one UE8M0 each


def scale_groups(s: Gemm) -> int:
    """The K groups of a block-scaled gemm, its scale tiles' shapes checked: float8_e8m0fnu
    [MN, >= groups] or uint16 [>= ceil(groups / 2), MN] (UE8M0 pairs, MN-major)."""
    m, n, k = gemm_shape(s)
    if s.scale_gran <= 0 or s.scale_a is None or s.scale_b is None:
        raise CompileError("a block-scaled gemm needs scale_A, scale_B and scale_gran > 0", s.loc)
    groups = -(-k // s.scale_gran)
    for r, mn, what in ((s.scale_a, m, "scale_A"), (s.scale_b, n, "scale_B")):
        dt = r.buffer.dtype
        rows, cols = matrix_ext(r, s, what)
        if dt not in SCALE_DTYPES:
            raise CompileError(f"gemm {what} ({r.buffer.name}) is {dt}; block scales are uint16 "
                               f"(UE8M0 pairs) or float8_e8m0fnu", s.loc)
        want = (mn, groups) if dt == "float8_e8m0fnu" else (-(-groups // 2), mn)
        if rows < want[0] or cols < want[1] or (dt == "uint16" and cols != mn) or (
                dt != "uint16" and rows != mn):
            form = ("[MN, groups] float8_e8m0fnu" if dt != "uint16"
                    else "[ceil(groups / 2), MN] uint16 pairs, MN-major")
            raise CompileError(f"gemm {what} ({r.buffer.name}) has extent ({rows}, {cols}); "
                               f"{k} K values in groups of {s.scale_gran} need {want} ({form})",
                               s.loc)
    return groups


def scale_matrix(tile: np.ndarray, dtype: str, mn: int, groups: int) -> np.ndarray:
    """float32 [mn, groups] scales of a scale tile (see scale_groups): 2^(e - 127) of each UE8M0
    byte e (255 is NaN)."""
    if dtype == "uint16":
        t = tile.astype(np.uint16)[:-(-groups // 2), :mn]
        e = np.stack([t & 0xFF, t >> 8], axis=1).reshape(-1, mn)[:groups].T.astype(np.uint8)
    else:
        e = tile[:mn, :groups].view(np.uint8)
    return np.ascontiguousarray(e).view(dtypes.to_numpy("float8_e8m0fnu")).astype(F32)


def _gemm(s: Gemm, par=()):
    gemm_shape(s)
    a2, b2, c2 = (matrix_ext(r, s, "") for r in (s.a, s.b, s.c))
    va, vb, vc = (matrix_view(r, ext) for r, ext in ((s.a, a2), (s.b, b2), (s.c, c2)))
    fa, fb = (to_f32_fn(r.buffer.dtype, ext[0] * ext[1], _whole(r))
              for r, ext in ((s.a, a2), (s.b, b2)))
    ta, tb, clear = s.transpose_a, s.transpose_b, s.clear_accum
    scaled = s.scale_gran > 0
    packed = s.a.buffer.dtype in dtypes.PACKED_K
    int4 = s.a.buffer.dtype == "int4x2"
    if scaled:
        groups, gran = scale_groups(s), s.scale_gran
        m, n, k = gemm_shape(s)
        vsa, vsb = region_view(s.scale_a), region_view(s.scale_b)
        sa2, sb2 = matrix_ext(s.scale_a, s, ""), matrix_ext(s.scale_b, s, "")
        da, db = s.scale_a.buffer.dtype, s.scale_b.buffer.dtype

    def gemm(env):
        if int4:  # two int4 values a byte along the last dim (K: A [M, K], B [N, K])
            a = unpack_int4(va(env), 1)
            b = unpack_int4(vb(env), 1)
        elif packed:  # FP4 codes, K packed two per byte: A's K is its columns (rows transposed)
            a = unpack_fp4(va(env), 0 if ta else 1)
            b = unpack_fp4(vb(env), 1 if tb else 0)
        else:
            a = fa(va(env))
            b = fb(vb(env))
        if ta:
            a = a.T
        if tb:
            b = b.T
        a, b = c_order(a), c_order(b)
        if scaled:  # each K group times its scales (powers of two: exact in float32)
            sa = scale_matrix(vsa(env).reshape(sa2), da, m, groups)
            sb = scale_matrix(vsb(env).reshape(sb2), db, n, groups)
            a = a * np.repeat(sa, gran, axis=1)[:, :k]
            b = b * np.repeat(sb, gran, axis=1)[:, :k].T
        acc(vc(env), np.matmul(a, b))

    acc = ((lambda c, prod: np.add(c, prod, out=c)) if s.c.buffer.dtype == "float32" and not clear
           else (lambda c, prod: accumulate(c, prod, clear)))  # (accumulate's choice, made once)
    return gemm


def c_order(x: np.ndarray) -> np.ndarray:
    """x as a C-contiguous matmul operand (a copy when it is not): with a transposed tile view
    NumPy 2.4's threaded OpenBLAS took 10-25 ms for a 128x64 @ 64x128 float32 product on a
    loaded machine, with C-contiguous copies 0.02-0.07 ms (the same values)."""
    return x if x.flags.c_contiguous else np.ascontiguousarray(x)


def _whole(r: Region) -> bool:
    """Is region `r` a whole on-chip buffer (allocated here: its view is C-contiguous)?"""
    return (r.buffer.scope not in GM_SCOPES and tuple(r.extent) == tuple(r.buffer.shape)
            and all(isinstance(a, Const) and a.value == 0 for a in r.start))


def matrix_view(r: Region, ext: tuple):
    """`region_view` of gemm operand `r` as a (rows, cols) matrix (still a view): `ext`, its
    `matrix_ext`."""
    view = region_view(r)
    if tuple(r.extent) == tuple(ext):
        return view
    return lambda env: view(env).reshape(ext)


def accumulate(c: np.ndarray, prod: np.ndarray, clear: bool) -> None:
    """A gemm's accumulator update in place: c = prod (clear) or c += prod, in float32."""
    if c.dtype == dtypes.E8M0:
        c[...] = dtypes.to_e8m0(prod if clear else c.astype(F32) + prod)
    elif clear:
        c[...] = prod
    elif c.dtype == F32:
        np.add(c, prod, out=c)
    else:
        c[...] = c.astype(F32) + prod


def _fill(s: Fill, par=()):
    view = region_view(s.dst)
    fv, _ = compile_expr(s.value)
    rnd = dtypes.store_rounding(s.dst.buffer.dtype) or (lambda v: v)

    def fill(env):
        view(env)[...] = rnd(fv(env))

    return fill


_COMBINE = {"sum": np.add, "abssum": np.add, "max": np.maximum, "absmax": np.maximum,
            "min": np.minimum}


def reduce_axis(comb, x: np.ndarray, axis: int) -> np.ndarray:
    """comb.reduce(x, axis) (the plain and the batched run's). A max or min along the short
    last axis of many rows (>= 128 rows of <= 64) runs as a contiguous copy with that axis
    first, reduced one element-wise operation per step: NumPy's reduction along a contiguous
    axis pays per row (32 floats: 2.5x slower), and a max or min is exact in any order (a
    sum keeps NumPy's own order, so its rounding stays the same)."""
    n = x.shape[axis] if x.ndim > 1 else 0
    if comb is not np.add and axis == x.ndim - 1 and 0 < n <= 64 and x.size >= 128 * n:
        return comb.reduce(np.ascontiguousarray(x.transpose(axis, *range(axis))), axis=0)
    return comb.reduce(x, axis=axis)


def _reduce(s: Reduce, par=()):
    if s.kind not in _COMBINE:
        raise CompileError(f"unknown reduction {s.kind!r}", s.loc)
    ndim = len(s.src.extent)
    if not -ndim <= s.dim < ndim:
        raise CompileError(f"reduce dim {s.dim} out of range for a {ndim}-d source", s.loc)
    dim = s.dim % ndim
    out_ext = s.src.extent[:dim] + s.src.extent[dim + 1:]
    check_reshape(out_ext, s.dst.extent, s, f"reduce_{s.kind} result")
    vs, vd = region_view(s.src), region_view(s.dst)
    comb = _COMBINE[s.kind]   # comb.reduce(x, axis) is np.sum / np.max / np.min
    absolute, clear, d_ext = s.kind.startswith("abs"), s.clear, s.dst.extent
    rnd = dtypes.store_rounding(s.dst.buffer.dtype) or (lambda v: v)

    def reduce(env):
        x = to_f32(vs(env))
        if absolute:
            x = np.abs(x)
        r = reduce_axis(comb, x, dim).reshape(d_ext)
        d = vd(env)
        if not clear:
            r = comb(d.astype(F32), r)
        d[...] = rnd(r)

    return reduce


def _sort(s: Sort, par=()):
    """Each row of the values tile sorted (largest first when descending; ties by the smaller
    index), its indices tile permuted alike."""
    vname, iname = s.values.buffer.name, s.indices.buffer.name
    desc = s.descending

    def sort(env):
        sort_rows(_buffer(env, vname), _buffer(env, iname), desc)

    return sort


def sort_rows(v: np.ndarray, ix: np.ndarray, desc: bool) -> None:
    """Sort each last-axis row of `v` in place (ties by the smaller index), `ix` permuted alike."""
    n = v.shape[-1]
    vv, ii = v.reshape(-1, n), ix.reshape(-1, n)
    for r in range(vv.shape[0]):
        key = vv[r].astype(np.float64)
        order = np.lexsort((ii[r], -key if desc else key))
        vv[r], ii[r] = vv[r][order], ii[r][order]


def _store(s: Store, par=()):
    buf = s.buffer
    name = buf.name
    idx_fns = [compile_expr(i, par)[0] for i in s.indices]
    fv, _ = compile_expr(s.value, par)
    view = affine_view(buf, s.indices, par)   # the elements as a strided view, when affine
    rnd = dtypes.store_rounding(buf.dtype)

    def store(env):
        if view is not None:
            arr, idx = view(env), ...
            target = arr.shape
        else:
            arr = _buffer(env, name)
            idx = check_indices(tuple(f(env) for f in idx_fns), buf)
            target = None
        v = fv(env)
        if isinstance(v, np.ndarray) and v.ndim and v.shape != target:
            if target is None:
                target = np.broadcast_shapes(*(np.shape(i) for i in idx)) if idx else ()
            try:
                if np.broadcast_shapes(target, v.shape) != target:
                    raise ValueError
            except ValueError:
                raise Fault(f"value of shape {v.shape} does not fit the indexed elements of "
                            f"{name} (shape {target}); a Parallel loop variable that is not "
                            f"used in the indices would make this a reduction") from None
        if arr.dtype.kind in "iu" and not isinstance(v, np.ndarray):
            v = np.asarray(v, np.int64).astype(arr.dtype)  # wrap, as the element type does
        elif rnd is not None:
            v = rnd(v)
        arr[idx] = v

    return store


def _nop(s, par=()):
    return lambda env: None


INSTR_HANDLERS = {
    Alloc: _alloc, Copy: _copy, Gemm: _gemm, Fill: _fill, Reduce: _reduce, Sort: _sort,
    Store: _store,
    **dict.fromkeys(SYNC_OPS, _nop),
}


def lower_instruction(stmt, par: tuple = ()):
    """The located closure `fn(env)` executing one leaf statement (`par`: the variables of the
    enclosing Parallel loop, in axis order)."""
    try:
        handler = INSTR_HANDLERS[type(stmt)]
    except KeyError:
        raise TypeError(f"{type(stmt).__name__} is not a single instruction") from None
    try:
        fn = handler(stmt, par)
    except CompileError as e:
        if e.loc.line or not stmt.loc.line:
            raise
        raise CompileError(e.message, stmt.loc) from None
    return located(fn, stmt)


_CACHE: dict[int, tuple] = {}


def instruction(stmt):
    """The closure `fn(env)` that executes one instruction (made once per statement object)."""
    hit = _CACHE.get(id(stmt))
    if hit is None or hit[0] is not stmt:
        hit = (stmt, lower_instruction(stmt))
        _CACHE[id(stmt)] = hit
    return hit[1]


def execute(stmt, env: Env) -> None:
    """Execute one instruction in `env` (closures are cached per statement object)."""
    instruction(stmt)(env)
