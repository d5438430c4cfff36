"""Where insert_sync's channels go: the set after the producer, the wait before the consumer,
the loop to prime and drain, whether the wait follows the set at once (a producer inside an if
branch), and the single set or wait that covers a run of producers or consumers in one list."""
from __future__ import annotations

from ..ir.happens_before import Instr, Occ
from ..ir.nodes import For, Var, walk


def in_loop_branch(prev: Occ, loop) -> bool:
    """Does producer `prev` sit in a branch of an if inside `loop` (which the channel primes)?
    Then the trip whose set the drain after the loop waits for may not have taken it."""
    if loop is None:
        return False
    levels = [n for n, (block, _) in enumerate(prev.ancestors) if block is loop]
    return any(isinstance(tag, tuple) for _, tag in prev.ancestors[levels[0] + 1:]) \
        if levels else False


def meet(a: dict | None, b: dict | None) -> dict:
    """The clock known whichever of two sets a wait pairs with: the smaller component each."""
    a, b = a or {}, b or {}
    return {k: min(a[k], b[k]) for k in a.keys() & b.keys()}


def set_level(a: Occ, set_at) -> int:
    """The ancestor level of the if branch that holds a set placed at `set_at` (the producer
    itself or the block around it at some level) with its wait right after it."""
    return next((j - 1 for j, (block, _) in enumerate(a.ancestors) if block is set_at),
                len(a.ancestors) - 1)


def position(item) -> int:
    return next(n for n, x in enumerate(item.parent) if x is item)


def last_producer(set_at, wait_at, producer: Instr):
    """The last instruction on the producer's pipe between `set_at` and `wait_at`, when both sit
    in one list: a single set there covers every producer in between."""
    siblings = getattr(set_at, "parent", None)
    if siblings is None or getattr(wait_at, "parent", None) is not siblings:
        return set_at
    i = next(n for n, x in enumerate(siblings) if x is set_at)
    j = next(n for n, x in enumerate(siblings) if x is wait_at)
    for x in reversed(siblings[i:j]):
        if isinstance(x, Instr) and (x.core, x.pipe) == (producer.core, producer.pipe):
            return x
    return set_at


def first_consumer(wait_at, consumer: Instr):
    """The first of the instructions on the consumer's pipe that run up to `wait_at` in one
    list with nothing else between them: a single wait before it covers all of them (waiting
    earlier on that in-order pipe cannot deadlock: no other pipe's instruction, so no producer,
    sits inside the run)."""
    siblings = getattr(wait_at, "parent", None)
    if siblings is None or not isinstance(wait_at, Instr):
        return wait_at
    j = next(n for n, x in enumerate(siblings) if x is wait_at)
    while (j and isinstance(siblings[j - 1], Instr)
           and (siblings[j - 1].core, siblings[j - 1].pipe) == (consumer.core, consumer.pipe)):
        j -= 1
    return siblings[j]


def uniform(ancestor) -> bool:
    """A branch of an if that every core decides alike: not one on the vector core index (split
    _cores' `if vid == 0`, which only AIV 0 takes; sync around it stays outside it)."""
    block, tag = ancestor
    return isinstance(tag, tuple) and not any(
        isinstance(n, Var) and n.name == "vid" for n in walk(block.stmt.cond))


def other_branch_uses(ancestor, a: Occ, b: Occ) -> bool:
    """Does a branch of the if other than `ancestor`'s run anything on a's or b's pipe? Then a
    wait in b's branch could pair with a set the other path never made."""
    block, (_, taken) = ancestor
    pipes = {(a.item.core, a.item.pipe), (b.item.core, b.item.pipe)}

    def uses(items):
        for it in items:
            if isinstance(it, Instr) and (it.core, it.pipe) in pipes:
                return True
            if not isinstance(it, Instr) and hasattr(it, "bodies") and any(
                    uses(body) for body in it.bodies):
                return True
        return False
    return any(uses(body) for n, body in enumerate(block.bodies) if n != taken)


def placement(a: Occ, b: Occ):
    """Where the set (after) and the wait (before) go, the loop to prime, if any, and whether
    the wait follows the set at once. Flags must balance on every path through an if: a
    producer inside a branch that does not hold the consumer (in this iteration) gets both in
    the branch, the wait right after the set (a set after the if would also run when the
    branch did not, its pipe then free to set the flag again before the last set was waited
    for; a wait in the consumer's branch of a later iteration could consume the prime instead
    of a set of a branch that did not run). The consumer's in-order pipe carries the order on."""
    d = 0
    while (d < len(a.ancestors) and d < len(b.ancestors)
           and a.ancestors[d] == b.ancestors[d]):
        d += 1
    primed = None
    if (d < len(a.ancestors) and d < len(b.ancestors)
            and a.ancestors[d][0] is b.ancestors[d][0]):  # same loop, earlier iteration
        primed = a.ancestors[d][0]
        # Primed around the outermost loop the dependency recurs in: a flag primed inside an
        # outer loop would be set again by the next outer trip's prime with nothing ordering
        # the last drain's wait before it (the flag set twice); around the outer loop, every
        # set but the first follows a consumer that waited.
        for j in range(d - 1, -1, -1):
            if isinstance(a.ancestors[j][0].stmt, For):
                primed = a.ancestors[j][0]
            elif not uniform(a.ancestors[j]):
                break
        d += 1
        # Both in one branch of an if in the loop body, whose other branch runs nothing on
        # either pipe: set and wait stay in that branch (primed before the loop, drained after).
        while (d < len(a.ancestors) and d < len(b.ancestors) and a.ancestors[d] == b.ancestors[d]
               and uniform(a.ancestors[d]) and not other_branch_uses(a.ancestors[d], a, b)):
            d += 1
    # The producer in a branch the consumer is not in, also one inside a loop nested here (an
    # if in `for j` in `for i`, the consumer in the next i trip or after the loop): a set after
    # the enclosing block would run in trips where the branch did not, with no producer before
    # it on its pipe to order it after the wait of the previous set (the flag set twice). A
    # branch below a loop of the producer's own only where that point repeats (inside a loop
    # both share): else the set after the producer's loop runs once, after every producer, and
    # in the branch it would run once per trip with nothing ordering the consumer's wait before
    # the next set.
    repeats = any(isinstance(block.stmt, For) for block, _ in a.ancestors[:d])
    e = next((e for e in range(d, len(a.ancestors) if repeats else min(d + 1, len(a.ancestors)))
              if uniform(a.ancestors[e])), None)
    if e is not None:
        set_at = a.ancestors[e + 1][0] if e + 1 < len(a.ancestors) else a.item
        return set_at, set_at, None, True
    set_at = a.ancestors[d][0] if d < len(a.ancestors) else a.item
    wait_at = b.ancestors[d][0] if d < len(b.ancestors) else b.item
    return set_at, wait_at, primed, False
