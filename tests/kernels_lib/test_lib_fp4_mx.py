"""FP4 (e2m1, two codes a byte, gran_k 32 UE8M0 scales) on ascend950's MX MMAD: packed bytes go
to the cube as they are (float4_e2m1fn_x2 tiles). Float64 references decode the nibbles from the
e2m1 table written here (sign, 0 0.5 1 1.5 2 3 4 6); every target, simulate on a small shape; the
910b keeps the vector dequantising path and rejects packed scales."""
import numpy as np
import pytest
from refs import BF16, FP8, close, rng

import tilelang_mini as tl
import tilelang_mini.language as T
from tilelang_mini.kernels import deep_gemm as dg

CHIP = "ascend950"
E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6])


def quant_fp4(x):
    """Row-wise groups of 32 along K: (packed uint8 [R, K/2], fp32 power-of-two scales
    [R, ceil(K/32)], float64 dequantised values). Codes are the nearest e2m1 value of x / sf."""
    r, k = x.shape
    g = -(-k // 32)
    xp = np.zeros((r, g * 32))
    xp[:, :k] = x
    amax = np.maximum(np.abs(xp.reshape(r, g, 32)).max(-1), 1e-4)
    sf = 2.0 ** np.ceil(np.log2(amax / 6.0))
    y = (xp.reshape(r, g, 32) / sf[:, :, None]).reshape(r, -1)[:, :k]
    mag = np.abs(np.abs(y)[..., None] - E2M1).argmin(-1)
    codes = (mag | np.where((y < 0) & (mag > 0), 8, 0)).astype(np.uint8)
    packed = (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8)
    vals = np.where(codes & 8, -1.0, 1.0) * E2M1[codes & 7]
    return packed, sf.astype(np.float32), vals * np.repeat(sf, 32, axis=1)[:, :k]


def pack_pairs(sf):
    """fp32 powers of two [MN, G] -> uint16 [ceil(G/2), MN]: exponents of groups 2j (low byte),
    2j + 1 (high byte)."""
    e = np.log2(sf.astype(np.float64)).astype(np.int64) + 127
    g = e.shape[1]
    ep = np.zeros((e.shape[0], 2 * (-(-g // 2))), np.int64)
    ep[:, :g] = e
    return (ep[:, 0::2] | (ep[:, 1::2] << 8)).T.astype(np.uint16).copy()


@pytest.mark.parametrize("M,N,K,c_kind", [(33, 136, 384, None), (1, 20, 640, "separate"),
                                           (130, 8, 128, "inplace")])
def test_fp4_gemm_on_the_mx_cube(target, M, N, K, c_kind):
    r = rng(31)
    pa, sa, va = quant_fp4(r.standard_normal((M, K)))
    pb, sb, vb = quant_fp4(r.standard_normal((N, K)) * 3)
    psa = dg.transform_sf_into_required_layout(sa, M, K, (1, 32), target=target, chip=CHIP)
    psb = dg.transform_sf_into_required_layout(sb, N, K, (1, 32), target=target, chip=CHIP)
    assert np.array_equal(psa, pack_pairs(sa)) and np.array_equal(psb, pack_pairs(sb))
    want = va @ vb.T
    c = r.standard_normal((M, N)).astype(np.float32)
    if c_kind == "inplace":
        d = c.copy()
        dg.fp8_fp4_gemm_nt((pa.view(np.int8), psa), (pb, psb), d, c=d, target=target, chip=CHIP)
        close(d, want + c, "float32", scale=np.sqrt(K) * 10)
        return
    d = np.full((M, N), np.nan, BF16)
    dg.fp8_fp4_gemm_nt((pa, psa), (pb, psb), d, c=c if c_kind else None, target=target,
                       chip=CHIP)
    close(d, want + (c if c_kind else 0), "bfloat16", scale=np.sqrt(K) * 10)
    # the same numbers through the vector-dequantising path (fp32 scales), on the 910b
    d2 = np.full((M, N), np.nan, BF16)
    dg.fp8_fp4_gemm_nt((pa, sa), (pb, sb), d2, c=c if c_kind else None, target=target,
                       chip="ascend910b")
    close(d2, want + (c if c_kind else 0), "bfloat16", scale=np.sqrt(K) * 10)


def test_fp4_mx_gemm_simulates_and_runs_on_the_cube():
    r = rng(32)
    M, N, K = 20, 24, 256
    pa, sa, va = quant_fp4(r.standard_normal((M, K)))
    pb, sb, vb = quant_fp4(r.standard_normal((N, K)))
    d = np.zeros((M, N), np.float32)
    (kernel, arrays), = dg.fp8_fp4_gemm_nt.launches((pa, pack_pairs(sa)), (pb, pack_pairs(sb)),
                                                    d, target="numpy", chip=CHIP)
    _, report = kernel.simulate(*arrays)
    assert report.cycles > 0
    close(d, va @ vb.T, "float32", scale=np.sqrt(K) * 10)
    ir = kernel.get_ir("insert_sync")
    assert "scale_gran=32" in ir and "float4_e2m1fn_x2" in ir


def test_fp4_packed_scales_rejected_where_no_mx_cube():
    pa = np.zeros((16, 64), np.uint8)
    ps = np.zeros((2, 16), np.uint16)
    d = np.zeros((16, 16), np.float32)
    with pytest.raises(ValueError, match="ascend910b has none"):
        dg.fp8_fp4_gemm_nt((pa, ps), (pa, ps), d, chip="ascend910b")
    fp8 = np.zeros((16, 128), FP8)
    with pytest.raises(ValueError, match="FP8 operand"):
        dg.fp8_fp4_gemm_nt((fp8, np.zeros((3, 16), np.uint16)), (pa, ps), d, chip=CHIP)


def quant_fp8_ue8m0(x, gran):
    """Row-wise groups of `gran` along K: (e4m3 [R, K], fp32 power-of-two scales, float64
    values)."""
    r, k = x.shape
    g = -(-k // gran)
    xp = np.zeros((r, g * gran))
    xp[:, :k] = x
    amax = np.maximum(np.abs(xp.reshape(r, g, gran)).max(-1), 1e-4)
    sf = 2.0 ** np.ceil(np.log2(amax / 448.0))
    q = (xp.reshape(r, g, gran) / sf[:, :, None]).reshape(r, -1)[:, :k].astype(FP8)
    return q, sf.astype(np.float32), q.astype(np.float64) * np.repeat(sf, gran, axis=1)[:, :k]


@pytest.mark.parametrize("M,N,K,fp8_side,gran,c_kind", [
    (33, 136, 384, "a", 128, None), (1, 20, 640, "b", 32, "separate"),
    (130, 8, 128, "b", 128, "inplace"), (65, 3, 256, "a", 32, None),
    (9, 5, 256, "b", 128, None)])
def test_mixed_fp8_fp4_gemm_on_the_mx_cube(target, M, N, K, fp8_side, gran, c_kind):
    """One e4m3 operand (UE8M0 pairs of gran 128 or 32) and one packed e2m1 operand (gran 32):
    the FP4 one widened to e4m3 by a kernel (exact), the gran-128 pairs regrouped to 32, then the
    FP8 MX GEMM; the reference multiplies the float64 values the operands stand for."""
    r = rng(33)
    xa, xb = r.standard_normal((M, K)), r.standard_normal((N, K)) * 3
    if fp8_side == "a":
        qa, sa, va = quant_fp8_ue8m0(xa, gran)
        qb, sb, vb = quant_fp4(xb)
    else:
        qa, sa, va = quant_fp4(xa)
        qb, sb, vb = quant_fp8_ue8m0(xb, gran)
    a, b = (qa, pack_pairs(sa)), (qb, pack_pairs(sb))
    want = va @ vb.T
    c = r.standard_normal((M, N)).astype(np.float32)
    d = c.copy() if c_kind == "inplace" else np.full((M, N), np.nan, np.float32)
    cc = d if c_kind == "inplace" else (c if c_kind else None)
    dg.fp8_fp4_gemm_nt(a, b, d, c=cc, target=target, chip=CHIP)
    close(d, want + (c if c_kind else 0), "float32", scale=np.sqrt(K) * 10)
    if target == "numpy" and M in (9, 65):
        launches = dg.fp8_fp4_gemm_nt.launches(a, b, d, target="numpy", chip=CHIP)
        # widen the FP4 operand, regroup gran-128 FP8 scales to 32, the GEMM
        assert len(launches) == (3 if gran == 128 else 2)
        for kernel, arrays in launches:
            _, report = kernel.simulate(*arrays)
            assert report.cycles > 0
        close(d, want, "float32", scale=np.sqrt(K) * 10)
        assert "float8_e4m3fn" in launches[-1][0].get_ir("insert_sync")


def test_fp4_mx_estimate_is_cube_bound_at_twice_fp8():
    M, N, K = 4096, 7168, 16384
    a = np.empty((M, K // 2), np.uint8)
    b = np.empty((N, K // 2), np.uint8)
    sa, sb = np.empty((K // 64, M), np.uint16), np.empty((K // 64, N), np.uint16)
    d = np.empty((M, N), BF16)
    est = dg.fp8_fp4_gemm_nt.estimate((a, sa), (b, sb), d, chip=CHIP)
    (_, e), = est.kernels
    assert e.flops == 2 * M * N * K
    roof = e.flops / (e.peak_tflops * 1e12) * 1e6  # the cube's FP4 peak: 4x its bf16 rate
    assert e.peak_tflops == pytest.approx(4 * 2 * 4096 * e.aic_cores * e.clock_ghz * 1e-3, rel=0.01)
    assert roof <= est.time_us <= 1.15 * roof, (est.time_us, roof)
    assert e.pipe_busy["V"] == 0.0


def fp4_gemm_kernel(M, N, K):
    @T.prim_func
    def unscaled(A: T.Tensor((M, K // 2), "float4_e2m1fn_x2"),
                 B: T.Tensor((N, K // 2), "float4_e2m1fn_x2"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1) as bx:
            a = T.alloc_shared((M, K // 2), "float4_e2m1fn_x2")
            b = T.alloc_shared((N, K // 2), "float4_e2m1fn_x2")
            c = T.alloc_fragment((M, N), "float32")
            T.copy(A, a)
            T.copy(B, b)
            T.gemm(a, b, c, transpose_B=True, clear_accum=True)
            T.copy(c, C)
    return unscaled


def test_unscaled_fp4_gemm_is_a_located_error():
    with pytest.raises(tl.CompileError) as e:
        tl.compile(fp4_gemm_kernel(16, 16, 64), chip=CHIP)
    msg = str(e.value)
    assert "block-scaled MMAD only" in msg and "T.gemm(a, b, c" in msg and "^" in msg
