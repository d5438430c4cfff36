"""Vector clocks of insert_sync's walk: copies, equality, and what is known after control flow
whichever path ran (the branches of an if, a loop of run-time trip count or none of its trips)."""
from __future__ import annotations


def copy_clocks(clocks: dict) -> dict:
    return {p: dict(v) for p, v in clocks.items()}


def clocks_equal(a: dict, b: dict) -> bool:
    """Equal clocks, a thread with an empty clock counting as absent."""
    return ({p: v for p, v in a.items() if v} == {p: v for p, v in b.items() if v})


def meet_clocks(states: list, ran: list, last: int) -> dict:
    """Per pipe, the vector clock known whichever branch of an if ran. A component k known on a
    path covers every instruction of its pipe that ran on that path up to the next one after k
    (the other branch's instructions did not run there); the meet is the minimum over paths of
    that reach, so a set after the if covers the producers of the branch that ran."""
    out = {}
    for p in set().union(*states):
        keys = set().union(*(st.get(p, {}) for st in states))
        clock = {}
        for k in keys:
            reach = []
            for st, done in zip(states, ran):
                v = st.get(p, {}).get(k, -1)
                later = [i for i in done.get(k, ()) if i > v]
                reach.append(min(later) - 1 if later else last)
            m = min(reach)
            if m >= 0:
                clock[k] = m
        if clock:
            out[p] = clock
    return out
