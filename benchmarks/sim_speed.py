"""Simulator and estimate speed against design section 7 (measured here, never asserted in tests).

    python benchmarks/sim_speed.py

* simulator throughput: the expert GEMM example (examples/gemm_expert.py, one 64x64 block, a long
  K loop: about 10k dynamic instructions) through `simulate_kernel`, in simulated instructions
  per second (target: at least 300k/s);
* many blocks: an elementwise kernel of 8192 small blocks through `simulate_kernel` with data
  and race checks (races between blocks included), in blocks per second: the cost per block,
  which must not grow with the number of blocks;
* estimate time: the DeepGEMM-sized GEMM of the calibration (M=4096, N=7168, K=16384, bf16, the
  GEMM example's kernel on ascend950) through `estimate_kernel` (target: under 10 s).

Each row prints PASS or MISS next to its target; the exit status is 0 either way.
"""
from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _example(stem: str):
    spec = importlib.util.spec_from_file_location(f"_bench_example_{stem}", ROOT / "examples" / f"{stem}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def simulator_rate(K: int = 768 * 32) -> tuple[int, float]:
    """(instructions, CPU seconds) of simulating the expert GEMM with one block."""
    import numpy as np
    from tilelang_mini.arch import get_chip
    from tilelang_mini.sim.simulator import simulate_kernel
    from tilelang_mini.transform.pipeline import Options, run_pipeline

    ex = _example("gemm_expert")
    M = N = 64
    kernel = run_pipeline(ex.gemm_expert.factory(M, N, K, bm=64, bn=64, bk=32).ir, Options()).final
    rng = np.random.default_rng(0)
    args = [rng.standard_normal((M, K)).astype(np.float16),
            rng.standard_normal((K, N)).astype(np.float16), np.zeros((M, N), np.float32)]
    start = time.process_time()  # CPU time: on a shared machine wall time counts the waits
    report = simulate_kernel(kernel, args, get_chip("ascend910b"))
    return report.instructions, time.process_time() - start


def many_blocks_rate(blocks: int = 8192) -> tuple[int, float]:
    """(blocks, CPU seconds) of simulating every block of `2 * a + 1` over 8x64 tiles."""
    import numpy as np
    import tilelang_mini
    import tilelang_mini.language as T
    from tilelang_mini.arch import get_chip
    from tilelang_mini.sim.simulator import simulate_kernel

    M, N, bm = 8 * blocks, 64, 8

    @T.prim_func
    def twice_plus_one(A: T.Tensor((M, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, M // bm) as (bx, by):
            a = T.alloc_fragment((bm, N), "float32")
            T.copy(A[by * bm, 0], a)
            for i, j in T.Parallel(bm, N):
                a[i, j] = a[i, j] * 2.0 + 1.0
            T.copy(a, C[by * bm, 0])

    kernel = tilelang_mini.compile(twice_plus_one, out_idx=[-1], target="numpy").ir
    a = np.random.default_rng(0).standard_normal((M, N)).astype(np.float32)
    c = np.zeros_like(a)
    start = time.process_time()
    simulate_kernel(kernel, [a, c], get_chip("ascend910b"))
    seconds = time.process_time() - start
    if not np.array_equal(c, a * np.float32(2) + np.float32(1)):
        raise SystemExit("many_blocks: wrong result")
    return kernel.grid[0], seconds


def estimate_seconds(dtype: str = "bfloat16") -> float:
    from tilelang_mini.arch import get_chip
    from tilelang_mini.sim.estimate import estimate_kernel
    from tilelang_mini.transform.pipeline import Options, run_pipeline

    ex = _example("gemm")
    prim = ex.matmul.factory(4096, 7168, 16384, block_M=128, block_N=256, block_K=64,
                             num_stages=2, dtype=dtype)
    start = time.perf_counter()
    kernel = run_pipeline(prim.ir, Options(chip="ascend950")).final
    estimate_kernel(kernel, get_chip("ascend950"))
    return time.perf_counter() - start


def main() -> int:
    n, s = simulator_rate()
    rate = n / s
    print(f"simulator: {n} instructions in {s:.2f} CPU s = {rate / 1e3:.0f}k/s "
          f"(target >= 300k/s: {'PASS' if rate >= 300e3 else 'MISS'})")
    nb, s = many_blocks_rate()
    print(f"many blocks: {nb} blocks in {s:.2f} CPU s = {nb / s:.0f} blocks/s (information)")
    for dtype in ("bfloat16", "float8_e4m3fn"):
        t = estimate_seconds(dtype)
        print(f"estimate of the DeepGEMM-sized {dtype} GEMM: {t:.2f} s "
              f"(target < 10 s: {'PASS' if t < 10 else 'MISS'})")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main())
