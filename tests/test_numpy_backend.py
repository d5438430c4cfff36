"""The NumPy interpreter backend against independent NumPy references; the op-semantics tests
that take `target` run on every backend.

Kernels are built directly with the IR node constructors (no frontend)."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from tilelang_mini.errors import KernelRuntimeError

from backends.numpy import BACKEND, Env, execute
from tilelang_mini.runtime.backends import get_backend
from tilelang_mini.errors import ArgumentError, CompileError
from tilelang_mini.ir import dtypes
from tilelang_mini.ir.nodes import (
    Alloc, BinOp, Buffer, Call, Cast, Copy, Fill, For, Gemm, If, Load, Loc, PipeBarrier, Reduce,
    Scope, SetCrossFlag, SetFlag, Store, WaitCrossFlag, WaitFlag,
)

from irbuild import (  # noqa: E402
    add, c, ceildiv, close, exp_rsqrt_map, full, kernel, mul, reg, tiled_gemm, v,
)

RNG = np.random.default_rng(0)
















def run(k, *args, target="numpy"):
    """Run lowered IR `k` on `target` after that target's own passes (as a compile does)."""
    from tilelang_mini.transform.pipeline import Options, run_target_passes
    backend = BACKEND if target == "numpy" else get_backend(target)
    k = run_target_passes(k, Options(target=target), verify=True)
    backend.run(backend.lower(k, {}), list(args))


def rand(shape, dtype, lo=-1.0, hi=1.0):
    return RNG.uniform(lo, hi, shape).astype(dtypes.to_numpy(dtype))






# -------------------------------------------------------------------------------------- gemm


@pytest.mark.parametrize("in_dtype", ["float32", "float16", "bfloat16", "float8_e4m3fn"])
def test_tiled_gemm_tail_tiles(in_dtype):
    M, N, K = 70, 45, 33
    a, b = rand((M, K), in_dtype), rand((K, N), in_dtype)
    out = np.full((M, N), 7.0, np.float32)
    run(tiled_gemm(M, N, K, in_dtype), a, b, out)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    close(out, ref, "float32")


@pytest.mark.parametrize("ta,tb", [(True, False), (False, True), (True, True)])
@pytest.mark.parametrize("in_dtype", ["float32", "bfloat16", "float16"])
def test_gemm_transposes(ta, tb, in_dtype, target):
    M, N, K = 40, 36, 45  # B^T tiles are transposed in 16 x 16 blocks: K and N tails
    a = rand((K, M) if ta else (M, K), in_dtype)
    b = rand((N, K) if tb else (K, N), in_dtype)
    out = np.zeros((M, N), np.float32)
    run(tiled_gemm(M, N, K, in_dtype, bn=48, bk=37, ta=ta, tb=tb), a, b, out, target=target)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    close(out, (a64.T if ta else a64) @ (b64.T if tb else b64), "float32")


@pytest.mark.parametrize("clear", [True, False])
def test_gemm_clear_accum_and_bf16_accumulator(clear, target):
    A, B = Buffer("A", (8, 4), "float32"), Buffer("B", (4, 6), "float32")
    C = Buffer("C", (8, 6), "bfloat16")
    acc = Buffer("acc", (8, 6), "bfloat16", "fragment")
    k = kernel((A, B, C), [
        Alloc(acc), Copy(full(C), full(acc)),
        Gemm(full(A), full(B), full(acc), clear_accum=clear),
        Copy(full(acc), full(C)),
    ])
    a, b, cc = rand((8, 4), "float32"), rand((4, 6), "float32"), rand((8, 6), "bfloat16")
    out = cc.copy()
    run(k, a, b, out, target=target)
    ref = a.astype(np.float64) @ b + (0 if clear else cc.astype(np.float64))
    close(out, ref, "bfloat16")


def test_gemm_shape_mismatch_is_located():
    A, B, C = (Buffer(n, s, "float32") for n, s in (("A", (8, 4)), ("B", (5, 6)), ("C", (8, 6))))
    loc = Loc("kern.py", 7, 9)
    k = kernel((A, B, C), [Gemm(full(A), full(B), full(C), loc=loc)])
    with pytest.raises(CompileError) as err:
        BACKEND.lower(k, {})
    assert err.value.loc == loc and "gemm" in err.value.message


# -------------------------------------------------------------------------------------- copy


def test_copy_clips_pads_and_casts(target):
    X = Buffer("X", (5, 7), "float32")
    Y = Buffer("Y", (6, 6), "bfloat16")
    T = Buffer("T", (4, 4), "float16", "shared")
    k = kernel((X, Y), [
        Alloc(T),
        Copy(reg(X, (-2, 4), (4, 4)), full(T)),       # rows -2..1, cols 4..7: pads with 0
        Copy(full(T), reg(Y, (3, 3), (4, 4))),        # tail tile: writes only Y[3:6, 3:6]
    ])
    x = rand((5, 7), "float32", -100, 100)
    y = np.full((6, 6), 9, ml_dtypes.bfloat16)
    run(k, x, y, target=target)
    tile = np.zeros((4, 4))
    tile[2:4, 0:3] = x[0:2, 4:7]
    tile = tile.astype(np.float16)
    ref = np.full((6, 6), 9.0)
    ref[3:6, 3:6] = tile[0:3, 0:3].astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(y.astype(np.float64), ref)


def test_copy_reshapes_between_extent1_dims_and_fully_outside(target):
    X = Buffer("X", (3, 8), "float32")
    Y = Buffer("Y", (8, 2), "float16")
    k = kernel((X, Y), [
        Copy(reg(X, (1, 0), (1, 8)), reg(Y, (0, 1), (8, 1))),   # row 1 of X -> column 1 of Y
        Copy(reg(X, (5, 0), (1, 8)), reg(Y, (0, 0), (8, 1))),   # fully out of bounds: zeros
    ])
    x = rand((3, 8), "float32")
    y = np.ones((8, 2), np.float16)
    run(k, x, y, target=target)
    np.testing.assert_array_equal(y[:, 1], x[1].astype(np.float16))
    np.testing.assert_array_equal(y[:, 0], 0)


def test_copy_shape_mismatch():
    X, Y = Buffer("X", (4, 4), "float32"), Buffer("Y", (2, 8), "float32")
    with pytest.raises(CompileError, match="do not match"):
        BACKEND.lower(kernel((X, Y), [Copy(full(X), full(Y))]), {})


# -------------------------------------------------------------------------------------- fill


def test_fill_casts_to_dtype(target):
    Y = Buffer("Y", (4, 5), "bfloat16")
    Z = Buffer("Z", (3,), "int32")
    k = kernel((Y, Z), [
        Fill(reg(Y, (1, 2), (2, 3)), c(1.00390625)),   # rounds to 1.0 in bfloat16
        Fill(full(Z), c(-7)),
    ])
    y, z = np.full((4, 5), 3, ml_dtypes.bfloat16), np.zeros(3, np.int32)
    run(k, y, z, target=target)
    ref = np.full((4, 5), 3.0)
    ref[1:3, 2:5] = 1.0
    np.testing.assert_array_equal(y.astype(np.float64), ref)
    np.testing.assert_array_equal(z, [-7, -7, -7])


# ------------------------------------------------------------------------------------ reduce

_REF = {"sum": lambda x, d: x.sum(d), "max": lambda x, d: x.max(d), "min": lambda x, d: x.min(d),
        "abssum": lambda x, d: np.abs(x).sum(d), "absmax": lambda x, d: np.abs(x).max(d)}
_COMB = {"sum": np.add, "abssum": np.add, "max": np.maximum, "absmax": np.maximum,
         "min": np.minimum}


@pytest.mark.parametrize("kind", list(_REF))
@pytest.mark.parametrize("clear", [True, False])
@pytest.mark.parametrize("dim,keep", [(1, False), (0, False), (1, True)])
def test_reduce(kind, clear, dim, keep, target):
    X = Buffer("X", (6, 37), "float16")  # 37: a vector tail on the llvm backend
    rows = 6 if dim == 1 else 37
    D = Buffer("D", (rows, 1) if keep else (rows,), "float32")
    k = kernel((X, D), [Reduce(kind, full(X), full(D), dim, clear)])
    x, d = rand((6, 37), "float16", -4, 4), rand(D.shape, "float32", -4, 4)
    out = d.copy()
    run(k, x, out, target=target)
    ref = _REF[kind](x.astype(np.float64), dim).reshape(D.shape)
    if not clear:
        ref = _COMB[kind](d.astype(np.float64), ref)
    close(out, ref, "float32")


def test_reduce_into_low_precision_subregion():
    X = Buffer("X", (4, 16), "float32")
    D = Buffer("D", (2, 8), "bfloat16")
    k = kernel((X, D), [Reduce("sum", reg(X, (0, 4), (4, 8)), reg(D, (1, 0), (1, 8)), 0)])
    x = rand((4, 16), "float32")
    d = np.zeros((2, 8), ml_dtypes.bfloat16)
    run(k, x, d)
    close(d[1], x[:, 4:12].astype(np.float64).sum(0), "bfloat16")
    assert not d[0].astype(np.float32).any()


# ---------------------------------------------------------------------------------- parallel


def test_parallel_elementwise_map():
    k = exp_rsqrt_map(16, 8)
    x = rand((16, 8), "float16", -2, 2)
    y = np.zeros((16, 8), ml_dtypes.bfloat16)
    run(k, x, y)
    xf = x.astype(np.float32)
    ref = np.maximum(np.exp(xf - xf[:, :1]), 1 / np.sqrt(xf * xf + 1)).astype(np.float16) * 2
    close(y, ref.astype(np.float64), "bfloat16")


def test_parallel_index_arithmetic_and_int_ops():
    # Y[i] = i // 3 + i % 3 * 10 + ceildiv(i, 4) ; Z[i] = i / 4 (true division)
    Y, Z = Buffer("Y", (10,), "int32"), Buffer("Z", (10,), "float32")
    i = v("i")
    iv = add(add(BinOp("//", i, c(3)), mul(BinOp("%", i, c(3)), c(10))),
             Call("ceildiv", (i, c(4))))
    k = kernel((Y, Z), [For(("i",), (c(10),), "parallel", (
        Store(Y, (i,), iv), Store(Z, (i,), BinOp("/", i, c(4)))))])
    y, z = np.zeros(10, np.int32), np.zeros(10, np.float32)
    run(k, y, z)
    n = np.arange(10)
    np.testing.assert_array_equal(y, n // 3 + n % 3 * 10 + -(-n // 4))
    np.testing.assert_array_equal(z, n / 4)


def test_alloc_var_accumulator_serial_loop_and_if(target):
    X = Buffer("X", (3, 5), "float16")
    Y = Buffer("Y", (3,), "float32")
    s = Buffer("s", (1,), "float32", "var")
    k_, bx = v("k"), v("bx")
    acc = Load(s, (c(0),))
    k = kernel((X, Y), [
        Alloc(s),
        Store(s, (c(0),), c(0.0)),
        For(("k",), (c(5),), "serial", (
            If(BinOp("!=", k_, c(2)),
               (Store(s, (c(0),), add(acc, mul(Load(X, (bx, k_)), Load(X, (bx, k_))))),),
               (PipeBarrier("V"),)),
        )),
        Store(Y, (bx,), Call("sqrt", (acc,))),
    ], grid=(3,))
    x = rand((3, 5), "float16")
    y = np.zeros(3, np.float32)
    run(k, x, y, target=target)
    xf = x.astype(np.float64)
    close(y, np.sqrt((xf ** 2).sum(1) - xf[:, 2] ** 2), "float32")


def test_nested_parallel_not_implemented():
    Y = Buffer("Y", (4, 4), "float32")
    inner = For(("j",), (c(4),), "parallel", (Store(Y, (v("i"), v("j")), c(1.0)),))
    with pytest.raises(NotImplementedError, match="nested Parallel"):
        BACKEND.lower(kernel((Y,), [For(("i",), (c(4),), "parallel", (inner,))]), {})


def test_if_on_parallel_var_masks_its_stores(target):
    """An If whose condition varies over a map's lanes (it was rejected before masked stores
    existed): its stores, and the loads in them, happen only where it holds; Y[i] = X[i + 2]
    reads past X in the lanes where the guard fails."""
    X, Y = Buffer("X", (4,), "float32"), Buffer("Y", (4,), "float32")
    i = v("i")
    body = (If(BinOp("<", i, c(2)), (Store(Y, (i,), Load(X, (add(i, c(2)),))),),
               (Store(Y, (i,), c(-1.0)),)),)
    k = kernel((X, Y), [For(("i",), (c(4),), "parallel", body)])
    x, y = np.arange(4, dtype=np.float32) + 1, np.zeros(4, np.float32)
    run(k, x, y, target=target)
    np.testing.assert_array_equal(y, [3.0, 4.0, -1.0, -1.0])


# ------------------------------------------------------------------------------------ is_npu


def test_npu_kernel_cube_and_two_vector_cores(target):
    n, M, N, K = 2, 16, 8, 4
    A, B = Buffer("A", (n * M, K), "float16"), Buffer("B", (K, N), "float16")
    O = Buffer("O", (n * M, N), "float32")
    Cnt = Buffer("Cnt", (n * 2,), "int32")
    W = Buffer("W", (M, N), "float32", "workspace")
    a_l0, b_l0 = Buffer("a", (M, K), "float16", "L0A"), Buffer("b", (K, N), "float16", "L0B")
    a_l1, b_l1 = Buffer("a1", (M, K), "float16", "L1"), Buffer("b1", (K, N), "float16", "L1")
    acc = Buffer("acc", (M, N), "float32", "L0C")
    u = Buffer("u", (M // 2, N), "float32", "UB")
    cnt = Buffer("cnt", (1,), "int32", "UB")
    cid, vid = v("cid"), v("vid")
    half = mul(vid, c(M // 2))
    i, j = v("i"), v("j")
    body = [
        Alloc(W), Alloc(cnt),
        Scope("C", (
            Alloc(a_l1), Alloc(b_l1), Alloc(a_l0), Alloc(b_l0), Alloc(acc),
            Copy(reg(A, (mul(cid, c(M)), 0), (M, K)), full(a_l1)),
            Copy(full(B), full(b_l1)),
            SetFlag("MTE2", "MTE1", 0), WaitFlag("MTE2", "MTE1", 0),
            Copy(full(a_l1), full(a_l0)),
            Copy(full(b_l1), full(b_l0)),
            SetFlag("MTE1", "M", 0), WaitFlag("MTE1", "M", 0),
            Gemm(full(a_l0), full(b_l0), full(acc), clear_accum=True),
            Copy(full(acc), full(W)),
            SetCrossFlag("FIX", 1),
        )),
        Scope("V", (
            WaitCrossFlag("V", 1),
            Alloc(u),
            Copy(reg(W, (half, 0), (M // 2, N)), full(u)),
            For(("i", "j"), (c(M // 2), c(N)), "parallel", (
                Store(u, (i, j), add(mul(Load(u, (i, j)), c(2.0)), Cast("float32", vid))),)),
            Copy(full(u), reg(O, (add(mul(cid, c(M)), half), 0), (M // 2, N))),
            Store(cnt, (c(0),), add(Load(cnt, (c(0),)), c(1))),
            Store(Cnt, (add(mul(cid, c(2)), vid),), Load(cnt, (c(0),))),
        )),
    ]
    k = kernel((A, B, O, Cnt), body, grid=(n,), grid_vars=("cid", "vid"), is_npu=True)
    a, b = rand((n * M, K), "float16"), rand((K, N), "float16")
    o, cn = np.zeros((n * M, N), np.float32), np.zeros(n * 2, np.int32)
    run(k, a, b, o, cn, target=target)
    ref = (a.astype(np.float64) @ b.astype(np.float64)) * 2
    ref[np.arange(n * M) % M >= M // 2] += 1  # the second vector core adds vid = 1
    close(o, ref, "float32")
    np.testing.assert_array_equal(cn, 1)  # each vector core has its own UB counter


# ------------------------------------------------------------------------------------ errors


def test_out_of_bounds_store_is_located():
    Y = Buffer("Y", (4,), "float32")
    loc = Loc("my_kernel.py", 12, 9)
    k = kernel((Y,), [Store(Y, (c(4),), c(1.0), loc=loc)])
    with pytest.raises(KernelRuntimeError) as err:
        run(k, np.zeros(4, np.float32))
    assert err.value.loc == loc
    assert "out of bounds" in err.value.message and "Y" in err.value.message
    assert "my_kernel.py:12:9" in str(err.value)


def test_out_of_bounds_in_parallel_and_negative_load():
    X, Y = Buffer("X", (4,), "float32"), Buffer("Y", (5,), "float32")
    loc1, loc2 = Loc("k.py", 3, 1), Loc("k.py", 4, 1)
    over = kernel((X, Y), [For(("i",), (c(5),), "parallel", (
        Store(Y, (v("i"),), Load(X, (v("i"),)), loc=loc1),))])
    with pytest.raises(KernelRuntimeError) as err:
        run(over, np.zeros(4, np.float32), np.zeros(5, np.float32))
    assert err.value.loc == loc1 and "out of bounds" in err.value.message
    neg = kernel((X, Y), [Store(Y, (c(0),), Load(X, (c(-1),)), loc=loc2)])
    with pytest.raises(KernelRuntimeError) as err:
        run(neg, np.zeros(4, np.float32), np.zeros(5, np.float32))
    assert err.value.loc == loc2


def test_tile_op_region_out_of_bounds_is_located(target):
    X = Buffer("X", (4, 4), "float32")
    loc = Loc("k.py", 9, 5)
    k = kernel((X,), [Fill(reg(X, (v("bx"), 0), (4, 4)), c(1.0), loc=loc)], grid=(2,))
    with pytest.raises(KernelRuntimeError) as err:
        run(k, np.zeros((4, 4), np.float32), target=target)
    assert err.value.loc == loc


def test_argument_errors(target):
    backend = get_backend(target)
    X = Buffer("X", (4,), "float32")
    art = backend.lower(kernel((X,), [Fill(full(X), c(1.0))]), {})
    bad = [[np.zeros(4, np.float16)], [np.zeros(5, np.float32)], []]
    if target == "llvm":  # native code takes contiguous arrays only (the interpreter, views too)
        bad.append([np.zeros(8, np.float32)[::2]])
    for args in bad:
        with pytest.raises(ArgumentError):
            backend.run(art, args)


# -------------------------------------------------------------------------- one instruction


def test_execute_single_instructions():
    X = Buffer("X", (2, 3), "float32")
    T = Buffer("T", (2, 3), "float16", "UB")
    x = rand((2, 3), "float32")
    x0 = x.copy()
    env = Env({}, {"X": x})
    execute(Alloc(T), env)
    execute(Copy(full(X), full(T)), env)
    execute(Store(X, (c(1), c(2)), add(Load(T, (c(0), c(0))), c(1.0))), env)
    np.testing.assert_array_equal(env.bufs["T"], x0.astype(np.float16))
    assert x[1, 2] == np.float32(np.float16(x0[0, 0])) + 1


def test_bad_extent_and_unbound_variable_are_located():
    Y = Buffer("Y", (4,), "float32")
    loc1, loc2 = Loc("k.py", 5, 3), Loc("k.py", 6, 3)
    inner = For(("k",), (v("i"),), "serial", (), loc=loc1)  # extent is an array in a map
    k = kernel((Y,), [For(("i",), (c(4),), "parallel", (inner,))])
    with pytest.raises(KernelRuntimeError) as err:
        run(k, np.zeros(4, np.float32))
    assert err.value.loc == loc1 and "extent" in err.value.message
    k = kernel((Y,), [Store(Y, (v("nope"),), c(1.0), loc=loc2)])
    with pytest.raises(KernelRuntimeError) as err:
        run(k, np.zeros(4, np.float32))
    assert err.value.loc == loc2 and "nope" in err.value.message


def test_float16_widening_is_numpys_cast_bit_for_bit():
    """semantics' fast float16 -> float32 (exprs.f16_to_f32) on every half: the same float32
    bits as NumPy's cast (NaNs: NaN), strided views included."""
    from tilelang_mini.semantics.exprs import f16_to_f32, to_f32
    h = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    want, got = h.astype(np.float32), f16_to_f32(h)
    nan = np.isnan(want)
    assert np.isnan(got[nan]).all()
    np.testing.assert_array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32))
    view = h.reshape(256, 256)[::3, 1::2]
    np.testing.assert_array_equal(to_f32(view), view.astype(np.float32))
    assert to_f32(view).dtype == np.float32
    # small tiles (under 4096 halves: a gather from the cast's table), every half among them
    for tile in (h.reshape(16, 64, 64)[k] for k in range(16)):
        for view in (tile, tile[:32], tile[::2, 1::3], tile.T[:40], tile.reshape(-1)[::2]):
            got, want = to_f32(view), view.astype(np.float32)
            assert got.shape == want.shape and got.strides == want.strides
            np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_bfloat16_widening_is_the_cast_bit_for_bit():
    """semantics' bfloat16 -> float32 (exprs.bf16_to_f32, through to_f32) on every bfloat16:
    the float32 bits of ml_dtypes' cast, NaN payloads included, strided views included."""
    from tilelang_mini.semantics.exprs import to_f32
    bf = dtypes.to_numpy("bfloat16")
    b = np.arange(1 << 16, dtype=np.uint16).view(bf)
    got = to_f32(b)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got.view(np.uint32), b.astype(np.float32).view(np.uint32))
    view = b.reshape(256, 256)[::3, 1::2]
    np.testing.assert_array_equal(to_f32(view).view(np.uint32),
                                  view.astype(np.float32).view(np.uint32))
