"""autotune: configurations that differ only in GPU hints (TileLang's `threads=128` / `256`, a
`T.use_swizzle(10)` given or not: recorded in the IR, read by no pass) are one kernel:
compiled and evaluated once, every such configuration reported with its figure and the
configuration it shares the kernel with. Before, each was compiled and estimated (or timed)
on its own. The disk cache's key leaves the hints out too, so compiling the same kernel with
another hint is a cache hit. The tuned kernel is checked against a float64 NumPy reference."""
import numpy as np
import pytest

import tilelang_mini
import tilelang_mini.language as T
from tilelang_mini.runtime import kernel as rt_kernel

from util import close, f64, rand

M = N = K = 64


def matmul(block_M=32, threads=128, swizzle=False):
    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
             C: T.Tensor((M, N), T.float32)):
        with T.Kernel(1, T.ceildiv(M, block_M), threads=threads) as (bx, by):
            if swizzle:
                T.use_swizzle(10)
            a = T.alloc_shared((block_M, K), T.float16)
            b = T.alloc_shared((K, N), T.float16)
            c = T.alloc_fragment((block_M, N), T.float32)
            T.copy(A[by * block_M, 0], a)
            T.copy(B[0, bx * N], b)
            T.gemm(a, b, c, clear_accum=True)
            T.copy(c, C[by * block_M, 0])
    return main


@pytest.fixture
def passes_run(monkeypatch, tmp_path):
    """The number of pass-list runs (compiles that were not cache hits), cache in tmp_path."""
    monkeypatch.setenv("TILELANG_MINI_CACHE_DIR", str(tmp_path / "cache"))
    count = [0]
    real = rt_kernel._run_passes

    def counted(*a, **kw):
        count[0] += 1
        return real(*a, **kw)
    monkeypatch.setattr(rt_kernel, "_run_passes", counted)
    return count


def check_best(result):
    a, b = rand((M, K), "float16", 1), rand((K, N), "float16", 2)
    close(np.asarray(result.best_kernel(a, b)), f64(a) @ f64(b), "float32", K)


@pytest.mark.parametrize("by", ["estimate", "measure"])
def test_hint_only_configurations_are_one_kernel(by, passes_run):
    configs = {"block_M": [32, 64], "threads": [128, 256], "swizzle": [False, True]}
    result = tilelang_mini.autotune(matmul, configs, by=by, out_idx=[-1], repeat=2,
                                    include_default=False)
    assert len(result.entries) == 8 and len(result.ok) == 8
    assert passes_run[0] == 2  # one compile per block_M
    for bm in (32, 64):
        group = [e for e in result.entries if e.config["block_M"] == bm]
        first = group[0]
        assert first.same_as == "" and all(e.same_as == first.label() for e in group[1:])
        assert len({id(e.kernel) for e in group}) == 1
        assert len({e.time_us for e in group}) == 1  # one figure, also when measured
    k32, k64 = (next(e for e in result.entries if e.config["block_M"] == bm).kernel
                for bm in (32, 64))
    assert k32 is not k64
    first = result.entries[0]
    assert f"block_M=32, threads=256, swizzle=True  (the kernel of {first.label()})" in result.table()
    check_best(result)


def test_a_hint_alone_is_a_cache_hit(passes_run):
    """A hint given or not (`if swizzle: T.use_swizzle(10)`) is the same compiled code."""
    plain = tilelang_mini.compile(matmul(swizzle=False), out_idx=[-1], target="llvm")
    swizzled = tilelang_mini.compile(matmul(swizzle=True), out_idx=[-1], target="llvm")
    assert passes_run[0] == 1 and plain.cache_key == swizzled.cache_key
    assert [h.split(" @ ")[0] for h in swizzled.ir.hints] == ["threads=threads",
                                                              "T.use_swizzle(10)"]
    assert "T.use_swizzle(10)" not in str(plain.ir.hints)  # each keeps its own hints
    a, b = rand((M, K), "float16", 3), rand((K, N), "float16", 4)
    close(swizzled(a, b), f64(a) @ f64(b), "float32", K)


def test_eager_decorator_form_estimates_one_kernel_once(monkeypatch, tmp_path):
    monkeypatch.setenv("TILELANG_MINI_CACHE_DIR", str(tmp_path / "cache"))
    estimates = [0]
    real = rt_kernel.JITKernel.estimate

    def counted(self, *a, **kw):
        estimates[0] += 1
        return real(self, *a, **kw)
    monkeypatch.setattr(rt_kernel.JITKernel, "estimate", counted)

    @tilelang_mini.autotune(configs=[dict(threads=t) for t in (64, 128, 256)])
    @tilelang_mini.jit
    def eager(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), threads=128):
        C = T.empty((M, N), T.float32)
        with T.Kernel(1, threads=threads) as bx:
            a = T.alloc_shared((M, K), T.float16)
            b = T.alloc_shared((K, N), T.float16)
            c = T.alloc_fragment((M, N), T.float32)
            T.copy(A[0, 0], a)
            T.copy(B[0, bx * N], b)
            T.gemm(a, b, c, clear_accum=True)
            T.copy(c, C[0, 0])
        return C
    a, b = rand((M, K), "float16", 5), rand((K, N), "float16", 6)
    close(np.asarray(eager(a, b)), f64(a) @ f64(b), "float32", K)
    assert estimates[0] == 1
