"""TVM's names that TileLang examples import (`from tvm import DataType, tirx`): tirx.const,
Cast, reinterpret, Select, Min/Max, bit operations and PrimExpr `.dtype`/`.astype` in helpers
inlined into kernels (the dequantize-GEMM unpacking of int4 / fp4 fields), on every target,
simulated, against NumPy references that decode the formats from their definitions; and the
located errors of what has no meaning."""
import numpy as np
import pytest

import tilelang_mini as tilelang
import tilelang_mini.language as T
from tilelang_mini import CompileError, tvm
from tilelang_mini.tvm import DataType, tirx

from util import close, f64, rand

N, K = 32, 64


def e2m1(code):
    """fp4 e2m1 by its definition: (-1)^s 2^(e-1) (1 + m/2), or (-1)^s m/2 when e == 0."""
    code = np.asarray(code).astype(np.int64)
    s, e, m = code >> 3, (code >> 1) & 3, code & 1
    mag = np.where(e == 0, m * 0.5, 2.0 ** (e - 1) * (1 + m / 2))
    return np.where(s == 1, -mag, mag)


def packed(codes):
    return (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8)


def int4_of(nbit: int, val: tirx.PrimExpr, pos: tirx.PrimExpr, dtype: str):
    """A signed int4 field of a uint8: shifted to the top of an int8, shifted back (sign)."""
    assert val.dtype == T.uint8 and dtype == T.int8
    mask = tirx.const((1 << nbit) - 1, T.uint8)
    field = (val >> (pos.astype(T.uint8) * tirx.const(nbit, T.uint8))) & mask
    top = tirx.reinterpret(T.int8, field << tirx.const(4, T.uint8))
    return top >> tirx.const(4, T.int8)


def int4_pair(val, pos):
    return int4_of(4, val, pos, dtype=T.int8)


def fp4_to_f16(val: tirx.PrimExpr, pos: tirx.PrimExpr):
    """An e2m1 field as float16 bits: exponent rebased by 14, mantissa bit at 9; e == 0 is the
    subnormal m/2, chosen with Select."""
    f4 = (val >> (pos.astype(T.uint16) * tirx.const(4, T.uint16))) & tirx.const(15, T.uint16)
    s = f4 >> tirx.const(3, T.uint16)
    e = (f4 & tirx.const(6, T.uint16)) >> tirx.const(1, T.uint16)
    m = f4 & tirx.const(1, T.uint16)
    bits = ((s << tirx.const(15, T.uint16)) | ((e + tirx.const(14, T.uint16)) << 10)
            | (m << tirx.const(9, T.uint16))).astype(T.uint16)
    sub = tirx.Cast(T.float16, m) * tirx.const(0.5, T.float16)
    signed_sub = tvm.tir.Select(s == tirx.const(1, T.uint16), -sub, sub)
    return tirx.Select(e == tirx.const(0, T.uint16), signed_sub,
                       tirx.reinterpret(T.float16, bits))


def unpack_kernel(helper, out_dtype):
    @tilelang.jit(out_idx=[1])
    def factory(bn=16):
        @T.prim_func
        def main(B: T.Tensor((N, K // 2), T.uint8), C: T.Tensor((N, K), out_dtype)):
            with T.Kernel(N // bn) as bx:
                b = T.alloc_shared((bn, K // 2), T.uint8)
                c = T.alloc_fragment((bn, K), out_dtype)
                T.copy(B[bx * bn, 0], b)
                for i, j in T.Parallel(bn, K):
                    c[i, j] = helper(b[i, j // 2], j % 2)
                T.copy(c, C[bx * bn, 0])
        return main
    return factory()


def run_all(kernel, target, args, want, dtype, reduce_len=1, exact=False):
    k = tilelang.compile(kernel.prim_func, out_idx=kernel.out_idx, target=target)
    outs = [k(*args)] + ([k.simulate(*args)[0]] if target == "numpy" else [])
    for got in outs:
        if exact:
            assert np.array_equal(f64(got), want)
        else:
            close(got, want, dtype, reduce_len)


def test_int4_unpack(target):
    rng = np.random.default_rng(1)
    v = rng.integers(-8, 8, (N, K))
    kern = unpack_kernel(int4_pair, "int8")
    run_all(kern, target, [packed((v & 15).astype(np.uint8))], f64(v), "int8", exact=True)


def test_fp4_every_code(target):
    codes = np.tile(np.arange(16, dtype=np.uint8), (N, K // 16))
    np.random.default_rng(2).permuted(codes, axis=1, out=codes)
    kern = unpack_kernel(fp4_to_f16, "float16")
    run_all(kern, target, [packed(codes)], e2m1(codes), "float16", exact=True)


def test_fp4_dequant_gemm(target):
    """C = A @ dequant(B)^T with a per-row exponent: fp4 -> fp16 on the vector side, fp16 GEMM,
    scaled by 2**Scale[n] through tirx.shift_left on the integer scale."""
    M = 32
    rng = np.random.default_rng(3)
    codes = rng.integers(0, 16, (N, K)).astype(np.uint8)
    scale = rng.integers(0, 3, (N,)).astype(np.uint8)
    a = rand((M, K), "float16", seed=4)

    @tilelang.jit(out_idx=[3])
    def factory(bm=16, bn=16):
        @T.prim_func
        def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((N, K // 2), T.uint8),
                 S: T.Tensor((N,), T.uint8), C: T.Tensor((M, N), T.float32)):
            with T.Kernel(N // bn, M // bm) as (bx, by):
                a_s = T.alloc_shared((bm, K), T.float16)
                b_s = T.alloc_shared((bn, K // 2), T.uint8)
                w = T.alloc_shared((bn, K), T.float16)
                acc = T.alloc_fragment((bm, bn), T.float32)
                T.copy(A[by * bm, 0], a_s)
                T.copy(B[bx * bn, 0], b_s)
                for i, j in T.Parallel(bn, K):
                    w[i, j] = fp4_to_f16(b_s[i, j // 2], j % 2) * tirx.Cast(
                        T.float16, tirx.shift_left(1, S[T.get_block_binding(0) * bn + i]))
                T.gemm(a_s, w, acc, transpose_B=True, clear_accum=True)
                T.copy(acc, C[by * bm, bx * bn])
        return main

    want = f64(a) @ (e2m1(codes) * 2.0 ** f64(scale)[:, None]).T
    run_all(factory(), target, [a, packed(codes), scale], want, "float32", K)


def test_alloc_buffer_is_a_workspace(target):
    """TVM's T.alloc_buffer(shape, dtype) at the prim_func level: a GM workspace, written by one
    launch and read by the next."""
    x = rand((32, 16), seed=5)

    @tilelang.jit(out_idx=[1])
    def factory():
        @T.prim_func
        def main(X: T.Tensor((32, 16), T.float32), Y: T.Tensor((32, 16), T.float32)):
            W = T.alloc_buffer((32, 16), "float32")
            with T.Kernel(2) as bx:
                t = T.alloc_fragment((16, 16), "float32")
                T.copy(X[bx * 16, 0], t)
                for i, j in T.Parallel(16, 16):
                    t[i, j] = t[i, j] * 2.0
                T.copy(t, W[bx * 16, 0])
            with T.Kernel(2) as bx:
                u = T.alloc_fragment((16, 16), "float32")
                T.copy(W[(1 - bx) * 16, 0], u)
                T.copy(u, Y[bx * 16, 0])
        return main

    run_all(factory(), target, [x], np.concatenate([2 * f64(x)[16:], 2 * f64(x)[:16]]),
            "float32")


def test_names_outside_kernels():
    assert DataType("bfloat16").bits == 16 and DataType(T.float16) == "float16"
    assert tvm.tir is tvm.tirx and tvm.DataType is T.dtype
    assert tvm.target.Target("hip -mcpu=gfx950").kind.name == "hip"
    with pytest.raises(RuntimeError, match="inside a T.prim_func"):
        tirx.const(1, "uint8")


def error_of(helper):
    with pytest.raises(CompileError) as info:
        unpack_kernel(helper, "int8")
    text = str(info.value)
    assert "test_tvm.py:" in text and "tilelang_mini/" not in text
    return text


def const_out_of_range(val, pos):
    return val + tirx.const(300, T.uint8)


def const_of_kernel_value(val, pos):
    return tirx.const(val, T.uint8)


def reinterpret_wrong_size(val, pos):
    return tirx.reinterpret(T.int32, tirx.Cast(T.float16, val))


def test_located_errors():
    assert "300 is not a uint8 value (range 0..255)" in error_of(const_out_of_range)
    assert "tirx.const takes a Python number" in error_of(const_of_kernel_value)
    assert "T.reinterpret to int32 (4 bytes) needs a value of 4 bytes; got a float16" in error_of(
        reinterpret_wrong_size)
    assert "T.alloc_buffer in scope 'shared'" in str(pytest.raises(CompileError, lambda: T.prim_func(
        _shared_alloc_buffer)).value)


def _shared_alloc_buffer(X: T.Tensor((16,), T.float32)):
    with T.Kernel(1) as bx:
        s = T.alloc_buffer((16,), "float32", scope="shared")
        T.copy(X[bx * 16:bx * 16 + 16], s)
