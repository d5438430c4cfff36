"""The float32 micro-kernel of narrow columns over K pairs (microkernel.py's 8- and 24-column
kernels, and every tail whose last column vector holds at most 8 columns).

A vector of 16 lanes holds 8 columns for two consecutive k: lane 2j is column j at k, lane 2j+1
column j at k+1. Row r's A operand is then its pair (A[r, k], A[r, k+1]) broadcast to every
lane pair, one 64-bit broadcast load where A's rows are contiguous in K; B's two rows k, k+1 are
interleaved in registers (one unpack per 16-lane half, or one two-source permute of 8 columns),
once per k pair for all MR rows:

    for k in 0, 2, 4, ...:                      acc[r][v] lanes (2j, 2j+1) = column c(v, j)
        p[v] = interleave(B[k, cols(v)], B[k + 1, cols(v)])      at k even / odd
        for r: a2 = broadcast64(&A[r, k]); acc[r][v] += a2 * p[v]
    C[r, c] (+)= acc[r][v][2j] + acc[r][v][2j + 1]              (two permutes and an add)

Against the full-vector kernel this takes every FMA lane for a column (24 columns: 3 FMAs per row
per k pair, no half-empty vector) and needs no per-row blend of two rows' broadcasts: the FP
ports run only FMAs and the few interleaves of B. An odd last k pairs with zeros. A transposed
B tile that only such kernels read is packed in K pairs already (layout.py `packBT2`, natural
column order): the pair vectors are plain loads. prenorm 4096x24x8192 (bf16 A, one thread,
CPU time on a host shared with other jobs, best of 20): 25.3 ms with the blend kernel, 21.6 ms
with this one and the row-pass changes of reduce.py.
"""
from __future__ import annotations

import llvmlite.ir as ir

from .irutil import F32, I1, I32, I64, VL, vty

HALF = VL // 2


def usable(bf16: bool, ncols: int, steps: int, a_cs_b: int) -> bool:
    """The pair kernel serves a float32 kernel whose last column vector holds at most 8 columns
    (1..8 or 17..24 columns) when A's rows are contiguous in K and K has a pair."""
    if bf16 or a_cs_b != 4 or steps < 2:
        return False
    return 0 < ncols <= HALF or 2 * HALF < ncols <= 3 * HALF


def _unpack(lo: bool):
    """unpcklps / unpckhps of two 16-lane vectors: pairs (x[i], y[i]) of columns
    {0,1,4,5,8,9,12,13} (lo) or {2,3,6,7,10,11,14,15} (hi)."""
    base = 0 if lo else 2
    out = []
    for lane in range(4):
        for i in (0, 1):
            c = 4 * lane + base + i
            out += [c, VL + c]
    return out


def _columns(v: int):
    """The columns of the 8 lane pairs of pair vector v (0: unpack lo, 1: unpack hi)."""
    base = 0 if v == 0 else 2
    return [4 * lane + base + i for lane in range(4) for i in (0, 1)]


def k_loop(b, acc, main, unroll, body):
    """`for k in range(0, main, unroll): acc = body(acc, k)` with the accumulators in phis
    (registers across the loop); returns the final accumulators."""
    if not main:
        return acc
    pre, fn = b.block, b.function
    loop = fn.append_basic_block("k")
    after = fn.append_basic_block("k.end")
    b.branch(loop)
    b.position_at_end(loop)
    kphi = b.phi(I64, "k")
    kphi.add_incoming(ir.Constant(I64, 0), pre)
    phis = []
    for x in acc:
        p = b.phi(x.type)
        p.add_incoming(x, pre)
        phis.append(p)
    cur = body(phis, kphi)
    nxt = b.add(kphi, ir.Constant(I64, unroll))
    for p, x in zip(phis, cur):
        p.add_incoming(x, b.block)
    kphi.add_incoming(nxt, b.block)
    b.cbranch(b.icmp_signed("<", nxt, ir.Constant(I64, main)), loop, after)
    b.position_at_end(after)
    return cur


def kernel(e, args, mr, ncols, steps, a_rs_b, ldb_b, bmask, c_store, paired=False):
    """Emit the pair kernel into the function of Emitter `e` (args: A, B panel, C pointers);
    `c_store(x, r, v)` adds/stores the 16- (v=0) or 8-column (last) vector x of row r. With
    `paired`, B's panel is already in K pairs (layout.py packBT2: pair row k/2 of `ldb_b` bytes,
    column c's pair at lanes 2c, 2c+1), loaded as the pair vectors with no interleave."""
    b = e.b
    a, bp, _ = args
    wide = ncols > 2 * HALF            # 17..24 columns: 16 + 8, else 1..8
    nv = 3 if wide else 1
    tail = ncols - (2 * HALF if wide else 0)   # valid columns of the last 8
    f16 = vty(F32)
    zero16 = ir.Constant(f16, None)
    tmask = ir.Constant(vty(I1), [1] * tail + [0] * (VL - tail)) if bmask else None
    inter = ir.Constant(vty(I32), [i // 2 + (VL if i % 2 else 0) for i in range(VL)])
    unpack = [ir.Constant(vty(I32), _unpack(lo)) for lo in (True, False)]
    pair_lanes = ir.Constant(vty(I32), [0, 1] * HALF)

    def brow(k):
        """B's row k as (first 16 columns or None, the 16 columns from the last 8's start)."""
        off = b.mul(k, ir.Constant(I64, ldb_b))
        first = e.load(f16, e.gep(bp, off), 4) if wide else None
        p = e.gep(bp, b.add(off, ir.Constant(I64, 4 * 2 * HALF))) if wide else e.gep(bp, off)
        if tmask is not None:
            last = e.masked_load(f16, p, tmask, zero16)
        else:
            last = e.load(f16, p, 4)
        return first, last

    def pairs_of(k, single):
        """The pair vectors of k and k + 1 (k alone when `single`: k + 1's lanes zero)."""
        if paired:  # k even: pair row k / 2 (an odd last k's pair holds zeros)
            off = b.mul(k, ir.Constant(I64, ldb_b // 2))
            return [e.load(f16, e.gep(bp, b.add(off, ir.Constant(I64, v * 4 * VL))), 4)
                    for v in range(nv)]
        f0, l0 = brow(k)
        if single:
            f1, l1 = (zero16 if wide else None), zero16
        else:
            f1, l1 = brow(b.add(k, ir.Constant(I64, 1)))
        pv = ([b.shuffle_vector(f0, f1, unpack[0]), b.shuffle_vector(f0, f1, unpack[1])]
              if wide else [])
        pv.append(b.shuffle_vector(l0, l1, inter))
        return pv

    def step(acc, k, single):
        """acc += the products of k and k + 1 (of k alone when `single`)."""
        pv = pairs_of(k, single)
        aoff = b.mul(k, ir.Constant(I64, 4))
        out = []
        for r in range(mr):
            p = e.gep(a, b.add(aoff, ir.Constant(I64, r * a_rs_b)))
            if single:
                a2 = e.splat(e.load(F32, p, 4))
            else:
                two = e.load(vty(F32, 2), p, 4)
                a2 = b.shuffle_vector(two, two, pair_lanes)
            for v in range(nv):
                out.append(e.intr("fma", f16, [a2, pv[v], acc[r * nv + v]]))
        return out

    unroll = 4  # k per loop iteration: two pairs
    main = steps // unroll * unroll

    def body(cur, k):
        for u in range(0, unroll, 2):
            cur = step(cur, b.add(k, ir.Constant(I64, u)) if u else k, False)
        return cur

    acc = k_loop(b, [zero16] * (mr * nv), main, unroll, body)
    kk = main
    while kk < steps:
        acc = step(acc, ir.Constant(I64, kk), kk + 1 == steps)
        kk += 2

    # lane pairs summed, columns back in order: the 16 first columns from vectors 0 and 1
    # (concatenated: 32 lanes), the last 8 from the last vector
    even16, odd16 = [], []
    if wide:
        where = {}
        for v in (0, 1):
            for j, c in enumerate(range(HALF * v, HALF * (v + 1)) if paired else _columns(v)):
                where[c] = VL * v + 2 * j
        even16 = ir.Constant(vty(I32), [where[c] for c in range(VL)])
        odd16 = ir.Constant(vty(I32), [where[c] + 1 for c in range(VL)])
    even8 = ir.Constant(vty(I32, HALF), list(range(0, VL, 2)))
    odd8 = ir.Constant(vty(I32, HALF), list(range(1, VL, 2)))
    for r in range(mr):
        xs = acc[r * nv:(r + 1) * nv]
        if wide:
            c_store(b.fadd(b.shuffle_vector(xs[0], xs[1], even16),
                           b.shuffle_vector(xs[0], xs[1], odd16)), r, 0)
        x = xs[-1]
        c_store(b.fadd(b.shuffle_vector(x, x, even8), b.shuffle_vector(x, x, odd8)), r,
                1 if wide else 0)
