"""The long profile: `python -m tilelang_mini.testing.fuzz --minutes N [--seed S] [--jobs J]`.

Generates cases from every family (weighted mix) until the time is up, runs each in worker
processes and prints the table of outcomes per family and per target, then the failures as
reproductions. `--replay family:seed` runs and prints one case; `--show` prints its source.
Exit status 1 when there was a new failure (not in KNOWN_BUGS).
"""
from __future__ import annotations

import argparse
import sys
import time

from .draw import RandomDraw
from .families import FAMILIES, WEIGHTS, make_case
from .runner import report_failure, run_cases, summarize


def case_stream(seed, families, limit=None):
    """`family:seed-i` cases, families in a weighted random order (the same for the same seed)."""
    d = RandomDraw(f"mix:{seed}")
    fams = list(families)
    weights = [WEIGHTS.get(f, 1) for f in fams]
    i = 0
    while limit is None or i < limit:
        fam = d.weighted(fams, weights)
        yield make_case(fam, f"{seed}-{i}")
        i += 1


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tilelang_mini.testing.fuzz", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--minutes", type=float, default=1.0, help="time budget (default 1)")
    p.add_argument("--cases", type=int, default=None, help="stop after this many cases")
    p.add_argument("--seed", default="0", help="seed of the case stream (default 0)")
    p.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    p.add_argument("--families", default=",".join(FAMILIES),
                   help=f"comma-separated subset of: {', '.join(FAMILIES)}")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per step before 'hang'")
    p.add_argument("--threads", default="2", help="TILELANG_MINI_NUM_THREADS of the llvm runs")
    p.add_argument("--replay", metavar="FAMILY:SEED", help="run one case and print it")
    p.add_argument("--show", action="store_true", help="with --replay: print the case only")
    p.add_argument("--failures", metavar="FILE", help="write every failing case here")
    p.add_argument("--verbose", "-v", action="store_true", help="print each case's outcome")
    args = p.parse_args(argv)

    if args.replay:
        fam, _, seed = args.replay.partition(":")
        case = make_case(fam, seed)
        print(case.describe())
        if args.show:
            return 0
        (res,) = run_cases([case], jobs=1, timeout=args.timeout, threads=args.threads)
        for step, (outcome, verdict, detail) in res.judged().items():
            print(f"{step:10s} {outcome:10s} {verdict:12s} {detail}")
        if res.extra.get("mutation"):
            print(f"# mutation: {res.extra['mutation']}\n{res.extra.get('text', '')}")
        return 1 if res.failures() else 0

    families = [f.strip() for f in args.families.split(",") if f.strip()]
    unknown = set(families) - set(FAMILIES)
    if unknown:
        p.error(f"unknown families {sorted(unknown)}; families: {', '.join(FAMILIES)}")
    start = time.monotonic()
    deadline = start + args.minutes * 60

    def progress(res):
        fails = res.failures()
        if args.verbose or fails:
            status = "FAIL " + "; ".join(f"{s}:{o}" for s, o, _ in fails) if fails else "ok"
            print(f"[{time.monotonic() - start:6.0f}s] {res.case.family}:{res.case.seed} {status}",
                  file=sys.stderr, flush=True)

    results = run_cases(case_stream(args.seed, families, args.cases), jobs=args.jobs,
                        timeout=args.timeout, threads=args.threads, deadline=deadline,
                        on_result=progress)
    elapsed = time.monotonic() - start
    print(f"tilelang_mini fuzz: seed {args.seed}, {len(results)} cases in {elapsed:.0f} s, "
          f"{args.jobs} jobs")
    print(summarize(results))
    failing = [r for r in results if r.failures()]
    if args.failures:
        with open(args.failures, "w") as f:
            for r in failing:
                f.write(report_failure(r, limit=10 ** 6) + "\n")
    if failing:
        print(f"\n{len(failing)} failing cases (replay with --replay FAMILY:SEED):")
        for r in failing[:40]:
            for s, o, d in r.failures():
                print(f"  {r.case.family}:{r.case.seed} {s}: {o}: {d[:200]}")
    return 1 if failing else 0


if __name__ == "__main__":
    raise SystemExit(main())
