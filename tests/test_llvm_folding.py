"""The llvm code generator's builder folds scalar integer constants as it emits
(backends/llvm/irutil.FoldingBuilder): folded values equal what LLVM computes and identities
return the operand. (Code that branches on a folded test must look at its value: a pipelined
copy whose source lies past the tensor's end, known at compile time, took the unchecked fast
copy when the folded in-bounds test was taken for true; tests/test_examples.py runs flash
attention on llvm, which has one.)"""
import ctypes

import llvmlite.binding as llvm
import llvmlite.ir as ir

from backends.llvm.irutil import FoldingBuilder
from backends.llvm.runtime import host_target

I1, I64 = ir.IntType(1), ir.IntType(64)


def _builder():
    mod = ir.Module("fold")
    fn = ir.Function(mod, ir.FunctionType(I64, [I64]), "f")
    return mod, fn, FoldingBuilder(fn.append_basic_block("entry"))


def _c(v, t=I64):
    return ir.Constant(t, v)


def test_constants_fold_to_constants_and_identities_return_the_operand():
    _, fn, b = _builder()
    x = fn.args[0]
    assert b.add(_c(3), _c(4)).constant == 7
    assert b.sub(_c(3), _c(4)).constant == -1
    assert b.mul(_c(-3), _c(4)).constant == -12
    assert b.mul(_c(2 ** 62), _c(4)).constant == 0            # wraps like i64 arithmetic
    assert b.add(_c(2 ** 63 - 1), _c(1)).constant == -2 ** 63
    assert b.add(x, _c(0)) is x and b.add(_c(0), x) is x and b.sub(x, _c(0)) is x
    assert b.mul(x, _c(1)) is x and b.mul(_c(1), x) is x
    assert b.mul(x, _c(0)).constant == 0
    for op, want in (("<", True), ("<=", True), (">", False), (">=", False), ("==", False),
                     ("!=", True)):
        got = b.icmp_signed(op, _c(-5), _c(3))
        assert isinstance(got, ir.Constant) and bool(got.constant) is want, op
    y = b.add(x, _c(1))
    assert b.select(_c(1, I1), x, y) is x and b.select(_c(0, I1), x, y) is y
    t = b.icmp_signed("<", x, _c(9))
    assert b.and_(_c(1, I1), t) is t and b.and_(t, _c(1, I1)) is t
    assert b.or_(_c(0, I1), t) is t and b.or_(t, _c(0, I1)) is t
    assert b.and_(_c(1, I1), _c(0, I1)).constant == 0
    assert b.or_(_c(6), _c(3)).constant == 7
    # values that are not both constant are still instructions
    assert isinstance(b.add(x, _c(2)), ir.Instruction)
    assert isinstance(b.icmp_signed("<", x, _c(2)), ir.Instruction)


def test_folded_and_unfolded_code_compute_the_same_values():
    """f(x) built with folding and the same expression tree built by LLVM agree on a range of
    x (the folds leave a different but equivalent instruction stream)."""
    def build(builder_cls, name, mod):
        fn = ir.Function(mod, ir.FunctionType(I64, [I64]), name)
        b = builder_cls(fn.append_basic_block("entry"))
        x = fn.args[0]
        k = b.mul(b.add(_c(3), _c(5)), _c(1))                       # 8
        v = b.add(b.mul(x, k), b.sub(_c(0), _c(7)))                 # 8x - 7
        inb = b.and_(b.icmp_signed(">=", _c(0), _c(0)), b.icmp_signed("<", v, _c(40)))
        v = b.select(inb, v, b.mul(v, _c(0)))
        b.ret(b.add(v, b.mul(_c(2), x)))
        return fn
    mod = ir.Module("cmp")
    mod.triple = llvm.get_process_triple()
    build(FoldingBuilder, "folded", mod)
    build(ir.IRBuilder, "plain", mod)
    t = host_target()
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(str(mod)), t.new_machine())
    engine.finalize_object()
    proto = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64)
    folded = proto(engine.get_function_address("folded"))
    plain = proto(engine.get_function_address("plain"))
    for x in range(-10, 12):
        want = (8 * x - 7 if 8 * x - 7 < 40 else 0) + 2 * x
        assert folded(x) == plain(x) == want


def test_repeated_scalar_arithmetic_in_a_block_is_one_instruction_and_not_across_blocks():
    mod, fn, b = _builder()
    x = fn.args[0]
    first = b.add(b.mul(x, _c(128)), _c(16))
    again = b.add(b.mul(x, _c(128)), _c(16))
    assert again is first
    assert b.add(b.mul(x, _c(128)), _c(32)) is not first   # another constant: another value
    other = fn.append_basic_block("other")
    b.branch(other)
    b.position_at_end(other)
    there = b.add(b.mul(x, _c(128)), _c(16))
    assert there is not first                               # the earlier block may not dominate
    b.ret(there)
    llvm.parse_assembly(str(mod)).verify()


def test_runs_covers_each_lane_once_and_emits_no_dead_tail():
    """access.runs(lo, hi): whole vectors, then one masked tail; with constant bounds a tail
    that can never run (whole vectors) or a loop with no whole vector is not emitted at all.
    Each chunk stores its lane indices t0 + i: every element of [lo, hi) is written once with
    its index, nothing outside it."""
    import types

    import numpy as np

    from backends.llvm.access import runs
    from backends.llvm.irutil import PTR, VL, Emitter

    cases = [(0, 4 * VL, False), (3, 3 + 2 * VL, False), (0, VL - 5, True), (5, 5 + VL + 7, True),
             (2, 2, False), (0, None, True)]   # None: hi is the function's argument
    for lo, hi, tail in cases:
        mod = ir.Module("runs")
        fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [PTR, I64]), "f")
        e = Emitter(mod, fn)
        g = types.SimpleNamespace(e=e)
        masks = []

        def chunk(t0, mask, e=e, out=fn.args[0]):
            masks.append(mask is not None)
            v = e.b.add(e.splat(t0), e.iota())
            at = e.gep(out, e.b.mul(t0, _c(8)))
            e.store(v, at) if mask is None else e.masked_store(v, at, mask)

        runs(g, _c(lo), _c(hi) if hi is not None else fn.args[1], chunk)
        e.b.ret_void()
        text = str(mod)
        assert ("br i1 0," in text or "br i1 false" in text) is False
        assert (True in masks) == tail and masks.count(True) <= 1
        n = 3 * VL + 1 if hi is None else hi
        out = np.full(n + VL, -1, np.int64)
        m = llvm.parse_assembly(text)
        t = host_target()
        m.triple, m.data_layout = t.triple, t.data_layout
        engine = llvm.create_mcjit_compiler(m, t.new_machine())
        engine.finalize_object()
        f = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64)(
            engine.get_function_address("f"))
        f(out.ctypes.data, n)
        want = np.full(n + VL, -1, np.int64)
        want[lo:n] = np.arange(lo, n)
        np.testing.assert_array_equal(out, want, err_msg=f"lo={lo} hi={hi}")
