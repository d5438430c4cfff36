"""The llvm target's own passes (transform/cpu_*.py): their place in
the llvm pass list, their rewrites on small kernels (golden IR under tests/golden/; a missing one
fails, `pytest --update-goldens` writes them) and that the rewritten IR computes what the NPU
lowering computes, on the interpreter as on llvm."""
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import tilelang_mini
from backends.numpy import BACKEND as NUMPY
from tilelang_mini.ir.nodes import (
    Alloc, Const, Copy, Fill, For, Fused, Gemm, Reduce, Region, Scope, walk_statements,
)
from tilelang_mini.ir.printer import print_expr
from tilelang_mini.transform.cpu_columns import infer_live_columns
from tilelang_mini.transform.cpu_layout import infer_panels
from tilelang_mini.ir.printer import print_ir
from tilelang_mini.transform.pipeline import (
    CPU_PASSES, LLVM_PASSES, NPU_PASSES, Options, passes_for, run_pipeline, stages_for,
)

import kernels
from goldens import check_golden as golden

ROOT = Path(__file__).resolve().parent.parent
RNG = np.random.default_rng(11)


@pytest.fixture(autouse=True)
def _at_root(monkeypatch):
    monkeypatch.chdir(ROOT)  # printed IR names sources relative to the working directory


def stages(prim, chip="ascend910b"):
    return run_pipeline(prim.ir, Options(chip=chip, target="llvm"), verify=True).stages


def before_after(name: str, prim, pass_name: str, chip="ascend910b"):
    st = stages(prim, chip)
    names = stages_for("llvm")
    prev = names[names.index(pass_name) - 1]
    golden(f"{pass_name}.{name}.{chip}.before", print_ir(st[prev]))
    golden(f"{pass_name}.{name}.{chip}.after", print_ir(st[pass_name]))
    return st[prev], st[pass_name]


def copies(k):
    return [s for s in walk_statements(k.body) if isinstance(s, Copy)]


def allocs(k):
    return {s.buffer.name: s for s in walk_statements(k.body) if isinstance(s, Alloc)}


def same_results(before, after, *args):
    """The two IRs compute the same outputs on the interpreter (bit for bit)."""
    want = [a.copy() for a in args]
    got = [a.copy() for a in args]
    NUMPY.run(NUMPY.lower(before, {}), want)
    NUMPY.run(NUMPY.lower(after, {}), got)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_the_llvm_list_branches_from_the_npu_list():
    assert LLVM_PASSES[:len(NPU_PASSES)] == NPU_PASSES
    assert [name for name, _, _ in CPU_PASSES] == [
        "expand_scaled_gemm", "fuse_copy_chains", "forward_copies", "infer_uninit",
        "infer_live_columns", "infer_panels", "hoist_private_work", "fuse_rows",
        "fuse_map_reduce", "fuse_row_copies", "split_maps", "mark_dual_copies", "widen_storage"]
    assert all(why for _, _, why in CPU_PASSES)
    assert passes_for("numpy") == NPU_PASSES and passes_for("llvm") == LLVM_PASSES


def test_fuse_copy_chains_drops_the_staging_of_a_converting_copy():
    prim = kernels.softmax(40, 64, dtype="float16")
    before, after = before_after("softmax_f16", prim, "fuse_copy_chains")
    assert len(copies(after)) < len(copies(before))
    assert set(allocs(after)) < set(allocs(before))
    x = RNG.standard_normal((40, 64)).astype(np.float16)
    same_results(before, after, x, np.zeros((40, 64), np.float16))


def test_forward_copies_reads_gemm_operands_in_place():
    prim = kernels.gemm(64, 64, 64, block_M=32, block_N=32, block_K=32)
    before, after = before_after("gemm", prim, "forward_copies")
    scopes = lambda k: {s.src.buffer.scope + "->" + s.dst.buffer.scope for s in copies(k)}  # noqa: E731
    assert "L1->L0B" in scopes(before) and "L1->L0B" not in scopes(after)
    assert not {n for n, a in allocs(after).items() if a.buffer.scope == "L0B"}
    a, b = (RNG.standard_normal((64, 64)).astype(np.float32) for _ in range(2))
    same_results(before, after, a, b, np.zeros((64, 64), np.float32))


def test_infer_uninit_marks_what_is_written_whole_first():
    prim = kernels.rmsnorm(40, 64)
    before, after = before_after("rmsnorm", prim, "infer_uninit")
    marked = {n for n, a in allocs(after).items() if a.uninit}
    assert not any(a.uninit for a in allocs(before).values())
    assert {"A_local", "A_powsum"} <= marked   # copied in whole; a clearing reduce's output
    x = RNG.standard_normal((40, 64)).astype(np.float32)
    same_results(before, after, x, np.zeros((40, 64), np.float32))


def test_infer_uninit_keeps_zeroing_what_a_loop_may_skip():
    from tilelang_mini.transform.cpu_zero import infer_uninit
    k = tilelang_mini.parse_ir('''
@prim_func(source="<test>")
def k(X: Tensor((4, 8), "float32"), Y: Tensor((4, 8), "float32"), n: Tensor((1,), "int32")):
    with Kernel(1) as (bx):
        t = alloc_shared((4, 8), "float32")
        u = alloc_shared((4, 8), "float32")
        for i in serial(n[0]):
            copy(X, t)
        copy(X, u)
        copy(t, Y)
        copy(u, Y)
''')
    marked = {n for n, a in allocs(infer_uninit(k)).items() if a.uninit}
    assert marked == {"u"}


def test_fuse_rows_makes_one_loop_over_the_rows_of_a_row_local_run():
    prim = kernels.softmax(40, 64)
    before, after = before_after("softmax", prim, "fuse_rows")
    loops = [s for s in walk_statements(after.body) if isinstance(s, For) and s.kind == "serial"
             and s.vars[0].startswith("row")]
    assert len(loops) == 1
    # reduce max, exp map, reduce sum, divide map and the copy-out, each on one row
    assert sum(isinstance(s, (Reduce, Copy)) for s in loops[0].body) == 3
    x = RNG.standard_normal((40, 64)).astype(np.float32)
    same_results(before, after, x, np.zeros((40, 64), np.float32))


def test_hoist_private_work_moves_the_squares_next_to_their_copy_in():
    prim = kernels.prenorm(64, 24, 96)
    before, after = before_after("prenorm", prim, "hoist_private_work")
    # the square-and-reduce left the Scope after the gemm's for the Scope of A's copy-in
    for k in (before, after):
        for s in walk_statements(k.body):
            if isinstance(s, Scope) and any(isinstance(t, Reduce) for t in s.body):
                has_copy = any(isinstance(t, Copy) and t.src.buffer.name == "A" for t in s.body)
                assert has_copy == (k is after)
    a = RNG.standard_normal((64, 96)).astype(np.float32)
    b = RNG.standard_normal((24, 96)).astype(np.float32)
    from tilelang_mini.ir import dtypes
    a = a.astype(dtypes.to_numpy("bfloat16"))
    same_results(before, after, a, b, np.zeros((64, 24), np.float32), np.zeros(64, np.float32))


def hoisted(ub: str, body: str):
    """hoist_private_work on an (8, 8) float32 X -> Y kernel of the split form: UB tiles named in
    `ub`, a workspace w, then `body` (IR text of the statements under the Kernel)."""
    from tilelang_mini.transform.cpu_hoist import hoist_private_work
    allocs = "".join(f'        {n} = alloc_ub((8, 8), "float32")\n' for n in ub.split())
    k = tilelang_mini.parse_ir('''
@prim_func(source="<test>")
def k(X: Tensor((8, 8), "float32"), Y: Tensor((8, 8), "float32")):
    with Kernel(1, is_npu=True) as (cid, vid):
''' + allocs + '        w = alloc_workspace((8, 8), "float32")\n' + body)
    return [s for s in hoist_private_work(k).body if isinstance(s, Scope)]


def test_hoist_private_work_keeps_work_the_cube_depends_on():
    v = hoisted("t u", '''
        with Scope("V"):
            copy(X, t)
        with Scope("C"):
            copy(X, w)
        with Scope("V"):
            copy(t, u)
            copy(u, w)
            copy(t, Y)
''')
    # t -> u moves up (private); u -> w (the workspace the cube writes) and what follows stay
    assert [len(s.body) for s in v] == [2, 1, 2]


def test_hoist_private_work_never_passes_a_wait_for_another_core():
    v = hoisted("t u a b", '''
        with Scope("V"):
            copy(X, t)
            wait_cross_flag(MTE3, 0)
            copy(X, u)
        with Scope("C"):
            copy(X, w)
        with Scope("V"):
            copy(t, a)
        with Scope("V"):
            wait_cross_flag(MTE3, 1)
            copy(u, b)
''')
    names = [[type(t).__name__ + (f":{t.dst.buffer.name}" if hasattr(t, "dst") else "")
              for t in s.body] for s in v]
    # t -> a goes after the wait of the first Scope, not right after t's copy-in;
    # u -> b follows its own Scope's wait and stays there
    assert names == [["Copy:t", "WaitCrossFlag", "Copy:a", "Copy:u"], ["Copy:w"],
                     ["WaitCrossFlag", "Copy:b"]]


def gemm_columns(k):
    return [s.columns for s in walk_statements(k.body) if isinstance(s, Gemm)]


def test_infer_live_columns_bounds_the_last_block_column():
    """C has 40 columns in 32-wide tiles: the block of column bx keeps 40 - bx * 32 of them."""
    prim = kernels.gemm(32, 40, 32, block_M=32, block_N=32, block_K=32)
    before, after = before_after("gemm_n40", prim, "infer_live_columns")
    assert gemm_columns(before) == [None]
    (cols,) = gemm_columns(after)
    assert print_expr(cols) == "40 - cid * 32"   # one block per tile of C: cid = bx
    a, b = RNG.standard_normal((32, 32)).astype(np.float32), \
        RNG.standard_normal((32, 40)).astype(np.float32)
    same_results(before, after, a, b, np.zeros((32, 40), np.float32))
    k = tilelang_mini.compile(prim, out_idx=[-1], target="llvm")
    np.testing.assert_allclose(k(a, b), a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)


def test_infer_live_columns_constant_when_the_copy_start_is():
    k = tilelang_mini.parse_ir('''
@prim_func(source="<test>")
def k(X: Tensor((16, 16), "float32"), D: Tensor((64, 24), "float32")):
    with Kernel(4) as (bx):
        d = alloc_fragment((16, 32), "float32")
        w = alloc_shared((16, 32), "float32")
        fill(w, 1.0)
        gemm(X, w, d, clear_accum=True)
        copy(d, D[bx * 16 +: 16, 0 +: 32])
''')
    assert [print_expr(c) for c in gemm_columns(infer_live_columns(k))] == ["24"]
    observed = replace(k, body=k.body + (Fill(Region.full(k.body[0].buffer), Const(0.0)),))
    assert gemm_columns(infer_live_columns(observed)) == [Const(24)]   # a fill observes nothing
    read = tilelang_mini.parse_ir(print_ir(k).replace("copy(d, D", "copy(d, w[0 +: 16, 0 +: 32])\n        copy(d, D"))
    assert gemm_columns(infer_live_columns(read)) == [None]      # read whole by another copy


def test_infer_panels_marks_the_tiles_only_copied_into_and_read_as_gemm_b():
    prim = kernels.gemm(64, 64, 64, block_M=32, block_N=32, block_K=32)
    before, after = before_after("gemm", prim, "infer_panels")
    assert not any(a.panels for a in allocs(before).values())
    panels = {n: a.buffer.scope for n, a in allocs(after).items() if a.panels}
    assert panels and set(panels.values()) == {"L1"}
    assert all(g.b.buffer.name in panels for g in walk_statements(after.body)
               if isinstance(g, Gemm))
    a, b = (RNG.standard_normal((64, 64)).astype(np.float32) for _ in range(2))
    same_results(before, after, a, b, np.zeros((64, 64), np.float32))


def test_infer_panels_keeps_a_tile_read_otherwise_row_major():
    k = tilelang_mini.parse_ir('''
@prim_func(source="<test>")
def k(X: Tensor((16, 16), "float32"), W: Tensor((16, 32), "float32"), D: Tensor((16, 32), "float32")):
    with Kernel(1) as (bx):
        d = alloc_fragment((16, 32), "float32")
        w = alloc_shared((16, 32), "float32")
        v = alloc_shared((16, 32), "float32")
        copy(W, w)
        copy(W, v)
        gemm(X, w, d, clear_accum=True)
        gemm(X, v, d)
        copy(v[0 +: 1, 0 +: 32], D[0 +: 1, 0 +: 32])
        copy(d, D)
''')
    marked = {n for n, a in allocs(infer_panels(k)).items() if a.panels}
    assert marked == {"w"}    # v is also copied out of: its rows must stay addressable


def test_infer_panels_marks_a_tile_read_transposed_by_every_gemm():
    src = '''
@prim_func(source="<test>")
def k(X: Tensor((16, 16), "float32"), W: Tensor((32, 16), "float32"), D: Tensor((16, 32), "float32")):
    with Kernel(1) as (bx):
        d = alloc_fragment((16, 32), "float32")
        w = alloc_shared((32, 16), "float32")
        copy(W, w)
        gemm(X, w, d, transpose_B=True, clear_accum=True)
        GEMM2
        copy(d, D)
'''
    both = src.replace("GEMM2", "gemm(X, w, d, transpose_B=True)")
    mixed = src.replace("GEMM2", "gemm(X, w[0 +: 16, 0 +: 16], d[0 +: 16, 0 +: 16])")
    assert {n for n, a in allocs(infer_panels(tilelang_mini.parse_ir(both))).items()
            if a.panels} == {"w"}
    assert not any(a.panels for a in allocs(infer_panels(tilelang_mini.parse_ir(mixed))).values())


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("M,N,K", [(70, 24, 100), (33, 40, 17), (16, 8, 130)])
def test_transposed_b_panels_compute_the_product(dtype, M, N, K):
    """B (N, K) read transposed by the gemm: its tile is packed transposed by the copy
    (llvm), clipped rows and columns are zeros; against float64 NumPy on both targets."""
    from tilelang_mini.ir import dtypes
    prim = kernels.gemm(M, N, K, block_M=32, block_N=32, block_K=32, dtype=dtype,
                        trans_B=True)
    after = stages(prim)["infer_panels"]
    assert any(a.panels and a.buffer.shape == (32, 32) for a in allocs(after).values())
    a = RNG.standard_normal((M, K)).astype(dtypes.to_numpy(dtype))
    b = RNG.standard_normal((N, K)).astype(dtypes.to_numpy(dtype))
    want = a.astype(np.float64) @ b.astype(np.float64).T
    for target in ("numpy", "llvm"):
        got = tilelang_mini.compile(prim, out_idx=[-1], target=target)(a, b)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.sqrt(K))


def fused(k):
    return [s.kind for s in walk_statements(k.body) if isinstance(s, Fused)]


def test_fuse_map_reduce_wraps_each_map_and_the_reduction_of_its_tile():
    prim = kernels.rmsnorm(40, 64)
    before, after = before_after("rmsnorm", prim, "fuse_map_reduce")
    assert fused(before) == [] and fused(after) == ["map_reduce"]
    (s,) = [s for s in walk_statements(after.body) if isinstance(s, Fused)]
    assert [type(t).__name__ for t in s.body] == ["For", "Reduce"]
    x = RNG.standard_normal((40, 64)).astype(np.float32)
    same_results(before, after, x, np.zeros((40, 64), np.float32))
    # softmax's exp tile is read by two maps: its reduction cannot consume it
    assert fused(stages(kernels.softmax(40, 64))["fuse_map_reduce"]) == []


def test_fuse_row_copies_makes_one_pass_of_a_rows_copy_in_and_copy_out():
    prim = kernels.rmsnorm(40, 64)
    before, after = before_after("rmsnorm", prim, "fuse_row_copies")
    assert fused(before) == ["map_reduce"]
    assert fused(after) == ["copy_map_reduce", "map_copy"]
    x = RNG.standard_normal((40, 64)).astype(np.float32)
    same_results(before, after, x, np.zeros((40, 64), np.float32))
    assert fused(stages(kernels.softmax(40, 64))["fuse_row_copies"]) == ["map_copy"]


def test_fuse_row_copies_keeps_a_copy_out_whose_tile_is_read_later():
    """The map's tile is read again after its copy-out: the map must still write it."""
    from tilelang_mini.transform.cpu_fuse import fuse_row_copies
    k = tilelang_mini.parse_ir('''
@prim_func(source="<test>")
def k(X: Tensor((4, 8), "float32"), Y: Tensor((4, 8), "float32"), Z: Tensor((4, 8), "float32")):
    with Kernel(1, is_npu=True) as (cid, vid):
        t = alloc_ub((4, 8), "float32", uninit=True)
        with Scope("V"):
            copy(X, t)
            for row in serial(4):
                for j in Parallel(8):
                    t[row, j] = t[row, j] * 2.0
                copy(t[row +: 1, 0 +: 8], Y[row +: 1, 0 +: 8])
            copy(t, Z)
''')
    assert fused(fuse_row_copies(k)) == []
    cut = replace(k, body=(k.body[0], replace(k.body[1], body=k.body[1].body[:2])))
    assert fused(fuse_row_copies(cut)) == ["map_copy"]


@pytest.mark.parametrize("stage", ["fuse_copy_chains", "forward_copies", "infer_uninit",
                                   "infer_live_columns", "infer_panels", "fuse_rows",
                                   "fuse_map_reduce", "fuse_row_copies", "widen_storage"])
def test_llvm_stages_print_and_parse_back(stage):
    k = kernels.build(kernels.flash_attention, 2, 64, 32, target="llvm")
    text = k.get_ir(stage)
    back = tilelang_mini.parse_ir(text)
    assert back == k.compilation.stages[stage] and print_ir(back) == text
    assert k.ir is k.compilation.stages["insert_sync"]   # what simulate and estimate model


def test_forward_copies_keeps_a_snapshot_taken_before_a_cross_core_wait():
    """Y = copy of workspace W, then a cross-core wait (another core may rewrite W there when
    a block's cores run as coroutines), then a read of Y: the read stays on Y. Without the
    wait, or when only this core writes W, the read is forwarded to W."""
    from tilelang_mini.transform.cpu_copies import forward_copies

    def kernel(wait: bool, vector_writes: bool):
        w = '            wait_cross_flag(MTE2, 0)\n' if wait else ''
        v = ('        with Scope("V"):\n'
             '            copy(X, W)\n'
             '            set_cross_flag(MTE3, 0)\n') if vector_writes else ''
        c = '' if vector_writes else '            copy(X, W)\n'
        return tilelang_mini.parse_ir(f'''
@prim_func(source="<test>")
def k(X: Tensor((16, 16), "float32"), Y: Tensor((16, 16), "float32")):
    with Kernel(1, is_npu=True) as (cid, vid):
        W = alloc_workspace((16, 16), "float32")
        S = alloc_workspace((16, 16), "float32")
        with Scope("C"):
{c}            copy(W, S)
{w}            copy(S, Y)
{v}''')

    def forwarded(k):
        return not any(isinstance(s, Alloc) and s.buffer.name == "S"
                       for s in walk_statements(forward_copies(k).body))

    assert not forwarded(kernel(wait=True, vector_writes=True))
    assert forwarded(kernel(wait=False, vector_writes=True))
    assert forwarded(kernel(wait=True, vector_writes=False))


def test_mark_dual_copies_marks_the_cubes_l0c_to_ub_copies():
    """ascend950 has the FixPipe's L0C -> UB path: matmul_add's accumulator goes straight to the
    vector cores' UB. The copy gets dual=True; llvm then writes both AIVs' halves of the rows."""
    prim = kernels.matmul_add(64, 64, 64)
    before, after = before_after("matmul_add", prim, "mark_dual_copies", chip="ascend950")
    l0c_ub = lambda k: [c for c in copies(k) if (c.src.buffer.scope, c.dst.buffer.scope)  # noqa: E731
                        == ("L0C", "UB")]
    assert l0c_ub(before) and not any(c.dual for c in copies(before))
    assert all(c.dual for c in l0c_ub(after)) and sum(c.dual for c in copies(after)) == len(
        l0c_ub(after))
    assert tilelang_mini.parse_ir(print_ir(after)) == after
    a, b = (RNG.standard_normal((64, 64)).astype(np.float16) for _ in range(2))
    d = RNG.standard_normal((64, 64)).astype(np.float32)
    want = a.astype(np.float64) @ b.astype(np.float64) + d
    for target in ("numpy", "llvm"):
        got = tilelang_mini.compile(prim, out_idx=[-1], target=target, chip="ascend950")(a, b, d)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_the_verifier_checks_where_dual_copies_stand():
    from tilelang_mini.ir.verifier import IRVerificationError, verify_kernel
    src = '''
@prim_func(source="<test>")
def k(X: Tensor((8, 8), "float32")):
    with Kernel(1, is_npu=True) as (cid, vid):
        l = alloc_L0C((8, 8), "float32")
        u = alloc_ub((8, 8), "float32")
        v = alloc_ub((8, 8), "float32")
        with Scope("C"):
            copy(l, u, dual=True)
            COPY
'''
    verify_kernel(tilelang_mini.parse_ir(src.replace("COPY", "copy(l, u, dual=True)")))
    with pytest.raises(IRVerificationError, match="dual=True needs"):  # not L0C -> UB
        verify_kernel(tilelang_mini.parse_ir(src.replace("COPY", "copy(u, v, dual=True)")))
    with pytest.raises(IRVerificationError, match="without dual=True"):  # one left unmarked
        verify_kernel(tilelang_mini.parse_ir(src.replace("COPY", "copy(l, v)")))
    with pytest.raises(IRVerificationError, match="dual=True needs"):  # not the cube's
        verify_kernel(tilelang_mini.parse_ir(src.replace('Scope("C")', 'Scope("V")')
                                             .replace("COPY", "pass")))
    # the passes decide from scratch: a mark written by hand where it does not belong goes
    from tilelang_mini.transform.cpu_dual import mark_dual_copies
    from tilelang_mini.transform.cpu_storage import widen_storage
    bad = tilelang_mini.parse_ir(src.replace("COPY", "copy(u, v, dual=True)").replace(
        'alloc_ub((8, 8), "float32")', 'alloc_ub((8, 8), "float32", widened=True)'))
    fixed = widen_storage(mark_dual_copies(bad))
    verify_kernel(fixed)
    assert [c.dual for c in copies(fixed)] == [True, False] and not widened(fixed)


def widened(k):
    return {n for n, a in allocs(k).items() if a.widened}


def test_widen_storage_marks_the_tiles_a_cpu_keeps_as_float32():
    """Without a native bfloat16 product every on-chip bfloat16 tile is widened; with one none
    is; float32 tiles and GM never are. llvm computes the product either way."""
    from backends.llvm import BACKEND, host_target
    prim = kernels.gemm(64, 48, 64, block_M=32, block_N=32, block_K=32, dtype="bfloat16")
    before, after = before_after("gemm_bf16", prim, "widen_storage")
    on_chip_bf16 = {n for n, a in allocs(after).items() if a.buffer.dtype == "bfloat16"
                    and a.buffer.scope not in ("global", "workspace")}
    assert on_chip_bf16 and not widened(before) and widened(after) == on_chip_bf16
    native = run_pipeline(prim.ir, Options(target="llvm", native_bf16=True), verify=True).final
    assert not widened(native)
    from tilelang_mini.ir import dtypes
    a = RNG.standard_normal((64, 64)).astype(dtypes.to_numpy("bfloat16"))
    b = RNG.standard_normal((64, 48)).astype(dtypes.to_numpy("bfloat16"))
    want = a.astype(np.float64) @ b.astype(np.float64)
    for k in (after, native):
        c = np.zeros((64, 48), np.float32)
        BACKEND.run(BACKEND.lower(k, {}), [a, b, c])
        np.testing.assert_allclose(c, want, rtol=1e-4, atol=1e-4)
    # a compile asks the backend whether this host has the product (avx512_bf16)
    assert BACKEND.pass_options(Options(target="llvm")).native_bf16 == host_target().bf16
    assert not BACKEND.pass_options(Options(target="llvm"), {"llvm_disable_bf16": True}).native_bf16
    k = tilelang_mini.compile(prim, out_idx=[-1], target="llvm")
    assert widened(k.compilation.final) == (set() if host_target().bf16 else on_chip_bf16)
    np.testing.assert_allclose(k(a, b), want, rtol=1e-4, atol=1e-4)
