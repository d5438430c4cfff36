"""GEMMs whose B tile is read transposed and is narrower than the llvm target's 32-column
panel (8 or 24 columns, `transpose_B=True`), with the tensor's columns a whole tile, a tail, or
fewer than the tile: the K-pair micro-kernel layout. Before, the llvm code generator built
kernels the tile could never run (a whole 32-column panel of an 8-column tile, a 16-column
narrow kernel of the K-pair panels, a 10-column kernel for a 10-column tensor in a 24-column
tile) and stopped with an internal compiler error. Both targets and simulated."""
import pytest

import tilelang_mini as tilelang
import tilelang_mini.language as T

from util import close, f64, rand


def gemm_nt(M, N, K, bm, bn, bk):
    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((N, K), T.float16),
             C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            a = T.alloc_shared((bm, bk), T.float16)
            b = T.alloc_shared((bn, bk), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                T.copy(A[by * bm, k * bk], a)
                T.copy(B[bx * bn, k * bk], b)
                T.gemm(a, b, acc, transpose_B=True)
            T.copy(acc, C[by * bm, bx * bn])
    return main


@pytest.mark.parametrize("M, N, K, bm, bn, bk", [
    (8, 8, 8, 8, 8, 8),        # one 8-column tile
    (24, 19, 20, 16, 8, 8),    # 8-column tiles, a tail of 3
    (24, 10, 20, 16, 24, 8),   # a 10-column tensor in a 24-column tile
    (24, 29, 20, 16, 24, 8),   # 24-column tiles, a tail of 5
    (20, 12, 24, 16, 8, 8),
])
def test_narrow_transposed_b(target, M, N, K, bm, bn, bk):
    kernel = tilelang.compile(gemm_nt(M, N, K, bm, bn, bk), out_idx=[-1], target=target)
    a, b = rand((M, K), "float16", 1), rand((N, K), "float16", 2)
    want = f64(a) @ f64(b).T
    close(kernel(a, b), want, "float32", K)
    if target == "numpy":
        close(kernel.simulate(a, b)[0], want, "float32", K)
