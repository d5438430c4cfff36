"""Arguments of a compiled kernel on every target (tilelang_mini/runtime/arguments.py): any layout
is read correctly, outputs passed in place are written correctly or rejected, and every mistake
is a clear ArgumentError, never an internal error or a misread."""
# No `from __future__ import annotations`: the frontend reads T.Tensor annotations as objects.
import ml_dtypes
import numpy as np
import pytest

import tilelang_mini
import tilelang_mini.language as T
from tilelang_mini.errors import ArgumentError

M, N = 8, 16


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_CACHE_DIR", str(tmp_path / "cache"))


def affine(dtype="float32", shape=(M, N), block=4):
    """B = 2 * A + 1 (rows in blocks of `block`)."""
    rows, cols = shape

    @T.prim_func
    def main(A: T.Tensor((rows, cols), dtype), B: T.Tensor((rows, cols), dtype)):
        with T.Kernel(T.ceildiv(rows, block)) as bx:
            a = T.alloc_fragment((block, cols), "float32")
            T.copy(A[bx * block, 0], a)
            for i, j in T.Parallel(block, cols):
                a[i, j] = a[i, j] * 2.0 + 1.0
            T.copy(a, B[bx * block, 0])
    return main


def ref(x):
    return (np.asarray(x, np.float64) * 2 + 1).astype(np.float32)


def data(shape=(M, N)):
    return np.arange(np.prod(shape), dtype=np.float32).reshape(shape) % 13 - 6


@pytest.fixture
def k_out(target):
    return tilelang_mini.compile(affine(), out_idx=[-1], target=target)


@pytest.fixture
def k_inplace(target):
    return tilelang_mini.compile(affine(), target=target)


LAYOUTS = {
    "transposed": lambda x: np.ascontiguousarray(x.T).T,
    "strided": lambda x: np.repeat(x, 2, axis=1)[:, ::2],
    "negative_strides": lambda x: np.ascontiguousarray(x[::-1, ::-1])[::-1, ::-1],
    "fortran": lambda x: np.asfortranarray(x),
    "misaligned": lambda x: np.frombuffer(b"\0" + x.tobytes(), np.float32, offset=1).reshape(x.shape),
    "big_endian": lambda x: x.astype(">f4"),
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_inputs_in_any_layout_are_read_correctly(layout, k_out):
    x = data()
    view = LAYOUTS[layout](x)
    np.testing.assert_array_equal(view, x)
    np.testing.assert_array_equal(k_out(view), ref(x))


@pytest.mark.parametrize("layout", ["transposed", "strided", "negative_strides", "fortran"])
def test_noncontiguous_output_in_place_is_written_back(layout, k_inplace):
    x = data()
    out = LAYOUTS[layout](np.zeros((M, N), np.float32))
    assert not out.flags.c_contiguous
    k_inplace(x, out)
    np.testing.assert_array_equal(out, ref(x))


def test_output_view_into_a_larger_array_is_written_in_place(k_inplace):
    big = np.full((M, 2 * N), -7.0, np.float32)
    k_inplace(data(), big[:, N:])
    np.testing.assert_array_equal(big[:, N:], ref(data()))
    assert (big[:, :N] == -7).all()


def test_read_only_output_is_rejected(k_inplace):
    out = np.zeros((M, N), np.float32)
    out.flags.writeable = False
    with pytest.raises(ArgumentError, match="'B' .* is read-only, but the kernel writes it"):
        k_inplace(data(), out)
    assert (out == 0).all()


def test_output_overlapping_an_input_is_rejected(k_inplace):
    x = data()
    with pytest.raises(ArgumentError, match="shares memory with argument 'A'"):
        k_inplace(x, x)


@pytest.mark.parametrize("strides", [(0, 0), (0, 4), (4, 4), (8, 4)])
def test_output_whose_elements_overlap_is_rejected(strides, k_inplace):
    # a writeable broadcast view (np.lib.stride_tricks.as_strided): the kernel's writes would
    # land on one another and the caller would read whichever came last
    base = np.zeros(M * N, np.float32)
    out = np.lib.stride_tricks.as_strided(base, shape=(M, N), strides=strides)
    with pytest.raises(ArgumentError, match="'B' .* elements overlap in memory"):
        k_inplace(data(), out)
    assert (base == 0).all()


def test_output_with_interleaved_strides_that_do_not_overlap_is_written(target):
    # strides that do not nest (rows 3 floats apart, columns 2 apart) yet never collide
    base = np.zeros(16, np.float32)
    out = np.lib.stride_tricks.as_strided(base, shape=(2, 3), strides=(12, 8))
    assert len({12 * i + 8 * j for i in range(2) for j in range(3)}) == 6
    k = tilelang_mini.compile(affine(shape=(2, 3), block=2), target=target)
    x = data((2, 3))
    k(x, out)
    np.testing.assert_array_equal(out, ref(x))


def test_read_only_input_is_fine(k_out):
    x = data()
    x.flags.writeable = False
    np.testing.assert_array_equal(k_out(x), ref(x))


class ArrayLike:
    """An object that is not an ndarray but converts to one (like a CPU torch tensor)."""

    def __init__(self, a):
        self.a = a

    def __array__(self, dtype=None, copy=None):
        return self.a if dtype is None else self.a.astype(dtype)


class DLPackOnly:
    def __init__(self, a):
        self.a = a

    def __dlpack__(self, **kw):
        return self.a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


def test_objects_with_array_or_dlpack_as_inputs(k_out):
    x = data()
    np.testing.assert_array_equal(k_out(ArrayLike(x)), ref(x))
    np.testing.assert_array_equal(k_out(DLPackOnly(x)), ref(x))
    np.testing.assert_array_equal(k_out(ArrayLike(np.ascontiguousarray(x.T).T)), ref(x))


def test_dlpack_output_is_written_in_place_and_array_like_output_is_rejected(k_inplace):
    x = data()
    out = np.zeros((M, N), np.float32)
    k_inplace(x, DLPackOnly(out))
    np.testing.assert_array_equal(out, ref(x))
    with pytest.raises(ArgumentError, match="'B' .* must be a writeable NumPy array"):
        k_inplace(x, ArrayLike(np.zeros((M, N), np.float32)))


def test_python_lists_and_numbers(k_out, target):
    x = data()
    np.testing.assert_array_equal(k_out(x.tolist()), ref(x))
    np.testing.assert_array_equal(k_out(x.astype(int).tolist()), ref(x.astype(int)))
    with pytest.raises(ArgumentError, match="has shape"):
        k_out([1.0, 2.0])
    with pytest.raises(ArgumentError, match="not a regular array"):
        k_out([[1.0, 2.0], [3.0]])
    with pytest.raises(ArgumentError, match="expected float32 values"):
        k_out([["a"] * N] * M)
    with pytest.raises(ArgumentError, match="has shape"):
        k_out(3.0)


def scalar_times(target):
    @T.prim_func
    def main(S: T.Tensor((), "float32"), I: T.Tensor((2,), "int32"), B: T.Tensor((4,), "float32")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(4):
                B[i] = S[()] * 2.0 + I[0] - I[1]
    return tilelang_mini.compile(main, out_idx=[-1], target=target)


def test_zero_d_arrays_numpy_scalars_python_numbers(target):
    k = scalar_times(target)
    want = np.full(4, 3.5 * 2 + 7 - 2, np.float32)
    for s in (3.5, np.float32(3.5), np.array(3.5, np.float32), ArrayLike(np.array(3.5, np.float32))):
        np.testing.assert_array_equal(k(s, [7, 2]), want)
    with pytest.raises(ArgumentError, match="expected int32 values"):
        k(3.5, [7.5, 2])
    with pytest.raises(ArgumentError, match="outside the int32 range"):
        k(3.5, [2 ** 40, 2])
    with pytest.raises(ArgumentError, match="has dtype int64; expected int32"):
        k(3.5, np.array([7, 2]))


@pytest.mark.parametrize("bad,message", [
    (None, "must be a NumPy array .* got NoneType"),
    (object(), "must be a NumPy array .* got object"),
    ("text", "must be a NumPy array .* got str"),
    (np.zeros((M, N), np.float64), "has dtype float64; expected float32"),
    (np.zeros((M, N + 1), np.float32), r"has shape \(8, 17\); expected \(8, 16\)"),
    (np.zeros((0, N), np.float32), r"has shape \(0, 16\); expected \(8, 16\)"),
    (np.zeros((M, N), ml_dtypes.bfloat16), "has dtype bfloat16; expected float32"),
])
def test_wrong_arguments_are_argument_errors_naming_the_parameter(bad, message, k_out):
    with pytest.raises(ArgumentError, match=message) as info:
        k_out(bad)
    text = str(info.value)
    assert "'A' of kernel 'main'" in text
    assert "Traceback" not in text and "tilelang_mini/" not in text


def test_wrong_number_of_arguments(k_out, k_inplace):
    with pytest.raises(ArgumentError, match=r"takes 1 input\(s\) \(A\), got 2"):
        k_out(data(), data())
    with pytest.raises(ArgumentError, match=r"takes 2 input\(s\) \(A, B\), got 1"):
        k_inplace(data())


def test_inputs_by_name_and_wrong_keywords(k_out, k_inplace):
    """Parameters may be passed by name (as a Python call would bind them); an unknown name, a
    parameter given twice or one left out is an ArgumentError, not a TypeError from __call__."""
    np.testing.assert_array_equal(k_out(A=data()), ref(data()))
    out = np.zeros((M, N), np.float32)
    k_inplace(data(), B=out)
    np.testing.assert_array_equal(out, ref(data()))
    np.testing.assert_array_equal(k_out.simulate(A=data())[0], ref(data()))
    with pytest.raises(ArgumentError, match="has no input named 'X'; its inputs are A"):
        k_out(X=data())
    with pytest.raises(ArgumentError, match="got input 'A' both by position and by name"):
        k_out(data(), A=data())
    with pytest.raises(ArgumentError, match="missing input.s. A"):
        k_inplace(B=out)


def test_simulate_checks_and_writes_back_the_same_way():
    # simulate runs the core's semantics whatever the target: one compile is enough
    k = tilelang_mini.compile(affine(), target="numpy")
    out = np.zeros((N, M), np.float32).T
    k.simulate(LAYOUTS["negative_strides"](data()), out)
    np.testing.assert_array_equal(out, ref(data()))


def test_output_sharing_memory_with_an_input_given_through_dlpack_is_rejected(k_inplace):
    x = data()
    with pytest.raises(ArgumentError, match="shares memory with argument 'A'"):
        k_inplace(DLPackOnly(x), x)


def test_an_output_too_large_for_the_machine_is_a_located_runtime_error(target):
    """A 32 TiB output tensor (IR text may be edited to any shape) cannot be allocated: a
    KernelRuntimeError at the kernel naming the output, on the call and in simulate, never a
    MemoryError from NumPy or an internal error."""
    from tilelang_mini.errors import KernelRuntimeError

    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((2 ** 31, 2 ** 12), "float32")):
        with T.Kernel(1) as bx:
            a = T.alloc_fragment((M, N), "float32")
            T.copy(A, a)
            T.copy(a, B[0, 0])
    k = tilelang_mini.compile(main, out_idx=[-1], target=target)
    for run in (k, lambda x: k.simulate(x)):
        with pytest.raises(KernelRuntimeError, match=r"cannot allocate output 'B' "
                                                     r"\(2147483648, 4096\) float32") as info:
            run(data())
        assert info.value.loc.line > 0


def test_same_elements_grouped_differently_are_read_with_the_parameters_shape(k_out, k_inplace):
    """tilelang-ascend's host code passes (.., G, D) for a (.., G * D) parameter and (.., G, 1)
    for (.., G): the same row-major elements, read with the parameter's shape (an output is
    written in place when the regrouping is a view). A transposed shape (N, M) for (M, N), or
    a different element count, is no regrouping and stays an ArgumentError."""
    x = data()
    np.testing.assert_array_equal(k_out(x.reshape(M, 2, N // 2)), ref(x))
    np.testing.assert_array_equal(k_out(x.reshape(M, N, 1)), ref(x))
    np.testing.assert_array_equal(k_out(x.reshape(M * N)), ref(x))
    out = np.zeros((M, 4, N // 4), np.float32)
    k_inplace(x, out)
    np.testing.assert_array_equal(out.reshape(M, N), ref(x))
    with pytest.raises(ArgumentError, match=r"has shape \(16, 8\); expected \(8, 16\)"):
        k_out(x.reshape(N, M))
    with pytest.raises(ArgumentError, match=r"has shape \(4, 32\)"):
        k_out(x.reshape(4, 32))
