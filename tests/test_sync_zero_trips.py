"""insert_sync after a loop whose trip count is read at run time (a `while`, `T.serial` over
bounds from a tensor): a producer before the loop (a GM -> UB copy) whose consumer follows the
loop must be waited for even when the loop runs no trip. The flags of the loop body (its own
MTE2 -> V copy of the cube's result) order it only when a trip ran; before, blocks with no trip
read the tile before the copy landed (a race the simulator reported; the fuzzer's `flow`
family found it). Both targets and both chips, against a float64 NumPy reference, with blocks
of zero, one and several trips."""
import numpy as np
import pytest

import tilelang_mini
import tilelang_mini.language as T

M, N, K, BM, BK = 64, 16, 80, 32, 16


def ragged(form):
    @T.prim_func
    def main(A: T.Tensor((M, K), T.bfloat16), B: T.Tensor((K, N), T.bfloat16),
             Lo: T.Tensor((M // BM,), T.int32), Hi: T.Tensor((M // BM,), T.int32),
             G: T.Tensor((M, N), T.float32), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(M // BM, is_npu=True) as (cid, vid):
            A_s = T.alloc_L1((BM, BK), T.bfloat16)
            B_s = T.alloc_L1((BK, N), T.bfloat16)
            C_f = T.alloc_L0C((BM, N), T.float32)
            y = T.alloc_ub((BM, N), T.float32)
            cu = T.alloc_ub((BM, N), T.float32)
            x = T.alloc_ub((BM, N), T.float32)
            k = T.alloc_var(T.int32)
            T.tile.fill(y, 0.0)
            T.copy(G[cid * BM, 0], x)      # before the loop, read only after it
            if form == "while":
                k = Lo[cid]
                while k < Hi[cid]:
                    T.copy(A[cid * BM, k], A_s)
                    T.copy(B[k, 0], B_s)
                    T.gemm(A_s, B_s, C_f, clear_accum=True)
                    T.copy(C_f, cu)
                    T.tile.add(y, y, cu)
                    k = k + BK
            else:
                for j in T.serial(Lo[cid] // BK, Hi[cid] // BK):
                    T.copy(A[cid * BM, j * BK], A_s)
                    T.copy(B[j * BK, 0], B_s)
                    T.gemm(A_s, B_s, C_f, clear_accum=True)
                    T.copy(C_f, cu)
                    T.tile.add(y, y, cu)
            T.tile.add(y, y, x)
            T.copy(y, C[cid * BM, 0])
    return main


@pytest.mark.parametrize("form", ["while", "serial"])
@pytest.mark.parametrize("lo, hi", [((16, 0), (16, 80)), ((0, 32), (48, 32))])
def test_producer_before_a_loop_of_no_trip(target, form, lo, hi):
    rng = np.random.default_rng(len(form) + lo[0])
    a = rng.uniform(-1, 1, (M, K)).astype(tilelang_mini.ir.dtypes.to_numpy(T.bfloat16))
    b = rng.uniform(-1, 1, (K, N)).astype(tilelang_mini.ir.dtypes.to_numpy(T.bfloat16))
    g = rng.uniform(-1, 1, (M, N)).astype(np.float32)
    lo, hi = np.array(lo, np.int32), np.array(hi, np.int32)
    want = g.astype(np.float64).copy()
    af, bf = a.astype(np.float64), b.astype(np.float64)
    for blk in range(M // BM):
        for k in range(lo[blk], hi[blk], BK):
            want[blk * BM:(blk + 1) * BM] += af[blk * BM:(blk + 1) * BM, k:k + BK] @ bf[k:k + BK]
    for chip in ("ascend910b", "ascend950"):
        kern = tilelang_mini.compile(ragged(form), out_idx=[-1], target=target, chip=chip)
        outs = [kern(a, b, lo, hi, g)] + ([kern.simulate(a, b, lo, hi, g)[0]]
                                       if target == "numpy" else [])
        for got in outs:
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
