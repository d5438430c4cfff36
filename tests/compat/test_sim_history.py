"""The simulator keeps, per buffer, the accesses some thread may still race with. A vector pipe
that stays idle while the scalar unit runs a kernel's SIMT lanes sees every later dispatch
(they carry the scalar unit's clock), so it keeps nothing alive: before, its stale clock kept
every scalar access (deepseek_v32's radix top-k at seq_len 32768: minutes of simulate, the
history quadratic in the accesses). A histogram by per-thread atomic adds, on both targets and
simulated, against a NumPy count; the longest history the simulation checks stays at the
first prune's size."""
import numpy as np
import pytest

import tilelang_mini
import tilelang_mini.language as T
import tilelang_mini.sim.simulator as simulator


@tilelang_mini.jit
def histogram(X, BINS: int):
    """H[b] = how many X[i] == b, for b > 0 (128 threads, one element each per step)."""
    N = T.const("N")
    X: T.Tensor((N,), T.int32)
    H = T.empty((BINS,), T.int32)
    with T.Kernel(1, threads=128) as bx:
        tx = T.get_thread_binding()
        h = T.alloc_shared((BINS,), T.int32)
        b = T.alloc_var(T.int32)
        T.fill(h, 0)
        T.sync_threads()
        for s in T.serial(T.ceildiv(N, 128)):
            if s * 128 + tx < N:
                b = X[bx * N + s * 128 + tx]
                if b > 0:
                    T.atomic_add(h[b], 1)
        T.sync_threads()
        if tx < BINS:
            H[tx] = h[tx]
    return H


@pytest.mark.parametrize("target", ["numpy", "llvm"])
def test_idle_vector_pipe_keeps_no_scalar_history(target, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    x = np.random.default_rng(0).integers(0, 64, 16000).astype(np.int32)
    want = np.bincount(x[x > 0], minlength=64).astype(np.float64)
    np.testing.assert_array_equal(np.asarray(histogram(x, 64)).astype(np.float64), want)
    longest = [0]
    check_plan = simulator._Block.check_plan

    def counted(self, *args, **kw):
        check_plan(self, *args, **kw)
        longest[0] = max([longest[0]] + [len(h.items) for h in self.hist.values()])
    monkeypatch.setattr(simulator._Block, "check_plan", counted)
    kern, kargs = histogram.kernel_for(x, 64)
    out, _ = kern.simulate(*kargs)
    np.testing.assert_array_equal(np.asarray(out).astype(np.float64), want)
    assert longest[0] <= 65, longest[0]  # the first prune's size, plus the access just recorded
