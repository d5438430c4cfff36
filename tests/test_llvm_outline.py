"""Repeated serial loops share one function (backends/llvm/outline.py): the results equal a
float64 NumPy reference and the interpreter, the module holds one function per shape, and a
call whose parameters' intervals differ where the generator used them gets its own."""
import numpy as np
import pytest

from backends.llvm import BACKEND
from backends.llvm.codegen import build
from backends.llvm.runtime import _features, host_target
from backends.numpy import BACKEND as NUMPY
from tilelang_mini.errors import KernelRuntimeError
from tilelang_mini.ir.nodes import Buffer, Call, For, Load, Store
from tilelang_mini.transform.pipeline import Options, run_target_passes

from irbuild import add, c, kernel, mul, v

RNG = np.random.default_rng(3)


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_CACHE_DIR", str(tmp_path / "cache"))


def row_loop(X, Y, S, plane):
    """for r: Y[plane, r, :] = exp(X[plane, r, :]) * 2; S[plane, r, :] = Y[...] + X[...];
    Y[plane, r, :] += r (three maps: a loop worth sharing)."""
    at = (plane, v("r"), v("j"))
    x, y = Load(X, at), Load(Y, at)
    maps = [Store(Y, at, mul(Call("exp", (x,)), c(2.0))), Store(S, at, add(y, x)),
            Store(Y, at, add(y, v("r")))]
    return For(("r",), (c(X.shape[1]),), "serial",
               tuple(For(("j",), (c(X.shape[2]),), "parallel", (m,)) for m in maps))


def lowered(k):
    return run_target_passes(k, BACKEND.pass_options(Options(target="llvm"), {}), verify=True)


def loop_functions(k) -> list:
    """The text of each shared loop function of k's module."""
    module, _ = build(lowered(k), _features(host_target(), {}))
    return [f for f in str(module).split("\ndefine ")[1:] if f.startswith('internal i32 @"tlm_loop')]


def test_loops_of_one_shape_share_a_function_and_match_numpy():
    """Two blocks x two planes each: the four loop instances differ in their plane
    (bx * 2 + p, a parameter) and share one function."""
    X, Y, S = (Buffer(n, (4, 8, 16), "float32") for n in "XYS")
    body = [row_loop(X, Y, S, add(mul(v("bx"), c(2)), c(p))) for p in (0, 1)]
    k = kernel((X, Y, S), body, grid=(2,))
    assert len(loop_functions(k)) == 1
    x = RNG.uniform(-1, 1, (4, 8, 16)).astype(np.float32)
    outs = {}
    for name, be in (("llvm", BACKEND), ("numpy", NUMPY)):
        y, s = np.zeros_like(x), np.zeros_like(x)
        be.run(be.lower(lowered(k) if name == "llvm" else k, {}), [x.copy(), y, s])
        outs[name] = (y, s)
    x64 = x.astype(np.float64)
    want_s = np.exp(x64) * 2 + x64
    want_y = np.exp(x64) * 2 + np.arange(8)[None, :, None]
    for y, s in outs.values():
        np.testing.assert_allclose(s, want_s, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(y, want_y, rtol=1e-5, atol=1e-6)


def test_a_loop_used_once_stays_inline():
    X, Y, S = (Buffer(n, (2, 8, 16), "float32") for n in "XYS")
    assert loop_functions(kernel((X, Y, S), [row_loop(X, Y, S, v("bx"))], grid=(2,))) == []


def test_a_shared_body_checks_the_bounds_its_loops_do_not_all_prove():
    """Planes bx * 2 + p for bx in [0, 1]: with p in (0, 1) every loop is inside X and the
    shared body checks nothing (no error return); with p in (0, 3) the plane 5 of bx = 1 is not,
    the body assumes the hull [0, 5] and stops the kernel with an out-of-bounds error."""
    X, Y, S = (Buffer(n, (4, 8, 16), "float32") for n in "XYS")
    for planes, fails in (((0, 1), False), ((0, 3), True)):
        body = [row_loop(X, Y, S, add(mul(v("bx"), c(2)), c(p))) for p in planes]
        k = kernel((X, Y, S), body, grid=(2,))
        (fn,) = loop_functions(k)
        assert ("ret i32 1" in fn) == fails
        x = np.zeros((4, 8, 16), np.float32)
        args = [x, np.zeros_like(x), np.zeros_like(x)]
        if fails:
            with pytest.raises(KernelRuntimeError, match="out of bounds"):
                BACKEND.run(BACKEND.lower(lowered(k), {}), args)
        else:
            BACKEND.run(BACKEND.lower(lowered(k), {}), args)
            np.testing.assert_array_equal(args[1], 2 + np.arange(8.0)[None, :, None] + x)
