"""A kernel's own set_cross_flag releases what the other core may overwrite once the flag arrives:
every earlier access of a GM tensor both cores use, on any pipe of the setting core, finishes
before the set (insert_sync adds the intra-core flag). tilelang-ascend's gdn chunk_o reads a
workspace on MTE2, signals on MTE3, and the cube then overwrites that workspace; without the
release the read could still be in flight (simulate: race)."""
import numpy as np
import pytest

import tilelang_mini as tilelang
import tilelang_mini.language as T

from kernels import cube_tiles
from util import close, f64, rand


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_CACHE_DIR", str(tmp_path / "cache"))


def read_then_overwrite(M=32, N=32):
    """O = A @ B1 + A @ B2, both products handed to the vector cores through ws: the vector
    cores read the first from ws, signal on MTE3 (after writing a flag tile to done), and the
    cube overwrites ws with the second product."""
    H = M // 2

    @T.prim_func
    def main(A: T.Tensor((M, N), "float16"), B1: T.Tensor((N, N), "float16"),
             B2: T.Tensor((N, N), "float16"), ws: T.Tensor((M, N), "float16"),
             done: T.Tensor((M, N), "float16"), O: T.Tensor((M, N), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a_l1, b_l1, c_l0 = cube_tiles(M, N, N)
            x_ub = T.alloc_ub((H, N), "float16")
            y_ub = T.alloc_ub((H, N), "float16")
            z_ub = T.alloc_ub((H, N), "float16")
            o_ub = T.alloc_ub((H, N), "float32")
            with T.Scope("C"):
                T.copy(A[0, 0], a_l1)
                T.copy(B1[0, 0], b_l1)
                T.gemm_v0(a_l1, b_l1, c_l0, init=True)
                T.copy(c_l0, ws[0, 0])
                T.set_cross_flag("FIX", 0)
                T.wait_cross_flag(1)
                T.copy(B2[0, 0], b_l1)
                T.gemm_v0(a_l1, b_l1, c_l0, init=True)
                T.copy(c_l0, ws[0, 0])
                T.set_cross_flag("FIX", 2)
            with T.Scope("V"):
                T.wait_cross_flag(0)
                T.copy(ws[vid * H, 0], x_ub)
                T.tile.fill(y_ub, 1.0)
                T.copy(y_ub, done[vid * H, 0])
                T.set_cross_flag("MTE3", 1)
                T.wait_cross_flag(2)
                T.copy(ws[vid * H, 0], z_ub)
                for i, j in T.Parallel(H, N):
                    o_ub[i, j] = T.cast(x_ub[i, j], "float32") + T.cast(z_ub[i, j], "float32")
                T.copy(o_ub, O[vid * H, 0])
    return main


@pytest.mark.parametrize("target", ["numpy", "llvm"])
@pytest.mark.parametrize("chip", ["ascend910b", "ascend950"])
def test_cross_set_releases_earlier_reads(target, chip):
    kernel = tilelang.compile(read_then_overwrite(), out_idx=[5], workspace_idx=[3, 4],
                              target=target, chip=chip)
    a = rand((32, 32), "float16", 1, 0.3)
    b1, b2 = rand((32, 32), "float16", 2, 0.3), rand((32, 32), "float16", 3, 0.3)
    # the products pass through fp16 workspaces: round them as the kernel does
    p1 = f64((f64(a) @ f64(b1)).astype(np.float16))
    p2 = f64((f64(a) @ f64(b2)).astype(np.float16))
    close(kernel(a, b1, b2), p1 + p2, "float16", reduce_len=32)
    close(kernel.simulate(a, b1, b2)[0], p1 + p2, "float16", reduce_len=32)
    lowered = kernel.get_ir("insert_sync")
    vector = lowered[lowered.index('Scope("V")'):]
    release = vector[:vector.index("set_cross_flag(MTE3, 1)")]
    assert "set_flag(MTE2, MTE3" in release, vector
