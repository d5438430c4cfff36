"""The batched run of the numpy target (tilelang_mini/semantics/batched.py) against the plain run
block by block (semantics/run.py, the specification): the same bytes in every output, or the
same error, on every example and on generated kernels of every valid fuzz family; and the unit
pieces (the grid of block offsets, the static conditions, the fallbacks)."""
from __future__ import annotations

import importlib
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

import tilelang_mini
import tilelang_mini.language as T
from backends.numpy import BACKEND
from tilelang_mini.ir import dtypes
from tilelang_mini.semantics.batched import why_not_batched
from tilelang_mini.semantics.groups import find_grid

ROOT = Path(__file__).resolve().parents[1]


def _outcome(fn):
    """('ok', [(dtype, shape, bytes)]) of the outputs, or ('error', type, message)."""
    try:
        outs = fn()
    except Exception as e:  # noqa: BLE001 - the outcome is compared
        return ("error", type(e).__name__, str(e))
    outs = outs if isinstance(outs, tuple) else (outs,)
    return ("ok", [(o.dtype.str, o.shape, o.tobytes()) for o in outs])


def run_both(k, args):
    """(which run the batched-capable artifact took, its outcome, the plain run's outcome)."""
    art = k.artifact
    got = _outcome(lambda: k(*[a.copy() for a in args]))
    path = art.last_run[0]
    k.artifact = BACKEND.lower(art.kernel, {"batched": False})
    try:
        want = _outcome(lambda: k(*[a.copy() for a in args]))
    finally:
        k.artifact = art
    return path, got, want


# ----------------------------------------------------------------------------- examples


def _example_kernels():
    sys.path.insert(0, str(ROOT / "examples"))
    out = []
    for path in sorted((ROOT / "examples").glob("[a-z]*.py")):
        mod = importlib.import_module(path.stem)
        for obj in vars(mod).values():
            if type(obj).__name__ == "JITFactory" and hasattr(mod, "DEFAULT_ARGS") \
                    and obj.factory.__module__ == mod.__name__:
                out.append((path.stem, obj))
    return out


def _inputs(k, seed=0):
    rng = np.random.default_rng(seed)
    args = []
    for i, p in enumerate(k.frontend.params):
        if i in k.out_idx or i in k.workspace_idx:
            continue
        dt = dtypes.to_numpy(p.dtype)
        if dtypes.is_float(p.dtype):
            args.append(rng.standard_normal(p.shape).astype(dt))
        else:
            args.append(rng.integers(0, 2, size=p.shape).astype(dt))
    return args


EXAMPLES = _example_kernels()


@pytest.mark.parametrize("chip", ["ascend910b", "ascend950"])
@pytest.mark.parametrize("name,factory", EXAMPLES, ids=[n for n, _ in EXAMPLES])
def test_example_batched_equals_plain(name, factory, chip):
    mod = sys.modules[name]
    k = tilelang_mini.compile(factory.factory(*mod.DEFAULT_ARGS), out_idx=factory.out_idx,
                              target="numpy", chip=chip)
    path, got, want = run_both(k, _inputs(k))
    assert got == want
    if name in ("gemm", "rmsnorm", "softmax", "flash_attention") and chip == "ascend910b":
        assert path == "batched", k.artifact.why_plain


# ------------------------------------------------------------------------- fuzz families


def _fuzz_cases():
    from tilelang_mini.testing.fuzz.families import VALID
    return [(f, s) for f in sorted(VALID) for s in range(3)]


@pytest.mark.parametrize("family,seed", _fuzz_cases())
def test_fuzz_family_batched_equals_plain(family, seed):
    from tilelang_mini.errors import CompileError
    from tilelang_mini.testing.fuzz.case import make_inputs
    from tilelang_mini.testing.fuzz.families import make_case
    from tilelang_mini.testing.fuzz.worker import _load_kernel, base_chip
    case = make_case(family, f"batched-{seed}")
    inputs = make_inputs(case)
    args = [inputs[t.name] for t in case.tensors if not t.output]
    with tempfile.TemporaryDirectory() as tmp:
        try:
            main, _ = _load_kernel(case, tmp)
            k = tilelang_mini.compile(main, out_idx=case.out_idx, target="numpy",
                                      chip=base_chip(case))
            if hasattr(k, "bind"):  # symbolic shapes (the dialect family's T.dynamic rows)
                k = k.specialize(**k.bind(args))
        except CompileError:
            pytest.skip("the generated kernel is rejected (not a run to compare)")
    path, got, want = run_both(k, args)
    assert got == want, (path, case.source)


# ---------------------------------------------------------------------------- the pieces


def test_grid_of_offsets():
    assert find_grid(np.array([0, 128, 32768, 32896])) == [(2, 32768), (2, 128)]
    assert find_grid(np.array([5, 5, 5])) == [(3, 0)]
    assert find_grid(np.arange(12) * 3) == [(12, 3)]
    assert find_grid(np.array([0, 1, 2, 10, 11, 12])) == [(2, 10), (3, 1)]
    assert find_grid(np.array([0, 1, 3])) is None
    assert find_grid(np.array([0, 1, 2, 3, 10, 11])) is None


def _tiles(M, N, bm, write_twice=0, read_out=False):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            a = T.alloc_fragment((bm, N), "float32")
            T.copy(A[bx * bm, 0], a)
            if read_out:
                T.copy(C[bx * bm, 0], a)
            for i, j in T.Parallel(bm, N):
                a[i, j] = a[i, j] * 2.0 + bx
            T.copy(a, C[bx * bm, 0])
            if write_twice == 1:   # every block also writes block 0's rows: the last one wins
                T.copy(a, C[0, 0])
            if write_twice == 2:   # rows half a tile apart: each overlaps its neighbours'
                T.copy(a, C[bx * (bm // 2), 0])
    return main


def test_batched_path_taken_and_edges_clipped():
    # 37 rows in tiles of 8: the last block's copies are clipped (zero-padded reads)
    k = tilelang_mini.compile(_tiles(37, 20, 8), out_idx=[-1], target="numpy")
    x = np.random.default_rng(1).standard_normal((37, 20)).astype(np.float32)
    path, got, want = run_both(k, [x])
    assert path == "batched" and got == want
    ref = x * 2 + (np.arange(37) // 8)[:, None]
    np.testing.assert_array_equal(k(x), ref.astype(np.float32))


def test_elements_written_by_two_blocks_fall_back_to_plain():
    x = np.random.default_rng(2).standard_normal((32, 16)).astype(np.float32)
    # the same region from every block: each group runs again block by block
    k = tilelang_mini.compile(_tiles(32, 16, 8, write_twice=1), out_idx=[-1], target="numpy")
    path, got, want = run_both(k, [x])
    assert path == "partly batched" and got == want
    np.testing.assert_array_equal(k(x)[:8], x[24:] * 2 + 3)   # the last block's rows
    # overlapping regions of different blocks: found by the marks, the plain run reruns all
    k = tilelang_mini.compile(_tiles(32, 16, 8, write_twice=2), out_idx=[-1], target="numpy")
    path, got, want = run_both(k, [x])
    assert path == "plain" and got == want
    assert k.artifact.batched.bailed == "an element of a parameter written twice"


def test_read_and_written_parameter_runs_plain():
    k = tilelang_mini.compile(_tiles(32, 16, 8, read_out=True), target="numpy")
    assert why_not_batched(k.artifact.kernel) == "parameter C is read and written"
    assert k.artifact.batched is None


def test_control_flow_that_differs_between_blocks():
    @T.prim_func
    def main(A: T.Tensor((64, 16), "float32"), C: T.Tensor((64, 16), "float32")):
        with T.Kernel(8) as bx:
            a = T.alloc_fragment((8, 16), "float32")
            T.copy(A[bx * 8, 0], a)
            for r in T.serial(bx % 3 + 1):
                for i, j in T.Parallel(8, 16):
                    a[i, j] = a[i, j] * 2.0
            T.copy(a, C[bx * 8, 0])

    k = tilelang_mini.compile(main, out_idx=[-1], target="numpy")
    x = np.random.default_rng(3).standard_normal((64, 16)).astype(np.float32)
    path, got, want = run_both(k, [x])
    assert path == "partly batched" and got == want
    assert k.artifact.batched.bailed.endswith("differs between the blocks of the group")
    np.testing.assert_array_equal(k(x), x * 2.0 ** (np.arange(64) // 8 % 3 + 1)[:, None])
