"""The roofline of every kernel launch the examples and the kernel library make, on both chip
presets: no point above its roof (issue #12's check of the estimate).

    python benchmarks/roofs.py [--small] [--no-mains] [--match REGEX] [-v]

Launches checked, each estimated on ascend910b and ascend950:

* every example's own kernel (a `@jit` factory defined in the example) at its DEFAULT_ARGS;
* every library call an example's `main()` makes at its DEFAULT_ARGS, and every estimate that
  `main()` prints itself (the model-sized shapes), recorded by running the mains on the numpy
  target (`--no-mains` skips them: they take a minute);
* every row of benchmarks/kernel_estimates.py (each library function at the DeepSeek-sized shape
  of docs/kernels.md's table; `--small`: the small shapes the tests use).

For each launch the roofs are taken from the chip preset, not from the estimate's own fields
(docs/performance_model.md, "The model's parameters"):

* compute: achieved FLOP/s <= the cube's peak for the fastest dtype among the launch's MMADs
  (the chip's bf16 peak x arch.costs.CUBE_RATE), and <= its compulsory bytes' intensity x the
  HBM bandwidth (`gm_tbps`): min(compute roof, bandwidth roof x arithmetic intensity);
* bandwidth: the bytes the estimate sends to the HBM per second <= `gm_tbps`, every argument
  once (the compulsory bytes, counted here from the kernel's parameters) per second <=
  `gm_tbps`, and the bytes its GM transfers move per second <= `l2_tbps`;
* the GM bytes the launch's transfers move, counted here from its lowered IR with the loop trip
  counts of its representative blocks' streams, are the estimate's L2 traffic: a transfer that
  touches GM without being counted would carry bytes no roof sees (checked by statement kind:
  every statement of the kernel that reads or writes a GM buffer must be a GM <-> on-chip copy,
  a scalar access of the scalar unit, or a flag).

Prints one line per launch over 0.9 of a roof or failing a check, and a summary; exit status 1
if any point is above its roof. tests/test_roofs.py runs the same checks at small shapes.
"""
from __future__ import annotations

import argparse
import importlib
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHIPS = ("ascend910b", "ascend950")
SLACK = 1 + 1e-9


def launch_ratios(est, kernel_ir, chip_name) -> dict:
    """{roof: achieved / roof} of one launch's estimate `est` of the lowered `kernel_ir` on
    `chip_name`; every value <= 1 when the launch is under its roofs."""
    from tilelang_mini.arch import get_chip
    from tilelang_mini.arch.costs import CUBE_RATE
    from tilelang_mini.ir import dtypes
    from tilelang_mini.ir.nodes import Gemm, walk_statements
    chip = get_chip(chip_name)
    hbm, l2 = chip.costs.gm_tbps * 1e12, chip.costs.l2_tbps * 1e12
    t = est.time_s
    compulsory = sum(p.numel * dtypes.itemsize(p.dtype) for p in kernel_ir.params)
    out = {"HBM bytes/s": est.hbm_bytes / t / hbm,
           "compulsory bytes/s": compulsory / t / hbm,
           "L2 bytes/s": est.traffic_bytes / t / l2}
    if est.flops:
        rates = [CUBE_RATE.get(s.a.buffer.dtype, 1.0) for s in walk_statements(kernel_ir.body)
                 if isinstance(s, Gemm)]
        peak = chip.peak_bf16_tflops * 1e12 * max(rates, default=1.0)
        achieved = est.flops / t
        out["FLOP/s vs compute roof"] = achieved / peak
        out["FLOP/s vs HBM roof x intensity"] = achieved / (est.flops / compulsory * hbm)
        for pt in est.roofline_points():      # what the roofline PNG draws
            out[f"plotted {pt.level} point"] = pt.tflops / pt.roof_tflops
    return out


def uncounted_gm_statements(kernel_ir) -> set:
    """Kinds of the statements that touch a GM buffer in a way the memory model does not count
    (anything but a GM <-> on-chip copy, a scalar Store/Load of the scalar unit, a flag)."""
    from tilelang_mini.ir.analysis import GM_SCOPES
    from tilelang_mini.ir.nodes import Copy, For, If, Load, Region, Scope, Store, walk

    def gm(node):
        return any(isinstance(x, (Region, Load)) and x.buffer.scope in GM_SCOPES
                   for x in walk(node))

    out = set()

    def visit(body):
        for s in body:
            if isinstance(s, Scope):
                visit(s.body)
            elif isinstance(s, For):
                visit(s.body)
            elif isinstance(s, If):
                visit(s.then_body)
                visit(s.else_body)
            elif isinstance(s, Copy):
                if (s.src.buffer.scope in GM_SCOPES) == (s.dst.buffer.scope in GM_SCOPES) and \
                        s.src.buffer.scope in GM_SCOPES:
                    out.add("Copy GM -> GM")
            elif isinstance(s, Store):
                continue          # the scalar unit's own element stores (a few bytes each)
            elif gm(s):
                out.add(type(s).__name__)
    visit(kernel_ir.body)
    return out


# ------------------------------------------------------------------------------ the launches


class Recorder:
    """Records every (kernel IR, chip, Estimate) that tilelang_mini.sim.estimate.estimate_kernel
    makes while active."""

    def __init__(self):
        self.seen = []

    def __enter__(self):
        from tilelang_mini.sim import estimate as mod
        self._mod, self._orig = mod, mod.estimate_kernel

        def recording(kernel, chip, args=None):
            est = self._orig(kernel, chip, args)
            self.seen.append((kernel, chip.name, est))
            return est
        mod.estimate_kernel = recording
        return self

    def __exit__(self, *exc):
        self._mod.estimate_kernel = self._orig


def example_modules():
    """(name, module) of every example."""
    if str(ROOT / "examples") not in sys.path:
        sys.path.insert(0, str(ROOT / "examples"))
    return [(p.stem, importlib.import_module(p.stem))
            for p in sorted((ROOT / "examples").glob("[a-z]*.py"))]


def own_factories(mod):
    return [o for o in vars(mod).values() if type(o).__name__ == "JITFactory"
            and o.factory.__module__ == mod.__name__]


def example_launches(run_mains=True, match=""):
    """(label, kernel IR, chip, Estimate) of every example's launches (see the docstring)."""
    import contextlib
    import io
    import tilelang_mini
    from tilelang_mini.errors import TileLangMiniError
    from tilelang_mini.kernels._core import LibraryFunction
    for name, mod in example_modules():
        if not re.search(match, name):
            continue
        for f in own_factories(mod):
            for chip in CHIPS:
                k = tilelang_mini.compile(f.factory(*mod.DEFAULT_ARGS), out_idx=f.out_idx,
                                          chip=chip)
                with Recorder() as rec:
                    k.estimate()
                for kir, c, est in rec.seen:
                    yield f"{name} {tuple(mod.DEFAULT_ARGS)}", kir, c, est
        if own_factories(mod) or not run_mains:
            continue
        calls = []
        orig = LibraryFunction.__call__

        def recording_call(self, *args, **kwargs):
            calls.append((self, args, {k: v for k, v in kwargs.items()
                                       if k not in ("target", "chip")}))
            return orig(self, *args, **kwargs)
        LibraryFunction.__call__ = recording_call
        try:
            with Recorder() as rec, contextlib.redirect_stdout(io.StringIO()):
                mod.main(["--target", "numpy", "--show-ir", "none", "--no-simulate"])
        finally:
            LibraryFunction.__call__ = orig
        for kir, c, est in rec.seen:
            yield f"{name}: estimate printed by main ({kir.name})", kir, c, est
        for f, args, kwargs in calls:
            for chip in CHIPS:
                with Recorder() as rec:
                    try:
                        f.estimate(*args, chip=chip, **kwargs)
                    except (ValueError, TileLangMiniError):
                        continue            # a call the chip rejects
                for kir, c, est in rec.seen:
                    yield f"{name}: {f.__name__} at DEFAULT_ARGS", kir, c, est


def library_launches(small=False, match=""):
    """(label, kernel IR, chip, Estimate) of every launch of kernel_estimates.py's rows."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import kernel_estimates as ke
    from tilelang_mini.errors import TileLangMiniError
    for name, shape, f, args, kwargs, chips in ke.rows(small=small):
        if not re.search(match, name):
            continue
        for chip in chips:
            with Recorder() as rec:
                try:
                    f.estimate(*args, chip=chip, **kwargs)
                except (ValueError, TileLangMiniError):
                    continue
            for kir, c, est in rec.seen:
                yield f"library {name} {shape}", kir, c, est


def check(launches, verbose=False, out=sys.stdout):
    """Check every launch; returns (launches, worst ratio, [failures])."""
    n, worst, bad = 0, 0.0, []
    for label, kir, chip, est in launches:
        n += 1
        ratios = launch_ratios(est, kir, chip)
        extra = uncounted_gm_statements(kir)
        top = max(ratios, key=ratios.get)
        worst = max(worst, ratios[top])
        line = (f"{label} [{kir.name}] on {chip}: {est.time_us:.1f} us, highest {top} at "
                f"{ratios[top]:.3f} of its roof")
        if ratios[top] > SLACK or extra:
            bad.append(line + (f"; GM touched by uncounted {sorted(extra)}" if extra else ""))
            print("ABOVE " + bad[-1], file=out, flush=True)
        elif verbose or ratios[top] > 0.9:
            print("      " + line, file=out, flush=True)
    return n, worst, bad


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--small", action="store_true", help="the library rows at small shapes")
    p.add_argument("--no-mains", action="store_true", help="skip running the library examples")
    p.add_argument("--match", default="", help="only examples / library rows matching REGEX")
    p.add_argument("-v", "--verbose", action="store_true", help="one line per launch")
    args = p.parse_args(argv)
    import itertools
    launches = itertools.chain(example_launches(not args.no_mains, args.match),
                               library_launches(args.small, args.match))
    n, worst, bad = check(launches, args.verbose)
    print(f"{n} launches on {', '.join(CHIPS)}: highest point at {worst:.3f} of its roof; "
          f"{len(bad)} above a roof or with uncounted GM traffic")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
