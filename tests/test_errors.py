"""Mistaken kernels: each gives a CompileError located at the offending line of this file, with
the source line and a caret, and without compiler paths, tracebacks or internal names.

The offending line of each kernel carries a marker comment `# ERR:<tag>`; `line_of(tag)` finds it.
"""
# No `from __future__ import annotations`: kernels need their T.Tensor annotations as objects.
import math
import re
from pathlib import Path

import numpy as np
import pytest

from markers import Marked, kernel_error
import tilelang_mini
import tilelang_mini.language as T
from tilelang_mini import ArgumentError, CompileError

MARKED = Marked(__file__, prefix="ERR:")
THIS = MARKED.path
SOURCE = MARKED.lines
line_of = MARKED.line_of
INTERNAL = ("tilelang_mini/", "Traceback", "KernelBuilder", "_Marker", "_LanguageNamespace",
            "Buffer(", "Region(", "Const(", "BinOp(", "Load(", "Var(", "Call(", "NoneType",
            "ast.", "frontend", "<lambda>")


def check_located(err: CompileError, tag: str, *fragments: str) -> None:
    text = str(err)
    line = line_of(tag)
    assert err.loc.line == line, text
    assert Path(err.loc.file).resolve() == THIS
    lines = text.splitlines()
    assert lines[0].startswith(f"{err.loc.file}:{line}:{err.loc.col}: "), text
    # the offending source line, then a caret under the column
    assert lines[1].strip() == SOURCE[line - 1].strip(), text
    assert lines[2].strip() == "^" and lines[2].index("^") == 4 + err.loc.col - 1, text
    for f in fragments:
        assert f in text, f"{f!r} not in:\n{text}"
    for bad in INTERNAL:
        assert bad not in text, f"{bad!r} in:\n{text}"


# ------------------------------------------------------------------------------ names and calls


def test_unknown_T_name():
    @kernel_error
    def err(X: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "float32")):
        with T.Kernel(1) as bx:
            t = T.alloc_fragment((8,), "float32")
            T.frobnicate(t)  # ERR:unknown_name
    check_located(err, "unknown_name", "unknown name T.frobnicate",
                  "docs/language.md")


def test_undefined_python_name():
    @kernel_error
    def err(X: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "float32")):
        with T.Kernel(1) as bx:
            T.copy(X, not_defined_anywhere)  # ERR:undefined
    check_located(err, "undefined", "'not_defined_anywhere' is not defined")


def test_python_function_on_kernel_values():
    @kernel_error
    def err(X: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "float32")):
        with T.Kernel(1) as bx:
            t = T.alloc_fragment((8,), "float32")
            for i in T.Parallel(8):
                t[i] = math.exp(X[i])  # ERR:python_fn
    check_located(err, "python_fn", "exp", "T. math functions")


def test_tile_op_argument_errors():
    @kernel_error
    def missing(X: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "float32")):
        with T.Kernel(1) as bx:
            T.copy(X)  # ERR:missing_arg

    @kernel_error
    def unexpected(X: T.Tensor((8, 8), "float32"), Y: T.Tensor((8, 8), "float32")):
        with T.Kernel(1) as bx:
            a = T.alloc_shared((8, 8), "float32")
            c = T.alloc_fragment((8, 8), "float32")
            T.gemm(a, a, c, transpose_C=True)  # ERR:unexpected_kw

    @kernel_error
    def bad_dim(X: T.Tensor((8, 8), "float32"), Y: T.Tensor((8,), "float32")):
        with T.Kernel(1) as bx:
            a = T.alloc_fragment((8, 8), "float32")
            s = T.alloc_fragment((8,), "float32")
            T.reduce_sum(a, s, dim=2)  # ERR:bad_dim

    check_located(missing, "missing_arg", "missing argument 'dst'")
    check_located(unexpected, "unexpected_kw", "unexpected argument 'transpose_C'")
    check_located(bad_dim, "bad_dim", "dim 2 is out of range")


# ------------------------------------------------------------------------------ shapes and dtypes


def test_mismatched_copy_shapes():
    @kernel_error
    def err(X: T.Tensor((16, 16), "float32"), Y: T.Tensor((16, 16), "float32")):
        with T.Kernel(1) as bx:
            t = T.alloc_shared((8, 8), "float32")
            T.copy(X[0:8, 0:12], t)  # ERR:copy_shapes
    # (a shorter GM region is TileLang's padded copy: tests/compat/test_short_copy.py)
    check_located(err, "copy_shapes", "copy shapes differ", "(8, 12)", "(8, 8)")


def test_mismatched_gemm_shapes():
    @kernel_error
    def err(X: T.Tensor((16, 16), "float16"), Y: T.Tensor((16, 16), "float32")):
        with T.Kernel(1) as bx:
            a = T.alloc_shared((16, 8), "float16")
            b = T.alloc_shared((16, 16), "float16")
            c = T.alloc_fragment((16, 16), "float32")
            T.gemm(a, b, c)  # ERR:gemm_shapes
    check_located(err, "gemm_shapes", "gemm shapes do not match", "A 16x8",
                  "B 16x16")


def test_unsupported_dtype_of_tile():
    @kernel_error
    def err(X: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "float32")):
        with T.Kernel(1) as bx:
            t = T.alloc_shared((8,), "float64")  # ERR:dtype_tile
    check_located(err, "dtype_tile", "unsupported dtype 'float64'", "bfloat16")


def test_unsupported_dtype_of_parameter():
    @kernel_error
    def err(X: T.Tensor((8,), "float64"),  # ERR:dtype_param
          Y: T.Tensor((8,), "float32")):
        with T.Kernel(1) as bx:
            T.copy(X, Y)
    check_located(err, "dtype_param", "unsupported dtype 'float64'")


def test_non_constant_tile_shape():
    @kernel_error
    def err(X: T.Tensor((8, 8), "float32"), Y: T.Tensor((8, 8), "float32")):
        with T.Kernel(2) as bx:
            t = T.alloc_shared((bx + 1, 8), "float32")  # ERR:tile_shape
    check_located(err, "tile_shape", "tile shapes must be positive constant ints",
                  "bx + 1")


def test_non_constant_parallel_extent():
    @kernel_error
    def err(X: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "float32")):
        with T.Kernel(2) as bx:
            t = T.alloc_fragment((8,), "float32")
            for i in T.Parallel(bx * 4):  # ERR:parallel_extent
                t[i] = 0.0
    check_located(err, "parallel_extent", "T.Parallel extents must be positive "
                  "constant ints")


# -------------------------------------------------------------------------- indices out of range


def test_constant_index_outside_tensor():
    @kernel_error
    def err(X: T.Tensor((16, 16), "float32"), Y: T.Tensor((16, 16), "float32")):
        with T.Kernel(1) as bx:
            t = T.alloc_shared((8, 8), "float32")
            T.copy(X[100, 0], t)  # ERR:index_outside
    check_located(err, "index_outside", "index 100 in dim 0 is outside 'X'",
                  "(16, 16)")


def test_constant_index_outside_tile():
    @kernel_error
    def err(X: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "float32")):
        with T.Kernel(1) as bx:
            t = T.alloc_fragment((8,), "float32")
            t[8] = 1.0  # ERR:store_outside
    check_located(err, "store_outside", "index 8 in dim 0 is outside 't'")


def test_wrong_number_of_indices():
    @kernel_error
    def err(X: T.Tensor((8, 8), "float32"), Y: T.Tensor((8, 8), "float32")):
        with T.Kernel(1) as bx:
            t = T.alloc_fragment((8, 8), "float32")
            t[0] = 1.0  # ERR:rank
    check_located(err, "rank", "'t' has 2 dimensions, got 1 indices")


# ------------------------------------------------------------------- unsupported Python constructs


def test_while_loop():
    @kernel_error
    def err(X: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "float32")):
        with T.Kernel(1) as bx:
            while True:  # ERR:while
                pass
    check_located(err, "while", "trace-time `while`", "never became false")


def test_run_time_while_on_a_trace_time_counter():
    @kernel_error
    def err(X: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "float32")):
        with T.Kernel(1) as bx:
            i = 0
            while X[i] > 0.0:  # ERR:rtwhile
                i = i + 1
    check_located(err, "rtwhile", "body binds `i` anew", "T.alloc_var")


def test_try():
    @kernel_error
    def err(X: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "float32")):
        with T.Kernel(1) as bx:
            try:  # ERR:try
                T.copy(X, Y)
            except Exception:
                pass
    check_located(err, "try", "unsupported Python construct", "Try")


def test_lambda():
    @kernel_error
    def err(X: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "float32")):
        with T.Kernel(1) as bx:
            f = lambda v: v + 1  # noqa: E731 # ERR:lambda
    check_located(err, "lambda", "unsupported Python expression", "Lambda")


def test_return():
    @kernel_error
    def err(X: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "float32")):
        with T.Kernel(1) as bx:
            T.copy(X, Y)
            return Y  # ERR:return
    check_located(err, "return", "`return` is not supported")


def test_other_with_block():
    @kernel_error
    def err(X: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "float32")):
        with T.Kernel(1) as bx:
            with open("x") as f:  # ERR:with_open
                pass
    check_located(err, "with_open", "expected `with T.Kernel(...)`")


def test_list_comprehension():
    @kernel_error
    def err(X: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "float32")):
        with T.Kernel(1) as bx:
            xs = {i: i for i in range(3)}  # ERR:listcomp
    # list comprehensions and generator expressions run at trace time (tests/compat); a dict
    # comprehension is still an unsupported expression
    check_located(err, "listcomp", "unsupported Python expression", "DictComp")


def test_statement_outside_kernel_block():
    @kernel_error
    def err(X: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "float32")):
        T.copy(X, Y)  # ERR:outside_block
    check_located(err, "outside_block", "inside `with T.Kernel(...)")


# ---------------------------------------------------------------------- arguments of a kernel call


def _copy_kernel():
    @T.prim_func
    def k(X: T.Tensor((4, 8), "float32"), Y: T.Tensor((4, 8), "float32")):  # ERR:call_args
        with T.Kernel(1) as bx:
            T.copy(X, Y)
    return tilelang_mini.compile(k, out_idx=[-1])


@pytest.mark.parametrize("args,fragments", [
    ((), ("takes 1 input(s) (X), got 0",)),
    ((np.zeros((4, 8), np.float32),) * 2, ("takes 1 input(s)", "got 2")),
    ((np.zeros((8, 4), np.float32),), ("argument 'X'", "shape (8, 4); expected (4, 8)")),
    ((np.zeros((4, 8), np.float64),), ("argument 'X'", "dtype float64; expected float32")),
    (("text",), ("argument 'X'", "must be a NumPy array", "got str")),
], ids=["number", "too_many", "shape", "dtype", "type"])
def test_wrong_call_arguments(args, fragments):
    kernel = _copy_kernel()
    with pytest.raises(ArgumentError) as info:
        kernel(*args)
    check_located(info.value, "call_args", *fragments)


def test_located_error_has_no_compiler_frames_in_message():
    @kernel_error
    def err(X: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "float32")):
        with T.Kernel(1) as bx:
            T.frobnicate(X)  # ERR:frames
    assert not re.search(r"File \".*tilelang_mini", str(err))
    check_located(err, "frames")


def _gm_tile_op(kind):
    @T.prim_func
    def main(X: T.Tensor((4, 16), "float32"), A: T.Tensor((4, 16), "float32"),
             S: T.Tensor((4,), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((4, 16), "float32")
            s = T.alloc_fragment((4,), "float32")
            if kind == "fill":
                T.fill(A[0:2, :], 1.5)  # ERR:gm_fill
            elif kind == "clear":
                T.clear(A)  # ERR:gm_clear
            elif kind == "reduce_src":
                T.reduce_sum(X, s, dim=1)  # ERR:gm_reduce_src
            else:
                T.copy(X, x)
                T.reduce_max(x, S, dim=1)  # ERR:gm_reduce_dst
            T.copy(x, A)
            T.copy(s, S)
    return main


@pytest.mark.parametrize("kind,op,name", [("fill", "fill", "A"), ("clear", "fill", "A"),
                                          ("reduce_src", "reduce_sum", "X"),
                                          ("reduce_dst", "reduce_max", "S")])
def test_fill_or_reduce_of_a_global_tensor_is_located(kind, op, name, target):
    """T.fill / T.clear / T.reduce_* on a GM tensor: no vector pipe reaches GM (it was an
    internal error 'instruction without a core or pipe after split_cores')."""
    with pytest.raises(CompileError) as info:
        tilelang_mini.compile(_gm_tile_op(kind), out_idx=[-1], target=target)
    check_located(info.value, f"gm_{kind}", f"{op} works on on-chip tiles",
                  f"'{name}' is a global tensor")
