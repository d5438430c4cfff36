"""Developer-mode block-sparse attention: a data-dependent `if` around the body of the KV loop
holds cube work (two GEMMs) and vector work (scaling, a cast) with cross-core hand-offs in both
directions. Both cores must take the same branch (the cube reads the condition from GM itself,
also when the kernel first copies the mask row into a tile) and the compiler's flags balance on
both paths, in nested loops and pipelined ones: numpy, llvm and the simulator agree with a
float64 reference. A condition the cube cannot read is a located error, not a hang."""
# No `from __future__ import annotations`: kernels need their T.Tensor annotations as objects.
import numpy as np
import pytest

import tilelang_mini
import tilelang_mini.language as T
from kernels import attention_tiles
from markers import Marked
from tilelang_mini import CompileError

MARKED = Marked(__file__)
S, D, B = 128, 32, 32  # sequence, head dim, block
NB = S // B


def sparse_attention(heads: int, stages: int, mask_in_tile: bool):
    """O_h = sum over kept KV blocks k of (0.5 ** later kept blocks) * (Q_h K_k^T / 8) V_k."""
    @T.prim_func
    def k(Q: T.Tensor((heads, S, D), "float16"), K: T.Tensor((S, D), "float16"),
          V: T.Tensor((S, D), "float16"), Mask: T.Tensor((heads, NB, NB), "bool"),
          O: T.Tensor((heads, S, D), "float32")):
        with T.Kernel(NB) as bx:
            q_s, k_s, v_s, acc_s, p, acc_o = attention_tiles(B, B, D, D, "float16")
            row = T.alloc_fragment((NB,), "bool")
            for h in T.serial(heads):
                T.copy(Q[h, bx * B, 0], q_s)
                T.fill(acc_o, 0)
                if mask_in_tile:
                    T.copy(Mask[h, bx, 0], row)
                for kb in T.Pipelined(NB, num_stages=stages):
                    if (row[kb] if mask_in_tile else Mask[h, bx, kb]) != 0:
                        T.copy(K[kb * B, 0], k_s)
                        T.clear(acc_s)
                        T.gemm(q_s, k_s, acc_s, transpose_B=True)
                        for i, j in T.Parallel(B, B):
                            acc_s[i, j] = acc_s[i, j] * 0.125
                        T.copy(acc_s, p)
                        for i, j in T.Parallel(B, D):
                            acc_o[i, j] *= 0.5
                        T.copy(V[kb * B, 0], v_s)
                        T.gemm(p, v_s, acc_o)
                T.copy(acc_o, O[h, bx * B, 0])
    return k


def reference(q, k, v, mask):
    f = lambda a: a.astype(np.float64)  # noqa: E731
    heads = q.shape[0]
    out = np.zeros((heads, S, D))
    for h in range(heads):
        for bx in range(NB):
            acc = np.zeros((B, D))
            for kb in range(NB):
                if mask[h, bx, kb]:
                    s = f(q[h, bx * B:(bx + 1) * B]) @ f(k[kb * B:(kb + 1) * B]).T * 0.125
                    p = s.astype(np.float16).astype(np.float64)
                    acc = acc * 0.5 + p @ f(v[kb * B:(kb + 1) * B])
            out[h, bx * B:(bx + 1) * B] = acc
    return out


@pytest.mark.parametrize("heads,stages,mask_in_tile", [
    (1, 1, True), (1, 1, False), (2, 1, True), (2, 2, True), (2, 2, False)])
def test_data_dependent_attention_body(heads, stages, mask_in_tile, target):
    rng = np.random.default_rng(heads * 10 + stages)
    q = rng.standard_normal((heads, S, D)).astype(np.float16)
    k, v = (rng.standard_normal((S, D)).astype(np.float16) for _ in range(2))
    mask = rng.random((heads, NB, NB)) > 0.5
    mask[0, 0, :] = False  # a block row that skips every KV block
    mask[-1, 1, :] = True  # and one that keeps them all
    want = reference(q, k, v, mask)
    kernel = tilelang_mini.compile(sparse_attention(heads, stages, mask_in_tile), out_idx=[-1],
                                   target=target)
    tol = dict(rtol=2e-3, atol=2e-3 * np.sqrt(S))
    np.testing.assert_allclose(kernel(q, k, v, mask), want, **tol)
    if target == "numpy":
        got, _ = kernel.simulate(q, k, v, mask)
        np.testing.assert_allclose(got, want, **tol)


def condition_on_chip():
    @T.prim_func
    def k(Q: T.Tensor((B, D), "float16"), K: T.Tensor((S, D), "float16"),
          W: T.Tensor((NB,), "float32"), O: T.Tensor((B, B), "float32")):
        with T.Kernel(1) as bx:
            q_s = T.alloc_shared((B, D), "float16")
            k_s = T.alloc_shared((B, D), "float16")
            acc = T.alloc_fragment((B, B), "float32")
            w = T.alloc_fragment((NB,), "float32")
            T.copy(W, w)
            for i in T.Parallel(NB):
                w[i] = w[i] * 2.0
            T.copy(Q, q_s)
            T.clear(acc)
            for kb in T.serial(NB):
                if w[kb] > 0:  # AT:cond
                    T.copy(K[kb * B, 0], k_s)
                    T.gemm(q_s, k_s, acc, transpose_B=True)
            T.copy(acc, O)
    return k


def test_a_condition_around_cube_work_computed_on_the_vector_core_is_located():
    with pytest.raises(CompileError) as info:
        tilelang_mini.compile(condition_on_chip(), out_idx=[-1])
    MARKED.located(info.value, "cond")
    assert "'w'" in info.value.message and "cube core cannot read it" in info.value.message
