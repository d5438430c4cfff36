"""A tile copied out of a scope its destination cannot be written from (TileLang's recurrent
state, gdn chunk_delta_h): `state_s` is a gemm operand (L1) that is also copied to global
memory and into the accumulator `state_f`, which only a gemm otherwise touches. infer_scopes
gives `state_s` a UB version and `state_f` a UB version (its value set by a copy; each gemm
adds its product on the vector unit). Both targets and the simulator, against float64 NumPy."""
import numpy as np
import pytest

import tilelang_mini
import tilelang_mini.language as T

from util import close, f64, rand


def recurrent_state(steps, n, d, scale_state):
    """S_0 = S0; for t: H[t] = S_t; Y[t] = X[t] @ S_t; S_{t+1} = S_t (* 0.5) + K[t]^T @ X[t] @ S_t."""
    @T.prim_func
    def main(X: T.Tensor((steps, n, d), T.float16), K: T.Tensor((steps, n, d), T.float16),
             S0: T.Tensor((d, d), T.float16), H: T.Tensor((steps, d, d), T.float16),
             Y: T.Tensor((steps, n, d), T.float32), S: T.Tensor((d, d), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            state_s = T.alloc_shared((d, d), T.float16)
            state_f = T.alloc_fragment((d, d), T.float32)
            x_s = T.alloc_shared((n, d), T.float16)
            k_s = T.alloc_shared((n, d), T.float16)
            y_f = T.alloc_fragment((n, d), T.float32)
            y_s = T.alloc_shared((n, d), T.float16)
            T.copy(S0[0, 0], state_s)
            T.copy(state_s, state_f)
            for t in T.serial(steps):
                T.copy(state_s, H[t, 0, 0])
                T.copy(X[t, 0, 0], x_s)
                T.copy(K[t, 0, 0], k_s)
                T.gemm(x_s, state_s, y_f, clear_accum=True)
                T.copy(y_f, Y[t, 0, 0])
                T.copy(y_f, y_s)
                if scale_state:
                    for i, j in T.Parallel(d, d):
                        state_f[i, j] *= 0.5
                T.gemm(k_s, y_s, state_f, transpose_A=True)
                T.copy(state_f, state_s)
            T.copy(state_f, S[0, 0])
    return main


@pytest.mark.parametrize("target", ["numpy", "llvm"])
@pytest.mark.parametrize("scale_state", [False, True])
def test_gemm_operand_and_accumulator_copied(target, scale_state):
    steps, n, d = 3, 32, 32
    x, k = rand((steps, n, d), "float16", 1, 0.2), rand((steps, n, d), "float16", 2, 0.2)
    s0 = rand((d, d), "float16", 3, 0.5)
    hs, ys = np.zeros((steps, d, d)), np.zeros((steps, n, d))
    st = f64(s0)
    for t in range(steps):
        st16 = f64(st.astype(np.float16))      # the state the gemms read is the fp16 tile
        hs[t] = st16
        ys[t] = f64(x[t]) @ st16
        upd = f64(k[t]).T @ f64(ys[t].astype(np.float16))
        st = (0.5 * st if scale_state else st) + upd
    kern = tilelang_mini.compile(recurrent_state(steps, n, d, scale_state), out_idx=[3, 4, 5],
                                 target=target)
    for got in [kern(x, k, s0)] + ([kern.simulate(x, k, s0)[0]] if target == "numpy" else []):
        h, y, s = got
        close(np.asarray(h), hs, "float16", d)
        close(np.asarray(y), ys, "float32", d)
        close(np.asarray(s), st, "float32", d * steps)


def gather_rows(n=8, w=32, rows=16):
    """A developer-mode gather whose row ids sit in an alloc_shared tile: the scalar unit reads
    them as the copies are dispatched, from the tile's UB version (before: the copies kept the
    shared tile in their indices, a malformed kernel)."""
    @T.prim_func
    def main(X: T.Tensor((rows, w), T.float32), I: T.Tensor((n,), T.int32),
             Y: T.Tensor((n, w), T.float32)):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            ids = T.alloc_shared((n,), T.int32)
            row = T.alloc_shared((1, w), T.float32)
            T.copy(I[0], ids)
            for r in T.serial(n):
                T.copy(X[ids[r], 0], row)
                T.copy(row, Y[r, 0])
    return main


def test_gather_with_shared_row_ids(target):
    x = rand((16, 32), seed=12)
    ids = np.random.default_rng(13).permutation(16)[:8].astype(np.int32)
    k = tilelang_mini.compile(gather_rows(), out_idx=[2], target=target)
    close(k(x, ids), f64(x[ids]))
    close(k.simulate(x, ids)[0], f64(x[ids]))
