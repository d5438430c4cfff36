"""DeepGEMM's API on tilelang_mini: a bf16 GEMM (nt), a block-scaled FP8 GEMM (fp32 scales, and
on ascend950 UE8M0 scales packed in pairs that the cube applies itself), an FP4 GEMM on the 950's
MX MMAD and an m-grouped
contiguous MoE GEMM, each checked against float64 NumPy, then estimated at DeepGEMM-Ascend's
benchmark shape (4096 x 7168 x 16384): bf16 and FP8 with fp32 scales on both chip presets, packed
UE8M0 and FP4 on ascend950.

    python examples/deepgemm.py [--target numpy|llvm] [--chip ascend910b|ascend950] [--shape M N K]
"""
import numpy as np

from tilelang_mini.kernels import deep_gemm

DEFAULT_ARGS = (77, 200, 300)


def quantize_rows(x):
    """(1, 128) FP8 e4m3 quantisation along K: values and fp32 scales (DeepGEMM's recipe)."""
    from ml_dtypes import float8_e4m3fn
    m, k = x.shape
    kb = -(-k // 128)
    xp = np.zeros((m, kb * 128))
    xp[:, :k] = x
    sf = np.maximum(np.abs(xp.reshape(m, kb, 128)).max(-1), 1e-4) / 448.0
    q = (xp.reshape(m, kb, 128) / sf[:, :, None]).reshape(m, -1)[:, :k].astype(float8_e4m3fn)
    return q, sf.astype(np.float32)


def dequantize_rows(q, sf):
    return q.astype(np.float64) * np.repeat(sf.astype(np.float64), 128, axis=1)[:, :q.shape[1]]


def fp4_values(packed, sf):
    """float64 values of packed e2m1 codes (low nibble first) times their gran-32 scales."""
    u = packed.view(np.uint8)
    codes = np.stack([u & 15, u >> 4], -1).reshape(u.shape[0], -1)
    mag = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6])[codes & 7]
    return np.where(codes & 8, -mag, mag) * np.repeat(sf.astype(np.float64), 32, axis=1)


def main(argv=None):
    from _common import ESTIMATE_CHIPS, example_args, library_run, verdict, verify
    from ml_dtypes import bfloat16
    args = example_args(__doc__, argv, dtype="bfloat16", shape=DEFAULT_ARGS)
    M, N, K = args.shape
    run, rng = library_run(args)
    a = rng.standard_normal((M, K)).astype(bfloat16)
    b = rng.standard_normal((N, K)).astype(bfloat16)
    d = np.empty((M, N), np.float32)
    deep_gemm.bf16_gemm_nt(a, b, d, **run)
    ok = verify("bf16_gemm_nt", d, a.astype(np.float64) @ b.astype(np.float64).T, "float32",
                reduce_len=K)

    (qa, sa), (qb, sb) = quantize_rows(a.astype(np.float64)), quantize_rows(b.astype(np.float64))
    d8 = np.empty((M, N), bfloat16)
    deep_gemm.fp8_gemm_nt((qa, sa), (qb, sb), d8, **run)   # sfb per row: recipe (1, 1, 128)
    ok &= verify("fp8_gemm_nt", d8, dequantize_rows(qa, sa) @ dequantize_rows(qb, sb).T,
                 "bfloat16", reduce_len=K)

    # ascend950: UE8M0 (power-of-two) scales, packed in pairs (uint16, MN-major) for the MX MMAD
    mx = dict(run, chip="ascend950")
    qa2, sa2 = deep_gemm.per_token_cast_to_fp8(a.astype(np.float32), True, **run)
    qb2, sb2 = deep_gemm.per_token_cast_to_fp8(b.astype(np.float32), True, **run)
    pa = deep_gemm.transform_sf_into_required_layout(sa2, M, K, (1, 1, 128), is_sfa=True, **mx)
    pb = deep_gemm.transform_sf_into_required_layout(sb2, N, K, (1, 1, 128), **mx)
    d8 = np.empty((M, N), bfloat16)
    deep_gemm.fp8_gemm_nt((qa2, pa), (qb2, pb), d8, **mx)
    ok &= verify("fp8_gemm_nt (packed UE8M0, ascend950)", d8,
                 dequantize_rows(qa2, sa2) @ dequantize_rows(qb2, sb2).T, "bfloat16", reduce_len=K)

    # FP4 (e2m1, two codes a byte, gran_k 32): on ascend950 the MX MMAD takes the packed bytes;
    # FP4 GEMMs take K a multiple of 128, so K is padded with zeros here
    K4 = -(-K // 128) * 128
    a4, b4 = np.zeros((M, K4), np.float32), np.zeros((N, K4), np.float32)
    a4[:, :K], b4[:, :K] = a, b
    pa4, sa4 = deep_gemm.per_token_cast_to_fp4(a4, True, gran_k=32, **run)
    pb4, sb4 = deep_gemm.per_token_cast_to_fp4(b4, True, gran_k=32, **run)
    psa4 = deep_gemm.transform_sf_into_required_layout(sa4, M, K4, (1, 32), **mx)
    psb4 = deep_gemm.transform_sf_into_required_layout(sb4, N, K4, (1, 32), **mx)
    d4 = np.empty((M, N), np.float32)
    deep_gemm.fp8_fp4_gemm_nt((pa4, psa4), (pb4, psb4), d4, **mx)
    ok &= verify("fp8_fp4_gemm_nt (FP4 x FP4 on the MX MMAD, ascend950)", d4,
                 fp4_values(pa4, sa4) @ fp4_values(pb4, sb4).T, "float32", reduce_len=K)

    align = deep_gemm.get_mk_alignment_for_contiguous_layout()
    groups = [min(M, 50), 0, M // 3]
    layout = np.concatenate([np.r_[np.full(m, g), np.full(-(-m // align) * align - m, -1)]
                             for g, m in enumerate(groups)]).astype(np.int32)
    x = rng.standard_normal((layout.size, K)).astype(bfloat16)
    w = rng.standard_normal((len(groups), N, K)).astype(bfloat16)
    dg = np.zeros((layout.size, N), bfloat16)
    deep_gemm.m_grouped_bf16_gemm_nt_contiguous(x, w, dg, layout, **run)
    rows = layout >= 0
    want = np.einsum("mk,mnk->mn", x[rows].astype(np.float64), w[layout[rows]].astype(np.float64))
    ok &= verify("m_grouped_bf16_gemm_nt_contiguous", dg[rows], want, "bfloat16", reduce_len=K)
    ok &= bool(np.all(dg[~rows].astype(np.float32) == 0))   # padding rows untouched

    big = (4096, 7168, 16384)
    a_, b_ = np.empty((big[0], big[2]), bfloat16), np.empty((big[1], big[2]), bfloat16)
    d_ = np.empty((big[0], big[1]), bfloat16)
    for chip in ESTIMATE_CHIPS:
        est = deep_gemm.bf16_gemm_nt.estimate(a_, b_, d_, chip=chip)
        print(f"estimate bf16_gemm_nt {big} on {chip}: {est.time_us:.1f} us "
              f"({2 * big[0] * big[1] * big[2] / est.time_us / 1e6:.0f} TFLOP/s)")
    from ml_dtypes import float8_e4m3fn
    kp = big[2] // 256  # packed UE8M0 pairs per row
    fp8_args = ((np.empty((big[0], big[2]), float8_e4m3fn), np.empty((kp, big[0]), np.uint16)),
                (np.empty((big[1], big[2]), float8_e4m3fn), np.empty((kp, big[1]), np.uint16)),
                d_)
    kb = big[2] // 128  # fp32 scales: per-token sfa, (128, 128)-block sfb
    f32_args = ((np.empty((big[0], big[2]), float8_e4m3fn), np.empty((big[0], kb), np.float32)),
                (np.empty((big[1], big[2]), float8_e4m3fn),
                 np.empty((big[1] // 128, kb), np.float32)), d_)
    for chip in ESTIMATE_CHIPS:
        est = deep_gemm.fp8_gemm_nt.estimate(*f32_args, chip=chip)
        print(f"estimate fp8_gemm_nt {big} (fp32 block scales) on {chip}: {est.time_us:.1f} us "
              f"({2 * big[0] * big[1] * big[2] / est.time_us / 1e6:.0f} TFLOP/s)")
    est = deep_gemm.fp8_gemm_nt.estimate(*fp8_args, chip="ascend950")
    print(f"estimate fp8_gemm_nt {big} (packed UE8M0 scales) on ascend950: {est.time_us:.1f} us "
          f"({2 * big[0] * big[1] * big[2] / est.time_us / 1e6:.0f} TFLOP/s)")
    kq = big[2] // 64  # FP4: UE8M0 pairs of two 32-value groups
    fp4_args = ((np.empty((big[0], big[2] // 2), np.uint8), np.empty((kq, big[0]), np.uint16)),
                (np.empty((big[1], big[2] // 2), np.uint8), np.empty((kq, big[1]), np.uint16)),
                d_)
    est = deep_gemm.fp8_fp4_gemm_nt.estimate(*fp4_args, chip="ascend950")
    print(f"estimate fp8_fp4_gemm_nt {big} (FP4 x FP4, MX MMAD) on ascend950: "
          f"{est.time_us:.1f} us ({2 * big[0] * big[1] * big[2] / est.time_us / 1e6:.0f} TFLOP/s)")
    return verdict("deepgemm", ok)


if __name__ == "__main__":
    raise SystemExit(main())
