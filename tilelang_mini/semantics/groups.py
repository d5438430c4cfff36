"""State and accesses of a group of blocks in the batched run (batched.py).

A group of n blocks: every on-chip and workspace buffer has a leading axis of n (block k's copy
at [k]); kernel parameters are the caller's arrays, one for all blocks. A region whose start
differs between blocks is read as one strided view when the blocks' starts form a regular grid
(`offset_grid`: e.g. rows by * 64 + vid * 32 and columns bx * 256 of a 2048-wide tensor give
the offsets of a (4, 8) grid with steps (131072, 256)), else gathered block by block. Writes to
parameters are marked (`Marks`) so that an element written twice sends the run back to the
plain run.
"""
from __future__ import annotations

import numpy as np


class Bail(Exception):
    """The batched run cannot reproduce the plain run from here on."""





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
        shape, dtype, zero = self.declared[name]
        arr = self[name] = self.pool.zeros((self.n,) + shape, dtype, zero)
        return arr


class Pool:
    """Arrays of zeros for the groups of a run: a group's buffers, zeroed again, serve the next
    group and the next run (cheaper than fresh memory, whose pages fault in on first use)."""

    KEEP = 16 << 20         # bytes a kernel keeps between runs (16 of the largest groups' buffers)

    def __init__(self):
        self.free: dict = {}
        self.scratches: dict = {}

    def scratch(self, shape, dtype) -> np.ndarray:
        """An aligned array of any values for an intermediate result (a gemm's product), the
        same one for each use of this shape and dtype."""
        arr = self.scratches.get((shape, dtype))
        if arr is None:
            arr = self.scratches[shape, dtype] = aligned_empty(shape, dtype)
        return arr

    def nbytes(self) -> int:
        return (sum(a.nbytes for stack in self.free.values() for a in stack) +
                sum(a.nbytes for a in self.scratches.values()))

    def zeros(self, shape, dtype, zero=True):
        """An array of zeros (zero=False: of any values, all overwritten before use)."""
        stack = self.free.get((shape, dtype))
        if stack:
            arr = stack.pop()
            if zero:
                arr.fill(0)
            return arr
        arr = aligned_empty(shape, dtype)
        if zero:
            arr.fill(0)
        return arr

    def release(self, envs, params):
        seen = set()
        for e in envs:
            for name, arr in e.bufs.items():
                if name not in params and id(arr) not in seen:
                    seen.add(id(arr))
                    self.free.setdefault((arr.shape, arr.dtype), []).append(arr)


def aligned_empty(shape, dtype, align: int = 64) -> np.ndarray:
    """np.empty(shape, dtype) starting at a multiple of `align` bytes (NumPy's large arrays
    start 16 bytes into a page: BLAS runs a quarter slower on such operands)."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape)) * dtype.itemsize
    raw = np.empty(nbytes + align, np.uint8)
    skip = -raw.ctypes.data % align
    return raw[skip:skip + nbytes].view(dtype).reshape(shape)


class Marks:
    """Which elements of each written parameter the run wrote, and how many writes: a count
    above the number of marked elements means an element was written twice. Parameters
    `private` to each block (batched.block_private) are not marked: only their own block
    touches an element, in its own order."""

    def __init__(self, arrays: dict, spare: dict, private=frozenset()):
        self.shapes = {k: a.shape for k, a in arrays.items()}
        self.spare = spare      # mark arrays of earlier runs, reused (cleared)
        self.marks: dict = {}
        self.count = 0
        self.private = private

    def mark(self, name, index, count: int) -> None:
        """Mark the `count` elements [index] of parameter `name` written."""
        if name not in self.private:
            self.of(name)[index] = 1
            self.count += count

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


def get_buf(env, name, error=None):
    """The array of buffer `name` in `env`; one not yet allocated raises `error` (Bail: the
    batched run gives up and the block runs plain; the plain run passes Fault)."""
    try:
        return env.bufs[name]
    except KeyError:
        raise (error or Bail)(f"buffer {name!r} is used before it is allocated") from None


def uniform(x) -> int:
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


def per_block(x, n):
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


def offset_grid(off: np.ndarray):
    """[(count, step)], outer to inner, with off[k] == off[0] + sum(i * step) over the
    row-major multi-index i of k; None when the offsets are not such a grid."""
    key = (off - off[0]).tobytes()
    hit = _GRIDS.get(key, False)
    if hit is False:
        if len(_GRIDS) > 4096:
            _GRIDS.clear()
        hit = _GRIDS[key] = find_grid(off)
    return hit


def find_grid(off: np.ndarray):
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


def element_offsets(shape, starts):
    """Row-major element offsets of the starts (ints or arrays [n]) in an array of `shape`."""
    off, stride = 0, 1
    for s, size in zip(reversed(starts), reversed(shape)):
        off = off + s * stride
        stride *= size
    return np.asarray(off, np.int64)


def box_view(arr, starts, ext, steps, n):
    """The elements arr[starts[d] + steps[d] * t] (t < ext[d]) of each block as one strided
    view with the blocks' axes first (a grid, `offset_grid`), or None. `arr` is C-contiguous."""
    if not arr.flags.c_contiguous:
        return None
    off = element_offsets(arr.shape, starts)
    if off.shape != (n,):  # (every start the same for the blocks)
        off = np.broadcast_to(off, (n,))
    layout = box_layout(arr, off, ext, steps)
    return None if layout is None else strided(arr, int(off[0]), layout)


def box_layout(arr, off, ext, steps):
    """(shape, strides, whether the blocks' steps are all >= 0) of box_view's view for the
    blocks' element offsets `off` [n] (the view starts at off[0]), or None when they are not a
    grid."""
    grid = offset_grid(off)
    if grid is None:
        return None
    size = arr.itemsize
    inner, stride = [], 1
    for d in reversed(range(arr.ndim)):
        inner.append(stride * steps[d] * size)
        stride *= arr.shape[d]
    return (tuple(c for c, _ in grid) + tuple(ext),
            tuple(s * size for _, s in grid) + tuple(inner[::-1]), all(s >= 0 for _, s in grid))


def strided(arr, first: int, layout):
    """The view of `arr` (C-contiguous) at element `first` with box_layout's layout."""
    shape, strides, forward = layout
    if forward:     # a view of arr's memory, bounds checked by NumPy
        return np.ndarray(shape, arr.dtype, buffer=arr, offset=first * arr.itemsize,
                          strides=strides)
    return np.lib.stride_tricks.as_strided(arr.reshape(-1)[first:], shape, strides)


def in_bounds(shape, starts, ext, steps) -> bool:
    for s, e, st, n in zip(starts, ext, steps, shape):
        lo, hi = (s, s) if type(s) is int else (int(s.min()), int(s.max()))
        if lo < 0 or hi + st * (e - 1) >= n:
            return False
    return True


def slices_of(starts, ext, steps, k=None):
    """The slices of one block's elements (k: its index in the group; None: every start is
    an int)."""
    return tuple(slice_of(s, e, st, k) for s, e, st in zip(starts, ext, steps))


def slice_of(s, e, st, k):
    a = s if type(s) is int else int(s[k])
    return slice(a, a + st * (e - 1) + 1, st)


def read_box(arr, starts, ext, steps, n, aligned):
    """Each block's elements (in bounds) as an array of shape G + ext, G the blocks' axes
    (their product n: (n,), or a grid of strided views). `aligned`: arr has the blocks' axis."""
    ext = tuple(ext)
    if all(type(s) is int for s in starts):
        if aligned:
            return arr[(slice(None),) + slices_of(starts, ext, steps)]
        return np.broadcast_to(arr[slices_of(starts, ext, steps)], (n,) + ext)
    if aligned:
        starts, steps = (np.arange(n),) + tuple(starts), (1,) + tuple(steps)
        v = box_view(arr, starts, (1,) + ext, steps, n)
        if v is not None:
            return v.reshape(v.shape[:-len(ext) - 1] + ext)    # drop the extent-1 axis
        return np.stack([arr[slices_of(starts, (1,) + ext, steps, k)][0] for k in range(n)])
    v = box_view(arr, starts, ext, steps, n)
    if v is not None:
        return v
    return np.stack([arr[slices_of(starts, ext, steps, k)] for k in range(n)])


def flat(v, n, ext):
    """An array of shape G + ext (read_box) as [n] + ext."""
    return v.reshape((n,) + tuple(ext))


def lead_axes(value, ext):
    """The blocks' axes G of a value of shape G + ext (() for a scalar)."""
    nd = np.ndim(value)
    return np.shape(value)[:nd - len(ext)] if nd > len(ext) else ()


def write_box(env, name, arr, starts, ext, steps, value, aligned):
    """Write `value` to each block's elements (in bounds): a scalar, an array of shape
    [n] + (ext or extent-1 axes), or G + ext as read_box gives. A parameter's elements are
    marked (`Marks`)."""
    n, ext = env.n, tuple(ext)
    lead = lead_axes(value, ext)
    if all(type(s) is int for s in starts):
        if aligned:
            t = arr[(slice(None),) + slices_of(starts, ext, steps)]
            if len(lead) > 1:
                t = t.reshape(lead + ext)          # splits the blocks' axis: still a view
            t[...] = value
            return
        if n > 1:
            raise Bail("every block writes the same elements")
    ext1 = ext
    if aligned:       # the blocks' axis of arr is one more dimension, block k at start k
        starts, steps, ext1 = (np.arange(n),) + tuple(starts), (1,) + tuple(steps), (1,) + ext
    marked = not aligned and name not in env.marks.private
    v = box_view(arr, starts, ext1, steps, n)
    if len(lead) > 1 and (v is None or aligned or lead != v.shape[:len(lead)]):
        value, lead = flat(value, n, ext), (n,)
    if v is not None:
        if lead == (n,):
            grid = v.shape[:v.ndim - len(ext1)]
            value = value.reshape(grid + (1,) * (len(ext1) - len(ext)) + value.shape[1:])
        v[...] = value
        if marked:
            box_view(env.marks.of(name), starts, ext, steps, n)[...] = 1
    else:
        value = np.broadcast_to(value, (n,) + ext)
        for k in range(n):
            sl = slices_of(starts, ext1, steps, k)
            arr[sl] = value[k].reshape(ext1)
            if marked:
                env.marks.of(name)[sl] = 1
    if marked:
        env.marks.count += n * int(np.prod(ext))
