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
from tilelang_mini.semantics.batched import vector_pairs, why_not_batched
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
    """(which run the batched-capable artifact took, its outcome, the plain run's outcome); a
    LaunchSequence (several `T.Kernel` launches) runs each launch both ways."""
    parts = getattr(k, "kernels", [k])
    arts = [p.artifact for p in parts]
    got = _outcome(lambda: k(*[a.copy() for a in args]))
    path = arts[0].last_run[0] if len(arts) == 1 else tuple(a.last_run[0] for a in arts)
    for p, art in zip(parts, arts):
        p.artifact = BACKEND.lower(art.kernel, {"batched": False})
    try:
        want = _outcome(lambda: k(*[a.copy() for a in args]))
    finally:
        for p, art in zip(parts, arts):
            p.artifact = art
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
    # (the library family calls the kernel library's API, several launches and no kernel of
    # its own: tests/fuzz/test_fuzz_library.py runs it on every target)
    return [(f, s) for f in sorted(VALID) if f != "library" for s in range(3)]


@pytest.mark.parametrize("family,seed", _fuzz_cases())
def test_fuzz_family_batched_equals_plain(family, seed):
    from tilelang_mini.errors import CompileError
    from tilelang_mini.testing.fuzz.case import make_inputs
    from tilelang_mini.testing.fuzz.families import make_case
    from tilelang_mini.runtime.eager import is_eager_function
    from tilelang_mini.testing.fuzz.worker import _load_kernel, base_chip
    case = make_case(family, f"batched-{seed}")
    inputs = make_inputs(case)
    args = [inputs[t.name] for t in case.tensors if not t.output and not t.workspace]
    with tempfile.TemporaryDirectory() as tmp:
        try:
            main, _ = _load_kernel(case, tmp)
            if is_eager_function(main):  # eager @jit: the kernel compiled for these arguments
                k, args = tilelang_mini.jit(main, target="numpy",
                                            chip=base_chip(case)).kernel_for(*args)
            else:
                k = tilelang_mini.compile(main, out_idx=case.out_idx, target="numpy",
                                          chip=base_chip(case), workspace_idx=case.workspace_idx)
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
            if write_twice == 3:   # pairs of blocks on the same rows (a grid step of 0)
                T.copy(a, C[bx // 2 * bm, 0])
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
    k = tilelang_mini.compile(_tiles(32, 16, 8, write_twice=3), out_idx=[-1], target="numpy")
    path, got, want = run_both(k, [x])
    assert path == "plain" and got == want
    assert k.artifact.batched.bailed == "an element of a parameter written twice"
    np.testing.assert_array_equal(k(x)[8:16], x[24:] * 2 + 3)   # block 3 wrote last there


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


def test_tiles_at_grid_and_loop_starts():
    """Rows at the grid's start (plus the vector core's), columns at a loop's
    (batched_ops._grid_region: the blocks' layout found once per group, the loop's start
    checked per call), on a 2-D grid whose last row of tiles is ragged (read zero-padded: the
    general path); a start whose term mixes both kinds of variable goes the general path."""
    M, N, bm, bn = 37, 40, 8, 16

    @T.prim_func
    def main(A: T.Tensor((37, 40), "float32"), C: T.Tensor((37, 48), "float32")):
        with T.Kernel(3, T.ceildiv(M, bm)) as (bx, by):
            a = T.alloc_fragment((bm, bn), "float32")
            acc = T.alloc_fragment((bm, bn), "float32")
            T.clear(acc)
            for k in T.serial(3):
                T.copy(A[by * bm, k * bn], a)          # grid rows, loop columns
                for i, j in T.Parallel(bm, bn):
                    acc[i, j] = acc[i, j] + a[i, j] * (k + 1)
                T.copy(A[by * bm, (bx + k) * 4], a)    # columns mix grid and loop
                for i, j in T.Parallel(bm, bn):
                    acc[i, j] = acc[i, j] + a[i, j] * 10.0
            T.copy(acc, C[by * bm, bx * bn])

    k = tilelang_mini.compile(main, out_idx=[-1], target="numpy")
    x = np.random.default_rng(4).standard_normal((M, N)).astype(np.float32)
    path, got, want = run_both(k, [x])
    assert path == "batched" and got == want
    pad = np.zeros((M, 64))
    pad[:, :N] = x
    ref = np.zeros((M, 48))
    for bx in range(3):
        for step in range(3):
            ref[:, bx * bn:(bx + 1) * bn] += ((step + 1) * pad[:, step * bn:(step + 1) * bn] +
                                              10 * pad[:, (bx + step) * 4:(bx + step) * 4 + bn])
    np.testing.assert_allclose(k(x), ref, rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------- the ordered run, batched


def test_ordered_run_of_groups_equals_block_by_block():
    """Cores that wait on each other both ways (the ordered run, sim/ordered.py) run a group of
    blocks at once (lower_ordered_batched): the same bytes as block by block, its per-block
    GM workspaces read and written (batched.block_private), no fallback on the way."""
    sys.path.insert(0, str(ROOT / "tests" / "compat"))
    from test_cross_core_coroutines import attention_ref, expert_attention
    shape = (2, 64, 32)
    k = tilelang_mini.compile(expert_attention(*shape).prim_func, out_idx=[3],
                              workspace_idx=[4, 5, 6], target="numpy")
    rng = np.random.default_rng(6)
    q, kk, v = ((rng.standard_normal(shape) * 0.5).astype(np.float16) for _ in range(3))
    path, got, want = run_both(k, [q, kk, v])
    assert path == "ordered" and got == want
    assert k.artifact.batched.bailed is None
    np.testing.assert_allclose(k(q, kk, v), attention_ref(q, kk, v), atol=2e-3, rtol=2e-3)


def test_ordered_group_that_bails_restores_private_parameters():
    """A group that bails (a loop whose extent differs between its blocks) after writing a
    parameter each block reads and writes at its own index: the group's elements are put back
    before its blocks run again one by one, so each block reads the caller's values once."""
    @T.prim_func
    def main(X: T.Tensor((4, 8, 16), "float32"), Y: T.Tensor((4, 8, 16), "float32"),
             W: T.Tensor((4, 8, 16), "float32")):
        with T.Kernel(4, is_npu=True) as (cid, vid):
            x = T.alloc_ub((4, 16), "float32")
            w = T.alloc_ub((4, 16), "float32")
            with T.Scope("C"):
                T.wait_cross_flag("MTE2", 0)
                T.set_cross_flag("MTE2", 1)
            with T.Scope("V"):
                T.copy(X[cid, vid * 4, 0], x)
                T.copy(W[cid, vid * 4, 0], w)
                T.barrier_all()
                for i, j in T.Parallel(4, 16):
                    w[i, j] = w[i, j] + x[i, j]
                T.barrier_all()
                T.copy(w, W[cid, vid * 4, 0])
                T.barrier_all()
                T.set_cross_flag("MTE3", 0)
                T.wait_cross_flag("MTE2", 1)
                for _ in T.serial(cid % 2 + 1):
                    for i, j in T.Parallel(4, 16):
                        w[i, j] = w[i, j] * 2.0
                T.barrier_all()
                T.copy(w, Y[cid, vid * 4, 0])

    k = tilelang_mini.compile(main, out_idx=[1], target="numpy")
    assert k.artifact.cross_core
    rng = np.random.default_rng(7)
    x, w0 = (rng.standard_normal((4, 8, 16)).astype(np.float32) for _ in range(2))
    w = w0.copy()
    y = k(x, w)
    assert k.artifact.batched.bailed.endswith("differs between the blocks of the group")
    np.testing.assert_array_equal(w, w0 + x)
    np.testing.assert_array_equal(y, (w0 + x) * (2.0 ** (np.arange(4) % 2 + 1))[:, None, None])


def test_vector_halves_run_as_one_group_member_each():
    """The expert attention's vector cores touch only their UB and parameters: one coroutine
    runs both halves of each block (batched.vector_pairs); halves whose control flow differs
    (a loop extent on vid) bail to block by block; the same bytes as the plain run."""
    sys.path.insert(0, str(ROOT / "tests" / "compat"))
    from test_cross_core_coroutines import expert_attention
    k = tilelang_mini.compile(expert_attention(1, 64, 32).prim_func, out_idx=[3],
                              workspace_idx=[4, 5, 6], target="numpy")
    assert vector_pairs(k.artifact.kernel)

    @T.prim_func
    def main(X: T.Tensor((4, 8, 16), "float32"), Y: T.Tensor((4, 8, 16), "float32")):
        with T.Kernel(4, is_npu=True) as (cid, vid):
            x = T.alloc_ub((4, 16), "float32")
            with T.Scope("V"):
                T.copy(X[cid, vid * 4, 0], x)
                T.barrier_all()
                T.set_cross_flag("MTE3", 0)
                T.wait_cross_flag("MTE2", 1)
                for _ in T.serial(vid + 1):     # the halves' control flow differs
                    for i, j in T.Parallel(4, 16):
                        x[i, j] = x[i, j] * 2.0 + vid
                T.barrier_all()
                T.copy(x, Y[cid, vid * 4, 0])
            with T.Scope("C"):
                T.wait_cross_flag("MTE2", 0)
                T.set_cross_flag("MTE2", 1)

    k = tilelang_mini.compile(main, out_idx=[1], target="numpy")
    assert k.artifact.cross_core and vector_pairs(k.artifact.kernel)
    x = np.random.default_rng(8).standard_normal((4, 8, 16)).astype(np.float32)
    path, got, want = run_both(k, [x])
    assert path == "ordered" and got == want
    assert k.artifact.batched.bailed.endswith("differs between the blocks of the group")
    want = x.copy()
    want[:, :4] *= 2
    want[:, 4:] = (want[:, 4:] * 2 + 1) * 2 + 1
    np.testing.assert_array_equal(k(x), want)


def test_vector_halves_apart_when_the_cube_writes_their_ub():
    """An L0C -> UB copy (ascend950's FixPipe path) writes both vector cores' UB from the cube:
    the halves run as two coroutines (not batched.vector_pairs), the same bytes as plain."""
    @T.prim_func
    def main(A: T.Tensor((4, 32, 32), "float16"), Y: T.Tensor((4, 32, 32), "float32")):
        with T.Kernel(4, is_npu=True) as (cid, vid):
            a_l1 = T.alloc_L1((32, 32), "float16")
            c_l0 = T.alloc_L0C((32, 32), "float32")
            c_ub = T.alloc_ub((16, 32), "float32")
            with T.Scope("C"):
                T.copy(A[cid, 0, 0], a_l1)
                T.barrier_all()
                T.gemm_v0(a_l1, a_l1, c_l0, init=True)
                T.barrier_all()
                T.copy(c_l0[0, 0], c_ub)
                T.barrier_all()
                T.set_cross_flag("FIX", 0)
                T.wait_cross_flag(1)
            with T.Scope("V"):
                T.wait_cross_flag(0)
                for i, j in T.Parallel(16, 32):
                    c_ub[i, j] = c_ub[i, j] * 2.0
                T.barrier_all()
                T.copy(c_ub, Y[cid, vid * 16, 0])
                T.barrier_all()
                T.set_cross_flag("MTE3", 1)

    k = tilelang_mini.compile(main, out_idx=[1], target="numpy", chip="ascend950")
    assert k.artifact.cross_core and not vector_pairs(k.artifact.kernel)
    a = np.random.default_rng(9).standard_normal((4, 32, 32)).astype(np.float16)
    path, got, want = run_both(k, [a])
    assert path == "ordered" and got == want and k.artifact.batched.bailed is None
    a64 = a.astype(np.float64)
    top = 2 * (a64 @ a64)[:, :16]       # both halves get the tile's first 16 rows
    np.testing.assert_allclose(k(a), np.concatenate([top, top], axis=1), rtol=1e-5, atol=1e-4)


def test_values_computed_into_the_stored_tile_read_the_old_one():
    """A float max/min, exp, ... stored to a float32 tile is computed straight into it
    (batched_ops._into); operands that overlap the tile (here reversed) still read the old
    values, as the plain run's evaluate-then-store does."""
    @T.prim_func
    def main(X: T.Tensor((8, 16), "float32"), Y: T.Tensor((8, 16), "float32")):
        with T.Kernel(4, is_npu=True) as (cid, vid):
            x = T.alloc_ub((16,), "float32")
            with T.Scope("V"):
                T.copy(X[cid * 2 + vid, 0], x)
                T.barrier_all()
                for i in T.Parallel(16):
                    x[i] = T.max(x[15 - i], x[i] * 0.5)
                for i in T.Parallel(16):
                    x[i] = T.exp(x[15 - i] * 0.25)
                T.barrier_all()
                T.copy(x, Y[cid * 2 + vid, 0])

    k = tilelang_mini.compile(main, out_idx=[1], target="numpy")
    x = np.random.default_rng(10).standard_normal((8, 16)).astype(np.float32)
    path, got, want = run_both(k, [x])
    assert path == "batched" and got == want
    m = np.maximum(x[:, ::-1], x * np.float32(0.5))
    np.testing.assert_allclose(k(x), np.exp(m[:, ::-1] * np.float32(0.25)), rtol=1e-6)
