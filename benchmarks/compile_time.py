"""Compile time: cold compile of every example on both targets, where the time goes, and how
the passes scale with kernel size (design.md section 7: every example under 0.5 s cold;
issue 12: insert_sync and split_cores linear in the kernel's size).

    python benchmarks/compile_time.py [cold] [scale] [--runs N] [--examples gemm prenorm ...]

cold: in one process (imports done, LLVM loaded, one warm-up compile), with the disk cache off,
each example's kernels at their default shapes (a library example: the llvm kernels its main()
compiles) are traced and compiled `--runs` times for target numpy (the pass list) and llvm (the
pass list, code generation, LLVM optimisation, object emission, MCJIT loading); the median wall
and CPU times are printed with PASS/MISS against 0.5 s, and for llvm where the time went.

scale: a kernel whose body is a copy-map-copy step unrolled 8/16/32/64 times (the statement
count grows with it) goes through the pass list; each pass's best CPU time of `--runs` is
printed with its growth exponent (log time ratio / log size ratio between 8 and 64: 1.0 is
linear; a pass is called linear here below 1.25).

Nothing is asserted: this prints numbers. CPU time is shown beside wall time because a loaded
machine inflates the wall time with waiting.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import math
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "examples")]

COLD_GOAL_S = 0.5
LINEAR = 1.25
SIZES = (8, 16, 32, 64)


def example_names() -> list[str]:
    return sorted(p.stem for p in (REPO / "examples").glob("*.py") if not p.name.startswith("_"))


def kernels_of(name: str) -> list[tuple]:
    """(label, factory, args, out_idx, chip) of what example `name` compiles at its default shape
    (chip None: the default chip)."""
    from tilelang_mini.kernels import _core
    from tilelang_mini.runtime.kernel import JITFactory
    mod = importlib.import_module(name)
    jits = [v for v in vars(mod).values() if isinstance(v, JITFactory)]
    if jits:
        return [(name, f.factory, tuple(mod.DEFAULT_ARGS), f.out_idx, None) for f in jits[:1]]
    seen: list = []
    orig = _core.Context.compile

    def record(self, factory, *args):
        if self.target == "llvm" and all((f, a, c) != (factory, args, self.chip)
                                         for _, f, a, _, c in seen):
            seen.append((f"{name}:{factory.__name__}@{self.chip}", factory, args, None, self.chip))
        return orig(self, factory, *args)

    _core.Context.compile = record
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            mod.main(["--no-simulate", "--show-ir", "none"])
    finally:
        _core.Context.compile = orig
    return seen


class Clock:
    """Wall and CPU seconds of a block."""

    def __enter__(self):
        self.w, self.c = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc):
        self.wall = time.perf_counter() - self.w
        self.cpu = time.process_time() - self.c


def llvm_breakdown(kernel) -> dict:
    """CPU seconds of each step of the llvm backend's lower() for a lowered kernel."""
    import llvmlite.binding as llvm
    from backends.llvm import runtime as rt
    from backends.llvm.codegen import build
    t = rt.host_target()
    out = {}

    def step(name, fn, *a):
        with Clock() as c:
            r = fn(*a)
        out[name] = c.cpu
        return r

    module, gen = step("codegen", build, kernel, rt._features(t, {}))
    text = step("print", str, module)
    obj = step("optimise", rt._compile_module, text, gen.needs_dpbf16, t)
    step("mcjit", rt._load_object, obj, t)
    out["ll_lines"] = text.count("\n")
    return out


def cold(names: list[str], runs: int) -> list[dict]:
    from tilelang_mini.runtime.backends import get_backend
    from tilelang_mini.runtime.kernel import compile as tl_compile, pass_options
    from tilelang_mini.transform.options import Options
    from tilelang_mini.transform.pipeline import run_pipeline
    get_backend("numpy"), get_backend("llvm")
    from gemm import matmul
    tl_compile(matmul.factory(64, 64, 64), out_idx=[-1], target="llvm")  # warm-up
    rows = []
    for name in names:
        for label, factory, args, out_idx, chip in kernels_of(name):
            row = {"kernel": label}
            for target in ("numpy", "llvm"):
                walls, cpus = [], []
                for _ in range(runs):
                    with Clock() as c:
                        tl_compile(factory(*args), out_idx=out_idx, target=target, chip=chip)
                    walls.append(c.wall)
                    cpus.append(c.cpu)
                row[target] = (statistics.median(walls), statistics.median(cpus))
            opts = pass_options(Options(target="llvm", **({"chip": chip} if chip else {})))
            comp = run_pipeline(factory(*args).ir, opts)  # as a compile runs them
            row["passes"] = sum(comp.seconds.values())
            row["slowest"] = max(comp.seconds.items(), key=lambda kv: kv[1])
            row.update(llvm_breakdown(comp.final))
            rows.append(row)
            _print_cold(row)
    return rows


def _print_cold(r: dict) -> None:
    if not getattr(_print_cold, "done", False):
        print(f"cold compile (cache off, median; goal < {COLD_GOAL_S} s); llvm CPU split: "
              f"passes / codegen / LLVM IR text / LLVM opt+emit / MCJIT")
        print(f"{'kernel':34s} {'numpy wall':>10s} {'cpu':>6s} {'llvm wall':>10s} {'cpu':>6s}  "
              f"{'split (ms)':28s} {'.ll lines':>9s}  slowest pass")
        _print_cold.done = True
    verdict = " ".join("PASS" if r[t][0] < COLD_GOAL_S else "MISS" for t in ("numpy", "llvm"))
    split = "/".join(f"{r[k] * 1e3:.0f}" for k in ("passes", "codegen", "print", "optimise", "mcjit"))
    print(f"{r['kernel']:34s} {r['numpy'][0] * 1e3:8.0f}ms {r['numpy'][1] * 1e3:5.0f}  "
          f"{r['llvm'][0] * 1e3:8.0f}ms {r['llvm'][1] * 1e3:5.0f}  {split:28s} "
          f"{r['ll_lines']:9d}  {r['slowest'][0]} {r['slowest'][1] * 1e3:.0f} ms  {verdict}",
          flush=True)


def unrolled(n: int):
    """A kernel of n copy-in / elementwise / copy-out steps (3n tile statements)."""
    import tilelang_mini.language as T
    steps = list(range(n))
    shape = (n * 32, 64)

    @T.prim_func
    def unrolled_steps(A: T.Tensor(shape, "float32"), B: T.Tensor(shape, "float32")):
        with T.Kernel(2) as bx:
            s = T.alloc_shared((32, shape[1]), "float32")
            t = T.alloc_fragment((32, shape[1]), "float32")
            for i in steps:
                T.copy(A[i * 32, 0], s)
                for r, c in T.Parallel(32, 64):
                    t[r, c] = s[r, c] * 2.0 + bx
                T.copy(t, B[i * 32, 0])
    return unrolled_steps


def pass_seconds(kernel, runs: int) -> dict:
    """Best CPU seconds of each pass over `runs` runs of the pass list."""
    from dataclasses import replace
    from tilelang_mini.transform.options import Options
    from tilelang_mini.transform.pipeline import PASSES, run_pass
    from tilelang_mini.transform.split_cores import is_expert
    options = replace(Options(), expert=is_expert(kernel))
    best: dict = {}
    for _ in range(runs):
        k = kernel
        for name, fn, _why in PASSES:
            with Clock() as c:
                k = run_pass(name, fn, k, options)
            best[name] = min(best.get(name, math.inf), c.cpu)
    return best


def scale(runs: int) -> dict:
    secs = {n: pass_seconds(unrolled(n).ir, runs) for n in SIZES}
    names = list(secs[SIZES[0]])
    print(f"\npass CPU time (ms, best of {runs}) on a kernel unrolled n times; exponent = "
          f"log(t{SIZES[-1]}/t{SIZES[0]}) / log({SIZES[-1]}/{SIZES[0]}), linear < {LINEAR}")
    print(f"{'pass':14s} " + " ".join(f"{'n=' + str(n):>8s}" for n in SIZES) + "  exponent")
    out = {}
    for p in names:
        a, b = secs[SIZES[0]][p], secs[SIZES[-1]][p]
        expo = math.log(max(b, 1e-6) / max(a, 1e-6)) / math.log(SIZES[-1] / SIZES[0])
        out[p] = expo
        mark = "" if p not in ("insert_sync", "split_cores") else (
            "  PASS" if expo < LINEAR else "  MISS")
        print(f"{p:14s} " + " ".join(f"{secs[n][p] * 1e3:8.2f}" for n in SIZES) +
              f"  {expo:8.2f}{mark}")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", nargs="*", choices=("cold", "scale"), default=("cold", "scale"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--examples", nargs="*", default=None)
    args = ap.parse_args(argv)
    os.environ["TILELANG_MINI_CACHE"] = "0"  # read at each compile (runtime/config.py)
    if "cold" in args.what:
        cold(args.examples or example_names(), args.runs)
    if "scale" in args.what:
        scale(args.runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
