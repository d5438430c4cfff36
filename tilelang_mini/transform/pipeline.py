"""The pass list of each target, from frontend Tile IR to what its backend runs, and the driver.

`NPU_PASSES` lowers Tile IR to the NPU's lowered IR (per-core Scope blocks of pipe instructions
and flags): the numpy target runs that, and the simulator and estimate model it. `LLVM_PASSES`
branches from it: the same list, then the CPU rewrites (`CPU_PASSES`) that drop what only the
NPU's pipes need, so the llvm code generator emits one construct per statement. `passes_for`
gives a target's list.

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
from .check import check, without_noop_flags
from .check_sync import sync_expert
from .cpu_columns import infer_live_columns
from .cpu_copies import forward_copies, fuse_copy_chains
from .cpu_dual import mark_dual_copies
from .cpu_fuse import fuse_map_reduce, fuse_row_copies
from .cpu_hoist import hoist_private_work
from .cpu_layout import infer_panels
from .cpu_maps import split_maps
from .cpu_rows import fuse_rows
from .cpu_storage import widen_storage
from .cpu_zero import infer_uninit
from .expand_scaled_gemm import expand_scaled_gemm
from .options import Options
from .infer_scopes import infer_scopes
from .insert_sync import insert_sync
from .legalize import legalize
from .pipeline_stages import pipeline
from .plan_memory import plan_memory
from ..ir.analysis import is_expert
from .split_cores import split_cores


# name, pass, why. The order is the lowering order; each step's why is one line.
NPU_PASSES = (
    ("check", lambda k, o: check(without_noop_flags(k, get_chip(o.chip)) if o.pto else k,
                                 get_chip(o.chip)),
     "reject wrong shapes, dtypes, indices and what exceeds the chip at the kernel line "
     "(target=\"pto\": flags of an event id the chip lacks do nothing there, dropped)"),
    ("infer_scopes", lambda k, o: k if o.expert else infer_scopes(k),
     "shared/fragment -> L1, L0C or UB by use; one version per scope a buffer needs"),
    ("legalize", lambda k, o: k if o.expert else legalize(k, get_chip(o.chip)),
     "one pipe per copy (GM workspace where the chip has no path); gemm -> L0 loads + MMADs"),
    ("split_cores", lambda k, o: k if o.expert else split_cores(k),
     "cube program and vector program (rows split by vid) in Scope blocks"),
    ("pipeline", lambda k, o: k if o.expert else pipeline(k, get_chip(o.chip)),
     "Pipelined(num_stages): buffer versions so transfers overlap compute (serial where "
     "the versions would overflow the chip)"),
    ("plan_memory", lambda k, o: plan_memory(k, get_chip(o.chip)),
     "aligned offsets with reuse; overflow is an error at the allocation"),
    ("insert_sync", lambda k, o: sync_expert(k, get_chip(o.chip), o.auto_sync) if o.expert
     else insert_sync(k, get_chip(o.chip)),
     "flags between pipes and cores: sets early, waits late, none redundant (expert kernels: "
     "their own flags proved enough by the same happens-before analysis)"),
)

# The llvm target: after the NPU lowering, what a CPU running the program in order needs.
def _kernel_passes(*passes):
    """(name, pass, why) entries of passes that take the kernel alone, named as the function."""
    return tuple((f.__name__, lambda k, o, f=f: f(k), why) for f, why in passes)


CPU_PASSES = _kernel_passes(
    (expand_scaled_gemm,
     "a block-scaled (MX) gemm -> scaling maps + a float32 gemm (the CPU GEMM has no scales)"),
    (fuse_copy_chains,
     "copy(S, X); copy(X, Y) -> copy(S, Y) for a staging buffer X used nowhere else"),
    (forward_copies,
     "a block-wide buffer that only ever holds a copy of another is read from that one"),
    (infer_uninit,
     "buffers written whole before any read need not start zeroed (uninit=True)"),
    (infer_live_columns,
     "a gemm computes only the accumulator columns its copies out can land (columns=)"),
    (infer_panels,
     "a tile only copied into and read as gemm B is kept in GEMM micro-panels (panels=True)"),
    (hoist_private_work,
     "vector work on private buffers moves up into the previous Scope(V), next to its inputs"),
    (fuse_rows,
     "a run of row-local vector tile ops -> one loop over rows, each op on one row"),
    (fuse_map_reduce,
     "a map filling a tile + the reduction of that tile -> fused: the tile is never written"),
    (fuse_row_copies,
     "a row's copy-in + the fused map reading it, a row map + its copy-out -> one pass"),
    (split_maps,
     "a Parallel map -> maps of stores that run in one lane loop (temporaries for a store "
     "reading its target elsewhere; serial loops and uniform ifs moved out)"),
    (mark_dual_copies,
     "the cube's L0C -> UB copies write both AIVs' UB (dual=True)"),
) + (
    ("widen_storage", lambda k, o: widen_storage(k, o.native_bf16),
     "on-chip float16/float8 tiles (bfloat16 without a native bf16 dot) stored as float32 "
     "(widened=True)"),
)
LLVM_PASSES = NPU_PASSES + CPU_PASSES

PASSES = NPU_PASSES  # the lowering every target shares (simulate and estimate read its output)
_TARGET_PASSES = {"llvm": LLVM_PASSES}


def passes_for(target: str) -> tuple:
    """The pass list of `target` (name, pass, why): NPU_PASSES unless the target has its own."""
    return _TARGET_PASSES.get(target, NPU_PASSES)


def stages_for(target: str) -> tuple[str, ...]:
    return ("frontend",) + tuple(name for name, _, _ in passes_for(target))


STAGES = stages_for("numpy")


@dataclass
class Compilation:
    """The IR after each stage, in order, and the seconds each pass took."""

    stages: dict[str, Kernel] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def final(self) -> Kernel:
        """The IR after the last stage run: what the target's backend receives."""
        return list(self.stages.values())[-1]

    @property
    def lowered(self) -> Kernel:
        """The NPU lowered IR (the last stage run of NPU_PASSES): what the simulator models."""
        npu = [name for name in stages_for("numpy") if name in self.stages]
        return self.stages[npu[-1]]


def run_pipeline(kernel: Kernel, options: Options = Options(), *, stop_after: str | None = None,
                 print_after: tuple[str, ...] = (), verify: bool = False,
                 time_passes: bool = False) -> Compilation:
    from ..ir.printer import print_ir
    from ..ir.verifier import verify_kernel

    passes = passes_for(options.target)
    stages = stages_for(options.target)
    if stop_after is not None and stop_after not in stages:
        raise ValueError(f"unknown stage {stop_after!r}; stages of target {options.target!r} "
                         f"are {', '.join(stages)}")
    options = replace(options, expert=is_expert(kernel))
    out = Compilation({"frontend": kernel})
    if "all" in print_after or "frontend" in print_after:
        _show("frontend", print_ir(kernel))
    for name, run, _why in passes:
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


def run_target_passes(kernel: Kernel, options: Options, *, verify: bool = False) -> Kernel:
    """The passes `options.target` runs after the NPU lowering (none for numpy), on IR that is
    lowered already (built by hand or parsed): what its backend's `lower` expects."""
    options = replace(options, expert=is_expert(kernel))
    for name, run, _why in passes_for(options.target)[len(NPU_PASSES):]:
        kernel = run_pass(name, run, kernel, options)
        if verify:
            from ..ir.verifier import verify_kernel
            run_pass(name, lambda k, o: verify_kernel(k, name), kernel, options)
    return kernel


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
