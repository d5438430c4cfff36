"""Where an llvm kernel spends its time: sampled with `perf record -e cpu-clock` (a software
clock, so it works where hardware counters are not available), mapped onto the disassembly of the
kernel's object code.

    python benchmarks/profile_llvm.py examples/prenorm.py --args 4096 24 8192 [--seconds 4]
                                      [--kernel NAME] [--threads 1] [--top 20] [--lines]

The example's first @jit factory (or --kernel) is compiled for llvm with the given arguments and
called on random inputs in a loop; perf samples that process only while the loop runs (after
compilation and input set-up). Samples are attributed to basic blocks of the JIT code (runs of
instructions ending in a jump) and printed hottest first with their instruction mix, e.g. a
micro-kernel's FMA loop, a converting copy stalled on memory, a packing loop; `--lines` also
prints every instruction with at least 0.2% of the samples. Needs `perf` and `objdump` on PATH.
"""
from __future__ import annotations

import argparse
import collections
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _factory(path: str, name: str | None):
    sys.path.insert(0, str(Path(path).resolve().parent))
    spec = importlib.util.spec_from_file_location(Path(path).stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    jits = {k: v for k, v in vars(mod).items() if type(v).__name__ == "JITFactory"}
    if not jits:
        raise SystemExit(f"{path} defines no @tilelang_mini.jit factory")
    if name is not None:
        if name not in jits:
            raise SystemExit(f"no factory {name!r} in {path} (have: {', '.join(jits)})")
        return jits[name], mod
    return next(iter(jits.values())), mod


def _inputs(kernel, seed=0):
    """Random inputs for the kernel's non-output parameters (normal floats, small ints)."""
    import numpy as np
    from tilelang_mini.ir import dtypes
    rng = np.random.default_rng(seed)
    out = []
    for p in kernel.inputs:
        dt = dtypes.to_numpy(p.dtype)
        if np.issubdtype(dt, np.integer):
            out.append(rng.integers(0, 4, p.shape).astype(dt))
        else:
            out.append(rng.standard_normal(p.shape).astype(dt))
    return out


def child(args) -> None:
    """Compile, set up, signal readiness (pid, base address of tlm_kernel, object file) and
    run the kernel in a loop for the requested time."""
    os.environ["TILELANG_MINI_NUM_THREADS"] = str(args.threads)
    import tilelang_mini
    fac, mod = _factory(args.file, args.kernel)
    fargs = [eval(a, {}) for a in args.args] if args.args else list(mod.DEFAULT_ARGS)  # noqa: S307
    k = tilelang_mini.compile(fac.factory(*fargs), out_idx=fac.out_idx, target="llvm")
    art = k.artifact
    inputs = _inputs(k)
    k(*inputs)
    Path(args.workdir, "kernel.o").write_bytes(art.obj)
    base = art.engine.get_function_address("tlm_kernel")
    Path(args.workdir, "ready").write_text(f"{os.getpid()} {base}")
    end = time.time() + args.seconds + 1.0
    runs = 0
    while time.time() < end:
        k(*inputs)
        runs += 1
    print(f"{runs} runs of {fac.factory.__name__}{tuple(fargs)}", file=sys.stderr)


def _blocks(obj: Path):
    """[(offset, text)] of the object's instructions, from objdump, and tlm_kernel's offset."""
    dis = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(obj)], capture_output=True,
                         text=True, check=True).stdout
    insns, start = [], None
    for line in dis.splitlines():
        m = re.match(r"([0-9a-f]+) <tlm_kernel>:", line)
        if m:
            start = int(m.group(1), 16)
        m = re.match(r"\s*([0-9a-f]+):\s*(.*)", line)
        if m:
            insns.append((int(m.group(1), 16), m.group(2).strip()))
    return insns, start or 0


def report(args, samples: collections.Counter, other: collections.Counter, insns, top: int):
    total = sum(samples.values()) + sum(other.values())
    if not total:
        print("no samples (is perf allowed to sample this process?)")
        return
    print(f"{total} samples; JIT code {sum(samples.values()) / total:.1%}")
    for dso, c in other.most_common(5):
        print(f"  {c / total:6.1%}  {dso}")
    blocks, cur = [], []
    for off, text in insns:
        cur.append((off, text))
        if text.startswith(("j", "ret", "call")):
            blocks.append(cur)
            cur = []
    if cur:
        blocks.append(cur)
    rows = []
    for blk in blocks:
        c = sum(samples.get(o, 0) for o, _ in blk)
        if c:
            mix = collections.Counter(t.split()[0] for _, t in blk if t)
            rows.append((c, blk[0][0], blk[-1][0], len(blk), mix.most_common(5)))
    print("\nhottest basic blocks of tlm_kernel (offsets in the object's .text):")
    for c, lo, hi, n, mix in sorted(rows, reverse=True)[:top]:
        ops = ", ".join(f"{op} x{k}" for op, k in mix)
        print(f"  {c / total:6.1%}  {lo:6x}-{hi:6x}  {n:4d} insns  {ops}")
    if args.lines:
        print("\ninstructions with >= 0.2% of the samples:")
        for off, text in insns:
            c = samples.get(off, 0)
            if c / total >= 0.002:
                print(f"  {c / total:6.1%}  {off:6x}  {text}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("file", help="a Python file with a @tilelang_mini.jit factory")
    p.add_argument("--args", nargs="*", help="factory arguments (default: DEFAULT_ARGS)")
    p.add_argument("--kernel", help="which factory (its Python name); default: the first")
    p.add_argument("--seconds", type=float, default=4.0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--top", type=int, default=20)
    p.add_argument("--lines", action="store_true")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--workdir", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        child(args)
        return 0
    missing = [t for t in ("perf", "objdump") if shutil.which(t) is None]
    if missing:
        print(f"profile_llvm needs {' and '.join(missing)} on PATH", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="tlm-prof-") as work:
        cmd = [sys.executable, __file__, args.file, "--child", "--workdir", work,
               "--seconds", str(args.seconds), "--threads", str(args.threads)]
        if args.args:
            cmd += ["--args", *args.args]
        if args.kernel:
            cmd += ["--kernel", args.kernel]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [str(REPO)] + [x for x in os.environ.get("PYTHONPATH", "").split(os.pathsep) if x]))
        proc = subprocess.Popen(cmd, env=env)
        ready = Path(work, "ready")
        while not ready.exists():
            if proc.poll() is not None:
                return proc.returncode or 1
            time.sleep(0.1)
        pid, base = (int(x) for x in ready.read_text().split())
        data = Path(work, "perf.data")
        subprocess.run(["perf", "record", "-q", "-e", "cpu-clock", "-F", "4000", "-o",
                        str(data), "-p", str(pid), "--", "sleep", str(args.seconds)],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        proc.wait()
        script = subprocess.run(["perf", "script", "-i", str(data), "-F", "ip,dso"],
                                capture_output=True, text=True, check=False).stdout
        insns, start = _blocks(Path(work, "kernel.o"))
        samples, other = collections.Counter(), collections.Counter()
        for line in script.splitlines():
            parts = line.split(None, 1)
            if not parts:
                continue
            dso = parts[1].strip() if len(parts) > 1 else "?"
            if "perf-" in dso or "unknown" in dso:  # JIT code: perf has no file for it
                samples[int(parts[0], 16) - base + start] += 1
            else:
                other[dso] += 1
        report(args, samples, other, insns, args.top)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
