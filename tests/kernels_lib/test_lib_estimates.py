"""Every library function's estimate, on both chip presets, is at or above its roofline (the
larger of the HBM roof of its arrays and the cube roof of its FLOPs), at the small shapes of
benchmarks/kernel_estimates.py (the generator of docs/kernels.md's table); only the packed-UE8M0
rows are rejected, and only on ascend910b."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import kernel_estimates as ke  # noqa: E402

ROWS = ke.rows(small=True)


@pytest.mark.parametrize("chip", ke.CHIPS)
def test_every_estimate_is_at_or_above_its_roof(chip):
    rejected = []
    for row in ROWS:
        got = ke.measure(row, chip)
        if got is None:
            rejected.append(row[0])
            continue
        time_us, roof_us, _ = got
        assert roof_us > 0 and time_us >= roof_us, (row[0], chip, time_us, roof_us)
    want = [r[0] for r in ROWS if "packed UE8M0" in r[0]] if chip == "ascend910b" else []
    assert rejected == want


def test_every_public_function_has_a_row_or_is_host_side():
    """The table covers the library's kernel families (helpers and aliases aside)."""
    from tilelang_mini.kernels import deep_gemm, flash_mla, mhc
    names = {r[2].__name__ for r in ROWS}
    for mod in (deep_gemm, flash_mla, mhc):
        for name in dir(mod):
            f = getattr(mod, name)
            if hasattr(f, "estimate") and hasattr(f, "kernels") and not name.startswith("_"):
                assert f.__name__ in names or f.__name__ in HELPERS, name


HELPERS = {"ceil_to_ue8m0", "pack_ue8m0_to_int", "unpack_ue8m0_from_int", "per_block_cast_to_fp8",
           "per_token_cast_to_fp4", "transform_sf_into_required_layout", "sinkhorn",
           "fp8_gemm_nn", "fp8_gemm_tn", "fp8_gemm_tt", "bf16_gemm_nn", "bf16_gemm_tn",
           "bf16_gemm_tt", "m_grouped_fp8_gemm_nt_masked", "fp8_mega_moe",
           "get_paged_mqa_logits_metadata", "get_mla_metadata", "per_channel_cast_to_fp8",
           "cast_back_from_fp4", "transpose_packed_fp4"}


@pytest.mark.parametrize("chip", ke.CHIPS)
def test_every_launch_is_under_its_roofs(chip):
    """Each kernel launch of every library function, on both presets: never faster than its
    compute roof, its HBM bytes (compulsory ones at least) or its L2 traffic, and every point of
    its roofline plot at or below its roof (tests/test_estimate.py's check for the examples)."""
    from tilelang_mini.errors import TileLangMiniError
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from test_estimate import _check_roofs
    launches, rejected = 0, []
    for name, _, f, args, kwargs, _ in ROWS:
        try:
            est = f.estimate(*args, chip=chip, **kwargs)
        except (ValueError, TileLangMiniError):
            rejected.append(name)       # a call the chip rejects (the test above lists them)
            continue
        for _, k in est.kernels:
            _check_roofs(k)
            launches += 1
    assert rejected == ([r[0] for r in ROWS if "packed UE8M0" in r[0]]
                        if chip == "ascend910b" else [])
    assert launches >= len(ROWS) - len(rejected)
