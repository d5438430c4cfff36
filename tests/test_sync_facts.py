"""sync_facts.implied_values: the values a run-time expression can take where the conditions
check_sync's walk has taken hold (unknowns: loads of read-only inputs)."""
from tilelang_mini.ir.nodes import BinOp, Buffer, Const, Load
from tilelang_mini.semantics.ops import compile_expr
from tilelang_mini.transform.sync_facts import implied_values

N = Buffer("N", (2,), "int32", "global")
n0, n1 = Load(N, (Const(0),)), Load(N, (Const(1),))


def implied(query, facts, readonly=("N",)):
    return implied_values(query, tuple(facts), lambda i: i.value if isinstance(i, Const) else None,
                          lambda e: compile_expr(e)[0], set(readonly))


def c(op, a, b):
    return BinOp(op, a, b if not isinstance(b, int) else Const(b))


def test_guard_false_leaves_no_trip():
    trips = c("//", c("+", n0, 3), 4)
    assert max(implied(trips, [(c(">", n0, 0), False)])) <= 0
    assert max(implied(trips, [(c(">", n0, 0), True)])) >= 1


def test_two_unknowns():
    length = c("-", n1, n0)  # cu_seqlens[1] - cu_seqlens[0]
    assert implied(c(">", length, 0), [(c(">", n1, n0), True)]) == {1}


def test_large_values_are_not_missed():
    """A fact whose witnesses lie beyond the dense window (n in 1501..4999) still counts."""
    got = implied(c("-", n0, 1500), [(c("<", n0, 5000), True)])
    assert max(got) > 0


def test_unknown_inputs_give_no_answer():
    assert implied(c("//", n0, 4), [(c(">", n0, 0), False)], readonly=()) is None
    assert implied(c("//", n0, 4), []) is None
