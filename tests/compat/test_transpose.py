"""T.copy(..., transpose=True): tilelang-ascend's transposing L1 -> L0B load in expert mode
(Q @ K^T as the HISA indexer writes it), and transposing copies between GM and tiles in
developer mode; on every target and simulated, against float64 NumPy references."""
import numpy as np

import tilelang_mini as tilelang
import tilelang_mini.language as T
from tilelang_mini.ir.parser import parse_ir
from tilelang_mini.ir.printer import print_ir

from markers import kernel_error
from util import close, f64, rand
from kernels import load_for

H, KV, D = 16, 32, 64


def test_expert_l1_to_l0b_transpose(target):
    @T.prim_func
    def main(Q: T.Tensor((H, D), "float16"), K: T.Tensor((4 * KV, D), "float16"),
             S: T.Tensor((4 * H, KV), "float32")):
        with T.Kernel(4, is_npu=True) as (cid, vid):
            q_l1 = T.alloc_L1([H, D], "float16")
            k_l1 = T.alloc_L1([KV, D], "float16")
            l0a = T.alloc_L0A([H, D], "float16")
            l0b = T.alloc_L0B([D, KV], "float16")
            l0c = T.alloc_L0C([H, KV], "float32")
            with T.Scope("C"):
                T.copy(Q[0, 0], q_l1)
                load_for("MTE1", K[cid * KV, 0], k_l1)
                T.copy(q_l1, l0a)
                T.copy(k_l1, l0b, transpose=True)
                T.set_flag("MTE1", "M", 0)
                T.wait_flag("MTE1", "M", 0)
                T.mma(l0a, l0b, l0c, init=True)
                T.set_flag("M", "FIX", 0)
                T.wait_flag("M", "FIX", 0)
                T.copy(l0c, S[cid * H, 0])

    kernel = tilelang.compile(main, out_idx=[-1], target=target)
    assert "copy(k_l1, l0b, transpose=True)" in print_ir(kernel.ir)
    assert parse_ir(print_ir(kernel.ir)) == kernel.ir
    q, k = rand((H, D), "float16", 1), rand((4 * KV, D), "float16", 2)
    want = np.concatenate([f64(q) @ f64(k[c * KV:(c + 1) * KV]).T for c in range(4)])
    close(kernel(q, k), want, reduce_len=D)
    if target == "numpy":
        close(kernel.simulate(q, k)[0], want, reduce_len=D)


def test_developer_transposed_copies(target):
    """B given as (N, K) is loaded transposed into a (K, N) tile; the result tile is stored
    transposed (C^T) with a clipped edge."""
    M, N, K = 48, 40, 32

    @T.prim_func
    def main(A: T.Tensor((M, K), "float32"), Bt: T.Tensor((N, K), "float32"),
             Ct: T.Tensor((N, M), "float32")):
        with T.Kernel(T.ceildiv(M, 32)) as bx:
            a = T.alloc_shared((32, K), "float32")
            b = T.alloc_shared((K, N), "float32")
            c = T.alloc_fragment((32, N), "float32")
            T.copy(A[bx * 32, 0], a)
            T.copy(Bt[0:N, 0:K], b, transpose=True)
            T.gemm(a, b, c, clear_accum=True)
            T.copy(c, Ct[0, bx * 32], transpose=True)

    kernel = tilelang.compile(main, out_idx=[-1], target=target)
    a, bt = rand((M, K), seed=3), rand((N, K), seed=4)
    want = (f64(a) @ f64(bt).T).T
    close(kernel(a, bt), want, reduce_len=K)
    if target == "numpy":
        close(kernel.simulate(a, bt)[0], want, reduce_len=K)


def test_transpose_shape_error():
    @kernel_error
    def err(A: T.Tensor((16, 32), "float32")):
        with T.Kernel(1) as bx:
            t = T.alloc_fragment((16, 32), "float32")
            T.copy(A, t, transpose=True)
    assert "transpose" in str(err) and "test_transpose.py" in str(err)


def test_transpose_of_rows_and_columns(target):
    """A (1, n) row transposed into an (n, 1) column (and back), GM -> tile, tile -> tile and
    tile -> GM: the same elements in order (fuzz family misc: a located 'copies 2-D tiles'
    error before)."""
    f32 = "float32"

    @T.prim_func
    def main(X: T.Tensor((5, 8), f32), Y: T.Tensor((8, 5), f32), Z: T.Tensor((8, 5), f32)):
        with T.Kernel(5) as by:
            col = T.alloc_shared((8, 1), f32)
            row = T.alloc_fragment((1, 8), f32)
            T.copy(X[by, 0], col, transpose=True)       # GM row -> column tile
            T.copy(col, Y[0, by])
            T.copy(col, row, transpose=True)             # column -> row
            for i, j in T.Parallel(1, 8):
                row[i, j] = row[i, j] * 2.0
            T.copy(row, Z[0, by], transpose=True)        # row -> GM column

    x = rand((5, 8), seed=31)
    kernel = tilelang.compile(main, out_idx=[1, 2], target=target)
    y, z = kernel(x)
    close(y, f64(x).T)
    close(z, 2.0 * f64(x).T)
    if target == "numpy":
        (y, z), _ = kernel.simulate(x)
        close(z, 2.0 * f64(x).T)
