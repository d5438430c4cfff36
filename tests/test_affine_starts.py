"""Region starts affine in the variables (semantics.ops.affine_starts) give what the general
closures give, and every other value of a variable goes to the general closure (its value or its
fault); the gemm's widening chosen once (exprs.to_f32_fn) gives to_f32's bits."""
import numpy as np
import pytest

from tilelang_mini.ir.nodes import BinOp, Buffer, Const, Load, Region, Var
from tilelang_mini.semantics.exprs import Env, Fault, to_f32, to_f32_fn
from tilelang_mini.semantics.ops import compile_expr, compile_starts, int_affine

i, j, k = Var("i"), Var("j"), Var("k")
BUF = Buffer("A", (4096, 4096), "float16", "global")


def _general(starts, env):
    out = []
    for e in starts:
        v = compile_expr(e)[0](env)
        if not isinstance(v, int):
            raise Fault("not an int")
        out.append(v)
    return tuple(out)


AFFINE = [
    (BinOp("*", BinOp("//", i, Const(1)), Const(64)), BinOp("*", BinOp("*", j, Const(2)), Const(32))),
    (BinOp("+", BinOp("*", i, Const(3)), BinOp("-", Const(7), j)), BinOp("%", k, Const(1))),
    (BinOp("-", BinOp("*", Const(5), BinOp("+", i, k)), BinOp("*", j, Const(4))), Const(9)),
]


@pytest.mark.parametrize("starts", AFFINE)
def test_affine_starts_equal_the_general_closures(starts):
    assert all(int_affine(e) is not None for e in starts)
    fn = compile_starts(Region(BUF, starts, (64, 32)))
    rng = np.random.default_rng(0)
    for _ in range(50):
        vs = {n: int(x) for n, x in zip("ijk", rng.integers(-50, 50, 3))}
        env = Env(vs, {})
        got = fn(env)
        assert got == _general(starts, env)
        assert all(type(x) is int for x in got)


def test_not_affine_forms():
    assert int_affine(BinOp("*", i, j)) is None                 # a product of variables
    assert int_affine(BinOp("//", i, Const(2))) is None         # a real division
    assert int_affine(Load(Buffer("ids", (4,), "int32", "UB"), (i,))) is None
    assert int_affine(Var("x", "float32")) is None
    assert int_affine(Const(2.0, "float32")) is None


def test_other_values_go_to_the_general_closure():
    fn = compile_starts(Region(BUF, AFFINE[0], (64, 32)))
    with pytest.raises(Fault, match="not bound"):
        fn(Env({"i": 1}, {}))                                   # j unbound: the general fault
    with pytest.raises(Fault, match="scalar integer"):
        fn(Env({"i": np.arange(3), "j": 0}, {}))                # an index array
    assert fn(Env({"i": np.int64(2), "j": np.int32(1)}, {})) == (128, 64)   # NumPy integers
    mod = compile_starts(Region(BUF, AFFINE[1], (64, 32)))      # `k % 1` still reads k
    with pytest.raises(Fault, match="scalar integer"):
        mod(Env({"i": 1, "j": 2, "k": np.arange(2)}, {}))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "int8"])
@pytest.mark.parametrize("shape", [(64, 32), (128, 64)])
def test_to_f32_fn_gives_to_f32(dtype, shape):
    from tilelang_mini.ir import dtypes
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(shape) * 100).astype(dtypes.to_numpy(dtype))
    want = to_f32(x)
    for contiguous in (False, True):
        got = to_f32_fn(dtype, x.size, contiguous)(x)
        assert got.dtype == np.float32 and got.tobytes() == want.tobytes()
    part = x[:, : shape[1] // 2]                                # a strided view
    assert to_f32_fn(dtype, part.size)(part).tobytes() == to_f32(part).tobytes()
