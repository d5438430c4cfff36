"""Errors say who is at fault: CompileError (the kernel), KernelRuntimeError (a fault while
running), InternalCompilerError (a compiler bug: names the stage, asks for a report)."""
# No `from __future__ import annotations`: kernels need their T.Tensor annotations as objects.
from pathlib import Path

import numpy as np
import pytest

from markers import Marked
import tilelang_mini
import tilelang_mini.language as T
from tilelang_mini import (
    CompileError, InternalCompilerError, KernelRuntimeError, TileLangMiniError,
)

MARKED = Marked(__file__)
THIS = MARKED.path
line_of = MARKED.line_of


def _fill_kernel():
    @T.prim_func
    def k(X: T.Tensor((16,), "float32"), Y: T.Tensor((16,), "float32")):  # AT:def
        with T.Kernel(1) as bx:
            t = T.alloc_fragment((16,), "float32")
            T.copy(X, t)
            T.fill(t, 2.0)  # AT:fill
            T.copy(t, Y)
    return k


def _oob_kernel():
    @T.prim_func
    def k(X: T.Tensor((8,), "float32"), I: T.Tensor((2,), "int32"),
          Y: T.Tensor((8,), "float32")):
        with T.Kernel(1) as bx:
            t = T.alloc_fragment((8,), "float32")
            T.copy(X, t)
            j = I[0]
            t[j] = 1.0  # AT:oob
            T.copy(t, Y)
    return k


def test_the_classes_are_distinct():
    assert not issubclass(InternalCompilerError, CompileError)
    assert not issubclass(KernelRuntimeError, CompileError)
    assert not issubclass(CompileError, (InternalCompilerError, KernelRuntimeError))
    for cls in (CompileError, InternalCompilerError, KernelRuntimeError):
        assert issubclass(cls, TileLangMiniError)


def test_a_codegen_bug_is_an_internal_error(monkeypatch):
    """A KeyError raised inside the llvm code generator is the compiler's bug, not the user's."""
    from backends.llvm import codegen_ops

    def broken(g, s):
        raise KeyError("no such layout")

    monkeypatch.setattr(codegen_ops, "fill", broken)
    monkeypatch.setenv("TILELANG_MINI_CACHE", "0")
    with pytest.raises(InternalCompilerError) as info:
        tilelang_mini.compile(_fill_kernel(), out_idx=[-1], target="llvm")
    err = info.value
    assert not isinstance(err, CompileError)
    text = str(err)
    assert "internal compiler error" in text and "please report" in text
    assert "llvm code generator" in text and "KeyError" in text
    # at the statement being emitted, or at the kernel when it was emitted as part of a group
    assert Path(err.loc.file).resolve() == THIS and line_of("def") <= err.loc.line <= line_of("fill") + 1
    assert "Traceback" not in text


def test_a_pass_bug_is_an_internal_error_naming_the_pass(monkeypatch):
    from tilelang_mini.transform import pipeline

    def broken(kernel, chip):
        raise ValueError("offset went negative")

    monkeypatch.setattr(pipeline, "plan_memory", broken)
    with pytest.raises(InternalCompilerError) as info:
        tilelang_mini.compile(_fill_kernel(), out_idx=[-1], target="numpy")
    text = str(info.value)
    assert "'plan_memory' pass" in text and "please report" in text
    assert "ValueError: offset went negative" in text
    assert info.value.stage == "the 'plan_memory' pass"


def test_an_ir_the_verifier_rejects_after_a_pass_is_an_internal_error(monkeypatch):
    from tilelang_mini.transform import pipeline
    from tilelang_mini.ir.nodes import Kernel
    from dataclasses import replace

    def broken(kernel, chip):  # a pass that drops the allocations it should place
        return replace(kernel, body=tuple(s for s in kernel.body
                                          if type(s).__name__ != "Alloc"))

    monkeypatch.setattr(pipeline, "plan_memory", broken)
    with pytest.raises(InternalCompilerError) as info:
        tilelang_mini.compile(_fill_kernel(), out_idx=[-1], target="numpy")
    assert "plan_memory" in str(info.value)
    assert isinstance(Kernel, type)


def test_a_fault_while_running_is_a_runtime_error(target):
    kernel = tilelang_mini.compile(_oob_kernel(), out_idx=[-1], target=target)  # compiles
    with pytest.raises(KernelRuntimeError) as info:
        kernel(np.zeros(8, np.float32), np.array([9, 0], np.int32))
    err = info.value
    assert not isinstance(err, CompileError)
    assert err.loc.line == line_of("oob") and Path(err.loc.file).resolve() == THIS
    assert "out of bounds" in err.message
    assert "Traceback" not in str(err)


NAN_START_IR = '''@prim_func(source="nan_start.py")
def main(X: Tensor((4, 16), "float32"), Y: Tensor((16,), "float32")):
    with Kernel(1, 1) as (bx, by):
        t = alloc_ub((16,), "float32")
        for k in serial(2):
            copy(X[k * inf +: 1, 0 +: 16], t)  # 6:13
        copy(t, Y[0 +: 16])
'''


def test_a_nan_region_start_is_a_runtime_error_in_the_simulator_too():
    # IR text whose region start evaluates to nan (the fuzzer's sim-nan-region): the interpreter
    # and the simulator both report the located run-time fault, not an internal error.
    kernel = tilelang_mini.compile_ir(NAN_START_IR, out_idx=[-1], target="numpy")
    x = np.zeros((4, 16), np.float32)
    for run in (kernel, kernel.simulate):
        with pytest.raises(KernelRuntimeError) as info:
            run(x)
        assert (info.value.loc.line, info.value.loc.col) == (6, 13)
        assert "must be an integer" in info.value.message and "nan" in info.value.message


def test_running_out_of_memory_is_not_an_internal_error():
    """A MemoryError escaping a stage means the kernel is too large for this machine: a located
    KernelRuntimeError while running, a CompileError while compiling (never 'a bug')."""
    from tilelang_mini.errors import internal_error
    from tilelang_mini.ir.nodes import Loc
    loc = Loc("k.py", 3, 5)
    run = internal_error(MemoryError("Unable to allocate 8 TiB"), "the numpy backend's run", loc)
    assert type(run) is KernelRuntimeError and run.loc == loc and "out of memory" in run.message
    comp = internal_error(MemoryError("x"), "the 'plan_memory' pass", loc)
    assert type(comp) is CompileError and "too large for this machine" in comp.message
    assert isinstance(internal_error(KeyError("x"), "the numpy backend's run", loc),
                      InternalCompilerError)
