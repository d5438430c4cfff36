"""Which upstream example kernels the sweep's cases reach (the session-15 coverage audit).

    python benchmarks/upstream_coverage.py [--files-only] [--json out.json]

Not a test. Lists (1) the example files of both mirrors that name `@tilelang.jit` /
`T.prim_func` / `T.Kernel` and are no case's source file, and (2) per covered file, its kernel
functions (top-level functions decorated with a jit / autotune, or holding a `@T.prim_func` or a
`T.Kernel`) that no case reaches: each case's builder runs on the example's namespace wrapped in
a dict that records the names it looks up (builders compile kernels, they do not run them), then
the names those functions mention, transitively, count as reached. A factory after a failing
check of a case is reached here though the sweep never runs it (a case stops at its first
failing check); such cases are listed by the sweep's own results, not here.
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "torch_shim"))
import upstream_sweep as us  # noqa: E402
from upstream_compat import MIRROR, REPOS  # noqa: E402

KERNEL_TEXT = re.compile(r"@tilelang\.jit|@tl\.jit|T\.prim_func|T\.Kernel|@jit\b|tilelang\.jit\(")


def git(repo: str, *args) -> str:
    return subprocess.run(["git", "--git-dir", str(MIRROR / REPOS[repo] / "repo"), *args],
                          capture_output=True, text=True, check=True).stdout


def kernel_files() -> list:
    out = []
    for repo in REPOS:
        for path in git(repo, "ls-tree", "-r", "--name-only", "HEAD", "examples/").split():
            if path.endswith(".py") and KERNEL_TEXT.search(git(repo, "show", "HEAD:" + path)):
                out.append((repo, path))
    return out


def is_kernel(fn: ast.FunctionDef) -> bool:
    decos = [ast.unparse(d) for d in fn.decorator_list]
    if any("jit" in d or "autotune" in d for d in decos):
        return True
    for sub in ast.walk(fn):
        if isinstance(sub, ast.FunctionDef) and sub is not fn and \
                any("prim_func" in ast.unparse(d) for d in sub.decorator_list):
            return True
        if isinstance(sub, ast.Attribute) and sub.attr == "Kernel":
            return True
    return False


class Lookups(dict):
    """The example's namespace, recording the names a case builder looks up."""

    def __init__(self, ns):
        super().__init__(ns)
        self.seen: set = set()

    def __getitem__(self, k):
        self.seen.add(k)
        return super().__getitem__(k)

    def get(self, k, default=None):
        self.seen.add(k)
        return super().get(k, default)


def looked_up(case) -> set:
    def timeout(*_a):
        raise TimeoutError
    signal.signal(signal.SIGALRM, timeout)
    with tempfile.TemporaryDirectory(prefix="tlm-cov-") as tmp:
        ns = Lookups(us.load(case.repo, case.path, Path(tmp)))
        signal.alarm(120)
        try:
            case.build(ns, np.random.default_rng(0))
        except BaseException:  # noqa: BLE001 - a located error at build time still looked up
            pass
        finally:
            signal.alarm(0)
    return ns.seen


def unreached(repo: str, path: str, names: set) -> list:
    tree = ast.parse(git(repo, "show", "HEAD:" + path))
    refs = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            refs[node.name] = {x.id for x in ast.walk(node) if isinstance(x, ast.Name)}
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    refs[t.id] = {x.id for x in ast.walk(node.value) if isinstance(x, ast.Name)}
    seen, todo = set(), [n for n in names if n in refs]
    while todo:
        n = todo.pop()
        if n not in seen:
            seen.add(n)
            todo += [m for m in refs[n] if m in refs]
    return [n.name for n in tree.body if isinstance(n, ast.FunctionDef) and is_kernel(n)
            and n.name not in seen]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files-only", action="store_true")
    ap.add_argument("--json", default="")
    args = ap.parse_args(argv)
    os.environ.setdefault("TILELANG_MINI_TARGET", "numpy")
    sys.argv = sys.argv[:1]  # the examples' own argparse at module level reads sys.argv
    cases = us.load_cases()
    by_file: dict = {}
    for c in cases.values():
        by_file.setdefault((c.repo, c.path), []).append(c)
    files = kernel_files()
    uncovered = [f for f in files if f not in by_file]
    print(f"{len(files)} example files name a kernel; {len(uncovered)} are no case's source")
    for repo, path in uncovered:
        print(f"  uncovered: {repo}:{path}")
    result = {"files": len(files), "uncovered": uncovered, "unreached": {}}
    if not args.files_only:
        for (repo, path), cs in sorted(by_file.items()):
            names = set().union(*(looked_up(c) for c in cs))
            miss = unreached(repo, path, names)
            if miss:
                result["unreached"][f"{repo}:{path}"] = miss
                print(f"  unreached in {repo}:{path}: {', '.join(miss)}", flush=True)
        print(f"{sum(map(len, result['unreached'].values()))} kernel functions of covered "
              f"files are reached by no case")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
