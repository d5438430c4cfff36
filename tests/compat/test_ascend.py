"""tilelang-ascend's dialect: T.tile vector operations (whole tiles and row slices), expert mode
with T.Scope, T.barrier_all, string pipes and T.gemm_v0(init=<run-time bool>), on every target,
simulated, against float64 NumPy references."""
import numpy as np
import pytest

import tilelang_mini as tilelang
import tilelang_mini.language as T
from tilelang_mini.ir.parser import parse_ir
from tilelang_mini.ir.printer import print_ir

from util import close, f64, rand

M, N, BM = 32, 64, 16


def vector_kernel(body, out_dtype="float32", extra=()):
    """X (M, N) -> Y (M, N): a developer-mode block of BM rows; `body(x, y, w, r, ...)`."""

    @tilelang.jit(out_idx=[-1])
    def factory():
        @T.prim_func
        def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), out_dtype)):
            with T.Kernel(M // BM) as bx:
                x = T.alloc_ub((BM, N), "float32")
                w = T.alloc_ub((BM, N), "float32")
                r = T.alloc_ub((BM,), "float32")
                y = T.alloc_ub((BM, N), out_dtype)
                T.copy(X[bx * BM, 0], x)
                body(x, y, w, r)
                T.copy(y, Y[bx * BM, 0])
        return main
    return factory()


def arith(x, y, w, r):
    T.tile.fill(w, 2.0)
    T.tile.mul(w, w, x)           # 2x
    T.tile.add(w, w, 1.0)         # 2x + 1
    T.tile.sub(y, w, x)           # x + 1
    T.tile.div(y, y, 4.0)
    T.tile.max(y, y, -0.1)
    T.tile.min(y, y, x)
    T.tile.axpy(y, x, 0.5)        # y += 0.5 x
    T.tile.mul_add_dst(y, x, x)   # y += x * x


def unary(x, y, w, r):
    T.tile.abs(w, x)
    T.tile.add(w, w, 0.5)
    T.tile.ln(y, w)
    T.tile.sqrt(w, w)
    T.tile.add(y, y, w)
    T.tile.rsqrt(w, w)
    T.tile.add(y, y, w)
    T.tile.exp(w, x)
    T.tile.reciprocal(w, w)
    T.tile.add(y, y, w)
    T.tile.relu(w, x)
    T.tile.add(y, y, w)
    T.tile.sigmoid(w, x)
    T.tile.add(y, y, w)
    T.tile.silu(w, x)
    T.tile.add(y, y, w)


def rows_and_broadcast(x, y, w, r):
    T.reduce_max(x, r, dim=1)
    T.tile.broadcast(w, r)                 # w[i, j] = rowmax[i]
    T.tile.sub(y, x, w)
    for h in T.serial(BM):
        T.tile.mul(y[h, :], y[h, :], 2.0)  # a row slice
    T.tile.createvecindex(r, 0)            # 0, 1, 2, ...
    T.tile.broadcast(w, r)
    T.tile.add(y, y, w)


def cast_rint(x, y, w, r):
    T.tile.mul(w, x, 3.0)
    T.tile.cast(y, w, "CAST_RINT", BM * N)


REFS = {
    arith: lambda x: np.minimum(np.maximum((x + 1) / 4, -0.1), x) + 0.5 * x + x * x,
    unary: lambda x: np.log(np.abs(x) + .5) + np.sqrt(np.abs(x) + .5) + (np.abs(x) + .5) ** -0.25
    + np.exp(-x) + np.maximum(x, 0) + 1 / (1 + np.exp(-x)) + x / (1 + np.exp(-x)),
    rows_and_broadcast: lambda x: 2 * (x - x.reshape(-1, BM, N).max(2, keepdims=True).repeat(N, 2)
                                       .reshape(M, N)) + np.tile(np.arange(BM), M // BM)[:, None],
    cast_rint: lambda x: np.rint((3 * x).astype(np.float32)),  # w holds float32 products
}


@pytest.mark.parametrize("body", list(REFS), ids=lambda f: f.__name__)
def test_tile_ops(target, body):
    out_dtype = "int32" if body is cast_rint else "float32"
    kernel = tilelang.compile(vector_kernel(body, out_dtype).prim_func, out_idx=[-1],
                              target=target)
    x = rand((M, N), seed=11)
    if body is cast_rint:
        x[0, :4] = np.array([0.5, 1.5, -0.5, -2.5], np.float32) / 3  # ties go to even
    want = REFS[body](f64(x))
    got = kernel(x)
    close(got, want, out_dtype if body is cast_rint else "float32")
    assert parse_ir(print_ir(kernel.compilation.stages["frontend"])) == \
        kernel.compilation.stages["frontend"]
    if target == "numpy":
        close(kernel.simulate(x)[0], want, out_dtype if body is cast_rint else "float32")


def test_compare_select(target):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(M // BM) as bx:
            x = T.alloc_ub((BM, N), "float32")
            m = T.alloc_ub((BM, N), "bool")
            y = T.alloc_ub((BM, N), "float32")
            T.copy(X[bx * BM, 0], x)
            T.tile.compare(m, x, 0.0, "GT")
            T.tile.select(y, m, x, 0.25, "VSEL_TENSOR_SCALAR_MODE")
            T.copy(y, Y[bx * BM, 0])

    x = rand((M, N), seed=12)
    close(tilelang.compile(main, out_idx=[-1], target=target)(x), np.where(f64(x) > 0, x, 0.25))


@tilelang.jit(out_idx=[-1])
def expert_gemm(M, N, K, block_M, block_N, K_L1, dtype="float16", accum_dtype="float"):
    n_num = N // block_N

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), T.float32)):
        with T.Kernel((M // block_M) * n_num, is_npu=True) as (cid, _):
            bx = cid // n_num
            by = cid % n_num
            A_L1 = T.alloc_L1((block_M, K_L1), dtype)
            B_L1 = T.alloc_L1((K_L1, block_N), dtype)
            C_L0 = T.alloc_L0C((block_M, block_N), accum_dtype)
            with T.Scope("C"):
                for k in T.serial(T.ceildiv(K, K_L1)):
                    T.copy(A[bx * block_M, k * K_L1], A_L1)
                    T.copy(B[k * K_L1, by * block_N], B_L1)
                    T.barrier_all()
                    T.gemm_v0(A_L1, B_L1, C_L0, init=(k == 0))
                    T.barrier_all()
                T.copy(C_L0, C[bx * block_M, by * block_N])
    return main


def test_expert_gemm_v0_barrier_all(target):
    kernel = expert_gemm(64, 64, 96, 32, 32, 32)
    kernel = tilelang.compile(kernel.prim_func, out_idx=[-1], target=target)
    a, b = rand((64, 96), "float16", 13), rand((96, 64), "float16", 14)
    want = f64(a) @ f64(b)
    close(kernel(a, b), want, reduce_len=96)
    out, report = kernel.simulate(a, b)
    close(out, want, reduce_len=96)


def test_expert_vector_scope_barrier_all(target):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(M // BM, is_npu=True) as (cid, vid):
            x = T.alloc_ub((BM // 2, N), "float32")
            y = T.alloc_ub((BM // 2, N), "float32")
            with T.Scope("V"):
                T.copy(X[cid * BM + vid * (BM // 2), 0], x)
                T.barrier_all()
                T.tile.exp(y, x)
                T.pipe_barrier("V")
                T.tile.add(y, y, x)
                T.barrier_all()
                T.copy(y, Y[cid * BM + vid * (BM // 2), 0])

    x = rand((M, N), seed=15)
    kernel = tilelang.compile(main, out_idx=[-1], target=target)
    want = np.exp(f64(x)) + f64(x)
    close(kernel(x), want)
    close(kernel.simulate(x)[0], want)


def cast_or_copy(dst, src, mode, count, need_cast):
    """A helper in the upstream style: returns the T.tile op it issues."""
    if need_cast:
        return T.tile.cast(dst, src, mode, count)
    return T.copy(src, dst)


def test_runtime_flag_ids_slices_swizzle_helpers(target):
    n_blocks = M // BM
    rows = T.max(BM // 2, 1)  # T.max on Python numbers (factory code)

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float16")):
        with T.Kernel(n_blocks // 2, is_npu=True) as (cid, vid):
            x = T.alloc_ub((rows, N), "float32")
            y = T.alloc_ub((rows, N), "float16")
            with T.Scope("V"):
                for i in T.serial(2):
                    blk = T.use_swizzle(cid * 2 + i, M, N, off=3)  # a tile-id remap
                    r0 = blk // 1 * BM + vid * rows
                    T.copy(X[r0:r0 + rows, :], x)
                    T.set_flag("MTE2", "V", i % 2)
                    T.wait_flag("MTE2", "V", i % 2)
                    T.tile.mul(x, x, 2.0)
                    T.pipe_barrier("V")
                    cast_or_copy(y, x, "CAST_NONE", rows * N, True)
                    T.set_flag("V", "MTE3", 0)
                    T.wait_flag("V", "MTE3", 0)
                    T.copy(y, Y[r0:r0 + rows, :])
                    T.set_flag("MTE3", "MTE2", 0)
                    T.wait_flag("MTE3", "MTE2", 0)

    x = rand((M, N), seed=16)
    kernel = tilelang.compile(main, out_idx=[-1], target=target)
    want = 2 * f64(x)
    close(kernel(x), want, "float16")
    close(kernel.simulate(x)[0], want, "float16")


@tilelang.jit(out_idx=[-1])
def dev_gemm_bias_silu(M, N, K, block_M=32, block_N=32, block_K=32, dtype="float16"):
    """tilelang-ascend developer mode: one launch of blocks, the vector half spelled with vid."""
    n_num = N // block_N
    half = block_M // 2

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype),
             D: T.Tensor((M, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel((M // block_M) * n_num, is_npu=True) as (cid, vid):
            bx = cid // n_num
            by = cid % n_num
            a_l1 = T.alloc_L1((block_M, block_K), dtype)
            b_l1 = T.alloc_L1((block_K, block_N), dtype)
            acc = T.alloc_L0C((block_M, block_N), "float32")
            c_ub = T.alloc_ub((half, block_N), "float32")
            d_ub = T.alloc_ub((half, block_N), "float32")
            for k in T.serial(T.ceildiv(K, block_K)):
                T.copy(A[bx * block_M, k * block_K], a_l1)
                T.copy(B[k * block_K, by * block_N], b_l1)
                T.gemm_v0(a_l1, b_l1, acc, init=(k == 0))
            T.copy(acc[vid * half:vid * half + half, :], c_ub)
            T.copy(D[bx * block_M + vid * half, by * block_N], d_ub)
            T.tile.add(c_ub, c_ub, d_ub)
            T.tile.silu(c_ub, c_ub)
            T.copy(c_ub, C[bx * block_M + vid * half, by * block_N])
    return main


def test_developer_mode_with_vid(target):
    Mx, Nx, Kx = 64, 64, 96
    kernel = tilelang.compile(dev_gemm_bias_silu(Mx, Nx, Kx).prim_func, out_idx=[-1],
                              target=target)
    a, b = rand((Mx, Kx), "float16", 17), rand((Kx, Nx), "float16", 18)
    d = rand((Mx, Nx), seed=19)
    z = f64(a) @ f64(b) + f64(d)
    want = z / (1 + np.exp(-z))
    close(kernel(a, b, d), want, reduce_len=Kx)
    if target == "numpy":
        close(kernel.simulate(a, b, d)[0], want, reduce_len=Kx)


def row_expand_rows(M, N, bm):
    """softmax-like rows with T.tile.row_expand_sub / row_expand_mul on (bm, N) UB tiles."""
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, bm), is_npu=True) as (cid, vid):
            x = T.alloc_ub((bm, N), "float32")
            r = T.alloc_ub((bm,), "float32")
            T.copy(X[cid * bm, 0], x)
            T.reduce_max(x, r, dim=-1)
            T.tile.row_expand_sub(x, x, r)
            T.tile.exp(x, x)
            T.reduce_sum(x, r, dim=-1)
            T.tile.reciprocal(r, r)
            T.tile.row_expand_mul(x, x, r)
            T.copy(x, Y[cid * bm, 0])
    return main


@pytest.mark.parametrize("M, N, bm", [(7, 5, 1), (5, 1, 2), (20, 8, 4)])
def test_row_expand_on_one_row_or_one_column_tiles(target, M, N, bm):
    """A (1, N) or (bm, 1) tile is 2-D: row_expand used to drop its extent-1 dimension and
    reject it ("row_expand operations take 2-D tiles")."""
    x = rand((M, N), seed=21)
    e = np.exp(f64(x) - f64(x).max(1, keepdims=True))
    want = e / e.sum(1, keepdims=True)
    prim = row_expand_rows(M, N, bm)
    close(tilelang.compile(prim, out_idx=[-1], target=target)(x), want)
    for chip in ("ascend910b", "ascend950"):
        close(tilelang.compile(prim, out_idx=[-1], chip=chip).simulate(x)[0], want)
