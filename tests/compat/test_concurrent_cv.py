"""tilelang-ascend's TL_ASCEND_AUTO_CV_COMBINE style: a developer-mode is_npu kernel whose cube
and vector statements run as two concurrent programs meeting at GM workspaces (a workspace read
before any statement writes it: the other core's write of the same iteration). The compiler
makes it two Scope programs with cross flags (frontend/workspace_order.py); checked on numpy,
llvm and the simulator against float64 references, and unpairable kernels are located errors."""
import numpy as np
import pytest

import tilelang_mini as tilelang
import tilelang_mini.language as T
from tilelang_mini.errors import CompileError

from kernels import cube_tiles
from util import close, f64, rand


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_CACHE_DIR", str(tmp_path / "cache"))


def ping_pong(n_iter, M=32, N=32, reads=1):
    """Per block: for each k the cube writes S = A_b @ B_k to ws_s, then reads P from ws_p
    (written by the vector program below it in the source) and writes P @ B_k to ws_s; the
    vector program turns each S into P = relu(S) (fp16) and sums the P @ B_k into Y.
    `reads=2`: the vector program reads ws_s once more than the cube writes it (unpairable)."""
    @T.prim_func
    def main(A: T.Tensor((2 * M, N), "float16"), B: T.Tensor((n_iter, N, N), "float16"),
             Y: T.Tensor((2 * M, N), "float32"),
             ws_s: T.Tensor((2, M, N), "float32"), ws_p: T.Tensor((2, M, N), "float16")):
        with T.Kernel(2, is_npu=True) as (cid, vid):
            a_l1, b_l1, c_l0 = cube_tiles(M, N, N)
            p_l1 = T.alloc_L1((M, N), "float16")
            s_ub = T.alloc_ub((M, N), "float32")
            p_ub = T.alloc_ub((M, N), "float16")
            acc = T.alloc_ub((M, N), "float32")
            T.copy(A[cid * M, 0], a_l1)
            for k in T.serial(n_iter):
                T.copy(B[k, 0, 0], b_l1)
                T.gemm_v0(a_l1, b_l1, c_l0, init=True)
                T.copy(c_l0, ws_s[cid, 0, 0])
                T.copy(ws_p[cid, 0, 0], p_l1)
                T.gemm_v0(p_l1, b_l1, c_l0, init=True)
                T.copy(c_l0, ws_s[cid, 0, 0])
            T.tile.fill(acc, 0.0)
            for k in T.serial(n_iter):
                T.copy(ws_s[cid, 0, 0], s_ub)
                T.tile.relu(s_ub, s_ub)
                T.copy(s_ub, p_ub)
                T.copy(p_ub, ws_p[cid, 0, 0])
                for _ in T.serial(reads):
                    T.copy(ws_s[cid, 0, 0], s_ub)
                T.tile.add(acc, acc, s_ub)
            T.copy(acc, Y[cid * M, 0])

    return main


def ping_pong_ref(a, b):
    out = np.zeros(a.shape)
    for blk in range(2):
        ab, acc = f64(a[blk * 32:(blk + 1) * 32]), 0
        for bk in f64(b):
            p = f64(np.maximum(ab @ bk, 0).astype(np.float16))
            acc = acc + p @ bk
        out[blk * 32:(blk + 1) * 32] = acc
    return out


@pytest.mark.parametrize("n_iter", [1, 3])
def test_cube_and_vector_programs_meet_at_workspaces(target, n_iter):
    kernel = tilelang.compile(ping_pong(n_iter), out_idx=[2], workspace_idx=[3, 4], target=target)
    a, b = rand((64, 32), "float16", 1, 0.3), rand((n_iter, 32, 32), "float16", 2, 0.3)
    want = ping_pong_ref(a, b)
    close(kernel(a, b), want, "float16", reduce_len=64)
    close(kernel.simulate(a, b)[0], want, "float16", reduce_len=64)
    text = kernel.get_ir()
    assert 'Scope("C")' in text and 'Scope("V")' in text and "wait_cross_flag" in text


def test_unpairable_workspace_reads_are_located():
    with pytest.raises(CompileError) as e:
        tilelang.compile(ping_pong(2, reads=2), out_idx=[2], workspace_idx=[3, 4])
    msg = str(e.value)
    assert "read here before any statement writes it" in msg, msg
    assert "written 4 times by one core and read 6 times by the other" in msg, msg
