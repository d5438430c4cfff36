"""Packed B tiles of read-only inputs are packed once per launch (backends/llvm/pack_cache.py):
results equal a float64 NumPy reference and the numpy target on clipped shapes, across
launches whose inputs change (the cache is cleared per launch) and on several threads; a tile
also written from an input the kernel writes is not cached."""
import sys
from pathlib import Path

import numpy as np
import pytest

import tilelang_mini
import tilelang_mini.language as T
from backends.llvm.codegen import build
from backends.llvm.runtime import _features, host_target
from tilelang_mini.ir import dtypes

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from gemm import matmul  # noqa: E402
from prenorm import hc_prenorm, reference as prenorm_reference  # noqa: E402

RNG = np.random.default_rng(12)


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_CACHE_DIR", str(tmp_path / "cache"))


def cached_tiles(k) -> set:
    _, gen = build(k.compilation.final, _features(host_target(), {}))
    return set(gen.pack_cache.pointer)


def close(got, want, reduce_len):
    rtol, atol = dtypes.tolerance("float32")
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol * max(1.0, np.sqrt(reduce_len) / 4))


@pytest.mark.parametrize("threads", ["1", "2"])
def test_prenorm_packs_b_once_and_matches_reference_across_launches(threads, monkeypatch):
    """M, K not multiples of the tiles (clipped A rows and K tail), N=24 of a 32-wide tile;
    three launches with new A and B: a stale cache would return the first B's product."""
    monkeypatch.setenv("TILELANG_MINI_NUM_THREADS", threads)
    M, N, K = 300, 24, 1000
    ks = {t: tilelang_mini.compile(hc_prenorm.factory(M, N, K), out_idx=[-2, -1], target=t)
          for t in ("llvm", "numpy")}
    assert cached_tiles(ks["llvm"])
    bf16 = dtypes.to_numpy("bfloat16")
    for _ in range(3):
        a = RNG.standard_normal((M, K)).astype(bf16)
        b = RNG.standard_normal((N, K), dtype=np.float32)
        want_d, want_s = prenorm_reference(a, b)
        for t, k in ks.items():
            d, s = k(a, b)
            close(d, want_d, K)
            close(s, want_s, K)


@pytest.mark.parametrize("K", [129, 700])
def test_colliding_slots_repack_without_touching_a_live_tile(K, monkeypatch):
    """Every tile position mapped to one slot: each copy misses and re-packs; the pipeline's two
    stage tiles are live together (one shared cache would let a stage's miss overwrite the
    panels the other's gemm is about to read)."""
    import backends.llvm.pack_cache as pc
    monkeypatch.setattr(pc, "slot_of", lambda g, st, starts, extent: pc.ir.Constant(pc.I64, 0))
    M, N = 70, 24
    k = tilelang_mini.compile(hc_prenorm.factory(M, N, K), out_idx=[-2, -1], target="llvm")
    assert cached_tiles(k)
    a = RNG.standard_normal((M, K)).astype(dtypes.to_numpy("bfloat16"))
    b = RNG.standard_normal((N, K), dtype=np.float32)
    d, s = k(a, b)
    want_d, want_s = prenorm_reference(a, b)
    close(d, want_d, K)
    close(s, want_s, K)


def test_skinny_gemm_b_cached_and_correct():
    """fp32 GEMM with a row-major B (K, N) of a narrow N: each row block reuses B's tiles."""
    M, N, K = 200, 24, 300
    k = tilelang_mini.compile(matmul.factory(M, N, K, dtype="float32"), out_idx=[-1],
                              target="llvm")
    assert cached_tiles(k)
    for _ in range(2):
        a = RNG.standard_normal((M, K), dtype=np.float32)
        b = RNG.standard_normal((K, N), dtype=np.float32)
        close(k(a, b), a.astype(np.float64) @ b.astype(np.float64), K)


def _rewrites_b(M, N, K, bk=32):
    """C = A @ B over K tiles, then B's first tile := 2 * B's first tile: B is written by the
    kernel, so its packed tile must be packed from memory each time (one block, two launches)."""
    f32 = "float32"  # (a name: pyflakes reads a string in an annotation as a forward reference)

    @T.prim_func
    def rewrites_b(A: T.Tensor((M, K), f32), B: T.Tensor((K, N), f32), C: T.Tensor((M, N), f32)):
        with T.Kernel(1) as bx:
            A_s = T.alloc_shared((M, bk), "float32")
            B_s = T.alloc_shared((bk, N), "float32")
            R = T.alloc_fragment((bk, N), "float32")
            C_f = T.alloc_fragment((M, N), "float32")
            T.clear(C_f)
            for kk in T.serial(K // bk):
                T.copy(A[0, kk * bk], A_s)
                T.copy(B[kk * bk, 0], B_s)
                T.gemm(A_s, B_s, C_f)
            T.copy(B[bx * bk, 0], R)
            for i, j in T.Parallel(bk, N):
                R[i, j] = R[i, j] * 2.0
            T.copy(R, B[bx * bk, 0])
            T.copy(C_f, C)
    return rewrites_b


def test_tile_of_a_written_input_is_not_cached():
    M, N, K = 32, 32, 64
    k = tilelang_mini.compile(_rewrites_b(M, N, K), target="llvm")
    assert not cached_tiles(k)
    a = RNG.standard_normal((M, K), dtype=np.float32)
    b = RNG.standard_normal((K, N), dtype=np.float32)
    for _ in range(2):
        c = np.empty((M, N), np.float32)
        want = a.astype(np.float64) @ b.astype(np.float64)
        b2 = b.copy()
        k(a, b2, c)
        close(c, want, K)
        b2_want = b.copy()
        b2_want[:32] *= 2
        np.testing.assert_array_equal(b2, b2_want)
        b = b2


@pytest.mark.parametrize("threads", ["1", "2"])
def test_gemm_both_stage_tiles_cached_at_their_positions(threads, monkeypatch):
    """A square fp32 GEMM (M, N, K not multiples of the tiles): both pipeline stage tiles of B
    are cached (one slot per tile position of B), and every row block reads the right panels,
    across launches with new inputs."""
    monkeypatch.setenv("TILELANG_MINI_NUM_THREADS", threads)
    M, N, K = 300, 260, 200
    k = tilelang_mini.compile(matmul.factory(M, N, K, dtype="float32"), out_idx=[-1],
                              target="llvm")
    assert len(cached_tiles(k)) == 2
    for _ in range(2):
        a = RNG.standard_normal((M, K), dtype=np.float32)
        b = RNG.standard_normal((K, N), dtype=np.float32)
        close(k(a, b), a.astype(np.float64) @ b.astype(np.float64), K)


def test_resumed_chunk_keeps_the_workers_packed_tiles():
    """A worker's later chunk of one launch (block_begin | RESUME) reuses the tiles its earlier
    chunk packed; a chunk without the flag starts a new launch and packs again. B changes between
    the two chunks, so only the flag decides which B the second chunk's blocks read."""
    import ctypes

    from backends.llvm.pack_cache import RESUME
    from backends.llvm.runtime import _arena
    M, N, K = 256, 128, 192          # one column of B panels, shared by the two row blocks
    k = tilelang_mini.compile(matmul.factory(M, N, K, block_M=128, block_N=128, block_K=64,
                                             dtype="float32"), target="llvm")
    art = k.artifact
    assert cached_tiles(k) and not art.cores
    a = RNG.standard_normal((M, K), dtype=np.float32)
    b = RNG.standard_normal((K, N), dtype=np.float32)
    b2 = RNG.standard_normal((K, N), dtype=np.float32)
    whole = np.empty((M, N), np.float32)
    k(a, b, whole)
    close(whole, a.astype(np.float64) @ b.astype(np.float64), K)
    _, scratch = _arena(art.scratch_bytes)
    for flag, b_second in ((RESUME, b), (0, b2)):
        c = np.zeros((M, N), np.float32)
        bb = b.copy()
        ptrs = (ctypes.c_void_p * 3)(a.ctypes.data, bb.ctypes.data, c.ctypes.data)
        assert art.cfunc(ptrs, 0, 1, scratch) == 0
        bb[...] = b2            # the first chunk's panels now hold a stale B
        assert art.cfunc(ptrs, 1 | flag, 2, scratch) == 0
        np.testing.assert_array_equal(c[:128], whole[:128])
        want = a[128:].astype(np.float64) @ b_second.astype(np.float64)
        close(c[128:], want, K)
        if flag:  # bit-identical to the blocks of the one-call launch
            np.testing.assert_array_equal(c, whole)
