"""The llvm target's copy rewrites: staging copies a CPU does not need, removed.

On the NPU every transfer has one pipe, so the lowering stages data through intermediate
buffers (GM -> UB -> UB for a converting copy, workspace -> L1 -> L0A/L0B for a gemm operand).
A CPU reads any buffer directly: these passes drop the copies whose only purpose was the pipe.
Both are pure functions of the lowered IR and keep every value a later statement reads.

`fuse_copy_chains`: `copy(S, X); copy(X, Y)` (only sync instructions between them, X a whole
on-chip staging buffer used nowhere else, the two conversions composing into one) becomes
`copy(S, Y)`:

    x_ub = alloc_ub((32, 64), "float32")          x_ub = alloc_ub((32, 64), "float32")
    y_ub = alloc_ub((32, 64), "float16")          y_ub = alloc_ub((32, 64), "float16")
    copy(A[..], x_ub)                      ->     copy(A[..], y_ub)
    pipe_barrier("V")                             pipe_barrier("V")
    copy(x_ub, y_ub)

`forward_copies`: a buffer Y whose every write is a whole copy from the same buffer X (both
block-wide: workspace or the cube's L1/L0 buffers, same shape, dtype and storage) and whose every
read follows such a copy in the same statement list with X unchanged in between is read from X
instead; the copies and Y's allocation go:

    B_l1 = alloc_L1((64, 32), "float32")          B_l1 = alloc_L1((64, 32), "float32")
    B_l0b = alloc_L0B((64, 32), "float32")        copy(B[..], B_l1)
    copy(B[..], B_l1)                      ->     gemm(A_l0a, B_l1, C_l0c)
    copy(B_l1, B_l0b)
    gemm(A_l0a, B_l0b, C_l0c)

Neither output is synchronised for the NPU any more; the llvm target runs it in program order,
or as coroutines switching core at cross-core waits: no read is forwarded across a wait while
another statement list (another core) may write the source.
"""
from __future__ import annotations

from dataclasses import replace

from ..ir.analysis import BLOCK_SCOPES, GM_SCOPES, SYNC_OPS, buffer_refs, written_names
from ..ir.dtypes import FLOAT_DTYPES, exact_in
from ..ir.nodes import (
    Alloc, Buffer, Copy, Kernel, Load, Region, WaitCrossFlag, body_fields, transform, walk,
)

# block-wide buffers: one instance per block, shared by its cores (kernel parameters aside)
_PER_BLOCK = tuple(s for s in BLOCK_SCOPES if s != "global")
# dtypes the llvm target may keep in a wider storage on chip than in GM
_WIDENED = ("float16", "bfloat16", "float8_e4m3fn", "float8_e5m2")


def _composes(s_dtype: str, x_dtype: str, y_dtype: str) -> bool:
    """copy S -> X -> Y gives what copy S -> Y gives: the first conversion is exact, or the
    second is the identity."""
    if s_dtype == x_dtype or x_dtype == y_dtype:
        return True
    return s_dtype in FLOAT_DTYPES and x_dtype in FLOAT_DTYPES and exact_in(s_dtype, x_dtype)


def _rebuild(stmts, fn):
    """Statements with `fn(list) -> list` applied to every statement list, innermost first."""
    out = []
    for s in stmts:
        fields = {f: tuple(_rebuild(getattr(s, f), fn)) for f in body_fields(s)}
        out.append(replace(s, **fields) if fields else s)
    return fn(out)


def _next_work(stmts, i) -> int:
    j = i + 1
    while j < len(stmts) and isinstance(stmts[j], SYNC_OPS):
        j += 1
    return j


def fuse_copy_chains(kernel: Kernel) -> Kernel:
    """`copy(S, X); copy(X, Y)` -> `copy(S, Y)` (module docstring)."""
    refs = buffer_refs(kernel.body)
    params = {p.name for p in kernel.params}

    def pairs(stmts):
        out = []
        for i, s in enumerate(stmts):
            if not isinstance(s, Copy) or not s.dst.is_full or s.atomic or s.transpose:
                continue
            x = s.dst.buffer
            if x.name in params or "L0C" in (x.scope, s.src.buffer.scope):
                continue
            j = _next_work(stmts, i)
            if j == len(stmts):
                continue
            t = stmts[j]
            if (isinstance(t, Copy) and t.src.is_full and t.src.buffer == x and not t.transpose
                    and not t.atomic and t.dst.buffer.name != x.name and t.src.buffer.name != s.src.buffer.name
                    and _composes(s.src.buffer.dtype, x.dtype, t.dst.buffer.dtype)):
                out.append((i, j, x.name))
        return out

    found: dict = {}

    def scan(stmts):
        for _, _, name in pairs(stmts):
            found[name] = found.get(name, 0) + 1
        for s in stmts:
            for f in body_fields(s):
                scan(getattr(s, f))

    scan(kernel.body)
    ok = {n for n, c in found.items() if refs.get(n) == 2 * c}
    if not ok:
        return kernel

    def rewrite(stmts):
        drop = set()
        for i, j, name in pairs(stmts):
            if name in ok and i not in drop:
                stmts[i] = Copy(stmts[i].src, stmts[j].dst, stmts[i].loc)
                drop.add(j)
        return [s for k, s in enumerate(stmts) if k not in drop]

    body = _rebuild(kernel.body, rewrite)
    left = buffer_refs(body)
    unused = {n for n in ok if not left.get(n)}
    return replace(kernel, body=tuple(_rebuild(body, lambda stmts: [
        s for s in stmts if not (isinstance(s, Alloc) and s.buffer.name in unused)])))


def _same_storage(x: Buffer, y: Buffer) -> bool:
    """X and Y are stored alike on every host (on chip, the llvm target may widen 16- and 8-bit
    floats; in GM and workspace it never does)."""
    return x.dtype not in _WIDENED or (x.scope in GM_SCOPES) == (y.scope in GM_SCOPES)


def _reads_of(s, name) -> int:
    return sum(1 for n in walk(s) if isinstance(n, (Region, Load)) and n.buffer.name == name
               and not (isinstance(s, Copy) and n is s.dst))


def _find_forward(kernel: Kernel):
    """One buffer Y that `forward_copies` can read from its source X: (Y, X, ids of the copies
    X -> Y), or None."""
    refs = buffer_refs(kernel.body)
    writers: dict = {}
    lists = []

    def collect(stmts):
        lists.append(stmts)
        for s in stmts:
            if not body_fields(s):
                for name in written_names(s):
                    writers.setdefault(name, []).append(s)
            for f in body_fields(s):
                collect(getattr(s, f))

    collect(kernel.body)
    for yname, ws in writers.items():
        w0 = ws[0]
        if not isinstance(w0, Copy):
            continue
        x, y = w0.src.buffer, w0.dst.buffer
        if (x.scope not in _PER_BLOCK or y.scope not in _PER_BLOCK or x.name == y.name
                or x.shape != y.shape or x.dtype != y.dtype or not _same_storage(x, y)
                or not all(isinstance(w, Copy) and w.src.is_full and w.dst.is_full
                           and not w.transpose and not w.atomic and w.src.buffer == x
                           for w in ws)):
            continue
        ids = {id(w) for w in ws}
        seen, ok = 0, True
        for stmts in lists:
            for i, s in enumerate(stmts):
                if id(s) not in ids:
                    continue
                last = -1
                for j in range(i + 1, len(stmts)):
                    if id(stmts[j]) in ids or yname in written_names(stmts[j]):
                        break
                    c = _reads_of(stmts[j], yname)
                    if c:
                        seen += c
                        last = j
                between = stmts[i + 1:last + 1]
                if any(x.name in written_names(t) for t in between):
                    ok = False
                # a block whose cores run as coroutines switches core at a cross-core wait:
                # another core may write X there (Y holds the copy taken before it)
                here = {id(t) for t in stmts}
                elsewhere = any(id(w) not in here for w in writers.get(x.name, ()))
                if elsewhere and any(isinstance(n, WaitCrossFlag) for t in between
                                     for n in walk(t)):
                    ok = False
        if ok and seen + len(ws) == refs.get(yname, 0):
            return y, x, ids
    return None


def forward_copies(kernel: Kernel) -> Kernel:
    """Read the source of whole-buffer copies between block-wide buffers in place, buffer by
    buffer, until none is left (module docstring)."""
    while True:
        found = _find_forward(kernel)
        if found is None:
            return kernel
        y, x, ids = found

        def drop(stmts):
            return [s for s in stmts if id(s) not in ids
                    and not (isinstance(s, Alloc) and s.buffer.name == y.name)]

        kernel = replace(kernel, body=tuple(_rebuild(kernel.body, drop)))
        kernel = transform(kernel, lambda n: x if isinstance(n, Buffer) and n == y else n)
