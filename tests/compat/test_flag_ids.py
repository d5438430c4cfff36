"""Flag ids computed at run time from variables with a small known range (tilelang-ascend's
paged HISA kernel waits for cross flag `FLAG_BLK0 + vid`, ping-pong buffers use `k % 2`): one
flag per possible id, chosen by an if chain; an id without such a range is a located error.
And a scalar access of UB after a vector instruction in an expert kernel is ordered by the
toolchain's V -> S flag (docs/machine_model.md), as the HISA kernel relies on."""
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


def relu_rows_kernel(blocks, base):
    """Per block: the cube writes A_b @ B to a workspace and sets cross flags base, base + 1;
    AIV `vid` waits for flag `base + vid`, applies relu to its half of the rows, overwrites
    the first element of its half with -1 by a scalar store after the vector op, writes Y."""
    M, N, K, half = 32, 32, 32, 16

    @T.prim_func
    def main(A: T.Tensor((blocks * M, K), "float16"), B: T.Tensor((K, N), "float16"),
             Y: T.Tensor((blocks * M, N), "float32"), WS: T.Tensor((blocks * M, N), "float32")):
        with T.Kernel(blocks, is_npu=True) as (cid, vid):
            a_l1, b_l1, c_l0 = cube_tiles(M, N, K)
            s_ub = T.alloc_ub((half, N), "float32")
            with T.Scope("C"):
                T.copy(A[cid * M, 0], a_l1)
                T.copy(B[0, 0], b_l1)
                T.barrier_all()
                T.gemm_v0(a_l1, b_l1, c_l0, init=True)
                T.barrier_all()
                T.copy(c_l0, WS[cid * M, 0])
                T.barrier_all()
                T.set_cross_flag("FIX", base)
                T.set_cross_flag("FIX", base + 1)
            with T.Scope("V"):
                T.wait_cross_flag(base + vid, "MTE2")
                T.copy(WS[cid * M + vid * half, 0], s_ub)
                T.barrier_all()
                T.tile.relu(s_ub, s_ub)
                s_ub[0, 0] = -1.0
                T.barrier_all()
                T.copy(s_ub, Y[cid * M + vid * half, 0])

    return main


@pytest.mark.parametrize("base", [0, 3])
def test_cross_flag_id_from_vid(target, base):
    kernel = tilelang.compile(relu_rows_kernel(2, base), out_idx=[2], workspace_idx=[3],
                              target=target)
    a, b = rand((64, 32), "float16", 1), rand((32, 32), "float16", 2)
    want = np.maximum(f64(a) @ f64(b), 0)
    want[::16, 0] = -1.0
    close(kernel(a, b), want, "float32", reduce_len=32)
    close(kernel.simulate(a, b)[0], want, "float32", reduce_len=32)
    text = kernel.get_ir()
    assert "wait_cross_flag(MTE2, " + str(base + 1) in text.replace('"', "")


def test_flag_id_without_known_range_is_located():
    def main(X: T.Tensor((16,), "float32"), I: T.Tensor((1,), "int32"),
             Y: T.Tensor((16,), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_ub((16,), "float32")
            with T.Scope("V"):
                T.copy(X[0], x)
                T.set_flag("MTE2", "V", I[0])
                T.wait_flag("MTE2", "V", I[0])
                T.copy(x, Y[0])

    with pytest.raises(CompileError) as e:
        T.prim_func(main)
    msg = str(e.value)
    assert "a flag id must be a constant int" in msg and "test_flag_ids.py:" in msg, msg
    assert 'T.set_flag("MTE2", "V", I[0])' in msg, msg


def pingpong_relu(n_max):
    """An expert V program over a run-time number of 16-element chunks (`n = N[0]`), each
    chunk's flags `base + i % 2` (tilelang-ascend's fa_opt expert kernel: `SIG_L0AB + side`
    with `side = i % 2` in a loop whose extent is a run-time value): `i % 2` is in [0, 1]
    whatever i is, so each id has two possible values."""

    @T.prim_func
    def main(X: T.Tensor((16 * n_max,), "float32"), N: T.Tensor((1,), "int32"),
             Y: T.Tensor((16 * n_max,), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_ub((2, 16), "float32")
            with T.Scope("V"):
                if vid == 0:
                    for i in T.serial(N[0]):
                        side = i % 2
                        T.copy(X[i * 16], x[side, :])
                        T.set_flag("MTE2", "V", 2 + side)
                        T.wait_flag("MTE2", "V", 2 + side)
                        T.tile.relu(x[side, :], x[side, :])
                        T.set_flag("V", "MTE3", 4 + side)
                        T.wait_flag("V", "MTE3", 4 + side)
                        T.copy(x[side, :], Y[i * 16])
                        T.set_flag("MTE3", "MTE2", side)
                        T.wait_flag("MTE3", "MTE2", side)

    return main


@pytest.mark.parametrize("n", [3, 4])
def test_flag_id_modulo_of_runtime_loop_var(target, n):
    kernel = tilelang.compile(pingpong_relu(4), out_idx=[2], target=target)
    x = rand((64,), "float32", n)
    want = np.zeros(64)
    want[:16 * n] = np.maximum(f64(x)[:16 * n], 0)
    nn = np.array([n], np.int32)
    close(kernel(x, nn), want)
    close(kernel.simulate(x, nn)[0], want)
