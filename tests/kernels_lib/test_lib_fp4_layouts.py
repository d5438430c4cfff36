"""FP4 operands (packed e2m1, gran_k 32 fp32 scales) in every layout (nt, nn, tn, tt) and in the
m-grouped GEMMs, on the vector-dequantising path. DeepGEMM's conventions: an MN-major FP4
operand is packed along MN ([K, MN/2], transpose_packed_fp4's layout), its scales per row
[MN, ceil(K/32)] or, as DeepGEMM's alias calls pass them, transposed [ceil(K/32), MN]. Shapes:
M, N not multiples of the 64 x 128 tile, K a multiple of 32 but not of 128. References are
float64 products of the values the operands stand for (nibbles decoded from the e2m1 table)."""
import numpy as np
import pytest
from refs import BF16, close, dequant_per_block, quant_per_block, rng
from test_lib_fp4_mx import pack_pairs, quant_fp4, quant_fp8_ue8m0

from tilelang_mini.kernels import deep_gemm as dg


def pack_mn(packed):
    """K-packed [MN, K/2] bytes -> MN-packed [K, MN/2] (the even MN index in the low nibble)."""
    codes = np.stack([packed & 15, packed >> 4], -1).reshape(packed.shape[0], -1)
    ct = codes.T
    return (ct[:, 0::2] | (ct[:, 1::2] << 4)).astype(np.uint8)


def operand(x, kind, mn_major, sf_t=False, gran=128):
    """(stored array, scales, float64 values [MN, K]) for kind "fp4" or "fp8"."""
    if kind == "fp4":
        q, sf, v = quant_fp4(x)
        q = pack_mn(q) if mn_major else q.view(np.int8)
    else:
        q, sf, v = quant_fp8_ue8m0(x, gran)
        q = np.ascontiguousarray(q.T) if mn_major else q
    return q, (np.ascontiguousarray(sf.T) if sf_t else sf), v


@pytest.mark.parametrize("layout,kinds,c_kind,sf_t,out", [
    ("nt", ("fp4", "fp4"), None, False, np.float32),
    ("nn", ("fp4", "fp4"), "separate", True, np.float32),
    ("tn", ("fp4", "fp4"), "inplace", False, np.float32),
    ("tt", ("fp4", "fp4"), None, True, BF16),
    ("nn", ("fp8", "fp4"), None, False, np.float32),
    ("tn", ("fp4", "fp8"), "separate", True, np.float32),
    ("tt", ("fp8", "fp4"), None, False, BF16),
])
def test_fp4_gemm_in_every_layout(target, layout, kinds, c_kind, sf_t, out):
    r = rng(41)
    M, N, K = 66, 138, 160
    a_t, b_t = layout[0] == "t", layout[1] == "n"
    a, sa, va = operand(r.standard_normal((M, K)), kinds[0], a_t, sf_t and a_t)
    b, sb, vb = operand(r.standard_normal((N, K)) * 3, kinds[1], b_t, sf_t and b_t)
    want = va @ vb.T
    c = r.standard_normal((M, N)).astype(np.float32)
    fn = getattr(dg, f"fp8_fp4_gemm_{layout}")
    if c_kind == "inplace":
        d = c.copy()
        fn((a, sa), (b, sb), d, c=d, target=target)
    else:
        d = np.full((M, N), np.nan, out)
        fn((a, sa), (b, sb), d, c=c if c_kind else None, target=target)
    if c_kind:
        want = want + c
    close(d, want, "float32" if out is np.float32 else "bfloat16", scale=np.sqrt(K) * 10)


def test_fp4_layouts_simulate():
    r = rng(42)
    M, N, K = 10, 20, 96
    a, sa, va = operand(r.standard_normal((M, K)), "fp4", True)
    b, sb, vb = operand(r.standard_normal((N, K)), "fp4", True, sf_t=True)
    d = np.zeros((M, N), np.float32)
    (kernel, arrays), = dg.fp8_fp4_gemm_tn.launches((a, sa), (b, sb), d, target="numpy")
    _, report = kernel.simulate(*arrays)
    assert report.cycles > 0
    close(d, va @ vb.T, "float32", scale=np.sqrt(K) * 10)


def test_fp4_impossible_layouts_are_clear_errors():
    pa, sa, _ = quant_fp4(np.ones((7, 64)))
    pb, sb, _ = quant_fp4(np.ones((16, 64)))
    with pytest.raises(ValueError, match="MN-major FP4 A is packed two M values a byte"):
        dg.fp8_fp4_gemm_tn((pack_mn(np.vstack([pa, pa[:1]])), sa), (pb, sb),
                           np.zeros((7, 16), np.float32))
    with pytest.raises(ValueError, match="nt layout"):
        dg.fp8_fp4_gemm_nn((pa, pack_pairs(sa)), (pack_mn(pb), pack_pairs(sb)),
                           np.zeros((7, 16), np.float32), chip="ascend950")
    with pytest.raises(ValueError, match=r"sfb \(FP4 operand\) has shape"):
        dg.fp8_fp4_gemm_nt((pa, sa), (pb, np.ones((16, 3), np.float32)),
                           np.zeros((7, 16), np.float32))
    with pytest.raises(ValueError, match="packed UE8M0 scales are not supported"):
        dg.m_grouped_fp8_fp4_gemm_nt_masked(
            (pa[None], pack_pairs(sa)[None]), (pb[None], pack_pairs(sb)[None]),
            np.zeros((1, 7, 16), BF16), np.array([7], np.int32), 7, chip="ascend950")


@pytest.mark.parametrize("kinds", [("fp4", "fp4"), ("fp8", "fp4")])
def test_m_grouped_fp4_contiguous(target, kinds):
    """Groups of 70, 0 and 45 rows, each padded to 128 with rows marked -1 (left untouched)."""
    r = rng(43)
    G, N, K = 3, 72, 160
    sizes = [70, 0, 45]
    align = dg.get_mk_alignment_for_contiguous_layout()
    layout = np.concatenate([np.r_[np.full(s, g), np.full(-(-s // align) * align - s, -1)]
                             for g, s in enumerate(sizes)]).astype(np.int32)
    M = layout.size
    a, sa, va = operand(r.standard_normal((M, K)), kinds[0], False)
    bs = [operand(r.standard_normal((N, K)), kinds[1], False) for _ in range(G)]
    b, sb = np.stack([x[0] for x in bs]), np.stack([x[1] for x in bs])
    d = np.full((M, N), 7.0, BF16)
    dg.m_grouped_fp8_fp4_gemm_nt_contiguous((a, sa), (b, sb), d, layout, target=target)
    rows = layout >= 0
    want = np.stack([va[m] @ bs[g][2].T if g >= 0 else np.zeros(N) for m, g in enumerate(layout)])
    close(d[rows], want[rows], "bfloat16", scale=np.sqrt(K) * 10)
    assert np.all(d[~rows].astype(np.float32) == 7.0)


@pytest.mark.parametrize("kinds", [("fp4", "fp4"), ("fp4", "fp8")])
def test_m_grouped_fp4_masked(target, kinds):
    r = rng(44)
    G, maxM, N, K = 3, 70, 136, 96
    masked_m = np.array([70, 0, 33], np.int32)
    ops = [operand(r.standard_normal((maxM, K)), kinds[0], False) for _ in range(G)]
    bs = [operand(r.standard_normal((N, K)), kinds[1], False) for _ in range(G)]
    masked_gemm_checked(ops, bs, masked_m, 40, target)


def masked_gemm_checked(ops, bs, masked_m, expected_m, target):
    """The masked grouped GEMM of per-group operands `ops` (A) and `bs` (B), each (stored,
    scales, float64 values): group g's first masked_m[g] rows checked against A @ B.T, the
    rows after them still 7.0. -> the stacked scales of B."""
    a, sa = np.stack([x[0] for x in ops]), np.stack([x[1] for x in ops])
    b, sb = np.stack([x[0] for x in bs]), np.stack([x[1] for x in bs])
    G, (maxM, K), N = len(ops), ops[0][2].shape, bs[0][2].shape[0]
    d = np.full((G, maxM, N), 7.0, np.float32)
    dg.m_grouped_fp8_fp4_gemm_nt_masked((a, sa), (b, sb), d, masked_m, expected_m, target=target)
    for g in range(G):
        m = masked_m[g]
        close(d[g, :m], ops[g][2][:m] @ bs[g][2].T, "float32", scale=np.sqrt(K) * 10)
        assert np.all(d[g, m:] == 7.0)
    return sb


def test_m_grouped_fp4_simulate():
    r = rng(45)
    G, maxM, N, K = 2, 9, 12, 64
    masked_m = np.array([5, 9], np.int32)
    ops = [operand(r.standard_normal((maxM, K)), "fp4", False) for _ in range(G)]
    bs = [operand(r.standard_normal((N, K)), "fp4", False) for _ in range(G)]
    a, sa = np.stack([x[0] for x in ops]), np.stack([x[1] for x in ops])
    b, sb = np.stack([x[0] for x in bs]), np.stack([x[1] for x in bs])
    d = np.zeros((G, maxM, N), np.float32)
    (kernel, arrays), = dg.m_grouped_fp8_fp4_gemm_nt_masked.launches(
        (a, sa), (b, sb), d, masked_m, 8, target="numpy")
    _, report = kernel.simulate(*arrays)
    assert report.cycles > 0
    for g in range(G):
        close(d[g, :masked_m[g]], ops[g][2][:masked_m[g]] @ bs[g][2].T, "float32",
              scale=np.sqrt(K) * 10)


def block_operand(x, mn_major, sf_t=False):
    """An e4m3 operand with UE8M0 (128, 128)-block scales [ceil(MN/128), ceil(K/128)]
    (DeepGEMM's (1, 128, 128) recipe for B): (stored, scales, float64 values)."""
    q, sf = quant_per_block(x, ue8m0=True)
    v = dequant_per_block(q, sf)
    q = np.ascontiguousarray(q.T) if mn_major else q
    return q, (np.ascontiguousarray(sf.T) if sf_t else sf), v


@pytest.mark.parametrize("layout,fp8_side,sf_t", [("nt", "b", False), ("nn", "b", True),
                                                  ("tt", "a", True), ("tn", "a", False)])
def test_mixed_fp4_fp8_with_block_scales(target, layout, fp8_side, sf_t):
    """FP4 x FP8 where the FP8 operand has fp32 (128, 128)-block scales (DeepGEMM's recipe for
    an FP8 B next to an FP4 A): the kernel spreads each block's scale over its rows. M 200 and
    N 138 straddle 128-row blocks (64-row tiles share a block's scales)."""
    r = rng(47)
    M, N, K = 200, 138, 288
    a_t, b_t = layout[0] == "t", layout[1] == "n"
    xa, xb = r.standard_normal((M, K)), r.standard_normal((N, K)) * 3
    if fp8_side == "b":
        a, sa, va = operand(xa, "fp4", a_t)
        b, sb, vb = block_operand(xb, b_t, sf_t)
    else:
        a, sa, va = block_operand(xa, a_t, sf_t)
        b, sb, vb = operand(xb, "fp4", b_t)
    d = np.full((M, N), np.nan, np.float32)
    getattr(dg, f"fp8_fp4_gemm_{layout}")((a, sa), (b, sb), d, target=target)
    close(d, va @ vb.T, "float32", scale=np.sqrt(K) * 10)


def test_m_grouped_fp4_with_fp8_block_scales(target):
    r = rng(48)
    G, maxM, N, K = 2, 40, 200, 160
    masked_m = np.array([40, 17], np.int32)
    ops = [operand(r.standard_normal((maxM, K)), "fp4", False) for _ in range(G)]
    bs = [block_operand(r.standard_normal((N, K)), False) for _ in range(G)]
    sb = masked_gemm_checked(ops, bs, masked_m, 32, target)
    assert sb.shape == (G, 2, 2)  # one scale per (128, 128) block of B
