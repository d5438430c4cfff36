"""Expert kernels whose cores hand work to each other both ways (tilelang-ascend's flash attention
style: the cube computes S, the vector cores a softmax, the cube P @ V, ...): no program order
of a block's cores satisfies their cross-core waits, so every target runs the cores as
coroutines. Checked on numpy and llvm against float64 references and on the simulator; a
deadlock or a fault in one core is a located error on every target, never a hang; kernels whose
program order is proven keep the one-function fast path on llvm."""
import numpy as np
import pytest

import tilelang_mini as tilelang
import tilelang_mini.language as T
from tilelang_mini.errors import DeadlockError, KernelRuntimeError
from tilelang_mini.runtime.backends import available_targets

from util import close, f64, rand

needs_llvm = pytest.mark.skipif("llvm" not in available_targets(), reason="no llvm backend")


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_CACHE_DIR", str(tmp_path / "cache"))


@tilelang.jit(out_idx=[3], workspace_idx=[4, 5, 6])
def expert_attention(heads, seq, dim, block_M=32, block_N=32, dtype="float16"):
    """Per block (head h, rows bx): for each key block the cube writes S = Q K^T to a GM
    workspace (flag 0), each AIV turns its half of the rows into P = exp(S * scale - m) with a
    running max and sum and writes P (flag 1), the cube writes P @ V (flag 2), the AIVs
    accumulate it (flag 3); O = acc / sum."""
    nm = seq // block_M
    half = block_M // 2
    scale = dim ** -0.5
    blocks = heads * nm

    @T.prim_func
    def main(Q: T.Tensor((heads, seq, dim), dtype), K: T.Tensor((heads, seq, dim), dtype),
             V: T.Tensor((heads, seq, dim), dtype), O: T.Tensor((heads, seq, dim), dtype),
             ws_s: T.Tensor((blocks, block_M, block_N), "float32"),
             ws_p: T.Tensor((blocks, block_M, block_N), dtype),
             ws_o: T.Tensor((blocks, block_M, dim), "float32")):
        with T.Kernel(blocks, is_npu=True) as (cid, vid):
            h = cid // nm
            bx = cid % nm
            q_l1 = T.alloc_L1((block_M, dim), dtype)
            k_l1 = T.alloc_L1((block_N, dim), dtype)
            v_l1 = T.alloc_L1((block_N, dim), dtype)
            p_l1 = T.alloc_L1((block_M, block_N), dtype)
            s_l0 = T.alloc_L0C((block_M, block_N), "float32")
            o_l0 = T.alloc_L0C((block_M, dim), "float32")
            s_ub = T.alloc_ub((half, block_N), "float32")
            p_ub = T.alloc_ub((half, block_N), dtype)
            o_ub = T.alloc_ub((half, dim), "float32")
            acc = T.alloc_ub((half, dim), "float32")
            out = T.alloc_ub((half, dim), dtype)
            m = T.alloc_ub((half,), "float32")
            m_new = T.alloc_ub((half,), "float32")
            l = T.alloc_ub((half,), "float32")
            rs = T.alloc_ub((half,), "float32")
            with T.Scope("C"):
                T.copy(Q[h, bx * block_M, 0], q_l1)
                T.barrier_all()
                for k in T.serial(seq // block_N):
                    T.copy(K[h, k * block_N, 0], k_l1)
                    T.barrier_all()
                    T.gemm_v0(q_l1, k_l1, s_l0, transpose_B=True, init=True)
                    T.barrier_all()
                    T.copy(s_l0, ws_s[cid, 0, 0])
                    T.barrier_all()
                    T.set_cross_flag("FIX", 0)
                    T.wait_cross_flag(1)  # CUBE WAITS FOR P
                    T.copy(ws_p[cid, 0, 0], p_l1)
                    T.copy(V[h, k * block_N, 0], v_l1)
                    T.barrier_all()
                    T.gemm_v0(p_l1, v_l1, o_l0, init=True)
                    T.barrier_all()
                    T.copy(o_l0, ws_o[cid, 0, 0])
                    T.barrier_all()
                    T.set_cross_flag("FIX", 2)
                    T.wait_cross_flag(3)
            with T.Scope("V"):
                T.tile.fill(acc, 0.0)
                T.tile.fill(l, 0.0)
                T.tile.fill(m, -1e30)
                T.barrier_all()
                for k in T.serial(seq // block_N):
                    T.wait_cross_flag(0)
                    T.copy(ws_s[cid, vid * half, 0], s_ub)
                    T.barrier_all()
                    T.reduce_max(s_ub, m_new, dim=1)
                    T.barrier_all()
                    for i in T.Parallel(half):
                        m_new[i] = T.max(m[i], m_new[i] * scale)
                        rs[i] = T.exp(m[i] - m_new[i])
                        m[i] = m_new[i]
                    T.pipe_barrier("V")
                    for i, j in T.Parallel(half, block_N):
                        s_ub[i, j] = T.exp(s_ub[i, j] * scale - m[i])
                    T.pipe_barrier("V")
                    T.reduce_sum(s_ub, m_new, dim=1)
                    T.pipe_barrier("V")
                    for i in T.Parallel(half):
                        l[i] = l[i] * rs[i] + m_new[i]
                    T.copy(s_ub, p_ub)
                    T.barrier_all()
                    T.copy(p_ub, ws_p[cid, vid * half, 0])
                    T.barrier_all()
                    T.set_cross_flag("MTE3", 1)
                    T.wait_cross_flag(2)
                    T.copy(ws_o[cid, vid * half, 0], o_ub)
                    T.barrier_all()
                    for i, j in T.Parallel(half, dim):
                        acc[i, j] = acc[i, j] * rs[i] + o_ub[i, j]
                    T.barrier_all()
                    T.set_cross_flag("V", 3)
                for i, j in T.Parallel(half, dim):
                    out[i, j] = acc[i, j] / l[i]
                T.barrier_all()
                T.copy(out, O[h, bx * block_M + vid * half, 0])

    return main


def attention_ref(q, k, v):
    q, k, v = f64(q), f64(k), f64(v)
    s = q @ k.transpose(0, 2, 1) / np.sqrt(q.shape[-1])
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v


@pytest.mark.parametrize("threads", ["1", "2"])
@pytest.mark.parametrize("shape", [(1, 64, 32), (2, 96, 64)])
def test_flash_attention_flags_both_ways(target, shape, threads, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_NUM_THREADS", threads)
    heads, seq, dim = shape
    kernel = expert_attention(heads, seq, dim)
    kernel = tilelang.compile(kernel.prim_func, out_idx=[3], workspace_idx=[4, 5, 6],
                              target=target)
    q, k, v = (rand(shape, "float16", seed, 0.5) for seed in (1, 2, 3))
    want = attention_ref(q, k, v)
    close(kernel(q, k, v), want, "float16", reduce_len=seq)
    if target == "llvm":
        assert kernel.artifact.cores   # no program order satisfies the waits
    if threads == "1":
        close(kernel.simulate(q, k, v)[0], want, "float16", reduce_len=seq)


def _flags_kernel(case):
    """X (32, 16) -> Y on two blocks: the AIVs copy X to Y, the cube and the AIVs exchange
    flags as `case` says: `"swap"` (the cube waits first, the AIVs set after their copy),
    `"fault"` (block 1's AIVs read rows past X before their set). The cube waits for flag 0
    `N[0]` times, the AIVs set it `N[1]` times (counts the compiler cannot see): N[0] > N[1] is
    a deadlock at run time, with the AIVs waiting for flag 1 (`"deadlock"`) or finished
    (`"lost"`)."""
    @T.prim_func
    def main(X: T.Tensor((32, 16), "float32"), N: T.Tensor((2,), "int32"),
             Y: T.Tensor((32, 16), "float32")):
        with T.Kernel(2, is_npu=True) as (cid, vid):
            x = T.alloc_ub((8, 16), "float32")
            with T.Scope("C"):
                for _ in T.serial(N[0]):
                    T.wait_cross_flag("MTE2", 0)  # C WAIT 0
                if case != "lost":
                    T.set_cross_flag("MTE2", 1)
            with T.Scope("V"):
                row = cid * 16 + vid * 8
                if case == "fault":  # block 1 reads row 80 of X: a run-time fault (a scalar
                    # read: in a T.Parallel map it would be masked, TileLang's safe access)
                    for i, j in T.Parallel(8, 16):
                        x[i, j] = X[row + i, j]
                    x[0, 0] = X[row + cid * 64 * N[0], 0]
                else:
                    T.copy(X[row, 0], x)
                T.barrier_all()
                T.copy(x, Y[row, 0])
                for _ in T.serial(N[1]):
                    T.set_cross_flag("MTE3", 0)
                if case != "lost":
                    T.wait_cross_flag("MTE2", 1)  # V WAIT 1
    return main


ONE, TWO = np.array([1, 1], np.int32), np.array([2, 1], np.int32)


def test_cube_waits_first_runs(target):
    x = rand((32, 16), seed=4)
    kernel = tilelang.compile(_flags_kernel("swap"), out_idx=[-1], target=target)
    np.testing.assert_array_equal(kernel(x, ONE), x)
    np.testing.assert_array_equal(kernel.simulate(x, ONE)[0], x)


@pytest.mark.parametrize("case, waits", [("deadlock", ("# C WAIT 0", "# V WAIT 1")),
                                         ("lost", ("# C WAIT 0",))])
@pytest.mark.parametrize("threads", ["1", "2"])
def test_deadlock_is_a_located_error_not_a_hang(target, case, waits, threads, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_NUM_THREADS", threads)
    kernel = tilelang.compile(_flags_kernel(case), out_idx=[-1], target=target)
    x = rand((32, 16), seed=5)
    np.testing.assert_array_equal(kernel(x, ONE), x)
    with pytest.raises(DeadlockError) as err:
        kernel(x, TWO)
    text = str(err.value)
    assert "deadlock in block" in text and err.value.loc.file.endswith(__file__.split("/")[-1])
    lines = open(__file__).read().splitlines()
    for w in waits:
        line = next(i + 1 for i, s in enumerate(lines) if s.rstrip().endswith(w))
        assert f":{line}:" in text, (w, text)
    assert "Traceback" not in text and "backends/" not in text
    np.testing.assert_array_equal(kernel(x, ONE), x)  # and the kernel still runs


@needs_llvm
@pytest.mark.parametrize("threads", ["1", "2"])
def test_fault_in_one_core_stops_the_others(threads, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_NUM_THREADS", threads)
    kernel = tilelang.compile(_flags_kernel("fault"), out_idx=[-1], target="llvm")
    assert kernel.artifact.cores
    for _ in range(2):  # the scheduler's state is per call: a second call fails the same way
        with pytest.raises(KernelRuntimeError) as err:
            kernel(rand((32, 16), seed=6), ONE)
        assert "out of bounds" in str(err.value)


@needs_llvm
def test_proven_order_keeps_the_single_function_fast_path():
    kernel = tilelang.compile(_cube_then_vector(), out_idx=[-1], target="llvm")
    assert not kernel.artifact.cores
    x = rand((32, 16), seed=7)
    np.testing.assert_array_equal(kernel(x), x)


def _cube_then_vector():
    @T.prim_func
    def main(X: T.Tensor((32, 16), "float32"), Y: T.Tensor((32, 16), "float32")):
        with T.Kernel(2, is_npu=True) as (cid, vid):
            x = T.alloc_ub((8, 16), "float32")
            with T.Scope("C"):
                T.set_cross_flag("FIX", 1)
            with T.Scope("V"):
                T.wait_cross_flag("FIX", 1)
                T.copy(X[cid * 16 + vid * 8, 0], x)
                T.barrier_all()
                T.copy(x, Y[cid * 16 + vid * 8, 0])
    return main


@needs_llvm
def test_core_functions_come_back_from_the_disk_cache(tmp_path, monkeypatch):
    import subprocess
    import sys
    import os
    code = ("import sys, numpy as np; sys.path.insert(0, {d!r});"
            "import test_cross_core_coroutines as t, tilelang_mini as tl;"
            "k = tl.compile(t._flags_kernel('swap'), out_idx=[-1], target='llvm');"
            "x = np.arange(512, dtype=np.float32).reshape(32, 16);"
            "assert k.artifact.cores; assert (k(x, t.ONE) == x).all();"
            "print(k.artifact.from_cache)")
    code = code.format(d=os.path.dirname(__file__))
    env = dict(os.environ, TILELANG_MINI_CACHE_DIR=str(tmp_path / "c2"))
    runs = [subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                           text=True, timeout=120) for _ in range(2)]
    for r in runs:
        assert r.returncode == 0, r.stderr
    assert [r.stdout.split()[-1] for r in runs] == ["False", "True"]


@needs_llvm
@pytest.mark.parametrize("scheduler", ["native", "threads"])
def test_both_core_schedulers(scheduler, monkeypatch):
    """The native scheduler (ucontext, backends/llvm/cores_native.py) where the C library has
    it, else the threaded one (cores_run.py): the same values, deadlocks and faults on both."""
    import sys
    from backends.llvm import cores_native
    from backends.llvm.runtime import host_target
    if scheduler == "threads":
        monkeypatch.setattr(cores_native, "_NATIVE", [None])
    elif sys.platform.startswith("linux"):
        assert cores_native.native(host_target()) is not None
    else:
        pytest.skip("no ucontext in this C library")
    for threads in ("1", "2"):
        monkeypatch.setenv("TILELANG_MINI_NUM_THREADS", threads)
        shape = (3, 64, 32)
        kernel = expert_attention(*shape)
        kernel = tilelang.compile(kernel.prim_func, out_idx=[3], workspace_idx=[4, 5, 6],
                                  target="llvm")
        q, k, v = (rand(shape, "float16", seed, 0.5) for seed in (11, 12, 13))
        close(kernel(q, k, v), attention_ref(q, k, v), "float16", reduce_len=shape[1])
        x = rand((32, 16), seed=14)
        dead = tilelang.compile(_flags_kernel("deadlock"), out_idx=[-1], target="llvm")
        with pytest.raises(DeadlockError, match="deadlock in block"):
            dead(x, TWO)
        np.testing.assert_array_equal(dead(x, ONE), x)
        fault = tilelang.compile(_flags_kernel("fault"), out_idx=[-1], target="llvm")
        with pytest.raises(KernelRuntimeError, match="out of bounds"):
            fault(x, ONE)
