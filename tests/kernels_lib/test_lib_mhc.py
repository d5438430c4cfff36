"""mHC: DeepGEMM's prenorm GEMM with K splits, TileKernels' mhc_pre / mhc_post / sinkhorn, against
float64 references written from TileKernels' reference functions, on every target."""
import numpy as np
import pytest
from refs import BF16, close, rng

from tilelang_mini.kernels import deep_gemm as dg
from tilelang_mini.kernels import mhc
from tilelang_mini.testing.references import mhc_pre_ref, sinkhorn_ref

TN, NS, C = 19, 4, 200  # odd token count (not a multiple of the 16-row blocks), C with a tail


@pytest.mark.parametrize("splits", (None, 3))
def test_hc_prenorm_gemm_splits(target, splits):
    r = rng(10)
    M, N, K = 13, 24, 700
    a, b = r.standard_normal((M, K)).astype(BF16), r.standard_normal((N, K)).astype(np.float32)
    d = np.empty((M, N) if splits is None else (splits, M, N), np.float32)
    s = np.empty((M,) if splits is None else (splits, M), np.float32)
    dg.tf32_hc_prenorm_gemm(a, b, d, s, num_splits=splits, target=target)
    a64 = a.astype(np.float64)
    close(d if splits is None else d.sum(0), a64 @ b.astype(np.float64).T, "float32",
          scale=np.sqrt(K))
    close(s if splits is None else s.sum(0), (a64 ** 2).sum(1), "float32", scale=K)


@pytest.mark.parametrize("M,K,splits", [(13, 700, 3), (70, 200, 4), (1, 129, 1)])
def test_hc_prenorm_gemm_atomic_reduce(target, M, K, splits):
    """The in-kernel reduction: the splits' blocks add into D [M, N] and sqr_sum [M] atomically
    (K splits past the data, odd M, one row); D and sqr_sum hold garbage on entry."""
    r = rng(13)
    N = 24
    a, b = r.standard_normal((M, K)).astype(BF16), r.standard_normal((N, K)).astype(np.float32)
    d = np.full((M, N), 7.0, np.float32)
    s = np.full((M,), -3.0, np.float32)
    dg.tf32_hc_prenorm_gemm(a, b, d, s, num_splits=splits, atomic_reduce=True, target=target)
    a64 = a.astype(np.float64)
    close(d, a64 @ b.astype(np.float64).T, "float32", scale=np.sqrt(K))
    close(s, (a64 ** 2).sum(1), "float32", scale=K)
    if target == "numpy" and M == 13:
        launches = dg.tf32_hc_prenorm_gemm.launches(a, b, d, s, num_splits=splits,
                                                    atomic_reduce=True, target="numpy")
        assert len(launches) == 2
        d[...], s[...] = np.nan, np.nan
        for kernel, arrays in launches:  # clear, then the atomic GEMM, on the simulator
            kernel.simulate(*arrays)
        close(d, a64 @ b.astype(np.float64).T, "float32", scale=np.sqrt(K))
        assert "atomic_add=True" in launches[1][0].get_ir("insert_sync")


def test_sinkhorn(target):
    x = rng(11).standard_normal((TN, NS, NS)).astype(np.float32)
    close(mhc.sinkhorn(x, repeat=7, eps=1e-6, target=target), sinkhorn_ref(x.astype(np.float64), 7, 1e-6),
          "float32", scale=1)


@pytest.mark.parametrize("splits", (None, 2))
def test_mhc_pre_and_post(target, splits):
    r = rng(12)
    n = NS
    N = n * (n + 2)
    res = r.standard_normal((TN, n, C)).astype(BF16)
    fn = (r.standard_normal((N, n * C)) * 0.05).astype(np.float32)
    scale = np.array([0.7, 1.3, 0.9], np.float32)
    base = (r.standard_normal(N) * 0.1).astype(np.float32)
    post, comb, layer_input = mhc.mhc_pre(res, fn, scale, base, sinkhorn_repeat=20,
                                          num_splits=splits, target=target)
    want_post, want_comb, want_li = mhc_pre_ref(res, fn, scale, base, 20)
    close(post, want_post, "float32", scale=10)
    close(comb, want_comb, "float32", scale=10)
    assert layer_input.dtype == BF16
    close(layer_input, want_li, "bfloat16")
    x = r.standard_normal((TN, C)).astype(BF16)
    out = mhc.mhc_post(x, res, want_post.astype(np.float32), want_comb.astype(np.float32),
                       target=target)
    want = (want_post[:, :, None] * x.astype(np.float64)[:, None, :]
            + np.einsum("tjk,tjc->tkc", want_comb, res.astype(np.float64)))
    close(out, want, "bfloat16")


def test_mhc_simulates_and_estimates():
    x = rng(13).standard_normal((TN, NS, NS)).astype(np.float32)
    (kernel, arrays), = mhc.sinkhorn.launches(x, 3, target="numpy")
    _, report = kernel.simulate(*arrays)
    close(arrays[1], sinkhorn_ref(x.astype(np.float64), 3, 1e-6), "float32", scale=1)
    assert report.cycles > 0
    res = np.empty((4096, 4, 7168), BF16)
    args = (res, np.empty((24, 4 * 7168), np.float32), np.empty(3, np.float32), np.empty(24, np.float32))
    est = mhc.mhc_pre.estimate(*args, chip="ascend950")
    assert len(est.kernels) == 2 and est.time_us > 0
    # no faster than reading the residual once at the chip's memory bandwidth (4 TB/s)
    assert est.time_us > res.nbytes / 4e12 * 1e6
