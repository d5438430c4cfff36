"""`tilelang-mini`: the command line.

    tilelang-mini run FILE [args...]      run an example as __main__, report status and wall time
    tilelang-mini ir FILE [--kernel NAME] [--after PASS|all] [--format text|dot]
                          [--target T] [--chip C] [--args N ...]
                                          print a kernel's IR (or its dependency graph as DOT)

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
    with _script_context(path, list(args.args)):
        try:
            runpy.run_path(str(path), run_name="__main__")
        except SystemExit as e:
            status = _exit_status(e.code)
    seconds = time.perf_counter() - start
    verdict = "ok" if status == 0 else f"FAILED (exit status {status})"
    print(f"[tilelang-mini] {args.file}: {verdict}; total wall time {seconds:.2f} s")
    return status


def _exit_status(code) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


# ------------------------------------------------------------------------------------------ ir


def _add_ir(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="a Python file defining @tilelang_mini.jit factories or T.prim_funcs")
    p.add_argument("--kernel", help="which kernel (its Python name); default: the first")
    p.add_argument("--after", default="final",
                   help="stage: frontend, a pass name, 'final' (default) or 'all'")
    p.add_argument("--format", choices=("text", "dot"), default="text",
                   help="IR text, or the dependency graph as Graphviz DOT")
    p.add_argument("--target", help="numpy | llvm (default: TILELANG_MINI_TARGET or numpy)")
    p.add_argument("--chip", help="ascend910b | ascend950 (default: TILELANG_MINI_CHIP)")
    p.add_argument("--args", type=int, nargs="+", help="factory arguments (default: DEFAULT_ARGS)")


def cmd_ir(args) -> int:
    kernel = build_kernel(args.file, args.kernel, args.target, args.chip, args.args)
    stages = list(kernel.compilation.stages)
    if args.after == "all":
        chosen = stages
    elif args.after == "final":
        chosen = stages[-1:]
    elif args.after in stages:
        chosen = [args.after]
    else:
        raise UsageError(f"unknown stage {args.after!r}; stages: {', '.join(stages)}, final, all")
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


# ------------------------------------------------------------------------------------- the table


@dataclass(frozen=True)
class Command:
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


COMMANDS: dict[str, Command] = {
    "run": Command("run an example file as __main__ and report its status and wall time",
                   _add_run, cmd_run),
    "ir": Command("print a kernel's IR after a stage (or all), as text or DOT", _add_ir, cmd_ir),
}


def build_parser() -> argparse.ArgumentParser:
    from . import __version__
    p = argparse.ArgumentParser(prog="tilelang-mini",
                                description="TileLang-compatible tile DSL and compiler for "
                                            "Ascend-class NPUs: run, inspect and estimate kernels.")
    p.add_argument("--version", action="version", version=f"tilelang-mini {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, cmd in COMMANDS.items():
        cmd.add_arguments(sub.add_parser(name, help=cmd.help, description=cmd.help))
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
