"""tilelang-ascend's `T.copy(C_L0, C[...], enable_relu=True)`: the FixPipe copies an accumulator
out through a relu (IR `copy(C_L0, C[...], relu=True)`), in expert and developer mode, on every
target and simulated, against float64 NumPy references."""
import numpy as np
import pytest

import tilelang_mini as tilelang
import tilelang_mini.language as T
from tilelang_mini.ir.parser import parse_ir
from tilelang_mini.ir.printer import print_ir

from markers import kernel_error
from util import close, f64, rand
from kernels import cube_tiles

M, N, K, BM = 64, 32, 32, 32
TARGETS = ("numpy", "llvm")


def relu_gemm(expert):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((N, K), "float16"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(M // BM, is_npu=True) as (cid, vid):
            if expert:
                a_l1, b_l1, c_l0 = cube_tiles(BM, N, K, trans_B=True)
                with T.Scope("C"):
                    T.copy(A[cid * BM, 0], a_l1)
                    T.copy(B[0, 0], b_l1)
                    T.barrier_all()
                    T.gemm_v0(a_l1, b_l1, c_l0, transpose_B=True, init=True)
                    T.barrier_all()
                    T.copy(c_l0, C[cid * BM:(cid + 1) * BM, 0:N], enable_relu=True)
            else:
                a_s = T.alloc_shared((BM, K), "float16")
                b_s = T.alloc_shared((N, K), "float16")
                c_f = T.alloc_fragment((BM, N), "float32")
                T.copy(A[cid * BM, 0], a_s)
                T.copy(B[0, 0], b_s)
                T.gemm(a_s, b_s, c_f, transpose_B=True, clear_accum=True)
                T.copy(c_f, C[cid * BM, 0], enable_relu=True)
    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("expert", [True, False])
def test_enable_relu(expert, target):
    a, b = rand((M, K), "float16", seed=1), rand((N, K), "float16", seed=2)
    want = np.maximum(f64(a) @ f64(b).T, 0.0)
    assert (want == 0).any() and (want > 0).any()  # the relu matters
    k = tilelang.compile(relu_gemm(expert), target=target)
    c = np.full((M, N), -7.0, np.float32)
    k(a, b, c)
    close(c, want, "float16", K)
    if target == "numpy":
        c2 = np.full((M, N), -7.0, np.float32)
        k.simulate(a, b, c2)
        close(c2, want, "float16", K)


def test_relu_copy_prints_and_parses():
    k = tilelang.compile(relu_gemm(True), target="numpy")
    text = print_ir(k.ir)
    assert "relu=True" in text
    assert print_ir(parse_ir(text)) == text


def test_enable_relu_from_a_vector_tile_is_located():
    @kernel_error
    def err(X: T.Tensor((16,), "float32"), Y: T.Tensor((16,), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_ub((16,), "float32")
            T.copy(X, x)
            T.copy(x, Y, enable_relu=True)  # UB_RELU
    msg = str(err)
    assert "UB_RELU" in msg and "T.tile.relu" in msg
