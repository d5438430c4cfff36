"""`T.sync_grid()`: a barrier of every block of the launch, as a split into launches.

TileLang's persistent kernels (deepseek_mla's example_mla_decode_persistent) compute partial
results in one phase, wait for every block at `T.sync_grid()`, then combine them in a second
phase that reads what other blocks wrote to global memory. Blocks run independently here, but
launches of one prim_func run in order over the same tensors, so a grid barrier at the top level
of the kernel body is the end of one launch and the start of the next over the same grid:

    with T.Kernel(n) as b:              with T.Kernel(n) as b:
        x = T.alloc_shared(...)             x = T.alloc_shared(...)
        <phase 1 on x, writes GM>   ->      <phase 1>
        T.sync_grid()                   with T.Kernel(n) as b:
        y = T.alloc_fragment(...)           y = T.alloc_fragment(...)
        <phase 2 on y, reads GM>            <phase 2>

Each launch allocates the on-chip buffers it names. An on-chip buffer (tile or scalar) written
before the barrier and read after it would carry a value across launches, which on-chip memory
does not: a located error saying to pass it through global memory. A barrier inside a loop, an
`if` or a `T.Scope` cannot end a launch: a located error.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir import analysis
from ..ir.nodes import TILE_OPS, Alloc, Loc, Store, walk_statements


@dataclass(frozen=True)
class GridSync:
    """The place of a `T.sync_grid()` in a kernel body (removed when the body is split)."""
    call: object  # the ast.Call, for the error location
    loc: Loc


class GridSyncOps:
    def op_sync_grid(self, call) -> list:
        """A grid-wide barrier: recorded here, the body is split into launches by
        `split_launches` (top level only)."""
        if call.args or call.keywords:
            raise self.error(call, "T.sync_grid() takes no arguments")
        if len(self.open_bodies) != self.launch_depth or getattr(self, "scope_core", None):
            raise self.error(call, "T.sync_grid() inside a loop, an `if` or a T.Scope: a grid "
                                   "barrier here ends one launch and starts the next, so it "
                                   "must stand at the top level of the T.Kernel body; move it "
                                   "there (or split the work into two `with T.Kernel` blocks)")
        return [GridSync(call, self.loc(call))]


def split_launches(body: list, error) -> list[list]:
    """The statement lists of the launches a kernel body with top-level GridSync markers
    stands for (one list when there is none). `error(node, message)` builds the CompileError."""
    if not any(isinstance(s, GridSync) for s in body):
        return [body]
    allocs = {s.buffer.name: s for s in body if isinstance(s, Alloc)}
    segments, cur, marks = [], [], []
    for s in body:
        if isinstance(s, GridSync):
            segments.append(cur)
            marks.append(s)
            cur = []
        elif not isinstance(s, Alloc):
            cur.append(s)
    segments.append(cur)
    written_before: dict = {}   # on-chip buffer name -> the barrier after its last write
    out = []
    for i, seg in enumerate(segments):
        reads, writes = _accesses(seg)
        for name in sorted(reads & set(written_before)):
            raise error(marks[i - 1].call,
                        f"'{name}' is written before this T.sync_grid() and read after it: "
                        "on-chip buffers do not keep their values across a grid barrier here "
                        "(the barrier ends one launch and starts the next); write the value to "
                        "a global tensor (T.alloc_global or a parameter) before the barrier "
                        "and read it back after")
        names = reads | writes
        out.append([allocs[n] for n in allocs if n in names] + seg)
        written_before.update({n: i for n in writes if n in allocs})
    return out


def _accesses(stmts) -> tuple[set, set]:
    """(names read, names written) by the statements and everything nested in them."""
    reads, writes = set(), set()
    for s in walk_statements(stmts):
        if isinstance(s, TILE_OPS):
            r, w = analysis.accesses(s)
            reads |= r
            writes |= w
            continue
        if isinstance(s, Store):
            writes.add(s.buffer.name)
            own = [s.value, *s.indices]
        else:  # loop extents, if conditions
            own = [s]
        reads |= {ld.buffer.name for n in own for ld in analysis.loads(n)}
    return reads, writes
