"""Run cases in worker processes (crashes, aborts and hangs are outcomes, not the end of the
run), judge each step's outcome and summarise per family and per target.

Outcomes of a step: ok, mismatch (a wrong number), internal (a compiler bug reported as such or
a raw exception), crash (the worker process died), hang (no answer within the timeout), race (a
Race/Deadlock/SyncError from the simulator on compiler-lowered code), rejected (a located
CompileError), fault (a located run-time error), unlocated (an error without the kernel line),
mislocated / undiagnosed (invalid kernels), skipped, not-run (after a crash or hang).
"""
from __future__ import annotations

import json
import os
import re
import selectors
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

from ...runtime import config
from .case import Case
from .known_bugs import match_known

# Located rejections of a valid kernel that are not defects: the kernel asks for more than the
# chip has (the generator does not model every capacity).
RESOURCE_LIMITS = re.compile(r"does not fit|exceeds|too large|capacity|out of (UB|L1|L0)", re.I)
# ... and features a chip does not have (the FP8 cube on ascend910b, the int4 cube on ascend950).
CHIP_LIMITS = {"sim-910b": re.compile(r"FP8|float8", re.I),
               "sim-950": re.compile(r"has no int4")}

ACCEPTED = {
    "valid": {"ok"},
    "invalid": {"ok"},
    "mutation": {"ok", "rejected", "race", "fault", "skipped"},
    "args": {"ok", "rejected"},
    "broken": {"rejected", "race"},
    "scenario": {"ok"},
}


@dataclass
class CaseResult:
    case: Case
    steps: dict                      # step -> (outcome, detail)
    extra: dict = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def kind(self) -> str:
        if self.case.expect_error:
            return "invalid"
        if self.case.call:
            return "args"
        if self.case.broken:
            return "broken"
        if self.case.scenario:
            return "scenario"
        return "mutation" if self.case.mutation else "valid"

    def judged(self) -> dict:
        """step -> (outcome, verdict, detail); verdict is pass, known (a KNOWN_BUGS entry) or fail."""
        out = {}
        for step, (outcome, detail) in self.steps.items():
            kind = "valid" if step == "roundtrip" else self.kind
            if outcome in ACCEPTED[kind] or outcome == "not-run":
                verdict = "pass"
            elif outcome == "hang" and self.kind == "mutation" and (
                    _huge(self.extra) or re.search(r"^\s*while ", self.case.source, re.M)):
                # the edit asked for >= 2**20 blocks or iterations (slow, not hung), or it changed
                # a kernel with a run-time `while` (an edited condition or step may never end:
                # the program itself then runs forever, as it would on the chip)
                verdict = "pass"
            elif outcome == "rejected" and kind == "valid" and (
                    RESOURCE_LIMITS.search(detail)
                    or (step in CHIP_LIMITS and CHIP_LIMITS[step].search(detail))):
                verdict = "pass"
            else:
                bug = match_known(self.case, step, outcome, detail)
                verdict = f"known:{bug}" if bug else "fail"
            out[step] = (outcome, verdict, detail)
        return out

    def failures(self) -> list:
        return [(s, o, d) for s, (o, v, d) in self.judged().items() if v == "fail"]

    def known(self) -> list:
        return [(s, o, v[6:], d) for s, (o, v, d) in self.judged().items() if v.startswith("known")]


def _huge(extra) -> bool:
    m = re.search(r"number \S+ -> (\S+)$", extra.get("mutation", ""))
    try:
        return m is not None and abs(float(m.group(1))) >= 2 ** 20
    except ValueError:
        return False


class _Worker:
    def __init__(self, env, timeout: float = 120.0):
        self.timeout = timeout
        self.log = tempfile.TemporaryFile(mode="w+b")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tilelang_mini.testing.fuzz.worker"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, env=env, bufsize=0)
        self.buf = b""
        self.job = None       # (id, case, started)
        self.step = None
        self.step_started = 0.0
        self.steps: dict = {}
        self.extra: dict = {}

    def send(self, jid, case: Case, threads: str):
        self.job = (jid, case, time.monotonic())
        self.step, self.step_started, self.steps = "start", time.monotonic(), {}
        self.extra = {}
        msg = json.dumps({"id": jid, "case": json.loads(case.to_json()), "threads": threads,
                          "timeout": self.timeout})
        self.proc.stdin.write(msg.encode() + b"\n")
        self.proc.stdin.flush()

    def stderr_tail(self, n=600) -> str:
        self.log.seek(0, 2)
        size = self.log.tell()
        self.log.seek(max(0, size - n))
        return self.log.read().decode(errors="replace").strip().replace("\n", " | ")

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()  # our own child, by its handle
        self.proc.wait()
        self.log.close()


def _env(root: str):
    """The workers' environment; their kernel files and compile cache live under `root`."""
    env = config.child_environment()
    env["TMPDIR"] = root  # the worker's tempfile.mkdtemp lands here
    env.setdefault("TILELANG_MINI_VERIFY", "1")
    env["PYTHONFAULTHANDLER"] = "1"
    if "TILELANG_MINI_CACHE_DIR" not in env:
        env["TILELANG_MINI_CACHE_DIR"] = os.path.join(root, "cache")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def run_cases(cases, jobs: int = 2, timeout: float = 120.0, threads: str = "2",
              deadline: float | None = None, on_result=None) -> list[CaseResult]:
    """Run `cases` (an iterable; consumed lazily) on `jobs` workers. `timeout` bounds each step;
    `deadline` (time.monotonic()) stops taking new cases. Returns the results in finishing order."""
    root = tempfile.mkdtemp(prefix="tlm-fuzz-")
    env = _env(root)
    it = iter(cases)
    results: list[CaseResult] = []
    sel = selectors.DefaultSelector()
    workers = []
    next_id = 0
    exhausted = False

    def start_worker():
        w = _Worker(env, timeout)
        sel.register(w.proc.stdout, selectors.EVENT_READ, w)
        workers.append(w)
        return w

    def feed(w):
        nonlocal next_id, exhausted
        if exhausted or (deadline is not None and time.monotonic() > deadline):
            exhausted = True
            return
        try:
            case = next(it)
        except StopIteration:
            exhausted = True
            return
        w.send(next_id, case, threads)
        next_id += 1

    def finish(w, steps, extra=None):
        jid, case, started = w.job
        res = CaseResult(case, {k: tuple(v) for k, v in steps.items()}, extra or {},
                         time.monotonic() - started)
        results.append(res)
        w.job = None
        if on_result:
            on_result(res)

    def replace(w, outcome, detail):
        steps = {k: v for k, v in w.steps.items() if k not in ("frontend", "base")}
        steps[w.step] = (outcome, detail)
        finish(w, steps, w.extra)
        sel.unregister(w.proc.stdout)
        w.kill()
        workers.remove(w)
        return start_worker()

    try:
        for _ in range(max(1, jobs)):
            feed(start_worker())
        while any(w.job for w in workers):
            for key, _ in sel.select(timeout=1.0):
                w = key.data
                chunk = os.read(w.proc.stdout.fileno(), 1 << 16)
                if not chunk:
                    if w.job:
                        code = w.proc.wait()
                        feed(replace(w, "crash", f"worker exited with {code} during {w.step}: "
                                                 f"{w.stderr_tail()}"))
                    continue
                w.buf += chunk
                while b"\n" in w.buf and w.job:
                    line, w.buf = w.buf.split(b"\n", 1)
                    msg = json.loads(line)
                    if "info" in msg:
                        w.extra.update(msg["info"])
                    elif "step" in msg:
                        w.step, w.step_started = msg["step"], time.monotonic()
                        w.steps[msg["step"]] = ("not-run", "")
                    else:
                        finish(w, msg["result"], msg.get("extra"))
                        feed(w)
            now = time.monotonic()
            for w in list(workers):
                if w.job and now - w.step_started > timeout:
                    feed(replace(w, "hang", f"no answer in {timeout:.0f} s during {w.step}"))
    finally:
        for w in workers:
            try:
                w.proc.stdin.close()
            except OSError:
                pass
            w.kill()
        shutil.rmtree(root, ignore_errors=True)
    return results


OUTCOME_COLUMNS = ("ok", "mismatch", "internal", "crash", "hang", "race", "rejected", "other")


def summarize(results: list[CaseResult]) -> str:
    """The table: one row per family (cases, by worst outcome) and per target (runs)."""
    def col(outcome):
        return outcome if outcome in OUTCOME_COLUMNS else "other"

    fam_rows: dict = {}
    step_rows: dict = {}
    for r in results:
        judged = r.judged()
        worst = "ok"
        for step, (outcome, verdict, _) in judged.items():
            if outcome == "not-run":
                continue
            row = step_rows.setdefault(step, {})
            row["runs"] = row.get("runs", 0) + 1
            c = col(outcome)
            row[c] = row.get(c, 0) + 1
            if verdict != "pass":
                row["fail" if verdict == "fail" else "known"] = row.get(
                    "fail" if verdict == "fail" else "known", 0) + 1
            if verdict == "fail" or (verdict != "pass" and worst == "ok"):
                worst = outcome
        row = fam_rows.setdefault(r.case.family, {})
        row["runs"] = row.get("runs", 0) + 1
        c = col(worst)
        row[c] = row.get(c, 0) + 1
        if r.failures():
            row["fail"] = row.get("fail", 0) + 1
        elif r.known():
            row["known"] = row.get("known", 0) + 1
    cols = ("runs",) + OUTCOME_COLUMNS + ("known", "fail")
    lines = []

    def table(title, rows):
        lines.append(f"{title:14s}" + "".join(f"{c:>9s}" for c in cols))
        total: dict = {}
        for name in sorted(rows):
            lines.append(f"{name:14s}" + "".join(f"{rows[name].get(c, 0):9d}" for c in cols))
            for c in cols:
                total[c] = total.get(c, 0) + rows[name].get(c, 0)
        lines.append(f"{'total':14s}" + "".join(f"{total.get(c, 0):9d}" for c in cols))

    table("family (cases)", fam_rows)
    lines.append("")
    table("target (runs)", step_rows)
    lines.append("(a case counts under its worst step; 'known' = matched a KNOWN_BUGS entry, "
                 "'fail' = a new failure; 'other' = fault/unlocated/mislocated/undiagnosed/skipped)")
    lines.append("")
    lines.append(known_summary(results))
    return "\n".join(lines)


def known_summary(results: list[CaseResult]) -> str:
    """Per KNOWN_BUGS entry: the cases it explained, and the cases that had its features (an
    entry that explains none of many chances is probably fixed: try removing it)."""
    from .known_bugs import KNOWN_BUGS
    out = ["known bug                cases  chances  finding"]
    for bug in KNOWN_BUGS:
        hit = sum(1 for r in results if any(b == bug.id for _, _, b, _ in r.known()))
        chances = sum(1 for r in results
                      if (not bug.features or set(bug.features) & set(r.case.features))
                      and (not bug.families or r.case.family in bug.families))
        note = ("  (not seen: fixed?)" if chances >= 5 and hit == 0
                and (bug.features or bug.families) else "")
        out.append(f"{bug.id:24s} {hit:5d} {chances:8d}  {bug.finding}{note}")
    return "\n".join(out)


def report_failure(r: CaseResult, limit: int = 3000) -> str:
    """A failing case as a reproduction: outcomes, then the kernel (and mutation)."""
    head = [f"== {r.case.family}:{r.case.seed} ({', '.join(r.case.features)})"]
    for s, (o, v, d) in r.judged().items():
        if v != "pass":
            head.append(f"   {s}: {o} [{v}] {d[:400]}")
    body = r.case.source
    if r.extra.get("mutation"):
        body += f"\n# IR after {r.case.mutation['stage']}, mutated: {r.extra['mutation']}\n"
    return "\n".join(head) + "\n" + body[:limit]
