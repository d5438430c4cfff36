"""T.atomic_add / T.atomic_max (TileLang) and T.tile.atomic_add (tilelang-ascend) in the upstream
spelling: split-K GEMMs whose blocks add into one C, and in-kernel reductions over blocks, on
every target and simulated, against float64 NumPy references."""
import numpy as np
import pytest

import tilelang_mini as tilelang
import tilelang_mini.language as T
from tilelang_mini import CompileError
from tilelang_mini.ir.parser import parse_ir
from tilelang_mini.ir.printer import print_ir

from util import close, f64, rand
from kernels import gemm_tiles, load_for

M, N, K = 64, 64, 256


def splitk(form, block_M=32, block_N=32, block_K=32, split_k=4, out_dtype="float32"):
    """TileLang's gemm_splitk: `form` "element" (T.atomic_add per element inside T.Parallel)
    or "tile" (T.atomic_add of the whole fragment)."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
             C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), split_k,
                      threads=128) as (bx, by, bz):
            splitK = K // split_k
            A_shared = T.alloc_shared((block_M, block_K), T.float16)
            B_shared = T.alloc_shared((block_K, block_N), T.float16)
            C_local = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(splitK, block_K), num_stages=2):
                T.copy(A[by * block_M, bz * splitK + ko * block_K], A_shared)
                T.copy(B[bz * splitK + ko * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            if form == "element":
                for i, j in T.Parallel(block_M, block_N):
                    T.atomic_add(C[by * block_M + i, bx * block_N + j], C_local[i, j])
            else:
                T.atomic_add(C[by * block_M, bx * block_N], C_local)
    return main


def ascend_splitk(block_M=32, block_N=32, block_K=32, split_k=4):
    """tilelang-ascend's gemm_splitk: is_npu blocks, gemm_v0(init=k == 0), T.tile.atomic_add."""
    n_num, m_num = T.ceildiv(N, block_N), T.ceildiv(M, block_M)
    splitK = K // split_k
    m_split_blocks = m_num * split_k

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
             C: T.Tensor((M, N), "float")):
        with T.Kernel(n_num * m_split_blocks, is_npu=True) as (cid, _):
            bx = cid // m_split_blocks
            rem = cid % m_split_blocks
            by = rem // split_k
            bz = rem % split_k
            A_L1 = T.alloc_shared((block_M, block_K), "float16")
            B_L1 = T.alloc_shared((block_K, block_N), "float16")
            C_L0 = T.alloc_fragment((block_M, block_N), "float")
            k_start = bz * splitK
            for k in T.serial(T.ceildiv(splitK, block_K)):
                T.copy(A[by * block_M, k_start + k * block_K], A_L1)
                T.copy(B[k_start + k * block_K, bx * block_N], B_L1)
                T.gemm_v0(A_L1, B_L1, C_L0, init=(k == 0))
            T.tile.atomic_add(C[by * block_M, bx * block_N], C_L0)
    return main


def run_everywhere(kernel, target, args, out, want, dtype, reduce_len=1):
    """Run on `target` (the GM output starts as `out`), and simulated on the numpy target."""
    got = out.copy()
    kernel(*args, got)
    close(got, want, dtype, reduce_len)
    stage = kernel.compilation.stages["frontend"]
    assert parse_ir(print_ir(stage)) == stage
    assert parse_ir(print_ir(kernel.ir)) == kernel.ir
    if target == "numpy":
        sim = out.copy()
        kernel.simulate(*args, sim)
        close(sim, want, dtype, reduce_len)


@pytest.mark.parametrize("form", ["element", "tile", "ascend"])
def test_splitk_gemm(target, form):
    fn = ascend_splitk() if form == "ascend" else splitk(form)
    kernel = tilelang.compile(fn, target=target)
    lowered = print_ir(kernel.ir)
    assert "atomic_add=True" in lowered
    a, b = rand((M, K), "float16", 1), rand((K, N), "float16", 2)
    c0 = rand((M, N), "float32", 3)  # C is added to, not overwritten
    want = f64(c0) + f64(a) @ f64(b)
    run_everywhere(kernel, target, (a, b), c0, want, "float32", K)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_column_sums_over_blocks(target, dtype):
    """Each block reduces its rows; the blocks' partial column sums and totals meet in GM:
    element atomics of a computed value (a temporary tile) and a scalar atomic."""
    rows, cols, BM = 128, 48, 16

    @T.prim_func
    def main(X: T.Tensor((rows, cols), "float32"), Y: T.Tensor((cols,), dtype),
             Z: T.Tensor((1,), "float32")):
        with T.Kernel(rows // BM) as bx:
            x = T.alloc_fragment((BM, cols), "float32")
            s = T.alloc_fragment((cols,), "float32")
            tot = T.alloc_fragment((1,), "float32")
            T.copy(X[bx * BM, 0], x)
            T.reduce_sum(x, s, dim=0)
            for j in T.Parallel(cols):
                T.atomic_add(Y[j], s[j] * 0.5, memory_order="relaxed")
            T.reduce_sum(s, tot, dim=0)
            T.atomic_add(Z[0], tot[0])

    kernel = tilelang.compile(main, target=target)
    x = rand((rows, cols), "float32", 4)
    y0 = rand((cols,), dtype, 5)
    want_y = f64(y0) + 0.5 * f64(x).sum(0)
    want_z = 1.5 + f64(x).sum()
    y, z = y0.copy(), np.full((1,), 1.5, np.float32)
    kernel(x, y, z)
    close(y, want_y, dtype, rows)
    close(z, want_z.reshape(1), "float32", rows * cols)
    if target == "numpy":
        y, z = y0.copy(), np.full((1,), 1.5, np.float32)
        kernel.simulate(x, y, z)
        close(y, want_y, dtype, rows)
        close(z, want_z.reshape(1), "float32", rows * cols)


def test_atomic_max_min(target):
    rows, cols, BM = 64, 32, 16

    @T.prim_func
    def main(X: T.Tensor((rows, cols), "float32"), Hi: T.Tensor((cols,), "float32"),
             Lo: T.Tensor((cols,), "float32")):
        with T.Kernel(rows // BM) as bx:
            x = T.alloc_fragment((BM, cols), "float32")
            m = T.alloc_fragment((cols,), "float32")
            T.copy(X[bx * BM, 0], x)
            T.reduce_max(x, m, dim=0)
            for j in T.Parallel(cols):
                T.atomic_max(Hi[j], m[j])
            T.reduce_min(x, m, dim=0)
            T.atomic_min(Lo[0:cols], m)

    kernel = tilelang.compile(main, target=target)
    x = rand((rows, cols), "float32", 6)
    hi, lo = np.full((cols,), -np.inf, np.float32), np.full((cols,), np.inf, np.float32)
    kernel(x, hi, lo)
    close(hi, f64(x).max(0))
    close(lo, f64(x).min(0))


def test_atomic_into_an_on_chip_tile(target):
    """On a tile one core owns, an atomic update is a plain read-modify-write (TileLang's gemv
    adds into shared memory this way)."""
    n = 32

    @T.prim_func
    def main(X: T.Tensor((4, n), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(1) as bx:
            acc = T.alloc_fragment((n,), "float32")
            row = T.alloc_fragment((n,), "float32")
            T.clear(acc)
            for r in T.serial(4):
                T.copy(X[r, 0:n], row)
                for j in T.Parallel(n):
                    T.atomic_add(acc[j], row[j])
            T.atomic_add(acc[0], 100.0)
            T.copy(acc, Y)

    kernel = tilelang.compile(main, out_idx=[-1], target=target)
    x = rand((4, n), "float32", 7)
    want = f64(x).sum(0)
    want[0] += 100.0
    close(kernel(x), want)


def test_atomic_errors():
    def build(body):
        @T.prim_func
        def main(X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32")):
            with T.Kernel(2) as bx:
                x = T.alloc_fragment((32,), "float32")
                T.copy(X[bx * 32], x)
                body(x, Y)
        return main

    def prev(x, Y):
        for i in T.Parallel(32):
            T.atomic_add(Y[i], x[i], return_prev=True)

    def many_to_one(x, Y):
        for i in T.Parallel(32):
            T.atomic_add(Y[0], x[i])

    def as_value(x, Y):
        for i in T.Parallel(32):
            x[i] = T.atomic_add(Y[i], 1.0)

    for body, words in ((prev, "return_prev"), (many_to_one, "T.reduce_"),
                        (as_value, "is a statement")):
        with pytest.raises(CompileError) as err:
            build(body)
        assert words in str(err.value), str(err.value)
        assert "test_atomic.py" in str(err.value) and "^" in str(err.value)


def test_developer_vid_halves(target):
    """tilelang-ascend developer mode with vid spelled out: each vector core adds its own half
    of the rows (both halves' atomics count), while the block's GEMM accumulator is added once
    (not once per half)."""
    n = 32

    @T.prim_func
    def main(A: T.Tensor((2 * n, n), "float16"), B: T.Tensor((n, n), "float16"),
             X: T.Tensor((4 * n, n), "float32"), C: T.Tensor((n, n), "float32"),
             S: T.Tensor((n,), "float32")):
        with T.Kernel(2, is_npu=True) as (cid, vid):
            a, b, c = gemm_tiles(n, n, n)
            x = T.alloc_ub((n, n), "float32")
            s = T.alloc_ub((n,), "float32")
            T.copy(A[cid * n, 0], a)
            T.copy(B, b)
            T.gemm_v0(a, b, c, init=True)
            T.tile.atomic_add(C[0, 0], c)
            T.copy(X[(cid * 2 + vid) * n, 0], x)
            T.reduce_sum(x, s, dim=0)
            T.atomic_add(S[0:n], s)

    kernel = tilelang.compile(main, target=target)
    a, b, x = rand((2 * n, n), "float16", 1), rand((n, n), "float16", 2), rand((4 * n, n), seed=3)
    want_c = f64(a[:n]) @ f64(b) + f64(a[n:]) @ f64(b)
    want_s = f64(x).sum(0)
    c, s = np.zeros((n, n), np.float32), np.zeros((n,), np.float32)
    kernel(a, b, x, c, s)
    close(c, want_c, reduce_len=2 * n)
    close(s, want_s, reduce_len=4 * n)
    if target == "numpy":
        c, s = np.zeros((n, n), np.float32), np.zeros((n,), np.float32)
        kernel.simulate(a, b, x, c, s)
        close(c, want_c, reduce_len=2 * n)
        close(s, want_s, reduce_len=4 * n)


def test_atomic_in_a_pipelined_range(target):
    """The flash-attention backward shape: block `b` loops `k in T.Pipelined(b, nb)` and adds
    a tile into row block k of dQ element by element (T.Pipelined(start, stop) form)."""
    nb, bm, d = 4, 16, 32

    @T.prim_func
    def main(X: T.Tensor((nb, bm, d), "float32"), dQ: T.Tensor((nb * bm, d), "float32")):
        with T.Kernel(nb) as b:
            x = T.alloc_fragment((bm, d), "float32")
            for k in T.Pipelined(b, nb, num_stages=2):
                T.copy(X[b, 0, 0], x)
                for i, j in T.Parallel(bm, d):
                    T.atomic_add(dQ[k * bm + i, j], x[i, j] * (k + 1))

    kernel = tilelang.compile(main, target=target)
    x = rand((nb, bm, d), seed=8)
    want = np.zeros((nb * bm, d))
    for b in range(nb):
        for k in range(b, nb):
            want[k * bm:(k + 1) * bm] += f64(x[b]) * (k + 1)
    got = np.zeros((nb * bm, d), np.float32)
    kernel(x, got)
    close(got, want, reduce_len=nb)
    if target == "numpy":
        got = np.zeros((nb * bm, d), np.float32)
        kernel.simulate(x, got)
        close(got, want, reduce_len=nb)


def test_expert_both_vector_cores_add_to_one_tile(target):
    """Expert mode: each AIV reduces its own rows and both atomically add into the same GM
    elements with no flag between them: check_sync (which walks the two AIVs separately) and
    the simulator accept it (atomic adds commute); a plain copy there would be a race."""
    n = 32

    @T.prim_func
    def main(X: T.Tensor((4 * n, n), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(2, is_npu=True) as (cid, vid):
            x = T.alloc_ub((n, n), "float32")
            s = T.alloc_ub((n,), "float32")
            with T.Scope("V"):
                load_for("V", X[(cid * 2 + vid) * n, 0], x)
                T.reduce_sum(x, s, dim=0)
                T.set_flag("V", "MTE3", 0)
                T.wait_flag("V", "MTE3", 0)
                T.atomic_add(Y[0:n], s)

    kernel = tilelang.compile(main, target=target)
    x = rand((4 * n, n), seed=12)
    y = np.zeros((n,), np.float32)
    kernel(x, y)
    close(y, f64(x).sum(0), reduce_len=4 * n)
    if target == "numpy":
        y = np.zeros((n,), np.float32)
        kernel.simulate(x, y)
        close(y, f64(x).sum(0), reduce_len=4 * n)


def test_tail_guarded_element_form_is_one_tile_copy(target):
    """`if by * bm + i < M: T.atomic_add(C[by * bm + i, bx * bn + j], acc[i, j])` (the tail
    guard a CUDA split-K GEMM writes when M is not a multiple of the block) is the tile's
    atomic copy, clipped at C's edge (before: an element-wise scatter, 1024 one-element
    atomic copies per block)."""
    Mt, bm = 50, 32

    @T.prim_func
    def main(A: T.Tensor((Mt, K), T.float16), B: T.Tensor((K, N), T.float16),
             C: T.Tensor((Mt, N), T.float32)):
        with T.Kernel(T.ceildiv(N, bm), T.ceildiv(Mt, bm), 2, threads=128) as (bx, by, bz):
            a_s = T.alloc_shared((bm, K // 2), T.float16)
            b_s = T.alloc_shared((K // 2, bm), T.float16)
            acc = T.alloc_fragment((bm, bm), T.float32)
            T.copy(A[by * bm, bz * (K // 2)], a_s)
            T.copy(B[bz * (K // 2), bx * bm], b_s)
            T.gemm(a_s, b_s, acc, clear_accum=True)
            for i, j in T.Parallel(bm, bm):
                if by * bm + i < Mt and 0 <= bx * bm + j:
                    T.atomic_add(C[by * bm + i, bx * bm + j], acc[i, j])

    kernel = tilelang.compile(main, target=target)
    lowered = print_ir(kernel.compilation.stages["frontend"])
    assert "serial" not in lowered and lowered.count("atomic_add=True") == 1
    a, b = rand((Mt, K), "float16", 7), rand((K, N), "float16", 8)
    c0 = rand((Mt, N), "float32", 9)
    run_everywhere(kernel, target, (a, b), c0, f64(c0) + f64(a) @ f64(b), "float32", K)
