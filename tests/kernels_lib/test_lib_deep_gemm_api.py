"""DeepGEMM's API surface beyond the nt forms: one scale-layout rule for FP8 and FP4 (an MN-major
operand's scales also transposed, as DeepGEMM's aliases pass them), the nn m-grouped GEMMs
(B [G, K, N]), the bf16 k-grouped GEMM, DeepGEMM's other names, and awkward shapes (M = 1,
N = 1 quantisation). References are float64 products of the values the operands stand for."""
import numpy as np
import pytest
from refs import BF16, close, dequant_per_block, dequant_per_token, quant_per_block, \
    quant_per_token, rng
from test_lib_deep_gemm import _contiguous_layout, k_grouped_case
from test_lib_fp4_layouts import operand

from tilelang_mini.kernels import deep_gemm as dg


@pytest.mark.parametrize("layout,M,N,K", [("nn", 1, 136, 260), ("tn", 3, 72, 384),
                                          ("tt", 129, 40, 130), ("nn", 5, 256, 256)])
def test_fp8_gemm_transposed_scales(target, layout, M, N, K):
    """The MN-major operand's scales given transposed ([ceil(K/128), M] for sfa, [ceil(K/128),
    ceil(N/128)] for sfb), as DeepGEMM's fp8_gemm_{nn,tn,tt} receive them: same result as the
    per-row / per-block forms. tn 3 x 384 (sfa 3 x 3) and nn 256 x 256 (sfb 2 x 2) are square:
    there the transposed view `sf.T` is read transposed, a C-contiguous array per row."""
    r = rng(71)
    qa, sa = quant_per_token(r.standard_normal((M, K)))
    qb, sb = quant_per_block(r.standard_normal((N, K)) * 2)
    want = dequant_per_token(qa, sa) @ dequant_per_block(qb, sb).T
    a_t, b_t = layout[0] == "t", layout[1] == "n"
    A = np.ascontiguousarray(qa.T) if a_t else qa
    B = np.ascontiguousarray(qb.T) if b_t else qb
    fn = getattr(dg, f"fp8_gemm_{layout}")
    square = (a_t and sa.shape[0] == sa.shape[1]) or (b_t and sb.shape[0] == sb.shape[1])
    forms = [(sa, sb), (sa.T if a_t else sa, sb.T if b_t else sb)]  # DeepGEMM's: views
    if not square:
        forms.append((np.ascontiguousarray(sa.T) if a_t else sa,
                      np.ascontiguousarray(sb.T) if b_t else sb))
    for sfa, sfb in forms:
        d = np.full((M, N), np.nan, np.float32)
        fn((A, sfa), (B, sfb), d, target=target, chip="ascend950")
        close(d, want, "float32", scale=np.sqrt(K) * 10)


def test_scale_shapes_outside_the_rule_are_rejected():
    r = rng(72)
    qa, sa = quant_per_token(r.standard_normal((5, 256)))
    qb, sb = quant_per_block(r.standard_normal((130, 256)))
    d = np.empty((5, 130), np.float32)
    with pytest.raises(ValueError, match="sfa has shape"):  # nt: A is K-major, no transposed form
        dg.fp8_gemm_nt((qa, np.ascontiguousarray(sa.T)), (qb, sb), d, target="numpy")
    with pytest.raises(ValueError, match="sfb has shape"):
        dg.fp8_gemm_nt((qa, sa), (qb, sb[:, :1]), d, target="numpy")


def _groups(r, sizes, K, N, G):
    layout = _contiguous_layout(sizes)
    return layout, r.standard_normal((layout.size, K)), r.standard_normal((G, N, K))


def _grouped_want(d0, layout, xa, wb):
    want = d0.astype(np.float64).copy()
    for i, g in enumerate(layout):
        if g >= 0:
            want[i] = xa[i] @ wb[g].T
    return want


@pytest.mark.parametrize("kind", ("bf16", "fp8", "fp8 transposed sfb", "fp4"))
def test_m_grouped_nn_contiguous(target, kind):
    """B stored [G, K, N] (m_grouped_*_gemm_nn_contiguous): an empty group, padding rows left
    as they were, a group of one row."""
    r = rng(73)
    G, N, K = 3, 138, 160
    layout, x, w = _groups(r, [1, 0, 130], K, N, G)
    d0 = r.standard_normal((layout.size, N)).astype(np.float32)
    d = d0.copy()
    if kind == "bf16":
        a, b = x.astype(BF16), w.astype(BF16)
        xa, wb = a.astype(np.float64), b.astype(np.float64)
        dg.m_grouped_bf16_gemm_nn_contiguous(a, np.ascontiguousarray(b.transpose(0, 2, 1)), d,
                                             layout, target=target)
        tol = "bfloat16"
    elif kind.startswith("fp8"):
        qa, sa = quant_per_token(x)
        qbs = [quant_per_block(w[g]) for g in range(G)]
        qb, sb = np.stack([q for q, _ in qbs]), np.stack([s for _, s in qbs])
        xa = dequant_per_token(qa, sa)
        wb = np.stack([dequant_per_block(q, s) for q, s in qbs])
        if "transposed" in kind:  # DeepGEMM's alias passes sfb.mT (a view) of [G, 2, 2]
            sb = sb.transpose(0, 2, 1)
        dg.m_grouped_fp8_gemm_nn_contiguous((qa, sa), (np.ascontiguousarray(
            qb.transpose(0, 2, 1)), sb), d, layout, target=target)
        tol = "float32"
    else:  # FP8 A, FP4 B packed along N ([G, K, N/2]) with transposed gran-32 scales
        a, sa, xa = operand(x, "fp8", False, gran=32)
        bs = [operand(w[g], "fp4", True, sf_t=True) for g in range(G)]
        b, sb, wb = (np.stack([o[i] for o in bs]) for i in range(3))
        dg.m_grouped_fp8_fp4_gemm_nn_contiguous((a, sa), (b, sb), d, layout, target=target)
        tol = "float32"
    want = _grouped_want(d0, layout, xa, wb)
    close(d, want, tol, scale=None if tol == "bfloat16" else np.sqrt(K) * 10)
    pad = layout < 0
    assert np.array_equal(d[pad], d0[pad])


@pytest.mark.parametrize("c_mode", ("none", "inplace", "separate"))
def test_k_grouped_bf16_and_fp8_c_modes(target, c_mode):
    r = rng(74)
    ks, M, N = [128, 0, 384], 3, 129  # an empty group, odd M and N
    G = len(ks)
    (qa, sa), (qb, sb), c, want8 = k_grouped_case(r, ks, M, N)
    a = r.standard_normal((sum(ks), M)).astype(BF16)
    b = r.standard_normal((sum(ks), N)).astype(BF16)
    want16 = c.astype(np.float64).copy()
    start = 0
    for g, k in enumerate(ks):
        want16[g] += a[start:start + k].astype(np.float64).T @ b[start:start + k].astype(np.float64)
        start += k
    for fn, args, want in ((dg.k_grouped_fp8_gemm_tn_contiguous, ((qa, sa), (qb, sb)), want8),
                           (dg.k_grouped_bf16_gemm_tn_contiguous, (a, b), want16)):
        d = c.copy() if c_mode == "inplace" else np.full((G, M, N), np.nan, np.float32)
        cc = {"none": None, "inplace": d, "separate": c}[c_mode]
        fn(*args, d, ks, c=cc, target=target)
        close(d, want if cc is not None else want - c, "float32", scale=40)


def test_deepgemm_other_names(target):
    """DeepGEMM's legacy and newer names reach the same kernels; what is not supported says so."""
    assert dg.fp8_m_grouped_gemm_nt_masked is dg.m_grouped_fp8_gemm_nt_masked
    assert dg.bf16_m_grouped_gemm_nt_masked is dg.m_grouped_bf16_gemm_nt_masked
    assert dg.get_theoretical_mk_alignment_for_contiguous_layout() == \
        dg.get_m_alignment_for_contiguous_layout() == dg.get_mk_alignment_for_contiguous_layout()
    from test_lib_mqa import mqa_inputs, mqa_ref
    q, kv, sf, w, ks, ke = mqa_inputs(rng(75), 5, 2, 32, 70)
    got = dg.fp8_fp4_mqa_logits((q, None), (kv, sf), w, ks, ke, True, target=target)
    want = mqa_ref(q, kv, sf, w, ks, ke, True)
    finite = np.isfinite(want)
    assert np.array_equal(np.isneginf(got), ~finite)
    close(got[finite], want[finite], "float32", scale=30)
    with pytest.raises(ValueError, match="packed two a byte"):  # scales given: q must be FP4
        dg.fp8_fp4_mqa_logits((q, sf), (kv, sf), w, ks, ke, target=target)
    with pytest.raises(ValueError, match="max_seqlen_k"):
        dg.fp8_mqa_logits(q, (kv, sf), w, ks, ke, False, 64, target=target)
    r = rng(76)
    a, b = r.standard_normal((3, 40)).astype(BF16), r.standard_normal((40, 24)).astype(BF16)
    d = np.empty((3, 24), np.float32)
    dg.cublaslt_gemm_nn(a, b, d, target=target)
    close(d, a.astype(np.float64) @ b.astype(np.float64), "float32", scale=10)


@pytest.mark.parametrize("shape", ((2, 1), (1, 129)))
def test_per_token_cast_tiny_rows(target, shape):
    x = rng(77).standard_normal(shape).astype(np.float32) * 3
    q, sf = dg.per_token_cast_to_fp8(x, False, target=target)
    wq, wsf = quant_per_token(x.astype(np.float64))
    np.testing.assert_array_equal(sf, wsf)
    close(q.astype(np.float32) * np.repeat(sf, 128, 1)[:, :shape[1]], x.astype(np.float64),
          "float8_e4m3fn", scale=np.abs(x).max())


@pytest.mark.parametrize("expr", ("bmk,bnk->mn", "bhr,hdr->bhd", "bhd,hdr->bhr"))
def test_einsum(target, expr):
    """DeepGEMM's einsum expressions at shapes off the tiles (odd batch, 130 columns)."""
    r = rng(78)
    if expr == "bmk,bnk->mn":
        a = r.standard_normal((3, 5, 70)).astype(BF16)
        b = r.standard_normal((3, 130, 70)).astype(BF16)
        want = np.einsum(expr, a.astype(np.float64), b.astype(np.float64))
        d = r.standard_normal((5, 130)).astype(np.float32)
        d0 = d.copy()
        dg.einsum(expr, a, b, d, c=d, target=target)   # float32 d accumulates
        close(d, d0 + want, "float32", scale=10)
        d = np.full((5, 130), np.nan, BF16)
        dg.einsum(expr, a, b, d, target=target)
        close(d, want, "bfloat16")
        with pytest.raises(ValueError, match="c=d"):
            dg.einsum(expr, a, b, np.zeros((5, 130), np.float32), target=target)
        return
    a = r.standard_normal((3, 2, 70)).astype(BF16)
    b = r.standard_normal((2, 130, 70) if expr == "bhr,hdr->bhd" else (2, 70, 130)).astype(BF16)
    d = np.full((3, 2, 130), np.nan, BF16)
    dg.einsum(expr, a, b, d, target=target)
    close(d, np.einsum(expr, a.astype(np.float64), b.astype(np.float64)), "bfloat16")
    with pytest.raises(ValueError, match="not supported"):
        dg.einsum("bhd,hrd->bhr", a, b, d, target=target)


@pytest.mark.parametrize("splits,M,heads", [((128, 64, 128), 3, 2), ((64, 0, 32), 1, 3),
                                            ((16, 16, 0), 129, 4)])
def test_fp8_gemm_nt_skip_head_mid(target, splits, M, heads):
    """Each head's left columns, then `mid` columns left as they were, then its right columns
    (DeepGEMM's EpilogueHeadSplits); a zero-width part on either side."""
    r = rng(79)
    left, mid, right = splits
    N, K, W = heads * (left + right), 130, left + mid + right
    qa, sa = quant_per_token(r.standard_normal((M, K)))
    qb, sb = quant_per_block(r.standard_normal((N, K)))
    g = dequant_per_token(qa, sa) @ dequant_per_block(qb, sb).T
    d0 = r.standard_normal((M, heads * W)).astype(np.float32)
    d = d0.copy()
    dg.fp8_gemm_nt_skip_head_mid((qa, sa), (qb, sb), d, splits, target=target)
    want = d0.astype(np.float64)
    for h in range(heads):
        want[:, h * W:h * W + left] = g[:, h * (left + right):h * (left + right) + left]
        lo = h * (left + right) + left
        want[:, h * W + left + mid:(h + 1) * W] = g[:, lo:lo + right]
    close(d, want, "float32", scale=np.sqrt(K) * 10)
    with pytest.raises(ValueError, match="multiple of left"):
        dg.fp8_gemm_nt_skip_head_mid((qa, sa), (qb, sb), d, (left + 1, mid, right), target=target)
