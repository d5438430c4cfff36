"""IR after every pass of both targets for a corpus of kernels: the check that a rewrite of a pass
(for speed) leaves what it produces unchanged.

    python benchmarks/ir_snapshot.py record DIR [pytest args...]
    python benchmarks/ir_snapshot.py dump DIR OUT.txt
    diff before.txt after.txt

record: runs pytest (default: the kernel, example and library-kernel tests) with `run_pipeline`
wrapped so that every distinct (frontend kernel, options) it compiles is pickled into DIR (the
disk cache is off so every compile runs the passes).
dump: for every recorded kernel and for target numpy and llvm, the printed IR after every pass
(or the error a pass raised), in a stable order, into OUT.txt; the per-pass CPU times summed over
the corpus go to stderr.

Nothing is asserted: two dumps are compared with diff.
"""
from __future__ import annotations

import hashlib
import os
import pickle
import sys
import time
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_TESTS = ["tests/test_kernels.py", "tests/test_examples.py",
                 "tests/test_lowered_examples.py", "tests/kernels_lib"]


class Recorder:
    """A pytest plugin: wraps run_pipeline for the session and pickles what it is given."""

    def __init__(self, out: Path):
        self.out = out

    def pytest_configure(self, config):
        from tilelang_mini.transform import pipeline
        orig = pipeline.run_pipeline
        out = self.out

        def recording(kernel, options=pipeline.Options(), **kw):
            try:
                blob = pickle.dumps((kernel, options))
            except Exception as err:  # noqa: BLE001 -- a kernel that cannot be pickled is skipped
                print(f"[ir_snapshot] not recorded: {err}", file=sys.stderr)
            else:
                (out / f"{hashlib.sha1(blob).hexdigest()}.pkl").write_bytes(blob)
            return orig(kernel, options, **kw)

        pipeline.run_pipeline = recording


def record(out: Path, args: list[str]) -> int:
    import pytest
    out.mkdir(parents=True, exist_ok=True)
    os.environ["TILELANG_MINI_CACHE"] = "0"
    return pytest.main(["-q", "-p", "no:cacheprovider", *(args or DEFAULT_TESTS)],
                       plugins=[Recorder(out)])


def dump(corpus: Path, out: Path) -> int:
    from tilelang_mini.ir.printer import print_ir
    from tilelang_mini.transform.pipeline import passes_for, run_pass
    from tilelang_mini.transform.split_cores import is_expert
    seconds: dict = {}
    n = 0
    with out.open("w") as f:
        for path in sorted(corpus.glob("*.pkl")):
            kernel, options = pickle.loads(path.read_bytes())
            for target in ("numpy", "llvm"):
                n += 1
                f.write(f"==== {path.stem} {kernel.name} {target}\n")
                opts = replace(options, target=target, expert=is_expert(kernel))
                k = kernel
                for name, fn, _why in passes_for(target):
                    start = time.process_time()
                    try:
                        k = run_pass(name, fn, k, opts)
                    except Exception as err:  # noqa: BLE001 -- the error is part of the output
                        f.write(f"-- {name}: {type(err).__name__}: {err}\n")
                        break
                    finally:
                        seconds[name] = seconds.get(name, 0.0) + time.process_time() - start
                    f.write(f"-- {name}\n{print_ir(k)}\n")
    print(f"{n} kernel/target pairs; pass CPU seconds over the corpus:", file=sys.stderr)
    for name, s in sorted(seconds.items(), key=lambda kv: -kv[1]):
        print(f"  {name:20s} {s * 1e3:9.1f} ms", file=sys.stderr)
    return 0


def main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[0] == "record":
        return record(Path(argv[1]), argv[2:])
    if len(argv) == 3 and argv[0] == "dump":
        return dump(Path(argv[1]), Path(argv[2]))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    raise SystemExit(main(sys.argv[1:]))
