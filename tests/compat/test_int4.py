"""T.int4 tensors and tiles (TileLang's gemm_int4 example): stored two values a byte along the
last dim, indexed with their own shape; an int4 gemm on the 910b cube (the 950's has no int4:
a located error), elementwise reads and serial writes of nibbles; on every target and
simulated, against NumPy references."""
import numpy as np
import pytest

import tilelang_mini as tilelang
import tilelang_mini.language as T
from tilelang_mini import CompileError


def matmul_nt_int4(M, N, K, block_M, block_N, block_K, threads=128):
    @T.prim_func
    def main(
        A: T.Tensor((M, K), T.int4),
        B: T.Tensor((N, K), T.int4),
        C: T.Tensor((M, N), T.int32),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), T.int4)
            B_shared = T.alloc_shared((block_N, block_K), T.int4)
            C_local = T.alloc_fragment((block_M, block_N), T.int32)

            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                T.copy(B[bx * block_N, ko * block_K], B_shared)
                T.gemm(A_shared, B_shared, C_local, transpose_B=True)

            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


def pack_int4(t):
    """int4 values t [R, C] (in [-8, 8)) packed two a byte along C, the even column low."""
    t = np.asarray(t).astype(np.int16)
    return ((t[..., ::2] & 15) | ((t[..., 1::2] & 15) << 4)).astype(np.uint8).view(np.int8)


def test_int4_gemm(target):
    M, N, K = 64, 32, 256
    rng = np.random.default_rng(0)
    a, b = rng.integers(-8, 8, (M, K)), rng.integers(-8, 8, (N, K))
    kernel = tilelang.compile(matmul_nt_int4(M, N, K, 32, 32, 64), out_idx=-1, target=target)
    want = a.astype(np.float64) @ b.astype(np.float64).T
    pa, pb = pack_int4(a), pack_int4(b)
    assert np.array_equal(kernel(pa, pb), want)
    if target == "numpy":
        assert np.array_equal(kernel.simulate(pa, pb)[0], want)


def test_int4_elements(target):
    """Nibbles read in T.Parallel (sign-extended), written one by one in a T.serial loop."""
    @T.prim_func
    def main(X: T.Tensor((8, 32), T.int4), Y: T.Tensor((8, 32), T.int32),
             Z: T.Tensor((8, 32), T.int4)):
        with T.Kernel(1) as _:
            x = T.alloc_fragment((8, 32), T.int4)
            y = T.alloc_fragment((8, 32), T.int32)
            T.copy(X, x)
            for i, k in T.Parallel(8, 32):
                y[i, k] = x[i, k] * 3 + k
            for i in T.serial(8):
                for k in T.serial(32):
                    x[i, k] = -1 - x[i, 31 - k] if k < 16 else x[i, k]
            T.copy(y, Y)
            T.copy(x, Z)

    kernel = tilelang.compile(main, out_idx=[1, 2], target=target)
    x = np.random.default_rng(1).integers(-8, 8, (8, 32))
    z = x.copy()
    for k in range(16):
        z[:, k] = -1 - x[:, 31 - k]
    want_y = x * 3 + np.arange(32)[None]
    outs = [kernel(pack_int4(x))] + ([kernel.simulate(pack_int4(x))[0]]
                                      if target == "numpy" else [])
    for y, zz in outs:
        assert np.array_equal(y, want_y)
        assert np.array_equal(zz, pack_int4(z))


def test_int4_errors():
    with pytest.raises(CompileError) as err:
        tilelang.compile(matmul_nt_int4(64, 32, 128, 32, 32, 64), out_idx=-1, chip="ascend950")
    msg = str(err.value)
    assert "has no int4" in msg and "int8 tiles" in msg and "test_int4.py" in msg, msg

    def build(body):
        @T.prim_func
        def main(X: T.Tensor((8, 32), T.int4), Y: T.Tensor((8, 32), T.int8)):
            with T.Kernel(1) as _:
                body(X, Y)
        return main

    def odd(X, Y):
        t = T.alloc_fragment((8, 31), T.int4)
        T.clear(t)

    def parallel_store(X, Y):
        t = T.alloc_fragment((8, 32), T.int4)
        for i, k in T.Parallel(8, 32):
            t[i, k] = 1

    def byte_copy(X, Y):
        t = T.alloc_fragment((8, 32), T.int4)
        T.copy(X, t)
        T.copy(t, Y)

    def odd_region(X, Y):
        t = T.alloc_fragment((8, 16), T.int4)
        T.copy(X[0, 3], t)

    def gemm_nn(X, Y):
        a = T.alloc_shared((16, 32), T.int4)
        b = T.alloc_shared((32, 16), T.int4)
        c = T.alloc_fragment((16, 16), T.int32)
        T.gemm(a, b, c)

    for body, words in ((odd, "must be even"), (parallel_store, "half a byte"),
                        (byte_copy, "packed bytes, not values"),
                        (odd_region, "covers whole bytes"),
                        (gemm_nn, "transpose_B=True")):
        with pytest.raises(CompileError) as err:
            tilelang.compile(build(body), target="numpy")
        msg = str(err.value)
        assert words in msg and "test_int4.py" in msg, (body.__name__, msg)


def test_int4_tile_viewed_as_bytes(target):
    """T.view(x, shape, "int8") of an int4 tile views its packed bytes (was an error naming the
    frontend's Int4Buffer): bytes read in T.Parallel, one byte per row rewritten serially
    through the view (two nibbles at once), the tile then copied out as int4."""
    R, C = 13, 40  # a row tail (13 of 16) and a column tail (8 of 32 nibbles)

    @T.prim_func
    def main(X: T.Tensor((R, C), T.int4), V: T.Tensor((R, C // 2), T.int32),
             Z: T.Tensor((R, C), T.int4)):
        with T.Kernel(T.ceildiv(R, 8)) as bx:
            x = T.alloc_fragment((8, 32), T.int4)
            v = T.alloc_fragment((8, 16), T.int32)
            for c in T.serial(T.ceildiv(C, 32)):
                T.copy(X[bx * 8, c * 32], x)
                xb = T.view(x, (8, 16), "int8")
                for i, j in T.Parallel(8, 16):
                    v[i, j] = T.cast(xb[i, j], "int32") + j
                for i in T.serial(8):
                    xb[i, 1] = 0x7E - i
                T.copy(v, V[bx * 8, c * 16])
                T.copy(x, Z[bx * 8, c * 32])

    kernel = tilelang.compile(main, out_idx=[1, 2], target=target)
    x = np.random.default_rng(2).integers(-8, 8, (R, C))
    want_v = pack_int4(x).astype(np.int64) + np.arange(C // 2)[None] % 16
    z = x.copy()
    for c in range(0, C, 32):  # byte 1 of each block row: nibbles 2 (low) and 3 (high)
        for r in range(R):
            b = 0x7E - r % 8
            z[r, c + 2], z[r, c + 3] = ((b & 15) ^ 8) - 8, ((b >> 4) ^ 8) - 8
    outs = [kernel(pack_int4(x))] + ([kernel.simulate(pack_int4(x))[0]]
                                      if target == "numpy" else [])
    for v, zz in outs:
        assert np.array_equal(v, want_v)
        assert np.array_equal(zz, pack_int4(z))


def test_int4_view_without_byte_dtype_is_located():
    with pytest.raises(CompileError) as err:
        @T.prim_func
        def main(X: T.Tensor((8, 32), T.int4), Y: T.Tensor((8, 32), T.int32)):
            with T.Kernel(1) as _:
                x = T.alloc_fragment((8, 32), T.int4)
                T.copy(X, x)
                xr = T.view(x, (16, 16))
                for i, j in T.Parallel(8, 32):
                    Y[i, j] = xr[i, j // 2]

        tilelang.compile(main, target="numpy")
    msg = str(err.value)
    assert "views its bytes" in msg and 'T.view(x, [8, 16], "int8")' in msg, msg
    assert "test_int4.py" in msg and "Int4Buffer" not in msg, msg


def test_int4_argument_errors_name_the_packed_form():
    """An int4 argument passed unpacked, or as packed bytes of another dtype, is an
    ArgumentError that gives the logical shape and the packed int8 form the kernel takes."""
    kernel = tilelang.compile(matmul_nt_int4(16, 16, 64, 16, 16, 64), out_idx=-1, target="numpy")
    rng = np.random.default_rng(3)
    a, b = rng.integers(-8, 8, (16, 64)), rng.integers(-8, 8, (16, 64))
    assert np.array_equal(kernel(pack_int4(a), pack_int4(b)), a @ b.T)
    for bad in (a.astype(np.int8), pack_int4(a).view(np.uint8), pack_int4(a).astype(np.int32)):
        with pytest.raises(tilelang.ArgumentError) as err:
            kernel(bad, pack_int4(b))
        msg = str(err.value)
        assert "T.int4 tensor of shape (16, 64)" in msg and "int8 array of shape (16, 32)" in msg
        assert f"got {bad.dtype} of shape {bad.shape}" in msg and "int4x2" not in msg, msg


@pytest.mark.parametrize("kind, dim", [("sum", 1), ("max", 0), ("min", 1), ("abssum", 0),
                                       ("absmax", 1)])
def test_int4_reduce_reads_values(target, kind, dim):
    """T.reduce_* of a whole int4 tile reduces its values (it summed the packed bytes)."""
    R, C = 12, 40

    @T.prim_func
    def main(X: T.Tensor((R, C), T.int4), Y: T.Tensor((C if dim == 0 else R,), T.int32)):
        with T.Kernel(1) as _:
            x = T.alloc_fragment((16, C), T.int4)
            y = T.alloc_fragment((C if dim == 0 else 16,), T.int32)
            T.clear(x)  # rows 12..15 stay 0: part of the reduction along dim 0
            T.copy(X, x[0:R, :])
            if kind == "sum":
                T.reduce_sum(x, y, dim=dim)
            elif kind == "max":
                T.reduce_max(x, y, dim=dim)
            elif kind == "min":
                T.reduce_min(x, y, dim=dim)
            elif kind == "abssum":
                T.reduce_abssum(x, y, dim=dim)
            else:
                T.reduce_absmax(x, y, dim=dim)
            T.copy(y[0:C if dim == 0 else R], Y)

    x = np.random.default_rng(4).integers(-8, 8, (R, C))
    full = np.zeros((16, C), np.int64)
    full[:R] = x
    v = np.abs(full) if kind.startswith("abs") else full
    want = (v.sum(dim) if kind.endswith("sum") else v.max(dim) if kind.endswith("max")
            else v.min(dim))
    want = want[:R] if dim == 1 else want
    kernel = tilelang.compile(main, out_idx=-1, target=target)
    outs = [kernel(pack_int4(x))] + ([kernel.simulate(pack_int4(x))[0]]
                                     if target == "numpy" else [])
    for got in outs:
        assert np.array_equal(got, want), (kind, dim)


def test_int4_tile_ops_on_bytes_are_located():
    """Tile ops that would compute on the packed bytes (T.tile.*, T.cumsum, T.reduce_* of a
    region) are located errors (they ran on the bytes, or named the frontend's Int4Buffer)."""
    def build(body):
        @T.prim_func
        def main(X: T.Tensor((8, 32), T.int4), Y: T.Tensor((8, 32), T.int4)):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                x = T.alloc_ub((8, 32), T.int4)
                y = T.alloc_ub((8, 32), T.int4)
                r = T.alloc_ub((8,), T.int32)
                T.copy(X, x)
                body(x, y, r)
                T.copy(y, Y)
        return main

    def tile_abs(x, y, r):
        T.tile.abs(y, x)

    def tile_add(x, y, r):
        T.tile.add(y, x, x)

    def tile_muls(x, y, r):
        T.tile.muls(y, x, 2)

    def cumsum(x, y, r):
        T.cumsum(x, y, dim=1)

    def reduce_region(x, y, r):
        T.reduce_max(x[0:8, 0:16], r, dim=1)

    def reduce_into_int4(x, y, r):
        T.reduce_sum(x, y[0, 0:8], dim=1)

    def reduce_into_whole_int4(x, y, r):
        T.reduce_sum(r, y, dim=0)

    for op, body in (("T.tile.abs", tile_abs), ("T.tile.add", tile_add),
                     ("T.tile.muls", tile_muls), ("T.cumsum", cumsum),
                     ("T.reduce_max", reduce_region), ("T.reduce_sum", reduce_into_int4),
                     ("T.reduce_sum", reduce_into_whole_int4)):
        with pytest.raises(CompileError) as err:
            tilelang.compile(build(body), target="numpy")
        msg = str(err.value)
        assert f"{op} on int4 buffer" in msg and "packed bytes" in msg, msg
        assert "test_int4.py" in msg and "Int4Buffer" not in msg, msg
