"""TileLang's `tilelang.cuda` (CUDA warp MMA emitters, ldmatrix layouts): its modules import,
and using one of their names is a CompileError at the user's line naming it, in host code (the
BitNet prefill factory builds its INT4TensorCoreIntrinEmitter before the kernel) and in a
kernel (example_gemm_intrinsics); never a NameError or an internal error."""
import pytest

import tilelang_mini
import tilelang_mini.language as T
from tilelang_mini.cuda.intrinsics.layout.mma_layout import make_mma_swizzle_layout
from tilelang_mini.cuda.intrinsics.macro.mma_macro_generator import TensorCoreIntrinEmitter


def located(err, name, line):
    text = str(err.value)
    assert name in text and "T.gemm" in text, text
    assert f"test_cuda_stubs.py:{line}:" in text, text
    assert "tilelang_mini/" not in text, text


def test_host_use_is_located():
    with pytest.raises(tilelang_mini.CompileError) as e:
        TensorCoreIntrinEmitter(a_dtype="float16", chunk=32)
    located(e, "tilelang.cuda.intrinsics.macro.mma_macro_generator.TensorCoreIntrinEmitter",
            test_host_use_is_located.__code__.co_firstlineno + 2)


def test_attribute_use_is_located():
    with pytest.raises(tilelang_mini.CompileError) as e:
        TensorCoreIntrinEmitter.ldmatrix_a
    located(e, "TensorCoreIntrinEmitter", test_attribute_use_is_located.__code__.co_firstlineno + 2)


def test_kernel_use_is_located():
    with pytest.raises(tilelang_mini.CompileError) as e:
        @T.prim_func
        def main(A: T.Tensor((16, 16), T.float16)):
            with T.Kernel(1) as bx:
                a = T.alloc_shared((16, 16), T.float16)
                T.annotate_layout({a: make_mma_swizzle_layout(a)})  # a hint: not evaluated
                emitter = TensorCoreIntrinEmitter(a_dtype="float16")
                T.copy(A[bx * 16, 0], a)
                emitter.mma(a, a, a)
    located(e, "mma_macro_generator.TensorCoreIntrinEmitter",
            test_kernel_use_is_located.__code__.co_firstlineno + 7)
