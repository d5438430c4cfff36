"""Serial loop nests whose iterations are independent (ir.analysis.independent_nest) run as one
Parallel map on the numpy target; nests whose iterations meet stay serial. Each kernel against a
NumPy reference, and the map's run against the serial run of the same nest (bit for bit)."""
from __future__ import annotations

import numpy as np
import pytest

import tilelang_mini
import tilelang_mini.language as T
from tilelang_mini.ir.analysis import independent_nest
from tilelang_mini.ir.nodes import For, walk
import tilelang_mini.semantics.run as run


def _nests(kernel):
    """The outermost serial loops of the lowered kernel."""
    out, inner = [], set()
    for n in walk(kernel):
        if isinstance(n, For) and n.kind == "serial" and id(n) not in inner:
            out.append(n)
            inner |= {id(m) for m in walk(n) if m is not n}
    return out


def _masked_copy(M, N):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(1) as bx:
            a = T.alloc_fragment((M, N), "float32")
            z = T.alloc_fragment((M, N), "float32")
            T.copy(A[0, 0], a)
            T.fill(z, 0.0)
            for j in T.serial(M):
                for k in T.serial(N):
                    if j + bx * 2 < k:
                        a[j, k] = z[j, k] + a[j, k] * 0.5
            T.copy(a, B[0, 0])
    return main


def _prefix_sum(N):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(1):
            a = T.alloc_fragment((N,), "float32")
            T.copy(A[0], a)
            for i in T.serial(N - 1):
                a[i + 1] = a[i + 1] + a[i]      # reads what the previous iteration wrote
            T.copy(a, B[0])
    return main


def _row_sum(M, N):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, 1), "float32")):
        with T.Kernel(1):
            a = T.alloc_fragment((M, N), "float32")
            s = T.alloc_fragment((M, 1), "float32")
            T.copy(A[0, 0], a)
            T.fill(s, 0.0)
            for i in T.serial(M):
                for j in T.serial(N):
                    s[i, 0] = s[i, 0] + a[i, j]     # every j writes the same element
            T.copy(s, B[0, 0])
    return main


def _serial_result(k, args):
    """The kernel's outputs with every serial nest run as loops (independent_nest disabled)."""
    saved = run.independent_nest
    run.independent_nest = lambda s: None
    try:
        kernel = tilelang_mini.compile(k, out_idx=[-1], target="numpy")
        return kernel(*args)
    finally:
        run.independent_nest = saved


def test_masked_nest_runs_as_a_map():
    M, N = 12, 20
    prim = _masked_copy(M, N)
    k = tilelang_mini.compile(prim, out_idx=[-1], target="numpy")
    nests = _nests(k.artifact.kernel)
    assert nests and all(independent_nest(s) is not None for s in nests)
    m = independent_nest(nests[0])
    assert m.kind == "parallel" and len(m.vars) == 2 and m.body == nests[0].body[0].body
    x = np.random.default_rng(1).standard_normal((M, N)).astype(np.float32)
    got = k(x)
    j, c = np.indices((M, N))
    want = np.where(j < c, x.astype(np.float64) * 0.5, x)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    np.testing.assert_array_equal(got, _serial_result(prim, [x]))


@pytest.mark.parametrize("make, ref", [
    (lambda: _prefix_sum(33), lambda x: np.cumsum(x.astype(np.float64))),
    (lambda: _row_sum(6, 9), lambda x: x.astype(np.float64).sum(axis=1, keepdims=True)),
])
def test_nests_whose_iterations_meet_stay_serial(make, ref):
    prim = make()
    k = tilelang_mini.compile(prim, out_idx=[-1], target="numpy")
    nests = _nests(k.artifact.kernel)
    assert nests and all(independent_nest(s) is None for s in nests)
    shape = k.artifact.kernel.params[0].shape
    x = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
    np.testing.assert_allclose(k(x), ref(x), rtol=1e-5, atol=1e-5)
