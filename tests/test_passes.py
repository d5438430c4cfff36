"""Each lowering pass: its rewrite on small kernels (before/after golden IR under tests/golden/;
a missing one fails, `pytest --update-goldens` writes them) and the properties it must establish."""
from pathlib import Path

import pytest

import tilelang_mini
import tilelang_mini.language as T
from tilelang_mini import CompileError
from tilelang_mini.ir.nodes import (
    Alloc, Copy, For, Gemm, If, Scope, SetCrossFlag, SetFlag, WaitFlag, walk, walk_statements,
)
from tilelang_mini.ir.printer import print_ir
from tilelang_mini.ir.pipes import pipe_of
from tilelang_mini.transform.pipeline import PASSES, STAGES, Options, run_pipeline

import kernels
from goldens import check_golden as golden

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _at_root(monkeypatch):
    monkeypatch.chdir(ROOT)  # printed IR names sources relative to the working directory


def stages(prim, chip="ascend910b"):
    return run_pipeline(prim.ir, Options(chip=chip), verify=True).stages


def before_after(name: str, prim, pass_name: str, chip="ascend910b"):
    st = stages(prim, chip)
    prev = STAGES[STAGES.index(pass_name) - 1]
    golden(f"{pass_name}.{name}.{chip}.before", print_ir(st[prev]))
    golden(f"{pass_name}.{name}.{chip}.after", print_ir(st[pass_name]))
    return st[prev], st[pass_name]


def allocs(k):
    return {s.buffer.name: s for s in walk_statements(k.body) if isinstance(s, Alloc)}


def small_gemm(**kw):
    args = dict(block_M=32, block_N=32, block_K=32, dtype="float16")
    args.update(kw)
    return kernels.gemm(64, 64, 128, **args)


def test_pipeline_is_one_ordered_list():
    assert [name for name, _, _ in PASSES] == [
        "check", "infer_scopes", "legalize", "split_cores", "pipeline", "plan_memory",
        "insert_sync"]
    assert all(why for _, _, why in PASSES)


# --------------------------------------------------------------------------------- infer_scopes


def test_infer_scopes_gemm_operands_and_accumulator():
    before, after = before_after("gemm", small_gemm(), "infer_scopes")
    assert {n: a.buffer.scope for n, a in allocs(before).items()} == {
        "A_s": "shared", "B_s": "shared", "C_f": "fragment"}
    assert {n: a.buffer.scope for n, a in allocs(after).items()} == {
        "A_s": "L1", "B_s": "L1", "C_f": "L0C"}


def test_infer_scopes_gives_a_buffer_one_version_per_use():
    _, after = before_after("prenorm", kernels.prenorm(64, 24, 64), "infer_scopes")
    scopes = {n: a.buffer.scope for n, a in allocs(after).items()}
    assert scopes["A_f"] == "L1" and scopes["A_f_ub"] == "UB"   # gemm operand and vector input
    assert scopes["D_f"] == "L0C" and scopes["sq"] == "UB" and scopes["ss"] == "UB"


def test_infer_scopes_accumulator_updated_on_the_vector_unit():
    @T.prim_func
    def acc(A: T.Tensor((32, 32), "float16"), B: T.Tensor((32, 32), "float16"),
            C: T.Tensor((32, 32), "float32")):
        with T.Kernel(1) as bx:
            A_s, B_s, C_f = kernels.gemm_tiles(32, 32, 32)
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.fill(C_f, 1.0)
            for i, j in T.Parallel(32, 32):
                C_f[i, j] = C_f[i, j] * 0.5
            T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C)

    _, after = before_after("acc_on_vector", acc, "infer_scopes")
    ops = [s for s in walk_statements(after.body) if isinstance(s, (Gemm, Copy, For))]
    gemm = next(s for s in ops if isinstance(s, Gemm))
    assert gemm.clear_accum and gemm.c.buffer.scope == "L0C"   # the product alone ...
    assert any(isinstance(s, For) and s.body[0].buffer.name == "C_f_ub" for s in ops[-3:])  # ... added


# ------------------------------------------------------------------------------------ legalize


def test_legalize_gemm_becomes_l0_loads_and_mmad():
    _, after = before_after("gemm", small_gemm(), "legalize")
    pipes = [pipe_of(s) for s in walk_statements(after.body)
             if isinstance(s, (Copy, Gemm))]
    assert pipes.count("MTE1") == 2 and pipes.count("M") == 1 and None not in pipes


def test_legalize_splits_k_into_chunks_that_fit_l0():
    prim = kernels.gemm(128, 128, 512, block_M=128, block_N=128, block_K=512, dtype="float32")
    after = stages(prim)["legalize"]
    l0a = allocs(after)["A_s_l0a"].buffer
    assert l0a.shape[0] == 128 and l0a.shape[1] < 512          # a K chunk, not all of K
    assert 2 * l0a.numel * 4 <= 64 * 1024                      # fits L0A twice
    assert any(isinstance(s, For) for s in walk_statements(after.body))


@pytest.mark.parametrize("chip,via_workspace", [("ascend910b", True), ("ascend950", False)])
def test_legalize_l0c_to_ub_path_per_chip(chip, via_workspace):
    _, after = before_after("matmul_add", kernels.matmul_add(32, 32, 32), "legalize", chip)
    scopes = {a.buffer.scope for a in allocs(after).values()}
    assert ("workspace" in scopes) == via_workspace


def test_legalize_casts_only_on_vector_or_fixpipe():
    after = stages(kernels.prenorm(64, 24, 64))["legalize"]
    for s in walk_statements(after.body):
        if isinstance(s, Copy) and s.src.buffer.dtype != s.dst.buffer.dtype:
            assert pipe_of(s) in ("V", "FIX"), s


# --------------------------------------------------------------------------------- split_cores


def test_split_cores_scopes_and_vid_rows():
    before, after = before_after("prenorm", kernels.prenorm(64, 24, 64), "split_cores")
    assert not before.is_npu and after.is_npu and after.grid_vars == ("cid", "vid")
    for s in walk_statements(after.body):
        if isinstance(s, Scope):
            for inner in walk_statements(s.body):
                p = pipe_of(inner)
                if p is not None:
                    assert (p in ("MTE1", "M", "FIX")) <= (s.core == "C")
    ub = {n: a.buffer for n, a in allocs(after).items() if a.buffer.scope == "UB"}
    assert ub["sq"].shape[0] == 16  # 32 rows per block, 16 per AIV


def test_split_cores_falls_back_to_one_vector_core_for_odd_rows():
    after = stages(kernels.rmsnorm(21, 16, blk_m=7))["split_cores"]
    ifs = [s for s in walk_statements(after.body) if isinstance(s, If)]
    assert ifs and all("vid" in str(s.cond) for s in ifs)


# ------------------------------------------------------------------------------------ pipeline


@pytest.mark.parametrize("stages_n", [1, 2, 3])
def test_pipeline_versions_and_epilogue(stages_n):
    prim = kernels.gemm(32, 32, 32 * 5, block_M=32, block_N=32, block_K=32, dtype="float16",
                        num_stages=stages_n)
    before, after = before_after(f"gemm_stages{stages_n}", prim, "pipeline")
    names = set(allocs(after))
    if stages_n == 1:
        assert names == set(allocs(before))
    else:
        assert {"A_s_1", "B_s_1", "A_s_l0a_1"} <= names
        assert ("A_s_2" in names) == (stages_n == 3) and "A_s_l0a_2" not in names
    loops = [s for s in walk_statements(after.body) if isinstance(s, For) and s.kind != "parallel"]
    assert all(s.kind == "serial" for s in loops)
    gemms = [s for s in walk_statements(after.body) if isinstance(s, Gemm)]
    assert len(gemms) == (1 if stages_n == 1 else stages_n + 5 % stages_n)


# --------------------------------------------------------------------------------- plan_memory


def test_plan_memory_offsets_are_aligned_and_disjoint_when_live_together():
    _, after = before_after("gemm", small_gemm(), "plan_memory")
    chip = tilelang_mini.arch.get_chip("ascend910b")
    by_scope = {}
    for a in allocs(after).values():
        assert a.offset is not None and a.offset % chip.alignment_of(a.buffer.scope) == 0
        by_scope.setdefault(a.buffer.scope, []).append(a)
    for scope, items in by_scope.items():
        spans = sorted((a.offset, a.offset + a.buffer.numel * 2) for a in items)
        for (a0, a1), (b0, _) in zip(spans, spans[1:]):
            assert a1 <= b0, scope  # the K loop keeps every L1/L0 buffer live at once


def test_plan_memory_reuses_bytes_of_dead_buffers():
    after = stages(kernels.two_phases(64, 64))["plan_memory"]
    offsets = {n: a.offset for n, a in allocs(after).items()}
    assert offsets["a"] == offsets["b"] == 0


def test_plan_memory_overflow_names_scope_chip_and_buffers():
    prim = kernels.gemm(512, 512, 512, block_M=512, block_N=256, block_K=256, dtype="float32",
                        num_stages=3)
    with pytest.raises(tilelang_mini.BufferOverflowError) as err:   # a CompileError
        tilelang_mini.compile(prim, out_idx=[-1], chip="ascend910b")
    msg = str(err.value)
    assert isinstance(err.value, CompileError)
    assert "L1 overflow on ascend910b" in msg and "A_s" in msg and "KiB" in msg
    assert err.value.loc.file.endswith("kernels.py") and "tilelang_mini/" not in msg


# --------------------------------------------------------------------------------- insert_sync


def test_insert_sync_golden_and_limits():
    _, after = before_after("gemm", small_gemm(), "insert_sync")
    flags = [s for s in walk(after) if isinstance(s, (SetFlag, WaitFlag))]
    assert flags and all(0 <= f.event <= 7 for f in flags)
    sets = {(f.src, f.dst, f.event) for f in flags if isinstance(f, SetFlag)}
    waits = {(f.src, f.dst, f.event) for f in flags if isinstance(f, WaitFlag)}
    assert sets == waits


def test_insert_sync_cross_core_flags_for_cube_vector_handoff():
    _, after = before_after("matmul_add", kernels.matmul_add(32, 32, 32), "insert_sync")
    assert any(isinstance(s, SetCrossFlag) for s in walk(after))


def test_insert_sync_leaves_single_pipe_code_alone():
    @T.prim_func
    def scale(X: T.Tensor((16, 16), "float32"), Y: T.Tensor((16, 16), "float32")):
        with T.Kernel(1) as bx:
            for i, j in T.Parallel(16, 16):
                Y[i, j] = X[i, j] * 2.0

    after = stages(scale)["insert_sync"]
    assert not [s for s in walk(after) if isinstance(s, (SetFlag, WaitFlag))]


def test_every_stage_round_trips_through_text():
    for prim in (small_gemm(), kernels.prenorm(64, 24, 64), kernels.matmul_add(32, 32, 32)):
        for chip in ("ascend910b", "ascend950"):
            for name, k in stages(prim, chip).items():
                text = print_ir(k)
                back = tilelang_mini.parse_ir(text)
                assert back == k and print_ir(back) == text, (name, chip)


def test_a_missing_or_different_golden_fails(tmp_path, monkeypatch):
    import goldens
    monkeypatch.setattr(goldens, "GOLDEN", tmp_path)
    monkeypatch.setattr(goldens, "UPDATE", False)
    with pytest.raises(AssertionError, match="missing"):
        golden("absent", "kernel k():\n")
    assert not (tmp_path / "absent.ir").exists()
    (tmp_path / "stale.ir").write_text("kernel old():\n")
    with pytest.raises(AssertionError, match="differs"):
        golden("stale", "kernel k():\n")
