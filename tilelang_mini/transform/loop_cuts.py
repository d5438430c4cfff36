"""How check_sync and check_blocks cut long loops: the trips their walks visit, so that modular
indices, ping-pong stages and event ids meet in the same phase as in the full run."""
from __future__ import annotations

from math import lcm

from ..ir.nodes import BinOp, Const, For, Kernel, SetCrossFlag, WaitCrossFlag, walk, walk_statements


MAX_PERIOD = 16  # longest repeat of modular indices/event ids kept exact when loops are cut


def trips(loop: For, n, cap, period=None) -> list:
    """The iterations of a serial loop the walk visits: all of them (`cap` None), else the
    first and the last few with a multiple of the loop's period (or `period`) skipped between
    them, so that ping-pong stages and event ids (`(k + 1) % 2`) meet in the same phase as in
    the full run and the last trip's conditions (`k < n - 1`) hold as they do on the hardware:

        n = 9, period 2, cap 2  ->  [0, 1, 6, 7, 8]     (skips 4 trips: two whole periods)"""
    if n is None:
        return range(2)
    if cap is None:
        return range(n)
    period = period or loop_period(loop)
    head = max(cap, min(period, MAX_PERIOD))
    tail = head + (n - 2 * head) % max(1, min(period, MAX_PERIOD))
    if head + tail >= n:
        return range(n)
    return list(range(head)) + list(range(n - tail, n))


def loop_period(loop: For) -> int:
    """Trips after which every `x % m` in the loop repeats (m times the divisors of the
    `x // d` inside x): their lcm, 1 without any."""
    out = 1
    for node in walk(loop):
        if const_op(node, "%"):
            m = node.b.value
            for sub in walk(node.a):
                if const_op(sub, "//"):
                    m *= sub.b.value
            out = lcm(out, m)
            if out > MAX_PERIOD:
                break
    return out


def cross_period(kernel: Kernel) -> dict:
    """id(loop) -> the one period of every loop holding cross-core flags (the lcm of theirs):
    the cube's loop and the vector cores' loop that exchange flags are cut alike, so a cut walk
    sets and waits as many flags on each side (a cube loop with `cid % 8` in its copies and a
    vector loop without any would otherwise visit 8 and 4 of 8 trips: a false deadlock)."""
    loops = [s for s in walk_statements(kernel.body) if isinstance(s, For) and any(
        isinstance(x, (SetCrossFlag, WaitCrossFlag)) for x in walk_statements(s.body))]
    common = 1
    for loop in loops:
        common = min(lcm(common, loop_period(loop)), MAX_PERIOD + 1)
    return {id(loop): common for loop in loops}


def const_op(node, op: str) -> bool:
    return (isinstance(node, BinOp) and node.op == op and isinstance(node.b, Const)
            and type(node.b.value) is int and node.b.value > 0)
