"""What every example shares: command-line options, inputs, verification and the report."""
from __future__ import annotations

import argparse
import time

import numpy as np

import tilelang_mini
from tilelang_mini.ir import dtypes


def example_args(doc, argv, dtype="float32", shape=(256, 256, 256)):
    p = argparse.ArgumentParser(description=(doc or "").splitlines()[0])
    p.add_argument("--target", default=None, help="numpy | llvm (default: TILELANG_MINI_TARGET or numpy)")
    p.add_argument("--chip", default=None, help="ascend910b | ascend950")
    p.add_argument("--dtype", default=dtype)
    p.add_argument("--shape", type=int, nargs="+", default=list(shape))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--show-ir", default="final", help="stage whose IR to print, or 'none'")
    p.add_argument("--no-simulate", dest="simulate", action="store_false",
                   help="skip the pipe-level simulation (examples that simulate)")
    return p.parse_args(argv)


def make_inputs(seed, shapes, dtype):
    """Random inputs already rounded to `dtype` (so the reference sees the same values)."""
    rng = np.random.default_rng(seed)
    np_dtype = dtypes.to_numpy(dtype)
    scale = 1.0 if dtype in ("float32", "float16", "bfloat16") else 0.5
    return [(rng.standard_normal(s) * scale).astype(np_dtype) for s in shapes]


def verify(name, got, want, dtype, reduce_len=1) -> bool:
    """Compare against a float64 reference with dtype-aware tolerances; print the verdict."""
    rtol, atol = dtypes.tolerance(dtype)
    atol = atol * max(1.0, np.sqrt(reduce_len) / 4)
    got64 = got.astype(np.float64)
    ok = got.shape == want.shape and np.allclose(got64, want, rtol=rtol, atol=atol)
    err = float(np.max(np.abs(got64 - want))) if got.shape == want.shape else float("inf")
    print(f"verify {name}: {'OK' if ok else 'MISMATCH'} (max abs error {err:.3g}, "
          f"rtol {rtol:g}, atol {atol:.3g})")
    return ok


ESTIMATE_CHIPS = ("ascend910b", "ascend950")  # the chips a library example estimates on


def print_estimates(what, estimate, *args, **kwargs):
    """Print `estimate(*args, chip=CHIP, **kwargs).time_us` (a library function's .estimate,
    at a full model size) for each chip of ESTIMATE_CHIPS."""
    for chip in ESTIMATE_CHIPS:
        us = estimate(*args, chip=chip, **kwargs).time_us
        print(f"estimate {what} on {chip}: {us:.1f} us")


def library_run(args):
    """The run options of a kernel-library call (llvm unless --target says otherwise) and the
    seeded generator of the inputs."""
    return dict(target=args.target or "llvm", chip=args.chip), np.random.default_rng(args.seed)


def verdict(name, ok) -> int:
    """Print the example's verdict; exit status 0 when verified."""
    print(f"{name} example: {'verified' if ok else 'FAILED verification'}")
    return 0 if ok else 1


def timed(kernel, *args):
    start = time.perf_counter()
    out = kernel(*args)
    return out, time.perf_counter() - start


def report(kernel, seconds, ok, args) -> int:
    """Print the IR of the chosen stage and a schedule summary; exit status 0 when verified."""
    stage = args.show_ir
    if stage != "none":
        stages = list(kernel.compilation.stages)
        stage = stages[-1] if stage == "final" else stage
        print(f"# ---- IR after {stage} ----")
        print(kernel.get_ir(stage), end="")
    print(schedule_summary(kernel))
    print(f"{kernel.ir.name}: target={kernel.target} chip={kernel.chip} ran in "
          f"{seconds * 1e3:.1f} ms: {'verified' if ok else 'FAILED verification'}")
    return 0 if ok else 1


def run_and_verify(kernel, inputs, name, want, dtype, reduce_len=1, simulate=False):
    """Run `kernel` on `inputs` and verify its output against `want`; with `simulate`, also on
    the pipe-level simulator. Returns (verified, seconds of the run)."""
    out, seconds = timed(kernel, *inputs)
    ok = verify(name, out, want, dtype, reduce_len)
    if simulate:
        ok &= simulate_and_verify(kernel, inputs, lambda o: verify(f"{name} (simulated)", o, want,
                                                                   dtype, reduce_len))
    return ok, seconds


def gemm_main(doc, argv, shape, build, reference, simulate=False) -> int:
    """The main of a C = A @ B example: `build(M, N, K, dtype)` gives the prim_func, checked
    against `reference(a, b)` (and on the simulator with `simulate`, unless --no-simulate)."""
    args = example_args(doc, argv, dtype="float16", shape=shape)
    M, N, K = args.shape
    a, b = make_inputs(args.seed, [(M, K), (K, N)], args.dtype)
    kernel = tilelang_mini.compile(build(M, N, K, args.dtype), out_idx=[-1], target=args.target,
                                   chip=args.chip)
    ok, seconds = run_and_verify(kernel, (a, b), "C", reference(a, b), "float32", reduce_len=K,
                                 simulate=simulate and args.simulate)
    return report(kernel, seconds, ok, args)


def simulate_and_verify(kernel, inputs, check) -> bool:
    """Run the pipe-level simulator (raises on a race, deadlock or flag misuse), check its
    outputs and print the cycles and the busy pipes."""
    out, rep = kernel.simulate(*inputs)
    busy = ", ".join(f"{p} {c}" for p, c in sorted(rep.pipe_busy.items()) if c)
    print(f"simulate: clean, {rep.cycles} cycles, {rep.instructions} instructions; "
          f"busy cycles: {busy}")
    return check(out)


def schedule_summary(kernel) -> str:
    from tilelang_mini.report.summary import summarize
    return summarize(kernel)
