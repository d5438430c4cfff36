"""The `library` fuzz family's own machinery: a library call whose result is off is a mismatch
on every step, an illegal call must be refused by tilelang_mini's own check (a Python unpacking
error or an IndexError is `internal`, a call that runs is `undiagnosed`), and every kind of
legal and illegal call generates sources that compile."""
from __future__ import annotations

import numpy as np

from tilelang_mini.testing.fuzz.draw import RandomDraw
from tilelang_mini.testing.fuzz.gen_library import LEGAL, library_case
from tilelang_mini.testing.fuzz.gen_library2 import LEGAL2
from tilelang_mini.testing.fuzz.gen_library_bad import BAD
from tilelang_mini.testing.fuzz.library_call import judge_illegal, run_library


def _legal(kind, seed, chip="ascend910b"):
    d = RandomDraw(f"{kind}:{seed}")
    name, tensors, body, ref, tol, feats, sim = {**LEGAL, **LEGAL2}[kind][0](d)
    return library_case(seed, name, tensors, body, ref, tol, feats, chip, sim)


def test_every_kind_generates_compilable_sources():
    for kind in {**LEGAL, **LEGAL2}:
        for seed in range(3):
            case = _legal(kind, f"c{seed}")
            compile(case.source, kind, "exec")
            compile(case.reference, kind, "exec")
    for kind, (gen, whats) in BAD.items():
        for what in whats:
            tensors, body = gen(RandomDraw(f"{kind}:{what}"), what)
            case = library_case("b", f"bad_{kind}", tensors, body, [], {}, set(), "ascend950",
                                illegal=what)
            compile(case.source, what, "exec")


def test_a_perturbed_library_result_is_a_mismatch(tmp_path):
    case = _legal("hc_prenorm", "m1")
    assert {o for o, _ in run_library(case, lambda **_: None, str(tmp_path)).values()} == {"ok"}
    case.source = case.source.replace("def call(", "def _call(") + (
        "\n\ndef call(*args, **kwargs):\n"
        "    return [np.asarray(o, np.float64) * 1.001 for o in _call(*args, **kwargs)]\n")
    result = run_library(case, lambda **_: None, str(tmp_path))
    assert result["numpy"][0] == result["llvm"][0] == "mismatch", result


def _raised(fn):
    try:
        fn()
    except Exception as err:  # noqa: BLE001 - the test looks at what was raised
        return err
    raise AssertionError("nothing raised")


def test_illegal_calls_are_judged_by_who_raised_what():
    from tilelang_mini.kernels import deep_gemm as dg

    def unpack():
        m, n = np.zeros(3).shape  # noqa: F841 - the error is the point
    own = _raised(lambda: dg.bf16_gemm_nt(np.zeros((2, 4)), np.zeros((3, 5)),
                                          np.zeros((2, 3), np.float32), target="numpy"))
    assert judge_illegal(own, "k")[0] == "ok"
    assert judge_illegal(_raised(unpack), "rank")[0] == "internal"
    assert judge_illegal(_raised(lambda: np.zeros(2)[5]), "index")[0] == "internal"
    assert judge_illegal(_raised(lambda: np.ones(2).reshape(3)), "numpy")[0] == "internal"
    assert judge_illegal(None, "ran")[0] == "undiagnosed"
