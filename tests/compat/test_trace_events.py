"""TileLang's in-kernel event tracing (tools.cuda.iket, examples/iket): `with T.Kernel(n) as
bx, iket.range(name):`, `with iket.range(name):` and `iket.mark(name, payload=...)` change no
value; they are accepted and recorded in the kernel's hints. Also `with T.Kernel():` (no grid:
one block, TileLang's AutoDD example) and `with T.Kernel(n):` without `as`. Both targets and
the simulator against float64 NumPy references; misuses are located errors."""
import numpy as np
import pytest

import tilelang_mini
import tilelang_mini.language as T
from tilelang_mini.ir.parser import parse_ir
from tilelang_mini.ir.printer import print_ir
from tilelang_mini.tools.cuda import iket

from util import close, f64, rand

N, TH = 300, 128


@T.prim_func
def traced_add(A: T.Tensor((N,), T.float32), B: T.Tensor((N,), T.float32),
               C: T.Tensor((N,), T.float32)):
    with T.Kernel(T.ceildiv(N, TH), threads=TH) as bx, iket.range("block"):
        iket.mark("enter", payload=iket.payload(bx, dtype="int32"))
        with iket.range("body"):
            for i in T.Parallel(TH):
                idx = bx * TH + i
                if idx < N:
                    iket.mark("store", payload=iket.payload(idx, dtype="int32"))
                    C[idx] = A[idx] * 2.0 + B[idx]


def test_trace_events_change_nothing(target):
    hints = [h.split(" @ ")[0] for h in traced_add.ir.hints]
    assert [h for h in hints if "iket" in h] == [
        "iket.range('block')", "iket.mark('enter', payload=iket.payload(bx, dtype='int32'))",
        "iket.range('body')", "iket.mark('store', payload=iket.payload(idx, dtype='int32'))"]
    assert parse_ir(print_ir(traced_add.ir)) == traced_add.ir
    a, b = rand((N,), seed=1), rand((N,), seed=2)
    want = f64(a) * 2 + f64(b)
    with iket.session(output_dir="/tmp/tlm-iket-test"):
        kern = tilelang_mini.compile(traced_add, out_idx=-1, target=target)
        assert iket.output_dir() == "/tmp/tlm-iket-test" and iket.trace_files() == []
    assert iket.output_dir() is None
    close(np.asarray(kern(a, b)), want)
    if target == "numpy":
        close(np.asarray(kern.simulate(a, b)[0]), want)


@T.prim_func
def one_block(A: T.Tensor((64, 32), T.float16), B: T.Tensor((32, 16), T.float16),
              C: T.Tensor((64, 16), T.float32)):
    with T.Kernel():
        a = T.alloc_shared((64, 32), T.float16)
        b = T.alloc_shared((32, 16), T.float16)
        c = T.alloc_fragment((64, 16), T.float32)
        T.copy(A, a)
        T.copy(B, b)
        T.gemm(a, b, c, clear_accum=True)
        T.copy(c, C)


def test_kernel_without_grid_is_one_block(target):
    a, b = rand((64, 32), "float16", 3), rand((32, 16), "float16", 4)
    kern = tilelang_mini.compile(one_block, out_idx=-1, target=target)
    close(np.asarray(kern(a, b)), f64(a) @ f64(b), reduce_len=32)
    if target == "numpy":
        close(np.asarray(kern.simulate(a, b)[0]), f64(a) @ f64(b), reduce_len=32)


def test_other_with_item_is_located():
    with pytest.raises(tilelang_mini.CompileError) as e:
        @T.prim_func
        def bad(A: T.Tensor((8,), T.float32)):
            with T.Kernel(1) as bx, T.Scope("V"):
                A[bx] = 1.0
    text = str(e.value)
    assert "no other item than trace ranges" in text and "test_trace_events.py:" in text
    assert "tilelang_mini/" not in text


def test_trace_event_outside_a_kernel_says_where():
    with pytest.raises(RuntimeError, match="inside a T.prim_func kernel"):
        iket.mark("x")
