"""Event ids for insert_sync's channels: ids per pipe pair (0 .. chip.event_ids - 1) and cross-core
flag ids per block (0 .. chip.cross_flags - 1), shared between channels only where the recorded
run proves it safe; more live channels than ids is a located CompileError."""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..arch import Chip
from ..errors import CompileError
from .sync_chain import pair_of

if TYPE_CHECKING:  # (insert_sync imports this module)
    from .insert_sync import Channel


def assign_events(channels, chip: Chip, kernel, taken: dict | None = None):
    """Event ids per pipe pair, cross-core flag ids per block. Two channels share an id only if
    they wait on the same pipe (for cross-core ids: a wait takes any set of its id), and,
    in the recorded run, their sets and waits alternate, each wait pairs with the set of its own
    channel, and every wait happens before the next set of that id: a pipe that runs ahead
    could otherwise set a flag that is still set. `taken`: (src pipe, dst pipe) -> ids the
    kernel's own flags use, left out."""
    groups: dict = {}
    for ch in channels:
        if ch.kind == "barrier":
            continue
        key = (ch.src[0], ch.src[1], ch.dst[1]) if ch.kind == "flag" else "cross"
        groups.setdefault(key, []).append(ch)
    for key, chans in groups.items():
        limit = chip.event_ids if key != "cross" else chip.cross_flags
        free = list(range(limit))
        if key != "cross" and taken:
            free = [i for i in free if i not in taken.get(key[1:], ())]
            limit = len(free)
        ids: list[list[Channel]] = []
        uses: list = []  # per id: its members' sets and waits in order (None: cannot be shared)
        for ch in chans:
            # A cross-core id is shared only between channels of one direction (C -> V or
            # V -> C) whose uses never overlap, like a local event id, and that wait on the same
            # pipe: a wait takes whichever set of its id has arrived, so two waits on different
            # pipes (unordered with each other) could take each other's set.
            shared = None
            for i, members in enumerate(ids):
                if members[0].src[0] == ch.src[0] and members[0].dst == ch.dst:
                    both = _share(members, uses[i], ch)
                    if both is not None:
                        shared = i
                        break
            if shared is None:
                if len(ids) >= limit:
                    what = ("cross-core flags" if key == "cross"
                            else f"event ids for {key[1]} -> {key[2]}")
                    if key != "cross" and taken and taken.get(key[1:]):
                        raise CompileError(
                            f"plan_memory placed buffers on common bytes that {key[1]} and "
                            f"{key[2]} use in turn, and the kernel's own flags leave no "
                            f"{key[1]} -> {key[2]} event id free to order them on "
                            f"{chip.name}; free an event id, or order the two uses with your "
                            f"own flag", ch.loc or kernel.loc)
                    err = CompileError(f"the kernel needs more than {limit} {what} live at once "
                                       f"on {chip.name}; use fewer stages or smaller loops",
                                       ch.loc or kernel.loc)
                    # which pipe pair ran out (sync_chain chains its flags)
                    err.pair, err.limit = pair_of(ch), limit
                    raise err
                ids.append([ch])
                uses.append(_uses_of(ch))
                ch.event = free[len(ids) - 1]
            else:
                ids[shared].append(ch)
                uses[shared] = both
                ch.event = free[shared]


def _uses_of(ch: Channel, n: int = 0):
    """(sets, waits, alternating) of one channel as member n, or None when unrecorded."""
    if ch.sets is None or ch.waits is None or len(ch.sets) != len(ch.waits):
        return None
    sets = [(pos, n, vc) for pos, vc in ch.sets]
    waits = [(pos, n) for pos in ch.waits]
    return sets, waits, n == 0 and _alternate(sets, waits, [ch], 0)


def _share(members, uses, ch: Channel):
    """The uses of `members` + [ch] on one id when they can share it, else None. Two channels
    share an id only if, in the recorded run, their sets and waits alternate, each wait pairs
    with the set of its own channel, and every wait happens before the next set of that id."""
    mine = _uses_of(ch, len(members))
    if uses is None or mine is None:
        return None
    (sets, waits, ok), (new_sets, new_waits, _) = uses, mine
    group = members + [ch]
    if ok and sets and new_sets and new_sets[0][0] > sets[-1][0] and new_waits[0][0] > waits[-1][0]:
        # all of ch's uses come after the members' (which alternate): check from the last pair on
        sets, waits = sets + new_sets, waits + new_waits
        start = len(uses[0]) - 1
    else:
        sets, waits, start = sorted(sets + new_sets), sorted(waits + new_waits), 0
    return (sets, waits, True) if _alternate(sets, waits, group, start) else None


def _alternate(sets, waits, members, start: int) -> bool:
    for k in range(start, min(len(sets), len(waits))):
        (s_pos, s_ch, _), (w_pos, w_ch) = sets[k], waits[k]
        if s_ch != w_ch or w_pos < s_pos:
            return False
        if k + 1 < len(sets):
            next_vc = sets[k + 1][2]
            if next_vc.get(members[w_ch].dst, -1) < w_pos:  # the wait may follow the next set
                return False
    return True
