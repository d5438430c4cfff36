"""DeepGEMM's GEMM API: every layout, bf16/fp32 D, C and in-place C, FP8 block scales (fp32 and
power-of-two), grouped MoE forms with padding rows and empty groups, on every target."""
import numpy as np
import pytest
from refs import BF16, FP8, close, dequant_per_block, dequant_per_token, quant_per_block, \
    quant_per_token, rng

from tilelang_mini.kernels import deep_gemm as dg

LAYOUTS = ("nt", "nn", "tn", "tt")


def _store(x, layout, which):
    """The array DeepGEMM's layout letter asks for: A [K, M] for 't', B [K, N] for 'n'."""
    mn_major = layout[0] == "t" if which == "a" else layout[1] == "n"
    return np.ascontiguousarray(x.T) if mn_major else x


# each layout with one of the epilogues: bf16 D, fp32 D + C, C accumulated in place, bf16 D + C
@pytest.mark.parametrize("layout,out,c_mode", [("nt", BF16, None), ("nn", np.float32, "separate"),
                                              ("tn", np.float32, "inplace"),
                                              ("tt", BF16, "separate")])
def test_bf16_gemm_layouts(target, layout, out, c_mode):
    r = rng(1)
    M, N, K = 77, 200, 300  # odd M, N not a multiple of the tile, K with a tail
    a, b = r.standard_normal((M, K)).astype(BF16), r.standard_normal((N, K)).astype(BF16)
    want = a.astype(np.float64) @ b.astype(np.float64).T
    fn = getattr(dg, f"bf16_gemm_{layout}")
    c = r.standard_normal((M, N)).astype(np.float32)
    if c_mode == "inplace":
        d = c.copy()
        fn(_store(a, layout, "a"), _store(b, layout, "b"), d, c=d, target=target)
    else:
        d = np.full((M, N), np.nan, out)
        fn(_store(a, layout, "a"), _store(b, layout, "b"), d,
           c=c if c_mode else None, target=target)
    if c_mode:
        want = want + c
    close(d, want, "bfloat16" if out is BF16 else "float32",
          scale=None if out is BF16 else np.sqrt(K))


@pytest.mark.parametrize("layout,chip", [("nt", "ascend910b"), ("tn", "ascend910b")] +
                         [(layout, "ascend950") for layout in LAYOUTS])
def test_fp8_gemm(target, layout, chip):
    r = rng(2)
    M, N, K = 33, 136, 260
    x, y = r.standard_normal((M, K)), r.standard_normal((N, K)) * 3
    qa, sa = quant_per_token(x, ue8m0=(layout == "nn"))
    qb, sb = quant_per_block(y, ue8m0=(layout == "nn"))
    want = dequant_per_token(qa, sa) @ dequant_per_block(qb, sb).T
    d = np.empty((M, N), BF16)
    getattr(dg, f"fp8_gemm_{layout}")((_store(qa, layout, "a"), sa), (_store(qb, layout, "b"), sb),
                                      d, target=target, chip=chip)
    close(d, want, "bfloat16")


def test_fp8_gemm_per_channel_sfb_and_c(target):
    r = rng(3)
    M, N, K = 5, 40, 129
    qa, sa = quant_per_token(r.standard_normal((M, K)))
    qb, sb = quant_per_token(r.standard_normal((N, K)))  # recipe (1, 1, 128): sfb [N, Kb]
    c = r.standard_normal((M, N)).astype(np.float32)
    d = np.empty((M, N), np.float32)
    dg.fp8_fp4_gemm_nt((qa, sa), (qb, sb), d, c=c, target=target)
    close(d, dequant_per_token(qa, sa) @ dequant_per_token(qb, sb).T + c, "float32", scale=10)


def test_910b_rejects_fp8_cube():
    import kernels
    import tilelang_mini as tl

    k = kernels.gemm(16, 16, 32, block_M=16, block_N=16, block_K=32, dtype="float8_e4m3fn")
    with pytest.raises(tl.CompileError) as e:
        tl.compile(k, chip="ascend910b")
    msg = str(e.value)
    assert "has no FP8" in msg and "T.gemm(A_s, B_s, C_f" in msg and "^" in msg
    tl.compile(k, chip="ascend950")  # the 950's cube takes FP8


def _contiguous_layout(ms):
    align = dg.get_mk_alignment_for_contiguous_layout()
    sizes = [-(-m // align) * align for m in ms]
    layout = np.full(sum(sizes), -1, np.int32)
    start = 0
    for g, (m, s) in enumerate(zip(ms, sizes)):
        layout[start:start + m] = g
        start += s
    return layout


@pytest.mark.parametrize("fp8", (False, True))
def test_m_grouped_contiguous(target, fp8):
    r = rng(4)
    G, N, K = 3, 72, 200
    layout = _contiguous_layout([5, 0, 131])  # an empty group, padding rows in two blocks
    M = layout.size
    x, w = r.standard_normal((M, K)), r.standard_normal((G, N, K))
    d = np.full((M, N), np.nan, BF16)
    if fp8:
        qa, sa = quant_per_token(x)
        qbs = [quant_per_block(w[g]) for g in range(G)]
        qb, sb = np.stack([q for q, _ in qbs]), np.stack([s for _, s in qbs])
        xa, wb = dequant_per_token(qa, sa), np.stack([dequant_per_block(q, s) for q, s in qbs])
        dg.m_grouped_fp8_gemm_nt_contiguous((qa, sa), (qb, sb), d, layout, target=target)
    else:
        a, b = x.astype(BF16), w.astype(BF16)
        xa, wb = a.astype(np.float64), b.astype(np.float64)
        dg.m_grouped_bf16_gemm_nt_contiguous(a, b, d, layout, target=target)
    rows = layout >= 0
    want = np.stack([xa[i] @ wb[layout[i]].T if rows[i] else np.zeros(N) for i in range(M)])
    close(d[rows], want[rows], "bfloat16")
    assert np.isnan(d[~rows].astype(np.float32)).all()  # padding rows untouched


@pytest.mark.parametrize("fp8", (False, True))
def test_m_grouped_masked(target, fp8):
    r = rng(5)
    G, maxM, N, K = 3, 70, 64, 150
    masked_m = np.array([3, 0, 70], np.int32)
    x, w = r.standard_normal((G, maxM, K)), r.standard_normal((G, N, K))
    d = np.full((G, maxM, N), np.nan, np.float32)
    if fp8:
        qas = [quant_per_token(x[g]) for g in range(G)]
        qbs = [quant_per_block(w[g]) for g in range(G)]
        qa, sa = np.stack([q for q, _ in qas]), np.stack([s for _, s in qas])
        qb, sb = np.stack([q for q, _ in qbs]), np.stack([s for _, s in qbs])
        xa = np.stack([dequant_per_token(q, s) for q, s in qas])
        wb = np.stack([dequant_per_block(q, s) for q, s in qbs])
        dg.m_grouped_fp8_gemm_nt_masked((qa, sa), (qb, sb), d, masked_m, 40, target=target)
    else:
        a, b = x.astype(BF16), w.astype(BF16)
        xa, wb = a.astype(np.float64), b.astype(np.float64)
        dg.m_grouped_bf16_gemm_nt_masked(a, b, d, masked_m, 40, target=target)
    for g in range(G):
        m = masked_m[g]
        close(d[g, :m], xa[g, :m] @ wb[g].T, "float32", scale=np.sqrt(K))
        assert np.isnan(d[g, m:]).all()


def test_gemm_simulates_and_estimates():
    r = rng(6)
    M, N, K = 40, 48, 96
    a, b = r.standard_normal((M, K)).astype(BF16), r.standard_normal((K, N)).astype(BF16)
    d = np.zeros((M, N), np.float32)
    (kernel, arrays), = dg.bf16_gemm_nn.launches(a, b, d, target="numpy")
    _, report = kernel.simulate(*arrays)
    assert report.cycles > 0
    close(d, a.astype(np.float64) @ b.astype(np.float64), "float32", scale=np.sqrt(K))
    big = (np.empty((4096, 16384), BF16), np.empty((7168, 16384), BF16),
           np.empty((4096, 7168), BF16))
    est = dg.bf16_gemm_nt.estimate(*big, chip="ascend950")
    assert abs(est.time_us - 2229.9) / 2229.9 < 0.10  # DeepGEMM-Ascend's published figure
    assert dg.bf16_gemm_nt.estimate(*big, chip="ascend910b").time_us > est.time_us


def k_grouped_case(r, ks, M, N):
    """FP8 operands of the weight-gradient GEMM (groups of ks K rows each, per-channel scales
    per 128 K rows, group by group), C, and the float64 D = C + A_g^T @ B_g per group."""
    a, b = r.standard_normal((sum(ks), M)), r.standard_normal((sum(ks), N))

    def per_channel(x):  # one scale per 128 K rows and per column
        v = x.reshape(x.shape[0] // 128, 128, -1)
        sf = (np.maximum(np.abs(v).max(1), 1e-4) / 448).astype(np.float32)
        return (v / sf[:, None, :]).reshape(x.shape).astype(FP8), sf

    (qa, sa), (qb, sb) = per_channel(a), per_channel(b)
    da = qa.astype(np.float64) * np.repeat(sa.astype(np.float64), 128, 0)
    db = qb.astype(np.float64) * np.repeat(sb.astype(np.float64), 128, 0)
    c = r.standard_normal((len(ks), M, N)).astype(np.float32)
    want = c.astype(np.float64).copy()
    start = 0
    for g, k in enumerate(ks):
        want[g] += da[start:start + k].T @ db[start:start + k]
        start += k
    return (qa, sa), (qb, sb), c, want


@pytest.mark.parametrize("chip", ("ascend910b", "ascend950"))
def test_k_grouped_fp8_gemm_tn_contiguous(target, chip):
    r = rng(7)
    ks = [256, 0, 128]  # an empty group
    G, M, N = len(ks), 72, 40
    (qa, sa), (qb, sb), c, want = k_grouped_case(r, ks, M, N)
    d = c.copy()
    dg.k_grouped_fp8_gemm_tn_contiguous((qa, sa), (qb, sb), d, ks, np.array(ks, np.int32), d,
                                        target=target, chip=chip)
    close(d, want, "float32", scale=20)
    d2 = np.empty((G, M, N), np.float32)
    dg.k_grouped_fp8_gemm_tn_contiguous((qa, sa), (qb, sb), d2, ks, target=target, chip=chip)
    close(d2, want - c, "float32", scale=20)


def test_fp8_fp4_gemm_with_fp4_weights(target):
    r = rng(8)
    M, N, K = 33, 72, 256
    x, w = r.standard_normal((M, K)), r.standard_normal((N, K))
    qa, sa = quant_per_token(x, ue8m0=True)
    packed, sb = dg.per_token_cast_to_fp4(w.astype(np.float32), True, gran_k=32, target=target)
    codes = np.stack([packed.view(np.uint8) & 15, packed.view(np.uint8) >> 4], -1).reshape(N, K)
    table = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6])
    vals = np.where(codes & 8, -1, 1) * table[codes & 7]
    wb = vals * np.repeat(sb.astype(np.float64), 32, axis=1)
    d = np.empty((M, N), np.float32)
    dg.fp8_fp4_gemm_nt((qa, sa), (packed, sb), d, target=target)
    close(d, dequant_per_token(qa, sa) @ wb.T, "float32", scale=np.sqrt(K) * 10)
