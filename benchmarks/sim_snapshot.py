"""What `simulate` and `estimate` report for a corpus of kernels, printed for diffing: the check
that a rewrite of the simulator (for speed) leaves its results unchanged.

    python benchmarks/sim_snapshot.py DIR OUT.txt [--blocks N]
    diff before.txt after.txt

DIR holds pickled (frontend kernel, options) pairs (`ir_snapshot.py record DIR`). For each kernel
lowered for the numpy target: `simulate_kernel` on its first N blocks (default 2) with seeded
random arguments (integer parameters in 0..1): instructions, cycles, block cycles, busy cycles per
pipe and per core pipe, a digest of the events and of every argument afterwards, or the error it
raised (race, deadlock, sync error, ...); then `estimate_kernel` on the kernel's chip: time,
cycles, bottleneck, or the error. The simulator's speed over the corpus goes to stderr.
"""
from __future__ import annotations

import argparse
import hashlib
import pickle
import sys
import time
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _args(kernel, seed: int):
    import numpy as np
    from tilelang_mini.ir import dtypes
    rng = np.random.default_rng(seed)
    out = []
    for p in kernel.params:
        dt = np.dtype(dtypes.to_numpy(p.dtype))
        if dt.kind in "iub":
            out.append(rng.integers(0, 2, p.shape).astype(dt))
        else:
            out.append(rng.standard_normal(p.shape).astype(dt))
    return out


def _digest(*parts) -> str:
    h = hashlib.sha1()
    for p in parts:
        h.update(p if isinstance(p, bytes) else repr(p).encode())
    return h.hexdigest()[:16]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("corpus", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--blocks", type=int, default=2)
    a = ap.parse_args(argv)
    from tilelang_mini.arch import get_chip
    from tilelang_mini.sim.estimate import estimate_kernel
    from tilelang_mini.sim.simulator import simulate_kernel
    from tilelang_mini.transform.pipeline import run_pipeline
    instr, secs = 0, 0.0
    with a.out.open("w") as f:
        for path in sorted(a.corpus.glob("*.pkl")):
            kernel, options = pickle.loads(path.read_bytes())
            options = replace(options, target="numpy")
            f.write(f"==== {path.stem} {kernel.name}\n")
            try:
                low = run_pipeline(kernel, options).final
            except Exception as err:  # noqa: BLE001 -- reported, not simulated
                f.write(f"lowering: {type(err).__name__}\n")
                continue
            chip = get_chip(options.chip)
            args = _args(low, int(path.stem[:8], 16))
            blocks = range(min(a.blocks, low.grid[0]))
            start = time.process_time()
            try:
                r = simulate_kernel(low, args, chip, blocks=blocks)
            except Exception as err:  # noqa: BLE001 -- the error is part of the output
                f.write(f"simulate: {type(err).__name__}: {err}\n")
            else:
                secs += time.process_time() - start
                instr += r.instructions
                f.write(f"simulate: {r.instructions} instr, {r.cycles} cycles, "
                        f"blocks {r.block_cycles}, pipes {r.pipe_busy}, cores {r.core_pipe_busy}, "
                        f"events {len(r.events)} {_digest(r.events)}, "
                        f"args {_digest(*(x.tobytes() for x in args))}\n")
            try:
                e = estimate_kernel(low, chip)
            except Exception as err:  # noqa: BLE001
                f.write(f"estimate: {type(err).__name__}: {err}\n")
            else:
                f.write(f"estimate: {e.time_us!r} us, {e.cycles} cycles, {e.bottleneck}, "
                        f"{e.pipe_busy}\n")
    print(f"simulated {instr} instructions in {secs:.2f} CPU s "
          f"({instr / max(secs, 1e-9) / 1e3:.1f}k/s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    raise SystemExit(main())
