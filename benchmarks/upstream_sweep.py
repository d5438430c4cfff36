"""Upstream example kernels, checked against float64 NumPy references (the i10 measurement).

    python benchmarks/upstream_sweep.py [--match STR] [--timeout 300] [--json out.json] [--jobs N]

Not a test and not part of the project's kernels: for each case in benchmarks/upstream_cases_*.py
the upstream example file is read at run time from the local mirror (bare git repos under
/work/.mirror, or TLM_MIRROR), its imports are rewritten (`tilelang` -> `tilelang_mini`), and only
its definitions run (imports, functions, classes, top-level assignments: its own test and
benchmark code at module level is host code and is skipped). The case then calls the example's
own kernel factory or eager kernel with small shapes and NumPy inputs (host code written here)
and compares every output with a float64 NumPy reference written from the operation's meaning.

Each case runs in two child processes, one per target (numpy, llvm); the numpy child also runs
the kernel on the pipe-level simulator (checking its outputs too). Outcomes:

  pass      every output matches on numpy and llvm, and the simulation is clean and matches
  located   a CompileError located at a line of the example file or a module of its folder
            (an unsupported feature, named), or a KernelRuntimeError located there (the kernel
            indexes a tile out of its bounds with these inputs)
  internal  any other error from tilelang_mini (a defect)
  wrong     a number differs from the reference on some target or in the simulation
  race      the simulator found a race, deadlock or unbalanced sync (a compiler defect)
  harness   the case's own host code failed (a defect of this benchmark)
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent
# the mirror and the import rewriting are the older sweep's (upstream_compat.py), one copy
from upstream_compat import IMPORT_RULES, MIRROR, REPOS  # noqa: E402  (benchmarks/ is sys.path[0])


@dataclass
class Check:
    """One kernel call: `fn(*args)`; `want` maps an output (0.. of the returned outputs, or
    ('arg', i) for an argument written in place) to its float64 reference."""
    fn: object
    args: list
    want: dict
    dtype: str = "float32"          # the outputs' dtype (tolerances)
    reduce_len: int = 1             # longest reduction (tolerances grow with sqrt)
    tol: tuple | None = None        # (rtol, atol) overriding the dtype's
    compare: object = None          # custom compare(got, want) -> None (raises AssertionError)


def rn(rng, shape, dtype="float32", scale=1.0):
    """Random inputs of the case files: normal values (times `scale`) in `dtype`."""
    return (rng.standard_normal(shape) * scale).astype(dtype)


def with_kwargs(f, **kw):
    """An eager jit function (or @autotune above one) called with these keyword arguments:
    a callable of the tensors that also answers `kernel_for` (what the simulation runs)."""
    fn = lambda *a: f(*a, **kw)  # noqa: E731
    base = f.factory if hasattr(f, "factory") and not hasattr(f, "kernel_for") else f
    fn.kernel_for = lambda *a: base.kernel_for(*a, **kw)
    return fn


def blocksparse_ref(a, b, mask, bm, bn, bk):
    """float64 A @ B summing only the (bm x bk) @ (bk x bn) block products whose
    mask[i, j, k] is set (both dialects' blocksparse_gemm examples)."""
    want = np.zeros((a.shape[0], b.shape[1]))
    for i, j, k in zip(*np.nonzero(mask)):
        want[i * bm:(i + 1) * bm, j * bn:(j + 1) * bn] += \
            a[i * bm:(i + 1) * bm, k * bk:(k + 1) * bk].astype(np.float64) \
            @ b[k * bk:(k + 1) * bk, j * bn:(j + 1) * bn]
    return want


@dataclass
class Case:
    name: str
    repo: str
    path: str
    build: object                   # build(module_namespace, rng) -> list[Check]
    what: str = ""
    extra: list = field(default_factory=list)
    chip: str = ""                  # the chip the host code compiles for ("" = the default)


CASES: dict = {}


def case(name, repo, path, what="", chip=""):
    """Register a case; `chip` is the host's choice of chip (TILELANG_MINI_CHIP in its
    processes), e.g. "ascend950" for the FP8 GEMMs the 910b cube cannot run."""
    def deco(fn):
        CASES[name] = Case(name, repo, path, fn, what, chip=chip)
        return fn
    return deco


def show(repo: str, path: str) -> str:
    git = MIRROR / REPOS[repo] / "repo"
    return subprocess.run(["git", "-C", str(git), "show", f"HEAD:{path}"], capture_output=True,
                          text=True, check=True).stdout


def rewrite_imports(src: str) -> str:
    for pat, rep in IMPORT_RULES:
        src = re.sub(pat, rep, src, flags=re.M)
    return src


def load(repo: str, path: str, workdir: Path) -> dict:
    """Run the example's definitions (not its module-level test code) in a fresh namespace."""
    git = MIRROR / REPOS[repo] / "repo"
    folder = str(Path(path).parent)
    names = subprocess.run(["git", "-C", str(git), "ls-tree", "-r", "--name-only", "HEAD",
                            folder + "/"], capture_output=True, text=True, check=True).stdout.split()
    for sib in names:  # sibling modules and packages (local imports), imports rewritten
        rel = Path(sib).relative_to(folder)
        if sib.endswith(".py") and (len(rel.parts) == 1 or f"{folder}/{rel.parts[0]}/__init__.py"
                                    in names):  # gdn_full.py's `from gdn.gdn_chunk_h import ...`
            (workdir / rel).parent.mkdir(parents=True, exist_ok=True)
            (workdir / rel).write_text(rewrite_imports(show(repo, sib)))
    local = workdir / Path(path).name
    src = rewrite_imports(show(repo, path))
    local.write_text(src)
    sys.path.insert(0, str(workdir))
    ns = {"__name__": "upstream_example", "__file__": str(local)}
    keep = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef, ast.Assign, ast.AnnAssign,
            ast.AugAssign, ast.Try)  # try: optional imports (`from .utils import ...` / except)
    tree = ast.parse(src)
    defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    for node in tree.body:
        if _adds_argument(node):  # `parser.add_argument(...)`: module globals come from args
            node = ast.copy_location(ast.Assign([ast.Name("_", ast.Store())], node.value), node)
            ast.fix_missing_locations(node)
        if not isinstance(node, keep) or (not isinstance(node, (ast.FunctionDef, ast.ClassDef))
                                          and _runs_host_code(node, defined)):
            continue
        code = compile(ast.Module([node], type_ignores=[]), str(local), "exec", dont_inherit=True)
        try:
            exec(code, ns)
        except Exception:  # noqa: BLE001 - host-code definitions this machine cannot run
            pass
    return ns


def _adds_argument(node) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and \
        isinstance(node.value.func, ast.Attribute) and node.value.func.attr == "add_argument"


def _runs_host_code(node, defined) -> bool:
    """A module-level assignment that calls the example's own functions (compiling or running
    kernels) or torch (building test data): host code, skipped."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            f = sub.func
            if _device_query(f):  # `torch.npu.get_device_properties(...)`: configuration
                continue
            while isinstance(f, ast.Attribute):
                f = f.value
            if isinstance(f, ast.Name) and (f.id in defined or f.id == "torch"):
                return True
    return False


def _device_query(f) -> bool:
    """`torch.npu.X` / `torch.cuda.X` for a device query X (core counts, names): module-level
    configuration of an example (xattention's NUM_CORES), answered by the torch shim."""
    return isinstance(f, ast.Attribute) and f.attr in (
        "get_device_properties", "device_count", "get_device_name", "current_device") and \
        isinstance(f.value, ast.Attribute) and f.value.attr in ("npu", "cuda") and \
        isinstance(f.value.value, ast.Name) and f.value.value.id == "torch"


def tolerance(dtype: str, reduce_len: int):
    from tilelang_mini.ir import dtypes
    rtol, atol = dtypes.tolerance(dtype)
    return rtol, atol * max(1.0, np.sqrt(reduce_len) / 4)


def outputs_of(got, args, keys):
    outs = got if isinstance(got, tuple) else (got,)
    res = {}
    for k in keys:
        if isinstance(k, tuple):
            res[k] = np.asarray(args[k[1]])
        else:
            res[k] = np.asarray(outs[k])
    return res


def compare(c: Check, got: dict, where: str):
    for k, want in c.want.items():
        g = got[k]
        if c.compare is not None:
            c.compare(g, want)
            continue
        rtol, atol = c.tol or tolerance(c.dtype, c.reduce_len)
        g64 = g.astype(np.float64)
        if g64.shape != np.shape(want):
            raise AssertionError(f"{where}: output {k}: shape {g64.shape} != {np.shape(want)}")
        if not np.allclose(g64, want, rtol=rtol, atol=atol, equal_nan=False):
            err = np.abs(g64 - want)
            raise AssertionError(f"{where}: output {k}: max abs err {np.nanmax(err):.3g} "
                                 f"(rtol {rtol}, atol {atol:.2g}), {int(np.sum(~np.isclose(g64, want, rtol=rtol, atol=atol)))} "
                                 f"of {g64.size} differ")


def fresh(args):
    return [a.copy() if isinstance(a, np.ndarray) else a for a in args]


def run_child(name: str, target: str) -> dict:
    os.environ["TILELANG_MINI_TARGET"] = target
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(HERE / "torch_shim"))
    sys.argv = [name]
    import tilelang_mini
    c = load_cases()[name]
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="tlm-sweep-") as tmp:
        stage = "load"
        try:
            ns = load(c.repo, c.path, Path(tmp))
            stage = "build"
            checks = c.build(ns, np.random.default_rng(0))
            for i, chk in enumerate(checks):
                stage = f"run {target} #{i}"
                args = fresh(chk.args)
                got = chk.fn(*args)
                compare(chk, outputs_of(got, args, chk.want), f"{target} #{i}")
                if target == "numpy":
                    stage = f"simulate #{i}"
                    args = fresh(chk.args)
                    fn, kargs = chk.fn, args
                    if not hasattr(fn, "simulate") and hasattr(getattr(fn, "factory", None),
                                                               "kernel_for"):
                        fn = fn.factory  # @autotune above an eager @jit, every config given
                    if hasattr(fn, "kernel_for"):
                        fn, kargs = fn.kernel_for(*args)
                    got, _report = fn.simulate(*kargs)
                    compare(chk, outputs_of(got, kargs, chk.want), f"simulate #{i}")
            return {"status": "pass", "secs": round(time.time() - t0, 1)}
        except AssertionError as e:
            return {"status": "wrong", "error": str(e).splitlines()[0][:300], "stage": stage}
        except tilelang_mini.TileLangMiniError as e:
            text = str(e)
            first = text.splitlines()[0] if text else type(e).__name__
            base = Path(c.path).name
            if isinstance(e, (tilelang_mini.RaceError, tilelang_mini.DeadlockError,
                              tilelang_mini.SyncError)) or first.split(": ", 1)[-1].startswith(
                                  ("race on", "deadlock")):  # check_sync's verdict on the kernel
                status = "race"
            elif isinstance(e, (tilelang_mini.CompileError, tilelang_mini.KernelRuntimeError)) and (
                    re.search(
                    re.escape(base) + r":\d+:\d+", text) or re.search(
                    re.escape(tmp) + r"/[\w./]+\.py:\d+:\d+", text)) \
                    and "internal" not in first.lower():  # the example's file or its folder's
                status = "located"
            else:
                status = "internal"
            return {"status": status, "error": first[:300], "stage": stage}
        except Exception as e:  # noqa: BLE001
            tb = traceback.extract_tb(e.__traceback__)
            inside = [f for f in tb if "tilelang_mini" in f.filename or "/backends/" in f.filename]
            where = tb[-1]
            status = "internal" if inside else "harness"
            return {"status": status, "stage": stage,
                    "error": f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''} "
                             f"({os.path.basename(where.filename)}:{where.lineno})"}


def load_cases():
    sys.path.insert(0, str(HERE))
    import upstream_cases_ascend  # noqa: F401
    import upstream_cases_tl  # noqa: F401
    import upstream_cases_more  # noqa: F401
    import upstream_cases_held  # noqa: F401
    import upstream_cases_hisa  # noqa: F401
    import upstream_cases_cv  # noqa: F401
    import upstream_cases_new  # noqa: F401
    import upstream_cases_new2  # noqa: F401
    import upstream_cases_new3  # noqa: F401
    import upstream_cases_new4  # noqa: F401
    import upstream_cases_new5  # noqa: F401
    import upstream_cases_new6  # noqa: F401
    import upstream_cases_new7  # noqa: F401
    import upstream_cases_new8  # noqa: F401
    import upstream_cases_new9  # noqa: F401
    import upstream_cases_new10  # noqa: F401
    import upstream_cases_new11  # noqa: F401
    import upstream_cases_new12  # noqa: F401
    import upstream_cases_new13  # noqa: F401
    import upstream_cases_shapes  # noqa: F401
    import upstream_cases_shapes2  # noqa: F401
    import upstream_cases_shapes3  # noqa: F401
    import upstream_cases_shapes4  # noqa: F401
    import upstream_cases_shapes5  # noqa: F401
    import upstream_sweep  # the cases register in the importable module (not __main__)
    return upstream_sweep.CASES


ORDER = ["race", "internal", "wrong", "harness", "located"]


def run_case(name: str, timeout: float) -> dict:
    res = {}
    wanted = load_cases()[name].chip  # the registry the case modules filled
    chip = {"TILELANG_MINI_CHIP": wanted} if wanted else {}
    for target in ("numpy", "llvm"):
        cmd = [sys.executable, str(Path(__file__).resolve()), "--child", name, "--target", target]
        t0, c0 = time.time(), os.times()
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                                  env=dict(os.environ, PYTHONPATH=str(ROOT), **chip))
            line = [ln for ln in proc.stdout.splitlines() if ln.startswith("@@RESULT@@")]
            res[target] = json.loads(line[-1][10:]) if line else {
                "status": "internal", "error": (proc.stderr.strip().splitlines() or ["crash"])[-1][:300]}
        except subprocess.TimeoutExpired:
            res[target] = {"status": "timeout", "error": f"timeout after {timeout:.0f} s"}
        c1 = os.times()  # the child's CPU time: the machine is shared, wall time is noisy
        res[target]["wall"] = round(time.time() - t0, 1)
        res[target]["cpu"] = round(c1.children_user + c1.children_system
                                   - c0.children_user - c0.children_system, 1)
        if res[target]["status"] != "pass":
            break
    worst = next((s for s in ORDER + ["timeout"] if any(r["status"] == s for r in res.values())),
                 "pass")
    err = next((f"[{t}] {r.get('error', '')}" for t, r in res.items() if r["status"] != "pass"), "")
    secs = " + ".join(f"{t} {r['cpu']:.0f} s cpu ({r['wall']:.0f} s wall)"
                      for t, r in res.items())
    return {"case": name, "status": worst, "error": err, "secs": secs}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--match", default="")
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--json", default="")
    ap.add_argument("--child", default="")
    ap.add_argument("--target", default="numpy")
    ap.add_argument("--jobs", type=int, default=1,
                    help="cases run at once (each in its own child processes)")
    args = ap.parse_args(argv)
    if args.child:
        print("@@RESULT@@" + json.dumps(run_child(args.child, args.target)), flush=True)
        return 0
    names = [n for n in load_cases() if re.search(args.match, n)]
    def one(n):
        r = run_case(n, args.timeout)
        print(f"| {n} | {r['status']} | {r['secs']} | {r['error'][:160]} |", flush=True)
        return r
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        results = list(pool.map(one, names))  # in the cases' order
    counts: dict = {}
    for r in results:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    npass = counts.get("pass", 0)
    print(f"\n{len(results)} kernels: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
          + f"; pass rate {100.0 * npass / max(1, len(results)):.0f}%")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
