"""The fuzzer's own machinery: crashes and hangs in a worker are outcomes, a wrong number is a
mismatch, a mistaken kernel must be diagnosed at its line, generated kernels parse, and the
Hypothesis strategies produce valid and invalid kernels."""
from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings

from tilelang_mini.testing.fuzz import make_case, run_cases
from tilelang_mini.testing.fuzz.case import compare, make_inputs, run_reference
from tilelang_mini.testing.fuzz.draw import RandomDraw
from tilelang_mini.frontend.eager import SymbolicPrimFunc
from tilelang_mini.testing.fuzz.families import FAMILIES, VALID
from tilelang_mini.testing.fuzz.mutate import OPS, mutate
from tilelang_mini.testing.fuzz.strategies import invalid_cases, valid_cases

SETTINGS = settings(max_examples=12, derandomize=True, deadline=None, database=None,
                    suppress_health_check=list(HealthCheck))


def _with_source(case, source):
    case.source = source
    return case


def test_crash_and_hang_are_outcomes_and_the_worker_recovers():
    crash = _with_source(make_case("elementwise", "m0"), "import os\nos.abort()\n")
    hang = _with_source(make_case("elementwise", "m1"), "while True:\n    pass\n")
    fine = make_case("reduce", "m2")
    results = {r.case.seed: r for r in run_cases([crash, hang, fine], jobs=1, timeout=20)}
    assert results["m0"].steps["frontend"][0] == "crash", results["m0"].steps
    assert "abort" in results["m0"].steps["frontend"][1].lower() or "-6" in results["m0"].steps["frontend"][1]
    assert results["m1"].steps["frontend"][0] == "hang", results["m1"].steps
    assert results["m0"].failures() and results["m1"].failures()
    assert all(o == "ok" for o, _ in results["m2"].steps.values()), results["m2"].steps


def test_a_wrong_result_is_a_mismatch():
    case = make_case("gemm", "m3")
    inputs = make_inputs(case)
    want, scales = run_reference(case, inputs)
    rtol, atol = case.tol["C"]
    assert compare(want[0], want[0], scales[0], rtol, atol)[0]
    wrong = want[0].copy()
    wrong.flat[wrong.size // 2] += 0.05 * max(1.0, np.abs(want[0]).max())
    assert not compare(wrong, want[0], scales[0], rtol, atol)[0]
    inf = np.array([np.inf, -np.inf, np.nan, 1.0])
    assert compare(inf, inf, None, rtol, atol)[0]
    assert not compare(inf[::-1].copy(), inf, None, rtol, atol)[0]


def test_mistaken_kernel_must_be_diagnosed_at_its_line():
    case = make_case("invalid", "m4")
    (ok,) = run_cases([case], jobs=1, timeout=60)
    assert ok.steps["compile"][0] == "ok", ok.steps
    case.expect_error = dict(case.expect_error, lines=[1])  # claim another line
    (moved,) = run_cases([case], jobs=1, timeout=60)
    assert moved.steps["compile"][0] == "mislocated", moved.steps


def test_every_family_generates_parseable_python():
    for fam in FAMILIES:
        for seed in range(5):
            case = make_case(fam, f"p{seed}")
            compile(case.source, f"{fam}:{seed}", "exec")
            if case.reference:
                compile(case.reference, f"ref {fam}:{seed}", "exec")


def test_cases_are_replayable():
    for fam in FAMILIES:
        a, b = make_case(fam, 7), make_case(fam, 7)
        assert a.to_json() == b.to_json()


def test_mutation_changes_the_text():
    text = "\n".join(["@prim_func()", "def main(A: Tensor((4, 8), \"float32\")):",
                      "    with Kernel(2) as bx:", "        fill(A[bx * 2 +: 2, 0 +: 8], 1.0)"]) + "\n"
    for i, op in enumerate(OPS):
        new, what = mutate(text, RandomDraw(f"t{i}"), op)
        assert new != text and what, op


def _frontend(case, tmp_path):
    import importlib.util
    path = tmp_path / f"k_{abs(hash(case.seed))}.py"
    path.write_text(case.source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main


@SETTINGS
@given(case=valid_cases())
def test_strategy_valid_kernels_parse(case, tmp_path_factory):
    """The frontend parses a generated kernel, or names one of its lines (a KNOWN_BUGS entry
    such as T.serial(start, stop) is judged by the runner, not here)."""
    from tilelang_mini import CompileError
    assert case.family in VALID
    if case.library:  # a library call (library_call.py), not a kernel file: test_fuzz_library.py
        return
    try:
        prim = _frontend(case, tmp_path_factory.mktemp("v"))
        if isinstance(prim, SymbolicPrimFunc):  # T.dynamic shapes: parsed per binding
            prim = prim.specialize(_symbol_values(prim, case))
    except CompileError as err:
        assert 1 <= err.loc.line <= case.source.count("\n"), str(err)
        return
    from tilelang_mini.runtime.eager import is_eager_function
    if is_eager_function(prim):  # eager @jit: parsed per call (T.const / T.empty tensors)
        return
    params = [p.name for p in prim.ir.params]  # T.alloc_global workspaces follow the tensors
    assert params[:len(params) - len(prim.hidden)] == [t.name for t in case.tensors]


def _symbol_values(prim, case) -> dict:
    """The shape symbols of `prim`'s tensor annotations bound from the case's tensor shapes, and
    its scalar parameters (`rows: T.int32`, specialised per value too) to a value they take."""
    import inspect
    from tilelang_mini.language.symbols import Symbol
    values = {}
    for t, p in zip(case.tensors, inspect.signature(prim.fn).parameters.values()):
        if not t.shape:  # a scalar parameter
            values[p.name] = int(t.hi) if t.dtype == "int32" else float(t.hi)
            continue
        for d, n in zip(p.annotation.shape, t.shape):
            if isinstance(d, Symbol):
                values[d.name] = n
    assert values, "a symbolic kernel binds a shape symbol"
    return values


@SETTINGS
@given(case=invalid_cases())
def test_strategy_invalid_kernels_name_a_line(case):
    lines = case.source.count("\n")
    assert all(1 <= n <= lines for n in case.expect_error["lines"])


def test_scenario_phases_report_hangs_crashes_and_answers(tmp_path):
    import os
    import sys
    import time
    from tilelang_mini.testing.fuzz.scenarios import _phase
    env = dict(os.environ)

    def run(code, timeout=20):
        return _phase("t", "{}", env, str(tmp_path), timeout, [sys.executable, "-c", code])

    assert run("import time; time.sleep(60)", timeout=2)[0] == "hang"
    assert run("import os; os.abort()")[0] == "crash"
    assert run("import sys; sys.exit(2)")[0] == "crash"  # no answer
    assert run('print(\'{"outcome": "mismatch", "detail": "x"}\')') == ("mismatch", "t: x")
    # a forked child left behind is killed with the phase's session
    pidfile = tmp_path / "child"
    code = (f"import os, time\npid = os.fork()\nif pid == 0:\n    time.sleep(120)\n    os._exit(0)\n"
            f"open({str(pidfile)!r}, 'w').write(str(pid))\n"
            'print(\'{"outcome": "ok", "detail": ""}\')')
    assert run(code)[0] == "ok"
    pid = int(pidfile.read_text())

    def alive():
        try:
            return open(f"/proc/{pid}/stat").read().split()[2] not in "ZX"
        except FileNotFoundError:
            return False

    for _ in range(100):  # SIGKILL is delivered at once; the state follows within moments
        if not alive():
            break
        time.sleep(0.05)
    assert not alive()


def test_every_cache_corruption_applies(tmp_path):
    from tilelang_mini.testing.fuzz.scenarios import CORRUPTIONS, corrupt
    for how in CORRUPTIONS:
        cache = tmp_path / how / "cache"
        (cache / "llvm").mkdir(parents=True)
        for name in ("a", "b"):
            (cache / "llvm" / f"{name}.bin").write_bytes(name.encode() * 100)
        done = corrupt(str(cache), {"corruptions": [how], "seed": 1})
        assert done.startswith(how), (how, done)


def test_process_thread_and_cache_scenarios_run_a_kernel():
    from tilelang_mini.testing.fuzz.scenarios import CORRUPTIONS
    fork = make_case("scenario", "s0")
    fork.scenario = {"kind": "fork", "threads": "2", "calls": 1, "busy": True, "child_calls": 2,
                     "child_compiles": True}
    cache = make_case("scenario", "s1")
    cache.scenario = {"kind": "cache", "threads": "2", "corruptions": list(CORRUPTIONS[:6]),
                      "seed": 3, "others": [make_case("gemm", "s2").to_json()]}
    results = run_cases([fork, cache], jobs=1, timeout=240)
    for r in results:
        assert not r.failures() and all(o == "ok" for o, _ in r.steps.values()), r.steps
    steps = {s for r in results for s in r.steps}
    assert {"fork", "cache-fill", "cache-corrupt", "cache-load", "cache-reload"} <= steps
