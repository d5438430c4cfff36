"""TileLang's AutoTuner API form (`AutoTuner.from_kernel(kernel=f, configs=...)
.set_compile_args(out_idx=, target=).set_profile_args(...).run(warmup=, rep=)`) and
configurations holding `pass_configs` (a jit option, not a factory argument): the result's
`.kernel` computes A @ B^T on both targets and in the simulator (float64 NumPy reference)."""
import numpy as np
import pytest

import tilelang_mini
import tilelang_mini.language as T
from tilelang_mini.autotuner import AutoTuner, autotune

from util import close, f64, rand

CONFIGS = [dict(block_M=bm, block_N=64, block_K=32,
                pass_configs={tilelang_mini.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: ws})
           for bm in (32, 64) for ws in (True, False)]


def make(M, N, K):
    def kernel(block_M=None, block_N=None, block_K=None):
        @T.prim_func
        def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((N, K), T.float16),
                 C: T.Tensor((M, N), T.float16)):
            with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
                a = T.alloc_shared((block_M, block_K), T.float16)
                b = T.alloc_shared((block_N, block_K), T.float16)
                c = T.alloc_fragment((block_M, block_N), T.float32)
                T.clear(c)
                for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                    T.copy(A[by * block_M, k * block_K], a)
                    T.copy(B[bx * block_N, k * block_K], b)
                    T.gemm(a, b, c, transpose_B=True)
                T.copy(c, C[by * block_M, bx * block_N])
        return main
    return kernel


@pytest.mark.parametrize("target", ["numpy", "llvm"])
def test_api_form(target):
    result = (AutoTuner.from_kernel(kernel=make(128, 128, 64), configs=CONFIGS)
              .set_compile_args(out_idx=[-1], target=target)
              .set_profile_args(supply_type=None, ref_prog=None, skip_check=False)
              .run(warmup=1, rep=2))
    assert result.config in CONFIGS and result.latency > 0
    assert result.kernel.target == target
    a, b = rand((128, 64), "float16", 1), rand((128, 64), "float16", 2)
    want = f64(a) @ f64(b).T
    close(np.asarray(result.kernel(a, b)), want, "float16", 64)
    if target == "numpy":
        got, _ = result.kernel.simulate(a, b)
        close(np.asarray(got), want, "float16", 64)


def test_decorator_form_with_pass_configs():
    @autotune(configs=CONFIGS, warmup=1, rep=2)
    @tilelang_mini.jit(out_idx=[-1])
    def matmul(M, N, K, block_M=64, block_N=64, block_K=32):
        return make(M, N, K)(block_M, block_N, block_K)

    kern = matmul(128, 128, 64)
    assert kern.config["block_M"] in (32, 64)
    a, b = rand((128, 64), "float16", 3), rand((128, 64), "float16", 4)
    close(np.asarray(kern(a, b)), f64(a) @ f64(b).T, "float16", 64)
