"""`T.view(tile, shape, dtype)` of an on-chip tile as another dtype (TileLang's sparse MLA
backward reuses a bf16 shared KV tile as float32 scratch): the tile's bytes read and written
under the other dtype, on every target and simulated, against float64 NumPy references."""
import ml_dtypes
import numpy as np
import pytest

import tilelang_mini as tilelang
import tilelang_mini.language as T
from tilelang_mini import CompileError

from util import close, f64, rand

BF16 = ml_dtypes.bfloat16


@tilelang.jit
def scratch_reuse(Q, KV, BS=16, D=32, H=16, NB=2):
    """Per block of BS rows: S = Q K^T (K a bf16 shared tile), dK = S^T Q in float32, stored
    in halves through a float32 view of the K tile (which the next block reloads) and
    atomically added into dKV: the view writes must wait for the gemm reads of K."""
    Q: T.Tensor((H, D), T.bfloat16)
    KV: T.Tensor((NB * BS, D), T.bfloat16)
    dKV = T.empty((NB * BS, D), T.float32)

    with T.Kernel(1, threads=128) as _:
        Q_shared = T.alloc_shared([H, D], T.bfloat16)
        KV_shared = T.alloc_shared([BS, D], T.bfloat16)
        P_shared = T.alloc_shared([H, BS], T.bfloat16)
        acc_s = T.alloc_fragment([H, BS], T.float32)
        acc_dkv = T.alloc_fragment([BS, D], T.float32)
        acc_dkv_shared = T.view(KV_shared, shape=[BS // 2, D], dtype=T.float32)
        T.copy(Q, Q_shared)
        for i_b in T.Pipelined(NB, num_stages=0):
            for bi_i, d_i in T.Parallel(BS, D):
                KV_shared[bi_i, d_i] = KV[i_b * BS + bi_i, d_i]
            T.gemm(Q_shared, KV_shared, acc_s, transpose_B=True, clear_accum=True)
            T.copy(acc_s, P_shared)
            T.gemm(P_shared, Q_shared, acc_dkv, transpose_A=True, clear_accum=True)
            for s in range(2):
                for bi_i, d_i in T.Parallel(BS, D):
                    if bi_i < BS // 2:
                        acc_dkv_shared[bi_i, d_i] = acc_dkv[bi_i + s * (BS // 2), d_i]
                for bi_i, d_i in T.Parallel(BS // 2, D):
                    T.atomic_add(dKV[i_b * BS + bi_i + s * (BS // 2), d_i],
                                 acc_dkv_shared[bi_i, d_i])
    return dKV


def test_wide_view_scratch(target, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    BS, D, H, NB = 16, 32, 16, 2
    q, kv = rand((H, D), "bfloat16", 1), rand((NB * BS, D), "bfloat16", 2)
    s = f64(q) @ f64(kv).T                                    # [H, NB * BS]
    p = s.astype(np.float32).astype(BF16).astype(np.float64)  # P_shared holds bf16
    want = p.T @ f64(q)
    close(scratch_reuse(q, kv), want, "bfloat16", reduce_len=H)
    if target == "numpy":
        kern, args = scratch_reuse.kernel_for(q, kv)
        close(kern.simulate(*args)[0], want, "bfloat16", reduce_len=H)


def test_views_read_and_write_the_tile_bytes(target):
    """A float32 tile read as bfloat16 halves (narrower view), an int8 tile read and written as
    int32 (4 bytes an element, a view whose rows straddle the tile's), and halves written
    through a narrower view in a serial loop: bit-exact against NumPy's views of the bytes."""
    @T.prim_func
    def main(X: T.Tensor((8, 16), T.float32), B: T.Tensor((6, 16), T.int8),
             H: T.Tensor((8, 32), T.bfloat16), W: T.Tensor((4, 6), T.int32),
             Bo: T.Tensor((6, 16), T.int8), Z: T.Tensor((8, 16), T.float32)):
        with T.Kernel(1) as _:
            x = T.alloc_fragment((8, 16), "float32")
            h = T.alloc_fragment((8, 32), "bfloat16")
            b = T.alloc_fragment((6, 16), "int8")
            w = T.alloc_fragment((4, 6), "int32")
            z = T.alloc_fragment((8, 16), "float32")
            T.copy(X, x)
            T.copy(B, b)
            halves = T.view(x, [8, 32], "bfloat16")
            words = T.view(b, shape=[4, 6], dtype="int32")
            for i, j in T.Parallel(8, 32):
                h[i, j] = halves[i, j]
            for i, j in T.Parallel(4, 6):
                w[i, j] = words[i, j]
            for i, j in T.Parallel(4, 6):
                words[i, j] = words[i, j] + 1
            T.clear(z)
            zh = T.view(z, [8, 32], "bfloat16")
            for i in T.serial(8):
                for j in T.serial(32):
                    zh[i, j] = halves[i, j] * 2
            T.copy(h, H)
            T.copy(w, W)
            T.copy(b, Bo)
            T.copy(z, Z)

    kernel = tilelang.compile(main, out_idx=[2, 3, 4, 5], target=target)
    x = rand((8, 32), "bfloat16", 3).view(np.float32)  # float32s whose halves are numbers
    b = np.random.default_rng(4).integers(-128, 128, (6, 16)).astype(np.int8)
    words = b.view(np.int32).reshape(4, 6)
    halves = x.view(BF16)
    twice = (f64(halves) * 2).astype(BF16)
    outs = [kernel(x, b)] + ([list(kernel.simulate(x, b)[0])] if target == "numpy" else [])
    for h, w, bo, z in outs:
        assert np.array_equal(np.asarray(h).view(np.uint16), halves.view(np.uint16))
        assert np.array_equal(w, words)
        assert np.array_equal(np.asarray(bo).view(np.int32).reshape(4, 6), words + 1)
        assert np.array_equal(np.asarray(z).view(np.uint16), twice.view(np.uint16))


def test_tile_view_errors():
    def build(body):
        @T.prim_func
        def main(X: T.Tensor((8, 8), T.float32)):
            with T.Kernel(1) as _:
                t = T.alloc_fragment((8, 8), "float32")
                body(X, t)
        return main

    def wrong_bytes(X, t):
        v = T.view(t, shape=[64], dtype="int16")
        T.clear(v)

    def bool_view(X, t):
        v = T.view(t, shape=[256], dtype="bool")
        T.clear(v)

    def narrow_store(X, t):
        v = T.view(t, [8, 16], "bfloat16")
        for i, j in T.Parallel(8, 16):
            v[i, j] = 0

    def tile_op(X, t):
        v = T.view(t, [8, 8], "int32")
        T.copy(X, v)

    for body, words in ((wrong_bytes, "256 bytes as 128 bytes"), (bool_view, "(not bool)"),
                        (narrow_store, "writes part of an element"),
                        (tile_op, "element by element")):
        with pytest.raises(CompileError) as err:
            build(body)
        msg = str(err.value)
        assert words in msg and "test_tile_dtype_views.py" in msg, msg


def test_narrow_view_with_odd_rows(target):
    """An int32 tile read as int16 rows of odd length (a row ends inside a tile element)."""
    @T.prim_func
    def main(X: T.Tensor((3, 5), T.int32), Y: T.Tensor((2, 15), T.int16)):
        with T.Kernel(1) as _:
            x = T.alloc_fragment((3, 5), "int32")
            y = T.alloc_fragment((2, 15), "int16")
            T.copy(X, x)
            v = T.view(x, [2, 15], "int16")
            for i, j in T.Parallel(2, 15):
                y[i, j] = v[i, j]
            T.copy(y, Y)

    kernel = tilelang.compile(main, out_idx=[1], target=target)
    x = np.random.default_rng(5).integers(-2**31, 2**31, (3, 5)).astype(np.int32)
    assert np.array_equal(kernel(x), x.view(np.int16).reshape(2, 15))
