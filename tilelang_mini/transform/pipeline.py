"""The one ordered list of passes from frontend Tile IR to lowered IR, and its driver.

Each pass is a pure function `(Kernel, Options) -> Kernel`. The driver records the IR after every
stage (so `kernel.get_ir(stage)` can show it), can stop after a pass, print after passes
(`print_after`: names or "all"), verify between passes and time each one; its caller passes those
choices in (runtime/kernel.py reads them from runtime/config.py, the one reader of the environment).
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field, replace

from ..arch import get_chip
from ..errors import internal_error
from ..ir.nodes import Kernel
from .check import check
from .check_sync import sync_expert
from .options import Options
from .infer_scopes import infer_scopes
from .insert_sync import insert_sync
from .legalize import legalize
from .pipeline_stages import pipeline
from .plan_memory import plan_memory
from .split_cores import is_expert, split_cores


# name, pass, why. The order is the lowering order; each step's why is one line.
PASSES = (
    ("check", lambda k, o: check(k, get_chip(o.chip)),
     "reject wrong shapes, dtypes, indices and what exceeds the chip at the kernel line"),
    ("infer_scopes", lambda k, o: k if o.expert else infer_scopes(k),
     "shared/fragment -> L1, L0C or UB by use; one version per scope a buffer needs"),
    ("legalize", lambda k, o: k if o.expert else legalize(k, get_chip(o.chip)),
     "one pipe per copy (GM workspace where the chip has no path); gemm -> L0 loads + MMADs"),
    ("split_cores", lambda k, o: k if o.expert else split_cores(k),
     "cube program and vector program (rows split by vid) in Scope blocks"),
    ("pipeline", lambda k, o: k if o.expert else pipeline(k),
     "Pipelined(num_stages): buffer versions so transfers overlap compute"),
    ("plan_memory", lambda k, o: plan_memory(k, get_chip(o.chip)),
     "aligned offsets with reuse; overflow is an error at the allocation"),
    ("insert_sync", lambda k, o: (sync_expert if o.expert else insert_sync)(k, get_chip(o.chip)),
     "flags between pipes and cores: sets early, waits late, none redundant (expert kernels: "
     "their own flags proved enough by the same happens-before analysis)"),
)

STAGES = ("frontend",) + tuple(name for name, _, _ in PASSES)


@dataclass
class Compilation:
    """The IR after each stage, in order, and the seconds each pass took."""

    stages: dict[str, Kernel] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def final(self) -> Kernel:
        return list(self.stages.values())[-1]


def run_pipeline(kernel: Kernel, options: Options = Options(), *, stop_after: str | None = None,
                 print_after: tuple[str, ...] = (), verify: bool = False,
                 time_passes: bool = False) -> Compilation:
    from ..ir.printer import print_ir
    from ..ir.verifier import verify_kernel

    if stop_after is not None and stop_after not in STAGES:
        raise ValueError(f"unknown stage {stop_after!r}; stages are {', '.join(STAGES)}")
    options = replace(options, expert=is_expert(kernel))
    out = Compilation({"frontend": kernel})
    if "all" in print_after or "frontend" in print_after:
        _show("frontend", print_ir(kernel))
    for name, run, _why in PASSES:
        if stop_after == "frontend":
            break
        start = time.perf_counter()
        kernel = run_pass(name, run, kernel, options)
        out.seconds[name] = time.perf_counter() - start
        out.stages[name] = kernel
        if verify:
            run_pass(name, lambda k, o: verify_kernel(k, name), kernel, options)
        if "all" in print_after or name in print_after:
            _show(name, print_ir(kernel))
        if name == stop_after:
            break
    if time_passes:
        for name, s in out.seconds.items():
            print(f"[tilelang_mini] {name:14s} {s * 1e3:8.2f} ms", file=sys.stderr)
    return out


def run_pass(name: str, fn, kernel: Kernel, options: Options):
    """`fn(kernel, options)`; an exception that is not one of ours becomes an
    InternalCompilerError naming the pass (a RecursionError: a located CompileError)."""
    try:
        return fn(kernel, options)
    except Exception as err:  # noqa: BLE001 -- classified by internal_error
        loc = kernel.loc
        if isinstance(err, RecursionError):  # most likely the deepest expression's statement
            from .check import deepest_statement
            loc = getattr(deepest_statement(kernel), "loc", None) or loc
        raise internal_error(err, f"the '{name}' pass", loc) from err


def _show(stage: str, text: str) -> None:
    print(f"# ---- IR after {stage} ----\n{text}", file=sys.stderr)
