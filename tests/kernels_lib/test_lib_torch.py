"""Every public function of tilelang_mini.kernels called with torch CPU tensors (skipped when
torch is absent): inputs that require grad, bf16 / fp8 / e8m0 torch dtypes, FP4 packed two a
byte (uint8, int8, torch.float4_e2m1fn_x2 where torch has it); outputs written in place into the
caller's tensors (a non-contiguous one too), new results returned as torch tensors. Compared
against float64 NumPy references (refs.py and the references of the other library tests),
on every target."""
import numpy as np
import pytest
from refs import BF16, FP8, close, dequant_per_block, dequant_per_token, quant_per_block, \
    quant_per_token, rng

torch = pytest.importorskip("torch")

import tilelang_mini.kernels as K  # noqa: E402
from tilelang_mini.kernels import deep_gemm as dg  # noqa: E402
from tilelang_mini.kernels import flash_mla as fm  # noqa: E402
from tilelang_mini.kernels import mhc, topk  # noqa: E402
from tilelang_mini.kernels._core import LibraryFunction  # noqa: E402
from tilelang_mini.testing.references import mhc_pre_ref, sinkhorn_ref  # noqa: E402

_BITS = {"bfloat16": (np.int16, torch.bfloat16), "float8_e4m3fn": (np.uint8, torch.float8_e4m3fn),
         "float8_e8m0fnu": (np.uint8, getattr(torch, "float8_e8m0fnu", None))}
FP4X2 = getattr(torch, "float4_e2m1fn_x2", None)


def tt(x, requires_grad=False):
    """A torch tensor holding a copy of NumPy array `x` (bf16 / fp8 through their bits)."""
    x = np.ascontiguousarray(x)
    raw, tdt = _BITS.get(x.dtype.name, (None, None))
    t = torch.from_numpy(x.copy()) if raw is None else \
        torch.from_numpy(x.view(raw).copy()).view(tdt)
    return t.requires_grad_() if requires_grad else t


def f64(t):
    """A torch tensor's values as float64 NumPy (integers as they are)."""
    assert isinstance(t, torch.Tensor), type(t)
    t = t.detach()
    if not (t.dtype.is_floating_point):
        return t.numpy()
    return t.to(torch.float32).numpy().astype(np.float64)


def _store(x, mn_major):
    return np.ascontiguousarray(x.T) if mn_major else x


# layout -> (A stored [K, M], B stored [K, N]): DeepGEMM's letters, "t" for A and "n" for B
LAYOUTS = {"nt": (False, False), "nn": (False, True), "tn": (True, True), "tt": (True, False)}


def test_bf16_gemm_every_layout(target):
    r = rng(70)
    M, N, K = 19, 40, 150
    a, b = r.standard_normal((M, K)).astype(BF16), r.standard_normal((N, K)).astype(BF16)
    c = r.standard_normal((M, N)).astype(np.float32)
    want = a.astype(np.float64) @ b.astype(np.float64).T
    for layout, (a_t, b_t) in LAYOUTS.items():
        fn = getattr(dg, f"bf16_gemm_{layout}")
        ta, tb = tt(_store(a, a_t), requires_grad=True), tt(_store(b, b_t))
        if layout == "nt":      # bf16 D, no C
            d = torch.full((M, N), float("nan"), dtype=torch.bfloat16)
            assert fn(ta, tb, d, target=target) is None
            close(f64(d), want, "bfloat16")
        elif layout == "nn":    # fp32 D plus a separate C (requires grad)
            d = torch.full((M, N), float("nan"))
            fn(ta, tb, d, c=tt(c, requires_grad=True), target=target)
            close(f64(d), want + c, "float32", scale=np.sqrt(K))
        elif layout == "tn":    # C accumulated in place
            d = tt(c)
            fn(ta, tb, d, c=d, target=target)
            close(f64(d), want + c, "float32", scale=np.sqrt(K))
        else:                   # a non-contiguous D: the transpose of an [N, M] tensor
            store = torch.full((N, M), float("nan"))
            fn(ta, tb, store.t(), target=target)
            close(f64(store).T, want, "float32", scale=np.sqrt(K))


@pytest.mark.parametrize("name", ("fp8_gemm", "fp8_fp4_gemm"))
def test_fp8_gemm_every_layout(target, name):
    r = rng(71)
    M, N, K = 17, 40, 260
    qa, sa = quant_per_token(r.standard_normal((M, K)))
    qb, sb = quant_per_block(r.standard_normal((N, K)) * 3)
    want = dequant_per_token(qa, sa) @ dequant_per_block(qb, sb).T
    for layout, (a_t, b_t) in LAYOUTS.items():
        d = torch.empty((M, N), dtype=torch.bfloat16)
        getattr(dg, f"{name}_{layout}")((tt(_store(qa, a_t)), tt(sa)),
                                        (tt(_store(qb, b_t)), tt(sb)), d, target=target,
                                        chip="ascend950")
        close(f64(d), want, "bfloat16")


@pytest.mark.parametrize("fp4_form", ("uint8", "int8", "float4_e2m1fn_x2"))
def test_fp8_fp4_gemm_with_packed_fp4_weights(target, fp4_form):
    from test_lib_fp4_mx import quant_fp4
    if fp4_form == "float4_e2m1fn_x2" and FP4X2 is None:
        pytest.skip("this torch has no float4_e2m1fn_x2")
    r = rng(72)
    M, N, K = 9, 24, 128
    qa, sa = quant_per_token(r.standard_normal((M, K)), ue8m0=True)
    pb, sb, vb = quant_fp4(r.standard_normal((N, K)))
    tb = torch.from_numpy(pb.copy())
    tb = tb.view(torch.int8) if fp4_form == "int8" else (
        tb.view(FP4X2) if fp4_form != "uint8" else tb)
    d = torch.empty((M, N))
    dg.fp8_fp4_gemm_nt((tt(qa), tt(sa)), (tb, tt(sb)), d, target=target)
    close(f64(d), dequant_per_token(qa, sa) @ vb.T, "float32", scale=np.sqrt(K) * 10)


from test_lib_deep_gemm import _contiguous_layout  # noqa: E402


def _fp8_groups(x, w):
    qas = [quant_per_token(v) for v in x] if x.ndim == 3 else [quant_per_token(x)]
    qbs = [quant_per_block(v) for v in w]
    qa = np.stack([q for q, _ in qas]) if x.ndim == 3 else qas[0][0]
    sa = np.stack([s for _, s in qas]) if x.ndim == 3 else qas[0][1]
    xa = np.stack([dequant_per_token(q, s) for q, s in qas]) if x.ndim == 3 else \
        dequant_per_token(*qas[0])
    return (qa, sa), (np.stack([q for q, _ in qbs]), np.stack([s for _, s in qbs])), xa, \
        np.stack([dequant_per_block(q, s) for q, s in qbs])


@pytest.mark.parametrize("name", ("m_grouped_bf16_gemm_nt_contiguous",
                                  "m_grouped_fp8_gemm_nt_contiguous",
                                  "m_grouped_fp8_fp4_gemm_nt_contiguous"))
def test_m_grouped_contiguous(target, name):
    r = rng(73)
    G, N, K = 3, 40, 136
    layout = _contiguous_layout([5, 0, 70])
    M = layout.size
    x, w = r.standard_normal((M, K)), r.standard_normal((G, N, K))
    d = torch.full((M, N), float("nan"), dtype=torch.bfloat16)
    if "bf16" in name:
        a, b = x.astype(BF16), w.astype(BF16)
        xa, wb = a.astype(np.float64), b.astype(np.float64)
        args = (tt(a, requires_grad=True), tt(b))
    else:
        (qa, sa), (qb, sb), xa, wb = _fp8_groups(x, w)
        args = ((tt(qa), tt(sa)), (tt(qb), tt(sb)))
    getattr(dg, name)(*args, d, tt(layout), target=target)
    rows = layout >= 0
    want = np.stack([xa[i] @ wb[layout[i]].T if rows[i] else np.zeros(N) for i in range(M)])
    got = f64(d)
    close(got[rows], want[rows], "bfloat16")
    assert np.isnan(got[~rows]).all()  # padding rows untouched


@pytest.mark.parametrize("name", ("m_grouped_bf16_gemm_nt_masked", "m_grouped_fp8_gemm_nt_masked",
                                  "m_grouped_fp8_fp4_gemm_nt_masked"))
def test_m_grouped_masked(target, name):
    r = rng(74)
    G, maxM, N, K = 3, 40, 24, 130
    masked_m = np.array([3, 0, 40], np.int32)
    x, w = r.standard_normal((G, maxM, K)), r.standard_normal((G, N, K))
    d = torch.full((G, maxM, N), float("nan"))
    if "bf16" in name:
        a, b = x.astype(BF16), w.astype(BF16)
        xa, wb = a.astype(np.float64), b.astype(np.float64)
        args = (tt(a), tt(b, requires_grad=True))
    else:
        (qa, sa), (qb, sb), xa, wb = _fp8_groups(x, w)
        args = ((tt(qa), tt(sa)), (tt(qb), tt(sb)))
    getattr(dg, name)(*args, d, tt(masked_m), 20, target=target)
    got = f64(d)
    for g in range(G):
        m = masked_m[g]
        close(got[g, :m], xa[g, :m] @ wb[g].T, "float32", scale=np.sqrt(K))
        assert np.isnan(got[g, m:]).all()


def test_k_grouped_fp8_gemm_tn_contiguous(target):
    r = rng(75)
    from test_lib_deep_gemm import k_grouped_case
    ks = [128, 0, 256]
    (qa, sa), (qb, sb), c, want = k_grouped_case(r, ks, 24, 40)
    d = tt(c)
    dg.k_grouped_fp8_gemm_tn_contiguous((tt(qa), tt(sa)), (tt(qb), tt(sb)), d, ks,
                                        tt(np.array(ks, np.int32)), d, target=target)
    close(f64(d), want, "float32", scale=20)


@pytest.mark.parametrize("fp8", (False, True))
def test_mega_moe(target, fp8):
    from test_lib_mega_moe import E, H, T_, _inputs, moe_ref
    x, idx, w, l1, l2 = _inputs(76)
    y = torch.full((T_, H), float("nan"), dtype=torch.bfloat16)
    if fp8:
        q1 = [quant_per_block(l1[e].astype(np.float64)) for e in range(E)]
        q2 = [quant_per_block(l2[e].astype(np.float64)) for e in range(E)]
        w1 = (tt(np.stack([q for q, _ in q1])), tt(np.stack([s for _, s in q1])))
        w2 = (tt(np.stack([q for q, _ in q2])), tt(np.stack([s for _, s in q2])))
        out = dg.fp8_mega_moe(tt(x, requires_grad=True), tt(idx), tt(w), w1, w2, y,
                              chip="ascend950", target=target)
        want = moe_ref(x.astype(np.float64), idx, w,
                       np.stack([dequant_per_block(q, s) for q, s in q1]),
                       np.stack([dequant_per_block(q, s) for q, s in q2]), None,
                       quant_act=lambda a: dequant_per_token(*quant_per_token(a)))
    else:
        out = dg.bf16_mega_moe(tt(x, requires_grad=True), tt(idx), tt(w), tt(l1), tt(l2), y,
                               target=target)
        want = moe_ref(x.astype(np.float64), idx, w, l1.astype(np.float64),
                       l2.astype(np.float64), None)
    assert out is None or out is y
    close(f64(y), want, "bfloat16", scale=max(1.0, np.abs(want).max()))


def test_fp8_mqa_logits(target):
    from test_lib_mqa import check_logits, mqa_inputs, mqa_ref
    S, H, D, SK = 13, 2, 64, 90
    q, kv, sf, w, ks, ke = mqa_inputs(rng(77), S, H, D, SK)
    got = dg.fp8_mqa_logits(tt(q, requires_grad=False), (tt(kv), tt(sf)), tt(w, True), tt(ks),
                            tt(ke), clean_logits=True, target=target)
    assert isinstance(got, torch.Tensor) and got.dtype == torch.float32
    check_logits(f64(got), mqa_ref(q, kv, sf, w, ks, ke, True), D, H)


def test_fp8_paged_mqa_logits_and_metadata(target):
    from test_lib_mqa import check_logits, kv_cache_bytes, meta_ref, paged_ref
    r = rng(78)
    B, NN, H, D, BKV, MAXB, NB, L = 2, 2, 2, 32, 16, 3, 7, 40
    lens = np.array([37, 2], np.int32)
    kv, kv64 = kv_cache_bytes(r.standard_normal((NB, BKV, 1, D)))
    q = (r.standard_normal((B, NN, H, D)) * 0.5).astype(FP8)
    w = r.standard_normal((B * NN, H)).astype(np.float32)
    bt = r.permutation(NB)[:B * MAXB].reshape(B, MAXB).astype(np.int32)
    meta = dg.get_paged_mqa_logits_metadata(tt(lens), BKV, 4, target=target)
    assert isinstance(meta, torch.Tensor) and meta.dtype == torch.int32
    assert np.array_equal(meta.numpy(), meta_ref(lens, BKV, 4))
    got = dg.fp8_paged_mqa_logits(tt(q), tt(kv), tt(w), tt(lens), tt(bt), meta, L, target=target)
    assert isinstance(got, torch.Tensor)
    check_logits(f64(got), paged_ref(q, kv64, w, lens, bt, L), D, H)


def test_tf32_hc_prenorm_gemm(target):
    r = rng(79)
    M, N, K, S = 13, 24, 300, 2
    a, b = r.standard_normal((M, K)).astype(BF16), r.standard_normal((N, K)).astype(np.float32)
    d, s = torch.empty((S, M, N)), torch.empty((S, M))
    dg.tf32_hc_prenorm_gemm(tt(a, True), tt(b, True), d, s, num_splits=S, target=target)
    a64 = a.astype(np.float64)
    close(f64(d).sum(0), a64 @ b.astype(np.float64).T, "float32", scale=np.sqrt(K))
    close(f64(s).sum(0), (a64 ** 2).sum(1), "float32", scale=K)


def test_quant_helpers(target):
    from test_lib_quant import token_ref, ue8m0_ref
    x = (rng(80).standard_normal((11, 200)) * 3).astype(BF16)
    q, sf = dg.per_token_cast_to_fp8(tt(x, True), True, target=target)
    assert q.dtype == torch.float8_e4m3fn and sf.dtype == torch.float32
    scaled, want_sf = token_ref(x, True)
    np.testing.assert_array_equal(f64(sf), want_sf)
    np.testing.assert_array_equal(f64(q), scaled.astype(FP8).astype(np.float64))
    qb, sfb = dg.per_block_cast_to_fp8(tt(x), False, target=target)
    assert qb.dtype == torch.float8_e4m3fn and tuple(sfb.shape) == (1, 2)
    for j in range(2):
        blk = x[:, j * 128:(j + 1) * 128].astype(np.float32)
        s = np.float32(max(np.abs(blk).max(), 1e-4)) / np.float32(448)
        assert f64(sfb)[0, j] == pytest.approx(s, rel=1e-6)
    x4 = rng(81).standard_normal((9, 64)).astype(np.float32) * 4
    packed, sf4 = dg.per_token_cast_to_fp4(tt(x4), False, gran_k=32, target=target)
    assert packed.dtype in (torch.int8, torch.uint8) and tuple(packed.shape) == (9, 32)
    np.testing.assert_allclose(f64(sf4), token_ref(x4, False, gran=32, qmax=6.0)[1], rtol=1e-6)
    s = np.abs(rng(82).standard_normal((5, 8))).astype(np.float32) + 1e-6
    up = dg.ceil_to_ue8m0(tt(s, True), target=target)
    np.testing.assert_array_equal(f64(up), ue8m0_ref(s))
    packed = dg.pack_ue8m0_to_int(up, target=target)
    want = (up.numpy().view(np.int32) >> 23).astype(np.uint8).view(np.int32)
    assert packed.dtype == torch.int32 and np.array_equal(packed.numpy(), want)
    unpacked = dg.unpack_ue8m0_from_int(packed, target=target)
    np.testing.assert_array_equal(f64(unpacked), ue8m0_ref(s))
    t = dg.transform_sf_into_required_layout(packed, 5, 8 * 128, (1, 1, 128), target=target)
    assert isinstance(t, torch.Tensor)
    np.testing.assert_array_equal(f64(t), ue8m0_ref(s))
    pairs = dg.transform_sf_into_required_layout(up, 5, 8 * 128, (1, 1, 128), target=target,
                                                 chip="ascend950")
    e = (np.log2(ue8m0_ref(s).astype(np.float64)) + 127).astype(np.int64)
    assert pairs.dtype == torch.uint16 and np.array_equal(
        pairs.numpy(), (e[:, 0::2] | (e[:, 1::2] << 8)).T.astype(np.uint16))


def test_e8m0_torch_tensors(target):
    """torch.float8_e8m0fnu scales (where torch has it) read as UE8M0 bytes: unpacking the
    int32 packing of e8m0 bytes gives 2^(e - 127)."""
    if _BITS["float8_e8m0fnu"][1] is None:
        pytest.skip("this torch has no float8_e8m0fnu")
    e = rng(83).integers(100, 150, (3, 8)).astype(np.uint8)
    packed = torch.from_numpy(e.copy()).view(torch.float8_e8m0fnu).view(torch.int32)
    got = dg.unpack_ue8m0_from_int(packed, target=target)
    np.testing.assert_array_equal(f64(got), 2.0 ** (e.astype(np.float64) - 127))


@pytest.mark.parametrize("causal", (False, True))
def test_flash_mla(target, causal):
    from test_lib_flash_mla import D, DV, mla_ref
    r = rng(84)
    B, SQ, HQ, MAXB, NB = 2, 2, 16, 3, 7
    seqlens = np.array([150, 1], np.int32)
    kc = r.standard_normal((NB, 64, 1, D)).astype(BF16)
    bt = r.permutation(NB)[:B * MAXB].reshape(B, MAXB).astype(np.int32)
    q = r.standard_normal((B, SQ, HQ, D)).astype(BF16)
    meta, splits = fm.get_mla_metadata(tt(seqlens), SQ * HQ, 1, num_parts=3, target=target)
    assert isinstance(meta, torch.Tensor) and isinstance(splits, torch.Tensor)
    out, lse = fm.flash_mla_with_kvcache(tt(q, True), tt(kc), tt(bt), tt(seqlens), DV, meta,
                                         splits, causal=causal, target=target)
    assert out.dtype == torch.bfloat16 and lse.dtype == torch.float32
    want_out, want_lse = mla_ref(q, kc, bt, seqlens, DV, causal)
    close(f64(out), want_out, "bfloat16", scale=1)
    lse = f64(lse)
    finite = np.isfinite(want_lse)   # causal: a query with no key has lse +inf
    assert np.array_equal(np.isinf(lse), ~finite)
    close(lse[finite], want_lse[finite], "float32", scale=10)


def test_mhc(target):
    r = rng(85)
    TN, n, C = 7, 4, 64
    N = n * (n + 2)
    res = r.standard_normal((TN, n, C)).astype(BF16)
    fn = (r.standard_normal((N, n * C)) * 0.05).astype(np.float32)
    scale = np.array([0.7, 1.3, 0.9], np.float32)
    base = (r.standard_normal(N) * 0.1).astype(np.float32)
    post, comb, li = mhc.mhc_pre(tt(res, True), tt(fn, True), tt(scale), tt(base),
                                 sinkhorn_repeat=20, target=target)
    want_post, want_comb, want_li = mhc_pre_ref(res, fn, scale, base, 20)
    assert post.dtype == torch.float32 and li.dtype == torch.bfloat16
    close(f64(post), want_post, "float32", scale=10)
    close(f64(comb), want_comb, "float32", scale=10)
    close(f64(li), want_li, "bfloat16")
    x = r.standard_normal((TN, C)).astype(BF16)
    out = mhc.mhc_post(tt(x), tt(res), tt(want_post.astype(np.float32)),
                       tt(want_comb.astype(np.float32), True), target=target)
    assert out.dtype == torch.bfloat16
    want = (want_post[:, :, None] * x.astype(np.float64)[:, None, :]
            + np.einsum("tjk,tjc->tkc", want_comb, res.astype(np.float64)))
    close(f64(out), want, "bfloat16")
    xs = r.standard_normal((TN, n, n)).astype(np.float32)
    got = mhc.sinkhorn(tt(xs, True), repeat=5, eps=1e-6, target=target)
    close(f64(got), sinkhorn_ref(xs.astype(np.float64), 5, 1e-6), "float32", scale=1)


@pytest.mark.parametrize("dtype", ("float32", "bfloat16"))
def test_topk(target, dtype):
    from test_lib_topk import topk_ref
    x = rng(86).standard_normal((3, 300)).astype(np.float32)
    x[0, 5:9] = x[0, 100]
    x = x.astype(BF16) if dtype == "bfloat16" else x
    values, indices = topk(tt(x, True), 20, target=target)
    want_v, want_i = topk_ref(x, 20)
    assert values.dtype == getattr(torch, dtype) and indices.dtype == torch.int32
    assert np.array_equal(indices.numpy(), want_i)
    assert np.array_equal(f64(values), want_v.astype(np.float64))


def test_kernels_and_estimate_take_torch_tensors():
    a = torch.zeros((16, 64), dtype=torch.bfloat16, requires_grad=True)
    b = torch.zeros((32, 64), dtype=torch.bfloat16)
    d = torch.zeros((16, 32))
    (kernel,) = dg.bf16_gemm_nt.kernels(a, b, d, target="numpy")
    (k2, arrays), = dg.bf16_gemm_nt.launches(a, b, d, target="numpy")
    assert k2 is kernel and np.shares_memory(arrays[-1], d.numpy())
    assert dg.bf16_gemm_nt.estimate(a, b, d).time_us > 0


def test_a_torch_dtype_without_a_numpy_view_is_rejected():
    if not hasattr(torch, "float8_e4m3fnuz"):
        pytest.skip("this torch has no float8_e4m3fnuz")
    with pytest.raises(TypeError, match="torch dtype torch.float8_e4m3fnuz is not supported"):
        topk(torch.zeros((2, 8)).to(torch.float8_e4m3fnuz), 2)


@pytest.mark.parametrize("kind", ("bf16", "fp8", "fp8_fp4"))
def test_m_grouped_nn_contiguous(target, kind):
    """B [G, K, N] torch tensors; FP8 scales passed as DeepGEMM's alias passes them, `sfb.mT`
    (a non-contiguous torch view of a square [G, 2, 2]: read transposed)."""
    from test_lib_deep_gemm import _contiguous_layout
    r = rng(90)
    G, N, K = 2, 136, 256
    layout = _contiguous_layout([3, 129])
    x, w = r.standard_normal((layout.size, K)), r.standard_normal((G, N, K))
    d = torch.full((layout.size, N), float("nan"))
    if kind == "bf16":
        a, b = x.astype(BF16), w.astype(BF16)
        xa, wb = a.astype(np.float64), b.astype(np.float64)
        dg.m_grouped_bf16_gemm_nn_contiguous(tt(a), tt(b).transpose(1, 2).contiguous(), d,
                                             tt(layout), target=target)
    else:
        qa, sa = quant_per_token(x)
        qbs = [quant_per_block(w[g]) for g in range(G)]
        qb, sb = np.stack([q for q, _ in qbs]), np.stack([s for _, s in qbs])
        xa = dequant_per_token(qa, sa)
        wb = np.stack([dequant_per_block(q, s) for q, s in qbs])
        fn = getattr(dg, f"m_grouped_{kind}_gemm_nn_contiguous")
        fn((tt(qa), tt(sa)), (tt(qb).transpose(1, 2).contiguous(), tt(sb).mT), d, tt(layout),
           target=target)
    rows = layout >= 0
    want = np.stack([xa[i] @ wb[g].T if g >= 0 else np.zeros(N) for i, g in enumerate(layout)])
    close(f64(d)[rows], want[rows], "float32", scale=np.sqrt(K) * 10)
    assert torch.isnan(d[torch.from_numpy(~rows)]).all()


def test_k_grouped_bf16_einsum_and_other_names(target):
    r = rng(91)
    ks, M, N = [128, 0, 256], 24, 40
    a = r.standard_normal((sum(ks), M)).astype(BF16)
    b = r.standard_normal((sum(ks), N)).astype(BF16)
    c = r.standard_normal((3, M, N)).astype(np.float32)
    d = tt(c)
    dg.k_grouped_bf16_gemm_tn_contiguous(tt(a), tt(b), d, ks, c=d, target=target)
    want = c.astype(np.float64).copy()
    start = 0
    for g, k in enumerate(ks):
        want[g] += a[start:start + k].astype(np.float64).T @ b[start:start + k].astype(np.float64)
        start += k
    close(f64(d), want, "float32", scale=20)
    ea = r.standard_normal((3, 2, 40)).astype(BF16)
    eb = r.standard_normal((2, 40, 24)).astype(BF16)
    ed = torch.empty((3, 2, 24), dtype=torch.bfloat16)
    dg.einsum("bhd,hdr->bhr", tt(ea, True), tt(eb), ed, target=target)
    close(f64(ed), np.einsum("bhd,hdr->bhr", ea.astype(np.float64), eb.astype(np.float64)),
          "bfloat16")
    ga, gb = r.standard_normal((5, 64)).astype(BF16), r.standard_normal((64, 24)).astype(BF16)
    for name in ("cublaslt_gemm_nn", "bf16_gemm_nn"):
        gd = torch.empty((5, 24))
        getattr(dg, name)(tt(ga), tt(gb), gd, target=target)
        close(f64(gd), ga.astype(np.float64) @ gb.astype(np.float64), "float32", scale=10)
    ma = r.standard_normal((2, 4, 64)).astype(BF16)
    mb = r.standard_normal((2, 24, 64)).astype(BF16)
    md = torch.full((2, 4, 24), float("nan"))
    dg.bf16_m_grouped_gemm_nt_masked(tt(ma), tt(mb), md, tt(np.array([1, 4], np.int32)), 2,
                                     target=target)
    close(f64(md)[1], ma[1].astype(np.float64) @ mb[1].astype(np.float64).T, "float32", scale=10)
    qa, sa = quant_per_token(r.standard_normal((3, 128)))
    qb, sb = quant_per_block(r.standard_normal((96, 128)))
    hd = torch.zeros((3, 96 + 2 * 16), dtype=torch.bfloat16)
    dg.fp8_gemm_nt_skip_head_mid((tt(qa), tt(sa)), (tt(qb), tt(sb)), hd, (32, 16, 16),
                                 target=target)
    g = dequant_per_token(qa, sa) @ dequant_per_block(qb, sb).T
    want = np.concatenate([np.concatenate([g[:, h * 48:h * 48 + 32], np.zeros((3, 16)),
                                           g[:, h * 48 + 32:(h + 1) * 48]], 1) for h in range(2)], 1)
    close(f64(hd), want, "bfloat16")
    from test_lib_mqa import check_logits, kv_cache_bytes, mqa_inputs, mqa_ref, paged_ref
    q, kv, sf, w, ks_, ke = mqa_inputs(rng(92), 7, 2, 32, 50)
    got = dg.fp8_fp4_mqa_logits((tt(q), None), (tt(kv), tt(sf)), tt(w), tt(ks_), tt(ke),
                                target=target)
    check_logits(f64(got), mqa_ref(q, kv, sf, w, ks_, ke, True), 32, 2)
    lens = np.array([20, 3], np.int32)
    pkv, kv64 = kv_cache_bytes(r.standard_normal((4, 16, 1, 32)))
    pq = (r.standard_normal((2, 1, 2, 32)) * 0.5).astype(FP8)
    pw = r.standard_normal((2, 2)).astype(np.float32)
    bt = np.array([[2, 0], [1, 3]], np.int32)
    meta = dg.get_paged_mqa_logits_metadata(tt(lens), 16, 2, target=target)
    got = dg.fp8_fp4_paged_mqa_logits((tt(pq), None), tt(pkv), tt(pw), tt(lens), tt(bt), meta,
                                      24, target=target)
    check_logits(f64(got), paged_ref(pq, kv64, pw, lens, bt, 24), 32, 2)


def test_k_grouped_nt_fp8_einsum_and_fp4_mqa(target):
    """The last DeepGEMM names: the flat K-major k-grouped GEMM (torch fp8 tensors, the scales'
    .T view, d = c in place), fp8_einsum into a bf16 torch tensor, FP4 q / kv as torch int8 /
    uint8 bytes with int32 packed scales."""
    from test_lib_deep_gemm import k_grouped_case
    from test_lib_deep_gemm_more import _nt_flat, _per_block_heads, _per_token3, fp4_rows
    r = rng(93)
    ks, M, N = [128, 0, 256], 9, 24
    (qa, sa), (qb, sb), c, want = k_grouped_case(r, ks, M, N)
    d = tt(c)
    dg.k_grouped_fp8_gemm_nt_contiguous((tt(_nt_flat(qa, ks)), tt(sa).T),
                                        (tt(_nt_flat(qb, ks)), tt(sb).T), d, ks, None, d,
                                        target=target)
    close(f64(d), want, "float32", scale=20)
    qx, sx, dx = _per_token3(r.standard_normal((6, 2, 130)))
    qy, sy, dy = _per_block_heads(r.standard_normal((2, 24, 130)))
    ed = torch.empty((6, 2, 24), dtype=torch.bfloat16)
    dg.fp8_einsum("bhr,hdr->bhd", (tt(qx, True), tt(sx)), (tt(qy), tt(sy)), ed, target=target)
    close(f64(ed), np.einsum("bhr,hdr->bhd", dx, dy), "bfloat16", scale=40)
    q, q_sf, qd = fp4_rows(r, 2, 64, lead=(5,))
    kv, kv_sf, kd = fp4_rows(r, 40, 64)
    w = r.standard_normal((5, 2)).astype(np.float32)
    ks_, ke_ = np.zeros(5, np.int32), np.full(5, 40, np.int32)
    got = dg.fp8_fp4_mqa_logits((tt(q), tt(q_sf)), (tt(kv.view(np.uint8)), tt(kv_sf)), tt(w),
                                tt(ks_), tt(ke_), target=target)
    assert isinstance(got, torch.Tensor)
    want = np.einsum("sht,sh->st", np.maximum(np.einsum("shd,td->sht", qd, kd), 0), w)
    close(f64(got), want, "float32", scale=float(np.abs(want).max()))
    back = dg.cast_back_from_fp4(tt(kv), tt(kv_sf), 32, True, target=target)
    assert isinstance(back, torch.Tensor)
    np.testing.assert_array_equal(f64(back), kd)
    tq = dg.transpose_packed_fp4(tt(kv[:, :8]), target=target)   # [40, 16] codes -> [16, 20]
    again = dg.transpose_packed_fp4(tq, target=target)
    np.testing.assert_array_equal(f64(again), kv[:, :8])
    x = r.standard_normal((128, 24)).astype(np.float32)
    pq, psf = dg.per_channel_cast_to_fp8(tt(x, True), True, target=target)
    assert pq.dtype == torch.float8_e4m3fn and tuple(psf.shape) == (1, 24)
    close(f64(pq) * f64(psf), x.astype(np.float64), "float8_e4m3fn", scale=float(np.abs(x).max()))


# every public library function and the test above that calls it with torch tensors
COVERED = {
    "deep_gemm.bf16_gemm_nt", "deep_gemm.bf16_gemm_nn", "deep_gemm.bf16_gemm_tn",
    "deep_gemm.bf16_gemm_tt", "deep_gemm.fp8_gemm_nt", "deep_gemm.fp8_gemm_nn",
    "deep_gemm.fp8_gemm_tn", "deep_gemm.fp8_gemm_tt", "deep_gemm.fp8_fp4_gemm_nt",
    "deep_gemm.fp8_fp4_gemm_nn", "deep_gemm.fp8_fp4_gemm_tn", "deep_gemm.fp8_fp4_gemm_tt",
    "deep_gemm.m_grouped_bf16_gemm_nt_contiguous", "deep_gemm.m_grouped_fp8_gemm_nt_contiguous",
    "deep_gemm.m_grouped_fp8_fp4_gemm_nt_contiguous", "deep_gemm.m_grouped_bf16_gemm_nt_masked",
    "deep_gemm.m_grouped_fp8_gemm_nt_masked", "deep_gemm.m_grouped_fp8_fp4_gemm_nt_masked",
    "deep_gemm.k_grouped_fp8_gemm_tn_contiguous", "deep_gemm.bf16_mega_moe",
    "deep_gemm.fp8_mega_moe", "deep_gemm.fp8_mqa_logits", "deep_gemm.fp8_paged_mqa_logits",
    "deep_gemm.get_paged_mqa_logits_metadata", "deep_gemm.tf32_hc_prenorm_gemm",
    "deep_gemm.per_token_cast_to_fp8", "deep_gemm.per_block_cast_to_fp8",
    "deep_gemm.per_token_cast_to_fp4", "deep_gemm.ceil_to_ue8m0", "deep_gemm.pack_ue8m0_to_int",
    "deep_gemm.unpack_ue8m0_from_int", "deep_gemm.transform_sf_into_required_layout",
    "flash_mla.get_mla_metadata", "flash_mla.flash_mla_with_kvcache", "mhc.mhc_pre",
    "mhc.mhc_post", "mhc.sinkhorn", "topk",
    # test_m_grouped_nn_contiguous, test_k_grouped_bf16_einsum_and_other_names
    "deep_gemm.m_grouped_bf16_gemm_nn_contiguous", "deep_gemm.m_grouped_fp8_gemm_nn_contiguous",
    "deep_gemm.m_grouped_fp8_fp4_gemm_nn_contiguous", "deep_gemm.k_grouped_bf16_gemm_tn_contiguous",
    "deep_gemm.einsum", "deep_gemm.fp8_fp4_mqa_logits", "deep_gemm.fp8_fp4_paged_mqa_logits",
    "deep_gemm.cublaslt_gemm_nt", "deep_gemm.cublaslt_gemm_nn", "deep_gemm.cublaslt_gemm_tn",
    "deep_gemm.cublaslt_gemm_tt", "deep_gemm.bf16_m_grouped_gemm_nt_masked",
    "deep_gemm.fp8_m_grouped_gemm_nt_masked", "deep_gemm.fp8_gemm_nt_skip_head_mid",
    # test_k_grouped_nt_fp8_einsum_and_fp4_mqa
    "deep_gemm.k_grouped_fp8_gemm_nt_contiguous", "deep_gemm.fp8_einsum",
    "deep_gemm.per_channel_cast_to_fp8", "deep_gemm.cast_back_from_fp4",
    "deep_gemm.transpose_packed_fp4",
}


def test_every_public_function_is_covered():
    found = {"topk"} if isinstance(K.topk, LibraryFunction) else set()
    for mod in ("deep_gemm", "flash_mla", "mhc"):
        m = getattr(K, mod)
        found |= {f"{mod}.{n}" for n in dir(m)
                  if not n.startswith("_") and isinstance(getattr(m, n), LibraryFunction)}
    assert found == COVERED
