"""Try the upstream example files (TileLang, tilelang-ascend) with only their imports changed.

    python benchmarks/upstream_compat.py [--repo tilelang|ascend|both] [--timeout 60] [--match STR]
                                         [--list] [--target llvm]

Not a test: a measurement of how much of the upstream dialect runs unchanged. Each example file
is read from the local mirror (bare git repos under /work/.mirror, or --mirror), its imports are
rewritten (`tilelang` -> `tilelang_mini`), `torch` is replaced by a small NumPy stand-in (CPU
only: `.cuda()`/`.npu()` are no-ops) and the file runs as `__main__` in a child process with
a timeout, its own argparse defaults and its own checks against its torch reference. Each file
gets one status:

  ran        the file finished (its own result checks passed)
  compiled   at least one kernel compiled; the file then failed in host code or timed out
  located    a CompileError located in the example file (an unsupported feature, named)
  internal   an error inside tilelang_mini that is not a located CompileError (a defect)
  host       failed before any kernel compiled, in host code (torch features the stand-in
             lacks, GPU-only libraries, CUDA checks)

The summary counts each status per repository; --list prints one line per file with the first
line of its error.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MIRROR = Path(os.environ.get("TLM_MIRROR", "/work/.mirror"))
REPOS = {"tilelang": "tile-ai+tilelang", "ascend": "tile-ai+tilelang-ascend"}

IMPORT_RULES = [
    (r"^(\s*)import tilelang\.language as (\w+)", r"\1import tilelang_mini.language as \2"),
    (r"^(\s*)import tilelang as (\w+)", r"\1import tilelang_mini as \2"),
    (r"^(\s*)import tilelang\.(\w+)\s*$", r"\1import tilelang_mini as tilelang"),
    (r"^(\s*)import tilelang\b(?!\.)", r"\1import tilelang_mini as tilelang"),
    (r"^(\s*)from tilelang(\.|\s)", r"\1from tilelang_mini\2"),
    # BitBLAS, where TileLang began as `tvm.tl` (bitnet's tl_int8xint8.py): its TVM, its
    # `tvm.tl` language and its CUDA MMA helpers (bitblas.tl.*) are TileLang's
    (r"^(\s*)from bitblas import tvm\b", r"\1from tilelang_mini import tvm"),
    (r"^(\s*)import tvm\.tl\.language as (\w+)", r"\1import tilelang_mini.language as \2"),
    (r"^(\s*)from tvm import tl as (\w+)", r"\1import tilelang_mini as \2"),
    (r"^(\s*)from bitblas\.tl\.([\w.]+) import", r"\1from tilelang_mini.cuda.intrinsics.\2 import"),
    (r"^(\s*)from bitblas\.base import", r"\1from tilelang_mini.transform import"),
    # BitBLAS's CUDA source snippets (bitblas.gpu.intrin.lop3's decoders): CUDA-only stubs
    (r"^(\s*)from bitblas\.gpu\.([\w.]+) import", r"\1from tilelang_mini.cuda.\2 import"),
    # TVM, which TileLang re-exports: its small compatibility surface `tilelang_mini.tvm`
    (r"^(\s*)from tvm(\.|\s)", r"\1from tilelang_mini.tvm\2"),
    (r"^(\s*)import tvm\s*$", r"\1from tilelang_mini import tvm"),
]


def rewrite_imports(src: str) -> str:
    for pat, rep in IMPORT_RULES:
        src = re.sub(pat, rep, src, flags=re.M)
    return src


SIBLINGS: dict = {}  # (repo, folder) -> the example folder's .py files (local imports)


def example_files(repo: str, all_files: bool = False) -> list[str]:
    git = MIRROR / REPOS[repo] / "repo"
    out = subprocess.run(["git", "-C", str(git), "ls-tree", "-r", "--name-only", "HEAD"],
                         capture_output=True, text=True, check=True).stdout.split()
    return [p for p in out if p.startswith("examples/") and p.endswith(".py")
            and (all_files or not Path(p).name.startswith(("test_", "__init__")))]


def show(repo: str, path: str) -> str:
    git = MIRROR / REPOS[repo] / "repo"
    return subprocess.run(["git", "-C", str(git), "show", f"HEAD:{path}"], capture_output=True,
                          text=True, check=True).stdout


CHILD = r'''
import json, os, sys, traceback, types
sys.path.insert(0, {root!r})
sys.path.insert(0, {shim!r})
sys.argv = [{name!r}]
result = {{"compiled": 0}}
import tilelang_mini
from tilelang_mini.runtime import kernel as _k
_orig = _k._compile_ir
def _counting(*a, **kw):
    out = _orig(*a, **kw)
    result["compiled"] += 1
    print("@@COMPILED@@", flush=True)
    return out
_k._compile_ir = _counting
os.chdir({workdir!r})
sys.path.insert(0, {workdir!r})
src = open({file!r}).read()
try:
    exec(compile(src, {name!r}, "exec"), {{"__name__": "__main__", "__file__": {name!r}}})
    result["status"] = "ran"
except SystemExit as e:
    result["status"] = "ran" if not e.code else "host"
    result["error"] = "SystemExit %r" % (e.code,)
except tilelang_mini.TileLangMiniError as e:
    text = str(e)
    first = text.splitlines()[0] if text else type(e).__name__
    import re as _re
    internal = "internal" in first.lower() or not _re.search(r":\d+:\d+: ", text)
    if isinstance(e, (tilelang_mini.RaceError, tilelang_mini.DeadlockError,
                      tilelang_mini.SyncError)):
        internal = True  # the compiler's sync (or the simulator) is wrong: a defect
    result["status"] = "internal" if internal else "located"
    if isinstance(e, tilelang_mini.ArgumentError):
        result["status"] = "host"
    result["error"] = first
except BaseException as e:
    tb = traceback.extract_tb(e.__traceback__)
    inside = any("tilelang_mini" in (f.filename or "") or "/backends/" in (f.filename or "")
                 for f in tb[-1:])
    result["status"] = "internal" if inside and not isinstance(e, (ImportError, AttributeError)) \
        else "host"
    where = tb[-1] if tb else None
    result["error"] = "%s: %s%s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "",
                                   " (%s:%s)" % (os.path.basename(where.filename), where.lineno)
                                   if where else "")
if result["status"] == "host" and result["compiled"]:
    result["status"] = "compiled"
print("@@RESULT@@" + json.dumps(result))
'''


def run_one(repo: str, path: str, timeout: float, target: str, workdir: Path) -> dict:
    src = rewrite_imports(show(repo, path))
    name = f"{repo}:{path}"
    folder = str(Path(path).parent)
    for sibling in SIBLINGS.setdefault((repo, folder), [p for p in example_files(repo, all_files=True)
                                                        if str(Path(p).parent) == folder]):
        (workdir / Path(sibling).name).write_text(rewrite_imports(show(repo, sibling)))
    local = workdir / Path(path).name
    local.write_text(src)
    child = CHILD.format(root=str(ROOT), shim=str(ROOT / "benchmarks" / "torch_shim"),
                         name=str(local), file=str(local), workdir=str(workdir))
    env = dict(os.environ, TILELANG_MINI_TARGET=target)
    try:
        proc = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True,
                              timeout=timeout, env=env)
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        compiled = out.count("@@COMPILED@@")
        return {"file": name, "status": "compiled" if compiled else "timeout",
                "error": f"timeout after {timeout:.0f} s"}
    for line in proc.stdout.splitlines():
        if line.startswith("@@RESULT@@"):
            r = json.loads(line[len("@@RESULT@@"):])
            r["file"] = name
            return r
    return {"file": name, "status": "internal" if "tilelang_mini" in proc.stderr else "host",
            "error": (proc.stderr.strip().splitlines() or ["no output"])[-1][:200]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", choices=["tilelang", "ascend", "both"], default="both")
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--match", default="")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--target", default="llvm")
    ap.add_argument("--json", default="")
    args = ap.parse_args(argv)
    import tempfile
    repos = ["tilelang", "ascend"] if args.repo == "both" else [args.repo]
    results = []
    with tempfile.TemporaryDirectory(prefix="tlm-upstream-") as tmp:
        for repo in repos:
            for path in example_files(repo):
                if args.match and args.match not in path:
                    continue
                r = run_one(repo, path, args.timeout, args.target, Path(tmp))
                results.append(r)
                if args.list:
                    print(f"{r['status']:9s} {r['file']}  {r.get('error', '')}", flush=True)
    for repo in repos:
        rs = [r for r in results if r["file"].startswith(repo + ":")]
        counts: dict = {}
        for r in rs:
            counts[r["status"]] = counts.get(r["status"], 0) + 1
        print(f"{repo}: {len(rs)} files: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
