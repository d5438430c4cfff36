"""`T.get_thread_binding()` as the one-thread guard: `if tx == 0:` holds (once per core) and
`tx != 0` is false, without per-thread code (per-thread uses: test_simt.py).
Also T.fill / T.clear of one element (`T.fill(s[0], 0)`, TileLang's topk_selector)."""

import tilelang_mini
import tilelang_mini.language as T

from util import close, f64, rand


@tilelang_mini.jit
def guarded_rowsum(X):
    M, N = T.const("M, N")
    X: T.Tensor((M, N), T.float32)
    S = T.empty((M,), T.float32)
    C = T.empty((M // 8,), T.int32)
    with T.Kernel(M // 8, threads=128) as bx:
        x = T.alloc_fragment((8, N), T.float32)
        s = T.alloc_fragment((8,), T.float32)
        count = T.alloc_fragment((1,), T.int32)
        T.clear(count[0])
        T.fill(count[0], 5)
        T.copy(X[bx * 8, 0], x)
        T.reduce_sum(x, s, dim=1)
        tx = T.get_thread_binding()
        if tx == 0:  # one thread writes the block's results
            for i in T.serial(8):
                S[bx * 8 + i] = s[i]
            count[0] = count[0] + 1
        if T.get_thread_binding(0) != 0:  # the other threads: none here
            S[bx * 8] = -1.0
            count[0] = count[0] + 100
        C[bx] = count[0]
    return S, C


def test_one_thread_guard_holds_once(target, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    x = rand((32, 16), seed=11)
    s, c = guarded_rowsum(x)
    close(s, f64(x).sum(1), reduce_len=16)
    assert c.tolist() == [6] * 4
    kern, args = guarded_rowsum.kernel_for(x)
    (ss, cs), _ = kern.simulate(*args)
    close(ss, f64(x).sum(1), reduce_len=16)
    assert cs.tolist() == [6] * 4
