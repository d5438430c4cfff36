"""No kernel is estimated above its roofline: every example's own kernel at its DEFAULT_ARGS and
every launch of every library function (at the small shapes of benchmarks/kernel_estimates.py),
on both chip presets, against roofs taken from the chip preset (benchmarks/roofs.py: compute
peak, HBM bandwidth x compulsory intensity, HBM and L2 bytes per second), and no GM access the
memory model does not count. `python benchmarks/roofs.py` checks the full-size shapes and the
library examples' own calls."""
import dataclasses
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import roofs  # noqa: E402


@pytest.mark.parametrize("chip", roofs.CHIPS)
def test_every_example_and_library_launch_is_under_its_roofs(chip):
    launches = [x for x in roofs.example_launches(run_mains=False) if x[2] == chip]
    names = {label.split()[0] for label, *_ in launches}
    assert names >= {"gemm", "gemm_expert", "prenorm", "rmsnorm", "softmax", "flash_attention",
                     "matmul_add"}
    launches += [x for x in roofs.library_launches(small=True) if x[2] == chip]
    n, worst, bad = roofs.check(launches)
    assert n > 40 and bad == [], bad
    assert 0.05 < worst <= 1.0 + 1e-9     # some launch is near a roof, none above


def test_the_check_sees_a_point_above_the_roof():
    """An estimate faster than its roofs (half its time) is reported, by each roof."""
    import tilelang_mini
    sys.path.insert(0, str(ROOT / "examples"))
    from gemm import matmul
    k = tilelang_mini.compile(matmul.factory(1024, 1024, 1024, dtype="bfloat16"), out_idx=[-1],
                              chip="ascend950")
    est = k.estimate()
    ok = roofs.launch_ratios(est, k.ir, "ascend950")
    assert max(ok.values()) <= 1.0 + 1e-9
    fast = dataclasses.replace(est, time_us=est.time_us / 1000,
                               tflops=est.flops / (est.time_s / 1000) / 1e12)
    above = roofs.launch_ratios(fast, k.ir, "ascend950")
    assert all(above[key] > 1.0 for key in ("HBM bytes/s", "L2 bytes/s", "compulsory bytes/s",
                                            "FLOP/s vs compute roof"))
    n, _, bad = roofs.check([("gemm fast", k.ir, "ascend950", fast)])
    assert n == 1 and len(bad) == 1 and "gemm fast" in bad[0]
