"""Both jit styles of TileLang: factories returning a T.prim_func and eager functions whose body
is the kernel (T.const symbols, T.empty outputs, f(a, b) and f.compile(M=...)), symbolic shapes
(T.dynamic / T.symbolic), TileLang's jit keywords and autotune decorator."""
import numpy as np
import pytest

import tilelang_mini
import tilelang_mini.language as T
from tilelang_mini import CompileError
from tilelang_mini.ir.parser import parse_ir
from tilelang_mini.ir.printer import print_ir

import kernels
from util import close, f64, rand


@tilelang_mini.jit
def eager_gemm(A, B, block_M=32, block_N=32, block_K=16, dtype=T.float16, accum_dtype=T.float32):
    M, N, K = T.const("M, N, K")
    A: T.Tensor((M, K), dtype)
    B: T.Tensor((K, N), dtype)
    C = T.empty((M, N), accum_dtype)
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
        a_s = T.alloc_shared((block_M, block_K), dtype)
        b_s = T.alloc_shared((block_K, block_N), dtype)
        c_f = T.alloc_fragment((block_M, block_N), accum_dtype)
        T.clear(c_f)
        for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
            T.copy(A[by * block_M, k * block_K], a_s)
            T.copy(B[k * block_K, bx * block_N], b_s)
            T.gemm(a_s, b_s, c_f)
        T.copy(c_f, C[by * block_M, bx * block_N])
    return C


@tilelang_mini.jit
def eager_rowstats(X, blk=8):
    M, N = T.const("M, N")
    X: T.Tensor((M, N), T.float32)
    S = T.empty((M,), T.float32)
    Amax = T.empty((M,), T.float32)
    with T.Kernel(T.ceildiv(M, blk)) as bx:
        x = T.alloc_fragment((blk, N), T.float32)
        s = T.alloc_fragment((blk,), T.float32)
        m = T.alloc_fragment((blk,), T.float32)
        T.copy(X[bx * blk, 0], x)
        T.reduce_sum(x, s, dim=1)
        T.reduce_absmax(x, m, dim=1)
        T.copy(s, S[bx * blk])
        T.copy(m, Amax[bx * blk])
    return S, Amax


def test_eager_call_binds_shapes_and_memoises(target, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    a, b = rand((64, 48), "float16", 1), rand((48, 32), "float16", 2)
    close(eager_gemm(a, b), f64(a) @ f64(b), reduce_len=48)
    n = len(eager_gemm._cache)
    close(eager_gemm(a, b), f64(a) @ f64(b), reduce_len=48)
    assert len(eager_gemm._cache) == n  # same signature: the compiled kernel is reused
    a2 = rand((32, 48), "float16", 3)
    close(eager_gemm(a2, b), f64(a2) @ f64(b), reduce_len=48)
    assert len(eager_gemm._cache) == n + 1


def test_eager_compile_ahead_and_several_outputs(target):
    k = eager_rowstats.compile(M=24, N=40)
    x = rand((24, 40), seed=4)
    s, m = k(x)
    close(s, f64(x).sum(1), reduce_len=40)
    close(m, np.abs(f64(x)).max(1))
    assert parse_ir(print_ir(k.ir)) == k.ir


def test_eager_shape_mismatch_is_located():
    @tilelang_mini.jit
    def bad(A, B):
        M, N = T.const("M, N")
        A: T.Tensor((M, N), T.float32)
        B: T.Tensor((N, M), T.float32)
        C = T.empty((M, N), T.float32)
        with T.Kernel(1) as bx:
            T.copy(A, C)
        return C

    with pytest.raises(CompileError) as info:
        bad(np.zeros((4, 8), np.float32), np.zeros((4, 8), np.float32))
    assert "annotated with shape (8, 4)" in str(info.value)


def symbolic_add(block_M=16, dtype="float32"):
    M = T.dynamic("M")
    N = 32

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), is_npu=False) as bx:
            t = T.alloc_fragment((block_M, N), dtype)
            T.copy(X[bx * block_M, 0], t)
            for i, j in T.Parallel(block_M, N):
                t[i, j] = t[i, j] + 1.0
            T.copy(t, Y[bx * block_M, 0])
    return main


def test_symbolic_shapes_specialise_per_call(target):
    kernel = tilelang_mini.jit(out_idx=[-1], target=target, pass_configs={
        tilelang_mini.PassConfigKey.TL_DISABLE_TMA_LOWER: True}, execution_backend="cython",
        verbose=False)(symbolic_add)()
    for m in (40, 16, 7):  # tails handled by the clipped copies
        x = rand((m, 32), seed=m)
        close(kernel(x), f64(x) + 1)
    assert len(kernel._cache) == 3


def test_symbolic_shape_of_zero_is_an_argument_error(target):
    """A symbol bound to 0 by an empty input is a located ArgumentError naming the argument
    and the symbol (as an empty array is for fixed shapes), not a CompileError about the
    kernel's tensor shapes."""
    kernel = tilelang_mini.jit(out_idx=[-1], target=target)(symbolic_add)()
    with pytest.raises(tilelang_mini.ArgumentError) as err:
        kernel(np.zeros((0, 32), np.float32))
    assert "argument 'X'" in str(err.value) and "symbol M would be 0" in str(err.value)
    assert err.value.loc.line
    close(kernel(rand((3, 32), seed=1)), f64(rand((3, 32), seed=1)) + 1)


def test_symbolic_kernel_takes_lists_and_array_objects(target):
    """A kernel with symbolic shapes binds its symbols from a nested list's or an `__array__`
    object's shape, as a fixed-shape kernel accepts them (bind rejected both as 'expected a
    2-D array')."""
    class Wrapped:
        def __init__(self, a):
            self.a = a

        def __array__(self, dtype=None, copy=None):
            return self.a

    kernel = tilelang_mini.jit(out_idx=[-1], target=target)(symbolic_add)()
    x = rand((7, 32), seed=3)
    close(kernel(x.tolist()), f64(x) + 1)
    close(kernel(Wrapped(x)), f64(x) + 1)
    with pytest.raises(tilelang_mini.ArgumentError):
        kernel([[1.0, 2.0], [3.0]])  # ragged


def test_autotune_decorator_form():
    @tilelang_mini.autotune(configs=[{"block_M": 8}, {"block_M": 16}], warmup=1, rep=2)
    @tilelang_mini.jit(out_idx=[-1])
    def add_one(M, N, block_M=32):
        return kernels.scale_rows(M, 1.0, cols=N, block=block_M, bias=1.0)

    kernel = add_one(64, 32)
    assert kernel.config["block_M"] in (8, 16, 32) and kernel.latency > 0
    tuned = kernel.get_tuner_result()  # TileLang's accessor of the same
    assert tuned["config"] == kernel.config and tuned["latency"] == kernel.latency
    x = rand((64, 32), seed=9)
    close(kernel(x), f64(x) + 1)


def test_autotune_eager_function(target, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)

    @tilelang_mini.autotune(configs=[{"blk": 8}, {"blk": 32}])
    @tilelang_mini.jit
    def row_max(X, blk=16):
        M, N = T.const("M, N")
        X: T.Tensor((M, N), T.float32)
        Y = T.empty((M,), T.float32)
        with T.Kernel(T.ceildiv(M, blk)) as bx:
            t = T.alloc_fragment((blk, N), T.float32)
            r = T.alloc_fragment((blk,), T.float32)
            T.copy(X[bx * blk, 0], t)
            T.reduce_max(t, r, dim=1)
            T.copy(r, Y[bx * blk])
        return Y

    x = rand((64, 40), seed=21)
    close(row_max(x), f64(x).max(1))
    k = row_max.compile(M=64, N=40)
    assert k.config.get("blk", 16) in (8, 16, 32)
    close(k(x), f64(x).max(1))


def test_autotune_stays_the_decorator_after_the_autotuner_import():
    import tilelang_mini.autotuner  # noqa: F401 (imports the submodule `autotune`)
    assert callable(tilelang_mini.autotune) and tilelang_mini.autotune is tilelang_mini.autotuner.autotune


def test_eager_call_with_wrong_keywords_is_a_located_argument_error():
    """An unknown keyword or a missing tensor in an eager call is an ArgumentError located at the
    function (it had no location)."""
    from tilelang_mini import ArgumentError
    for call in (lambda: eager_rowstats(rand((8, 8)), foo=1), lambda: eager_rowstats()):
        with pytest.raises(ArgumentError) as info:
            call()
        assert info.value.loc.file == __file__
        assert info.value.loc.line == eager_rowstats.fn.__code__.co_firstlineno


@tilelang_mini.jit
def eager_offsets(X, offsets, blocks=[8, 16]):
    """Y = X + sum_k offsets[k] * 10**k, tiled by `blocks`: a list of offsets (any length) and
    a list of block sizes, both trace-time constants."""
    M, N = T.const("M, N")
    X: T.Tensor((M, N), T.float32)
    Y = T.empty((M, N), T.float32)
    bm, bn = blocks
    with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
        x = T.alloc_fragment((bm, bn), T.float32)
        T.copy(X[by * bm, bx * bn], x)
        for k, off in enumerate(offsets):  # unrolled at trace time
            for i, j in T.Parallel(bm, bn):
                x[i, j] = x[i, j] + off * 10.0 ** k
        T.copy(x, Y[by * bm, bx * bn])
    return Y


def test_eager_list_arguments_are_constants_memoised_by_contents(target, monkeypatch):
    """Lists and tuples passed to an eager function are trace-time constants: one compiled
    kernel per distinct contents (a new list with the same values reuses it), any length."""
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    x = rand((32, 32), seed=5)
    eager_offsets._cache.clear()

    def want(offsets):
        return f64(x) + sum(o * 10.0 ** k for k, o in enumerate(offsets))

    close(eager_offsets(x, [1, 2]), want([1, 2]))
    assert len(eager_offsets._cache) == 1
    close(eager_offsets(x, [1, 2]), want([1, 2]))          # equal contents, a new list object
    close(eager_offsets(x, offsets=[1, 2], blocks=[8, 16]), want([1, 2]))  # spelled otherwise
    assert len(eager_offsets._cache) == 1
    close(eager_offsets(x, [3, 0, 1]), want([3, 0, 1]))
    close(eager_offsets(x, (1, 2), blocks=(16, 8)), want([1, 2]))
    close(eager_offsets(x, [0.5, 2]), want([0.5, 2]))     # 0.5 is not 1: its own kernel
    assert len(eager_offsets._cache) == 4
    grids = {tuple(k.frontend.grid) for k in eager_offsets._cache.values()}
    assert grids == {(32 // 16, 32 // 8), (32 // 8, 32 // 16)}  # (N / bn, M / bm) per blocks
    kern, args = eager_offsets.kernel_for(x, [3, 0, 1], blocks=(16, 8))
    close(kern.simulate(*args)[0], want([3, 0, 1]))


def test_eager_list_indexed_at_run_time_is_a_located_error():
    @tilelang_mini.jit
    def per_row(X, offsets):
        M, N = T.const("M, N")
        X: T.Tensor((M, N), T.float32)
        Y = T.empty((M, N), T.float32)
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((M, N), T.float32)
            T.copy(X, x)
            for i, j in T.Parallel(M, N):
                x[i, j] = x[i, j] + offsets[i]
            T.copy(x, Y)
        return Y

    with pytest.raises(CompileError) as info:
        per_row(np.zeros((4, 8), np.float32), [1, 2, 3, 4])
    err = info.value
    assert err.loc.file == __file__ and "offsets[i]" in str(err).split("\n")[1]
    assert "trace-time constant" in err.message and "tensor" in err.message


def test_factory_list_arguments_are_memoised_by_contents():
    calls = []

    @tilelang_mini.jit(out_idx=[-1])
    def scaled(scales, n=16):
        calls.append(list(scales))

        @T.prim_func
        def main(X: T.Tensor((n,), T.float32), Y: T.Tensor((n,), T.float32)):
            with T.Kernel(1) as bx:
                x = T.alloc_fragment((n,), T.float32)
                T.copy(X, x)
                for i in T.Parallel(n):
                    x[i] = x[i] * scales[0] + scales[1]
                T.copy(x, Y)
        return main

    x = rand((16,), seed=6)
    k1 = scaled([2, 1])
    assert scaled([2, 1]) is k1 and scaled(scales=[2, 1]) is k1
    k2 = scaled([2.5, 1])
    assert k2 is not k1
    close(k1(x), f64(x) * 2 + 1)
    close(k2(x), f64(x) * 2.5 + 1)


@tilelang_mini.jit
def eager_dynamic_rows(X, blk=8):
    """deepseek_v32's sparse MLA examples: several dynamic symbols from one T.dynamic call."""
    batch, rows = T.dynamic("batch, rows")
    X: T.Tensor((batch, rows, 16), T.float32)
    Y = T.empty((batch, rows, 16), T.float32)
    with T.Kernel(T.ceildiv(rows, blk), batch) as (bx, by):
        x = T.alloc_fragment((blk, 16), T.float32)
        T.copy(X[by, bx * blk:(bx + 1) * blk, :], x)
        for i, j in T.Parallel(blk, 16):
            x[i, j] = x[i, j] * 2.0 + 1.0
        T.copy(x, Y[by, bx * blk:(bx + 1) * blk, :])
    return Y


def test_dynamic_several_names(target, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    b, s = T.dynamic("b, s")
    assert (b.name, s.name) == ("b", "s") and T.symbolic("m").name == "m"
    for shape in ((2, 24, 16), (3, 16, 16)):
        x = rand(shape, seed=shape[0])
        close(eager_dynamic_rows(x), f64(x) * 2 + 1)
    if target == "numpy":
        kern, args = eager_dynamic_rows.kernel_for(x)
        close(kern.simulate(*args)[0], f64(x) * 2 + 1)
    assert tilelang_mini.next_power_of_2(5) == 8  # TileLang's top-level `from .math import *`


def test_autotuned_compile_with_every_tuned_argument_given_does_not_tune(target, monkeypatch):
    """`f.compile(M=..., block_M=..., ...)` naming every tuned argument compiles those values
    (the examples then size their host data by them), and a given value is never overridden
    by a configuration."""
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)

    @tilelang_mini.autotune(configs=[{"blk": 8, "scale": 1.0}, {"blk": 32, "scale": 3.0}])
    @tilelang_mini.jit
    def blocked_rows(X, blk, scale):
        M, N = T.const("M, N")
        X: T.Tensor((M, N), T.float32)
        Y = T.empty((M // blk, N), T.float32)
        with T.Kernel(M // blk) as bx:
            t = T.alloc_fragment((blk, N), T.float32)
            r = T.alloc_fragment((N,), T.float32)
            T.copy(X[bx * blk, 0], t)
            T.reduce_sum(t, r, dim=0)
            for j in T.Parallel(N):
                r[j] = r[j] * scale
            T.copy(r, Y[bx, 0])
        return Y

    x = rand((64, 8), seed=3)
    k = blocked_rows.compile(M=64, N=8, blk=16, scale=2.0)
    assert k.config == {"blk": 16, "scale": 2.0}
    close(k(x), 2.0 * f64(x).reshape(4, 16, 8).sum(1), reduce_len=16)
    k = blocked_rows.compile(M=64, N=8, scale=0.5)  # blk tuned, scale as given
    blk = k.config["blk"]
    close(k(x), 0.5 * f64(x).reshape(64 // blk, blk, 8).sum(1), reduce_len=blk)


def test_get_kernel_source_on_the_jit_object(target, monkeypatch):
    """`f.get_kernel_source(*call_args)` (deepseek_mhc's host code prints it before the call):
    the source of the kernel those arguments compile, the one a call then runs."""
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    x = rand((24, 40), seed=5)
    src = eager_rowstats.get_kernel_source(x)
    assert isinstance(src, str) and src == eager_rowstats.kernel_for(x)[0].get_kernel_source()
    assert eager_rowstats.get_kernel_source(M=24, N=40) == src  # symbols by name, no tensor
    s, _ = eager_rowstats(x)
    close(s, f64(x).sum(1), reduce_len=40)

    @tilelang_mini.jit(out_idx=[-1])
    def neg(n):
        @T.prim_func
        def main(A: T.Tensor((n,), T.float32), B: T.Tensor((n,), T.float32)):
            with T.Kernel(1):
                for i in T.Parallel(n):
                    B[i] = -A[i]
        return main
    assert neg.get_kernel_source(16) == neg(16).get_kernel_source()


def test_symbolic_kernel_takes_a_trailing_unit_dim(target):
    """lightning_indexer_dynamic_shape's host code passes (.., G, 1) for a (.., G) parameter
    with symbolic dims: the symbols bind from the shape without the unit dim and the array is
    read regrouped (runtime/arguments.py); other dimension counts stay ArgumentErrors."""
    kernel = tilelang_mini.jit(out_idx=[-1], target=target)(symbolic_add)()
    x = rand((24, 32), seed=4)
    close(kernel(x.reshape(24, 32, 1)), f64(x) + 1)
    with pytest.raises(tilelang_mini.ArgumentError, match="expected a 2-D array"):
        kernel(x.reshape(24, 2, 16))


def test_eager_compile_with_tensors_and_par_compile(target, monkeypatch):
    """TileLang's `f.compile(A, B, block_M=...)` (the kernel a call with these tensors runs) and
    `f.par_compile([kwargs, ...])` with `T.Tensor(shape, dtype)` standing for the tensors."""
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    a, b = rand((64, 48), "float16", 5), rand((48, 32), "float16", 6)
    k = eager_gemm.compile(a, b, block_M=16, block_N=32)
    close(k(a, b), f64(a) @ f64(b), reduce_len=48)
    cfgs = [{"A": T.Tensor((64, 48), T.float16), "B": T.Tensor((48, 32), T.float16),
             "block_M": bm} for bm in (16, 32)]
    for kern in eager_gemm.par_compile(cfgs):
        close(kern(a, b), f64(a) @ f64(b), reduce_len=48)


@T.macro
def _copy_whole_kernel(X, Y, n):
    with T.Kernel(1) as _:  # AT:macro_kernel
        for i in T.Parallel(n):
            Y[i] = X[i]


@tilelang_mini.jit
def eager_kernel_in_macro(X):
    N = T.const("N")
    X: T.Tensor((N,), T.float32)
    Y = T.empty((N,), T.float32)
    _copy_whole_kernel(X, Y, N)
    return Y


def test_kernel_block_inside_a_macro_is_located():
    """The `with T.Kernel` of an eager function (its output made by T.empty) inside a T.macro
    the body calls: a CompileError at the macro's block (was a RuntimeError of T.empty, the
    function not taken for an eager one)."""
    with pytest.raises(CompileError, match=r"inside a T.macro is not supported yet") as e:
        eager_kernel_in_macro(rand((16,)))
    with open(__file__) as f:
        line = next(i for i, ln in enumerate(f, 1) if "# AT:macro_kernel" in ln)
    assert e.value.loc.line == line


@tilelang_mini.jit
def strided_copy(A):
    M, N, dM, dN = T.dynamic("M, N, dM, dN")
    A: T.StridedTensor[[M, N], [dM, dN], T.float32]
    B = T.empty((M, N), A.dtype)
    with T.Kernel(T.ceildiv(M, 32), T.ceildiv(N, 32)) as (bx, by):
        T.copy(A[bx * 32:(bx + 1) * 32, by * 32:(by + 1) * 32],
               B[bx * 32:(bx + 1) * 32, by * 32:(by + 1) * 32])
    return B


def test_strided_tensor_annotation_takes_a_transposed_view(target, monkeypatch):
    """`T.StridedTensor[shape, strides, dtype]` (TileLang's eager-jit tutorial's
    as_contiguous): the argument a transposed view; the kernel reads it by its shape."""
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    a = rand((64, 96), seed=7)
    np.testing.assert_array_equal(strided_copy(a.T), a.T)


@tilelang_mini.jit
def eager_launch_under_if(X, double=False):
    N = T.const("N")
    X: T.Tensor((N,), T.float32)
    Y = T.empty((N,), T.float32)
    if double:
        with T.Kernel(1) as _:  # AT:launch_under_if
            for i in T.Parallel(N):
                Y[i] = X[i] * 2
    return Y


def test_launch_under_an_if_is_located():
    """An eager function whose `with T.Kernel` sits in a trace-time `if` (TileLang's tutorial
    `dyn_annot`): recognised as eager (its launch searched in the body's blocks), then a
    located CompileError at the launch (was run as a Python factory: an AttributeError)."""
    with pytest.raises(CompileError, match=r"nested in an `if`, a loop or another block") as e:
        eager_launch_under_if(rand((8,)), double=True)
    with open(__file__) as f:
        line = next(i for i, ln in enumerate(f, 1) if "# AT:launch_under_if" in ln)
    assert e.value.loc.line == line


@tilelang_mini.jit
def eager_scalar_dims(A, M, N):
    """TileLang's `M: T.int32` in an eager body: a scalar parameter, here a trace-time value
    (compiled per value), usable in the tensor annotations."""
    M: T.int32
    N: T.int32
    A: T.Tensor[[M, N], T.float32]
    B = T.empty((M, N), T.float32)
    with T.Kernel(1) as _:
        for i, j in T.Parallel(M, N):
            B[i, j] = A[i, j] * M + N
    return B


def test_scalar_parameter_annotated_in_an_eager_body(target, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    a = rand((4, 6), seed=8)
    close(eager_scalar_dims(a, 4, 6), f64(a) * 4 + 6)
