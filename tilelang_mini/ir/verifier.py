"""Structural invariants every stage must keep; run between passes in tests.

A failure here is a compiler bug (not a user error), so it raises `IRVerificationError` naming the
stage that broke the invariant.
"""
from __future__ import annotations

from .nodes import (
    Alloc, BinOp, Buffer, Call, Cast, Const, Copy, For, Fused, If, Kernel, Load, Reduce, Region,
    Reinterpret, Scope, SetCrossFlag, Store, Var, WaitCrossFlag,
    BIN_OPS, CALL_FNS, FUSED_KINDS, LOOP_KINDS, SCOPES, TILE_OPS, SYNC_OPS, body_fields, walk_own,
)
from .. import errors  # a module, not its names: errors.py imports ir.nodes (a cycle)
from .analysis import can_widen, is_dual_copy
from .dtypes import DTYPES, itemsize


class IRVerificationError(AssertionError):
    """`message` is the broken invariant, `loc` the statement it was found at (or None)."""

    def __init__(self, text: str, message: str = "", loc=None):
        super().__init__(text)
        self.message, self.loc = message or text, loc


def check_grid(kernel: Kernel) -> None:
    """The grid a backend runs: (n,) with variables (cid, vid) for an is_npu kernel, else one
    variable per extent (CompileError at the kernel otherwise)."""
    if kernel.is_npu:
        if len(kernel.grid) != 1 or len(kernel.grid_vars) != 2:
            raise errors.CompileError("an is_npu kernel has grid (n,) and variables (cid, vid)",
                                      kernel.loc)
    elif len(kernel.grid) != len(kernel.grid_vars):
        raise errors.CompileError(f"grid has {len(kernel.grid)} extents but "
                                  f"{len(kernel.grid_vars)} variables", kernel.loc)


def verify_kernel(kernel: Kernel, stage: str = "?") -> None:
    _Verifier(kernel, stage).run()


class _Verifier:
    def __init__(self, kernel: Kernel, stage: str):
        self.kernel = kernel
        self.stage = stage

    def fail(self, msg: str, node=None):
        loc = getattr(node, "loc", None)
        where = f" at {loc}" if loc is not None else ""
        raise IRVerificationError(f"IR invalid after '{self.stage}'{where}: {msg}", msg, loc)

    def run(self):
        k = self.kernel
        buffers = {}
        for b in k.params:
            self.buffer(b, k)
            if b.scope != "global":
                self.fail(f"parameter {b.name} must be global")
            buffers[b.name] = b
        if len(k.grid_vars) != (2 if k.is_npu else len(k.grid)):
            self.fail("grid variables do not match the grid")
        self.dual = {}  # marked (True) / unmarked (False) -> an L0C -> UB copy of the cube
        self.body(k.body, buffers, set(k.grid_vars))
        if len(self.dual) == 2:  # after mark_dual_copies, every one is marked
            self.fail("an L0C -> UB copy of the cube without dual=True where others have it",
                      self.dual[False])

    def buffer(self, b: Buffer, node):
        if b.dtype not in DTYPES or b.scope not in SCOPES:
            self.fail(f"buffer {b.name}: bad dtype/scope {b.dtype}/{b.scope}", node)
        if not all(isinstance(s, int) and s > 0 for s in b.shape):
            self.fail(f"buffer {b.name}: shape {b.shape} must be positive ints", node)

    def body(self, stmts, buffers: dict, names: set, core=None):
        if not isinstance(stmts, tuple):
            self.fail("a statement list must be a tuple")
        buffers = dict(buffers)
        for s in stmts:
            if isinstance(s, Alloc):
                self.buffer(s.buffer, s)
                if s.buffer.name in buffers and buffers[s.buffer.name] != s.buffer:
                    self.fail(f"buffer name {s.buffer.name} declared twice", s)
                buffers[s.buffer.name] = s.buffer
                if s.panels and len(s.buffer.shape) != 2:
                    self.fail(f"buffer {s.buffer.name}: panels=True needs a 2-d tile", s)
                if s.widened and not can_widen(s.buffer):
                    self.fail(f"buffer {s.buffer.name}: widened=True needs an on-chip 16- or "
                              f"8-bit float tile, not {s.buffer.dtype} in {s.buffer.scope}", s)
                continue
            if isinstance(s, Copy) and s.dual and not is_dual_copy(s, core):
                self.fail("dual=True needs an L0C -> UB copy inside Scope(\"C\")", s)
            if is_dual_copy(s, core):
                self.dual[s.dual] = s
            if not isinstance(s, (*TILE_OPS, *SYNC_OPS, Store, For, If, Scope, Fused)):
                self.fail(f"not a statement: {type(s).__name__}", s)
            if isinstance(s, Fused):
                self.fused(s)
            inner = set(names)
            if isinstance(s, For):
                if s.kind not in LOOP_KINDS or (len(s.vars) != len(s.extents) if s.kind != "while"
                                                else s.vars or len(s.extents) != 1):
                    self.fail("malformed loop", s)
                inner |= set(s.vars)
            for node in walk_own(s):
                self.node(node, buffers, names, s)
            for f in body_fields(s):
                self.body(getattr(s, f), buffers, inner, s.core if isinstance(s, Scope) else core)

    def fused(self, s: Fused):
        """The body of a fused block is what its kind says (FUSED_KINDS), sync instructions
        aside: a one-store map whose tile the next statement consumes."""
        parts = [t for t in s.body if not isinstance(t, SYNC_OPS)]
        if any(isinstance(t, (SetCrossFlag, WaitCrossFlag)) for t in s.body):
            self.fail(f"fused({s.kind!r}) holds a cross-core flag", s)
        shapes = {"map_reduce": (For, Reduce), "copy_map_reduce": (Copy, For, Reduce),
                  "map_copy": (For, Copy)}
        want = shapes.get(s.kind)
        if s.kind == "copy_map_reduce" and len(parts) == 4:
            want = want + (Copy,)  # the row copied on
        if want is None or s.kind not in FUSED_KINDS:
            self.fail(f"unknown fused kind {s.kind!r}", s)
        if len(parts) != len(want) or not all(isinstance(t, w) for t, w in zip(parts, want)):
            self.fail(f"fused({s.kind!r}) holds {[type(t).__name__ for t in parts]}, expected "
                      f"{[w.__name__ for w in want]}", s)
        m = next(t for t in parts if isinstance(t, For))
        if m.kind != "parallel" or len(m.body) != 1 or not isinstance(m.body[0], Store):
            self.fail(f"fused({s.kind!r}): its map is not a Parallel loop of one store", s)
        after = parts[parts.index(m) + 1]
        src = after.src
        if src.buffer != m.body[0].buffer:
            self.fail(f"fused({s.kind!r}): the map fills {m.body[0].buffer.name} but the next "
                      f"statement reads {src.buffer.name}", s)
        if isinstance(after, Reduce) and after.dim % len(src.extent) != len(src.extent) - 1:
            self.fail(f"fused({s.kind!r}): the reduction is not along the last dimension", s)

    def node(self, node, buffers, names, stmt):
        if isinstance(node, (Region, Load, Store)):
            b = node.buffer
            if buffers.get(b.name) != b:
                self.fail(f"buffer {b.name} used but not declared (or declared differently)", stmt)
        if isinstance(node, Region) and not (len(node.start) == len(node.extent) == len(node.buffer.shape)):
            self.fail(f"region rank mismatch on {node.buffer.name}", stmt)
        if isinstance(node, Var) and node.name not in names:
            self.fail(f"variable {node.name} is not bound", stmt)
        if isinstance(node, BinOp) and node.op not in BIN_OPS:
            self.fail(f"unknown operator {node.op}", stmt)
        if isinstance(node, Call) and node.fn not in CALL_FNS:
            self.fail(f"unknown function {node.fn}", stmt)
        if isinstance(node, (Const, Cast)) and node.dtype not in DTYPES:
            self.fail(f"unknown dtype {node.dtype}", stmt)
        if isinstance(node, Reinterpret) and (
                node.dtype not in DTYPES or node.source not in DTYPES
                or itemsize(node.dtype) != itemsize(node.source)):
            self.fail(f"reinterpret from {node.source} to {node.dtype}: not two dtypes of one size",
                      stmt)
