"""The ascend950 path of DeepGEMM's FP8 GEMMs: UE8M0 scales packed in pairs (uint16, MN-major,
transform_sf_into_required_layout) that the cube applies itself (the scaled MMAD). Float64
references from the unpacked fp32 scales; the packing checked byte by byte against a NumPy
packing written here; every target, simulate on a small shape, the benchmark estimate."""
import numpy as np
import pytest
from refs import BF16, close, dequant_per_block, dequant_per_token, quant_per_block, \
    quant_per_token, rng

from tilelang_mini.kernels import deep_gemm as dg

CHIP = "ascend950"


def pack_ref(sf_rows):
    """fp32 [(G,) MN, KB] powers of two -> uint16 [(G,) ceil(KB/2), MN]: exponent bytes of
    groups 2j (low) and 2j + 1 (high); a missing odd group is byte 0."""
    e = (sf_rows.view(np.int32) >> 23).astype(np.int64) & 255
    kb = e.shape[-1]
    ep = np.zeros(e.shape[:-1] + (2 * (-(-kb // 2)),), np.int64)
    ep[..., :kb] = e
    return np.swapaxes(ep[..., 0::2] | (ep[..., 1::2] << 8), -1, -2).astype(np.uint16)


def _store(x, mn_major):
    return np.ascontiguousarray(x.T) if mn_major else x


@pytest.mark.parametrize("layout", ("nt", "nn", "tn", "tt"))
def test_fp8_gemm_packed_ue8m0(target, layout):
    r = rng(21)
    M, N, K = 33, 136, 390  # odd M, N past a tile, K with a tail and an odd number of groups
    qa, sa = quant_per_token(r.standard_normal((M, K)), ue8m0=True)
    qb, sb = quant_per_block(r.standard_normal((N, K)) * 3, ue8m0=True)
    psa = dg.transform_sf_into_required_layout(sa, M, K, (1, 128, 128), is_sfa=True,
                                               target=target, chip=CHIP)
    psb = dg.transform_sf_into_required_layout(sb, N, K, (1, 128, 128), target=target, chip=CHIP)
    assert psa.dtype == np.uint16 and psa.shape == (2, M)
    assert np.array_equal(psa, pack_ref(sa))
    assert np.array_equal(psb, pack_ref(np.repeat(sb, 128, axis=0)[:N]))
    want = dequant_per_token(qa, sa) @ dequant_per_block(qb, sb).T
    c = r.standard_normal((M, N)).astype(np.float32)
    d = np.full((M, N), np.nan, BF16)
    getattr(dg, f"fp8_gemm_{layout}")((_store(qa, layout[0] == "t"), psa),
                                      (_store(qb, layout[1] == "n"), psb), d, c=c,
                                      target=target, chip=CHIP)
    close(d, want + c, "bfloat16")


def test_fp8_gemm_packed_simulates():
    r = rng(22)
    M, N, K = 20, 24, 300
    qa, sa = quant_per_token(r.standard_normal((M, K)), ue8m0=True)
    qb, sb = quant_per_token(r.standard_normal((N, K)), ue8m0=True)  # recipe (1, 1, 128)
    psa, psb = pack_ref(sa), pack_ref(sb)
    d = np.zeros((M, N), np.float32)
    (kernel, arrays), = dg.fp8_gemm_nt.launches((qa, psa), (qb, psb), d, target="numpy",
                                                chip=CHIP)
    _, report = kernel.simulate(*arrays)
    assert report.cycles > 0
    close(d, dequant_per_token(qa, sa) @ dequant_per_token(qb, sb).T, "float32",
          scale=np.sqrt(K) * 10)
    assert "scale_gran=128" in kernel.get_ir("insert_sync")


def test_grouped_packed_ue8m0(target):
    r = rng(23)
    G, N, K = 3, 72, 200
    sizes = [5, 0, 131]
    layout = np.full(128 + 0 + 256, -1, np.int32)
    layout[:5], layout[128:128 + 131] = 0, 2
    M = layout.size
    qa, sa = quant_per_token(r.standard_normal((M, K)), ue8m0=True)
    qbs = [quant_per_block(r.standard_normal((N, K)), ue8m0=True) for _ in range(G)]
    qb, sb = np.stack([q for q, _ in qbs]), np.stack([s for _, s in qbs])
    psa = dg.transform_sf_into_required_layout(sa, M, K, (1, 128, 128), is_sfa=True,
                                               target=target, chip=CHIP)
    psb = dg.transform_sf_into_required_layout(sb, N, K, (1, 128, 128), num_groups=G,
                                               target=target, chip=CHIP)
    assert psb.shape == (G, 1, N)
    d = np.full((M, N), np.nan, BF16)
    dg.m_grouped_fp8_gemm_nt_contiguous((qa, psa), (qb, psb), d, layout, target=target,
                                        chip=CHIP)
    xa = dequant_per_token(qa, sa)
    rows = layout >= 0
    want = np.stack([xa[i] @ dequant_per_block(*qbs[layout[i]]).T if rows[i] else np.zeros(N)
                     for i in range(M)])
    close(d[rows], want[rows], "bfloat16")
    assert np.isnan(d[~rows].astype(np.float32)).all() and sum(sizes) == rows.sum()
    # masked: group g's first masked_m[g] rows
    maxM, masked_m = 40, np.array([3, 0, 40], np.int32)
    x = r.standard_normal((G, maxM, K))
    qas = [quant_per_token(x[g], ue8m0=True) for g in range(G)]
    qa3, sa3 = np.stack([q for q, _ in qas]), np.stack([s for _, s in qas])
    d3 = np.full((G, maxM, N), np.nan, np.float32)
    dg.m_grouped_fp8_gemm_nt_masked((qa3, pack_ref(sa3)), (qb, psb), d3, masked_m, 20,
                                    target=target, chip=CHIP)
    for g in range(G):
        m = masked_m[g]
        close(d3[g, :m], dequant_per_token(*qas[g])[:m] @ dequant_per_block(*qbs[g]).T,
              "float32", scale=np.sqrt(K) * 10)
        assert np.isnan(d3[g, m:]).all()


def test_910b_rejects_packed_scales():
    import tilelang_mini as tl
    r = rng(24)
    qa, sa = quant_per_token(r.standard_normal((8, 128)), ue8m0=True)
    with pytest.raises(tl.CompileError, match="needs a cube that applies block scales"):
        dg.fp8_gemm_nt((qa, pack_ref(sa)), (qa, pack_ref(sa)), np.empty((8, 8), np.float32),
                       target="numpy", chip="ascend910b")


def test_benchmark_estimate_within_10_percent_of_published():
    """DeepGEMM-Ascend's FP8 GEMM on the 950DT, 4096 x 7168 x 16384: 1117.6 us published."""
    from tilelang_mini.ir import dtypes
    fp8 = dtypes.to_numpy("float8_e4m3fn")
    M, N, K = 4096, 7168, 16384
    args = ((np.empty((M, K), fp8), np.empty((K // 256, M), np.uint16)),
            (np.empty((N, K), fp8), np.empty((K // 256, N), np.uint16)),
            np.empty((M, N), BF16))
    est = dg.fp8_gemm_nt.estimate(*args, chip=CHIP)
    assert abs(est.time_us - 1117.6) / 1117.6 < 0.10
    k = est.kernels[0][1] if isinstance(est.kernels[0], tuple) else est.kernels[0]
    assert k.bottleneck == "M" and k.pipe_busy["V"] == 0  # no vector round trip left
    assert est.time_us >= k.memory_floor_us and k.tflops <= k.peak_tflops
