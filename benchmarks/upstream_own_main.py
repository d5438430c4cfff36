"""Upstream examples run through their OWN host code with real torch (CPU): the held-out form.

    /tmp/tv/bin/python benchmarks/upstream_own_main.py [--match STR] [--timeout 90]
                                                       [--targets numpy,llvm] [--json out.json]
                                                       [--sizes own|alt|upstream]
                                                       [--mem-gb 10] [--sample 5] [--resume out.json]

Not a test. benchmarks/upstream_sweep.py calls each example's kernels from host code written
here, with NumPy arrays; this runner instead keeps the example's own `main()` / `__main__` code
(torch tensors of its dtypes, non-contiguous views, `torch.testing.assert_close`, the
profiler, `do_bench`, `get_kernel_source`) and changes only what a CPU needs: imports
(`tilelang` -> `tilelang_mini`, the sweep's rules), device strings ("cuda"/"npu" -> "cpu"),
`.cuda()`/`.npu()` (no-ops), `torch.cuda`/`torch.npu` synchronisation and events (a stand-in),
and the problem sizes (each case below shrinks them, by its main's arguments, its argparse
flags or a substitution in its host code), so that one run takes well under a minute on the
NumPy interpreter (`--sizes alt`: instead the other sizes of upstream_cases_alt.py, the smallest
each example allows and odd / tail ones; `--sizes upstream`: none, see `upstream_sizes`). Needs
real torch (run it with a Python that has torch installed).

Each case runs once per target in a child process. Outcomes:

  pass      the example's own code finished (its own checks against its torch reference passed)
  located   a CompileError located at a line of the example (or of its folder)
  wrong     the example's own numeric check failed (assert_close, allclose, its own assert)
  ours      any other error raised inside tilelang_mini (a defect: torch interop included)
  host      the example's host code needs what a CPU torch lacks (CUDA-only calls, triton...)
  timeout   did not finish in time
  memory    the child ran out of memory (MemoryError, torch's allocator, killed by the OS)
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from upstream_compat import MIRROR, REPOS, rewrite_imports  # noqa: E402

TL, AS = "tilelang", "ascend"

# (repo, example path, how): how = {"call": expression run after the definitions, or
# "argv": [...] to run the file as __main__; "subs": [(regex, replacement)] on the source}
CASES: list = [
    # ------------------------------------------------------------------ TileLang
    (TL, "examples/gemm/example_gemm.py", {"subs": [(r"1024", "128")], "call": "main()"}),
    (TL, "examples/gemm/example_gemm_persistent.py", {"call": "main(256, 256, 128)"}),
    (TL, "examples/gemm/example_gemm_autotune.py", {"call": "main(128, 128, 128, False)"}),
    (TL, "examples/elementwise/example_elementwise_add.py", {"call": "main(128, 128)"}),
    (TL, "examples/norm/rms_norm.py", {"argv": [], "subs": [(r"M, N, blk_m, blk_k = \d+, \d+",
                                                             "M, N, blk_m, blk_k = 64, 256")]}),
    (TL, "examples/norm/layernorm.py", {"argv": [], "subs": [(r"N, D = 4096, 8192",
                                                              "N, D = 32, 8192")]}),
    (TL, "examples/online_softmax/online_softmax.py", {"argv": [], "subs": [
        (r"\bM = \d+", "M = 4")]}),   # N stays 8192: the kernel's BLOCK_N default
    (TL, "examples/flash_attention/example_mha_fwd_bhsd.py",
     {"call": "main(1, 1, 128, 128, 64, False, False)"}),
    (TL, "examples/flash_attention/example_mha_fwd_bhsd.py",
     {"call": "main(1, 1, 128, 128, 64, True, False)", "name": "causal"}),
    (TL, "examples/flash_attention/example_mha_fwd_bshd.py",
     {"call": "main(1, 2, 128, 64, False, False)"}),
    (TL, "examples/flash_attention/example_gqa_fwd_bshd.py",
     {"call": "main(1, 4, 128, 64, False, 2, False)"}),
    (TL, "examples/flash_decoding/example_gqa_decode.py", {"call": "main(1, 8, 2, 1024, 64)"}),
    (TL, "examples/flash_decoding/example_mha_inference.py", {"call": "main(1, 2, 64, 256, 64)"}),
    (TL, "examples/deepseek_mla/example_mla_decode.py", {"call": "main(1, 16, 1, 256, 64, 32)"}),
    (TL, "examples/topk/example_topk.py", {"call": "main(['--M', '64', '--N', '64'])"}),
    (TL, "examples/gemv/example_gemv.py", {"call": "main(False)", "argv": [
        "--n", "128", "--k", "256"], "as_argv": True}),
    (TL, "examples/gemm_splitk/example_tilelang_gemm_splitk.py",
     {"subs": [(r"\b(M|N|K) = \d+", r"\1 = 128")], "call": "main()"}),
    (TL, "examples/gemm_streamk/example_tilelang_gemm_streamk.py",
     {"subs": [(r"\bm = \d+", "m = 256"), (r"\bn = \d+", "n = 256"), (r"\bk = \d+", "k = 256")],
      "call": "main()"}),
    (TL, "examples/cast/example_per_token_cast_to_fp8.py", {"call": "main(64, 256, 8)"}),
    (TL, "examples/cast/example_group_per_split_token_cast_to_fp8.py",
     {"call": "main(64, 256, 2, 8, [32, 32])"}),
    (TL, "examples/blocksparse_gemm/example_blocksparse_gemm.py",
     {"call": "main()", "argv": ["--m", "256", "--n", "256", "--k", "256"], "as_argv": True}),
    (TL, "examples/dynamic_shape/example_dynamic.py", {"call": "main(128, 128, 128)"}),
    (TL, "examples/quickstart.py", {"argv": [], "subs": [(r"\b(M|N|K) = \d+", r"\1 = 128")]}),
    (TL, "examples/convolution/example_convolution.py", {"call": "main(['--n', '1', '--c', '32', "
                                                         "'--h', '8', '--w', '8', '--f', '32'])"}),
    (TL, "examples/gemm_fp8/example_tilelang_gemm_fp8.py",
     {"subs": [(r"\b(M|N|K) = \d+", r"\1 = 128"), (r"1024", "128")], "call": "main()"}),
    (TL, "examples/hadamard_transform/example_hadamard.py",
     {"call": "main()", "argv": ["--batch", "4", "--dim", "256"], "as_argv": True}),
    (TL, "examples/linear_attention/example_linear_attn_fwd.py", {"call": "main(1, 128, 2, 64)"}),
    (TL, "examples/linear_attention/example_retention_fwd.py",
     {"call": "main()", "argv": ["--B", "1", "--S", "128", "--H", "2", "--D", "64"],
      "as_argv": True}),
    (TL, "examples/gemm_int4/example_tilelang_gemm_int4.py",
     {"subs": [(r"\b(M|N|K) = \d+", r"\1 = 128"), (r"1024", "128")], "call": "main()"}),
    (TL, "examples/deepseek_v32/topk_selector.py",
     {"call": "test_topk_selector(1, 4096, 64)"}),
    (TL, "examples/grouped_gemm/example_grouped_gemm_fwd.py",
     {"argv": ["--batch_sizes", "64, 128", "--K", "128", "--M", "128"]}),
    (TL, "examples/rand/rand_uint.py", {"argv": []}),
]


# the flags that select a variant of an example, not a size (kept by --sizes upstream)
VARIANT_ARGV = {"causal": ["--is_causal"]}


def upstream_sizes(cases: list) -> list:
    """The cases at the examples' own sizes (`--sizes upstream`): each file run as `__main__`
    with no arguments and no substitution of its source, as a user would run it. Every
    substitution of the tables above is about sizes (M/N/K, sequence lengths, heads,
    `test_configs`, a `check_case` call), so none is kept; a case's "call" is dropped too (it
    only passes sizes: `__main__` passes the example's defaults). A named variant keeps its
    non-size flag (VARIANT_ARGV: the causal flash attention). The CPU changes of every mode stay
    (imports, device strings, `.cuda()`/`.npu()`, the torch.cuda/npu stand-ins of PRELUDE)."""
    out = []
    for repo, path, how in cases:
        new = {"argv": VARIANT_ARGV.get(how.get("name"), [])}
        if "name" in how:
            new["name"] = how["name"]
        out.append((repo, path, new))
    return out


def show(repo: str, path: str) -> str:
    git = MIRROR / REPOS[repo] / "repo"
    return subprocess.run(["git", "-C", str(git), "show", f"HEAD:{path}"], capture_output=True,
                          text=True, check=True).stdout


def cpu_source(src: str) -> str:
    """The host code's device choices made the CPU's: device strings and `torch.device(...)`."""
    src = re.sub(r"""(["'])(cuda|npu)(:\d+)?\1""", '"cpu"', src)
    return src


# run in the child before the example: torch on the CPU answering the CUDA/NPU calls the
# examples make for timing and placement (the NPU is simulated by tilelang_mini)
PRELUDE = r'''
import sys, types, time, torch
def _same(self, *a, **k):
    return self
torch.Tensor.cuda = _same
torch.Tensor.npu = _same
class _Event:
    def __init__(self, *a, **k): self.t = 0.0
    def record(self, *a, **k): self.t = time.perf_counter()
    def synchronize(self): pass
    def elapsed_time(self, other): return (other.t - self.t) * 1e3
class _Props:
    multi_processor_count = 24
    name = "cpu"
    total_memory = 1 << 34
    major, minor = 9, 0
def _noop_fn():  # a distinct function per name (torch._dynamo keys its rules by object)
    def _noop(*a, **k): return None
    return _noop
class _NoopFactory:
    def __getattr__(self, name): return _noop_fn()
_n = _NoopFactory()
_dev = types.SimpleNamespace(
    synchronize=_n.a, set_device=_n.b, current_device=lambda: 0, device_count=lambda: 1,
    is_available=lambda: True, Event=_Event, empty_cache=_n.c, manual_seed=_n.d,
    manual_seed_all=_n.e, get_device_properties=lambda *a: _Props(),
    get_device_name=lambda *a: "cpu", get_device_capability=lambda *a: (9, 0),
    Stream=lambda *a, **k: None, current_stream=lambda *a, **k: types.SimpleNamespace(
        synchronize=_n.f, cuda_stream=0), max_memory_allocated=lambda *a: 0,
    reset_peak_memory_stats=_n.g, memory_allocated=lambda *a: 0)
class _Stream:
    def __init__(self, *a, **k): self.cuda_stream = 0
    def synchronize(self): pass
    def wait_stream(self, *a): pass
    def record_event(self, *a): return _Event()
    def __enter__(self): return self
    def __exit__(self, *a): return False
_dev.Stream = _Stream
_dev.stream = lambda s=None: _Stream()
_dev.current_stream = lambda *a, **k: _Stream()
_dev.default_stream = lambda *a, **k: _Stream()
torch.npu = _dev
for _k in ("Stream", "stream", "default_stream", "is_available", "synchronize", "set_device", "current_device", "device_count", "Event",
           "empty_cache", "get_device_properties", "get_device_name", "get_device_capability",
           "current_stream", "manual_seed", "manual_seed_all"):
    setattr(torch.cuda, _k, getattr(_dev, _k))
sys.modules["torch_npu"] = types.ModuleType("torch_npu")
'''

CHILD = r'''
import json, os, sys, traceback
if {sample!r}:  # every few seconds, the main thread's stack to a file: where a timeout went
    # (a SIGALRM handler in the main thread, not faulthandler.dump_traceback_later: its watchdog
    # thread reads other threads' frames unlocked and crashed children with SIGSEGV)
    import signal as _signal, traceback as _tb
    _stk = open({stacks!r}, "w")
    def _sample(signum, frame):
        _stk.write("Timeout (sample)\n" + "".join('  File "%s", line %d in %s\n' % (
            f.f_code.co_filename, ln, f.f_code.co_name) for f, ln in _tb.walk_stack(frame)))
        _stk.flush()
    _signal.signal(_signal.SIGALRM, _sample)
    _signal.setitimer(_signal.ITIMER_REAL, {sample!r}, {sample!r})
sys.path.insert(0, {root!r})
sys.argv = [{local!r}] + {argv!r}
exec({prelude!r})
import tilelang_mini
os.chdir({workdir!r})
sys.path.insert(0, {workdir!r})
src = open({local!r}).read()
result = {{}}
try:
    if {call!r}:
        import ast
        tree = ast.parse(src)
        body = [n for n in tree.body if not (isinstance(n, ast.If) and "__name__" in ast.dump(n.test))]
        ns = {{"__name__": "upstream_example", "__file__": {local!r}}}
        exec(compile(ast.Module(body, type_ignores=[]), {local!r}, "exec"), ns)
        exec(compile({call!r}, "<call>", "exec"), ns)
    else:
        exec(compile(src, {local!r}, "exec"), {{"__name__": "__main__", "__file__": {local!r}}})
    result["status"] = "pass"
except SystemExit as e:
    result["status"] = "pass" if not e.code else "host"
    result["error"] = "SystemExit %r" % (e.code,)
except BaseException as e:
    import re as _re
    tb = traceback.extract_tb(e.__traceback__)
    text = str(e)
    first = text.splitlines()[0] if text else ""
    inside = [f for f in tb if f.filename.startswith({root!r})]  # tilelang_mini, backends/
    where = tb[-1] if tb else None
    # frames after the last one of tilelang_mini: the error came from code it called back
    # (a reference program, a triton baseline given to do_bench): host code, not ours
    last = max((i for i, f in enumerate(tb) if f in inside), default=-1)
    called_back = any({workdir!r} in f.filename or "site-packages" in f.filename and
                      "/numpy/" not in f.filename for f in tb[last + 1:])
    if isinstance(e, tilelang_mini.CompileError) and _re.search(r"\.py:\d+:\d+", text) and \
            "internal" not in first.lower():
        result["status"] = "located"
    elif isinstance(e, ImportError) and "tilelang_mini" in text:  # a name we lack
        result["status"] = "ours"
    elif isinstance(e, AssertionError) and "site-packages" in where.filename and \
            "/torch/testing/" not in where.filename:  # a library's own check (triton's driver)
        result["status"] = "host"
    elif isinstance(e, AssertionError) and (not inside or called_back or "elements differ" in text) \
            or "Mismatched elements" in text or "Not equal to tolerance" in text:
        result["status"] = "wrong"
    elif isinstance(e, tilelang_mini.TileLangMiniError) or inside and not called_back:
        result["status"] = "ours"
    else:
        result["status"] = "host"
    result["error"] = "%s: %s%s" % (type(e).__name__, first[:300],
                                   " (%s:%s)" % (os.path.basename(where.filename), where.lineno)
                                   if where else "")
    result["trace"] = "".join(traceback.format_exception(type(e), e, e.__traceback__))[-3000:]
print("@@RESULT@@" + json.dumps(result), flush=True)
'''


def prepare(repo: str, path: str, how: dict, workdir: Path) -> Path:
    git = MIRROR / REPOS[repo] / "repo"
    folder = str(Path(path).parent)
    names = subprocess.run(["git", "-C", str(git), "ls-tree", "-r", "--name-only", "HEAD",
                            folder + "/"], capture_output=True, text=True,
                           check=True).stdout.split()
    for sib in names:
        rel = Path(sib).relative_to(folder)
        if sib.endswith(".py"):
            (workdir / rel).parent.mkdir(parents=True, exist_ok=True)
            (workdir / rel).write_text(cpu_source(rewrite_imports(show(repo, sib))))
    src = cpu_source(rewrite_imports(show(repo, path)))
    for pat, rep in how.get("subs", []):
        src = re.sub(pat, rep, src)
    local = workdir / Path(path).name
    local.write_text(src)
    return local


def _limit_memory(gb: float):
    """A preexec_fn capping the child's address space (a shared machine: `--mem-gb`)."""
    def limit():
        import resource
        cap = int(gb * (1 << 30))
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    return limit if gb else None


def where_time_went(stacks: str, example: str) -> str:
    """A summary of the stack samples of a child that timed out: per sample, the example's
    innermost line, the two innermost tilelang_mini frames (`file:function`) and [the innermost
    frame of all], most common first."""
    try:
        text = Path(stacks).read_text()
    except OSError:
        return ""
    counts = collections.Counter()
    samples = [t for t in text.split("Timeout (") if "File" in t]
    for sample in samples:
        frames = re.findall(r'File "([^"]+)", line (\d+) in (\S+)', sample)  # innermost first
        ex = next((f"{example}:{ln}" for f, ln, _ in frames if f.endswith("/" + example)), "?")
        ours = " < ".join([f"{Path(f).parent.name}/{Path(f).name}:{fn}" for f, ln, fn in frames
                           if "/tilelang_mini/" in f][:2]) or "-"
        inner = f"{Path(frames[0][0]).name}:{frames[0][2]}" if frames else "?"
        counts[f"{ex} {ours} [{inner}]"] += 1
    top = "; ".join(f"{n}x {k}" for k, n in counts.most_common(4))
    return f" ({len(samples)} samples: {top})"


def run_one(repo, path, how, target, timeout, root, mem_gb=0.0, sample=0.0) -> dict:
    with tempfile.TemporaryDirectory(prefix="tlm-own-") as tmp:
        local = prepare(repo, path, how, Path(tmp))
        call = how.get("call", "")
        argv = how.get("argv", []) if (not call or how.get("as_argv")) else []
        stacks = str(Path(tmp) / "stacks.txt")
        child = CHILD.format(root=str(root), local=str(local), argv=argv, prelude=PRELUDE,
                             workdir=tmp, call=call, sample=sample, stacks=stacks)
        env = dict(os.environ, TILELANG_MINI_TARGET=target, PYTHONPATH=str(root))
        t0 = time.time()
        try:
            proc = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True,
                                  timeout=timeout, env=env, preexec_fn=_limit_memory(mem_gb))
        except subprocess.TimeoutExpired:
            where = where_time_went(stacks, local.name) if sample else ""
            return {"status": "timeout", "error": f"timeout after {timeout:.0f} s{where}",
                    "secs": round(time.time() - t0, 1)}
        secs = round(time.time() - t0, 1)
        for line in proc.stdout.splitlines():
            if line.startswith("@@RESULT@@"):
                r = json.loads(line[len("@@RESULT@@"):])
                r["secs"] = secs
                err = r.get("error", "")
                if "MemoryError" in err.split(":")[0] or "can't allocate memory" in err:
                    r["status"] = "memory"
                return r
        last = (proc.stderr.strip().splitlines() or ["crash"])[-1][:300]
        if proc.returncode == -9 or "MemoryError" in last:  # the kernel's OOM killer, or Python's
            return {"status": "memory", "error": f"killed (rc {proc.returncode}): {last}",
                    "secs": secs}
        return {"status": "ours" if "tilelang_mini" in proc.stderr else "host",
                "error": f"{last} (rc {proc.returncode})", "secs": secs}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--match", default="")
    ap.add_argument("--timeout", type=float, default=90.0)
    ap.add_argument("--targets", default="numpy,llvm")
    ap.add_argument("--json", default="")
    ap.add_argument("--trace", action="store_true")
    ap.add_argument("--root", default=str(ROOT), help="the tilelang_mini checkout to run")
    ap.add_argument("--mem-gb", type=float, default=0.0,
                    help="cap each child's address space (GB; 0: no cap); over it: memory")
    ap.add_argument("--sample", type=float, default=0.0,
                    help="sample the child's stack every SAMPLE s; a timeout says where it was")
    ap.add_argument("--resume", default="", help="a --json file: its cases' results are reused")
    ap.add_argument("--shard", default="0/1", help="i/n: run every n-th case from the i-th")
    ap.add_argument("--sizes", default="own", choices=["own", "alt", "upstream"],
                    help="alt: the size variants of upstream_cases_alt.py instead; upstream: "
                         "the examples' own sizes (no substitution)")
    args = ap.parse_args(argv)
    from upstream_cases_own import MORE  # noqa: F401  (more cases, ascend's)
    results = []
    done = {}
    if args.resume and Path(args.resume).exists():
        for r in json.loads(Path(args.resume).read_text()):
            runs = r.get("runs") or {t: {"status": r["status"], "error": r["error"], "secs": v}
                                     for t, v in r["secs"].items()}
            for t, rt in runs.items():
                done[r["case"], t] = rt
    shard, nshards = (int(v) for v in args.shard.split("/"))
    cases = CASES + MORE
    if args.sizes == "alt":
        from upstream_cases_alt import ALT
        cases = [(repo, path, dict(how, **alt, name=f"{how['name']}/alt{i}" if "name" in how
                                   else f"alt{i}"))
                 for repo, path, how in cases
                 for i, alt in enumerate(ALT.get(f"{repo}:{path}" + (f"[{how['name']}]"
                                                 if "name" in how else ""), []))]
    if args.sizes == "upstream":
        cases = upstream_sizes(cases)
    for n, (repo, path, how) in enumerate(cases):
        if n % nshards != shard:
            continue
        name = f"{repo}:{path}" + (f"[{how['name']}]" if "name" in how else "")
        if args.match and not re.search(args.match, name):
            continue
        res = {}
        for target in args.targets.split(","):
            if (name, target) in done:
                res[target] = done[name, target]
            else:
                res[target] = run_one(repo, path, how, target, args.timeout, args.root,
                                      args.mem_gb, args.sample)
            if res[target]["status"] != "pass":
                break
        order = ["ours", "wrong", "memory", "timeout", "host", "located"]
        worst = next((s for s in order if any(r["status"] == s for r in res.values())), "pass")
        err = next((f"[{t}] {r.get('error', '')}" for t, r in res.items()
                    if r["status"] != "pass"), "")
        results.append({"case": name, "status": worst, "error": err,
                        "secs": {t: r.get("secs") for t, r in res.items()},
                        "runs": {t: {k: v for k, v in r.items() if k != "trace"}
                                 for t, r in res.items()}})
        secs = " ".join(f"{t} {r.get('secs')}" for t, r in res.items())
        print(f"| {name} | {worst} | {secs} | {err[:220]} |", flush=True)
        if args.json:  # after each case: a long run that is stopped keeps what it did
            Path(args.json).write_text(json.dumps(results, indent=1))
        if args.trace and worst != "pass":
            for r in res.values():
                if "trace" in r:
                    print(r["trace"])
    tally = collections.Counter(r["status"] for r in results)
    print(f"\n{len(results)} examples: " + ", ".join(f"{k} {v}" for k, v in sorted(tally.items())))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
