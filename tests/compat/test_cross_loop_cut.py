"""check_sync walks long loops cut (their first and last trips, whole periods of their `% m`
indices skipped between). The cube's loop and the vector cores' loop that exchange cross-core
flags must be cut alike: tilelang-ascend's flash_attn_bhsd at seq_len 512 has `cid % 8` in the
cube's copies and no `%` in the vector loop, so the walk visited 8 cube trips and 4 vector trips
and reported a deadlock the hardware never has (seq_len 128 and 256 were walked whole)."""
import numpy as np
import pytest

import tilelang_mini as tilelang
import tilelang_mini.language as T

from kernels import cube_tiles
from util import close, f64, rand


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_CACHE_DIR", str(tmp_path / "cache"))


def rotating_sum(blocks=8, groups=4, trips=8, M=64, N=32, K=32):
    """O[b] = sum over k of A[b % groups] @ B[k]: the cube computes each product (A's rows
    chosen by `cid % groups` inside its loop) into a workspace, the vector cores add it to
    their half of the sum row by row (many instructions per trip: the walk is cut)."""
    H = M // 2

    @T.prim_func
    def main(A: T.Tensor((groups * M, K), T.float16), B: T.Tensor((trips * K, N), T.float16),
             ws: T.Tensor((blocks * M, N), T.float32), O: T.Tensor((blocks * M, N), T.float32)):
        with T.Kernel(blocks, is_npu=True) as (cid, vid):
            a_l1, b_l1, c_l0 = cube_tiles(M, N, K)
            x_ub = T.alloc_ub((H, N), T.float32)
            acc = T.alloc_ub((H, N), T.float32)
            with T.Scope("C"):
                for k in T.serial(trips):
                    T.copy(A[(cid % groups) * M, 0], a_l1)
                    T.copy(B[k * K, 0], b_l1)
                    T.gemm_v0(a_l1, b_l1, c_l0, init=True)
                    T.copy(c_l0, ws[cid * M, 0])
                    T.set_cross_flag("FIX", 0)
                    T.wait_cross_flag(1)
            with T.Scope("V"):
                T.tile.fill(acc, 0.0)
                for _k in T.serial(trips):
                    T.wait_cross_flag(0)
                    T.copy(ws[cid * M + vid * H, 0], x_ub)
                    for h in range(H):
                        T.tile.add(acc[h, :], acc[h, :], x_ub[h, :])
                    T.set_cross_flag("V", 1)
                T.copy(acc, O[cid * M + vid * H, 0])
    return main


@pytest.mark.parametrize("target", ["numpy", "llvm"])
def test_cube_and_vector_loops_cut_alike(target):
    blocks, groups, trips, M, N, K = 8, 4, 8, 64, 32, 32
    kernel = tilelang.compile(rotating_sum(blocks, groups, trips, M, N, K), out_idx=[3],
                              workspace_idx=[2], target=target)
    a = rand((groups * M, K), "float16", 1, 0.3)
    b = rand((trips * K, N), "float16", 2, 0.3)
    bsum = f64(b).reshape(trips, K, N).sum(0)
    want = np.concatenate([f64(a[(i % groups) * M:(i % groups + 1) * M]) @ bsum
                           for i in range(blocks)])
    close(kernel(a, b), want, "float32", reduce_len=K * trips)
    close(kernel.simulate(a, b)[0], want, "float32", reduce_len=K * trips)
