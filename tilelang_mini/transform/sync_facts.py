"""What check_sync's walk knows about run-time values: the conditions of the data-dependent ifs
it has taken (a branch choice of the scenario, or the branch it is inside) imply values of
later conditions and loop trip counts that read the same data.

A hand-synchronised kernel often guards a prefetch and the loop that consumes it by two
expressions of one run-time value (causal_conv1d: `if num_tokens > 0: ...set_flag(MTE2, V, 0)`
then `for i in serial((num_tokens + 3) // 4): ...wait_flag(MTE2, V, i % 2)`). The walk takes
the `if` both ways (one scenario each); in the scenario where it is false the loop cannot run,
and walking it anyway reported a wait nothing sets. Here the facts decide it:

    facts  [(num_tokens > 0, False)]            unknowns: the GM values the expressions load
    query  (num_tokens + 3) // 4                 (cu_seqlens[1], cu_seqlens[0] at this block)
    ->     {-1, 0}                               the trip counts the facts allow: no trip

The unknowns are loads from buffers the kernel never writes whose indices the walk knows;
each ranges over a dense window of integers around 0 (wider for fewer unknowns) and a sparse
set of larger magnitudes (near the powers of two up to 2^24 and three times them, where sizes
and thresholds sit), every combination that satisfies the facts is kept, and the query's
values over those are the answer (None when an expression reads anything else, there are more
than three unknowns, or no combination satisfies the facts)."""
from __future__ import annotations

import numpy as np

from ..ir.nodes import Const, Load, Var, transform, walk

class Infeasible(Exception):
    """The walk's branch choices leave a run-time loop no trip: not a run the walk models."""


WINDOW = {1: 1024, 2: 64, 3: 8}  # half-width of each unknown's dense range, by their number


def _values(count: int):
    """The values one of `count` unknowns takes: dense near 0, then near powers of two."""
    dense = WINDOW[count]
    near = (-1, 0, 1) if count == 1 else (0,)
    far = {m * s * (2 ** k) + d for k in range(25) for m in ((1, 3) if count < 3 else (1,))
           for s in (1, -1) for d in near}
    return np.array(sorted(set(range(-dense, dense + 1)) | far), dtype=np.int64)


def no_trip(values) -> None:
    """Raise Infeasible when a run-time loop's possible trip counts are all <= 0."""
    if values is not None and max(values) <= 0:
        raise Infeasible


def truth(values):
    """True/False when every possible value of a condition agrees, else None."""
    return None if values is None or len({v != 0 for v in values}) != 1 else values.pop() != 0


def readonly_params(kernel) -> set:
    """Names of the kernel's parameters no statement writes."""
    from ..ir.analysis import written_names
    return {p.name for p in kernel.params} - {b for st in kernel.body for b in written_names(st)}


def bind(e, env: dict):
    """`e` with the walk's loop and grid variables replaced by their values."""
    def sub(node):
        if isinstance(node, Var) and node.name in env and isinstance(env[node.name], int):
            return Const(env[node.name], node.dtype)
        return node
    return transform(e, sub)


def implied_values(e, facts: tuple, value, fn, readonly) -> set | None:
    """The values `e` can take where every (condition, truth) of `facts` holds; `e` and the
    facts are bound (`bind`); `value(index)` evaluates an index or gives None, `fn(expr)` is
    the compiled closure of an expression, `readonly` the names of buffers nothing writes."""
    unknowns: dict = {}

    def abstract(x):
        def sub(node):
            if not isinstance(node, Load):
                return node
            if node.buffer.name not in readonly:
                raise LookupError
            idx = tuple(value(i) for i in node.indices)
            if any(i is None for i in idx):
                raise LookupError
            key = (node.buffer.name, idx)
            if key not in unknowns:
                unknowns[key] = Var(f"_fact{len(unknowns)}", node.buffer.dtype)
            return unknowns[key]
        return transform(x, sub)

    def names(x):
        return {n.name for n in walk(x) if isinstance(n, Var)}

    try:
        query = abstract(e)
        if not unknowns:
            return None
        wanted = names(query)
        kept, rest = [], []
        for cond, truth in facts:  # the facts that share unknowns with the query, transitively
            try:
                rest.append((abstract(cond), truth))
            except LookupError:  # a fact on values the kernel writes: not used
                pass
        grew = True
        while grew:
            grew = False
            for item in list(rest):
                if names(item[0]) & wanted:
                    kept.append(item)
                    rest.remove(item)
                    wanted |= names(item[0])
                    grew = True
    except LookupError:
        return None
    used = [v for v in unknowns.values() if v.name in wanted]
    if not kept or len(used) > 3 or any(names(c) - wanted for c, _ in kept):
        return None
    axes = np.meshgrid(*[_values(len(used))] * len(used), indexing="ij")
    scope = {v.name: a.reshape(-1) for v, a in zip(used, axes)}
    from ..semantics.ops import Env, Fault
    try:
        with np.errstate(all="ignore"):
            where = Env(scope, {})
            mask = np.ones(axes[0].size, dtype=bool)
            for cond, truth in kept:
                mask &= np.broadcast_to(np.asarray(fn(cond)(where)) != 0, mask.shape) == truth
            if not mask.any():
                return None
            got = np.broadcast_to(np.asarray(fn(query)(where)), mask.shape)[mask]
    except (Fault, TypeError, ValueError, OverflowError, ZeroDivisionError, KeyError):
        return None
    if not np.issubdtype(got.dtype, np.integer) and got.dtype != bool:
        return None
    return {int(v) for v in np.unique(got)}
