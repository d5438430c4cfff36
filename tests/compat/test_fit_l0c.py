"""TileLang kernels at the upstream examples' default sizes that fit the 128 KiB L0C of
ascend910b only when the compiler does not spend it on values nothing needs:

* a fragment cleared before a loop whose every iteration computes it afresh keeps no value in
  its L0C version, so that fill is dropped and the version shares bytes with the other
  accumulator of the iteration (deepseek_v32 sparse MLA at dim 512: a 64x512 O and a 64x64 S);
* stage versions of `T.Pipelined` fragments that would overflow L0C are not made: the loop runs
  serially (GQA backward at dim_qk 192 with 128-row blocks: dk and dv live across the loop,
  dq/qkT/dsT twice over would not fit).

Both targets and the simulator, against float64 NumPy references."""
import numpy as np
import pytest

import tilelang_mini
import tilelang_mini.language as T

from util import close, f64, rand


def rescaled_sum(n, D=512):
    """O = sum over k of 0.5^(n-1-k) (Q K_k^T) V_k (64 rows): S = Q K_k^T (64x64) cleared each
    iteration, O (64xD float32 = 128 KiB at D=512) halved on the vector cores, then the
    product added; O is cleared once before the loop."""
    @T.prim_func
    def main(Q: T.Tensor((64, 64), T.float16), K: T.Tensor((n * 64, 64), T.float16),
             V: T.Tensor((n * 64, D), T.float16), O: T.Tensor((64, D), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            q = T.alloc_shared((64, 64), T.float16)
            k = T.alloc_shared((64, 64), T.float16)
            v = T.alloc_shared((64, D), T.float16)
            p = T.alloc_shared((64, 64), T.float16)
            s = T.alloc_fragment((64, 64), T.float32)
            o = T.alloc_fragment((64, D), T.float32)
            T.fill(o, 0)
            T.copy(Q[bx * 64, 0], q)
            for i in T.serial(n):
                T.copy(K[i * 64, 0], k)
                T.clear(s)
                T.gemm(q, k, s, transpose_B=True)
                T.copy(s, p)
                for r, c in T.Parallel(64, D):
                    o[r, c] = o[r, c] * 0.5
                T.copy(V[i * 64, 0], v)
                T.gemm(p, v, o)
            T.copy(o, O[0, 0])
    return main


def accumulate_and_emit(n, stages=2):
    """dK-like: A = sum over k of X_k^T G_k (128x192 float32 = 96 KiB, live across the loop) and
    per iteration S_k = X_k^T Y (128x64 = 32 KiB, written out): two S versions need 160 KiB."""
    @T.prim_func
    def main(X: T.Tensor((n * 64, 128), T.float16), G: T.Tensor((n * 64, 192), T.float16),
             Y: T.Tensor((64, 64), T.float16), A: T.Tensor((128, 192), T.float32),
             S: T.Tensor((n * 128, 64), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            x = T.alloc_shared((64, 128), T.float16)
            g = T.alloc_shared((64, 192), T.float16)
            y = T.alloc_shared((64, 64), T.float16)
            acc = T.alloc_fragment((128, 192), T.float32)
            sk = T.alloc_fragment((128, 64), T.float32)
            T.clear(acc)
            T.copy(Y[bx * 64, 0], y)
            for i in T.Pipelined(n, num_stages=stages):
                T.copy(X[i * 64, 0], x)
                T.copy(G[i * 64, 0], g)
                T.gemm(x, g, acc, transpose_A=True)
                T.clear(sk)
                T.gemm(x, y, sk, transpose_A=True)
                T.copy(sk, S[i * 128, 0])
            T.copy(acc, A[0, 0])
    return main


@pytest.mark.parametrize("target", ["numpy", "llvm"])
def test_dead_fill_frees_l0c(target):
    n = 2
    q, k = rand((64, 64), "float16", 1, 0.3), rand((n * 64, 64), "float16", 2, 0.3)
    v = rand((n * 64, 512), "float16", 3, 0.3)
    want = np.zeros((64, 512))
    for i in range(n):
        s = f64(q) @ f64(k[i * 64:(i + 1) * 64]).T
        want = want * 0.5 + f64(s.astype(np.float16)) @ f64(v[i * 64:(i + 1) * 64])
    kern = tilelang_mini.compile(rescaled_sum(n), out_idx=[-1], target=target)
    close(np.asarray(kern(q, k, v)), want, "float32", 128)
    if target == "numpy":
        close(np.asarray(kern.simulate(q, k, v)[0]), want, "float32", 128)


@pytest.mark.parametrize("target", ["numpy", "llvm"])
def test_pipelined_versions_that_overflow_run_serially(target):
    n = 3
    x, g = rand((n * 64, 128), "float16", 4, 0.3), rand((n * 64, 192), "float16", 5, 0.3)
    y = rand((64, 64), "float16", 6, 0.3)
    want_a = sum(f64(x[i * 64:(i + 1) * 64]).T @ f64(g[i * 64:(i + 1) * 64]) for i in range(n))
    want_s = np.concatenate([f64(x[i * 64:(i + 1) * 64]).T @ f64(y) for i in range(n)])
    kern = tilelang_mini.compile(accumulate_and_emit(n), out_idx=[3, 4], target=target)
    got = kern(x, g, y)
    close(np.asarray(got[0]), want_a, "float32", 64 * n)
    close(np.asarray(got[1]), want_s, "float32", 64)
    if target == "numpy":
        a, s = kern.simulate(x, g, y)[0]
        close(np.asarray(a), want_a, "float32", 64 * n)
        close(np.asarray(s), want_s, "float32", 64)
