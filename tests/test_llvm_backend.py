"""The LLVM-JIT backend against float64 NumPy references, the NumPy interpreter and ml_dtypes.

Kernels are built with the IR node constructors (and, for the lowered NPU path, through the
DSL and the full pass pipeline)."""
# No `from __future__ import annotations`: the frontend reads T.Tensor annotations as objects.
import ml_dtypes
import numpy as np
import pytest

from tilelang_mini.errors import KernelRuntimeError

import tilelang_mini
import tilelang_mini.language as T
from backends.llvm import BACKEND
from backends.numpy import BACKEND as NUMPY
from tilelang_mini.errors import CompileError
from tilelang_mini.ir import dtypes
from tilelang_mini.transform.pipeline import Options, run_target_passes
from tilelang_mini.ir.nodes import (
    Alloc, BinOp, Buffer, Call, Copy, Fill, For, Gemm, If, Load, Loc, PipeBarrier, Reduce,
    SetFlag, Store, walk_statements,
)

from irbuild import (  # noqa: E402
    add, c, close, exp_rsqrt_map, full, kernel, mul, reg, tiled_gemm, v,
)

RNG = np.random.default_rng(1)


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_CACHE_DIR", str(tmp_path / "cache"))
















def run(k, *args, options=None):
    """Run lowered IR `k` on llvm after the llvm target's own passes (as a compile does)."""
    k = run_target_passes(k, BACKEND.pass_options(Options(target="llvm"), options), verify=True)
    BACKEND.run(BACKEND.lower(k, options or {}), list(args))


def run_both(k, *args, options=None):
    """Run on llvm (in place) and on the interpreter (on copies); return the interpreter's."""
    ref = [a.copy() for a in args]
    NUMPY.run(NUMPY.lower(k, {}), ref)
    run(k, *args, options=options)
    return ref


def rand(shape, dtype, lo=-1.0, hi=1.0):
    return RNG.uniform(lo, hi, shape).astype(dtypes.to_numpy(dtype))






# -------------------------------------------------------------------------------------- gemm


@pytest.mark.parametrize("in_dtype, no_dot", [
    ("float32", False), ("float16", False), ("bfloat16", False), ("float8_e4m3fn", False),
    ("float8_e5m2", False),
    ("bfloat16", True),  # the fallback without the avx512_bf16 dot product
])
def test_tiled_gemm_tail_tiles(in_dtype, no_dot):
    M, N, K = 70, 45, 33
    a, b = rand((M, K), in_dtype), rand((K, N), in_dtype)
    out = np.full((M, N), 7.0, np.float32)
    ref = run_both(tiled_gemm(M, N, K, in_dtype), a, b, out,
                   options={"llvm_disable_bf16": no_dot})
    close(out, a.astype(np.float64) @ b.astype(np.float64), "float32")
    close(out, ref[2], "float32")


@pytest.mark.parametrize("n", [24, 20, 9])
def test_gemm_computes_only_the_columns_its_copies_keep(n):
    # C_l is 32 wide but its copy to D keeps n columns: the gemm computes n (a 16-wide and a
    # half-width vector for 24 and 20); a column's value never depends on another's
    M, K = 20, 30
    A, B, D = Buffer("A", (M, K), "float32"), Buffer("B", (n, K), "float32"), \
        Buffer("D", (M, n), "float32")
    A_s, B_s = Buffer("A_s", (32, 32), "float32", "shared"), \
        Buffer("B_s", (32, 32), "float32", "shared")
    C_l = Buffer("C_l", (32, 32), "float32", "fragment")
    k = kernel((A, B, D), [
        Alloc(A_s), Alloc(B_s), Alloc(C_l), Fill(full(C_l), c(0.0)),
        Copy(reg(A, (0, 0), (32, 32)), full(A_s)), Copy(reg(B, (0, 0), (32, 32)), full(B_s)),
        Gemm(full(A_s), full(B_s), full(C_l), transpose_b=True),
        Gemm(full(A_s), full(B_s), full(C_l), transpose_b=True),
        Copy(full(C_l), reg(D, (0, 0), (32, 32))),
    ])
    a, b = rand((M, K), "float32"), rand((n, K), "float32")
    d = np.zeros((M, n), np.float32)
    ref = run_both(k, a, b, d)
    close(d, 2 * a.astype(np.float64) @ b.astype(np.float64).T, "float32")
    close(d, ref[2], "float32")


def test_big_gemm_tiles_match_numpy():
    # 128x128x64 tiles (full micro-panels) with an odd tail in every dimension
    M, N, K = 200, 150, 130
    for dt in ("float32", "bfloat16"):
        a, b = rand((M, K), dt), rand((K, N), dt)
        out = np.zeros((M, N), np.float32)
        run(tiled_gemm(M, N, K, dt, bm=128, bn=128, bk=64), a, b, out)
        close(out, a.astype(np.float64) @ b.astype(np.float64), "float32")


def dsl_gemm(M, N, K, dtype, block_M=64, block_N=64, block_K=32):
    import kernels
    return kernels.gemm(M, N, K, block_M, block_N, block_K, dtype)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float8_e4m3fn"])
def test_lowered_npu_gemm_through_the_pipeline(dtype):
    M, N, K = 70, 45, 33
    a, b = rand((M, K), dtype), rand((K, N), dtype)
    chip = "ascend950" if dtype.startswith("float8") else None  # the 910b cube has no FP8
    kl = tilelang_mini.compile(dsl_gemm(M, N, K, dtype), out_idx=[-1], target="llvm", chip=chip)
    kn = tilelang_mini.compile(dsl_gemm(M, N, K, dtype), out_idx=[-1], target="numpy", chip=chip)
    assert kl.ir.is_npu
    out = kl(a, b)
    close(out, a.astype(np.float64) @ b.astype(np.float64), "float32")
    close(out, kn(a, b), "float32")
    src = kl.get_kernel_source()
    assert "tlm_kernel" in src and "<16 x float>" in src


@pytest.mark.parametrize("shape", [(48, 72, 40, 16, 64, 32), (16, 100, 37, 16, 96, 32),
                                   (32, 130, 70, 32, 128, 64), (16, 17, 19, 16, 48, 16),
                                   # a narrow B (N rows) in a wider tile, K clipped
                                   (37, 3, 75, 16, 16, 32), (37, 13, 75, 16, 32, 32),
                                   (37, 21, 75, 16, 32, 32), (37, 24, 75, 16, 32, 32),
                                   (37, 45, 75, 16, 48, 32),
                                   # K pairs with an odd K tile (the last pair half zeros)
                                   (37, 20, 75, 16, 32, 25), (21, 8, 31, 16, 16, 15)])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_transposed_b_packing_full_and_partial_panels(dtype, shape):
    # a B^T tile packed 16 x 16 blocks at a time: whole 32-row panels in a loop, then a partial
    # last panel (rows past N zero), K tails, and blocks clipped at the tensor's last row/column
    import kernels
    M, N, K, bm, bn, bk = shape
    a, b = rand((M, K), dtype), rand((N, K), dtype)
    prim = kernels.gemm(M, N, K, bm, bn, bk, dtype=dtype, trans_B=True)
    out = tilelang_mini.compile(prim, out_idx=[-1], target="llvm")(a, b)
    close(out, a.astype(np.float64) @ b.astype(np.float64).T, "float32")
    ref = tilelang_mini.compile(prim, out_idx=[-1], target="numpy")(a, b)
    close(out, ref, "float32")


@pytest.mark.parametrize("n", [3, 8, 13, 17, 24])
@pytest.mark.parametrize("block_k", [32, 25])
def test_transposed_b_tile_in_k_pairs(monkeypatch, n, block_k):
    # prenorm's B tile (N, K), read transposed by a gemm of N constant columns: with a last
    # vector of at most 8 columns (not 13) it is packed in float32 K pairs (packBT2) for the
    # K-pair micro-kernel, an odd K tile's last pair half zeros; against float64
    from pathlib import Path
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "examples"))
    from prenorm import hc_prenorm, reference
    from backends.llvm import layout
    chosen, real = [], layout._layout
    monkeypatch.setattr(layout, "_layout", lambda *a: chosen.append(real(*a)) or chosen[-1])
    M, K = 37, 3 * block_k - 4
    kl = tilelang_mini.compile(hc_prenorm.factory(M, n, K, block_M=16, block_K=block_k),
                               out_idx=[-2, -1], target="llvm")
    assert ("packBT2" in chosen) == (n != 13), chosen
    a, b = rand((M, K), "bfloat16"), rand((n, K), "float32")
    d, ss = kl(a, b)
    want_d, want_s = reference(a, b)
    close(d, want_d, "float32")
    close(ss, want_s, "float32")


@pytest.mark.parametrize("shape", [(16, 72, 40), (8, 17, 19), (24, 64, 48)])
def test_gemm_packs_a_transposed_row_major_b(shape):
    # the B tile is also copied out, so it stays a row-major tile and the gemm packs it itself
    # (16 x 16 blocks transposed in registers): whole 32-row panels, a partial one, K tails
    M, N, K = shape
    A, B = Buffer("A", (M, K), "float32"), Buffer("B", (N, K), "float32")
    C, E = Buffer("C", (M, N), "float32"), Buffer("E", (N, K), "float32")
    A_s, B_s = Buffer("A_s", (M, K), "float32", "shared"), Buffer("B_s", (N, K), "float32",
                                                                  "shared")
    C_l = Buffer("C_l", (M, N), "float32", "fragment")
    k = kernel((A, B, C, E), [
        Alloc(A_s), Alloc(B_s), Alloc(C_l), Fill(full(C_l), c(0.0)),
        Copy(full(A), full(A_s)), Copy(full(B), full(B_s)),
        Gemm(full(A_s), full(B_s), full(C_l), transpose_b=True),
        Copy(full(C_l), full(C)), Copy(full(B_s), full(E)),
    ])
    a, b = rand((M, K), "float32"), rand((N, K), "float32")
    out, e = np.zeros((M, N), np.float32), np.zeros((N, K), np.float32)
    ref = run_both(k, a, b, out, e)
    close(out, a.astype(np.float64) @ b.astype(np.float64).T, "float32")
    close(out, ref[2], "float32")
    np.testing.assert_array_equal(e, b)


@pytest.mark.parametrize("n", [8, 20, 40, 136, 200])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_narrow_gemm_stops_at_each_blocks_valid_columns(dtype, n):
    # 128-wide C tiles: one block column holding n <= 128 columns, or a last block column
    # with 8 (136) or 72 (200) valid columns, computed by whole panels plus a narrow 8/16/24
    # micro-kernel; the columns past them are never observed
    from tilelang_mini.transform.cpu_columns import live_columns
    M, K = 70, 65
    prim = dsl_gemm(M, n, K, dtype, block_M=64, block_N=128, block_K=32)
    kl = tilelang_mini.compile(prim, out_idx=[-1], target="llvm")
    kn = tilelang_mini.compile(prim, out_idx=[-1], target="numpy")
    cols = live_columns(kl.ir)
    assert list(cols) == ["C_f"]
    gemms = [s for s in walk_statements(kl.compilation.final.body) if isinstance(s, Gemm)]
    assert gemms and all(s.columns == cols["C_f"] for s in gemms)
    a, b = rand((M, K), dtype), rand((K, n), dtype)
    out = kl(a, b)
    close(out, a.astype(np.float64) @ b.astype(np.float64), "float32")
    close(out, kn(a, b), "float32")


@pytest.mark.parametrize("trans_a", [False, True])
@pytest.mark.parametrize("n", [3, 8, 21, 24, 40, 56])
@pytest.mark.parametrize("m", [7, 13, 16])
def test_gemm_half_width_last_vector(m, n, trans_a):
    # columns with a last vector of at most 8 (n % 16 in 1..8, up to 24 columns) are computed
    # over K pairs (backends/llvm/kpairs.py; K odd: the last k alone), wider ones two rows per
    # full vector (masked when fewer than 8), an odd last row of a tail (m % 8 = 7, 5) in a
    # half-width one; C holds values before the gemm, which adds to them (loaded and stored
    # back per row, masked). A transposed (its rows strided in K) takes the two-row vectors.
    K = 37
    ash = (K, m) if trans_a else (m, K)
    A, B, C0, D = Buffer("A", ash, "float32"), Buffer("B", (K, n), "float32"), \
        Buffer("C0", (m, n), "float32"), Buffer("D", (m, n), "float32")
    A_s, B_s = Buffer("A_s", ash, "float32", "shared"), \
        Buffer("B_s", (K, n), "float32", "shared")
    C_l = Buffer("C_l", (m, n), "float32", "fragment")
    k = kernel((A, B, C0, D), [
        Alloc(A_s), Alloc(B_s), Alloc(C_l), Copy(full(A), full(A_s)), Copy(full(B), full(B_s)),
        Copy(full(C0), full(C_l)), Gemm(full(A_s), full(B_s), full(C_l), transpose_a=trans_a),
        Copy(full(C_l), full(D)),
    ])
    a, b, c0 = rand(ash, "float32"), rand((K, n), "float32"), rand((m, n), "float32")
    d = np.zeros((m, n), np.float32)
    ref = run_both(k, a, b, c0, d)
    a64 = a.astype(np.float64).T if trans_a else a.astype(np.float64)
    close(d, c0.astype(np.float64) + a64 @ b.astype(np.float64), "float32")
    close(d, ref[3], "float32")


@pytest.mark.parametrize("n", [136, 200])
def test_narrow_last_block_column_with_odd_rows_and_k_tail(n):
    # the last block column's narrow panels (8 valid columns of 128, or 2 panels + 8) with an
    # odd row tail and a K tail: the clipped B copies load only the vectors with valid lanes,
    # and the half-width last vector covers the odd row count
    M, K = 69, 97
    prim = dsl_gemm(M, n, K, "float32", block_M=64, block_N=128, block_K=32)
    kl = tilelang_mini.compile(prim, out_idx=[-1], target="llvm")
    kn = tilelang_mini.compile(prim, out_idx=[-1], target="numpy")
    a, b = rand((M, K), "float32"), rand((K, n), "float32")
    out = kl(a, b)
    close(out, a.astype(np.float64) @ b.astype(np.float64), "float32")
    close(out, kn(a, b), "float32")


def test_clipped_tiles_in_a_pipelined_vector_loop():
    # a vector-core pipelined loop over 2-d GM tiles clipped on both sides (rows past M,
    # columns past N) whose zeros add nothing to the squared sums
    M, N, bm, bn = 37, 83, 16, 32
    f32 = "float32"  # (a name: pyflakes reads a string in an annotation as a forward reference)

    @T.prim_func
    def colsum(A: T.Tensor((M, N), f32), S: T.Tensor((M,), f32)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            A_s = T.alloc_shared((bm, bn), "float32")
            acc = T.alloc_fragment((bm, bn), "float32")
            s = T.alloc_fragment((bm,), "float32")
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(N, bn), num_stages=2):
                T.copy(A[bx * bm, k * bn], A_s)
                for i, j in T.Parallel(bm, bn):
                    acc[i, j] += A_s[i, j] * A_s[i, j]
            T.reduce_sum(acc, s, dim=1)
            T.copy(s, S[bx * bm])

    kl = tilelang_mini.compile(colsum, out_idx=[-1], target="llvm")
    kn = tilelang_mini.compile(colsum, out_idx=[-1], target="numpy")
    a = rand((M, N), "float32")
    want = np.sum(a.astype(np.float64) ** 2, axis=1)
    close(kl(a), want, "float32")
    close(kn(a), want, "float32")


def test_landings_need_starts_from_grid_variables():
    # the copy out of C starts at a loop variable's column: no run-time bound is taken
    from tilelang_mini.transform.cpu_columns import live_columns
    X, Y = Buffer("X", (32, 32), "float32"), Buffer("Y", (32, 70), "float32")
    C_l = Buffer("C_l", (32, 32), "float32", "fragment")
    body = [Alloc(C_l), Fill(full(C_l), c(0.0)),
            Gemm(full(X), full(X), full(C_l)),
            For(("j",), (c(2),), "serial", (Copy(full(C_l), reg(
                Y, (0, mul(v("j"), c(32))), (32, 32))),))]
    assert live_columns(kernel((X, Y), body)) == {}   # nor a constant: every column may land


# -------------------------------------------------------------------------------------- copy


@pytest.mark.parametrize("start", [(0, 0), (-3, 5), (10, -7), (30, 0)])
def test_copy_into_packed_tile_with_clipping(start):
    # B_s is only copied into and used as a gemm B operand: it is kept in packed panels
    A, B = Buffer("A", (16, 40), "float32"), Buffer("B", (33, 37), "float16")
    C = Buffer("C", (16, 37), "float32")
    A_s = Buffer("A_s", (16, 40), "float32", "shared")
    B_s = Buffer("B_s", (40, 37), "float16", "shared")
    k = kernel((A, B, C), [
        Alloc(A_s), Alloc(B_s), Copy(full(A), full(A_s)),
        Copy(reg(B, start, (40, 37)), full(B_s)),
        Gemm(full(A_s), full(B_s), full(C), clear_accum=True),
    ])
    a, b = rand((16, 40), "float32"), rand((33, 37), "float16")
    out = np.zeros((16, 37), np.float32)
    ref = run_both(k, a, b, out)
    close(out, ref[2], "float32")


def test_copy_forwarding_is_not_applied_when_the_source_changes():
    X, Y = Buffer("X", (8, 8), "float32"), Buffer("Y", (8, 8), "float32")
    a1, a0 = Buffer("a1", (8, 8), "float32", "L1"), Buffer("a0", (8, 8), "float32", "L0A")
    k = kernel((X, Y), [
        Alloc(a1), Alloc(a0), Copy(full(X), full(a1)), Copy(full(a1), full(a0)),
        Fill(full(a1), c(5.0)),
        Copy(full(a0), full(Y)),
    ])
    x = rand((8, 8), "float32")
    y = np.zeros((8, 8), np.float32)
    run(k, x, y)
    np.testing.assert_array_equal(y, x)


def test_blocks_see_zeroed_buffers_only_where_they_read_before_writing():
    # X: half written then read whole (zeroed each block); Y: a clipped copy (rows past the
    # source are zeros, no stale rows of the previous block); S: a full Parallel map; Z: written
    # in one branch of an If only (zeroed)
    A, O = Buffer("A", (5, 16), "float32"), Buffer("O", (3, 4, 4, 16), "float32")
    X, Y = Buffer("X", (4, 16), "float32", "shared"), Buffer("Y", (4, 16), "float32", "shared")
    S, Z = Buffer("S", (4, 16), "float32", "shared"), Buffer("Z", (4, 16), "float32", "shared")
    bx, i, j = v("bx"), v("i"), v("j")
    k = kernel((A, O), [
        Alloc(X), Alloc(Y), Alloc(S), Alloc(Z),
        Copy(reg(A, (bx, 0), (2, 16)), reg(X, (0, 0), (2, 16))),
        Copy(reg(A, (mul(bx, c(2)), 0), (4, 16)), full(Y)),
        For(("i", "j"), (c(4), c(16)), "parallel", (
            Store(S, (i, j), mul(Load(Y, (i, j)), Load(X, (i, j)))),)),
        If(BinOp("==", bx, c(1)), (Fill(full(Z), c(3.0)),)),
        Copy(full(X), reg(O, (bx, 0, 0, 0), (1, 1, 4, 16))),
        Copy(full(Y), reg(O, (bx, 1, 0, 0), (1, 1, 4, 16))),
        Copy(full(S), reg(O, (bx, 2, 0, 0), (1, 1, 4, 16))),
        Copy(full(Z), reg(O, (bx, 3, 0, 0), (1, 1, 4, 16))),
    ], grid=(3,))
    a = rand((5, 16), "float32")
    o = np.full((3, 4, 4, 16), 7.0, np.float32)
    ref = run_both(k, a, o)
    np.testing.assert_array_equal(o, ref[1])
    assert not o[2, 1, 1:].any() and not o[2, 3].any() and o[1, 3].all()


@pytest.mark.parametrize("mid,last", [("bfloat16", "float32"), ("float32", "float16"),
                                      ("float16", "float32")])
def test_staged_copy_chains_keep_their_rounding(mid, last):
    # copy(X, t); copy(t, Y) is fused into copy(X, Y) only when that rounds the same way
    X, Y = Buffer("X", (3, 40), "float32"), Buffer("Y", (3, 40), last)
    t, u = Buffer("t", (2, 40), mid, "shared"), Buffer("u", (2, 40), last, "shared")
    k = kernel((X, Y), [
        Alloc(t), Alloc(u), Copy(reg(X, (v("bx"), 0), (2, 40)), full(t)), SetFlag("MTE2", "V", 0),
        Copy(full(t), full(u)), Copy(full(u), reg(Y, (v("bx"), 0), (2, 40))),
    ], grid=(2,))
    x = rand((3, 40), "float32", -3, 3)
    y = np.zeros((3, 40), dtypes.to_numpy(last))
    ref = run_both(k, x, y)
    np.testing.assert_array_equal(y.astype(np.float64), ref[1].astype(np.float64))


@pytest.mark.parametrize("offset", [0, 4, 1])
def test_large_outputs_are_streamed(offset):
    # >= 8 MiB float32 GM output: non-temporal stores after a masked head up to a 64-byte
    # boundary (offset 4), or plain stores when the rows are not even 4-byte aligned (offset 1)
    M, N = 1030, 2050
    X, Y = Buffer("X", (M, N), "float32"), Buffer("Y", (M, N), "float32")
    t = Buffer("t", (2, N), "float32", "shared")
    k = kernel((X, Y), [Alloc(t), Copy(reg(X, (mul(v("bx"), c(2)), 0), (2, N)), full(t)),
                        Copy(full(t), reg(Y, (mul(v("bx"), c(2)), 0), (2, N)))], grid=(M // 2,))
    x = rand((M, N), "float32")
    raw = np.zeros(M * N * 4 + 64, np.uint8)
    y = np.frombuffer(raw, np.float32, M * N, offset).reshape(M, N)
    run(k, x, y)
    np.testing.assert_array_equal(y, x)


def test_copy_forwarding_through_workspace_with_several_writers():
    # W -> a1 -> a0 is read in place in the loop (a1's Fill comes after the last read of a0);
    # b0, read after the loop too, keeps its own copy
    X, Y = Buffer("X", (24, 8), "float32"), Buffer("Y", (4, 24, 8), "float32")
    W = Buffer("W", (8, 8), "float32", "workspace")
    a1, a0 = Buffer("a1", (8, 8), "float32", "L1"), Buffer("a0", (8, 8), "float32", "L0A")
    b0 = Buffer("b0", (8, 8), "float32", "L0B")
    row = mul(v("k"), c(8))
    k = kernel((X, Y), [
        Alloc(W), Alloc(a1), Alloc(a0), Alloc(b0),
        For(("k",), (c(3),), "serial", (
            Copy(reg(X, (row, 0), (8, 8)), full(W)), Copy(full(W), full(a1)),
            Copy(full(a1), full(a0)), Copy(full(a1), full(b0)),
            Copy(full(a0), reg(Y, (0, row, 0), (1, 8, 8))),
            Copy(full(b0), reg(Y, (1, row, 0), (1, 8, 8))),
            Fill(full(a1), c(5.0)), Copy(full(a1), reg(Y, (2, row, 0), (1, 8, 8))),
        )),
        Copy(full(b0), reg(Y, (3, 0, 0), (1, 8, 8))),
    ])
    x = rand((24, 8), "float32")
    y = np.zeros((4, 24, 8), np.float32)
    ref = run_both(k, x, y)
    np.testing.assert_array_equal(y, ref[1])
    np.testing.assert_array_equal(y[0], x)


# ------------------------------------------------------------------------------ conversions


def _convert(values, dst, via=None):
    """values (1-d) -> dst through a copy kernel (optionally through an on-chip `via` tile)."""
    n = values.size
    X = Buffer("X", (n,), dtypes.canonical(values.dtype))
    Y = Buffer("Y", (n,), dst)
    body = [Copy(full(X), full(Y))]
    if via is not None:
        tile = Buffer("t", (n,), via, "shared")
        body = [Alloc(tile), Copy(full(X), full(tile)), Copy(full(tile), full(Y))]
    out = np.zeros(n, dtypes.to_numpy(dst))
    run(kernel((X, Y), body), values, out)
    return out


def _same_bits_or_nan(got, want):
    g64, w64 = got.astype(np.float64), want.astype(np.float64)
    nan = np.isnan(w64)
    np.testing.assert_array_equal(np.isnan(g64), nan)
    gi = got.view(np.uint8 if got.itemsize == 1 else np.uint16)
    wi = want.view(gi.dtype)
    np.testing.assert_array_equal(gi[~nan], wi[~nan])


def _f32_patterns():
    rng = np.random.default_rng(5)
    bits = [rng.integers(0, 2 ** 32, 1 << 19, dtype=np.uint64).astype(np.uint32),
            (np.arange(1 << 16, dtype=np.uint32) << 16),               # every bf16 value
            (np.arange(1 << 16, dtype=np.uint32) << 16) | 0x8000,      # exact ties
            (np.arange(1 << 16, dtype=np.uint32) << 16) | 0x8001,
            (np.arange(1 << 16, dtype=np.uint32) << 16) | 0x7FFF,
            np.array([0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001, 0, 0x80000000, 1,
                      0x80000001, 0x007FFFFF], np.uint32)]
    return np.concatenate(bits).view(np.float32)


@pytest.mark.parametrize("dst", ["bfloat16", "float8_e4m3fn", "float8_e5m2", "float16"])
def test_float32_to_low_precision_matches_ml_dtypes(dst):
    x = _f32_patterns()
    with np.errstate(all="ignore"):
        want = x.astype(dtypes.to_numpy(dst))
    _same_bits_or_nan(_convert(x, dst), want)


@pytest.mark.parametrize("src", ["bfloat16", "float16", "float8_e4m3fn", "float8_e5m2"])
def test_low_precision_decoding_is_exact(src):
    bits = np.arange(1 << (8 * dtypes.itemsize(src)), dtype=np.uint64)
    x = bits.astype(np.uint8 if dtypes.itemsize(src) == 1 else np.uint16).view(
        dtypes.to_numpy(src))
    got = _convert(x, "float32")
    want = x.astype(np.float32)
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32))


@pytest.mark.parametrize("via", ["float8_e4m3fn", "float8_e5m2", "bfloat16", "float16"])
def test_widened_on_chip_tiles_round_like_their_dtype(via):
    x = _f32_patterns()[-200000:]
    with np.errstate(all="ignore"):
        want = x.astype(dtypes.to_numpy(via)).astype(np.float32)
    got = _convert(x, "float32", via=via)
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got[~nan], want[~nan])


def test_fp8_to_bf16_and_int_conversions():
    x = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn)
    _same_bits_or_nan(_convert(x, "bfloat16"), x.astype(ml_dtypes.bfloat16))
    f = np.array([-3.7, -0.5, 0.0, 2.9, 1e5, 123456.7], np.float32)
    np.testing.assert_array_equal(_convert(f, "int32"), f.astype(np.int32))
    i = np.array([-70000, -1, 0, 7, 1 << 24, (1 << 24) + 1], np.int32)
    np.testing.assert_array_equal(_convert(i, "float32"), i.astype(np.float32))


# ------------------------------------------------------------------------------ fill, reduce


_REF = {"sum": lambda x, d: x.sum(d), "max": lambda x, d: x.max(d), "min": lambda x, d: x.min(d),
        "abssum": lambda x, d: np.abs(x).sum(d), "absmax": lambda x, d: np.abs(x).max(d)}
_COMB = {"sum": np.add, "abssum": np.add, "max": np.maximum, "absmax": np.maximum,
         "min": np.minimum}


@pytest.mark.parametrize("kind,dtype,n", [("sum", "float16", 70), ("absmax", "float32", 300),
                                          ("sum", "float32", 16)])
def test_map_fused_with_the_reduce_of_its_tile(kind, dtype, n):
    # sq is only written by the map and reduced: the map's values (rounded to sq's dtype)
    # feed the reduction directly; ss accumulates (clear=False)
    X, O = Buffer("X", (3, n), "float32"), Buffer("O", (3,), "float32")
    sq, ss = Buffer("sq", (3, n), dtype, "fragment"), Buffer("ss", (3,), "float32", "fragment")
    i, j = v("i"), v("j")
    k = kernel((X, O), [
        Alloc(sq), Alloc(ss), Fill(full(ss), c(0.5)),
        For(("i", "j"), (c(3), c(n)), "parallel", (
            Store(sq, (i, j), BinOp("-", mul(Load(X, (i, j)), Load(X, (i, j))), c(0.3))),)),
        PipeBarrier("V"),
        Reduce(kind, full(sq), full(ss), 1, clear=False),
        Copy(full(ss), full(O)),
    ])
    x = rand((3, n), "float32", -2, 2)
    o = np.zeros(3, np.float32)
    ref = run_both(k, x, o)
    close(o, ref[1], "float32")


def test_reduce_3d_middle_dim_and_nan():
    X = Buffer("X", (3, 5, 20), "float32")
    D = Buffer("D", (3, 20), "float32")
    M = Buffer("M", (3, 5), "float32")
    k = kernel((X, D, M), [Reduce("sum", full(X), full(D), 1),
                           Reduce("max", full(X), full(M), -1)])
    x = rand((3, 5, 20), "float32")
    x[1, 2, 3] = np.nan
    d, m = np.zeros((3, 20), np.float32), np.zeros((3, 5), np.float32)
    ref = run_both(k, x, d, m)
    close(d, ref[1], "float32")
    np.testing.assert_array_equal(np.isnan(m), np.isnan(ref[2]))
    close(np.nan_to_num(m), np.nan_to_num(ref[2]), "float32")


# ---------------------------------------------------------------------------------- parallel


def _map(fn, x: np.ndarray) -> np.ndarray:
    n = x.size
    X, Y = Buffer("X", (n,), "float32"), Buffer("Y", (n,), "float32")
    i = v("i")
    k = kernel((X, Y), [For(("i",), (c(n),), "parallel", (
        Store(Y, (i,), Call(fn, (Load(X, (i,)),))),))])
    y = np.zeros(n, np.float32)
    run(k, x, y)
    return y


_SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, 1e-40, 1.17e-38, -1.0, 88.7,
                     89.0, -103.0, -120.0, 128.0, -150.0, 1.0, 2.0, 0.5], np.float32)


@pytest.mark.parametrize("fn,ref,lo,hi", [
    ("exp", np.exp, -100.0, 88.0), ("exp2", np.exp2, -140.0, 127.0),
    ("log", np.log, 1e-30, 1e30), ("sqrt", np.sqrt, 0.0, 1e6),
    ("rsqrt", lambda x: np.float32(1) / np.sqrt(x), 1e-6, 1e6),
])
def test_vector_math_accuracy(fn, ref, lo, hi):
    rng = np.random.default_rng(3)
    if fn == "log":
        x = np.exp(rng.uniform(np.log(lo), np.log(hi), 20000)).astype(np.float32)
    else:
        x = rng.uniform(lo, hi, 20000).astype(np.float32)
    x = np.concatenate([x, rng.uniform(-2, 2, 5000).astype(np.float32), _SPECIAL])
    got = _map(fn, x)
    with np.errstate(all="ignore"):
        want = ref(x.astype(np.float32))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    np.testing.assert_allclose(got[ok], want[ok], rtol=4e-7, atol=1e-44)


def test_parallel_elementwise_map_exp_rsqrt_casts():
    k = exp_rsqrt_map(16, 40)
    x = rand((16, 40), "float16", -2, 2)
    y = np.zeros((16, 40), ml_dtypes.bfloat16)
    ref = run_both(k, x, y)
    np.testing.assert_array_equal(y.astype(np.float32), ref[1].astype(np.float32))


def test_parallel_index_arithmetic_int_ops_and_transposed_access():
    Y, Z = Buffer("Y", (37,), "int32"), Buffer("Z", (37,), "float32")
    W, X = Buffer("W", (5, 7), "float32"), Buffer("X", (7, 5), "float32")
    i = v("i")
    iv = add(add(BinOp("//", BinOp("-", i, c(9)), c(3)), mul(BinOp("%", BinOp("-", i, c(9)),
                                                                  c(3)), c(10))),
             Call("ceildiv", (i, c(4))))
    a, b = v("a"), v("b")
    k = kernel((Y, Z, W, X), [
        For(("i",), (c(37),), "parallel", (Store(Y, (i,), iv), Store(Z, (i,), BinOp("/", i, c(4))))),
        For(("a", "b"), (c(5), c(7)), "parallel", (Store(W, (a, b), Load(X, (b, a))),)),
    ])
    y, z, w = np.zeros(37, np.int32), np.zeros(37, np.float32), np.zeros((5, 7), np.float32)
    x = rand((7, 5), "float32")
    run(k, y, z, w, x)
    n = np.arange(37)
    np.testing.assert_array_equal(y, (n - 9) // 3 + (n - 9) % 3 * 10 + -(-n // 4))
    np.testing.assert_array_equal(z, n / 4)
    np.testing.assert_array_equal(w, x.T)


def test_parallel_map_reading_its_own_target_shifted():
    # NumPy evaluates the whole right-hand side first: Y[i] = Y[i - 1] shifts by one
    Y = Buffer("Y", (40,), "float32")
    i = v("i")
    k = kernel((Y,), [For(("i",), (c(39),), "parallel", (
        Store(Y, (add(i, c(1)),), Load(Y, (i,))),))])
    y = np.arange(40, dtype=np.float32)
    run(k, y)
    np.testing.assert_array_equal(y, np.r_[0, np.arange(39)].astype(np.float32))


# ------------------------------------------------------------------------------------ is_npu


# ------------------------------------------------------------------------ errors, arguments


def test_runtime_errors_are_located():
    Y = Buffer("Y", (4,), "float32")
    loc = Loc("my_kernel.py", 12, 9)
    k = kernel((Y,), [Store(Y, (add(v("bx"), c(3)),), c(1.0), loc=loc)], grid=(2,))
    with pytest.raises(KernelRuntimeError) as err:
        run(k, np.zeros(4, np.float32))
    assert err.value.loc == loc and "out of bounds" in err.value.message
    # a tile op's region out of bounds: test_numpy_backend, on every target


def test_unsupported_constructs_fail_at_lower_time():
    Y = Buffer("Y", (4, 4), "float32")
    inner = For(("j",), (c(4),), "parallel", (Store(Y, (v("i"), v("j")), c(1.0)),))
    with pytest.raises(CompileError, match="nested Parallel"):
        BACKEND.lower(kernel((Y,), [For(("i",), (c(4),), "parallel", (inner,))]), {})
    with pytest.raises(CompileError, match="nope"):
        BACKEND.lower(kernel((Y,), [Store(Y, (v("nope"), c(0)), c(1.0))]), {})


def test_if_on_parallel_variables_masks_its_stores():
    """An If whose condition varies over a map's lanes runs its stores only where it holds
    (it was rejected before masked stores existed): Y[i, 0] = 1 for i < 2, the rest untouched."""
    Y = Buffer("Y", (4, 4), "float32")
    body = (If(BinOp("<", v("i"), c(2)), (Store(Y, (v("i"), c(0)), c(1.0)),)),)
    y = np.full((4, 4), 5.0, np.float32)
    run(kernel((Y,), [For(("i",), (c(4),), "parallel", body)]), y)
    want = np.full((4, 4), 5.0, np.float32)
    want[:2, 0] = 1.0
    np.testing.assert_array_equal(y, want)


# -------------------------------------------------------------------------------- threads
# (the disk cache: tests/test_cache.py)


def test_multithreaded_run_equals_single_threaded(monkeypatch):
    M, N, K = 300, 260, 70
    k = tiled_gemm(M, N, K, "bfloat16")
    art = BACKEND.lower(k, {})
    a, b = rand((M, K), "bfloat16"), rand((K, N), "bfloat16")
    outs = []
    for n in ("1", "2", "3"):
        monkeypatch.setenv("TILELANG_MINI_NUM_THREADS", n)
        out = np.zeros((M, N), np.float32)
        BACKEND.run(art, [a, b, out])
        outs.append(out)
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_array_equal(outs[0], outs[2])
    close(outs[0], a.astype(np.float64) @ b.astype(np.float64), "float32")

