"""The 16 x 16 register transpose of the transposed GEMM packs (backends/llvm/packing.py
`transpose16`), alone in a small module: with and without the inline-asm barriers between its
rounds (the barriers need 512-bit registers; other hosts get none), it transposes any block,
rows of zeros included (the packs pad rows past N with zeros)."""
import ctypes

import llvmlite.binding as llvm
import llvmlite.ir as ir
import numpy as np
import pytest

from backends.llvm.irutil import F32, I64, PTR, VL, Emitter, vty
from backends.llvm.packing import transpose16
from backends.llvm.runtime import host_target

RNG = np.random.default_rng(5)


def jit_transpose(opaque: bool, zero_rows=()):
    """void f(float *src, float *dst): dst (16 x 16) = transpose(src) with the rows in
    `zero_rows` taken as the zero constant (not loaded)."""
    module = ir.Module(name="t16")
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR, PTR]), "t16")
    e = Emitter(module, fn)
    src, dst = fn.args
    rows = [ir.Constant(vty(F32), None) if r in zero_rows else
            e.b.load(e.b.gep(src, [ir.Constant(I64, 4 * VL * r)], source_etype=ir.IntType(8)),
                     typ=vty(F32), align=4) for r in range(VL)]
    for c, col in enumerate(transpose16(e, rows, opaque)):
        e.b.store(col, e.b.gep(dst, [ir.Constant(I64, 4 * VL * c)], source_etype=ir.IntType(8)),
                  align=4)
    e.b.ret_void()
    t = host_target()
    mod = llvm.parse_assembly(str(module))
    mod.triple, mod.data_layout = t.triple, t.data_layout
    engine = llvm.create_mcjit_compiler(mod, t.new_machine())
    engine.finalize_object()
    f = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)(engine.get_function_address("t16"))
    return f, engine


@pytest.mark.parametrize("opaque", [False, True])
@pytest.mark.parametrize("zero_rows", [(), (3, 8, 15), tuple(range(8, VL))])
def test_transpose16(opaque, zero_rows):
    if opaque and not host_target().avx512:
        pytest.skip("the barriers pass 512-bit vectors through inline asm: AVX-512 hosts only")
    f, _engine = jit_transpose(opaque, zero_rows)
    a = RNG.standard_normal((VL, VL)).astype(np.float32)
    out = np.full((VL, VL), np.nan, np.float32)
    f(a.ctypes.data, out.ctypes.data)
    want = a.copy()
    want[list(zero_rows)] = 0.0
    np.testing.assert_array_equal(out, want.T)
