"""tilelang-ascend's T.tile vector operations in kernels written from scratch (issue #10):
compare/select/cast/broadcast/max on whole tiles and row slices, topk/sort/gather_mask/gather,
transpose, on every target and on the simulator of both chips, against float64 NumPy
references; and the located errors of their misuse."""
import numpy as np
import pytest

import tilelang_mini as tilelang
import tilelang_mini.language as T

from util import f64, rand, run_all


# 1. T.tile: compare / select / max / min / cast / broadcast on whole tiles and row slices ----

def masked_clip(M, N, bm=16):
    @T.prim_func
    def main(X: T.Tensor((M, N), T.float16), Th: T.Tensor((N,), T.float32),
             Y: T.Tensor((M, N), T.bfloat16)):
        with T.Kernel(M // bm, is_npu=True) as (cid, vid):
            xh = T.alloc_ub((bm, N), "float16")
            x = T.alloc_ub((bm, N), "float32")
            th = T.alloc_ub((N,), "float32")
            thb = T.alloc_ub((bm, N), "float32")
            e = T.alloc_ub((bm, N), "float32")
            mask = T.alloc_ub((bm, N), "bool")
            y = T.alloc_ub((bm, N), "float32")
            yb = T.alloc_ub((bm, N), "bfloat16")
            T.copy(X[cid * bm, 0], xh)
            T.copy(Th[0], th)
            T.tile.cast(x, xh, "CAST_NONE", bm * N)
            T.tile.broadcast(thb, th)
            T.tile.compare(mask, x, thb, "GT")         # x > th (per column)
            T.tile.min(e, x, 0.0)
            T.tile.exp(e, e)
            T.tile.sub(e, e, 1.0)                      # elu on the other side
            T.tile.select(y, mask, x, e, "VSEL_TENSOR_TENSOR_MODE")
            for r in T.serial(bm):
                T.tile.max(y[r, :], y[r, :], -0.5)
                T.tile.muls(y[r, :], y[r, :], 1.5)
            T.tile.cast(yb, y, "CAST_RINT", bm * N)
            T.copy(yb, Y[cid * bm, 0])
    return main


def test_masked_clip_tile_ops(target):
    M, N = 32, 64
    x, th = rand((M, N), "float16", 21), rand((N,), seed=22, scale=0.5)
    xd = f64(x)
    want = 1.5 * np.maximum(np.where(xd > f64(th), xd, np.exp(np.minimum(xd, 0)) - 1), -0.5)
    run_all(target, masked_clip(M, N), [-1], (x, th), [want], ["bfloat16"])


# 2. T.tile.topk + gather_mask + cast: top-k values and indices of each row, one row a core -

def row_topk(B, N, k):
    @T.prim_func
    def main(X: T.Tensor((B, N), T.float32), Vals: T.Tensor((B, k), T.float32),
             Idx: T.Tensor((B, k), T.int32)):
        with T.Kernel(B // 2, is_npu=True) as (cid, vid):
            row = cid * 2 + vid
            x = T.alloc_ub((N,), "float32")
            pairs = T.alloc_ub((2 * k,), "float32")
            v = T.alloc_ub((k,), "float32")
            fi = T.alloc_ub((k,), "float32")
            ii = T.alloc_ub((k,), "int32")
            T.copy(X[row, 0], x)
            T.tile.topk(pairs, x, k, N)
            T.tile.gather_mask(v, pairs, "P0101")
            T.tile.gather_mask(fi, pairs, "P1010")
            T.tile.cast(ii, fi, "CAST_ROUND", k)
            T.copy(v, Vals[row, 0])
            T.copy(ii, Idx[row, 0])
    return main


def test_row_topk(target):
    B, N, k = 4, 64, 8
    rng = np.random.default_rng(23)
    x = np.stack([rng.permutation(N) for _ in range(B)]).astype(np.float32) * 0.25 - 3
    idx = np.argsort(-f64(x), axis=1, kind="stable")[:, :k]
    run_all(target, row_topk(B, N, k), [1, 2], (x,),
            [np.take_along_axis(f64(x), idx, 1), idx.astype(np.float64)], ["float32", "int32"])


# 3. T.tile.sort of a row, then T.tile.gather of a table by the sorted indices (byte offsets)

def sort_then_gather(N):
    @T.prim_func
    def main(X: T.Tensor((N,), T.float32), Tab: T.Tensor((N,), T.float32),
             Y: T.Tensor((N,), T.float32)):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_ub((N,), "float32")
            tab = T.alloc_ub((N,), "float32")
            pairs = T.alloc_ub((2 * N,), "float32")
            fi = T.alloc_ub((N,), "float32")
            off = T.alloc_ub((N,), "int32")
            y = T.alloc_ub((N,), "float32")
            T.copy(X[0], x)
            T.copy(Tab[0], tab)
            T.tile.sort(pairs, x, N)
            T.tile.gather_mask(fi, pairs, "P1010")
            T.tile.muls(fi, fi, 4.0)                   # element index -> byte offset
            T.tile.cast(off, fi, "CAST_RINT", N)
            T.tile.gather(y, tab, off, 0)
            T.copy(y, Y[0])
    return main


def test_sort_then_gather(target):
    N = 64
    rng = np.random.default_rng(24)
    x = rng.permutation(N).astype(np.float32)
    tab = rand((N,), seed=25)
    want = f64(tab)[np.argsort(-f64(x), kind="stable")]
    run_all(target, sort_then_gather(N), [-1], (x, tab), [want], ["float32"])


# regressions: T.tile.cast's count, row_expand's row operand ------------------------------

def partial_cast(M, N, count):
    @T.prim_func
    def main(X: T.Tensor((M, N), T.float32), Y: T.Tensor((M, N), T.float16)):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_ub((M, N), "float32")
            y = T.alloc_ub((M, N), "float16")
            T.copy(X[0, 0], x)
            T.tile.fill(y, -7.0)
            T.tile.cast(y, x, "CAST_RINT", count)   # the first `count` elements only
            T.copy(y, Y[0, 0])
    return main


def test_cast_count_below_tile_size(target):
    """Same-size tiles used to be converted whole whatever the count."""
    M, N, count = 8, 32, 100
    x = rand((M, N), seed=40)
    want = np.full(M * N, -7.0)
    want[:count] = f64(x).ravel()[:count]
    run_all(target, partial_cast(M, N, count), [-1], (x,), [want.reshape(M, N)], ["float16"])


def test_cast_count_above_tile_size_is_located():
    with pytest.raises(tilelang.CompileError, match=r"T.tile.cast of 512 elements: dst holds 256"):
        tilelang.compile(partial_cast(8, 32, 512), out_idx=[-1])


def test_row_expand_short_row_operand_is_located():
    """Was a bounds error naming a hidden loop variable ("index t_2 in dim 0 of 'r'")."""
    def build():
        @T.prim_func
        def main(X: T.Tensor((16, 32), T.float32), Y: T.Tensor((16, 32), T.float32)):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                x = T.alloc_ub((16, 32), "float32")
                r = T.alloc_ub((8,), "float32")
                T.copy(X[0, 0], x)
                T.reduce_max(x[0:8, :], r, dim=-1)
                T.tile.row_expand_sub(x, x, r)
                T.copy(x, Y[0, 0])
        return tilelang.compile(main, out_idx=[-1])

    with pytest.raises(tilelang.CompileError, match=r"row operand of row_expand has 8 values.*"
                                                    r"16 rows") as err:
        build()
    assert "test_user_kernels_asc_tile.py:" in str(err.value).splitlines()[0]


def test_tile_transpose_keeps_dtype_is_located():
    def build():
        @T.prim_func
        def main(X: T.Tensor((16, 32), T.float32), Y: T.Tensor((32, 16), T.float16)):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                x = T.alloc_ub((16, 32), "float32")
                y = T.alloc_ub((32, 16), "float16")
                T.copy(X[0, 0], x)
                T.tile.transpose(y, x)
                T.copy(y, Y[0, 0])
        return main

    with pytest.raises(tilelang.CompileError, match=r"T.tile.transpose keeps the dtype"):
        build()


# 4. T.tile ops called with tilelang-ascend's keyword names; T.tile.cast's float -> float modes;
#    T.tile.pow ------------------------------------------------------------------------------

def keyword_ops(M, N):
    @T.prim_func
    def main(X: T.Tensor((M, N), T.float32), Y: T.Tensor((M, N), T.float32),
             H: T.Tensor((M, N), T.float16)):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_ub((M, N), "float32")
            y = T.alloc_ub((M, N), "float32")
            w = T.alloc_ub((M, N), "float32")
            h = T.alloc_ub((M, N), "float16")
            m = T.alloc_ub((M, N), "bool")
            r = T.alloc_ub((M,), "float32")
            T.copy(X[0, 0], x)
            T.tile.fill(buffer=y, value=0.5)
            T.tile.leaky_relu(w, x, scalar_value=0.1)
            T.tile.add(dst=y, src0=y, src1=w)                     # 0.5 + leaky(x)
            T.tile.compare(m, x, 0.2, mode="GT")
            T.tile.select(w, selMask=m, src0=x, src1=-1.0, selMode="VSEL_TENSOR_SCALAR_MODE")
            T.tile.add(y, y, w)
            T.reduce_max(x, r, dim=-1)
            T.tile.broadcast(w, r, axis=1)
            T.tile.sub(y, y, w)                                   # - row max
            T.tile.muls(w, x, 4.0)
            T.tile.cast(w, w, mode="CAST_RINT", count=M * N)      # float -> float: integral
            T.tile.add(y, y, w)
            T.tile.abs(w, x)
            T.tile.pow(w, w, 1.5)
            T.tile.add(y, y, w)
            T.tile.muls(w, x, 100.0)
            T.tile.cast(h, w, "CAST_FLOOR", M * N)                # float -> half: precision only
            T.copy(y, Y[0, 0])
            T.copy(h, H[0, 0])
    return main


def test_keyword_arguments_and_cast_modes(target):
    """Keywords were "takes 3 arguments, got 0" or an internal IndexError; float32 -> float32
    CAST_RINT was not rounded; float32 -> float16 CAST_FLOOR gave integers; T.tile.pow was
    "not supported"."""
    M, N = 16, 32
    x = rand((M, N), seed=65)
    xd = f64(x)
    want = (0.5 + np.where(xd > 0, xd, 0.1 * xd) + np.where(xd > 0.2, xd, -1.0)
            - xd.max(1, keepdims=True) + np.rint(4 * xd) + np.abs(xd) ** 1.5)
    run_all(target, keyword_ops(M, N), [1, 2], (x,), [want, 100 * xd], ["float32", "float16"])


def test_unknown_keyword_is_located():
    def build():
        @T.prim_func
        def main(X: T.Tensor((16, 32), T.float32), Y: T.Tensor((16, 32), T.float32)):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                x = T.alloc_ub((16, 32), "float32")
                T.copy(X[0, 0], x)
                T.tile.leaky_relu(x, x, alpha=0.1)
                T.copy(x, Y[0, 0])
        return main

    with pytest.raises(tilelang.CompileError, match=r"T.tile.leaky_relu has no argument 'alpha'; "
                                                    r"its arguments are dst, src0, scalar_value"):
        build()


# 5. developer mode: T.tile row ops in a serial loop on a gemm accumulator fragment ---------

def accumulator_rows(M, N, K):
    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
             Bias: T.Tensor((N,), T.float32), C: T.Tensor((M, N), T.float16)):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_shared((M, K), "float16")
            b = T.alloc_shared((K, N), "float16")
            bias = T.alloc_shared((N,), "float32")
            acc = T.alloc_fragment((M, N), "float32")
            o = T.alloc_fragment((M, N), "float16")
            T.copy(A[0, 0], a)
            T.copy(B[0, 0], b)
            T.copy(Bias[0], bias)
            T.gemm_v0(a, b, acc, init=True)
            for i in T.serial(M):
                T.tile.add(acc[i, :], acc[i, :], bias)
            T.tile.relu(acc, acc)
            T.copy(acc, o)
            T.copy(o, C[0, 0])
    return main


def test_row_ops_on_an_accumulator_in_a_loop(target):
    """Was "'acc' is needed in UB but its value is in nowhere (never written)": the loop's
    entry had the value in L0C, a trip left it in UB, and infer_scopes found it in neither."""
    M, N, K = 32, 32, 32
    a, b, bias = rand((M, K), "float16", 68), rand((K, N), "float16", 69), rand((N,), seed=70)
    run_all(target, accumulator_rows(M, N, K), [-1], (a, b, bias),
            [np.maximum(f64(a) @ f64(b) + f64(bias), 0)], ["float16"], K)


@pytest.mark.parametrize("call, message", [
    ("T.tile.fill(x)", r"T.tile.fill\(buffer, value\) takes 2 arguments, got 1"),
    ("T.tile.leaky_relu(x, x)", r"leaky_relu\(dst, src0, scalar_value\) takes 3 arguments"),
    ("T.tile.broadcast(x)", r"broadcast\(dst, src, \[axis\]\) takes 2 to 3 arguments, got 1"),
    ("T.tile.add(x, x, x, x)", r"T.tile.add\(dst, src0, src1\) takes 3 arguments, got 4"),
])
def test_tile_argument_counts_are_located(tmp_path, call, message):
    """Too few arguments were an internal IndexError; too many were ignored."""
    src = tmp_path / "kernel_args.py"
    src.write_text(f"""import tilelang_mini.language as T


@T.prim_func
def main(X: T.Tensor((16, 32), T.float32), Y: T.Tensor((16, 32), T.float32)):
    with T.Kernel(1, is_npu=True) as (cid, vid):
        x = T.alloc_ub((16, 32), "float32")
        T.copy(X[0, 0], x)
        {call}
        T.copy(x, Y[0, 0])
""")
    import importlib.util
    spec = importlib.util.spec_from_file_location("kernel_args", src)
    with pytest.raises(tilelang.CompileError, match=message) as err:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
    assert "kernel_args.py:9:9" in str(err.value).splitlines()[0]
