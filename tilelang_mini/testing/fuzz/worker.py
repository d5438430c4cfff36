"""The fuzz worker: a separate process that runs cases and reports each step's outcome.

Protocol (one JSON object per line): the runner writes `{"id": n, "case": {...}}` to stdin; the
worker answers `{"id": n, "step": name}` before each step (so a crash or hang is blamed on the
step that was running) and `{"id": n, "result": {step: [outcome, detail], ...}, "extra": {...}}`
at the end. Anything the compiler prints goes to stderr, never into the protocol.

Steps of a valid case: `numpy`, `llvm` (run on that target), `sim-910b`, `sim-950` (the
simulator on each chip); an invalid kernel has one step, `compile`; an IR-mutation case runs
the mutated text on the same four steps and compares them with each other.
"""
from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
import tempfile
import traceback

import numpy as np

from ...runtime import config
from .case import Case, compare, make_inputs, run_reference

STEPS = ("numpy", "llvm", "sim-910b", "sim-950")
CHIPS = {"sim-910b": "ascend910b", "sim-950": "ascend950"}


class _Protocol:
    def __init__(self):
        fd = os.dup(1)
        os.dup2(2, 1)  # prints (Python or native) during a case go to stderr
        sys.stdout = sys.stderr
        self.out = os.fdopen(fd, "w", buffering=1)

    def send(self, **msg):
        self.out.write(json.dumps(msg) + "\n")
        self.out.flush()


def classify(err: BaseException, kernel_file: str | None) -> tuple[str, str]:
    """(outcome, detail) of an exception raised while compiling or running a case."""
    from tilelang_mini.errors import CompileError, SimulationError, TileLangMiniError
    name = type(err).__name__
    msg = str(err).split("\n")[0][:700]
    if not isinstance(err, TileLangMiniError):
        tb = traceback.extract_tb(err.__traceback__)
        where = f" at {os.path.basename(tb[-1].filename)}:{tb[-1].lineno}" if tb else ""
        return "internal", f"{name}{where}: {msg}"
    if "internal" in name.lower() or err.message.lower().startswith("internal"):
        return "internal", f"{name}: {msg}"
    if isinstance(err, SimulationError):
        return "race", f"{name}: {msg}"
    loc = err.loc
    if not loc.line:
        return "unlocated", f"{name}: {msg}"
    if kernel_file and os.path.basename(loc.file) != os.path.basename(kernel_file):
        return "unlocated", f"{name} located at {loc} (not the kernel file): {msg}"
    if isinstance(err, CompileError):
        return "rejected", f"{name} at line {loc.line}: {msg}"
    return "fault", f"{name} at line {loc.line}: {msg}"


def base_chip(case: Case) -> str:
    """The chip the numpy and llvm steps compile for: ascend950 when the cube multiplies FP8
    (the 910b cube has none; its simulate step then expects a located rejection)."""
    return "ascend950" if any(f.startswith("in_float8") for f in case.features) else "ascend910b"


def _load_kernel(case: Case, tmpdir: str):
    safe = re.sub(r"\W", "_", f"{case.family}_{case.seed}")
    path = os.path.join(tmpdir, f"fuzz_{safe}.py")
    with open(path, "w") as f:
        f.write(case.source)
    spec = importlib.util.spec_from_file_location(f"fuzz_{safe}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main, path


class _Eager:
    """An eager `@jit` kernel function (its body holds `with T.Kernel`) as the steps call it:
    compiled for one target and chip, called with the inputs, simulated."""

    def __init__(self, fn, target, chip):
        import tilelang_mini
        self.jit = tilelang_mini.jit(fn, target=target, chip=chip)

    def __call__(self, *args):
        return self.jit(*args)

    def simulate(self, *args):
        kernel, call_args = self.jit.kernel_for(*args)
        return kernel.simulate(*call_args)


def _builder(main):
    """`build(out_idx=, target=, chip=)` of a case's `main`: a prim_func is compiled, an eager
    function wrapped in `@jit` (its outputs are its `T.empty` tensors)."""
    import tilelang_mini
    from tilelang_mini.runtime.eager import is_eager_function
    if is_eager_function(main):
        return lambda out_idx, target, chip: _Eager(main, target, chip)
    return lambda **kw: tilelang_mini.compile(main, **kw)


def _check_outputs(case: Case, outs, want, scales, factor=1.0) -> tuple[str, str]:
    outs = outs if isinstance(outs, tuple) else (outs,)
    names = [t.name for t in case.tensors if t.output]
    for name, got, w, s in zip(names, outs, want, scales):
        rtol, atol = case.tol.get(name, (1e-4, 1e-4))
        ok, why = compare(got, w, s, rtol * factor, atol * factor)
        if not ok:
            return "mismatch", f"{name}: {why}"
    return "ok", ""


def _run_step(case: Case, step: str, compiled: dict, args: list, build):
    """Run `step` (a target or a simulated chip) on `args`; `build(out_idx=, target=, chip=)`
    compiles, once per (target, chip) in `compiled`."""
    target = "llvm" if step == "llvm" else "numpy"
    chip = CHIPS.get(step, base_chip(case))
    key = (target, chip)
    if key not in compiled:
        ws = {"workspace_idx": case.workspace_idx} if case.workspace_idx else {}
        compiled[key] = build(out_idx=case.out_idx, target=target, chip=chip, **ws)
    if step.startswith("sim"):
        return compiled[key].simulate(*args)[0]
    return compiled[key](*args)


def run_valid(case: Case, send, tmpdir) -> dict:
    from tilelang_mini.errors import CompileError
    result = {}
    send(step="frontend")
    try:
        main, path = _load_kernel(case, tmpdir)
    except CompileError as err:
        return {s: classify(err, None) for s in STEPS}
    except Exception as err:  # noqa: BLE001 - the outcome is what we report
        return {s: classify(err, None) for s in STEPS}
    inputs = make_inputs(case)
    args = [inputs[t.name] for t in case.tensors if not t.output and not t.workspace]
    want, scales = run_reference(case, inputs)
    must_reject = False
    if case.call:
        from .badargs import MUST_REJECT, bad_args
        args = bad_args(case.call["kind"], args, case.call["index"])
        must_reject = case.call["kind"] in MUST_REJECT
    compiled = {}
    result.pop("frontend", None)
    for step in STEPS:
        send(step=step)
        try:
            outs = _run_step(case, step, compiled, _copies(args), _builder(main))
            result[step] = _check_outputs(case, outs, want, scales)
            if case.broken and result[step][0] == "ok":
                result[step] = (("undiagnosed", f"without {case.broken} the simulator found no race")
                                if step.startswith("sim") else
                                ("late", f"without {case.broken}: compiled and ran (program order "
                                         "hides the race; only simulate reports it)"))
            if must_reject:
                result[step] = ("undiagnosed", f"{case.call['kind']} argument {case.call['index']}"
                                f" accepted ({result[step][0]})")
        except Exception as err:  # noqa: BLE001
            from tilelang_mini.errors import ArgumentError
            if case.call and isinstance(err, ArgumentError):
                result[step] = ("rejected", f"ArgumentError: {str(err).splitlines()[0][:300]}")
            else:
                result[step] = classify(err, path)
    return result


def _copies(args):
    """Fresh copies of array arguments that keep their layout (a kernel may write into them)."""
    out = []
    for a in args:
        if isinstance(a, np.ndarray) and a.flags.writeable:
            b = np.empty_like(a)  # keeps C/Fortran order; views get a fresh contiguous copy
            b[...] = a
            out.append(a if not a.flags.c_contiguous and not a.flags.f_contiguous else b)
        else:
            out.append(a)
    return out


def run_invalid(case: Case, send, tmpdir) -> dict:
    import tilelang_mini
    from tilelang_mini.errors import CompileError
    send(step="compile")
    lines = case.expect_error["lines"]
    try:
        main, path = _load_kernel(case, tmpdir)
        tilelang_mini.compile(main, out_idx=case.out_idx, target="numpy")
    except CompileError as err:
        outcome, detail = classify(err, None)
        if outcome != "rejected":
            return {"compile": (outcome, detail)}
        if not err.loc.file.endswith(".py") or "fuzz_" not in os.path.basename(err.loc.file):
            return {"compile": ("mislocated", f"error in {err.loc.file}, not the kernel: {detail}")}
        if err.loc.line not in lines:
            return {"compile": ("mislocated", f"expected line {lines[0]}: {detail}")}
        return {"compile": ("ok", detail)}
    except Exception as err:  # noqa: BLE001
        return {"compile": classify(err, None)}
    return {"compile": ("undiagnosed", f"{case.expect_error['what']} at line {lines[0]} compiled")}


def run_mutation(case: Case, send, tmpdir) -> tuple[dict, dict]:
    """Compile the base kernel, mutate its IR after `stage`, run the text on every step."""
    import tilelang_mini
    from tilelang_mini.errors import ArgumentError, TileLangMiniError
    from .draw import RandomDraw
    from .mutate import mutate
    send(step="base")
    try:
        main, _ = _load_kernel(case, tmpdir)
        base = tilelang_mini.compile(main, out_idx=case.out_idx, target="numpy",
                                     chip=base_chip(case))
        text = base.get_ir(case.mutation["stage"])
    except Exception as err:  # noqa: BLE001 - the valid families report these
        return {"base": ("skipped", "base kernel: " + classify(err, None)[1])}, {}
    mutated, what = mutate(text, RandomDraw(case.mutation["seed"]))
    extra = {"mutation": what, "text": mutated}
    send(info=extra)  # before running it: a crash or hang still shows what was run
    inputs = make_inputs(case)
    args = [inputs[t.name] for t in case.tensors if not t.output]
    result, outputs = {}, {}
    # The unmutated text first: parse_ir(print_ir(ir)) compiles and computes the reference.
    send(step="roundtrip")
    try:
        want, scales = run_reference(case, inputs)
        again = tilelang_mini.compile_ir(text, out_idx=case.out_idx, target="numpy",
                                         chip=base_chip(case))
        result["roundtrip"] = _check_outputs(case, again(*_copies(args)), want, scales)
    except Exception as err:  # noqa: BLE001
        result["roundtrip"] = classify(err, None)
    compiled = {}
    for step in STEPS:
        send(step=step)
        try:
            outs = _run_step(case, step, compiled, [a.copy() for a in args],
                             lambda **kw: tilelang_mini.compile_ir(mutated, **kw))
            outputs[step] = outs if isinstance(outs, tuple) else (outs,)
            result[step] = ("ran", "")
        except ArgumentError as err:
            result[step] = ("rejected", f"ArgumentError: {str(err).splitlines()[0][:200]}")
        except TileLangMiniError as err:
            result[step] = classify(err, None)  # located: in the IR text or the kernel file
        except Exception as err:  # noqa: BLE001
            result[step] = classify(err, None)
    # The steps that ran must agree with each other (the first that ran is the yardstick).
    ran = [s for s in STEPS if result[s][0] == "ran"]  # (roundtrip is judged on its own)
    for step in STEPS:
        if result[step][0] != "ran":
            continue
        ref_step = ran[0]
        outcome = ("ok", "")
        if step != ref_step:
            for name, got, want in zip([t.name for t in case.tensors if t.output],
                                       outputs[step], outputs[ref_step]):
                w = np.asarray(want).astype(np.float64)
                rtol, atol = case.tol.get(name, (1e-4, 1e-4))
                ok, why = compare(got, w, None, rtol * 4, atol * 4)
                if not ok:
                    outcome = ("mismatch", f"{name} differs from {ref_step}: {why}")
                    break
        result[step] = outcome
    failed_to_run = [s for s in STEPS if result[s][0] in ("rejected", "fault")]
    if ran and failed_to_run:  # one target ran what another rejected: they disagree
        for s in failed_to_run:
            if s.startswith("sim") and result[s][0] == "rejected":
                continue  # the other chip may rightly not fit or not allow the lowered code
            result[s] = ("mismatch", f"{', '.join(ran)} ran it, {s}: {result[s][1]}")
    return result, extra


def _limit_memory(gib: float = 6.0) -> None:
    """Cap the address space: a kernel asking for tens of GiB gets a MemoryError (an outcome)
    instead of swapping the machine."""
    try:
        import resource
        limit = int(gib * 2 ** 30)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (ImportError, ValueError, OSError):
        pass


def main() -> int:
    _limit_memory()
    proto = _Protocol()
    config.set_setting("TILELANG_MINI_VERIFY", "1", keep=True)
    tmpdir = tempfile.mkdtemp(prefix="worker-")  # under the runner's root (TMPDIR)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 1000))
    for line in sys.stdin:
        msg = json.loads(line)
        case = Case.from_json(json.dumps(msg["case"]))
        extra = {}
        threads = "1" if case.mutation else msg.get("threads", "2")
        config.set_setting("TILELANG_MINI_NUM_THREADS", threads)
        try:
            if case.scenario:
                from .scenarios import run_scenario
                result = run_scenario(case, lambda **m: proto.send(id=msg["id"], **m),
                                      timeout=0.75 * msg.get("timeout", 120.0))
            elif case.library:
                from .library_call import run_library
                result = run_library(case, lambda **m: proto.send(id=msg["id"], **m), tmpdir)
            elif case.expect_error:
                result = run_invalid(case, lambda **m: proto.send(id=msg["id"], **m), tmpdir)
            elif case.mutation:
                result, extra = run_mutation(case, lambda **m: proto.send(id=msg["id"], **m), tmpdir)
            else:
                result = run_valid(case, lambda **m: proto.send(id=msg["id"], **m), tmpdir)
        except Exception as err:  # noqa: BLE001 - a bug of the fuzzer itself: say so
            result = {"fuzzer": ("internal", "fuzzer error: " + "".join(
                traceback.format_exception(type(err), err, err.__traceback__))[-1500:])}
        proto.send(id=msg["id"], result={k: list(v) for k, v in result.items()}, extra=extra)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
