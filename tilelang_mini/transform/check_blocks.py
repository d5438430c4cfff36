"""check_blocks: GM races between different blocks of an expert kernel, at compile time.

Blocks run concurrently and no flag orders them, so two blocks that touch common elements of a
global tensor, one of them writing (not both atomic adds of one kind), race. Each block's GM
footprint is the element boxes its instructions access (every core, loops walked as check_sync
walks them); block 0 is compared with the blocks most likely to collide with it: block 1, the
last block, and block k for every `cid // k` and `cid % k` in the kernel's GM indices (the
blocks that share a row or a column of a 2-D decomposition of cid). Accesses whose index or
guard depends on data are left to `simulate` (no false alarm):

    with Kernel(4, is_npu=True) as (cid, vid):
        copy(x, Y[vid * 8, 0])    # V.MTE3   -> race between blocks: every block writes Y[0:16]
"""
from __future__ import annotations

import numpy as np

from ..errors import CompileError
from ..ir.analysis import operands
from ..ir.happens_before import Instr, accesses
from ..ir.nodes import BinOp, Const, If, SYNC_OPS, Var, walk

__all__ = ["check_blocks", "partner_blocks"]


def partner_blocks(kernel, cid: str) -> list[int]:
    """The blocks block 0 is compared with: 1, the last, and k for `cid // k`, `cid % k`."""
    n = kernel.grid[0]
    out = {1, n - 1}
    for node in walk(kernel):
        if (isinstance(node, BinOp) and node.op in ("//", "%") and node.a == Var(cid)
                and isinstance(node.b, Const) and type(node.b.value) is int):
            out.add(node.b.value)
    return sorted(k for k in out if 0 < k < n)


def check_blocks(kernel, tree, verifier) -> None:
    """Raise a located CompileError for two blocks that access common GM elements, one
    writing. `verifier(block)`: a check_sync walker for that block (its `streams`)."""
    cid = kernel.grid_vars[0]
    partners = partner_blocks(kernel, cid)
    if not partners:
        return
    base = _footprint(verifier(0), tree)
    if not base:
        return
    for b in partners:
        other = _footprint(verifier(b), tree)
        for name, mine in base.items():
            theirs = other.get(name)
            if theirs:
                _compare(name, mine, 0, theirs, b)


def _footprint(v, tree) -> dict:
    """buffer name -> {(id(stmt), kind): (stmt, kind, [element box, ...])} of the global tensors
    one block accesses; kind is False (read), True (write) or the atomic write's tuple."""
    from .check_sync import _Budget
    try:
        streams = v.streams(tree, None)
    except _Budget:
        streams = v.streams(tree, 2)
    out: dict = {}
    for stream in streams.values():
        for item, ancestors, env in stream:
            s = item.stmt
            if item.probe or isinstance(s, SYNC_OPS) or _data_guarded(v, ancestors, env):
                continue
            acc = accesses(Instr(s, item.core, item.pipe), {}, box=v.box(env),
                           index_box=v.index_box(s, env))
            for (node, _), (mem, box, kind) in zip(operands(s), acc):
                buf = node.buffer
                if mem[0] != "GM" or box is None or buf.scope != "global":
                    continue
                box = _clip(box, buf.shape)
                if box is None:
                    continue
                entry = out.setdefault(buf.name, {}).setdefault((id(s), _kind(kind)),
                                                               (s, kind, []))
                entry[2].append(box)
    return out


def _kind(kind):
    return kind if isinstance(kind, tuple) else bool(kind)


def _data_guarded(v, ancestors, env) -> bool:
    """Under an if whose condition depends on data (not known from loop and block indices)."""
    return any(isinstance(block.stmt, If) and v.value(block.stmt.cond, env) is None
               for block, _ in ancestors)


def _clip(box, shape):
    out = []
    for (lo, hi), n in zip(box, shape):
        if not isinstance(n, int):
            return tuple(box)
        lo, hi = max(lo, 0), min(hi, n)
        if hi <= lo:
            return None
        out.append((lo, hi))
    return tuple(out)


def _compare(name, mine: dict, b0: int, theirs: dict, b1: int) -> None:
    for s0, k0, boxes0 in mine.values():
        for s1, k1, boxes1 in theirs.values():
            if not (k0 or k1) or (isinstance(k0, tuple) and k0 == k1):
                continue
            hit = _overlap(boxes0, boxes1)
            if hit is None:
                continue
            w0 = "writes" if k0 else "reads"
            w1 = "writes" if k1 else "reads"
            (lo, hi) = hit
            elems = ", ".join(f"{a}:{b}" for a, b in zip(lo, hi))
            from .check_sync import _where
            raise CompileError(
                f"race between blocks on {name}[{elems}]: block {b0} {_where(s0)} {w0} it and "
                f"block {b1} {_where(s1)} {w1} it; blocks run concurrently and nothing orders "
                f"them. Index the global tensor by the block index so that each block has its "
                f"own part, or accumulate with T.atomic_add", s1.loc)


def _overlap(a: list, b: list):
    """A common box of two lists of element boxes (one from each), or None."""
    def arr(boxes):
        x = np.asarray(boxes, dtype=np.int64)  # (n, rank, 2)
        return x[..., 0], x[..., 1]
    (alo, ahi), (blo, bhi) = arr(a), arr(b)
    if (alo.min(0) >= bhi.max(0)).any() or (blo.min(0) >= ahi.max(0)).any():
        return None  # the hulls are apart
    for i in range(0, len(a), 256):  # bounded memory: 256 x len(b) x rank at a time
        lo = np.maximum(alo[i:i + 256, None], blo[None])
        hi = np.minimum(ahi[i:i + 256, None], bhi[None])
        both = (lo < hi).all(-1)
        if both.any():
            p, q = np.argwhere(both)[0]
            return tuple(lo[p, q]), tuple(hi[p, q])
    return None
