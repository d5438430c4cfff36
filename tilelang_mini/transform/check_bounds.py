"""check_bounds: element indices and region starts on on-chip tiles that provably leave the
tile, from the grid and loop extents -> located errors (part of the `check` pass).

An index is out of bounds for sure when it is an expression of grid and loop variables whose
extremes the variables reach (`attained_interval`) and one extreme lies outside the tile. An
`if` narrows the variables its condition compares with constants (`tx < 64`, `i >= 8`, and
the negation in `else`); under any other condition (one that reads data, or compares
expressions) the variables bound outside it are no longer known to take all their values, so
only the loops inside it are used. Loads in the branches of a select and in the right operand
of `and` / `or` may not be evaluated, and are left alone. What cannot be proved here is checked
when the kernel runs (a KernelRuntimeError at the same line).

    s = T.alloc_shared((64,), f32)               # threads=128
    s[tx] = X[tx]
    -> k.py:9:13: index tx in dim 0 of 's' takes values 0..127 (tx in 0..127); 's' has shape
       (64,), so expected 0..63
"""
from __future__ import annotations

from ..errors import CompileError
from ..ir.analysis import GM_SCOPES, attained_interval
from ..ir.nodes import (
    BinOp, Call, Const, For, If, Kernel, Load, Region, Store, Var, body_fields, walk, walk_own,
)
from ..ir.printer import print_expr

_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}
_NEGATE = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}


def bound_problems(kernel: Kernel) -> list[CompileError]:
    """The located errors of the provably out-of-bounds on-chip accesses of `kernel`."""
    if kernel.is_npu:
        ranges = {kernel.grid_vars[0]: (0, kernel.grid[0] - 1)}
        if len(kernel.grid_vars) > 1:
            ranges[kernel.grid_vars[1]] = (0, 1)
    else:
        ranges = {v: (0, n - 1) for v, n in zip(kernel.grid_vars, kernel.grid)
                  if type(n) is int and n > 0}
    errors: list[CompileError] = []
    _check_body(kernel.body, ranges, errors)
    return errors


def _check_body(body, ranges, errors) -> None:
    for s in body:
        for message in _statement_problems(s, ranges):
            errors.append(CompileError(message, s.loc))
        if isinstance(s, For):
            inner = dict(ranges)
            for v, e in zip(s.vars, s.extents):
                if isinstance(e, Const) and type(e.value) is int and e.value > 0:
                    inner[v] = (0, e.value - 1)
                else:  # a run-time trip count (or none): not known to reach any value
                    inner.pop(v, None)
            _check_body(s.body, inner, errors)
        elif isinstance(s, If):
            for branch, cond in ((s.then_body, s.cond), (s.else_body, Call("not", (s.cond,)))):
                narrowed = _narrowed(ranges, cond)
                if narrowed is not False:  # False: the branch never runs
                    _check_body(branch, narrowed, errors)
        else:
            for name in body_fields(s):
                _check_body(getattr(s, name), ranges, errors)


def _narrowed(ranges, cond):
    """`ranges` where `cond` holds: narrowed by comparisons of a variable with a constant
    (joined by `and`), False when they leave a variable no value, and only the variables
    bound inside the `if` when the condition is anything else."""
    bounds = _comparisons(cond)
    if bounds is None:
        return {}
    out = dict(ranges)
    for name, op, c in bounds:
        if name not in out:
            continue
        lo, hi = out[name]
        if op == "!=":
            if lo == hi == c:
                return False
            if c not in (lo, hi):
                if lo < c < hi:  # a hole: the variable no longer takes a box of values
                    out.pop(name)
                continue
            lo, hi = (lo + 1, hi) if c == lo else (lo, hi - 1)
        else:
            lo = max(lo, {">": c + 1, ">=": c, "==": c}.get(op, lo))
            hi = min(hi, {"<": c - 1, "<=": c, "==": c}.get(op, hi))
        if lo > hi:
            return False
        out[name] = (lo, hi)
    return out


def _comparisons(cond, negate=False):
    """[(variable, op, constant)] all of which `cond` (or its negation) means, or None."""
    if isinstance(cond, Call) and cond.fn == "not":
        return _comparisons(cond.args[0], not negate)
    if isinstance(cond, BinOp) and cond.op == ("or" if negate else "and"):
        a, b = _comparisons(cond.a, negate), _comparisons(cond.b, negate)
        return None if a is None or b is None else a + b
    if isinstance(cond, BinOp) and cond.op in _FLIP:
        op, a, b = cond.op, cond.a, cond.b
        if isinstance(a, Const):
            op, a, b = _FLIP[op], b, a
        if isinstance(a, Var) and isinstance(b, Const) and type(b.value) is int:
            return [(a.name, _NEGATE[op] if negate else op, b.value)]
    return None


def _statement_problems(s, ranges):
    """The provably out-of-bounds on-chip element accesses and regions of statement `s`
    (its own expressions and regions, not its nested statements)."""
    for node in _evaluated(s):
        if isinstance(node, (Load, Store)) and node.buffer.scope not in GM_SCOPES:
            for d, (ix, n) in enumerate(zip(node.indices, node.buffer.shape)):
                yield from _index_problem(ranges, ix, d, n, node.buffer, 1)
        elif isinstance(node, Region) and node.buffer.scope not in GM_SCOPES:
            for d, (ix, e, n) in enumerate(zip(node.start, node.extent, node.buffer.shape)):
                if type(e) is int and e <= n:  # a longer extent is check's own error
                    yield from _index_problem(ranges, ix, d, n, node.buffer, e)


def _index_problem(ranges, ix, d, n, buf, extent):
    if isinstance(ix, Const) or type(n) is not int:  # constants: check's own errors
        return
    iv = attained_interval(ranges, ix)
    if iv is None or (iv[0] >= 0 and iv[1] + extent <= n):
        return
    names = sorted({v.name for v in walk(ix) if isinstance(v, Var)})
    over = ", ".join(f"{v} in {ranges[v][0]}..{ranges[v][1]}" for v in names)
    if extent == 1:
        yield (f"index {print_expr(ix)} in dim {d} of '{buf.name}' takes values "
               f"{iv[0]}..{iv[1]} ({over}); '{buf.name}' has shape {buf.shape}, so expected "
               f"0..{n - 1}")
    else:
        yield (f"region {print_expr(ix)} +: {extent} in dim {d} of '{buf.name}' covers "
               f"[{iv[0]}, {iv[1] + extent}) ({over}); '{buf.name}' has shape {buf.shape}, so "
               f"expected starts in 0..{n - extent}")


def _evaluated(s):
    """The nodes of statement `s` that are evaluated whenever it runs: not those in the
    branches of a select or the right operand of `and` / `or`."""
    skip = set()
    for node in walk_own(s):
        if id(node) in skip:
            continue
        if isinstance(node, Call) and node.fn == "select":
            skip.update(id(x) for a in node.args[1:] for x in walk(a))
        elif isinstance(node, BinOp) and node.op in ("and", "or"):
            skip.update(id(x) for x in walk(node.b))
        yield node
