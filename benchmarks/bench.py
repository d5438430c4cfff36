"""The numbers tilelang_mini is measured by (docs: /work/shared/design.md section 7, README).

    python benchmarks/bench.py [--quick] [--json PATH] [--repeats N] [--in-process]
    tilelang-mini bench        [--quick] [--json PATH] [--repeats N] [--in-process]

One run prints, side by side, medians of several interleaved runs (after a warm-up) and ratios:

* GEMM example through target="llvm" against NumPy's matmul, one thread on both sides
  (TILELANG_MINI_NUM_THREADS=1; OPENBLAS_NUM_THREADS=1 set before NumPy is imported, and
  threadpoolctl's limit when it is installed): fp32, and bf16 in / fp32 out against NumPy fp32;
* the llvm GEMM on all threads against one thread (and NumPy's own scaling, for context);
* rmsnorm and prenorm through llvm: achieved bandwidth (bytes read + written / time) against
  np.copyto moving the same number of bytes;
* cold compile of the GEMM example to a callable kernel in a fresh process (TILELANG_MINI_CACHE=0)
  and a cache hit in a new process whose TILELANG_MINI_CACHE_DIR a previous process filled.

Each ratio is printed next to its target as PASS or MISS; nothing is asserted. Every measured
kernel's output is checked once against a float64 NumPy reference and its max error printed.

Measurements run in subprocesses whose environment lacks OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE
(they pin OpenBLAS to a slower kernel on some machines): NumPy is measured on its best kernel.
`--in-process` (and the test suite) runs everything in the calling process instead: quicker,
but the environment is whatever NumPy was imported with and no compile is cold.

Only the standard library is imported at the top: the compile worker times its own imports.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
SCRUBBED = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")  # removed for the measuring processes
# tilelang_mini settings that would distort the numbers (verifier, printing) or that the
# benchmark sets itself (threads)
STRIPPED = ("TILELANG_MINI_VERIFY", "TILELANG_MINI_PRINT_AFTER", "TILELANG_MINI_TIME_PASSES",
            "TILELANG_MINI_NUM_THREADS", "TILELANG_MINI_TARGET")
RESULT_TAG = "BENCH-RESULT "

# the targets: ratio >= value (higher is better), or seconds < value
TARGETS = {
    "gemm_fp32": 0.9, "gemm_bf16": 1.5, "threads": 1.8, "bandwidth": 0.8,
    "cold_compile_s": 0.5, "cache_hit_s": 0.020,
}


@dataclass(frozen=True)
class Config:
    name: str
    gemm: tuple[int, ...]               # square GEMM sizes, one thread
    threads: int                        # GEMM size for one thread vs all threads
    rmsnorm: tuple[int, int, int]       # M, N, blk_m (float32)
    prenorm: tuple[int, int, int]       # M, N, K (A bfloat16, B float32)
    compile: int                        # GEMM size compiled for the compile-time rows
    repeats: int = 7
    warmup: int = 1
    compile_runs: int = 5               # fresh processes per compile row (median)
    # issue-12 rows (benchmarks/i12.py)
    skinny_mk: tuple[int, int] = (4096, 8192)
    skinny_n: tuple[int, ...] = (8, 16, 24, 32, 64, 136, 200, 256)
    interp_gemm: tuple[int, ...] = (256, 512)
    interp_rms: tuple[tuple[int, int, int], ...] = ((512, 512, 8), (4096, 4096, 2))
    interp_softmax: tuple[int, int] = (1024, 1024)
    interp_flash: tuple[int, int, int] = (4, 512, 64)                # BH, S, D (fp16)
    interp_elementwise: tuple[int, int] = (2048, 2048)
    interp_gemm_small: tuple[int, ...] = (512,)        # GEMM with 32x32x32 tiles
    interp_layernorm: tuple[int, int] = (4096, 1024)
    coro: tuple[tuple[int, int, int], ...] = ((2, 256, 64), (8, 512, 64))   # heads, seq, dim
    coro_interp_rows: int = 512         # the numpy target runs the shapes of <= heads*seq rows
    sim_blocks: int = 4
    grouped: tuple[int, int, int, int] = (32, 32768, 4096, 7168)   # G, M, N, K
    grouped_masked: tuple[int, int, int, int] = (32, 4096, 4096, 7168)   # G, max M, N, K
    import_runs: int = 5
    unroll: tuple[int, int] = (16, 64)                 # insert_sync/split_cores scaling steps
    compile_examples: tuple[str, ...] = ()             # () = every example


FULL = Config("full", gemm=(1024, 2048), threads=2048, rmsnorm=(16384, 2048, 8),
              prenorm=(4096, 24, 8192), compile=1024, repeats=7, compile_runs=5)
QUICK = Config("quick", gemm=(512, 1024), threads=1024, rmsnorm=(4096, 2048, 8),
               prenorm=(1024, 24, 4096), compile=1024, repeats=3, compile_runs=3,
               skinny_mk=(1024, 4096), skinny_n=(8, 24, 136, 256), interp_rms=((512, 512, 8),),
               grouped=(8, 8192, 4096, 7168), import_runs=3)
TINY = Config("tiny", gemm=(64,), threads=128, rmsnorm=(64, 256, 8), prenorm=(64, 24, 256),
              compile=64, repeats=1, warmup=0, compile_runs=1,  # the smoke test's shapes
              skinny_mk=(64, 128), skinny_n=(8, 24), interp_gemm=(64,),
              interp_rms=((64, 64, 8),), interp_softmax=(64, 64), interp_flash=(1, 64, 64),
              interp_elementwise=(64, 256), interp_gemm_small=(64,), interp_layernorm=(64, 128),
              coro=((1, 64, 32),), sim_blocks=1,
              grouped=(2, 256, 256, 128), grouped_masked=(2, 256, 256, 128),
              import_runs=1, unroll=(2, 8), compile_examples=("gemm", "rmsnorm"))


@dataclass
class Row:
    key: str
    name: str
    value: str                          # our measurement, formatted
    baseline: str = ""                  # what it is compared with, formatted
    ratio: float | None = None          # higher is better
    target: str = ""                    # e.g. ">= 0.9x", "< 0.5 s", "(info)"
    verdict: str = "-"                  # PASS | MISS | WRONG | FAILED | -
    max_err: float | None = None
    other_load: float | None = None     # CPUs other processes used meanwhile (noise indicator)
    verified: bool | None = None
    data: dict = field(default_factory=dict)  # raw seconds, bytes, samples


# ------------------------------------------------------------------------------ helpers

sys.path.insert(0, str(Path(__file__).resolve().parent))  # measure.py, beside this file
sys.path.insert(1, str(REPO))   # this checkout's package (and workers'), not the installed one
from measure import (  # noqa: E402
    LOAD, _all_threads, _check, _env, _examples, _interleaved, _ms, _numpy_threads, _OtherLoad,
    _runner, blas_info,
)


def _ratio_row(row: Row, target: float) -> Row:
    row.target = f">= {target:g}x"
    if row.verified is False:
        row.verdict = "WRONG"
    else:
        row.verdict = "PASS" if row.ratio >= target else "MISS"
    return row


# ------------------------------------------------------------------------------ workers
# Each worker measures one group in the current process and returns a JSON-able dict.


def work_gemm(p: dict) -> dict:
    """GEMM fp32 and bf16->fp32 through llvm vs NumPy fp32 matmul, one thread each."""
    _examples()
    import numpy as np
    import tilelang_mini
    from tilelang_mini.ir import dtypes
    from gemm import matmul, reference
    from backends.llvm.runtime import host_target
    bf16 = dtypes.to_numpy("bfloat16")
    rows = []
    with _env(TILELANG_MINI_NUM_THREADS="1"), _numpy_threads(1):
        info = {"blas": blas_info(), "llvm_cpu": host_target().cpu,
                "avx512bf16": host_target().bf16}
        for n in p["gemm"]:
            rng = np.random.default_rng(n)
            a32 = rng.standard_normal((n, n), dtype=np.float32)
            b32 = rng.standard_normal((n, n), dtype=np.float32)
            abf, bbf = a32.astype(bf16), b32.astype(bf16)
            k32 = tilelang_mini.compile(matmul.factory(n, n, n, dtype="float32"), out_idx=[-1],
                                        target="llvm")
            kbf = tilelang_mini.compile(matmul.factory(n, n, n, dtype="bfloat16"), out_idx=[-1],
                                        target="llvm")
            c32, cbf, cnp = (np.empty((n, n), np.float32) for _ in range(3))
            fns = {"llvm_fp32": _runner(k32, [a32, b32, c32]),
                   "llvm_bf16": _runner(kbf, [abf, bbf, cbf]),
                   "numpy_fp32": lambda: np.matmul(a32, b32, out=cnp)}
            for f in fns.values():
                f()
            err32, ok32 = _check(c32, reference(a32, b32), "float32", n)
            errbf, okbf = _check(cbf, reference(abf, bbf), "float32", n)
            med, samples = _interleaved(fns, p["repeats"], p["warmup"])
            load = LOAD["cpus"]
            flops = 2.0 * n ** 3
            t_np = med["numpy_fp32"]
            base = f"{_ms(t_np)} {flops / t_np / 1e9:.0f} GF/s numpy fp32"
            for key, dt, err, ok in (("fp32", "fp32", err32, ok32),
                                     ("bf16", "bf16->fp32", errbf, okbf)):
                t = med[f"llvm_{key}"]
                rows.append(asdict(_ratio_row(Row(
                    f"gemm_{key}_{n}", f"GEMM {dt}, 1 thread, {n}^3",
                    f"{_ms(t)} {flops / t / 1e9:.0f} GF/s", base, t_np / t,
                    max_err=err, verified=ok, other_load=load,
                    data={"seconds": t, "numpy_seconds": t_np, "samples": samples[f"llvm_{key}"],
                          "numpy_samples": samples["numpy_fp32"]}), TARGETS[f"gemm_{key}"])))
    return {"rows": rows, "info": info}


def work_threads(p: dict) -> dict:
    """The llvm GEMM (fp32) on all threads vs one thread; NumPy's own scaling for context.
    TILELANG_MINI_NUM_THREADS is read when a kernel runs, so one kernel serves both settings."""
    _examples()
    import numpy as np
    import tilelang_mini
    from gemm import matmul, reference
    n = p["threads"]
    nthreads = _all_threads()
    rng = np.random.default_rng(n + 1)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    k = tilelang_mini.compile(matmul.factory(n, n, n, dtype="float32"), out_idx=[-1],
                              target="llvm")
    c1, call, cnp = (np.empty((n, n), np.float32) for _ in range(3))
    run1, runall = _runner(k, [a, b, c1]), _runner(k, [a, b, call])

    def one():
        with _env(TILELANG_MINI_NUM_THREADS="1"):
            run1()

    def every():
        with _env(TILELANG_MINI_NUM_THREADS=str(nthreads)):
            runall()

    # NumPy stays on one thread while llvm is timed: OpenBLAS's idle workers spin for a while
    # after a multi-threaded call and would steal a core from the llvm runs
    with _numpy_threads(1):
        one()
        every()
        want = reference(a, b)
        err1, ok1 = _check(c1, want, "float32", n)
        errall, okall = _check(call, want, "float32", n)
        med, samples = _interleaved({"llvm_1": one, "llvm_all": every}, p["repeats"],
                                    p["warmup"])
        load = LOAD["cpus"]
        # NumPy's own scaling (context only): one thread first, then all, not interleaved
        np_med, _ = _interleaved({"numpy_1": lambda: np.matmul(a, b, out=cnp)}, p["repeats"],
                                 p["warmup"])
    np_all, _ = _interleaved({"numpy_all": lambda: np.matmul(a, b, out=cnp)}, p["repeats"],
                             p["warmup"])
    np_load = LOAD["cpus"]
    med.update(np_med)
    med.update(np_all)
    flops = 2.0 * n ** 3
    rows = [asdict(_ratio_row(Row(
        f"threads_{n}", f"GEMM fp32, {nthreads} threads vs 1, {n}^3",
        f"{_ms(med['llvm_all'])} {flops / med['llvm_all'] / 1e9:.0f} GF/s",
        f"{_ms(med['llvm_1'])} {flops / med['llvm_1'] / 1e9:.0f} GF/s llvm 1 thread",
        med["llvm_1"] / med["llvm_all"], max_err=max(err1, errall), verified=ok1 and okall,
        other_load=load,
        data={"threads": nthreads, "seconds": med["llvm_all"], "one_thread_seconds": med["llvm_1"],
              "samples": samples["llvm_all"], "one_thread_samples": samples["llvm_1"]}),
        TARGETS["threads"])),
        asdict(Row(
            f"numpy_threads_{n}", f"  context: NumPy matmul {nthreads} threads vs 1",
            f"{_ms(med['numpy_all'])} {flops / med['numpy_all'] / 1e9:.0f} GF/s",
            f"{_ms(med['numpy_1'])} {flops / med['numpy_1'] / 1e9:.0f} GF/s numpy 1 thread",
            med["numpy_1"] / med["numpy_all"], target="(info)", other_load=np_load,
            data={"seconds": med["numpy_all"], "one_thread_seconds": med["numpy_1"]}))]
    return {"rows": rows, "info": {"threads": nthreads}}


def work_bandwidth(p: dict) -> dict:
    """rmsnorm and prenorm through llvm: bytes read + written per second, against np.copyto of
    an array half that size (which reads and writes it: the same bytes moved). One thread is
    the comparison (np.copyto is single-threaded); all threads are shown for context.

    Only rmsnorm has a bandwidth goal (issue #12): prenorm's row is context, because prenorm is
    compute-bound (4096x24x8192 is 1.6 GFLOP, ~14 ms at this host's one-thread FMA roof, against
    ~3 ms to move its 64 MB at copy bandwidth); its goals are the roof and NumPy rows."""
    _examples()
    import numpy as np
    import tilelang_mini
    from tilelang_mini.ir import dtypes
    from rmsnorm import rms_norm, reference as rms_reference
    from prenorm import hc_prenorm, reference as prenorm_reference
    nthreads = _all_threads()
    rows = []

    M, N, blk_m = p["rmsnorm"]
    x = np.random.default_rng(1).standard_normal((M, N), dtype=np.float32)
    y = np.empty_like(x)
    k_rms = tilelang_mini.compile(rms_norm.factory(M, N, blk_m=blk_m), out_idx=[-1], target="llvm")
    cases = [("rmsnorm", f"rmsnorm fp32 {M}x{N} (blk_m {blk_m})", k_rms, [x, y],
              lambda: [_check(y, rms_reference(x), "float32")], True)]

    M2, N2, K2 = p["prenorm"]
    a = np.random.default_rng(2).standard_normal((M2, K2)).astype(dtypes.to_numpy("bfloat16"))
    b = np.random.default_rng(3).standard_normal((N2, K2), dtype=np.float32)
    d, ss = np.empty((M2, N2), np.float32), np.empty((M2,), np.float32)
    k_pre = tilelang_mini.compile(hc_prenorm.factory(M2, N2, K2), out_idx=[-2, -1], target="llvm")

    def check_prenorm():
        want_d, want_s = prenorm_reference(a, b)
        return [_check(d, want_d, "float32", K2), _check(ss, want_s, "float32", K2)]

    cases.append(("prenorm", f"prenorm bf16 {M2}x{N2}x{K2} (compute-bound)", k_pre,
                  [a, b, d, ss], check_prenorm, False))

    for key, name, kernel, args, check, has_goal in cases:
        nbytes = sum(arr.nbytes for arr in args)
        src = np.ones(nbytes // 8, np.float32)  # copyto reads + writes 2 * src.nbytes = nbytes
        dst = np.empty_like(src)
        run = _runner(kernel, args)

        def one(run=run):
            with _env(TILELANG_MINI_NUM_THREADS="1"):
                run()

        def every(run=run):
            with _env(TILELANG_MINI_NUM_THREADS=str(nthreads)):
                run()

        one()
        checks = check()
        err, ok = max(c[0] for c in checks), all(c[1] for c in checks)
        med, samples = _interleaved({"llvm_1": one, "llvm_all": every,
                                     "copy": lambda: np.copyto(dst, src)},
                                    p["repeats"], p["warmup"])
        load = LOAD["cpus"]
        moved = 2 * src.nbytes
        bw = {k: (nbytes if k != "copy" else moved) / t / 1e9 for k, t in med.items()}
        base = f"{bw['copy']:.1f} GB/s np.copyto"
        row = Row(
            f"{key}_bw", f"{name}, 1 thread", f"{bw['llvm_1']:.1f} GB/s {_ms(med['llvm_1'])}",
            base, bw["llvm_1"] / bw["copy"], max_err=err, verified=ok, other_load=load,
            data={"bytes": nbytes, "seconds": med["llvm_1"], "copy_seconds": med["copy"],
                  "copy_bytes": moved, "samples": samples["llvm_1"],
                  "copy_samples": samples["copy"]})
        if has_goal:
            row = _ratio_row(row, TARGETS["bandwidth"])
        else:
            row.target, row.verdict = "(info)", "WRONG" if ok is False else "-"
        rows.append(asdict(row))
        rows.append(asdict(Row(
            f"{key}_bw_all", f"  context: {key} on {nthreads} threads",
            f"{bw['llvm_all']:.1f} GB/s {_ms(med['llvm_all'])}", base,
            bw["llvm_all"] / bw["copy"], target="(info)", other_load=load,
            data={"bytes": nbytes, "seconds": med["llvm_all"], "threads": nthreads})))
    return {"rows": rows, "info": {}}


def work_compile(p: dict) -> dict:
    """One compile of the GEMM example (fp32, n^3) to a callable llvm kernel: the compile call
    is timed once the process is set up (imports done, the llvm backend loaded; that set-up is
    reported beside it); then the kernel runs once and is checked. Whether the cache
    is used and where is the caller's environment (TILELANG_MINI_CACHE, TILELANG_MINI_CACHE_DIR)."""
    t0 = time.perf_counter()
    _examples()
    import tilelang_mini
    from gemm import matmul, reference
    from tilelang_mini.runtime.backends import get_backend
    get_backend("llvm")  # process set-up: load the backend (llvmlite and LLVM's shared library)
    t1 = time.perf_counter()
    runtime = sys.modules.get("backends.llvm.runtime")
    before = dict(runtime.STATS) if runtime is not None else {}
    n = p["compile"]
    with _env(TILELANG_MINI_TARGET="llvm"):
        factory = tilelang_mini.jit(out_idx=matmul.out_idx)(matmul.factory)  # a fresh memo
        t2 = time.perf_counter()
        kernel = factory(n, n, n, dtype="float32")
        t3 = time.perf_counter()
    from backends.llvm.runtime import STATS
    stats = {k: v - before.get(k, 0) for k, v in STATS.items()}
    with _env(TILELANG_MINI_TARGET="llvm"):  # the same again, now that the process is warm
        again = tilelang_mini.jit(out_idx=matmul.out_idx)(matmul.factory)
        t4 = time.perf_counter()
        again(n, n, n, dtype="float32")
        t5 = time.perf_counter()
    import numpy as np
    rng = np.random.default_rng(7)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    err, ok = _check(kernel(a, b), reference(a, b), "float32", n)
    return {"import_seconds": t1 - t0, "compile_seconds": t3 - t2, "stats": stats,
            "again_seconds": t5 - t4,
            "target": kernel.target, "max_err": err, "verified": ok and kernel.target == "llvm"}


WORKERS = {"gemm": work_gemm, "threads": work_threads, "bandwidth": work_bandwidth,
           "compile": work_compile}
import i12  # noqa: E402 - the issue-12 rows, beside this file
WORKERS.update({name: (lambda p, f=f: f(p, Row)) for name, f in i12.WORKERS.items()})


# ------------------------------------------------------------------------------ driver


def _worker_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in SCRUBBED and k not in STRIPPED}
    for k, v in extra.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = str(v)
    return env


def _call(name: str, params: dict, isolate: bool, env: dict | None = None) -> dict:
    """Run worker `name`: in a fresh interpreter (isolate) with `env`, or in this process."""
    if not isolate:
        return WORKERS[name](params)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", name,
           "--params", json.dumps(params)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=str(REPO))
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(RESULT_TAG):
            return json.loads(line[len(RESULT_TAG):])
    tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
    raise RuntimeError(f"worker {name!r} failed (exit status {proc.returncode}):\n{tail}")


def _compile_rows(cfg: Config, params: dict, isolate: bool) -> tuple[list, dict]:
    runs = max(1, cfg.compile_runs)
    n = cfg.compile
    cold, warm = [], []
    tmp = tempfile.mkdtemp(prefix="tlm-bench-")
    cache = os.path.join(tmp, "cache")
    # Python's own bytecode cache is warm, as after an install: in a private tree (no file is
    # written next to the sources), primed by one untimed process. Without it (e.g. under
    # PYTHONDONTWRITEBYTECODE=1) every new process would also compile the Python sources.
    pyc = {"PYTHONPYCACHEPREFIX": os.path.join(tmp, "pyc"), "PYTHONDONTWRITEBYTECODE": None}
    try:
        with _OtherLoad() as other:
            if isolate:
                _call("compile", params, True, _worker_env(TILELANG_MINI_CACHE="0", **pyc))
                for _ in range(runs):
                    cold.append(_call("compile", params, True,
                                      _worker_env(TILELANG_MINI_CACHE="0", **pyc)))
                env = _worker_env(TILELANG_MINI_CACHE="1", TILELANG_MINI_CACHE_DIR=cache, **pyc)
                fill = _call("compile", params, True, env)
                for _ in range(runs):
                    warm.append(_call("compile", params, True, env))
            else:
                with _env(TILELANG_MINI_CACHE="0"):
                    for _ in range(runs):
                        cold.append(work_compile(params))
                with _env(TILELANG_MINI_CACHE="1", TILELANG_MINI_CACHE_DIR=cache):
                    fill = work_compile(params)
                    for _ in range(runs):
                        warm.append(work_compile(params))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    load = other.cpus
    where = "new process" if isolate else "in-process (NOT cold)"
    rows = []
    for key, name, results, shown, expect in (
            ("cold_compile", f"cold compile GEMM fp32 {n}^3, {where}, cache off", cold,
             "< 0.5 s", lambda s: s["compiles"] == 1 and s["cache_hits"] == 0),
            ("cache_hit", f"cache-hit compile, {where}, warm cache dir", warm, "< 20 ms",
             lambda s: s["cache_hits"] == 1 and s["compiles"] == 0)):
        t = statistics.median(r["compile_seconds"] for r in results)
        limit = TARGETS[f"{key}_s"]
        ok = all(r["verified"] for r in results)
        as_expected = all(expect(r["stats"]) for r in results)
        verdict = ("WRONG" if not ok else
                   ("NO HIT" if key == "cache_hit" else "NOT COLD") if not as_expected else
                   "PASS" if t < limit else "MISS")
        rows.append(asdict(Row(
            key, name, _ms(t), f"median of {len(results)}; the compile call alone: process "
            f"set-up before it (imports, loading the llvm backend) took "
            f"{_ms(statistics.median(r['import_seconds'] for r in results))}",
            None, shown, verdict, max_err=max(r["max_err"] for r in results), verified=ok,
            other_load=load,
            data={"seconds": t, "samples": [r["compile_seconds"] for r in results],
                  "stats": [r["stats"] for r in results]})))
        again = statistics.median(r["again_seconds"] for r in results)
        rows.append(asdict(Row(
            f"{key}_again", "  context: the same compile again in that process", _ms(again),
            "imports and one-time set-up done", target="(info)", data={"seconds": again})))
    return rows, {"cache_fill_seconds": fill["compile_seconds"], "cache_fill_stats": fill["stats"]}


def run(cfg: Config, isolate: bool = True, repeats: int | None = None, log=print) -> dict:
    """Measure everything; return {"config", "environment", "info", "rows", "errors"}."""
    params = {"gemm": list(cfg.gemm), "threads": cfg.threads, "rmsnorm": list(cfg.rmsnorm),
              "prenorm": list(cfg.prenorm), "compile": cfg.compile,
              "repeats": repeats or cfg.repeats, "warmup": cfg.warmup,
              **{k: getattr(cfg, k) for k in ("skinny_mk", "skinny_n", "interp_gemm",
                                              "interp_rms", "interp_softmax", "interp_flash",
                                              "interp_elementwise", "interp_gemm_small",
                                              "interp_layernorm", "coro", "coro_interp_rows",
                                              "sim_blocks", "grouped", "grouped_masked",
                                              "import_runs", "compile_runs", "unroll",
                                              "compile_examples")}}
    scrubbed = {k: os.environ.get(k) for k in SCRUBBED}
    result = {"config": {**asdict(cfg), "repeats": params["repeats"], "isolated": isolate},
              "environment": {"scrubbed": scrubbed, "python": sys.version.split()[0],
                              "cpu": _cpu_name(), "cpus": os.cpu_count()},
              "info": {}, "rows": [], "errors": []}
    single = _worker_env(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    every = _worker_env(OPENBLAS_NUM_THREADS=None, OMP_NUM_THREADS=None, MKL_NUM_THREADS=None)
    groups = [("gemm", single), ("threads", every), ("bandwidth", single), ("compile", None),
              ("skinny", single), ("interp", single), ("coroutine", single), ("sim", single),
              ("estimate", single),
              ("compile_all", single), ("import", single)]
    result["environment"]["loadavg_before"] = _loadavg()
    for name, env in groups:
        log(f"[bench] measuring {name} ...")
        try:
            if name == "compile":
                rows, info = _compile_rows(cfg, params, isolate)
            else:
                out = _call(name, params, isolate, env)
                rows, info = out["rows"], out["info"]
        except Exception as err:  # noqa: BLE001 - report it and go on with the other groups
            result["errors"].append(f"{name}: {type(err).__name__}: {err}")
            result["rows"].append(asdict(Row(name, f"{name} (failed)", "-", verdict="FAILED")))
            continue
        result["rows"].extend(rows)
        result["info"].update(info)
    result["environment"]["loadavg_after"] = _loadavg()
    return result


def _loadavg():
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform
    return platform.processor() or platform.machine()


def format_table(result: dict) -> str:
    cfg, env, info = result["config"], result["environment"], result["info"]
    lines = [f"tilelang_mini benchmark ({cfg['name']}): python {env['python']}, "
             f"CPU {env['cpu']} x {env['cpus']}, llvm host cpu {info.get('llvm_cpu', '?')} "
             f"(avx512bf16: {info.get('avx512bf16', '?')})"]
    was = ", ".join(f"{k}={v!r}" if v is not None else f"{k} unset"
                    for k, v in env["scrubbed"].items())
    if cfg["isolated"]:
        lines.append(f"NumPy is measured on its best kernel: {' and '.join(SCRUBBED)} are removed "
                     f"from the environment of the measuring subprocesses (here: {was}).")
    else:
        lines.append(f"IN-PROCESS run: the environment is as NumPy was imported with ({was}); "
                     f"compiles are not cold; numbers are indicative only.")
    lines.append(f"NumPy BLAS: {info.get('blas', '?')}")
    lines.append(f"Load average (1/5/15 min) before {env.get('loadavg_before')}, after "
                 f"{env.get('loadavg_after')}: other work on the machine skews the numbers.")
    lines.append(f"Medians of {cfg['repeats']} interleaved runs after {cfg['warmup']} warm-up "
                 f"round(s); outputs preallocated on both sides. 1-thread rows: "
                 f"TILELANG_MINI_NUM_THREADS=1 and NumPy's BLAS limited to 1 thread.")
    if cfg["isolated"]:
        lines.append("Compile rows: each a new process, timed from its imports being done to a "
                     "callable kernel; Python bytecode cached (primed by an untimed process).")
    lines.append("other load: CPUs that other processes kept busy meanwhile (0 = quiet machine).")
    head = ("benchmark", "tilelang_mini llvm", "baseline", "ratio", "target", "verdict",
            "max err", "other load")
    table = [head]
    for r in result["rows"]:
        table.append((r["name"], r["value"], r["baseline"],
                      _ratio_text(r["ratio"]) if r["ratio"] is not None else "",
                      r["target"], r["verdict"],
                      f"{r['max_err']:.2g}" if r["max_err"] is not None else "",
                      f"{r['other_load']:.2f}" if r.get("other_load") is not None else ""))
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    for i, row in enumerate(table):
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    judged = [r for r in result["rows"] if r["verdict"] not in ("-", "")]
    met = [r for r in judged if r["verdict"] == "PASS"]
    lines.append(f"Goals: {len(met)} of {len(judged)} rows with a goal meet it"
                 + ("; not met: " + ", ".join(f"{r['key']} ({r['verdict']})" for r in judged
                                              if r["verdict"] != "PASS") if len(met) < len(judged)
                    else "") + ".")
    for e in result["errors"]:
        lines.append(f"ERROR {e}")
    return "\n".join(lines)


def _ratio_text(ratio: float) -> str:
    """A ratio to two decimals, rounded down: never shown above what was measured (1.797 is
    "1.79x", so a MISS against ">= 1.8x" does not read as 1.80x)."""
    return f"{math.floor(ratio * 100 + 1e-9) / 100:.2f}x"  # (0.29 * 100 is 28.999...)


def build_parser() -> argparse.ArgumentParser:
    """The options of `python benchmarks/bench.py` and `tilelang-mini bench` (which forwards)."""
    p = argparse.ArgumentParser(prog="bench.py", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true",
                   help="smaller shapes (GEMM 512^3/1024^3) and fewer repeats: a smoke run")
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON to PATH")
    p.add_argument("--repeats", type=int, help="timed runs per measurement (default 7, quick 3)")
    p.add_argument("--in-process", action="store_true",
                   help="no subprocesses: the environment is not cleaned, no compile is cold")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--params", help=argparse.SUPPRESS)
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.worker:  # a measuring subprocess: one JSON line on stdout
        out = WORKERS[args.worker](json.loads(args.params))
        print(RESULT_TAG + json.dumps(out), flush=True)
        return 0
    return bench(quick=args.quick, json_path=args.json, repeats=args.repeats,
                 isolate=not args.in_process)


def bench(quick: bool = False, json_path: str | None = None, repeats: int | None = None,
          isolate: bool = True, cfg: Config | None = None) -> int:
    """Run the benchmark, print the table (and write JSON); exit status 1 if a group failed or a
    kernel computed a wrong result (a MISS of a target is not a failure). `cfg` overrides the
    shapes of `quick` (the smoke test passes TINY)."""
    result = run(cfg or (QUICK if quick else FULL), isolate=isolate, repeats=repeats,
                 log=lambda m: print(m, file=sys.stderr, flush=True))
    print(format_table(result))
    if json_path:
        Path(json_path).write_text(json.dumps(result, indent=2))
        print(f"[bench] wrote {json_path}")
    bad = result["errors"] or any(r["verdict"] in ("WRONG", "FAILED") for r in result["rows"])
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
