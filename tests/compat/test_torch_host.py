"""Examples' own host code with real torch on the CPU (skipped where torch is not installed):
torch tensors of every dtype the examples use in and out (fp16, bf16, fp8, int32, int64, bool),
non-contiguous views, outputs written in place, the profiler handing torch tensors to a
reference written with torch, torch.testing on the outputs, `dtype.as_torch()`."""
import numpy as np
import pytest

import tilelang_mini
import tilelang_mini.language as T
from tilelang_mini.utils.tensor import torch_assert_close

from test_profiler_host import iota

torch = pytest.importorskip("torch")
if getattr(torch, "_C", None) is None:  # the NumPy stand-in of benchmarks/torch_shim
    pytest.skip("needs a real torch", allow_module_level=True)


@tilelang_mini.jit(out_idx=[-1])
def cast_scale(M, N, in_dtype, out_dtype, blk=16):
    @T.prim_func
    def main(X: T.Tensor((M, N), in_dtype), Y: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(M, blk)) as bx:
            x = T.alloc_fragment((blk, N), T.float32)
            y = T.alloc_fragment((blk, N), out_dtype)
            T.copy(X[bx * blk, 0], x)
            for i, j in T.Parallel(blk, N):
                y[i, j] = T.Cast(out_dtype, x[i, j] * 0.5)
            T.copy(y, Y[bx * blk, 0])
    return main


@pytest.mark.parametrize("in_dtype,out_dtype", [
    ("float16", "float32"), ("bfloat16", "bfloat16"), ("float32", "float8_e4m3fn"),
    ("float32", "float8_e5m2"), ("float16", "bfloat16")])
def test_torch_dtypes_in_and_out(target, monkeypatch, in_dtype, out_dtype):
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    x = torch.randn(32, 24).to(getattr(torch, in_dtype))
    y = cast_scale(32, 24, in_dtype, out_dtype)(x)
    assert isinstance(y, torch.Tensor) and y.dtype == getattr(torch, out_dtype)
    want = (x.double() * 0.5).to(getattr(torch, out_dtype))
    assert torch.equal(y.view(torch.uint8) if y.element_size() == 1 else y, want.view(
        torch.uint8) if want.element_size() == 1 else want) or torch.allclose(
        y.double(), want.double(), rtol=1e-2, atol=1e-2)
    torch_assert_close(y, x.double() * 0.5, rtol=0.07, atol=0.07)


@tilelang_mini.jit(out_idx=[-1])
def int_mask(M, N, blk=16):
    @T.prim_func
    def main(A: T.Tensor((M, N), T.int64), B: T.Tensor((M, N), T.bool),
             C: T.Tensor((M, N), T.int32)):
        with T.Kernel(T.ceildiv(M, blk)) as bx:
            for i, j in T.Parallel(blk, N):
                C[bx * blk + i, j] = T.if_then_else(B[bx * blk + i, j],
                                                    T.Cast(T.int32, A[bx * blk + i, j]), 0)
    return main


def test_int64_and_bool_tensors(target, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    a = torch.randint(-100, 100, (16, 8), dtype=torch.int64)
    b = torch.rand(16, 8) > 0.5
    c = int_mask(16, 8)(a, b)
    assert c.dtype == torch.int32
    assert torch.equal(c, torch.where(b, a, 0).to(torch.int32))


@tilelang_mini.jit
def add_into(M, N, blk=16):
    @T.prim_func
    def main(A: T.Tensor((M, N), T.float32), B: T.Tensor((M, N), T.float32),
             C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(M, blk)) as bx:
            for i, j in T.Parallel(blk, N):
                C[bx * blk + i, j] = A[bx * blk + i, j] + B[bx * blk + i, j]
    return main


def test_views_in_and_outputs_written_in_place(target, monkeypatch):
    """`.t()` and sliced inputs, a preallocated output (contiguous, or a strided view of a
    larger tensor, or requiring grad's sibling detach): the caller's tensor holds the result."""
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    k = add_into(16, 32)
    a = torch.randn(32, 16).t()
    b = torch.randn(16, 64)[:, ::2]
    c = torch.empty(16, 32)
    k(a, b, c)
    torch.testing.assert_close(c, a + b)
    big = torch.zeros(16, 64)
    k(a, b, big[:, 1::2])
    torch.testing.assert_close(big[:, 1::2], a + b)
    assert torch.count_nonzero(big[:, ::2]) == 0
    p = torch.nn.Parameter(torch.randn(16, 32))
    k(p, b, c)
    torch.testing.assert_close(c, p.detach() + b)


def test_profiler_hands_torch_tensors_to_a_torch_reference(target, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    kernel = cast_scale(32, 24, "float16", "float32")
    seen = []

    def ref_program(x):
        seen.append(type(x))
        return (x.float() * 0.5).pow(1)
    prof = kernel.get_profiler()
    prof.assert_allclose(ref_program, rtol=0.01, atol=0.01)
    assert seen == [torch.Tensor]
    with pytest.raises(AssertionError):
        prof.assert_allclose(lambda x: torch.relu(x.float()), rtol=0.01, atol=0.01)
    assert prof.do_bench(ref_program, warmup=1, rep=1) >= 0
    assert prof.do_bench(warmup=1, rep=1) >= 0


def test_dtype_as_torch_and_from_torch():
    assert T.float8_e4m3fn.as_torch() is torch.float8_e4m3fn
    assert T.bfloat16.as_torch() is torch.bfloat16 and T.float.as_torch() is torch.float32
    assert T.dtype(torch.float16) == "float16" and T.dtype(torch.bfloat16) == T.bfloat16
    with pytest.raises(TypeError):
        T.float4_e2m1fn.as_torch()


def test_a_kernel_of_scalars_returns_torch_to_torch_code(target, monkeypatch):
    """No tensor argument (random_1d's `func()`): TileLang returns torch tensors, so code
    written with torch (this module) gets one; NumPy code keeps NumPy (test_profiler_host)."""
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    y = iota(32)(5)
    assert isinstance(y, torch.Tensor)
    torch.testing.assert_close(y, torch.arange(5, 37, dtype=torch.int32))


@tilelang_mini.jit(out_idx=[-1])
def doubled(n, dtype, acc_dtype=torch.float32):
    @T.prim_func
    def main(A: T.Tensor((n,), dtype), B: T.Tensor((n,), dtype)):
        with T.Kernel(1):
            acc = T.alloc_fragment((n,), acc_dtype)
            T.copy(A, acc)
            for i in T.Parallel(n):
                B[i] = T.Cast(dtype, acc[i] * 2)
    return main


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.int16, torch.uint8])
def test_torch_dtypes_in_the_kernel(target, monkeypatch, dtype):
    """TileLang takes torch dtypes wherever a dtype goes (T.Tensor, allocations, casts)."""
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    a = torch.arange(16).to(dtype)
    b = doubled(16, dtype)(a)
    assert b.dtype == dtype
    torch.testing.assert_close(b, (a.double() * 2).to(dtype))


def test_simulate_takes_torch_tensors_of_any_dtype(monkeypatch):
    """The simulator's argument checks read torch tensors as calls do (bf16 and FP8 have no
    DLPack / __array__ path in NumPy); a tensor off the CPU is an ArgumentError."""
    k = cast_scale(32, 24, "bfloat16", "float8_e4m3fn")
    x = torch.randn(32, 24).to(torch.bfloat16)
    got, _report = k.simulate(x)
    want = (x.double() * 0.5).to(torch.float8_e4m3fn)
    np.testing.assert_array_equal(np.asarray(got).view(np.uint8), want.view(torch.uint8).numpy())
    out = torch.empty(16, 32)
    add_into(16, 32).simulate(torch.ones(16, 32), torch.full((16, 32), 2.0), out)
    assert torch.equal(out, torch.full((16, 32), 3.0))
    with pytest.raises(tilelang_mini.ArgumentError, match="CPU"):
        k(x.to("meta"))


def test_torch_dtype_maps_of_tilelang_language_dtypes(target, monkeypatch):
    """gemm_sp's sparse_utils: `from tilelang.language.dtypes import _TORCH_DTYPE_TO_STR, dtype`
    and `dtype(_TORCH_DTYPE_TO_STR[t.dtype])` picks a kernel's dtype from a torch tensor (at the
    examples' own sizes the import failed: the name did not exist)."""
    from tilelang_mini.language.dtypes import _STR_TO_TORCH_DTYPE, _TORCH_DTYPE_TO_STR, dtype
    assert _TORCH_DTYPE_TO_STR[torch.half] == "float16" and _TORCH_DTYPE_TO_STR[torch.int] == "int32"
    assert _STR_TO_TORCH_DTYPE["bfloat16"] is torch.bfloat16
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    for t in (torch.float16, torch.bfloat16, torch.float32):
        x = torch.randn(32, 24).to(t)
        y = cast_scale(32, 24, dtype(_TORCH_DTYPE_TO_STR[x.dtype]), "float32")(x)
        np.testing.assert_allclose(y.numpy(), x.double().numpy() * 0.5, rtol=1e-6)
