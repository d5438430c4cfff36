"""Every kernel-backed library function, at a small awkward shape with real data, replayed launch
by launch on the pipe-level simulator: each launch simulates without a race, deadlock or fault
and leaves exactly the arrays the numpy target's run of the same launch leaves (the numpy
target's numbers are checked against float64 references in the per-family tests)."""
import numpy as np
import pytest
from refs import BF16, FP8, quant_per_block, quant_per_token, rng

from tilelang_mini.kernels import deep_gemm as dg
from tilelang_mini.kernels import flash_mla, mhc, topk


def _layout(sizes, align=128):
    out = []
    for g, m in enumerate(sizes):
        out += [g] * m + [-1] * (-(-m // align) * align - m)
    return np.array(out, np.int32)


def cases():
    r = rng(70)
    a, b = r.standard_normal((33, 200)).astype(BF16), r.standard_normal((200, 40)).astype(BF16)
    yield "bf16_gemm_tt", dg.bf16_gemm_tt, (a.T.copy(), b.T.copy(), np.zeros((33, 40), BF16)), {}
    qa, sa = quant_per_token(r.standard_normal((20, 300)))
    qb, sb = quant_per_block(r.standard_normal((24, 300)))
    yield "fp8_gemm_nt", dg.fp8_gemm_nt, ((qa, sa), (qb, sb), np.zeros((20, 24), np.float32)), {}
    qa2, sa2 = quant_per_token(r.standard_normal((130, 300)))
    yield ("fp8_gemm_nt (950, 256-row tile)", dg.fp8_gemm_nt,
           ((qa2, sa2), (qb, sb), np.zeros((130, 24), np.float32)), {"chip": "ascend950"})
    hb = quant_per_block(r.standard_normal((48, 300)))
    yield ("fp8_gemm_nt_skip_head_mid", dg.fp8_gemm_nt_skip_head_mid,
           ((qa, sa), hb, np.full((20, 64), 3, BF16), (16, 8, 8)), {})
    lay = _layout([5, 0, 3])
    yield ("m_grouped_bf16_gemm_nt_contiguous", dg.m_grouped_bf16_gemm_nt_contiguous,
           (r.standard_normal((lay.size, 64)).astype(BF16),
            r.standard_normal((3, 24, 64)).astype(BF16), np.full((lay.size, 24), 7, BF16), lay), {})
    qm = [quant_per_token(r.standard_normal((9, 130))) for _ in range(2)]
    qw = [quant_per_block(r.standard_normal((16, 130))) for _ in range(2)]
    yield ("m_grouped_fp8_gemm_nt_masked", dg.m_grouped_fp8_gemm_nt_masked,
           ((np.stack([q for q, _ in qm]), np.stack([s for _, s in qm])),
            (np.stack([q for q, _ in qw]), np.stack([s for _, s in qw])),
            np.full((2, 9, 16), 3, np.float32), np.array([0, 5], np.int32), 4), {})
    ks = [128, 0]
    ka = (r.standard_normal((128, 16)).astype(FP8), np.ones((1, 16), np.float32))
    kb = (r.standard_normal((128, 24)).astype(FP8), np.ones((1, 24), np.float32))
    yield ("k_grouped_fp8_gemm_tn_contiguous", dg.k_grouped_fp8_gemm_tn_contiguous,
           (ka, kb, np.zeros((2, 16, 24), np.float32), ks), {})
    kc = r.standard_normal((2, 16, 24)).astype(np.float32)
    yield ("k_grouped_bf16_gemm_tn_contiguous (separate C: a copy launch)",
           dg.k_grouped_bf16_gemm_tn_contiguous,
           (r.standard_normal((128, 16)).astype(BF16), r.standard_normal((128, 24)).astype(BF16),
            np.zeros((2, 16, 24), np.float32), ks), {"c": kc})
    kn = [128, 0, 256]  # the nt form: flat K-major groups, one launch per non-empty group
    for chip in ("ascend910b", "ascend950"):
        yield (f"k_grouped_fp8_gemm_nt_contiguous ({chip})", dg.k_grouped_fp8_gemm_nt_contiguous,
               ((r.standard_normal(384 * 9).astype(FP8), np.ones((9, 3), np.float32)),
                (r.standard_normal(384 * 24).astype(FP8), np.ones((24, 3), np.float32)),
                np.zeros((3, 9, 24), np.float32), kn), {"chip": chip})
    ex, esx = quant_per_token(r.standard_normal((10, 130)))
    ey, esy = quant_per_block(r.standard_normal((24, 130)))
    yield ("fp8_einsum bhr,hdr->bhd", dg.fp8_einsum,
           ("bhr,hdr->bhd", (ex.reshape(5, 2, 130), esx.reshape(5, 2, 2)),
            (np.stack([ey[:12], ey[12:]]), np.stack([esy, esy])), np.zeros((5, 2, 12), BF16)), {})
    yield ("fp8_einsum bhd,bhr->hdr (separate C)", dg.fp8_einsum,
           ("bhd,bhr->hdr", (r.standard_normal((130, 2, 9)).astype(FP8),
                             np.ones((2, 2, 9), np.float32)),
            (r.standard_normal((130, 2, 16)).astype(FP8), np.ones((2, 2, 16), np.float32)),
            np.zeros((2, 9, 16), np.float32)),
           {"c": r.standard_normal((2, 9, 16)).astype(np.float32), "chip": "ascend950"})
    lay_nn = _layout([3, 0, 1])
    qx = quant_per_token(r.standard_normal((lay_nn.size, 256)))
    qg = [quant_per_block(r.standard_normal((136, 256))) for _ in range(3)]
    yield ("m_grouped_fp8_gemm_nn_contiguous (sfb.mT)", dg.m_grouped_fp8_gemm_nn_contiguous,
           (qx, (np.ascontiguousarray(np.stack([q for q, _ in qg]).transpose(0, 2, 1)),
                 np.stack([s for _, s in qg]).transpose(0, 2, 1)),
            np.full((lay_nn.size, 136), 5, BF16), lay_nn), {})
    yield ("einsum bhd,hdr->bhr", dg.einsum,
           ("bhd,hdr->bhr", r.standard_normal((3, 2, 40)).astype(BF16),
            r.standard_normal((2, 40, 24)).astype(BF16), np.zeros((3, 2, 24), BF16)), {})
    S, H, D, SK = 9, 2, 64, 70
    yield ("fp8_mqa_logits", dg.fp8_mqa_logits,
           ((r.standard_normal((S, H, D)) * .5).astype(FP8),
            ((r.standard_normal((SK, D)) * .5).astype(FP8), np.ones(SK, np.float32)),
            r.standard_normal((S, H)).astype(np.float32), np.zeros(S, np.int32),
            np.arange(S, dtype=np.int32) * 7), {"logits": np.zeros((S, SK), np.float32)})
    cache = np.zeros((3, 64, 1, D + 4), np.uint8)
    cache[:, :, 0, :D] = (r.standard_normal((3, 64, D)) * .5).astype(FP8).view(np.uint8)
    cache.reshape(3, -1)[:, 64 * D:] = np.ones((3, 64), np.float32).view(np.uint8)
    cl = np.array([70, 5], np.int32)
    yield ("fp8_paged_mqa_logits", dg.fp8_paged_mqa_logits,
           ((r.standard_normal((2, 1, H, D)) * .5).astype(FP8), cache,
            r.standard_normal((2, H)).astype(np.float32), cl,
            np.array([[2, 0], [1, 1]], np.int32), dg.get_paged_mqa_logits_metadata(cl, 64, 2),
            80), {"logits": np.zeros((2, 80), np.float32)})
    from test_lib_deep_gemm_more import fp4_rows
    fq, fqs, _ = fp4_rows(r, H, D, lead=(S,))
    fk, fks, _ = fp4_rows(r, SK, D)
    yield ("fp8_fp4_mqa_logits (FP4 q, kv)", dg.fp8_fp4_mqa_logits,
           ((fq, fqs), (fk, fks), r.standard_normal((S, H)).astype(np.float32),
            np.zeros(S, np.int32), np.arange(S, dtype=np.int32) * 7),
           {"logits": np.zeros((S, SK), np.float32), "chip": "ascend950"})
    pc, pcs, _ = fp4_rows(r, 16, D, lead=(3,))
    fcache = np.empty((3, 16 * (D // 2 + 4)), np.uint8)
    fcache[:, :16 * D // 2] = pc.reshape(3, -1).view(np.uint8)
    fcache[:, 16 * D // 2:] = pcs.view(np.uint8)
    pq, pqs, _ = fp4_rows(r, H, D, lead=(2, 1))
    fcl = np.array([20, 5], np.int32)
    yield ("fp8_fp4_paged_mqa_logits (FP4 q, cache)", dg.fp8_fp4_paged_mqa_logits,
           ((pq, pqs), fcache.reshape(3, 16, 1, D // 2 + 4),
            r.standard_normal((2, H)).astype(np.float32), fcl,
            np.array([[2, 0], [1, 1]], np.int32), dg.get_paged_mqa_logits_metadata(fcl, 16, 2),
            32), {"logits": np.zeros((2, 32), np.float32)})
    yield ("get_paged_mqa_logits_metadata", dg.get_paged_mqa_logits_metadata,
           (np.array([70, 0, 130], np.int32), 64, 3), {})
    x = r.standard_normal((19, 300)).astype(np.float32)
    yield "per_token_cast_to_fp8", dg.per_token_cast_to_fp8, (x, True), {}
    yield "per_block_cast_to_fp8", dg.per_block_cast_to_fp8, (x, False), {}
    yield "per_token_cast_to_fp4", dg.per_token_cast_to_fp4, (x[:, :256], True), {"gran_k": 32}
    yield ("per_channel_cast_to_fp8", dg.per_channel_cast_to_fp8,
           (r.standard_normal((128, 200)).astype(np.float32), True), {})
    fpk, fsf, _ = fp4_rows(r, 19, 64)
    yield "cast_back_from_fp4", dg.cast_back_from_fp4, (fpk, fsf, 32, True), {}
    yield "transpose_packed_fp4", dg.transpose_packed_fp4, (fpk[:18],), {}
    sf = 2.0 ** r.integers(-3, 3, (19, 5)).astype(np.float32)
    yield "ceil_to_ue8m0", dg.ceil_to_ue8m0, (sf * 1.3,), {}
    yield "pack_ue8m0_to_int", dg.pack_ue8m0_to_int, (sf[:, :4],), {}
    yield ("transform_sf_into_required_layout", dg.transform_sf_into_required_layout,
           (sf, 19, 600, (1, 1, 128)), {"chip": "ascend950"})
    n, C, T_ = 4, 64, 5
    yield ("tf32_hc_prenorm_gemm", dg.tf32_hc_prenorm_gemm,
           (r.standard_normal((T_, n * C)).astype(BF16),
            r.standard_normal((24, n * C)).astype(np.float32), np.zeros((2, T_, 24), np.float32),
            np.zeros((2, T_), np.float32)), {"num_splits": 2})
    res = r.standard_normal((T_, n, C)).astype(BF16)
    yield ("mhc_pre", mhc.mhc_pre, (res, (r.standard_normal((24, n * C)) * .05).astype(np.float32),
                                    np.ones(3, np.float32), np.zeros(24, np.float32)), {})
    post = r.uniform(0, 2, (T_, n)).astype(np.float32)
    comb = r.uniform(0, 1, (T_, n, n)).astype(np.float32)
    yield ("mhc_post", mhc.mhc_post,
           (r.standard_normal((T_, C)).astype(BF16), res, post, comb), {})
    yield "topk", topk, (r.standard_normal((3, 700)).astype(np.float32), 300), {}
    idx = np.array([[0, 2], [1, -1], [2, 0]], np.int32)
    yield ("bf16_mega_moe", dg.bf16_mega_moe,
           (r.standard_normal((3, 128)).astype(BF16), idx, np.full((3, 2), .5, np.float32),
            (r.standard_normal((3, 256, 128)) / 8).astype(BF16),
            (r.standard_normal((3, 128, 128)) / 8).astype(BF16), np.zeros((3, 128), BF16)), {})
    seq = np.array([70, 1], np.int32)
    meta, splits = flash_mla.get_mla_metadata(seq, 8, 1, num_parts=3)
    yield ("get_mla_metadata", flash_mla.get_mla_metadata,
           (np.array([200, 0, 1, 70], np.int32), 8, 1), {"num_parts": 3})
    yield ("flash_mla_with_kvcache", flash_mla.flash_mla_with_kvcache,
           (r.standard_normal((2, 1, 8, 576)).astype(BF16),
            r.standard_normal((4, 64, 1, 576)).astype(BF16), np.array([[3, 0], [1, 2]], np.int32),
            seq, 512, meta, splits), {})


CASES = list(cases())


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_simulate_replays_every_launch(case):
    _, f, args, kwargs = case
    chip = kwargs.pop("chip", "ascend910b")
    launches = f.launches(*args, target="numpy", chip=chip, **kwargs)
    assert launches
    for kernel, arrays in launches:
        sim = [a.copy() for a in arrays]
        _, report = kernel.simulate(*sim)
        assert report.cycles > 0
        kernel(*arrays)  # the numpy target, in place: the state the next launch reads
        for got, want in zip(sim, arrays):
            if got.dtype.kind not in "iub":  # float (ml_dtypes too): compare values, NaN = NaN
                got, want = got.astype(np.float64), want.astype(np.float64)
            assert np.array_equal(got, want, equal_nan=got.dtype.kind == "f"), kernel.ir.name
