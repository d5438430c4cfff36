"""Trace-time Python in kernels (metaprogramming as in TileLang) and the runtime surface:
jit memoisation, compile options and their environment defaults, get_ir, ir_graph."""
# No `from __future__ import annotations`: kernels need their T.Tensor annotations as objects.
import numpy as np
import pytest

import tilelang_mini
import tilelang_mini.language as T
from tilelang_mini import CompileError
from tilelang_mini.ir.nodes import For, If

import kernels

SCALE = 3.0  # a module constant used inside kernels
RNG = np.random.default_rng(0)


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def run(prim, target, *args, out_idx=(-1,)):
    return tilelang_mini.compile(prim, out_idx=list(out_idx), target=target)(*args)


def half(n):  # a trace-time helper called from a kernel
    return n // 2


# ------------------------------------------------------------------------------ trace-time Python


def test_closures_constants_arithmetic(target):
    M, N = 20, 12
    blk = 4 * 2  # trace-time arithmetic
    offset = 0.5

    @T.macro
    def body(X, x, y, bx):  # in the row-block frame of tests/kernels.py
        for i, j in T.Parallel(blk, N):
            y[i, j] = x[i, j] * SCALE + offset - (N % 5) + half(N) / 3

    k = kernels.row_blocks(M, N, blk, body)
    x = rand(M, N)
    np.testing.assert_allclose(run(k, target, x), x * 3.0 + 0.5 - 2 + 2.0, rtol=1e-6, atol=1e-6)
    assert "6 / 3" not in k.script()  # folded at trace time


def vector_kernel(N, body):
    """Y = X through one (N,) float32 fragment that the macro `body(t, N)` updates in place:
    the frame of the loop tests below."""
    @T.prim_func
    def k(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1) as bx:
            t = T.alloc_fragment((N,), "float32")
            T.copy(X, t)
            body(t, N)
            T.copy(t, Y)
    return k


@T.macro
def list_loops(t, N):
    for idx, w in [(0, 1.0), (3, 2.0), (5, -1.0)]:
        t[idx] = t[idx] * w
    for off in [1, 2]:
        t[off] = t[off] + off


def test_python_list_loops_unroll(target):
    k = vector_kernel(8, list_loops)
    x = rand(8)
    want = x.copy()
    want[[0, 3, 5]] *= [1.0, 2.0, -1.0]
    want[[1, 2]] += [1, 2]
    np.testing.assert_allclose(run(k, target, x), want, rtol=1e-6)
    assert not any(isinstance(s, For) for s in k.ir.body)  # unrolled, no loop in the IR


@T.macro
def scale_rows(buf, factor, rows, cols):
    for i, j in T.Parallel(rows, cols):
        buf[i, j] = buf[i, j] * factor


def test_macro_inlines(target):
    M, N = 4, 6

    @T.prim_func
    def k(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(1) as bx:
            t = T.alloc_fragment((M, N), "float32")
            T.copy(X, t)
            scale_rows(t, 2.0, M, N)
            scale_rows(t, factor=0.25, rows=M, cols=N)
            T.copy(t, Y)

    x = rand(M, N)
    np.testing.assert_allclose(run(k, target, x), x * 0.5, rtol=1e-6)
    with pytest.raises(RuntimeError):
        scale_rows(None, 1.0, 1, 1)  # outside a kernel


@T.macro
def stepped_ranges(t, N):
    for i in range(2, N, 3):
        t[i] = t[i] * 10.0
    for i in range(4):
        t[i] = t[i] + 1.0


def test_range_with_start_and_step(target):
    N = 17
    k = vector_kernel(N, stepped_ranges)
    x = rand(N)
    want = x.copy()
    want[2:N:3] *= 10
    want[:4] += 1
    np.testing.assert_allclose(run(k, target, x), want, rtol=1e-6)


@pytest.mark.parametrize("relu", [False, True])
def test_if_at_trace_time(target, relu):
    N = 16

    @T.prim_func
    def k(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1) as bx:
            t = T.alloc_fragment((N,), "float32")
            T.copy(X, t)
            if relu:
                for i in T.Parallel(N):
                    t[i] = T.max(t[i], 0.0)
            else:
                for i in T.Parallel(N):
                    t[i] = -t[i]
            T.copy(t, Y)

    x = rand(N)
    np.testing.assert_allclose(run(k, target, x), np.maximum(x, 0) if relu else -x)
    assert not any(isinstance(s, If) for s in k.ir.body)  # chosen while tracing


def test_if_on_kernel_values(target):
    M, N = 4, 8

    @T.prim_func
    def k(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(M) as bx:
            row = T.alloc_fragment((N,), "float32")
            T.copy(X[bx, 0], row)
            if bx == 0:
                for j in T.Parallel(N):
                    row[j] = row[j] + 100.0
            elif bx % 2 == 1:
                for j in T.Parallel(N):
                    row[j] = row[j] * 2.0
            else:
                T.fill(row, -1.0)
            for j in T.serial(N):
                if j >= N - 2:
                    row[j] = 0.0
            T.copy(row, Y[bx, 0])

    x = rand(M, N)
    want = x.copy()
    want[0] += 100
    want[1::2] *= 2
    want[2] = -1
    want[:, N - 2:] = 0
    np.testing.assert_allclose(run(k, target, x), want, rtol=1e-6)


def test_alloc_var_accumulates(target):
    N = 10

    @T.prim_func
    def k(X: T.Tensor((N,), "float32"), Y: T.Tensor((1,), "float32")):
        with T.Kernel(1) as bx:
            acc = T.alloc_var("float32")
            acc = 0.0
            for i in T.serial(N):
                acc += X[i] * X[i]
            Y[0] = acc

    x = rand(N)
    np.testing.assert_allclose(run(k, target, x), [np.sum(x.astype(np.float64) ** 2)], rtol=1e-5)


def test_slices_and_start_corner_regions(target):
    M, N, blk = 10, 6, 4

    @T.prim_func
    def k(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32"),
          Z: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, blk)) as bx:
            a = T.alloc_shared((blk, N), "float32")
            b = T.alloc_shared((blk, N), "float32")
            T.copy(X[bx * blk:(bx + 1) * blk, :], a)      # slices (clipped at the edge)
            T.copy(X[bx * blk, 0], b)                      # start corner: extent from b
            T.copy(a, Y[bx * blk, 0])
            T.fill(b[0:blk, 0:2], 7.0)                     # a sliced region of a tile
            T.copy(b, Z[bx * blk:bx * blk + blk, 0:N])

    x = rand(M, N)
    y, z = run(k, target, x, out_idx=(-2, -1))
    np.testing.assert_array_equal(y, x)
    want = x.copy()
    want[:, 0:2] = 7.0
    np.testing.assert_array_equal(z, want)


def test_row_region_into_1d_tile(target):
    M, N = 3, 5

    @T.prim_func
    def k(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M,), "float32")):
        with T.Kernel(M) as bx:
            row = T.alloc_fragment((N,), "float32")
            s = T.alloc_fragment((1,), "float32")
            T.copy(X[bx, 0], row)                          # a 1 x N box into an (N,) tile
            T.reduce_sum(row, s, dim=0)
            T.copy(s, Y[bx])

    x = rand(M, N)
    np.testing.assert_allclose(run(k, target, x), x.sum(axis=1), rtol=1e-5)


# --------------------------------------------------------------------------------- runtime surface


def _copy_factory(N, dtype="float32"):
    @T.prim_func
    def copy_kernel(X: T.Tensor((N,), dtype), Y: T.Tensor((N,), dtype)):
        with T.Kernel(1) as bx:
            t = T.alloc_shared((N,), dtype)
            T.copy(X, t)
            T.copy(t, Y)
    return copy_kernel


def test_jit_memoises():
    f = tilelang_mini.jit(out_idx=[-1])(_copy_factory)
    assert f(8) is f(8)
    assert f(8, dtype="float16") is f(8, dtype="float16")
    assert f(8, dtype="float16") is not f(8)
    assert f(9) is not f(8)
    x = rand(8)
    np.testing.assert_array_equal(f(8)(x), x)


def test_compile_prim_func_recompiles(target):
    f = tilelang_mini.jit(out_idx=[-1])(_copy_factory)
    k = f(8)
    k2 = tilelang_mini.compile(k.prim_func, out_idx=[-1], target=target, chip="ascend950")
    assert k2 is not k
    assert (k2.target, k2.chip) == (target, "ascend950")
    x = rand(8)
    np.testing.assert_array_equal(k2(x), x)


def test_environment_defaults(monkeypatch):
    prim = _copy_factory(4)
    monkeypatch.delenv("TILELANG_MINI_TARGET", raising=False)
    monkeypatch.delenv("TILELANG_MINI_CHIP", raising=False)
    k = tilelang_mini.compile(prim)
    assert (k.target, k.chip) == ("numpy", "ascend910b")
    monkeypatch.setenv("TILELANG_MINI_CHIP", "ascend950")
    monkeypatch.setenv("TILELANG_MINI_TARGET", "numpy")
    k = tilelang_mini.compile(prim)
    assert (k.target, k.chip) == ("numpy", "ascend950")
    f = tilelang_mini.jit(out_idx=[-1])(_copy_factory)
    assert f(4).chip == "ascend950"
    monkeypatch.setenv("TILELANG_MINI_CHIP", "ascend910b")
    assert f(4).chip == "ascend910b"  # the memo key includes the chip
    monkeypatch.setenv("TILELANG_MINI_TARGET", "no_such_target")
    with pytest.raises(CompileError, match="unknown target 'no_such_target'"):
        tilelang_mini.compile(prim)
    monkeypatch.setenv("TILELANG_MINI_TARGET", "numpy")
    monkeypatch.setenv("TILELANG_MINI_CHIP", "no_such_chip")
    with pytest.raises(CompileError, match="unknown chip 'no_such_chip'"):
        tilelang_mini.compile(prim)


def test_get_ir_every_stage():
    from tilelang_mini.runtime.kernel import STAGES
    k = tilelang_mini.compile(_copy_factory(8), out_idx=[-1])
    assert list(k.compilation.stages) == list(STAGES)[:len(k.compilation.stages)]
    for stage in k.compilation.stages:
        text = k.get_ir(stage)
        assert text.startswith("@prim_func"), stage
        assert "def copy_kernel(" in text
        assert tilelang_mini.parse_ir(text) == k.compilation.stages[stage], stage
    assert "copy(X, t)" in k.get_ir("frontend")
    with pytest.raises(ValueError, match="unknown stage"):
        k.get_ir("no_such_pass")


def test_ir_graph_dependencies():
    N = 8

    @T.prim_func
    def k(X: T.Tensor((N,), "float32"), W: T.Tensor((N,), "float32"),
          Y: T.Tensor((N,), "float32")):
        with T.Kernel(1) as bx:
            t = T.alloc_shared((N,), "float32")
            T.copy(X, t)      # 0 writes t
            T.copy(t, Y)      # 1 reads t: RAW after 0
            T.copy(W, t)      # 2 writes t: WAR after 1, WAW after 0

    g = tilelang_mini.compile(k, out_idx=[-1]).ir_graph("frontend")
    edges = {(a, b): (d["kind"], d["buffer"]) for a, b, d in g.edges(data=True)}
    assert edges[(0, 1)] == ("RAW", "t")
    assert edges[(1, 2)][0] == "WAR" and edges[(1, 2)][1] == "t"
    assert edges[(0, 2)] == ("WAW", "t")
    assert g.nodes[0]["op"].startswith("copy(X")
    assert ":" in g.nodes[0]["loc"]
