"""Process, thread and cache scenarios: a generated kernel run on the llvm target the ways a user's
program runs it, each scenario in its own interpreter (a new session) with a timeout, so that a
hang is reported as a hang and a native crash as a crash.

    fork       the parent calls the kernel (optionally while a thread is calling it), forks; the
               child calls it and compiles a new one; the parent calls it again
    pool       a fork-started multiprocessing pool maps the kernel (created before or after
               the parent's first call)
    threads    threads call the kernel on different inputs while the main thread changes
               TILELANG_MINI_NUM_THREADS (or unsets it)
    compiles   threads compile the same kernel at the same time (one cache entry, many writers)
    cache      one process fills the cache (two kernels); entries are swapped, truncated,
               overwritten with garbage, flipped, replaced by a FIFO, a /dev/zero symlink, a
               directory, an empty or unreadable file, another key's entry; fresh processes
               must recompile (never hang, crash or load it) and then hit the rewritten entries

Each phase is `python -m tilelang_mini.testing.fuzz.scenarios PHASE` with the case (JSON) on
stdin; it answers one JSON line {"outcome", "detail"} on stdout. Outcomes: ok, mismatch (a wrong
number), internal (an exception), crash (killed by a signal or exited without an answer), hang.
"""
from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time

from ...runtime import config

KINDS = ("fork", "pool", "threads", "compiles", "cache")
CORRUPTIONS = ("swap", "truncate", "garbage", "flip", "fifo", "dev_zero", "directory", "empty",
               "unreadable", "other_key", "kind_dir_file")


def draw_scenario(d, kind: str | None = None) -> dict:
    """The parameters of one scenario, drawn from `d` (a Draw)."""
    kind = kind or d.choice(KINDS)
    sc = {"kind": kind, "threads": d.choice(["1", "2", "3", "4"])}
    if kind == "fork":
        sc.update(calls=d.int(0, 3), busy=d.boolean(0.5), child_calls=d.int(1, 3),
                  child_compiles=d.boolean(0.5))
    elif kind == "pool":
        sc.update(procs=d.int(1, 3), tasks=d.int(1, 6), used_before=d.boolean(0.7))
    elif kind == "threads":
        sc.update(callers=d.int(2, 4), flips=d.int(10, 60),
                  values=[d.choice(["1", "2", "3", "4", "8", ""]) for _ in range(6)])
    elif kind == "compiles":
        sc.update(compilers=d.int(2, 4))
    else:
        sc.update(corruptions=[d.choice(CORRUPTIONS) for _ in range(d.int(1, 3))],
                  seed=d.int(0, 2 ** 30))
    return sc


# ------------------------------------------------------------------------ in the worker


def run_scenario(case, send, timeout: float = 90.0) -> dict:
    """step -> (outcome, detail): the scenario's phases, each a fresh interpreter."""
    sc = case.scenario
    root = tempfile.mkdtemp(prefix="scenario-")
    env = config.child_environment(TILELANG_MINI_CACHE_DIR=os.path.join(root, "cache"),
                                   TILELANG_MINI_CACHE="1", TILELANG_MINI_NUM_THREADS=sc["threads"])
    payload = case.to_json()
    phases = ["fill", "corrupt", "load", "reload"] if sc["kind"] == "cache" else [sc["kind"]]
    result = {}
    for phase in phases:
        step = f"{sc['kind']}-{phase}" if sc["kind"] == "cache" else sc["kind"]
        send(step=step)
        if phase == "corrupt":
            try:
                result[step] = ("ok", corrupt(os.path.join(root, "cache"), sc))
            except Exception as err:  # noqa: BLE001 - a bug of the scenario itself
                result[step] = ("internal", f"fuzzer: corrupting the cache: {err!r}")
            continue
        result[step] = _phase(phase, payload, env, root, timeout)
        if result[step][0] != "ok":
            break
    import shutil
    _make_removable(root)
    shutil.rmtree(root, ignore_errors=True)
    return result


def _phase(phase: str, payload: str, env: dict, cwd: str, timeout: float, argv=None):
    """(outcome, detail) of one phase in a new session (`argv`: another command, for tests)."""
    argv = argv or [sys.executable, "-m", "tilelang_mini.testing.fuzz.scenarios", phase]
    # files, not pipes: a child the phase leaves behind must not keep the answer from ending
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.TemporaryFile() as inp:
        inp.write(payload.encode())
        inp.seek(0)
        proc = subprocess.Popen(argv, stdin=inp, stdout=out, stderr=err, env=env, cwd=cwd,
                                start_new_session=True)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_session(proc)
            return "hang", f"{phase}: no answer in {timeout:.0f} s"
        _kill_session(proc)  # a forked child or pool worker it left behind
        out.seek(0)
        err.seek(0)
        out, err = out.read(), err.read()
    tail = err.decode(errors="replace").strip().replace("\n", " | ")[-500:]
    lines = [x for x in out.decode(errors="replace").splitlines() if x.startswith("{")]
    if proc.returncode < 0:
        return "crash", f"{phase}: killed by signal {-proc.returncode}: {tail}"
    if not lines:
        return "crash", f"{phase}: exited with {proc.returncode} without an answer: {tail}"
    answer = json.loads(lines[-1])
    return answer["outcome"], f"{phase}: {answer['detail']}"


def _kill_session(proc) -> None:
    """Kill what is left of the phase's session (the phase process and its own children)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if proc.returncode is None:
        proc.wait()


def corrupt(cache: str, sc: dict) -> str:
    """Spoil the cache's entries as `sc["corruptions"]` says; what was done."""
    import random
    rng = random.Random(sc["seed"])
    entries = sorted(os.path.join(dp, f) for dp, _, fs in os.walk(cache) for f in fs
                     if f.endswith(".bin"))
    if not entries:
        return "no entries to spoil"
    done = []
    for how in sc["corruptions"]:
        entries = [p for p in entries if os.path.lexists(p)]
        if not entries:
            break
        p = rng.choice(entries)
        others = [q for q in entries if q != p and os.path.isfile(q) and not os.path.islink(q)]
        data = open(p, "rb").read() if os.path.isfile(p) and not os.path.islink(p) else b""
        if how in ("swap", "other_key") and others and data:
            q = rng.choice(others)
            other = open(q, "rb").read()
            _write(p, other)
            if how == "swap":
                _write(q, data)
        elif how == "truncate" and data:
            _write(p, data[:rng.randrange(len(data))])
        elif how == "garbage":
            _write(p, rng.randbytes(rng.choice([0, 7, 64, 4096, max(1, len(data))])))
        elif how == "flip" and data:
            b = bytearray(data)
            b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
            _write(p, bytes(b))
        elif how == "fifo" and hasattr(os, "mkfifo"):
            _remove(p)
            os.mkfifo(p)
        elif how == "dev_zero":
            _remove(p)
            os.symlink("/dev/zero", p)
        elif how == "directory":
            _remove(p)
            os.mkdir(p)
        elif how == "empty":
            _write(p, b"")
        elif how == "unreadable" and os.path.isfile(p):
            os.chmod(p, 0)
        elif how == "kind_dir_file":  # the kind's directory itself replaced by a file
            kind_dir = os.path.dirname(p)
            _make_removable(kind_dir)
            import shutil
            shutil.rmtree(kind_dir)
            _write(kind_dir, b"not a directory")
            entries = []
        else:
            continue
        done.append(f"{how} {os.path.basename(p)[:12]}")
    return ", ".join(done) or "nothing applicable"


def _write(path: str, data: bytes) -> None:
    _remove(path)
    with open(path, "wb") as f:
        f.write(data)


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        os.rmdir(path)
    elif os.path.lexists(path):
        os.unlink(path)


def _make_removable(root: str) -> None:
    for dp, dirs, files in os.walk(root):
        for f in files + dirs:
            p = os.path.join(dp, f)
            if not os.path.islink(p) and stat.S_IMODE(os.lstat(p).st_mode) == 0:
                os.chmod(p, 0o600)


# ------------------------------------------------------------------------ in the phase process


class _Kernel:
    """The case's kernel compiled for llvm, its inputs (several sets) and references."""

    def __init__(self, case, tmpdir: str, n_sets: int = 3):
        from .worker import _load_kernel, base_chip
        self.case = case
        self.main, _ = _load_kernel(case, tmpdir)
        self.chip = base_chip(case)
        self.sets = [_data(case, i) for i in range(n_sets)]

    def compile(self):
        import tilelang_mini
        return tilelang_mini.compile(self.main, out_idx=self.case.out_idx, target="llvm",
                                     chip=self.chip)

    def check(self, kernel, i: int = 0) -> str:
        """'' when the kernel computes input set `i` right, else what differs."""
        from .worker import _check_outputs, _copies
        args, want, scales = self.sets[i % len(self.sets)]
        outcome, detail = _check_outputs(self.case, kernel(*_copies(args)), want, scales)
        return "" if outcome == "ok" else f"input set {i}: {detail}"


def _data(case, i: int):
    from dataclasses import replace
    from .case import make_inputs, run_reference
    c = replace(case, seed=f"{case.seed}/{i}") if i else case
    inputs = make_inputs(c)
    want, scales = run_reference(case, inputs)
    return [inputs[t.name] for t in case.tensors if not t.output], want, scales


def _fork(sc, kern) -> tuple[str, str]:
    k = kern.compile()
    for i in range(sc["calls"]):
        if (why := kern.check(k, i)):
            return "mismatch", f"parent before fork: {why}"
    stop, errors = threading.Event(), []
    busy = None
    if sc["busy"]:  # a thread in the middle of calls while the process forks
        def loop():
            try:
                while not stop.is_set():
                    if (why := kern.check(k, 1)):
                        errors.append(why)
            except Exception as err:  # noqa: BLE001
                errors.append(repr(err))
        busy = threading.Thread(target=loop)
        busy.start()
        time.sleep(0.05)
    pid = os.fork()
    if pid == 0:  # the child: only os._exit leaves it (no buffers flushed twice)
        code = 0
        try:
            for i in range(sc["child_calls"]):
                if (why := kern.check(k, i)):
                    sys.stderr.write(f"child: {why}\n")
                    code = 3
            if sc["child_compiles"] and code == 0:
                if (why := kern.check(kern.compile(), 2)):
                    sys.stderr.write(f"child, new compile: {why}\n")
                    code = 3
        except BaseException as err:  # noqa: BLE001
            sys.stderr.write(f"child: {err!r}\n")
            code = 4
        sys.stderr.flush()
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    stop.set()
    if busy is not None:
        busy.join()
    if errors:
        return "mismatch", f"parent's thread: {errors[0]}"
    if os.WIFSIGNALED(status):
        return "crash", f"the forked child was killed by signal {os.WTERMSIG(status)}"
    code = os.WEXITSTATUS(status)
    if code:
        return ("mismatch" if code == 3 else "internal"), f"the forked child exited with {code}"
    if (why := kern.check(k, 2)):
        return "mismatch", f"parent after fork: {why}"
    return "ok", f"fork after {sc['calls']} calls{' (busy)' if busy else ''}"


_POOL: dict = {}


def _pool_task(i: int) -> str:
    kern = _POOL["kern"]
    k = _POOL["k"] if "k" in _POOL else kern.compile()
    return kern.check(k, i)


def _pool(sc, kern) -> tuple[str, str]:
    import multiprocessing as mp
    _POOL["kern"] = kern
    if sc["used_before"]:
        _POOL["k"] = kern.compile()
        if (why := kern.check(_POOL["k"], 0)):
            return "mismatch", f"parent: {why}"
    with mp.get_context("fork").Pool(sc["procs"]) as pool:
        results = pool.map_async(_pool_task, range(sc["tasks"])).get(timeout=600)
    bad = [r for r in results if r]
    if bad:
        return "mismatch", f"pool worker: {bad[0]}"
    return "ok", f"{sc['procs']} processes, {sc['tasks']} tasks"


def _threads(sc, kern) -> tuple[str, str]:
    k = kern.compile()
    stop, errors = threading.Event(), []

    def caller(i):
        try:
            while not stop.is_set():
                if (why := kern.check(k, i)):
                    errors.append(why)
                    return
        except Exception as err:  # noqa: BLE001
            errors.append(f"{type(err).__name__}: {err}")

    callers = [threading.Thread(target=caller, args=(i,)) for i in range(sc["callers"])]
    for t in callers:
        t.start()
    try:
        for n in range(sc["flips"]):
            value = sc["values"][n % len(sc["values"])]
            config.set_setting("TILELANG_MINI_NUM_THREADS", value or None)
            time.sleep(0.002)
            if (why := kern.check(k, n)):
                errors.append(f"main thread: {why}")
    finally:
        stop.set()
        for t in callers:
            t.join()
    if errors:
        return ("mismatch" if "differ" in errors[0] else "internal"), errors[0]
    return "ok", f"{sc['callers']} callers, {sc['flips']} thread-count changes"


def _compile(sc, kern) -> tuple[str, str]:
    errors, kernels = [], []

    def compiler():
        try:
            kernels.append(kern.compile())
        except Exception as err:  # noqa: BLE001
            errors.append(f"{type(err).__name__}: {err}")

    ts = [threading.Thread(target=compiler) for _ in range(sc["compilers"])]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        return "internal", errors[0]
    for i, k in enumerate(kernels):
        if (why := kern.check(k, i)):
            return "mismatch", why
    return "ok", f"{len(kernels)} concurrent compiles"


def _cache(phase, case, tmpdir) -> tuple[str, str]:
    from .case import Case
    kerns = [_Kernel(case, tmpdir, 1)] + [_Kernel(Case.from_json(o), tmpdir, 1)
                                          for o in case.scenario.get("others", [])]
    hits = 0
    for kern in kerns:
        k = kern.compile()
        hits += bool(getattr(k, "from_cache", False))
        if (why := kern.check(k, 0)):
            return "mismatch", f"{kern.case.family}:{kern.case.seed}: {why}"
    return "ok", f"{len(kerns)} kernels, {hits} from the cache"


def phase_main(phase: str) -> int:
    from .case import Case
    case = Case.from_json(sys.stdin.read())
    tmpdir = os.path.join(os.getcwd(), "kernels")  # the same path in every phase: the same key
    os.makedirs(tmpdir, exist_ok=True)
    try:
        if phase in ("fill", "load", "reload"):
            outcome, detail = _cache(phase, case, tmpdir)
        else:
            run = {"fork": _fork, "pool": _pool, "threads": _threads, "compiles": _compile}[phase]
            outcome, detail = run(case.scenario, _Kernel(case, tmpdir))
    except Exception as err:  # noqa: BLE001 - the outcome is what we report
        import traceback
        tb = traceback.extract_tb(err.__traceback__)
        where = f" at {os.path.basename(tb[-1].filename)}:{tb[-1].lineno}" if tb else ""
        outcome, detail = "internal", f"{type(err).__name__}{where}: {str(err)[:500]}"
    sys.stdout.write(json.dumps({"outcome": outcome, "detail": detail}) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(phase_main(sys.argv[1]))
