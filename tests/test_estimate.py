"""The performance model (sim/estimate.py), timelines (report/timeline.py), autotuning
(autotune.py) and the `trace` / `run` CLI summaries."""

import json
import sys
from pathlib import Path

import numpy as np
import pytest

import tilelang_mini
from tilelang_mini.arch import get_chip
from tilelang_mini.ir.nodes import PIPES
from tilelang_mini.sim.estimate import block_classes, estimate_kernel
from tilelang_mini.sim.simulator import simulate_kernel

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
from gemm import matmul  # noqa: E402
from test_simulator import cube_gemm  # noqa: E402

FULL = (4096, 7168, 16384)
PUBLISHED = {"bfloat16": 2229.9, "float8_e4m3fn": 1117.6}   # DeepGEMM-Ascend on the 950DT, us


def gemm_kernel(M, N, K, chip="ascend950", **kw):
    return tilelang_mini.compile(matmul.factory(M, N, K, **kw), out_idx=[-1], chip=chip)


def ragged_gemm(M=128, N=128, bm=64, bn=64, bk=32):
    """Expert-mode cube GEMM whose trip count and epilogue depend on the block id."""
    return cube_gemm(M, N, 3 * bk, bm, bn, bk, ragged=True)


# --------------------------------------------------------------------- extrapolation = full sim


def _full(kernel_ir, chip):
    rng = np.random.default_rng(0)
    args = []
    from tilelang_mini.ir import dtypes
    for p in kernel_ir.params:
        args.append(rng.standard_normal(p.shape).astype(dtypes.to_numpy(p.dtype)))
    return simulate_kernel(kernel_ir, args, chip)


@pytest.mark.parametrize("chip_name", ["ascend910b", "ascend950"])
def test_estimate_equals_full_simulation_with_clipped_edges(chip_name):
    chip = get_chip(chip_name)
    k = gemm_kernel(300, 520, 200, chip=chip_name, block_M=64, block_N=128, block_K=32)
    est = k.estimate()
    full = _full(k.ir, chip)
    assert len(est.simulated) == 1 and est.classes[0][1] == k.ir.grid[0]
    assert est.cycles == full.cycles
    assert est.block_cycles == full.block_cycles
    ncores = chip.aic_cores
    for p in PIPES:
        total = full.pipe_busy[p]
        units = len({key.split(".")[0] for key, c in full.core_pipe_busy.items()
                     if key.endswith("." + p) and c}) or 1
        assert est.pipe_busy[p] == pytest.approx(total / (full.cycles * ncores * units))


def test_block_dependent_control_flow_makes_classes():
    ir = ragged_gemm()
    chip = get_chip("ascend910b")
    classes = block_classes(ir)
    # trip counts cid % 3 + 1 and the `if cid < 2` epilogue: blocks 0, 1, 2, 3 all differ
    assert sorted(classes) == [0, 1, 2, 3]
    est = estimate_kernel(ir, chip)
    full = _full(ir, chip)
    assert est.block_cycles == full.block_cycles and est.cycles == full.cycles
    assert len(set(est.block_cycles.values())) > 1


def test_data_free_simulation_matches_simulation_with_data():
    k = gemm_kernel(256, 256, 128, chip="ascend910b")
    chip = get_chip("ascend910b")
    free = simulate_kernel(k.ir, None, chip, data=False)
    full = _full(k.ir, chip)
    assert free.cycles == full.cycles and free.block_cycles == full.block_cycles
    assert free.core_pipe_busy == full.core_pipe_busy


# ------------------------------------------------------------------------------- calibration


@pytest.mark.parametrize("dtype", ["bfloat16", "float8_e4m3fn"])
def test_calibration_against_deepgemm_ascend_950(dtype):
    k = gemm_kernel(*FULL, block_M=128, block_N=256, block_K=64, num_stages=2, dtype=dtype)
    est = k.estimate()  # its speed is measured in benchmarks/sim_speed.py, not asserted here
    assert est.time_us == pytest.approx(PUBLISHED[dtype], rel=0.10)
    assert est.bottleneck == "M" and est.bound == "compute"
    flops = 2 * FULL[0] * FULL[1] * FULL[2]
    assert est.flops == flops
    assert est.tflops == pytest.approx(flops / est.time_us / 1e6)
    peak = 432.0 * (2 if dtype.startswith("float8") else 1)
    assert est.peak_tflops == pytest.approx(peak)
    assert est.peak_fraction == pytest.approx(est.tflops / peak)
    assert est.waves == 28 and est.blocks == 896


def test_single_stage_lowers_cube_busy():
    one = gemm_kernel(1024, 1024, 2048, block_M=128, block_N=256, num_stages=1).estimate()
    two = gemm_kernel(1024, 1024, 2048, block_M=128, block_N=256, num_stages=2).estimate()
    assert one.pipe_busy["M"] < two.pipe_busy["M"]
    assert two.cycles < one.cycles
    assert set(one.pipe_busy) == set(PIPES)
    assert all(0.0 <= v <= 1.0 for v in two.pipe_busy.values())


def test_summary_and_roofline():
    est = gemm_kernel(1024, 1024, 1024).estimate()
    text = est.summary()
    assert "bottleneck" in text and "MTE2" in text and "roofline" in text
    assert est.gm_bytes == 1024 * 1024 * (2 + 2 + 4)
    assert est.intensity == pytest.approx(est.flops / est.gm_bytes)
    assert est.bandwidth_tbps == 4.0
    assert est.attainable_tflops <= est.peak_tflops


# ---------------------------------------------------------------------------------- timelines


def _check_trace(path, pipes=("MTE2", "MTE1", "M", "FIX")):
    trace = json.loads(Path(path).read_text())
    events = trace["traceEvents"]
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
               if e["ph"] == "M" and e["name"] == "thread_name"}
    procs = {e["pid"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert procs
    for pid in procs:   # one track per pipe per core
        names = [n for (p, _), n in threads.items() if p == pid]
        assert sorted(names) == sorted(PIPES)
    xs = [e for e in events if e["ph"] == "X"]
    assert {threads[(e["pid"], e["tid"])] for e in xs} >= set(pipes)
    for e in xs:
        assert threads[(e["pid"], e["tid"])] == e["args"]["pipe"]
        assert e["dur"] >= 0 and e["ts"] >= 0
    gemm = [e for e in xs if e["name"].startswith("gemm(")]
    assert gemm and "gemm.py:" in gemm[0]["name"]
    return trace


def test_estimate_to_perfetto(tmp_path):
    est = gemm_kernel(512, 512, 256).estimate()
    est.to_perfetto(tmp_path / "t.json")
    trace = _check_trace(tmp_path / "t.json")
    assert trace["otherData"]["cycles"] == est.cycles


def test_report_to_perfetto_places_blocks_on_cores(tmp_path):
    k = gemm_kernel(256, 256, 128, chip="ascend910b", block_M=64, block_N=64)
    chip = get_chip("ascend910b")
    rep = simulate_kernel(k.ir, None, chip, data=False)
    rep.to_perfetto(tmp_path / "r.json")
    trace = _check_trace(tmp_path / "r.json")
    xs = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    blocks = {e["args"]["block"] for e in xs}
    assert blocks == set(range(k.ir.grid[0]))
    # the 16 blocks over 24 cores: one block per core, all start at cycle 0
    assert min(e["args"]["start_cycle"] for e in xs) == 0


def test_png_outputs(tmp_path):
    pytest.importorskip("matplotlib")
    est = gemm_kernel(512, 512, 256).estimate()
    est.to_png(tmp_path / "g.png")
    est.roofline_png(tmp_path / "r.png")
    for name in ("g.png", "r.png"):
        assert (tmp_path / name).read_bytes()[:4] == b"\x89PNG"


# ----------------------------------------------------------------------------------- autotune


def test_autotune_by_estimate_skips_what_does_not_fit():
    configs = [dict(block_M=bm, block_N=bn, num_stages=s)
               for bm in (64, 128, 256) for bn in (128, 256, 512) for s in (1, 2)]
    res = tilelang_mini.autotune(matmul, configs, by="estimate", chip="ascend950",
                                 args=(1024, 1024, 1024), progress=False)
    assert len(res.entries) == len(configs)   # block_M=128, block_N=128, 2 stages: the default
    default = res.default
    assert default is not None and default.status == "ok"
    assert default.config == dict(block_M=128, block_N=128, num_stages=2)
    assert res.best.time_us <= default.time_us
    skipped = res.skipped
    assert skipped and all("L0C" in e.reason or "overflow" in e.reason for e in skipped)
    assert all(e.time_us is not None for e in res.ok)
    assert "skipped" in res.table()


def test_autotune_by_measure_on_llvm(capsys):
    configs = [dict(block_M=64, block_N=64, block_K=32), dict(block_M=128, block_N=128)]
    res = tilelang_mini.autotune(matmul, configs, by="measure", chip="ascend910b",
                                 args=(256, 256, 128), repeat=3, progress=True)
    assert res.by == "measure" and len(res.ok) == 2     # the second is the default
    assert res.best.time_us <= res.default.time_us
    assert res.best.kernel.target == "llvm"
    assert "[autotune]" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------- CLI


def test_cli_trace_and_run_summary(tmp_path, capsys):
    from tilelang_mini.cli import main
    out = tmp_path / "trace.json"
    assert main(["trace", str(ROOT / "examples/gemm.py"), "--chip", "ascend950",
                 "-o", str(out)]) == 0
    _check_trace(out)
    text = capsys.readouterr().out
    assert "bottleneck" in text and "busy:" in text
    assert main(["run", str(ROOT / "examples/gemm.py"), "--show-ir", "none",
                 "--shape", "128", "128", "64"]) == 0
    text = capsys.readouterr().out
    assert "total wall time" in text and "cycles" in text and "bottleneck" in text


# ------------------------------------------------------------------ memory hierarchy and roofs


def _example_factories():
    """(name, JITFactory, its DEFAULT_ARGS) of every example that defines both."""
    import importlib
    out = []
    for path in sorted((ROOT / "examples").glob("[a-z]*.py")):
        mod = importlib.import_module(path.stem)
        for obj in vars(mod).values():
            if isinstance(obj, tilelang_mini.runtime.kernel.JITFactory) and \
                    obj.factory.__module__ == mod.__name__ and hasattr(mod, "DEFAULT_ARGS"):
                out.append((path.stem, obj, tuple(mod.DEFAULT_ARGS)))
    return out


def _check_roofs(est):
    """The estimate is never faster than any roof: compute, HBM (compulsory bytes), L2."""
    chip = get_chip(est.chip)
    floor_s = est.gm_bytes / (chip.costs.gm_tbps * 1e12)
    assert est.time_s >= floor_s * (1 - 1e-9)
    assert est.hbm_bytes >= est.gm_bytes
    if est.flops:
        assert est.time_s >= est.flops / (est.peak_tflops * 1e12) * (1 - 1e-9)
        assert est.tflops <= est.attainable_tflops * (1 + 1e-9)
    assert est.time_s >= est.traffic_bytes / (chip.costs.l2_tbps * 1e12) * (1 - 1e-9)
    for pt in est.roofline_points():   # the roofline plot's data: no point above its roof
        assert pt.tflops <= pt.roof_tflops * (1 + 1e-9), pt


@pytest.mark.parametrize("chip_name", ["ascend910b", "ascend950"])
def test_every_example_is_under_its_roofs(chip_name):
    found = _example_factories()
    assert {name for name, _, _ in found} >= {"gemm", "prenorm", "rmsnorm", "softmax",
                                                "flash_attention", "matmul_add"}
    for name, factory, shape in found:
        prim = factory.factory(*shape)
        k = tilelang_mini.compile(prim, out_idx=factory.out_idx, chip=chip_name)
        _check_roofs(k.estimate())


def test_gemm_1024_on_950_stays_under_the_memory_roofs():
    est = gemm_kernel(1024, 1024, 1024, dtype="bfloat16").estimate()
    _check_roofs(est)
    hbm, l2 = est.roofline_points()
    assert hbm.level == "HBM" and l2.level == "L2"
    # every operand fits the L2: the HBM sees each argument once
    assert est.hbm_bytes == est.gm_bytes == 1024 * 1024 * (2 + 2 + 4)
    assert est.traffic_bytes > est.gm_bytes       # blocks re-read panels, served by the L2


def test_memory_bound_gemv_is_estimated_at_the_hbm_roof():
    for chip_name in ("ascend910b", "ascend950"):
        k = gemm_kernel(16, 8192, 8192, chip=chip_name, block_M=16)
        est = k.estimate()
        _check_roofs(est)
        chip = get_chip(chip_name)
        assert est.bound == "memory" and est.bottleneck == "HBM"
        # the pipes alone would be faster than the HBM allows
        assert est.core_cycles < est.cycles
        assert est.time_s == pytest.approx(est.hbm_bytes / (chip.costs.gm_tbps * 1e12), rel=0.01)


@pytest.mark.parametrize("chip_name", ["ascend910b", "ascend950"])
def test_skinny_prenorm_of_the_design_card_is_under_its_roofs(chip_name):
    """prenorm 4096 x 24 x 8192 (bf16 A streamed once, tf32 product): never faster than its
    HBM bytes or its tf32 compute, whichever is larger."""
    from prenorm import hc_prenorm
    k = tilelang_mini.compile(hc_prenorm.factory(4096, 24, 8192), out_idx=[-2, -1],
                              chip=chip_name)
    est = k.estimate()
    _check_roofs(est)
    chip = get_chip(chip_name)
    assert est.hbm_bytes >= 4096 * 8192 * 2          # A, read once
    floor = max(est.hbm_bytes / (chip.costs.gm_tbps * 1e12),
                est.flops / (est.peak_tflops * 1e12))
    assert est.time_s >= floor


def test_small_l2_sends_reread_panels_to_the_hbm():
    import dataclasses
    from tilelang_mini.sim.estimate import estimate_kernel
    k = gemm_kernel(2048, 2048, 2048, dtype="bfloat16")
    chip = get_chip("ascend950")
    big = estimate_kernel(k.ir, chip)
    tiny = dataclasses.replace(chip, costs=dataclasses.replace(chip.costs, l2_bytes=1 << 20))
    small = estimate_kernel(k.ir, tiny)
    assert big.hbm_bytes == big.gm_bytes
    # 1 MiB holds no 128 x 2048 bf16 panel (512 KiB each: A and B of a block): what a wave
    # reads again was evicted by the wave before, yet never more than the blocks move
    assert big.gm_bytes < small.hbm_bytes <= small.traffic_bytes
    _check_roofs(small)
