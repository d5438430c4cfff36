"""GM views and buffers that are not parameters, in the upstream spelling: TileLang's im2col
convolution (eager @jit, `T.Tensor(shape, dtype, buf.data)` views of its input and output),
`T.alloc_global` workspaces shared by two launches, `T.reshape`, and tilelang-ascend's
`T.reinterpretcast`; on every target and simulated, against float64 NumPy references."""
import numpy as np
import pytest

import tilelang_mini as tilelang
import tilelang_mini.language as T
from tilelang_mini import CompileError

from util import close, f64, rand


@tilelang.jit
def convolution(data, kernel, S, D, P, block_M, block_N, block_K, num_stages, threads,
                dtype=T.float16, accum_dtype=T.float32):
    N, C, H, W, F, K = T.const("N, C, H, W, F, K")
    KH, KW = K, K
    OH = (H + 2 * P - D * (K - 1) - 1) // S + 1
    OW = (W + 2 * P - D * (K - 1) - 1) // S + 1

    data: T.Tensor((N, H, W, C), dtype)
    kernel: T.Tensor((KH, KW, C, F), dtype)
    out = T.empty((N, OH, OW, F), dtype)

    with T.Kernel(T.ceildiv(F, block_N), T.ceildiv(N * OH * OW, block_M), threads=threads) as (bx, by):
        data_shared = T.alloc_shared((block_M, block_K), dtype)
        kernel_shared = T.alloc_shared((block_K, block_N), dtype)
        out_local = T.alloc_fragment((block_M, block_N), accum_dtype)
        out_shared = T.alloc_shared((block_M, block_N), dtype)

        kernel_flat = T.Tensor((KH * KW * C, F), dtype, kernel.data)
        out_flat = T.Tensor((N * OH * OW, F), dtype, out.data)

        T.clear(out_local)
        for k_iter in T.Pipelined(T.ceildiv(KH * KW * C, block_K), num_stages=num_stages):
            T.im2col(data, data_shared, by, k_iter, KH, S, D, P)
            T.copy(kernel_flat[k_iter * block_K, bx * block_N], kernel_shared)
            T.gemm(data_shared, kernel_shared, out_local)

        T.copy(out_local, out_shared)
        T.copy(out_shared, out_flat[by * block_M, bx * block_N])

    return out


def conv_ref(a, b, S, D, P):
    """NHWC image, (KH, KW, C, F) kernel -> NHWC output, in float64."""
    n, h, w, c = a.shape
    k, _, _, f = b.shape
    oh = (h + 2 * P - D * (k - 1) - 1) // S + 1
    ow = (w + 2 * P - D * (k - 1) - 1) // S + 1
    pad = np.zeros((n, h + 2 * P, w + 2 * P, c))
    pad[:, P:P + h, P:P + w] = a
    out = np.zeros((n, oh, ow, f))
    for kh in range(k):
        for kw in range(k):
            win = pad[:, kh * D:kh * D + (oh - 1) * S + 1:S, kw * D:kw * D + (ow - 1) * S + 1:S]
            out += win @ b[kh, kw]
    return out


@pytest.mark.parametrize("S,D,P", [(1, 1, 1), (2, 1, 0), (1, 2, 2)])
def test_im2col_convolution(target, S, D, P):
    a = rand((2, 9, 8, 16), "float16", 1)
    b = rand((3, 3, 16, 24), "float16", 2)
    kernel = convolution.compile(N=2, C=16, H=9, W=8, F=24, K=3, S=S, D=D, P=P, block_M=32,
                                 block_N=32, block_K=32, num_stages=2, threads=128,
                                 target=target)
    want = conv_ref(f64(a), f64(b), S, D, P)
    close(kernel(a, b), want, "float16", 9 * 16)
    if target == "numpy":
        # out_flat, written, shares memory with `out`, which the kernel never names: the blocks
        # still run as groups (batched.py)
        assert kernel.kernels[0].artifact.last_run[0] == "batched"
        close(kernel.simulate(a, b)[0], want, "float16", 9 * 16)


def mla_like_two_launches():
    """T.alloc_global workspaces written by one launch and read by the next (TileLang's MLA
    decode split + combine), and a T.reshape view of the output."""
    B, S_, D = 4, 64, 32
    SPLIT = 4

    @T.prim_func
    def main(X: T.Tensor((B, S_, D), "float32"), Out: T.Tensor((B, D), "float32")):
        partial = T.alloc_global((B, SPLIT, D), "float32")
        with T.Kernel(B, SPLIT) as (b, s):
            x = T.alloc_fragment((S_ // SPLIT, D), "float32")
            m = T.alloc_fragment((D,), "float32")
            T.copy(X[b, s * (S_ // SPLIT), 0], x)
            T.reduce_max(x, m, dim=0)
            T.copy(m, partial[b, s, 0:D])
        flat = T.reshape(Out, (B * D,))
        with T.Kernel(B) as b:
            p = T.alloc_fragment((SPLIT, D), "float32")
            m = T.alloc_fragment((D,), "float32")
            T.copy(partial[b, 0, 0], p)
            T.reduce_max(p, m, dim=0)
            T.copy(m, flat[b * D:(b + 1) * D])
    return main


def test_alloc_global_and_reshape(target):
    fn = mla_like_two_launches()
    assert [h.base is None for h in fn.hidden] == [True, False]
    kernel = tilelang.compile(fn, out_idx=[-1], target=target)
    x = rand((4, 64, 32), seed=5)
    want = f64(x).max(1)
    close(kernel(x), want)
    close(kernel(x), want)  # the workspace is fresh per call
    if target == "numpy":
        close(kernel.simulate(x)[0], want)


def test_reinterpretcast(target):
    @T.prim_func
    def main(X: T.Tensor((16, 32), "float32"), Y: T.Tensor((16, 32), "int32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_ub((16, 32), "float32")
            y = T.alloc_ub((16, 32), "int32")
            T.copy(X[0, 0], x)
            T.reinterpretcast(y, x, "int32_t")
            T.copy(y, Y[0, 0])

    kernel = tilelang.compile(main, out_idx=[-1], target=target)
    x = rand((16, 32), seed=6)
    assert np.array_equal(kernel(x), x.view(np.int32))
    if target == "numpy":
        assert np.array_equal(kernel.simulate(x)[0], x.view(np.int32))


def test_view_errors():
    def build(body):
        @T.prim_func
        def main(X: T.Tensor((8, 8), "float32")):
            with T.Kernel(1) as bx:
                t = T.alloc_fragment((8, 8), "float32")
                body(X, t)
        return main

    def wrong_size(X, t):
        v = T.Tensor((8, 9), "float32", X.data)  # noqa: F841

    def tile_count(X, t):
        v = T.reshape(t, (65,))  # noqa: F841

    for body, words in ((wrong_size, "256 bytes"), (tile_count, "element counts differ")):
        with pytest.raises(CompileError) as err:
            build(body)
        assert words in str(err.value) and "test_views.py" in str(err.value)


@pytest.mark.parametrize("Q", [4, 1])
def test_tile_reshape_view(target, Q):
    """TileLang's lightning indexer: `s_reshaped = T.reshape(s, (N, Q, H))` of a gemm
    fragment, written element-wise through the view and reduced along its last dim. Q = 1
    (HISA's block-sparse indexer, one query per block): the reduction's map kept a variable
    of extent 1 that its store did not index, which the llvm target refused."""
    N_, Hh, D = 32, 8, 64

    @T.prim_func
    def main(Kx: T.Tensor((N_, D), "float16"), Qx: T.Tensor((Q * Hh, D), "float16"),
             W: T.Tensor((Q, Hh), "float32"), L: T.Tensor((Q, N_), "float32")):
        with T.Kernel(1) as bx:
            k_s = T.alloc_shared((N_, D), "float16")
            q_s = T.alloc_shared((Q * Hh, D), "float16")
            w = T.alloc_fragment((Q, Hh), "float32")
            s = T.alloc_fragment((N_, Q * Hh), "float32")
            s_reshaped = T.reshape(s, (N_, Q, Hh))
            logits = T.alloc_fragment((N_, Q), "float32")
            T.copy(Kx, k_s)
            T.copy(Qx, q_s)
            T.copy(W, w)
            T.gemm(k_s, q_s, s, transpose_B=True, clear_accum=True)
            for bn_i, bq_i, h_i in T.Parallel(N_, Q, Hh):
                s_reshaped[bn_i, bq_i, h_i] = T.max(s_reshaped[bn_i, bq_i, h_i], 0) * w[bq_i, h_i]
            T.reduce_sum(s_reshaped, logits, dim=-1, clear=True)
            for bq_i, bn_i in T.Parallel(Q, N_):
                L[bq_i, bn_i] = logits[bn_i, bq_i]

    kernel = tilelang.compile(main, out_idx=[-1], target=target)
    k, q, w = rand((N_, D), "float16", 1), rand((Q * Hh, D), "float16", 2), rand((Q, Hh), seed=3)
    s = (f64(k) @ f64(q).T).reshape(N_, Q, Hh)
    want = (np.maximum(s, 0) * f64(w)[None]).sum(-1).T
    close(kernel(k, q, w), want, reduce_len=D * Hh)
    if target == "numpy":
        close(kernel.simulate(k, q, w)[0], want, reduce_len=D * Hh)


def test_copy_of_a_reshaped_tile(target):
    """T.copy to and from a whole T.reshape view of an on-chip tile whose shape differs from
    the tile's (fuzz family views: the copy moved the base tile's first box instead, a wrong
    result); GM tails are clipped as in any copy."""
    @T.prim_func
    def main(X: T.Tensor((7, 3, 8), "float32"), O: T.Tensor((7, 24), "float32"),
             P: T.Tensor((7, 3, 8), "float32")):
        with T.Kernel(2) as bx:
            x3 = T.alloc_fragment((4, 3, 8), "float32")
            y = T.alloc_shared((4, 24), "float32")
            x = T.reshape(x3, (4, 24))
            y3 = T.reshape(y, (4, 3, 8))
            T.copy(X[bx * 4, 0, 0], x3)
            T.copy(x, O[bx * 4, 0])            # view -> GM
            T.copy(X[bx * 4, 0, 0], y3)        # GM -> view (rows past 7 read 0)
            for i, j in T.Parallel(4, 24):
                y[i, j] = y[i, j] * 2.0 + x[i, j]
            T.copy(y3, P[bx * 4, 0, 0])

    x = rand((7, 3, 8), seed=21)
    kernel = tilelang.compile(main, out_idx=[1, 2], target=target)
    o, p = kernel(x)
    close(o, f64(x).reshape(7, 24))
    close(p, 3.0 * f64(x))
    if target == "numpy":
        (o, p), _ = kernel.simulate(x)
        close(p, 3.0 * f64(x))


def test_cumsum_of_views_and_inline_reshape(target):
    """T.cumsum between whole reshaped views runs along the views' dim (it ran along the base
    tile's dim: wrong numbers), and `T.reshape(...)` written inline as a T.copy operand is the
    view the assignment form names, of a tile or of a GM tensor (a located 'not a value' error
    before). Fuzz family views."""
    shape = (4, 24)

    @T.prim_func
    def main(X: T.Tensor(shape, "float32"), O: T.Tensor(shape, "float32"), Q: T.Tensor(shape, "float32")):
        with T.Kernel(1):
            x = T.alloc_fragment(shape, "float32")
            y = T.alloc_fragment(shape, "float32")
            z = T.alloc_shared((4, 3, 8), "float32")
            T.copy(X, x)
            xr = T.reshape(x, (4, 3, 8))
            T.cumsum(xr, T.reshape(y, (4, 3, 8)), dim=1)
            T.copy(y, O)
            T.copy(T.reshape(X, (4, 3, 8)), z)
            T.cumsum(z, dim=2, reverse=True)
            T.copy(T.reshape(z, (4, 24)), Q)

    x = rand((4, 24), seed=22)
    x3 = f64(x).reshape(4, 3, 8)
    want_o = np.cumsum(x3, 1).reshape(4, 24)
    want_q = np.flip(np.cumsum(np.flip(x3, 2), 2), 2).reshape(4, 24)
    kernel = tilelang.compile(main, out_idx=[1, 2], target=target)
    o, q = kernel(x)
    close(o, want_o, reduce_len=3)
    close(q, want_q, reduce_len=8)
    if target == "numpy":
        (o, q), _ = kernel.simulate(x)
        close(o, want_o, reduce_len=3)
        close(q, want_q, reduce_len=8)
