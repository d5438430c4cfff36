"""Smoke test of benchmarks/bench.py: its whole path on tiny shapes, in this process.

No timing is asserted (tests never time anything, design.md section 7): only that every group
runs, every measured kernel verifies against NumPy and the ratios and compile times come out.
"""
from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "benchmarks" / "bench.py"


def _bench_module():
    spec = importlib.util.spec_from_file_location("_tlm_bench", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_bench_tiny_in_process(tmp_path, capsys):
    bench = _bench_module()
    out = tmp_path / "bench.json"
    status = bench.bench(cfg=bench.TINY, isolate=False, json_path=str(out))
    text = capsys.readouterr().out
    assert status == 0, text
    result = json.loads(out.read_text())
    assert not result["errors"]
    rows = {r["key"]: r for r in result["rows"]}
    # prenorm is compute-bound: its bandwidth row is context (checked, no goal)
    assert rows["prenorm_bw"]["verified"] is True and rows["prenorm_bw"]["target"] == "(info)"
    for key in ("gemm_fp32_64", "gemm_bf16_64", "threads_128", "rmsnorm_bw",
                "skinny_8", "skinny_24", "interp_gemm_64", "interp_rms_64x64",
                "interp_softmax_64x64", "interp_flash_1x64x64", "interp_elementwise_64x256",
                "interp_gemm_small_64", "interp_layernorm_64x128"):
        r = rows[key]
        assert r["verified"] is True and r["verdict"] in ("PASS", "MISS"), r
        assert math.isfinite(r["ratio"]) and r["ratio"] > 0, r
        assert r["max_err"] is not None and r["target"].startswith(">=")
    for key in ("cold_compile", "cache_hit"):
        r = rows[key]
        assert r["verified"] is True and r["verdict"] in ("PASS", "MISS"), r
        assert r["data"]["seconds"] > 0
    assert all(s["cache_hits"] == 1 for s in rows["cache_hit"]["data"]["stats"])
    # the issue-12 rows: each present, with a verdict (no timing asserted)
    for key in ("prenorm_roof", "prenorm_numpy", "interp_rms_64x64", "interp_triton", "sim_rate",
                "sim_grouped", "calib_bfloat16", "calib_float8_e4m3fn", "roofs", "gemv_roof",
                "compile_gemm", "scale_insert_sync", "scale_split_cores", "import",
                "sim_nodata_rate", "sim_data_rate", "sim_masked", "coro_interp_1x64x32",
                "coro_vs_interp_1x64x32"):
        assert rows[key]["verdict"] in ("PASS", "MISS", "-"), rows[key]
    # coroutine mode (cores waiting on each other) on llvm, checked against float64
    r = rows["coro_llvm_1x64x32"]
    assert r["verified"] is True and r["verdict"] in ("PASS", "MISS") and r["ratio"] > 0, r
    assert "Goals:" in text and "rows with a goal meet it" in text
    # the estimate rows do not depend on the machine: the calibration and the roofs hold
    for key in ("calib_bfloat16", "calib_float8_e4m3fn", "roofs", "gemv_roof"):
        assert rows[key]["verdict"] == "PASS", rows[key]
    assert "IN-PROCESS" in text and "NumPy BLAS" in text
    for r in rows.values():
        assert r["name"] in text


def test_cli_ir_after_llvm(capsys):
    from tilelang_mini.cli import main
    gemm = str(BENCH.parent.parent / "examples" / "gemm.py")
    assert main(["ir", gemm, "--after", "llvm", "--args", "64", "64", "64"]) == 0
    assert 'define i32 @"tlm_kernel"' in capsys.readouterr().out
    assert main(["ir", gemm, "--after", "llvm", "--target", "numpy"]) == 1
    assert "--after llvm needs --target llvm" in capsys.readouterr().err


def test_cli_bench_forwards_to_bench_py(capsys):
    """`tilelang-mini bench ...` hands every argument to bench.py's own parser (one option list)."""
    import pytest

    from tilelang_mini import cli
    with pytest.raises(SystemExit) as e:
        cli.main(["bench", "--help"])
    assert e.value.code == 0
    assert "--in-process" in capsys.readouterr().out
    with pytest.raises(SystemExit) as e:
        cli.main(["bench", "--no-such-option"])
    assert e.value.code == 2 and "bench.py: error" in capsys.readouterr().err
