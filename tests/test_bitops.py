"""Integer dtypes (int8/uint8/int16/uint16/uint32/int64), bit operations and T.reinterpret, on
every target and through the IR text; NumPy integer arithmetic is the reference."""
import numpy as np
import pytest

import tilelang_mini as tl
import tilelang_mini.language as T
from tilelang_mini.ir.parser import parse_ir
from tilelang_mini.ir.printer import print_ir

INT_DTYPES = ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64")


def _bits_kernel(dtype):
    @T.prim_func
    def bits(A: T.Tensor((4, 40), dtype), B: T.Tensor((4, 40), dtype),
             C: T.Tensor((4, 40), dtype)):
        with T.Kernel(1) as bx:
            a = T.alloc_fragment((4, 40), dtype)
            b = T.alloc_fragment((4, 40), dtype)
            c = T.alloc_fragment((4, 40), dtype)
            T.copy(A, a)
            T.copy(B, b)
            for i, j in T.Parallel(4, 40):
                c[i, j] = ((a[i, j] & b[i, j]) | (a[i, j] ^ ~b[i, j])) + (a[i, j] << 3) \
                    - (b[i, j] >> (j % 5))
            T.copy(c, C)
    return bits


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_bit_operations_wrap_like_numpy(target, dtype):
    info = np.iinfo(dtype)
    rng = np.random.default_rng(1)
    a = rng.integers(info.min, info.max, (4, 40), dtype=dtype, endpoint=True)
    b = rng.integers(info.min, info.max, (4, 40), dtype=dtype, endpoint=True)
    got = tl.compile(_bits_kernel(dtype), out_idx=[-1], target=target)(a, b)
    a64, b64 = a.astype(np.int64), b.astype(np.int64)
    shift = np.arange(40) % 5
    want = (((a64 & b64) | (a64 ^ ~b64)) + (a64 << 3) - (b64 >> shift)).astype(dtype)
    assert got.dtype == np.dtype(dtype) and np.array_equal(got, want)


@T.prim_func
def ue8m0(X: T.Tensor((8, 32), "float32"), E: T.Tensor((8, 32), "uint8"),
          Y: T.Tensor((8, 32), "float32")):
    with T.Kernel(1) as bx:
        x = T.alloc_fragment((8, 32), "float32")
        e = T.alloc_fragment((8, 32), "uint8")
        y = T.alloc_fragment((8, 32), "float32")
        T.copy(X, x)
        for i, j in T.Parallel(8, 32):   # the exponent byte, rounded up when a mantissa bit is set
            e[i, j] = ((T.reinterpret(x[i, j], "int32") >> 23) & 255) + T.cast(
                (T.reinterpret(x[i, j], "int32") & 0x7FFFFF) != 0, "int32")
        for i, j in T.Parallel(8, 32):   # and back: 2 ** (e - 127)
            y[i, j] = T.reinterpret(T.cast(e[i, j], "int32") << 23, "float32")
        T.copy(e, E)
        T.copy(y, Y)


def test_reinterpret_float_bits(target):
    x = np.abs(np.random.default_rng(2).standard_normal((8, 32))).astype(np.float32) + 1e-3
    x[0, :4] = [0.5, 1.0, 2.0, 4.0]  # exact powers of two stay
    e, y = tl.compile(ue8m0, out_idx=[1, 2], target=target)(x)
    want = 2.0 ** np.ceil(np.log2(x.astype(np.float64)))
    assert np.array_equal(y, want.astype(np.float32))
    assert np.array_equal(e, (np.log2(want) + 127).astype(np.uint8))


def test_ir_text_round_trip_and_simulate():
    k = tl.compile(ue8m0, out_idx=[1, 2], target="numpy")
    for stage in k.compilation.stages.values():
        assert parse_ir(print_ir(stage)) == stage
    assert 'reinterpret(x[i, j], "float32", "int32")' in k.get_ir("frontend")
    assert "shift_right(" in k.get_ir("frontend")
    x = np.full((8, 32), 3.0, np.float32)
    (e, y), report = k.simulate(x)
    assert np.all(y == 4.0) and report.cycles > 0


def test_reinterpret_size_mismatch_is_located():
    with pytest.raises(tl.CompileError) as err:
        @T.prim_func
        def bad(X: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "int16")):
            with T.Kernel(1) as bx:
                x = T.alloc_fragment((8,), "float32")
                y = T.alloc_fragment((8,), "int16")
                T.copy(X, x)
                for i in T.Parallel(8):
                    y[i] = T.reinterpret(x[i], "int16")
                T.copy(y, Y)
    msg = str(err.value)
    assert "needs a value of 2 bytes" in msg and 'T.reinterpret(x[i], "int16")' in msg
    assert "^" in msg


def _shift_by_tensor():
    @T.prim_func
    def shifts(A: T.Tensor((24,), "int32"), S: T.Tensor((24,), "int32"),
               C: T.Tensor((24,), "int32")):
        with T.Kernel(1) as bx:
            a = T.alloc_fragment((24,), "int32")
            s = T.alloc_fragment((24,), "int32")
            T.copy(A, a)
            T.copy(S, s)
            for i in T.Parallel(24):
                if s[i] != 99:  # lanes with a count of 99 are off: their counts are never used
                    a[i] = T.shift_left(a[i], s[i]) + (a[i] >> s[i])
            T.copy(a, C)
    return shifts


@pytest.mark.parametrize("bad", [None, -1, 64])
def test_shift_counts_from_data_are_checked(target, bad):
    """A run-time shift count outside 0..63 is the same located KernelRuntimeError on every
    target (llvm computed a value from a poison shift); counts in masked-off lanes are not read."""
    a = np.arange(24, dtype=np.int32) - 12
    s = (np.arange(24, dtype=np.int32) * 3) % 31
    s[5] = 99  # masked off by the if
    if bad is not None:
        s[7] = bad
    k = tl.compile(_shift_by_tensor(), out_idx=[-1], target=target)
    if bad is not None:
        with pytest.raises(tl.KernelRuntimeError, match="shift_left") as err:
            k(a, s)
        assert err.value.loc.line > 0
        return
    a64, s64 = a.astype(np.int64), s.astype(np.int64)
    on = s64 != 99
    want = np.where(on, (a64 << np.where(on, s64, 0)) + (a64 >> np.where(on, s64, 0)), a64)
    np.testing.assert_array_equal(k(a, s), want.astype(np.int32))
