"""Chaining the flags of a pipe pair that has more of them than event ids (insert_sync's last
retry). A load pipe that runs ahead of the vector unit cannot set an id again before the vector
unit waited for its last set, so every flag live at once needs an id of its own:

    copy(X0, t0)     # MTE2  set 0          ten loads, each read by vector work before the next
    t0 -> acc        # V     wait 0         load: ten MTE2 -> V ids, more than the 8 of a pair
    copy(X1, t1)     # MTE2  set 1
    ...

With the flags of t0 and t8 in one class (8 classes), the load of t8 waits until the vector
unit has consumed t0 (ordered by a V -> MTE2 flag), and then sets id 0 again:

    t7 -> acc        # V     wait 7; set_flag(V, MTE2, 0)
    copy(X8, t8)     # MTE2  wait_flag(V, MTE2, 0) before it; set 0 after it

The flags are dealt round-robin into n classes (in their consumers' program order). Within a
class, each producer is made to wait for the consumers of the class's other flags: a token that
each consumer writes and the other producers of its class read, so insert_sync orders them like
any other dependency (a flag the other way, V -> MTE2, primed across a loop's back edge when the
next trip's producer is the one to wait). Then each wait of a class happens before the next set
of the class, and its flags share one id (sync_events proves it on the recorded run). Fewer
classes order more: n starts at the pair's limit and is halved while the pair is still out of
ids (with the flags other chains added to it). Cross-core flags of one direction are chained
alike (the chain's flags go the other way between the cores, on ids of the same pool).
Only the retry of a kernel that is out of ids runs this: others keep their flags as they are."""
from __future__ import annotations

from ..errors import CompileError
from ..ir.happens_before import Instr


def instrs(tree) -> list:
    """The tree's instructions in program order (positions stay valid in a rebuilt tree)."""
    out = []

    def scan(items):
        for it in items:
            if isinstance(it, Instr):
                out.append(it)
            elif hasattr(it, "bodies"):
                for body in it.bodies:
                    scan(body)
    scan(tree)
    return out


def by_instr(tree, extra: dict) -> dict:
    """`extra` keyed by id(instruction) of `tree` instead of position."""
    return {id(it): extra[n] for n, it in enumerate(instrs(tree)) if n in extra} if extra else {}


def pair_of(ch) -> tuple:
    """The channels whose flags could share ids: a pipe pair's local flags, or the cross-core
    flags of one direction that wait on one pipe."""
    if ch.kind == "cross":
        return ("cross", ch.src[0]) + tuple(ch.dst)
    return (ch.src[0], ch.src[1], ch.dst[1])


def chain_tokens(chained: dict) -> dict:
    """Instruction position -> the token accesses that chain the flags of each pair in
    `chained` (pair -> [classes, (producer, consumer) positions per flag])."""
    out: dict = {}
    for pair, (classes, ends) in chained.items():
        for n, (_, consumer) in enumerate(ends):
            token = ("GM", f"\0chain {'/'.join(pair)} {n}", None)  # no buffer has this name
            out.setdefault(consumer, []).append((token, None, True))
            for m in range(n % classes, len(ends), classes):
                if m != n:
                    out.setdefault(ends[m][0], []).append((token, None, False))
    return out


def fit_event_ids(analyse, assign, first, chain: bool = True):
    """(tree, channels) whose event ids `assign` fits. `first`: insert_sync's analysis; out of
    ids, `analyse(extra)` runs it again with one flag per run of adjacent producers and of
    adjacent consumers (extra: instruction position -> added accesses), and then (`chain`) with
    the flags of each pair `assign` finds out of ids (the error's `pair` and `limit`) chained,
    in half as many classes each time the pair is out of ids again, until they fit (or one
    class does not)."""
    try:
        assign(first[1])
        return first
    except CompileError:
        pass
    tree, channels = analyse({})
    chained: dict = {}
    while True:
        try:
            assign(channels)
            return tree, channels
        except CompileError as err:
            pair = getattr(err, "pair", None)
            if not chain or pair is None:
                raise
            where = {id(it): n for n, it in enumerate(instrs(tree))}

            def ends_of(p):
                return {(where[id(ch.ends[0])], where[id(ch.ends[1])]) for ch in channels
                        if ch.kind != "barrier" and ch.ends is not None and pair_of(ch) == p}
            # Cross-core flags of every direction draw on one pool of ids: when the direction
            # that ran out is chained into one class already, another direction's flags hold
            # the ids (the one with the most flags is chained next).
            pairs = [pair]
            if pair[0] == "cross":
                others = {pair_of(ch) for ch in channels if ch.kind == "cross"} - {pair}
                pairs += sorted(others, key=lambda p: (-len(ends_of(p)), p))
            for p in pairs:
                ends = ends_of(p)
                classes, old = chained.get(p, (err.limit, []))
                if ends <= set(old):   # the same flags as last time: fewer classes
                    classes //= 2
                if classes:
                    break
            else:
                raise
            # flags the other chains made join the pair's, in their consumers' order
            chained[p] = [classes, sorted(ends | set(old), key=lambda e: (e[1], e[0]))]
        tree, channels = analyse(chain_tokens(chained))
