"""tilelang-ascend's block broadcast `T.tile.brcb_experiment(dst, src, repeat, blk_stride,
rep_stride)` (AscendC Brcb): each of `repeat * 8` source elements fills one 32-byte block of
the destination (8 float32 or 16 float16 elements), block k of repeat r at block offset
`r * rep_stride + k * blk_stride` from the destination's first element, both operands
addressed as the row-major memory of their buffers from the region's first element:

    T.tile.brcb_experiment(d, s, 2, 1, 8)   # d: (16, 8) float32, s: (16, 1)
    ->  for r, k, e in parallel(2, 8, 8):  d[(r*64 + k*8 + e) // 8, (r*64 + k*8 + e) % 8] = s[r*8 + k, 0]

`T.tile.row_expand_{mul,sub,div}_experiment(dst, src0, src1[, tmp])` are the row_expand
operations (dst[i, j] = src0[i, j] op src1[i]); src1 may be the brcb form (R, 8), whose rows
hold their value in every column (its first column is read); tmp, the AscendC backend's
staging buffer, holds nothing the result needs."""
from __future__ import annotations

from ..ir import dtypes
from ..ir.nodes import For, Load, Store
from .exprs import as_expr, binop, const

BLOCK_BYTES = 32


class TileBrcb:
    def tile_brcb(self, call) -> list:
        a = self.args(call, ["dst", "src", "repeat_times", "dst_blk_stride", "dst_repeat_stride"])
        dbuf, dstarts, _ = self.region(a["dst"])
        sbuf, sstarts, _ = self.region(a["src"])
        repeat, blk, rep = (self.int_arg(a[n]) for n in ("repeat_times", "dst_blk_stride",
                                                        "dst_repeat_stride"))
        per_block = BLOCK_BYTES // dtypes.itemsize(dbuf.dtype)
        names = tuple(self.fresh_var("t") for _ in range(3))
        r, k, e = (self.var(n) for n in names)
        src_at = binop("+", _flat(sbuf, sstarts), binop("+", binop("*", r, 8), k))
        block = binop("+", binop("*", r, rep), binop("*", k, blk))
        dst_at = binop("+", _flat(dbuf, dstarts), binop("+", binop("*", block, per_block), e))
        value = Load(sbuf, _unflat(sbuf, src_at))
        store = Store(dbuf, _unflat(dbuf, dst_at), as_expr(value), self.loc(call))
        return [For(names, (const(repeat), const(8), const(per_block)), "parallel", (store,), 0,
                    self.loc(call))]


def _flat(buf, starts):
    """The row-major element offset of `starts` in `buf`."""
    out, stride = const(0), 1
    for d in range(len(buf.shape) - 1, -1, -1):
        out = binop("+", out, binop("*", starts[d], stride))
        stride *= buf.shape[d]
    return out


def _unflat(buf, at) -> tuple:
    """The indices of row-major element offset `at` in `buf`."""
    idx, stride = [], 1
    for d in range(len(buf.shape) - 1, -1, -1):
        q = binop("//", at, stride) if stride != 1 else at
        idx.append(as_expr(binop("%", q, buf.shape[d]) if d > 0 else q))
        stride *= buf.shape[d]
    return tuple(reversed(idx))
