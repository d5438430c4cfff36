"""Every example kernel, lowered for both chips, on small shapes (the examples' own kernels, as
tests/kernels.py loads them):

* the pipe-level simulator runs it clean (no RaceError / DeadlockError / SyncError) and its
  outputs match a float64 NumPy reference;
* `compile_ir` of the printed `insert_sync` IR gives a kernel with the same outputs;
* the IR printed after every stage parses back and prints identically.
"""
import numpy as np
import pytest

import kernels
import tilelang_mini
from tilelang_mini.ir import dtypes
from tilelang_mini.ir.printer import print_ir

CHIPS = ["ascend910b", "ascend950"]


def rand(shape, dtype="float32", seed=0):
    rng = np.random.default_rng(seed + len(shape) * 7 + shape[0])
    return rng.standard_normal(shape).astype(dtypes.to_numpy(dtype))


def f64(*xs):
    return [x.astype(np.float64) for x in xs]


def ref_gemm(a, b):
    a, b = f64(a, b)
    return [a @ b]


def ref_matmul_add(a, b, d):
    a, b, d = f64(a, b, d)
    return [a @ b + d]


def ref_prenorm(a, b):
    a, b = f64(a, b)
    return [a @ b.T, (a * a).sum(axis=1)]


def ref_rmsnorm(x):
    (x,) = f64(x)
    return [x / np.sqrt((x * x).mean(axis=1, keepdims=True) + 1e-6)]


def ref_softmax(x):
    (x,) = f64(x)
    z = np.exp(x - x.max(axis=1, keepdims=True))
    return [z / z.sum(axis=1, keepdims=True)]


def ref_attention(q, k, v):
    q, k, v = f64(q, k, v)
    s = q @ k.transpose(0, 2, 1) / np.sqrt(q.shape[-1])
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return [(p / p.sum(axis=-1, keepdims=True)) @ v]


# name: (factory, args, kwargs, inputs, reference, tolerance dtype). Small shapes with tails.
CASES = {
    "gemm": (kernels.gemm, (70, 45, 33), {"dtype": "float16"},
             lambda: [rand((70, 33), "float16"), rand((33, 45), "float16")], ref_gemm, "float32"),
    "prenorm": (kernels.prenorm, (70, 24, 100), {},
                lambda: [rand((70, 100), "bfloat16"), rand((24, 100))], ref_prenorm, "float32"),
    "rmsnorm": (kernels.rmsnorm, (37, 50), {}, lambda: [rand((37, 50))], ref_rmsnorm, "float32"),
    "softmax": (kernels.softmax, (37, 45), {}, lambda: [rand((37, 45))], ref_softmax, "float32"),
    "matmul_add": (kernels.matmul_add, (70, 45, 33), {},
                   lambda: [rand((70, 33), "float16"), rand((33, 45), "float16"),
                            rand((70, 45))], ref_matmul_add, "float32"),
    "flash_attention": (kernels.flash_attention, (2, 72, 32), {},
                        lambda: [rand((2, 72, 32), "float16", s) for s in (1, 2, 3)],
                        ref_attention, "float16"),
    "gemm_expert": (kernels.gemm_expert, (128, 128, 128), {},
                    lambda: [rand((128, 128), "float16"), rand((128, 128), "float16", 1)],
                    ref_gemm, "float32"),
}

def params():
    return [pytest.param(name, chip, id=f"{name}-{chip}") for name in CASES for chip in CHIPS]


_BUILT = {}


def build(name, chip):
    if (name, chip) not in _BUILT:
        factory, args, kw, *_ = CASES[name]
        _BUILT[name, chip] = kernels.build(factory, *args, chip=chip, **kw)
    return _BUILT[name, chip]


def as_list(out):
    return list(out) if isinstance(out, tuple) else [out]


def check_close(got, want, tol_dtype, scale=1.0):
    rtol, atol = dtypes.tolerance(tol_dtype)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g.astype(np.float64) * scale, w * scale, rtol=rtol,
                                   atol=atol * 4)


@pytest.mark.parametrize("name, chip", params())
def test_simulates_clean_and_matches_numpy(name, chip):
    factory, args, kw, inputs, ref, tol = CASES[name]
    kernel = build(name, chip)
    xs = inputs()
    out, rep = kernel.simulate(*xs)  # raises RaceError / DeadlockError / SyncError
    assert rep.cycles > 0 and rep.instructions > 0
    # softmax entries are about 1/N: compare N * Y
    check_close(as_list(out), ref(*xs), tol, scale=args[1] if name == "softmax" else 1.0)


@pytest.mark.parametrize("name, chip", params())
def test_compile_ir_round_trip(name, chip):
    factory, args, kw, inputs, ref, tol = CASES[name]
    kernel = build(name, chip)
    xs = inputs()
    again = tilelang_mini.compile_ir(kernel.get_ir("insert_sync"), out_idx=factory.out_idx,
                                     chip=chip)
    want = as_list(kernel(*xs))
    got = as_list(again(*xs))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    # ... and the reference
    check_close(got, ref(*xs), tol, scale=args[1] if name == "softmax" else 1.0)


@pytest.mark.parametrize("name, chip", params())
def test_every_stage_prints_and_parses_back(name, chip):
    kernel = build(name, chip)
    stages = list(kernel.compilation.stages)
    assert stages[0] == "frontend" and stages[-1] == "insert_sync"
    for stage in stages:
        text = kernel.get_ir(stage)
        again = str(print_ir(tilelang_mini.parse_ir(text)))
        assert again == text, f"{name} on {chip}: IR after {stage} does not round-trip"


@pytest.mark.parametrize("name, chip", params())
def test_llvm_runs_the_same_lowered_code(name, chip):
    """The llvm backend runs the lowered code of both chips; outputs match the reference."""
    factory, args, kw, inputs, ref, tol = CASES[name]
    kernel = build(name, chip)
    xs = inputs()
    fast = tilelang_mini.compile(factory(*args, **kw), out_idx=factory.out_idx, chip=chip,
                                 target="llvm")
    assert fast.get_ir("insert_sync") == kernel.get_ir("insert_sync")
    check_close(as_list(fast(*xs)), ref(*xs), tol, scale=args[1] if name == "softmax" else 1.0)
