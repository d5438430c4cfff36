"""@autotune above a jit function whose kernel cannot compile whatever the configuration (a
construct this machine rejects, at the user's line): the tuner raises that CompileError itself,
located at the kernel's line, not a summary of the failed configurations - in the factory form
and the eager form (as TileLang's gemv_alloc_reducer under @autotune was reported while
T.alloc_reducer was rejected)."""
import pytest

import tilelang_mini
import tilelang_mini.language as T
from tilelang_mini.autotuner import autotune

from util import rand

CONFIGS = [dict(block_M=bm) for bm in (32, 64)]


@autotune(configs=CONFIGS, warmup=1, rep=2)
@tilelang_mini.jit(out_idx=[-1])
def factory_form(M, block_M=32):
    @T.prim_func
    def main(A: T.Tensor((M,), T.float32), B: T.Tensor((M,), T.float32)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            T.alloc_barrier(1)  # a GPU mbarrier: rejected here
            t = T.alloc_fragment((block_M,), T.float32)
            T.copy(A[bx * block_M], t)
            T.copy(t, B[bx * block_M])
    return main


@autotune(configs=CONFIGS, warmup=1, rep=2)
@tilelang_mini.jit
def eager_form(A, block_M=32):
    M = T.const("M")
    A: T.Tensor((M,), T.float32)
    B = T.empty((M,), T.float32)
    with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
        T.alloc_barrier(1)
        t = T.alloc_fragment((block_M,), T.float32)
        T.copy(A[bx * block_M], t)
        T.copy(t, B[bx * block_M])
    return B


def test_factory_form_raises_the_kernels_error():
    with pytest.raises(tilelang_mini.CompileError) as err:
        factory_form(128)
    text = str(err.value)
    assert "test_autotune_errors.py:" in text and "alloc_barrier" in text
    assert "no configuration compiled" not in text


def test_eager_form_raises_the_kernels_error():
    with pytest.raises(tilelang_mini.CompileError) as err:
        eager_form(rand((128,)))
    text = str(err.value)
    assert "test_autotune_errors.py:" in text and "alloc_barrier" in text
    assert "no configuration compiled" not in text
