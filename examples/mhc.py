"""mHC pre/post (DeepSeek's TileKernels semantics) on tilelang_mini tile kernels: mhc_pre (the
prenorm GEMM split over K, then one fused kernel: RMS, scale/base, sigmoids, Sinkhorn, the
pre-weighted stream sum), mhc_post and DeepGEMM's tf32_hc_prenorm_gemm with its in-kernel
(atomic) split reduction, checked against float64 NumPy and estimated on both chips.

    python examples/mhc.py [--target numpy|llvm] [--chip ascend910b|ascend950] [--shape T C]
"""
import numpy as np

from tilelang_mini.kernels import deep_gemm, mhc

DEFAULT_ARGS = (37, 300)  # tokens, hidden (4 streams)
N_STREAMS = 4


def reference(res, fn, scale, base, x, repeat=20, eps=1e-6):
    """mhc_pre then mhc_post in float64, from TileKernels' reference functions."""
    from tilelang_mini.testing.references import mhc_pre_ref
    post, comb, layer_input = mhc_pre_ref(res, fn, scale, base, repeat, eps=eps)
    r = res.astype(np.float64)
    out = post[:, :, None] * x.astype(np.float64)[:, None] + np.einsum("tjk,tjc->tkc", comb, r)
    return post, comb, layer_input, out


def main(argv=None):
    from _common import ESTIMATE_CHIPS, example_args, library_run, verdict, verify
    from ml_dtypes import bfloat16
    args = example_args(__doc__, argv, dtype="bfloat16", shape=DEFAULT_ARGS)
    T_, C = args.shape
    n = N_STREAMS
    run, rng = library_run(args)
    res = rng.standard_normal((T_, n, C)).astype(bfloat16)
    fn = (rng.standard_normal((n * (n + 2), n * C)) * 0.05).astype(np.float32)
    scale = np.array([0.7, 1.3, 0.9], np.float32)
    base = (rng.standard_normal(n * (n + 2)) * 0.1).astype(np.float32)
    x = rng.standard_normal((T_, C)).astype(bfloat16)
    post, comb, layer_input = mhc.mhc_pre(res, fn, scale, base, **run)
    out = mhc.mhc_post(x, res, post, comb, **run)
    want = reference(res, fn, scale, base, x)
    ok = verify("post", post, want[0], "float32", reduce_len=100)
    ok &= verify("comb", comb, want[1], "float32", reduce_len=100)
    ok &= verify("layer_input", layer_input, want[2], "bfloat16")
    ok &= verify("mhc_post", out, want[3], "bfloat16")
    # DeepGEMM's prenorm GEMM itself: 3 K splits, summed in the kernel by atomic adds
    flat = res.reshape(T_, n * C)
    d = np.empty((T_, fn.shape[0]), np.float32)
    sq = np.empty(T_, np.float32)
    deep_gemm.tf32_hc_prenorm_gemm(flat, fn, d, sq, num_splits=3, atomic_reduce=True, **run)
    f64 = flat.astype(np.float64)
    ok &= verify("tf32_hc_prenorm_gemm (atomic_reduce)", d, f64 @ fn.astype(np.float64).T,
                 "float32", reduce_len=n * C)
    ok &= verify("sqr_sum", sq, (f64 ** 2).sum(1), "float32", reduce_len=n * C)
    big_res = np.empty((4096, n, 7168), bfloat16)
    big = (big_res, np.empty((n * (n + 2), n * 7168), np.float32), scale, base)
    for chip in ESTIMATE_CHIPS:
        pre_us = mhc.mhc_pre.estimate(*big, chip=chip).time_us
        post_us = mhc.mhc_post.estimate(np.empty((4096, 7168), bfloat16), big_res,
                                        np.empty((4096, n), np.float32),
                                        np.empty((4096, n, n), np.float32), chip=chip).time_us
        print(f"estimate mhc_pre / mhc_post (T=4096, C=7168) on {chip}: {pre_us:.1f} us / "
              f"{post_us:.1f} us")
        gemm_us = deep_gemm.tf32_hc_prenorm_gemm.estimate(
            np.empty((4096, n * 7168), bfloat16), big[1], np.empty((4096, n * (n + 2)), np.float32),
            np.empty(4096, np.float32), num_splits=16, atomic_reduce=True, chip=chip).time_us
        print(f"estimate tf32_hc_prenorm_gemm (4096 x 24 x 28672, 16 splits, atomic) on {chip}: "
              f"{gemm_us:.1f} us")
    return verdict("mhc", ok)


if __name__ == "__main__":
    raise SystemExit(main())
