"""The GPU-only surfaces the remaining upstream example files touch, each a located CompileError
naming it (never an internal error or a NameError), and the host-side helpers that are not
GPU-specific, working:

- an eager jit function whose body is `with T.ClusterKernel(...)` (the Blackwell 2-CTA GEMMs)
  is recognised as eager, so its `T.empty` outputs do not fail as Python; the launch is the
  located error naming T.ClusterKernel;
- `tilelang.rocm` (AMD MFMA emitters) imports as stubs like `tilelang.cuda`;
- `tilelang.tileop.base.GemmWarpPolicy` is T.GemmWarpPolicy, with compute_warp_partition;
- `tilelang.cuda.intrinsics.sparse_layout` (the 2:4 metadata contract) computes;
- an unknown `T.tile.<op>_experiment` name suggests the T.tile op it counts out of."""
import numpy as np
import pytest

import tilelang_mini
import tilelang_mini.language as T
from tilelang_mini.cuda.intrinsics.sparse_layout import get_e_factor, get_e_replicate_factor
from tilelang_mini.rocm.intrinsics.mfma_macro_generator import MatrixCoreIntrinEmitter
from tilelang_mini.tileop.base import GemmWarpPolicy


def here(err, line):
    text = str(err.value)
    assert f"test_gpu_module_stubs.py:{line}:" in text, text
    return text


@tilelang_mini.jit
def cluster_gemm(A, B, block_M):
    M, N, K = T.const("M, N, K")
    A: T.Tensor[[M, K], T.float16]
    B: T.Tensor[[K, N], T.float16]
    C = T.empty((M, N), T.float16)
    with T.ClusterKernel(T.ceildiv(M, block_M), threads=128, cluster_dims=2) as bx:
        a = T.alloc_shared((block_M, K), T.float16)
        T.copy(A[bx * block_M, 0], a)
    return C


def test_cluster_kernel_is_located():
    a, b = np.zeros((64, 32), np.float16), np.zeros((32, 16), np.float16)
    with pytest.raises(tilelang_mini.CompileError) as e:
        cluster_gemm(a, b, 32)
    text = here(e, cluster_gemm.fn.__code__.co_firstlineno + 6)
    assert "T.ClusterKernel is GPU-only" in text and "T.Kernel" in text, text


def test_rocm_emitter_is_located():
    with pytest.raises(tilelang_mini.CompileError) as e:
        MatrixCoreIntrinEmitter(a_dtype="float16", chunk=32)
    text = here(e, test_rocm_emitter_is_located.__code__.co_firstlineno + 2)
    assert "ROCm-only (tilelang.rocm)" in text and "T.gemm" in text, text


def test_gemm_warp_policy_partition():
    assert GemmWarpPolicy is T.GemmWarpPolicy
    assert GemmWarpPolicy.FullRow.compute_warp_partition(64, 64, 4) == (4, 1)
    assert GemmWarpPolicy.FullCol.compute_warp_partition(64, 64, 4) == (1, 4)
    assert GemmWarpPolicy.Square.compute_warp_partition(128, 32, 4) == (4, 1)
    assert GemmWarpPolicy.Square.compute_warp_partition(64, 64, 4) == (2, 2)
    m, n = GemmWarpPolicy.Square.compute_warp_partition(96, 128, 8)
    assert m * n == 8


def test_sparse_layout_contract():
    # an int16 holds four 4-bit fields, each for a group of 4 (2:4) or of 2 (float32, 1:2)
    assert get_e_factor(T.float16, T.int16) == 16
    assert get_e_factor("bfloat16", "int32") == 32
    assert get_e_factor(T.float32, T.int16) == 8
    assert get_e_factor(T.int8, T.int32) == 32
    assert get_e_replicate_factor(T.float16) == 2 and get_e_replicate_factor(T.int8) == 1


def test_unknown_tile_experiment_op_names_the_plain_op():
    with pytest.raises(tilelang_mini.CompileError) as e:
        @T.prim_func
        def main(A: T.Tensor((64,), T.float32)):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                a = T.alloc_ub((64,), T.float32)
                T.copy(A, a)
                T.tile.sub_experiment(a, a, a, 64)
    text = here(e, test_unknown_tile_experiment_op_names_the_plain_op.__code__.co_firstlineno + 7)
    assert "T.tile.sub_experiment is not supported" in text and "T.tile.sub " in text, text


def test_rocm_target_queries_answer_no():
    """`from tilelang.rocm.target import target_is_gfx950` (dequantize_gemm's mxfp helpers) is a
    host-side query: this machine is no AMD GPU, so the example takes its portable path."""
    from tilelang_mini.rocm.target import target_is_cdna, target_is_gfx950
    assert target_is_gfx950("hip") is False and target_is_cdna(None) is False
