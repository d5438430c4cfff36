"""Element accesses in Parallel loops: the interpreter reads and writes affine ones as strided
views (semantics/exprs.py `affine_view`) and gathers the others; both must mean the same thing.

Every case is checked against an independent reference computed element by element in Python,
on every target; `split_affine` and `affine_view` are also checked to pick the path the module
docstring promises (so a case meant for the view path cannot silently test the gather)."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from backends.numpy import BACKEND
from tilelang_mini.errors import KernelRuntimeError
from tilelang_mini.ir.nodes import BinOp, Buffer, Cast, For, Load, Loc, Store
from tilelang_mini.runtime.backends import get_backend
from tilelang_mini.semantics.exprs import affine_view, split_affine
from tilelang_mini.runtime.kernel import pass_options
from tilelang_mini.transform.pipeline import Options, run_target_passes

from irbuild import add, c, kernel, mul, v

M, N = 5, 7
i, j = v("i"), v("j")


def sub(a, b):
    return BinOp("-", a, b)


def run(k, *args, target="numpy"):
    backend = BACKEND if target == "numpy" else get_backend(target)
    k = run_target_passes(k, pass_options(Options(target=target)), verify=True)  # as compile_ir
    backend.run(backend.lower(k, {}), list(args))


def reference(dst_idx, src_idx, x, y):
    """y[dst_idx(i, j)] = x[src_idx(i, j)] for every (i, j), all reads before any write."""
    out = y.copy()
    for a, b in itertools.product(range(M), range(N)):
        out[dst_idx(a, b)] = x[src_idx(a, b)]
    return out


# (name, X shape, Y shape, src indices, dst indices, python src, python dst, view path?)
CASES = [
    ("copy", (M, N), (M, N), (i, j), (i, j), lambda a, b: (a, b), lambda a, b: (a, b), True),
    ("transpose load", (N, M), (M, N), (j, i), (i, j),
     lambda a, b: (b, a), lambda a, b: (a, b), True),
    ("transpose store", (M, N), (N, M), (i, j), (j, i),
     lambda a, b: (a, b), lambda a, b: (b, a), True),
    ("strided offset", (2 * N + 1, M + 3), (M, N), (add(mul(c(2), j), c(1)), add(i, c(3))),
     (i, j), lambda a, b: (2 * b + 1, a + 3), lambda a, b: (a, b), True),
    ("scaled sum", (M, 3 * N), (M, N), (sub(i, c(0)), add(mul(add(j, c(1)), c(3)), c(-3))),
     (i, j), lambda a, b: (a, 3 * b), lambda a, b: (a, b), True),
    ("broadcast row", (M,), (M, N), (i,), (i, j), lambda a, b: (a,), lambda a, b: (a, b), True),
    ("broadcast col, 3-d", (2, N, 1), (M, N), (c(1), j, c(0)), (i, j),
     lambda a, b: (1, b, 0), lambda a, b: (a, b), True),
    ("diagonal (gather)", (N, N), (M, N), (i, i), (i, j),
     lambda a, b: (a, a), lambda a, b: (a, b), False),
    ("two variables in one index (gather)", (M + N, 2), (M, N), (add(i, j), c(1)), (i, j),
     lambda a, b: (a + b, 1), lambda a, b: (a, b), False),
    ("reversed (gather)", (M, N), (M, N), (i, sub(c(N - 1), j)), (i, j),
     lambda a, b: (a, N - 1 - b), lambda a, b: (a, b), False),
    ("quotient (gather)", (M, N), (M, N), (i, BinOp("//", j, c(2))), (i, j),
     lambda a, b: (a, b // 2), lambda a, b: (a, b), False),
]


@pytest.mark.parametrize("case", CASES, ids=[cs[0] for cs in CASES])
def test_parallel_access_matches_elementwise_reference(case, target):
    _, xs, ys, src, dst, py_src, py_dst, is_view = case
    X, Y = Buffer("X", xs, "float32"), Buffer("Y", ys, "float32")
    assert (affine_view(X, src, ("i", "j")) is not None) == is_view
    body = [For(("i", "j"), (c(M), c(N)), "parallel", (Store(Y, dst, Load(X, src)),))]
    rng = np.random.default_rng(1)
    x = rng.standard_normal(xs).astype(np.float32)
    y = rng.standard_normal(ys).astype(np.float32)
    want = reference(py_dst, py_src, x, y)
    run(kernel((X, Y), body), x, y, target=target)
    np.testing.assert_array_equal(y, want)


def test_overlapping_shift_reads_before_writing(target):
    """Y[i, j] = Y[i, j + 1] + 1: view and destination overlap; every read sees the old value."""
    Y = Buffer("Y", (M, N + 1), "float32")
    body = [For(("i", "j"), (c(M), c(N)), "parallel",
                (Store(Y, (i, j), add(Load(Y, (i, add(j, c(1)))), c(1.0))),))]
    y = np.arange(M * (N + 1), dtype=np.float32).reshape(M, N + 1)
    want = y.copy()
    want[:, :N] = y[:, 1:] + 1
    run(kernel((Y,), body), y, target=target)
    np.testing.assert_array_equal(y, want)


def test_low_precision_and_integer_views_keep_their_rounding(target):
    """A bf16 load widens exactly, the float32 sum rounds to bf16 on the store; an int8 store
    wraps: as the element types do on the gather path."""
    import ml_dtypes
    X = Buffer("X", (M, N), "bfloat16")
    Y = Buffer("Y", (N, M), "bfloat16")
    Z = Buffer("Z", (M, N), "int8")
    body = [For(("i", "j"), (c(M), c(N)), "parallel", (
        Store(Y, (j, i), add(Load(X, (i, j)), c(0.1))),
        Store(Z, (i, j), add(Cast("int32", Load(X, (i, j))), c(120))),))]
    rng = np.random.default_rng(2)
    x = (rng.standard_normal((M, N)) * 8).astype(ml_dtypes.bfloat16)
    y, z = np.zeros((N, M), ml_dtypes.bfloat16), np.zeros((M, N), np.int8)
    run(kernel((X, Y, Z), body), x, y, z, target=target)
    xf = x.astype(np.float32)
    np.testing.assert_array_equal(y.astype(np.float32),
                                  (xf + np.float32(0.1)).astype(ml_dtypes.bfloat16).T
                                  .astype(np.float32))
    wrapped = (xf.astype(np.int32).astype(np.int64) + 120 + 128) % 256 - 128
    np.testing.assert_array_equal(z.astype(np.int64), wrapped)


def test_view_out_of_bounds_names_the_first_bad_index():
    X, Y = Buffer("X", (M, N), "float32"), Buffer("Y", (M, N), "float32")
    loc = Loc("k.py", 9, 5)
    for src, bad in (((i, add(j, c(1))), f"index {N} out of bounds for dimension 1 of X[{M}, {N}]"),
                     ((sub(i, c(1)), j), f"index -1 out of bounds for dimension 0 of X[{M}, {N}]")):
        assert affine_view(X, src, ("i", "j")) is not None
        body = [For(("i", "j"), (c(M), c(N)), "parallel",
                    (Store(Y, (i, j), Load(X, src), loc=loc),))]
        with pytest.raises(KernelRuntimeError) as err:
            run(kernel((X, Y), body), np.zeros((M, N), np.float32), np.zeros((M, N), np.float32))
        assert err.value.loc == loc and bad in err.value.message


def test_store_that_would_reduce_is_still_refused():
    X, Y = Buffer("X", (M, N), "float32"), Buffer("Y", (M,), "float32")
    body = [For(("i", "j"), (c(M), c(N)), "parallel", (Store(Y, (i,), Load(X, (i, j))),))]
    with pytest.raises(KernelRuntimeError, match="would make this a reduction"):
        run(kernel((X, Y), body), np.zeros((M, N), np.float32), np.zeros(M, np.float32))


def test_split_affine_forms():
    par = ("i", "j")
    steps, rest = split_affine(add(mul(c(4), add(i, c(2))), sub(j, v("bx"))), par)
    assert steps == {"i": 4, "j": 1}
    assert rest == add(mul(add(c(0), c(2)), c(4)), sub(c(0), v("bx")))
    assert split_affine(v("bx"), par) == ({}, v("bx"))
    assert split_affine(mul(i, j), par) is None
    assert split_affine(mul(i, v("bx")), par) is None      # a step that is not a constant
    assert split_affine(BinOp("%", i, c(3)), par) is None


def test_a_variable_that_cancels_keeps_the_gather():
    """`j + i - i` is j in value but, as an index array, broadcasts along i (a store through it
    writes each element once per i): only a view of the same shape could stand for it."""
    X = Buffer("X", (N,), "float32")
    assert split_affine(add(j, sub(i, i)), ("i", "j"))[0] == {"j": 1, "i": 0}
    assert affine_view(X, (add(j, sub(i, i)),), ("i", "j")) is None
    assert affine_view(X, (add(j, mul(c(0), i)),), ("i", "j")) is None
    assert affine_view(X, (j,), ("i", "j")) is not None
