"""Kernels the lowering was not written against (issue 8): split_cores' row split substitutes the
row variable everywhere, tiles that are not row-split are loaded by both AIVs, scalars read
from GM are loaded by every core that uses them (the grouped GEMM idiom), if conditions that
read tiles, and Parallel maps that read what they wrote. Each runs on every target and is
simulated on both chips, against float64 NumPy."""
import numpy as np
import pytest

import tilelang_mini
import tilelang_mini.language as T

import kernels
from tilelang_mini import CompileError

CHIPS = ["ascend910b", "ascend950"]
RNG = np.random.default_rng(8)


def rand(shape, dtype="float32"):
    return RNG.standard_normal(shape).astype(dtype)


def run_everywhere(prim, args, ref, target, tol=1e-4):
    """The kernel on `target`, and simulated on both chips, agrees with the float64 reference."""
    out = tilelang_mini.compile(prim, out_idx=[-1], target=target)(*args)
    np.testing.assert_allclose(np.asarray(out, np.float64), ref, rtol=tol, atol=tol)
    for chip in CHIPS:
        kernel = tilelang_mini.compile(prim, out_idx=[-1], chip=chip)
        simulated, _ = kernel.simulate(*args)
        np.testing.assert_allclose(np.asarray(simulated, np.float64), ref, rtol=tol, atol=tol)


# ------------------------------------------------------------------------------ row split


def row_value(M, N, bm):
    """The row variable as a value and inside an index expression of a GM load."""
    @T.macro
    def body(X, x, y, bx):
        for i, j in T.Parallel(bm, N):
            y[i, j] = x[i, j] * (bx * bm + i) + i * 1.0 + X[bx * bm + i, j]

    return kernels.row_blocks(M, N, bm, body)


@pytest.mark.parametrize("M,bm", [(64, 16), (60, 15), (42, 14)])
def test_row_split_substitutes_the_row_everywhere(target, M, bm):
    N = 24
    x = rand((M, N))
    rows = np.arange(M)[:, None].astype(np.float64)
    local = (np.arange(M) % bm)[:, None].astype(np.float64)
    ref = x.astype(np.float64) * rows + local + x
    run_everywhere(row_value(M, N, bm), [x], ref, target)


def test_tiles_that_are_not_row_split_are_loaded_by_both_vector_cores(target):
    x, b, s = rand((64, 24)), rand((24,)), np.array([1.5], np.float32)
    run_everywhere(kernels.scale_bias(64, 24, 16), [x, b, s], x * 1.5 + b.astype(np.float64), target)


def block_scaled_gemm(M, N, K, bm=32, bn=32):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), Bm: T.Tensor((K, N), "float16"),
             Sc: T.Tensor((M // bm,), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(N // bn, M // bm) as (bx, by):
            A_s, B_s, C_f = kernels.gemm_tiles(bm, bn, K)
            s = T.alloc_fragment((1,), "float32")
            T.copy(A[by * bm, 0], A_s)
            T.copy(Bm[0, bx * bn], B_s)
            T.gemm(A_s, B_s, C_f, clear_accum=True)
            T.copy(Sc[by], s)
            for i, j in T.Parallel(bm, bn):
                C_f[i, j] = C_f[i, j] * s[0]
            T.copy(C_f, C[by * bm, bx * bn])
    return main


def test_block_scaled_gemm_with_a_scale_tile(target):
    a, b, s = rand((64, 64), "float16"), rand((64, 32), "float16"), rand((2,))
    ref = (a.astype(np.float64) @ b.astype(np.float64)) * np.repeat(s, 32)[:, None]
    run_everywhere(block_scaled_gemm(64, 32, 64), [a, b, s], ref, target, tol=1e-3)


# ------------------------------------------------------------------------- cross-core scalars


@pytest.mark.parametrize("epilogue", [False, True])
def test_grouped_gemm_every_core_loads_the_expert_index(target, epilogue):
    M, N, K, G = 64, 32, 64, 3
    a, b, w = rand((M, K), "float16"), rand((G, K, N), "float16"), rand((G,))
    mi = np.repeat(np.array([2, -1, 0, 1], np.int32), 16)
    ref = np.zeros((M, N))
    for r in range(M):
        if mi[r] >= 0:
            ref[r] = a[r].astype(np.float64) @ b[mi[r]].astype(np.float64)
            if epilogue:
                ref[r] *= w[mi[r]]
    run_everywhere(kernels.grouped_gemm(M, N, K, G, scaled=epilogue), [a, b, mi, w], ref, target,
                   tol=1e-3)


def test_a_cube_scalar_computed_from_vector_data_is_a_located_error():
    @T.prim_func
    def main(A: T.Tensor((16, 32), "float16"), B: T.Tensor((4, 32, 32), "float16"),
             X: T.Tensor((16,), "int32"), C: T.Tensor((16, 32), "float32")):
        with T.Kernel(1) as bx:
            A_s, B_s, C_f = kernels.gemm_tiles(16, 32, 32)
            x = T.alloc_fragment((16,), "int32")
            g = T.alloc_var("int32")
            T.copy(X, x)
            g = x[0]
            T.copy(A, A_s)
            T.copy(B[g, 0, 0], B_s)
            T.gemm(A_s, B_s, C_f, clear_accum=True)
            T.copy(C_f, C)
    with pytest.raises(CompileError) as err:
        tilelang_mini.compile(main, out_idx=[-1])
    text = str(err.value)
    assert "g = x[0]" in text and "cube" in text and "^" in text, text


# ------------------------------------------------------------------ conditions and map order


def argmax_mask(M, N, bm):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(M // bm) as bx:
            x = T.alloc_fragment((bm, N), "float32")
            mx = T.alloc_fragment((bm,), "float32")
            y = T.alloc_fragment((bm, N), "float32")
            T.copy(X[bx * bm, 0], x)
            T.reduce_max(x, mx, dim=1)
            for i in T.serial(bm):
                for j in T.serial(N):
                    if mx[i] == x[i, j]:
                        y[i, j] = 1.0
                    else:
                        y[i, j] = 0.0
            T.copy(y, Y[bx * bm, 0])
    return main


def test_if_condition_reading_tiles_in_serial_loops(target):
    x = rand((32, 16))
    ref = (x == x.max(1, keepdims=True)).astype(np.float64)
    run_everywhere(argmax_mask(32, 16, 16), [x], ref, target)


def map_reads_its_own_write(M, N):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((M, N), "float32")
            a = T.alloc_fragment((M, N), "float32")
            b = T.alloc_fragment((M, N), "float32")
            T.copy(X, x)
            for i, j in T.Parallel(M, N):
                a[i, j] = x[i, j] * 2.0
                b[i, j] = a[i, j] + 1.0
            T.copy(b, Y)
    return main


def test_parallel_map_reads_what_it_wrote_a_line_earlier(target):
    x = rand((32, 16))
    run_everywhere(map_reads_its_own_write(32, 16), [x], x.astype(np.float64) * 2 + 1, target)
