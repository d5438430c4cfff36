"""Legal edge cases of the library the fuzzer's `library` family found failing: the k-grouped
GEMMs with every group empty (sum_k = 0: there was no GEMM shape, a CompileError from inside the
library); D[g] = C[g], or 0 without C, on every target and on the simulator."""
import numpy as np
import pytest
from refs import BF16

from tilelang_mini.kernels import deep_gemm as dg


def _call(kind, d, c):
    if kind == "bf16":
        return (dg.k_grouped_bf16_gemm_tn_contiguous,
                (np.zeros((0, 5), BF16), np.zeros((0, 7), BF16), d, [0, 0]), {"c": c})
    e4 = np.zeros((0, 5), np.float32), np.zeros((0, 5), np.float32)
    return (dg.k_grouped_fp8_gemm_tn_contiguous,
            (e4, (np.zeros((0, 7), np.float32), np.zeros((0, 7), np.float32)), d, [0, 0]),
            {"c": c})


@pytest.mark.parametrize("kind", ("bf16", "fp8"))
@pytest.mark.parametrize("c_mode", ("none", "d", "separate"))
def test_k_grouped_with_every_group_empty(target, kind, c_mode):
    r = np.random.default_rng(3)
    d = np.full((2, 5, 7), np.nan, np.float32)
    c = r.standard_normal((2, 5, 7)).astype(np.float32)
    if c_mode == "d":
        d[...] = c
    fn, args, kw = _call(kind, d, {"none": None, "d": d, "separate": c}[c_mode])
    fn(*args, target=target, **kw)
    want = np.zeros((2, 5, 7)) if c_mode == "none" else c.astype(np.float64)
    assert np.array_equal(d.astype(np.float64), want)
    if target == "numpy":  # the same launches on the simulator
        d[...] = np.nan if c_mode != "d" else c
        for kernel, arrays in fn.launches(*args, target="numpy", **kw):
            kernel.simulate(*arrays)
        assert np.array_equal(d.astype(np.float64), want)
