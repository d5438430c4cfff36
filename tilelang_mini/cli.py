"""`tilelang-mini`: the command line.

    tilelang-mini run FILE [args...]      run an example as __main__, report status and wall time
    tilelang-mini ir FILE [--kernel NAME] [--after PASS|all|llvm] [--format text|dot]
                          [--target T] [--chip C] [--args N ...]
                                          print a kernel's IR (or its dependency graph as DOT,
                                          or with --after llvm the generated LLVM IR)
    tilelang-mini trace FILE [--kernel NAME] [--chip C] [--args N ...] -o trace.json
                          [--png gantt.png] [--roofline roofline.png]
                                          estimate a kernel and write its pipe timeline
    tilelang-mini bench [--quick] [--json PATH] [--repeats N] [--in-process]
                                          benchmarks/bench.py: llvm vs NumPy, threads, compile

Each subcommand is one function `cmd_<name>(args) -> exit status` plus one function that adds
its options, registered in the one table `COMMANDS`; add a subcommand by adding a row.
User mistakes (a CompileError, a missing file, an unknown kernel or stage) print one message,
never a traceback, and exit 1.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import runpy
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .errors import TileLangMiniError


class UsageError(Exception):
    """A mistake on the command line: printed as `tilelang-mini: error: ...`, exit 1."""


# ------------------------------------------------------------------------------------- helpers


def _source_file(path: str) -> Path:
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"no such file: {path}")
    return p.resolve()


@contextmanager
def _script_context(path: Path, argv: list[str]):
    """sys.argv and sys.path as `python FILE argv...` would set them; restored afterwards."""
    old_argv, old_path = sys.argv[:], sys.path[:]
    sys.argv = [str(path), *argv]
    sys.path.insert(0, str(path.parent))
    try:
        yield
    finally:
        sys.argv[:] = old_argv
        sys.path[:] = old_path


def load_module(path: str | Path):
    """Import FILE as a module (not as __main__), with its directory on sys.path."""
    path = _source_file(str(path))
    name = f"_tilelang_mini_cli_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    if str(path.parent) not in sys.path:  # stays: the module's functions may import later
        sys.path.insert(0, str(path.parent))
    spec.loader.exec_module(module)
    return module


def find_kernels(module) -> dict[str, object]:
    """The jit factories and T.prim_funcs defined in `module`, by name, in definition order."""
    from .frontend.parser import PrimFunc
    from .runtime.kernel import JITFactory
    return {name: v for name, v in vars(module).items()
            if isinstance(v, (JITFactory, PrimFunc)) and not name.startswith("_")}


def _default_args(module, name: str):
    """DEFAULT_ARGS of the file: a tuple for its kernels, or a dict {kernel name: tuple}."""
    value = getattr(module, "DEFAULT_ARGS", None)
    if isinstance(value, dict):
        value = value.get(name)
    if value is None:
        return ()
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def build_kernel(path: str, kernel: str | None = None, target: str | None = None,
                 chip: str | None = None, args: list | None = None):
    """Import `path`, pick a kernel (by name, default the first) and compile it."""
    import tilelang_mini
    from .runtime.kernel import JITFactory

    module = load_module(path)
    kernels = find_kernels(module)
    if not kernels:
        raise UsageError(f"{path} defines no @tilelang_mini.jit factory or T.prim_func")
    name = kernel or next(iter(kernels))
    if name not in kernels:
        raise UsageError(f"{path} has no kernel {name!r}; kernels: {', '.join(kernels)}")
    obj = kernels[name]
    if not isinstance(obj, JITFactory):
        return tilelang_mini.compile(obj, target=target, chip=chip)
    call_args = tuple(args) if args else _default_args(module, name)
    try:
        prim = obj.factory(*call_args)
    except TypeError as e:
        raise UsageError(f"cannot build {name}{call_args}: {e}; give the file a DEFAULT_ARGS "
                         f"tuple or pass --args") from None
    return tilelang_mini.compile(prim, out_idx=obj.out_idx, target=target or obj.target,
                                 chip=chip or obj.chip)


# ----------------------------------------------------------------------------------------- run


def _add_run(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="an example file, run as __main__")
    p.add_argument("args", nargs=argparse.REMAINDER, help="arguments passed on to the example")


def cmd_run(args) -> int:
    path = _source_file(args.file)
    start = time.perf_counter()
    status = 0
    with _script_context(path, list(args.args)), _recording_kernels() as kernels:
        try:
            runpy.run_path(str(path), run_name="__main__")
        except SystemExit as e:
            status = _exit_status(e.code)
    seconds = time.perf_counter() - start
    verdict = "ok" if status == 0 else f"FAILED (exit status {status})"
    print(f"[tilelang-mini] {args.file}: {verdict}; total wall time {seconds:.2f} s")
    if status == 0:
        _print_estimates(kernels)
    return status


@contextmanager
def _recording_kernels():
    """Collect the kernels compiled while an example runs (for the performance summary)."""
    from .runtime.kernel import observe_compiles
    seen: list = []
    with observe_compiles(seen.append):
        yield seen


def _print_estimates(kernels, limit: int = 3) -> None:
    """The performance model's one-screen summary of the last kernels the example compiled."""
    unique, names = [], set()
    for k in reversed(kernels):  # the last kernel compiled under each name is the one that ran
        if k.ir.name not in names:
            names.add(k.ir.name)
            unique.append(k)
    for k in reversed(unique[:limit]):
        try:
            print(k.estimate().summary())
        except TileLangMiniError as e:
            print(f"[tilelang-mini] no estimate for {k.ir.name}: {str(e).splitlines()[0]}")


def _exit_status(code) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


# ------------------------------------------------------------------------------------------ ir


def _add_ir(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", nargs="?",
                   help="a Python file defining @tilelang_mini.jit factories or T.prim_funcs")
    p.add_argument("--list-passes", action="store_true",
                   help="print the target's pass list (name and why, in order) and exit")
    p.add_argument("--kernel", help="which kernel (its Python name); default: the first")
    p.add_argument("--after", default="final",
                   help="stage: frontend, a pass name, 'final' (default), 'all', or 'llvm' "
                        "(the LLVM IR the llvm target generates; implies --target llvm)")
    p.add_argument("--format", choices=("text", "dot"), default="text",
                   help="IR text, or the dependency graph as Graphviz DOT")
    p.add_argument("--target", help="numpy | llvm (default: TILELANG_MINI_TARGET or numpy)")
    p.add_argument("--chip", help="ascend910b | ascend950 (default: TILELANG_MINI_CHIP)")
    p.add_argument("--args", type=int, nargs="+", help="factory arguments (default: DEFAULT_ARGS)")


def cmd_ir(args) -> int:
    if args.list_passes:
        return _list_passes(args.target)
    if args.file is None:
        raise UsageError("ir needs a FILE (or --list-passes)")
    if args.after == "llvm":
        return _print_llvm_ir(args)
    kernel = build_kernel(args.file, args.kernel, args.target, args.chip, args.args)
    stages = list(kernel.compilation.stages)
    if args.after == "all":
        chosen = stages
    elif args.after == "final":
        chosen = stages[-1:]
    elif args.after in stages:
        chosen = [args.after]
    else:
        raise UsageError(f"unknown stage {args.after!r}; stages: {', '.join(stages)}, final, "
                         f"all, llvm")
    for stage in chosen:
        if args.format == "dot":
            from .ir.graph import to_dot
            if len(chosen) > 1:
                print(f"// ---- graph after {stage} ----")
            print(to_dot(kernel.ir_graph(stage)), end="")
        else:
            if len(chosen) > 1:
                print(f"# ---- IR after {stage} ----")
            print(kernel.get_ir(stage), end="")
    return 0


def _list_passes(target) -> int:
    """`ir --list-passes [--target T]`: the stages `--after` accepts for that target."""
    from .runtime import config
    from .transform.pipeline import passes_for
    target = target or config.default_target()
    print(f"passes of target {target} (after the frontend, in order):")
    for name, _, why in passes_for(target):
        print(f"  {name:18s} {why}")
    return 0


def _print_llvm_ir(args) -> int:
    """`ir --after llvm`: the LLVM IR (before optimisation) of the kernel compiled for llvm."""
    if args.target not in (None, "llvm"):
        raise UsageError(f"--after llvm needs --target llvm, not {args.target!r}")
    if args.format == "dot":
        raise UsageError("--after llvm prints LLVM IR text; --format dot is for the tile IR stages")
    kernel = build_kernel(args.file, args.kernel, "llvm", args.chip, args.args)
    source = kernel.get_kernel_source()
    print(source, end="" if source.endswith("\n") else "\n")
    return 0


# --------------------------------------------------------------------------------------- trace


def _add_trace(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="a Python file defining @tilelang_mini.jit factories or T.prim_funcs")
    p.add_argument("--kernel", help="which kernel (its Python name); default: the first")
    p.add_argument("--chip", help="ascend910b | ascend950 (default: TILELANG_MINI_CHIP)")
    p.add_argument("--args", type=int, nargs="+", help="factory arguments (default: DEFAULT_ARGS)")
    p.add_argument("-o", "--output", default="trace.json",
                   help="Chrome-trace JSON to write (open in ui.perfetto.dev or chrome://tracing)")
    p.add_argument("--png", help="also write a Gantt chart of the pipes (needs matplotlib)")
    p.add_argument("--roofline", help="also write the roofline plot (needs matplotlib)")


def cmd_trace(args) -> int:
    kernel = build_kernel(args.file, args.kernel, "numpy", args.chip, args.args)
    est = kernel.estimate()
    est.to_perfetto(args.output)
    print(est.summary())
    print(f"[tilelang-mini] wrote {args.output} ({len(est.events)} instructions of "
          f"{len(est.simulated)} simulated block(s)); open it in https://ui.perfetto.dev")
    for path, write in ((args.png, est.to_png), (args.roofline, est.roofline_png)):
        if path:
            try:
                write(path)
            except ImportError as e:
                raise UsageError(str(e)) from None
            print(f"[tilelang-mini] wrote {path}")
    return 0


# --------------------------------------------------------------------------------------- bench


def _bench_script() -> Path:
    """benchmarks/bench.py of the source checkout this package runs from."""
    path = Path(__file__).resolve().parent.parent / "benchmarks" / "bench.py"
    if not path.is_file():
        raise UsageError(f"{path} not found: `bench` runs from a source checkout "
                         f"(pip install -e .)")
    return path


def _add_bench(p: argparse.ArgumentParser) -> None:
    p.add_argument("options", nargs="*", metavar="OPTION",
                   help="bench.py's own options (`tilelang-mini bench --help` lists them)")


def cmd_bench(args) -> int:
    return load_module(_bench_script()).main(args.options)


# ------------------------------------------------------------------------------------- the table


@dataclass(frozen=True)
class Command:
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    forwards: bool = False  # every argument (--help too) goes to the command's own parser


COMMANDS: dict[str, Command] = {
    "run": Command("run an example file as __main__ and report its status and wall time",
                   _add_run, cmd_run),
    "ir": Command("print a kernel's IR after a stage (or all), as text or DOT", _add_ir, cmd_ir),
    "trace": Command("estimate a kernel on a chip and write its pipe timeline (Chrome-trace "
                     "JSON for Perfetto; PNG Gantt and roofline with the plot extra)",
                     _add_trace, cmd_trace),
    "bench": Command("measure the llvm target against NumPy (GEMM fp32/bf16, threads, "
                     "rmsnorm/prenorm bandwidth, compile and cache-hit time): "
                     "benchmarks/bench.py", _add_bench, cmd_bench, forwards=True),
}


def build_parser() -> argparse.ArgumentParser:
    from . import __version__
    p = argparse.ArgumentParser(prog="tilelang-mini",
                                description="TileLang-compatible tile DSL and compiler for "
                                            "Ascend-class NPUs: run, inspect and estimate kernels.")
    p.add_argument("--version", action="version", version=f"tilelang-mini {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, cmd in COMMANDS.items():
        own = {"prefix_chars": "+", "add_help": False} if cmd.forwards else {}  # no -options
        cmd.add_arguments(sub.add_parser(name, help=cmd.help, description=cmd.help, **own))
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command].run(args)
    except (TileLangMiniError, UsageError) as err:
        print(f"tilelang-mini: error: {err}" if isinstance(err, UsageError) else str(err),
              file=sys.stderr)
        return 1
    except BrokenPipeError:  # `tilelang-mini ir ... | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
