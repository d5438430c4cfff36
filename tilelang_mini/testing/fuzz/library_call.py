"""Running a `library` case (gen_library.py): its source defines `call(target, chip, sim,
**inputs) -> [outputs]`, which calls one public function of `tilelang_mini.kernels` through
`run_call` below. Steps: `numpy` and `llvm` (the function called with `target=`), and, for small
cases, `sim` (each launch of the call replayed on the pipe-level simulator of the case's chip).

A legal call must match the case's float64 reference. An illegal one (`case.library["illegal"]`
says what is wrong) must raise a ValueError or a TileLangMiniError with a message, raised by
tilelang_mini's own code: an exception from NumPy or Python internals (a failed unpacking, an
IndexError, a TypeError deep in the compiler) is reported as `internal`, a call that runs as
`undiagnosed`."""
from __future__ import annotations

import os
import re
import traceback

import numpy as np

from .case import Case, make_inputs, run_reference

LIBRARY_STEPS = ("numpy", "llvm", "sim")
PACKAGE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# messages of Python's own errors that can surface as a ValueError/TypeError without a check
UNCLEAR = re.compile(r"values to unpack|could not broadcast|cannot reshape|operands could not|"
                     r"invalid literal|object of type|not subscriptable|takes \d+ positional")


def run_call(fn, args, kwargs, target, chip, sim):
    """`fn(*args, **kwargs)` on `target`; with `sim`, every launch of the call on the simulator
    instead (the outputs written in place, as the call does), then the call's result."""
    if not sim:
        return fn(*args, target=target, chip=chip, **kwargs)
    from tilelang_mini.kernels._core import Context, from_numpy_like
    plan = fn.plan(Context("numpy", chip), *args, **kwargs)
    for kernel, arrays in plan.launches:
        kernel.simulate(*arrays)
    for dst, src in plan.writeback:
        dst[...] = from_numpy_like(src, dst)
    return plan.result


def _load(case: Case, tmpdir: str):
    path = os.path.join(tmpdir, "fuzz_" + re.sub(r"\W", "_", f"{case.family}_{case.seed}") + ".py")
    with open(path, "w") as f:
        f.write(case.source)
    ns: dict = {"__file__": path, "__name__": "fuzz_library_case"}
    exec(compile(case.source, path, "exec"), ns)
    return ns["call"]


def _own_error(err: BaseException) -> bool:
    """Raised by tilelang_mini's code (the innermost frame is in the package), not by NumPy or
    the interpreter on the library's behalf."""
    tb = traceback.extract_tb(err.__traceback__)
    return bool(tb) and os.path.abspath(tb[-1].filename).startswith(PACKAGE + os.sep)


def judge_illegal(err: BaseException | None, what: str) -> tuple[str, str]:
    from tilelang_mini.errors import TileLangMiniError
    from .worker import classify
    if err is None:
        return "undiagnosed", f"{what}: the call ran"
    msg = str(err).split("\n")[0][:300]
    name = type(err).__name__
    if isinstance(err, TileLangMiniError):
        outcome, detail = classify(err, None)
        if outcome in ("internal", "race"):
            return outcome, detail
        return "ok", f"{what}: {name}: {msg}"
    if isinstance(err, ValueError) and msg and _own_error(err) and not UNCLEAR.search(msg):
        return "ok", f"{what}: {name}: {msg}"
    tb = traceback.extract_tb(err.__traceback__)
    where = f" at {os.path.basename(tb[-1].filename)}:{tb[-1].lineno}" if tb else ""
    return "internal", f"{what}: unclear {name}{where}: {msg}"


def run_library(case: Case, send, tmpdir) -> dict:
    from .worker import _check_outputs, _copies, classify
    lib = case.library
    send(step="frontend")
    call = _load(case, tmpdir)
    inputs = make_inputs(case)
    illegal = lib.get("illegal")
    want = scales = None
    if not illegal:
        want, scales = run_reference(case, inputs)
    result = {}
    steps = [s for s in LIBRARY_STEPS if s != "sim" or (lib.get("sim") and not illegal)]
    for step in steps:
        send(step=step)
        args = dict(zip(inputs, _copies(list(inputs.values()))))
        target = "numpy" if step == "sim" else step
        try:
            outs = call(target, lib["chip"], step == "sim", **args)
        except Exception as err:  # noqa: BLE001 - the outcome is what we report
            result[step] = judge_illegal(err, illegal) if illegal else classify(err, None)
            continue
        if illegal:
            result[step] = judge_illegal(None, illegal)
        else:
            result[step] = _check_outputs(case, tuple(np.asarray(o) for o in outs), want, scales)
    return result
