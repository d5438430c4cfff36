"""tilelang-ascend's sorting and gathering `T.tile` operations (a KernelBuilder part), spelled
with the IR's row sort (`Sort`) and elementwise maps.

tilelang-ascend keeps sorted data as interleaved (value, index) pairs in one float tile:
`[v0, i0, v1, i1, ...]`, largest value first, the index stored as a number in the float slot.

    T.tile.sort(dst, src, n)        vals[0, j] = src[j] if j < n else -inf;  idx[0, j] = j
    T.tile.topk(dst, src, k, n)     sort(vals, idx, descending)
                                    dst[2t] = vals[0, t];  dst[2t + 1] = idx[0, t]   (t < k)
    T.tile.merge_sort(dst, s0, s1, ...)   the pairs of every source in one row, sorted; the
                                    index slot travels with its value (read back through the
                                    sorted positions: dst[2t + 1] = slots[0, pos[0, t]])
    T.tile.gather_mask(dst, src, "P1010")   dst[t] = src[2t + 1] (fixed patterns P0101, P1010,
                                    P0001, P0010, P0100, P1000, P1111)
    T.tile.gather(dst, src, offsets, base)  dst[t] = src[(offsets[t] + base) / itemsize]
                                    (offsets in bytes, as the vector unit's gather takes them)

The sort's hidden row tiles are UB allocations of the kernel (shared by the sorts of one shape).
"""
from __future__ import annotations

import ast

from ..ir import dtypes
from ..ir.nodes import Alloc, Buffer, Cast, Const, For, Load, PipeBarrier, Region, Sort, Store, Var
from .exprs import as_expr, binop, const, is_ir

SORT_OPS = ("sort", "topk", "merge_sort", "gather_mask", "gather")
# GatherMask's fixed patterns: (group size, taken element of each group)
_PATTERNS = {"P0101": (2, 0), "P1010": (2, 1), "P0001": (4, 0), "P0010": (4, 1),
             "P0100": (4, 2), "P1000": (4, 3), "P1111": (1, 0)}


class TileSort:
    def tile_sort_op(self, name: str, call: ast.Call) -> list:
        """One T.tile sort/gather operation, as IR steps; in an expert T.Scope (where the
        author's flags order whole operations) a pipe_barrier(V) separates the steps, as the
        one vector instruction they spell would need none."""
        out = self.tile_sort_steps(name, call)
        if getattr(self, "scope_core", None) != "V" or len(out) < 2:
            return out
        loc = self.loc(call)
        fenced = [out[0]]
        for st in out[1:]:
            fenced += [PipeBarrier("V", loc), st]
        return fenced

    def tile_sort_steps(self, name: str, call: ast.Call) -> list:
        a = call.args
        kw = {k.arg: k.value for k in call.keywords}
        if name == "gather_mask":
            if len(a) < 3 and "src1Pattern" not in kw:
                raise self.error(call, "T.tile.gather_mask(dst, src, pattern) takes 3 arguments")
            pat = self.eval(a[2] if len(a) > 2 else kw["src1Pattern"])
            if pat not in _PATTERNS:
                raise self.error(a[2] if len(a) > 2 else call,
                                 f"T.tile.gather_mask supports the fixed patterns "
                                 f"{', '.join(_PATTERNS)}; got {pat!r} (a pattern buffer is not "
                                 "supported: write a T.Parallel map that reads the elements)")
            group, pick = _PATTERNS[pat]
            dst, src = self.flat_tile(a[0]), self.flat_tile(a[1])
            return [self.flat_map(dst, lambda t: self.flat_load(src, binop("+", binop(
                "*", t, group), pick)), call)]
        if name == "gather":
            if len(a) < 4:
                raise self.error(call, "T.tile.gather(dst, src, offsets, base) takes 4 arguments")
            dst, src, off = self.flat_tile(a[0]), self.flat_tile(a[1]), self.flat_tile(a[2])
            base = self.value_arg(a[3])
            if not dtypes.is_int(off[0].dtype):
                raise self.error(a[2], f"T.tile.gather offsets are byte offsets in an integer "
                                       f"tile, got {off[0].dtype}")
            size = dtypes.itemsize(src[0].dtype)
            n = min(dst[2], off[2])
            return [self.flat_map((dst[0], dst[1], n), lambda t: self.flat_load(src, binop(
                "//", binop("+", Cast("int32", self.flat_load(off, t)), base), size)), call)]
        if name in ("sort", "topk"):
            need = 3 if name == "sort" else 4
            if len(a) < need:
                raise self.error(call, f"T.tile.{name} takes {need} arguments, got {len(a)}")
            dst, src = self.flat_tile(a[0]), self.flat_tile(a[1])
            k = self.const_arg(a[2], "K") if name == "topk" else src[2]
            actual = self.value_arg(a[-1])
            if dst[2] < 2 * k:
                raise self.error(a[0], f"T.tile.{name} writes {k} (value, index) pairs: the "
                                       f"destination needs {2 * k} elements, it has {dst[2]}")
            if name == "topk" and k > src[2]:
                raise self.error(a[2], f"top-{k} of a {src[2]}-element tile")
            vals, pos, loc = self.sort_rows(src[2], call)
            out = [self.flat_map(((vals, (const(0), const(0)), src[2])), lambda t: _select(
                binop("<", t, actual), self.flat_load(src, t), float("-inf")), call),
                self.flat_map((pos, (const(0), const(0)), src[2]), lambda t: t, call),
                Sort(Region.full(vals), Region.full(pos), True, loc)]
            return out + self.write_pairs(dst, vals, pos, k, None, call)
        # merge_sort(dst, src0, src1[, src2[, src3]])
        if not 3 <= len(a) <= 5:
            raise self.error(call, "T.tile.merge_sort(dst, src0, src1[, src2, src3]) merges 2 to "
                                   f"4 sorted lists, got {len(a) - 1}")
        dst = self.flat_tile(a[0])
        srcs = [self.flat_tile(s) for s in a[1:]]
        for node, s in zip(a[1:], srcs):
            if s[2] % 2:
                raise self.error(node, "a merge_sort source holds (value, index) pairs: an even "
                                       f"number of elements, got {s[2]}")
        total = sum(s[2] // 2 for s in srcs)
        if dst[2] < 2 * total:
            raise self.error(a[0], f"merge_sort writes {total} pairs ({2 * total} elements); the "
                                   f"destination has {dst[2]}")
        vals, pos, loc = self.sort_rows(total, call)
        slots = self.hidden(("merge_slots", total, dst[0].dtype), (1, total), dst[0].dtype, loc)
        out, off = [], 0
        for s in srcs:
            n = s[2] // 2

            def at(t, off=off):
                return binop("+", t, off)
            out.append(self.flat_map((vals, (const(0), const(off)), n),
                                     lambda t, s=s: self.flat_load(s, binop("*", t, 2)), call))
            out.append(self.flat_map((slots, (const(0), const(off)), n), lambda t, s=s: (
                self.flat_load(s, binop("+", binop("*", t, 2), 1))), call))
            out.append(self.flat_map((pos, (const(0), const(off)), n), at, call))
            off += n
        out.append(Sort(Region.full(vals), Region.full(pos), True, loc))
        return out + self.write_pairs(dst, vals, pos, total, slots, call)

    # ---------------------------------------------------------------------------- helpers

    def const_arg(self, node, what):
        v = self.resolved(self.eval(node), node)
        if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
            raise self.error(node, f"{what} must be a positive constant int")
        return v

    def hidden(self, key, shape, dtype, loc) -> Buffer:
        if key not in self.hoisted_allocs:
            name = self.fresh_buffer_name(f"{key[0]}_{len(self.hoisted_allocs)}")
            self.hoisted_allocs[key] = Alloc(Buffer(name, shape, dtype, "UB"), None, loc)
        return self.hoisted_allocs[key].buffer

    def sort_rows(self, n, call):
        loc = self.loc(call)
        vals = self.hidden(("sort_vals", n), (1, n), "float32", loc)
        pos = self.hidden(("sort_pos", n), (1, n), "int32", loc)
        return vals, pos, loc

    def write_pairs(self, dst, vals, pos, k, slots, call) -> list:
        """dst[2t] = vals[0, t]; dst[2t + 1] = the index (position, or the carried slot)."""
        dt = dst[0].dtype
        even = self.flat_map((dst[0], dst[1], k), None, call, lambda t: binop("*", t, 2),
                             lambda t: Load(vals, (const(0), t)))

        def index(t):
            p = Load(pos, (const(0), t))
            return Load(slots, (const(0), p)) if slots is not None else Cast(dt, p)
        odd = self.flat_map((dst[0], dst[1], k), None, call,
                            lambda t: binop("+", binop("*", t, 2), 1), index)
        return [even, odd]

    def flat_tile(self, node):
        """(buffer, starts, number of elements) of a tile or a region, read in row-major order
        from its start (tilelang-ascend's vector operations take flat element counts)."""
        buf, starts, ext = self.region(node)
        if not isinstance(buf, Buffer) or buf.scope in ("global", "workspace"):
            raise self.error(node, "this T.tile operation works on on-chip (UB) tiles")
        if ext and all(e is None for e in ext):
            raise self.error(node, "a T.tile operand is a tile or a sliced region, not one "
                                   "element")
        n = 1
        for d, e in enumerate(ext):
            n *= buf.shape[d] if e is None else e
        return buf, starts, n

    def flat_index(self, tile, t):
        """The element `t` places after the start of a flat tile, as buffer indices."""
        buf, starts = tile[0], tile[1]
        if len(buf.shape) == 1:
            return (binop("+", starts[0], t),)
        flat = as_expr(starts[0])
        for d in range(1, len(buf.shape)):
            flat = binop("+", binop("*", flat, buf.shape[d]), starts[d])
        flat = binop("+", flat, t)
        idx = []
        for d in range(len(buf.shape) - 1, 0, -1):
            idx.append(binop("%", flat, buf.shape[d]))
            flat = binop("//", flat, buf.shape[d])
        return tuple(reversed(idx + [flat]))

    def flat_load(self, tile, t):
        return Load(tile[0], tuple(as_expr(i) for i in self.flat_index(tile, t)))

    def flat_map(self, tile, fn, call, where=None, value=None) -> For:
        """for t in parallel(n): tile[t] = fn(t) (or tile[where(t)] = value(t))."""
        buf, _, n = tile
        name = self.fresh_var("t")
        t = Var(name)
        at = self.flat_index(tile, where(t) if where else t)
        v = value(t) if value else fn(t)
        v = v if is_ir(v) else Const(v if dtypes.is_float(buf.dtype) else int(v), buf.dtype)
        store = Store(buf, tuple(as_expr(i) for i in at), as_expr(v), self.loc(call))
        return For((name,), (const(n),), "parallel", (store,), 0, self.loc(call))


def _select(c, a, b):
    from .dialect import select
    return select(c, a, b)
