"""The llvm target's split_maps pass (transform/cpu_maps.py): a Parallel map becomes maps of
stores that run in one lane loop each: its rewrite on a small kernel (golden IR), the shape of
what it leaves (what the code generator relies on), that the interpreter computes the same on the
IR before and after (bit for bit), and the kernel on both targets against a float64 reference."""
from pathlib import Path

import numpy as np
import pytest

import tilelang_mini
import tilelang_mini.language as T
from backends.numpy import BACKEND as NUMPY
from tilelang_mini.ir.analysis import SYNC_OPS, is_map
from tilelang_mini.ir.nodes import Alloc, For, If, Store, walk_statements
from tilelang_mini.ir.printer import print_ir
from tilelang_mini.transform.cpu_maps import map_group_ok, split_maps
from tilelang_mini.transform.pipeline import Options, run_pipeline, stages_for

from goldens import check_golden

ROOT = Path(__file__).resolve().parent.parent
M, N, K = 16, 16, 3


@pytest.fixture(autouse=True)
def _at_root(monkeypatch):
    monkeypatch.chdir(ROOT)  # printed IR names sources relative to the working directory


def mixed_maps():
    """One map with every case of the pass: a fusable pair, a store reading the pair's output
    at other indices, a serial loop, a store reading its own target transposed, a masked
    store with an else, and a uniform if."""
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), W: T.Tensor((K, N), "float32"),
             n: T.Tensor((1,), "int32"), Z: T.Tensor((M, N), "float32"),
             X: T.Tensor((M, N), "float32")):
        with T.Kernel(1) as bx:
            a = T.alloc_fragment((M, N), "float32")
            b = T.alloc_fragment((K, N), "float32")
            x = T.alloc_fragment((M, N), "float32")
            y = T.alloc_fragment((M, N), "float32")
            z = T.alloc_fragment((M, N), "float32")
            T.copy(A, a)
            T.copy(W, b)
            for i, j in T.Parallel(M, N):
                x[i, j] = a[i, j] + 1.0
                y[i, j] = x[i, j] * 2.0
                z[i, j] = y[i, N - 1 - j]
                for k in T.serial(K):
                    z[i, j] = z[i, j] + b[k, j]
                x[i, j] = x[j, i] - z[i, j]
                if a[i, j] > 0.0:
                    z[i, j] = z[i, j] * 0.5
                else:
                    z[i, j] = z[N - 1 - i, j]
                if n[0] > 2:
                    x[i, j] = x[i, j] + 3.0
            T.copy(z, Z)
            T.copy(x, X)
    return main


def reference(A, W, n):
    a, w = A.astype(np.float64), W.astype(np.float64)
    x = a + 1.0
    y = x * 2.0
    z = y[:, ::-1].copy()
    for k in range(K):
        z = z + w[k]
    x = x.T - z
    z = np.where(a > 0.0, z * 0.5, z)        # the then branch runs first,
    z = np.where(a > 0.0, z, z[::-1, :])     # then the else branch (reading its result)
    if n[0] > 2:
        x = x + 3.0
    return z, x


def inputs(seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((M, N)).astype(np.float32),
            rng.standard_normal((K, N)).astype(np.float32), np.array([5], np.int32))


def before_split_maps(names):
    """The stage split_maps runs after (the passes after it only mark copies and allocations)."""
    return names[names.index("split_maps") - 1]


def test_split_maps_is_the_last_rewrite_of_the_llvm_list_and_golden():
    names = stages_for("llvm")
    assert names[-3:] == ("split_maps", "mark_dual_copies", "widen_storage")
    st = run_pipeline(mixed_maps().ir, Options(target="llvm"), verify=True).stages
    before, after = st[before_split_maps(names)], st["split_maps"]
    check_golden("split_maps.mixed.ascend910b.before", print_ir(before))
    check_golden("split_maps.mixed.ascend910b.after", print_ir(after))
    assert split_maps(after) == after  # nothing left to split


def test_every_map_is_one_lane_loop_or_one_masked_store():
    after = run_pipeline(mixed_maps().ir, Options(target="llvm")).final
    maps = [s for s in walk_statements(after.body) if is_map(s)]
    assert len(maps) >= 8
    temps = [s for s in walk_statements(after.body) if isinstance(s, Alloc) and s.uninit
             and s.buffer.name.endswith("_rhs")]
    assert len(temps) == 2  # x = x[j, i] - ..., z = z[N - 1 - i, j] under the else
    for m in maps:
        body = [s for s in m.body if not isinstance(s, SYNC_OPS)]
        if all(isinstance(s, Store) for s in body):
            assert map_group_ok(body)
            continue
        assert len(body) == 1 and isinstance(body[0], If)
        stores, ifs = [], [body[0]]
        while ifs:
            s = ifs.pop()
            for t in s.then_body + s.else_body:
                (ifs if isinstance(t, If) else stores).append(t)
        assert len(stores) == 1 and isinstance(stores[0], Store)
    # the serial loop and the uniform if are outside any map
    assert not any(isinstance(t, (For, If)) and not is_map(t) and not isinstance(t, If)
                   for m in maps for t in walk_statements(m.body))


def test_the_interpreter_computes_the_same_before_and_after():
    names = stages_for("llvm")
    st = run_pipeline(mixed_maps().ir, Options(target="llvm")).stages
    A, W, n = inputs(1)
    outs = []
    for k in (st[before_split_maps(names)], st["split_maps"]):
        args = [A, W, n, np.zeros((M, N), np.float32), np.zeros((M, N), np.float32)]
        NUMPY.run(NUMPY.lower(k, {}), args)
        outs.append(args[3:])
    for g, w in zip(*outs):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("target", ["numpy", "llvm"])
@pytest.mark.parametrize("count", [5, 1])
def test_mixed_maps_against_float64(target, count):
    A, W, _ = inputs(2)
    n = np.array([count], np.int32)
    kern = tilelang_mini.compile(mixed_maps(), out_idx=[3, 4], target=target)
    z, x = kern(A, W, n)
    want_z, want_x = reference(A, W, n)
    np.testing.assert_allclose(z, want_z, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(x, want_x, rtol=1e-5, atol=1e-5)


def test_a_hazard_store_in_a_map_of_symbolic_extent_is_located():
    from tilelang_mini.errors import CompileError
    from tilelang_mini.ir.nodes import Buffer, Const, Load, Var, BinOp
    t = Buffer("t", (8,), "float32", "UB")
    i = Var("i")
    s = Store(t, (i,), Load(t, (BinOp("-", Const(7), i),)))
    k = run_pipeline(mixed_maps().ir, Options(target="llvm")).final
    from dataclasses import replace
    bad = replace(k, body=k.body + (Alloc(t), For(("i",), (Var("bx"),), "parallel", (s,))))
    with pytest.raises(CompileError, match="constant extents"):
        split_maps(bad)
