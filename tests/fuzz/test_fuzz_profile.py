"""The fuzzer's bounded CI profile: a fixed set of generated cases from every family, run on
numpy, llvm and the simulator on both chips in worker processes, against independent float64
references. Fails on any outcome that is not accepted and not a KNOWN_BUGS entry
(tilelang_mini/testing/fuzz/known_bugs.py); prints the table and every known-bug match.

The long profile is `python -m tilelang_mini.testing.fuzz --minutes N` (docs/testing.md)."""
from __future__ import annotations

from tilelang_mini.testing.fuzz import make_case, run_cases, summarize
from tilelang_mini.testing.fuzz.runner import report_failure

# Cases per family (seeds ci-0, ci-1, ...): about a minute on two cores.
PROFILE = {"gemm": 7, "elementwise": 6, "reduce": 5, "rownorm": 5, "cube_vector": 6,
           "vector_cube": 3, "cvc_chain": 3, "sparse_gemm": 3, "gather": 4, "grouped_gemm": 3, "dyn_bounds": 4,
           "control": 5, "args": 6, "expert": 3, "expert_broken": 3, "invalid": 12, "tile_nd": 3,
           "mutation": 12, "select": 4, "atomic": 2, "developer": 3, "dialect": 2, "flow": 4,
           "int4": 3, "fitting": 2, "cv_combine": 3, "simt": 2, "views": 2, "launches": 1,
           "eager": 2, "scatter": 2, "tileops": 1, "misc": 1, "bits": 2, "padvar": 4, "conv": 1,
           "gemmsp": 1, "library": 3}


def test_fuzz_ci_profile():
    cases = [make_case(fam, f"ci-{i}") for fam, n in PROFILE.items() for i in range(n)]
    results = run_cases(cases, jobs=2, timeout=180)
    print(summarize(results))
    for r in results:
        for step, outcome, bug, detail in r.known():
            print(f"known bug {bug}: {r.case.family}:{r.case.seed} {step}: {outcome}: {detail[:160]}")
    assert len(results) == len(cases)
    failing = [r for r in results if r.failures()]
    assert not failing, "\n\n".join(report_failure(r) for r in failing[:5])
    # The profile checks something: in each family, cases ran and matched the reference (or,
    # for invalid kernels, were diagnosed at their line) on every step, unless every case of
    # the family hit a known bug; and most cases pass outright.
    clean = [r for r in results if not r.known()
             and all(o in ("ok", "rejected", "race", "fault") for o, _ in r.steps.values())]
    for fam in PROFILE:
        fam_results = [r for r in results if r.case.family == fam]
        assert [r for r in clean if r.case.family == fam] or all(r.known() for r in fam_results), \
            f"no {fam} case passed on every step: the profile would check nothing"
    assert len([r for r in clean if all(o == "ok" for o, _ in r.steps.values())]) > len(cases) // 2
