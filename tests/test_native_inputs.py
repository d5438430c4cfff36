"""Inputs the compiler was not written against give the same answer or the same located error on
every target: literals out of range, loop bounds and copy offsets read from tensors at run time,
hand-edited IR indexing outside its buffers."""
# No `from __future__ import annotations`: the frontend reads T.Tensor annotations as objects.
import numpy as np
import pytest

import tilelang_mini
import tilelang_mini.language as T

import kernels
from tilelang_mini.errors import CompileError, TileLangMiniError


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_CACHE_DIR", str(tmp_path / "cache"))


ADD_LITERAL = '''
@prim_func(source="edited.py")
def main(A: Tensor((4,), "float32"), B: Tensor((4,), "float32")):  # 1:1
    with Kernel(1) as (bx):  # 2:5
        for i in Parallel(4):  # 3:9
            B[i] = A[i] + LITERAL  # 4:13
'''


def add_literal_kernel():
    @T.prim_func
    def main(A: T.Tensor((4,), "float32"), B: T.Tensor((4,), "float32")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(4):
                B[i] = A[i] + 99999999999999999999  # the literal's line
    return main


def test_integer_literal_beyond_64_bits_is_a_located_error(target):
    with pytest.raises(CompileError) as info:
        tilelang_mini.compile(add_literal_kernel(), out_idx=[-1], target=target)
    err = info.value
    assert "integer literal 99999999999999999999 is out of range" in err.message
    assert err.loc.file == __file__
    assert "the literal's line" in str(err)


@pytest.mark.parametrize("literal,message", [
    ("18446744073709551616", "integer literal 18446744073709551616 is out of range"),
    ("-9223372036854775809", "integer literal -9223372036854775809 is out of range"),
    ("1e39", r"float literal 1e\+39 overflows float32"),
])
def test_out_of_range_literals_in_ir_text(literal, message, target):
    with pytest.raises(CompileError, match=message) as info:
        tilelang_mini.compile_ir(ADD_LITERAL.replace("LITERAL", literal), out_idx=[-1],
                                 target=target)
    assert info.value.loc.line == 4


@pytest.mark.parametrize("literal,value", [("9223372036854775807", 9223372036854775807.0),
                                           ("3000000000", 3e9), ("-inf", -np.inf)])
def test_literals_in_range_agree_on_every_target(literal, value, target):
    k = tilelang_mini.compile_ir(ADD_LITERAL.replace("LITERAL", literal), out_idx=[-1],
                                 target=target)
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(k(x), (x.astype(np.float64) + value).astype(np.float32))


# ------------------------------------------------------------- bounds read from tensors


def ranged_gemm(M, N, K, bk, G):
    """Per block bx: C[bx] = 2 * A[R[bx] : R[bx] + M, k-range] @ B[k-range], the K range
    [KS[bx] // bk, ceil(KE[bx] / bk)) in tiles of bk, the row offset R[bx] read from a tensor
    (a cube loop with data-dependent bounds feeding a vector epilogue)."""
    @T.prim_func
    def main(A: T.Tensor((2 * M, K), "float16"), B: T.Tensor((K, N), "float16"),
             R: T.Tensor((G,), "int32"), KS: T.Tensor((G,), "int32"),
             KE: T.Tensor((G,), "int32"), C: T.Tensor((G * M, N), "float32")):
        with T.Kernel(G) as bx:
            a, b, c = kernels.gemm_tiles(M, N, bk)
            d = T.alloc_fragment((M, N), "float32")
            T.clear(c)
            for k in T.serial(KS[bx] // bk, T.ceildiv(KE[bx], bk)):
                T.copy(A[R[bx], k * bk], a)
                T.copy(B[k * bk, 0], b)
                T.gemm(a, b, c)
            for i, j in T.Parallel(M, N):
                d[i, j] = c[i, j] * 2.0
            T.copy(d, C[bx * M, 0])
    return main


def test_loop_bounds_and_copy_offsets_read_from_tensors(target):
    M, N, K, bk, G = 32, 32, 128, 32, 4
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (2 * M, K)).astype(np.float16)
    b = rng.uniform(-1, 1, (K, N)).astype(np.float16)
    r = np.array([0, 5, 32, 17], np.int32)
    ks = np.array([0, 32, 64, 100], np.int32)
    ke = np.array([32, 128, 70, 100], np.int32)   # the last range is empty
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    ref = np.zeros((G * M, N))
    for g in range(G):
        lo, hi = ks[g] // bk * bk, -(-ke[g] // bk) * bk
        ref[g * M:(g + 1) * M] = 2 * a64[r[g]:r[g] + M, lo:hi] @ b64[lo:hi]
    k = tilelang_mini.compile(ranged_gemm(M, N, K, bk, G), out_idx=[-1], target=target)
    np.testing.assert_allclose(k(a, b, r, ks, ke), ref, rtol=1e-4, atol=1e-4)
    if target == "numpy":
        out, _ = k.simulate(a, b, r, ks, ke)
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


def test_control_flow_outside_the_cores_reads_their_scalar(target):
    M, N, K, G = 64, 64, 64, 3
    rng = np.random.default_rng(1)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((G, K, N)).astype(np.float16)
    mi = np.repeat(np.array([0, -1, 2, 1], np.int32), 16)
    w = np.array([1.5, 2.0, -1.0], np.float32)
    ref = np.zeros((M, N))
    for r in range(0, M, 16):
        g = mi[r]
        if g >= 0:
            ref[r:r + 16] = a[r:r + 16].astype(np.float64) @ b[g].astype(np.float64) * w[g] + 1
    k = kernels.build(kernels.grouped_gemm, M, N, K, G, guarded_epilogue=True, target=target)
    np.testing.assert_allclose(k(a, b, mi, w), ref, rtol=1e-4, atol=1e-4)
    # simulate: insert_sync leaves the untaken-if path unsynchronised here (a RaceError between
    # the fill and the copy-out of C_f_ub; /work/notes/findings/transform.md, for xform)


def guarded_gather(R, C, n_idx):
    """Rows IDX[i] of X for i < N[0] (the only i where IDX[i] exists): Y[i] = X[IDX[i]]."""
    @T.prim_func
    def main(X: T.Tensor((R, C), "float32"), IDX: T.Tensor((n_idx,), "int32"),
             N: T.Tensor((1,), "int32"), Y: T.Tensor((R, C), "float32")):
        with T.Kernel(1) as bx:
            t = T.alloc_fragment((1, C), "float32")
            for i in T.serial(R):
                if i < N[0]:
                    T.copy(X[IDX[i], 0], t)
                    T.copy(t, Y[i, 0])
    return main


def test_a_guarded_index_load_is_not_evaluated_outside_its_guard(target):
    """The llvm GEMM path prefetched the next iteration's rows, loading IDX[i + 1] whatever
    the guard said (an out-of-bounds error on a valid kernel)."""
    x = np.arange(4 * 64, dtype=np.float32).reshape(4, 64)
    idx, n = np.array([3, 1], np.int32), np.array([2], np.int32)
    k = tilelang_mini.compile(guarded_gather(4, 64, 2), out_idx=[-1], target=target)
    ref = np.zeros((4, 64), np.float32)
    ref[:2] = x[idx]
    np.testing.assert_array_equal(k(x, idx, n), ref)


# --------------------------------------------------------- indices outside their buffers

EDITED = '''
@prim_func(source="edited.py")
def main(A: Tensor((4,), "float32"), I: Tensor((1,), "int32"), B: Tensor((4,), "float32")):  # 1:1
    with Kernel(1) as (bx):  # 2:5
        for i in Parallel(4):  # 3:9
            B[i] = A[INDEX]  # 4:13
'''


@pytest.mark.parametrize("index", ["i + 1", "i - 1", "I[0] + i"])
def test_edited_ir_indexing_outside_a_buffer_is_a_located_error(index, target):
    """Hand-edited IR reading past its buffer: a located error when it runs, on every target
    (the llvm code checks every index it cannot prove in range), never a wild read."""
    k = tilelang_mini.compile_ir(EDITED.replace("INDEX", index), out_idx=[-1], target=target)
    a = np.arange(4, dtype=np.float32)
    if index == "I[0] + i":
        np.testing.assert_array_equal(k(a, np.array([0], np.int32)), a)   # in range: runs
    with pytest.raises(TileLangMiniError) as info:
        k(a, np.array([2], np.int32))
    assert info.value.loc.line == 4 and "out of bounds" in info.value.message


HUGE_MAP = '''
@prim_func(source="edited.py")
def main(A: Tensor((4,), "float32"), B: Tensor((4,), "float32")):  # 1:1
    with Kernel(1) as (bx):  # 2:5
        for i in Parallel(4):  # 3:9
            B[i] = A[i]  # 4:13
        for i in Parallel(2000000000000):  # 5:9
            B[i % 4] = B[3 - i % 4] + 1.0  # 6:13
'''


def test_llvm_scratch_beyond_memory_is_a_located_error():
    """A map that reads what it writes needs a temporary of its whole extent: 16 TB here."""
    # `check` rejects a Parallel map larger than any tile of the chip at compile time; the llvm
    # runtime's own scratch check is the second line of defence
    with pytest.raises(CompileError, match="bytes of scratch memory|larger than any tile") as info:
        k = tilelang_mini.compile_ir(HUGE_MAP, out_idx=[-1], target="llvm")
        k(np.ones(4, np.float32))
    assert info.value.loc.file == "edited.py"
