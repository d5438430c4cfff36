"""DeepGEMM names added last: k_grouped_fp8_gemm_nt_contiguous (groups' K-major A/B one after the
other in flat buffers), fp8_einsum (three expressions, FP8 with fp32 scales) and FP4 q in the
MQA logits; float64 references from DeepGEMM's public test descriptions, both targets, both
chips, awkward shapes (odd M, empty groups, K not a multiple of the tile)."""
import numpy as np
import pytest
from refs import BF16, FP8, close, quant_per_block, quant_per_token, rng

from tilelang_mini.kernels import deep_gemm as dg
from test_lib_deep_gemm import k_grouped_case

CHIPS = ("ascend910b", "ascend950")


def _nt_flat(q, ks):
    """DeepGEMM's K-major flat buffer: each group's [MN, k_g] (the transposed K rows)."""
    out, start = [], 0
    for k in ks:
        out.append(q[start:start + k].T.reshape(-1))
        start += k
    return np.concatenate(out) if out else q.reshape(-1)[:0]


@pytest.mark.parametrize("chip", CHIPS)
@pytest.mark.parametrize("c_mode", ("inplace", None, "separate"))
def test_k_grouped_fp8_gemm_nt_contiguous(target, chip, c_mode):
    r = rng(11)
    ks = [256, 0, 128, 384]  # an empty group, groups of different K
    G, M, N = len(ks), 37, 136  # odd M, N past one 128-column tile
    (qa, sa), (qb, sb), c, want = k_grouped_case(r, ks, M, N)
    a = (_nt_flat(qa, ks), sa.T)  # as DeepGEMM's test: flat K-major groups, the scales' .T view
    b = (_nt_flat(qb, ks), sb.T)
    if c_mode == "inplace":
        d = c.copy()
        dg.k_grouped_fp8_gemm_nt_contiguous(a, b, d, ks, np.array(ks, np.int32), d,
                                            target=target, chip=chip)
    elif c_mode == "separate":
        d = np.full((G, M, N), 9, np.float32)
        dg.k_grouped_fp8_gemm_nt_contiguous(a, b, d, ks, c=c, target=target, chip=chip)
    else:
        d = np.full((G, M, N), 9, np.float32)
        dg.k_grouped_fp8_gemm_nt_contiguous(a, b, d, ks, target=target, chip=chip)
        want = want - c
    close(d, want, "float32", scale=20)


def test_k_grouped_fp8_gemm_nt_contiguous_256_rows(target):
    """M past one 128-row tile on the 950: the per-group launches take 256-row tiles."""
    r = rng(19)
    ks = [128, 256]
    (qa, sa), (qb, sb), c, want = k_grouped_case(r, ks, 200, 72)
    d = c.copy()
    dg.k_grouped_fp8_gemm_nt_contiguous((_nt_flat(qa, ks), sa.T), (_nt_flat(qb, ks), sb.T), d,
                                        ks, c=d, target=target, chip="ascend950")
    close(d, want, "float32", scale=20)


def test_k_grouped_fp8_gemm_nt_contiguous_errors():
    r = rng(12)
    ks = [128, 128]
    (qa, sa), (qb, sb), c, _ = k_grouped_case(r, ks, 8, 16)
    d = c.copy()
    with pytest.raises(ValueError, match="ks_cpu"):
        dg.k_grouped_fp8_gemm_nt_contiguous((qa, sa.T), (qb, sb.T), d, None, c=d)
    with pytest.raises(ValueError, match="multiple of 128"):
        dg.k_grouped_fp8_gemm_nt_contiguous((qa, sa.T), (qb, sb.T), d, [200, 56], c=d)
    with pytest.raises(ValueError, match="sum_k \\* M"):
        dg.k_grouped_fp8_gemm_nt_contiguous((qa[:128], sa.T), (qb, sb.T), d, ks, c=d)


def _per_channel(x):
    """(1, 1, 128) along the leading axis: e4m3 values and scales [ceil(rows/128), cols]."""
    rows, cols = x.shape
    rb = -(-rows // 128)
    xp = np.zeros((rb * 128, cols))
    xp[:rows] = x
    v = xp.reshape(rb, 128, cols)
    sf = np.maximum(np.abs(v).max(1), 1e-4) / 448.0
    q = (v / sf[:, None, :]).reshape(rb * 128, cols)[:rows].astype(FP8)
    deq = q.astype(np.float64) * np.repeat(sf, 128, 0)[:rows]
    return q, sf.astype(np.float32), deq


def _per_token3(x):
    """Per-token (1, 128) scales of a [B, H, K] operand: values, sf [B, H, ceil(K/128)], and the
    float64 dequantised values."""
    Bn, H, K = x.shape
    q, sf = quant_per_token(x.reshape(Bn * H, K))
    deq = q.astype(np.float64) * np.repeat(sf.astype(np.float64), 128, 1)[:, :K]
    return q.reshape(Bn, H, K), sf.reshape(Bn, H, -1), deq.reshape(Bn, H, K)


def _per_block_heads(y):
    """(128, 128) block scales of each head's [rows, cols] matrix: values, sf [H, rb, cb],
    float64 dequantised."""
    qs, sfs, deqs = [], [], []
    for yh in y:
        q, sf = quant_per_block(yh)
        s = np.repeat(np.repeat(sf.astype(np.float64), 128, 0), 128, 1)[:yh.shape[0], :yh.shape[1]]
        qs.append(q), sfs.append(sf), deqs.append(q.astype(np.float64) * s)
    return np.stack(qs), np.stack(sfs), np.stack(deqs)


@pytest.mark.parametrize("chip", CHIPS)
@pytest.mark.parametrize("expr", ("bhr,hdr->bhd", "bhd,hdr->bhr"))
@pytest.mark.parametrize("out", (BF16, np.float32))
def test_fp8_einsum_per_head(target, chip, expr, out):
    r = rng(13)
    Bn, H, K, N = 70, 3, 200, 136  # batch not a multiple of the tile, K with a tail, N > 128
    x = r.standard_normal((Bn, H, K))
    qx, sx, dx = _per_token3(x)
    if expr == "bhr,hdr->bhd":
        qy, sy, dy = _per_block_heads(r.standard_normal((H, N, K)))
    else:
        qy, sy, dy = _per_block_heads(r.standard_normal((H, K, N)))
    want = np.einsum(expr, dx, dy)
    d = np.full((Bn, H, N), 5, out)
    if out is np.float32:  # c = d accumulates
        c0 = r.standard_normal((Bn, H, N)).astype(np.float32)
        d[...] = c0
        dg.fp8_einsum(expr, (qx, sx), (qy, sy), d, d, target=target, chip=chip)
        want = want + c0
    else:
        dg.fp8_einsum(expr, (qx, sx), (qy, sy), d, target=target, chip=chip)
    close(d, want, "bfloat16" if out is BF16 else "float32", scale=np.sqrt(K) * 4)


@pytest.mark.parametrize("chip", CHIPS)
@pytest.mark.parametrize("c_mode", ("inplace", "separate", None))
def test_fp8_einsum_bhd_bhr_hdr(target, chip, c_mode):
    r = rng(14)
    Bn, H, D, R = 200, 2, 37, 136  # the batch (K) not a multiple of 128, odd D
    qx, sx, dx = _per_channel(r.standard_normal((Bn, H * D)))
    qy, sy, dy = _per_channel(r.standard_normal((Bn, H * R)))
    want = np.einsum("bhd,bhr->hdr", dx.reshape(Bn, H, D), dy.reshape(Bn, H, R))
    a = (qx.reshape(Bn, H, D), sx.reshape(-1, H, D))
    b = (qy.reshape(Bn, H, R), sy.reshape(-1, H, R))
    c0 = (r.standard_normal((H, D, R)) * 10).astype(np.float32)
    d = np.full((H, D, R), 9, np.float32)
    if c_mode == "inplace":
        d[...] = c0
        dg.fp8_einsum("bhd,bhr->hdr", a, b, d, d, recipe=(1, 1, 128), target=target, chip=chip)
    elif c_mode == "separate":
        dg.fp8_einsum("bhd,bhr->hdr", a, b, d, c0, recipe=(1, 1, 128), target=target, chip=chip)
    else:
        dg.fp8_einsum("bhd,bhr->hdr", a, b, d, target=target, chip=chip)
        c0 = 0
    close(d, want + c0, "float32", scale=np.sqrt(Bn) * 10)


def test_fp8_einsum_errors():
    r = rng(15)
    qx, sx, _ = _per_token3(r.standard_normal((4, 2, 128)))
    qy, sy, _ = _per_block_heads(r.standard_normal((2, 64, 128)))
    with pytest.raises(ValueError, match="not supported"):
        dg.fp8_einsum("bmk,bnk->mn", (qx, sx), (qy, sy), np.zeros((4, 64), np.float32))
    with pytest.raises(ValueError, match="sfb"):
        dg.fp8_einsum("bhr,hdr->bhd", (qx, sx), (qy, np.concatenate([sy, sy], 2)),
                      np.zeros((4, 2, 64), BF16))
    with pytest.raises(ValueError, match="float32"):
        d = np.zeros((4, 2, 64), BF16)
        dg.fp8_einsum("bhr,hdr->bhd", (qx, sx), (qy, sy), d, d)


E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6])


def fp4_rows(r, rows, D, lead=()):
    """Random packed e2m1 rows ([*lead, rows, D/2] int8, even index in the low nibble), their
    UE8M0 exponents per 32 values packed four to an int32 ([*lead, rows]; unused bytes 127), and
    the float64 values code * 2^(e - 127)."""
    shape = (*lead, rows)
    codes = r.integers(0, 16, (*shape, D))
    exps = r.integers(122, 133, (*shape, D // 32))
    packed = (codes[..., 0::2] | (codes[..., 1::2] << 4)).astype(np.uint8).view(np.int8)
    e4 = np.full((*shape, 4), 127, np.int64)
    e4[..., :D // 32] = exps
    sf = (e4[..., 0] | (e4[..., 1] << 8) | (e4[..., 2] << 16) | (e4[..., 3] << 24))
    sf = sf.astype(np.uint32).view(np.int32)
    vals = E2M1[codes] * np.repeat(2.0 ** (exps - 127), 32, axis=-1)
    return packed, sf, vals


@pytest.mark.parametrize("chip", CHIPS)
@pytest.mark.parametrize("D", (64, 96, 128))   # 96: not a whole number of MX scale pairs
def test_fp8_fp4_mqa_logits_fp4_q(target, chip, D):
    r = rng(16)
    S, H, SK = 70, 3, 200  # rows and keys not multiples of the tiles
    q, q_sf, qd = fp4_rows(r, H, D, lead=(S,))
    kv, kv_sf, kd = fp4_rows(r, SK, D)
    w = r.standard_normal((S, H)).astype(np.float32)
    ks = r.integers(0, SK // 4, S).astype(np.int32)
    ke = np.minimum(ks + r.integers(0, SK, S), SK).astype(np.int32)
    ke[5] = ks[5]  # an empty window
    score = np.maximum(np.einsum("shd,td->sht", qd, kd), 0)
    want = np.einsum("sht,sh->st", score, w.astype(np.float64))
    t = np.arange(SK)
    inside = (t[None, :] >= ks[:, None]) & (t[None, :] < ke[:, None])
    for clean in (True, False):
        logits = np.full((S, SK), 3, np.float32)
        dg.fp8_fp4_mqa_logits((q, q_sf), (kv, kv_sf), w, ks, ke, clean_logits=clean,
                              logits=logits, target=target, chip=chip)
        ref = np.where(inside, want, -np.inf) if clean else want
        finite = np.isfinite(ref)
        assert np.array_equal(np.isneginf(logits), ~finite)
        close(logits[finite], ref[finite], "float32", scale=float(np.abs(want).max()))
    names = [k.ir.name for k in dg.fp8_fp4_mqa_logits.kernels((q, q_sf), (kv, kv_sf), w, ks, ke,
                                                              target=target, chip=chip)]
    mx = chip == "ascend950" and D % 64 == 0   # the 950's MX MMAD takes the codes as they are
    assert ("fp4_mqa_logits_mx" in names) == mx and ("fp4_decode" in names) != mx, names


@pytest.mark.parametrize("chip", CHIPS)
def test_fp8_fp4_paged_mqa_logits_fp4(target, chip):
    from test_lib_mqa import paged_ref
    r = rng(17)
    B, NN, H, D, BKV, MAXB, NB, L = 3, 2, 3, 64, 16, 4, 13, 60
    lens = np.array([37, 2, 64], np.int32)  # a tail page, fewer keys than a page, a full table
    codes, sf, kvd = fp4_rows(r, BKV, D, lead=(NB,))
    cache = np.empty((NB, BKV * (D // 2 + 4)), np.uint8)  # DeepGEMM's FP4 cache layout
    cache[:, :BKV * D // 2] = codes.reshape(NB, -1).view(np.uint8)
    cache[:, BKV * D // 2:] = sf.reshape(NB, BKV).view(np.uint8)
    q, q_sf, qd = fp4_rows(r, H, D, lead=(B, NN))
    w = r.standard_normal((B * NN, H)).astype(np.float32)
    bt = r.permutation(NB)[:B * MAXB].reshape(B, MAXB).astype(np.int32)
    meta = dg.get_paged_mqa_logits_metadata(lens, BKV, 4)
    got = dg.fp8_fp4_paged_mqa_logits((q, q_sf), cache.reshape(NB, BKV, 1, D // 2 + 4), w, lens,
                                      bt, meta, L, target=target, chip=chip)
    want = paged_ref(qd, kvd[:, :, None, :], w, lens, bt, L)
    finite = np.isfinite(want)
    assert np.array_equal(np.isneginf(got), ~finite)
    close(got[finite], want[finite], "float32", scale=float(np.abs(want[finite]).max()))


@pytest.mark.parametrize("layout", ("nt", "nn", "tn", "tt"))
@pytest.mark.parametrize("per_block", (True, False))
def test_fp8_gemm_256_row_tiles_on_950(target, layout, per_block):
    """M past one 128-row tile on the 950 with fp32 scales: 256-row tiles (scaled_block_m), one
    full and one partial (M 300), per-block and per-channel sfb, C separate."""
    from refs import dequant_per_token
    from test_lib_deep_gemm import _store
    r = rng(18)
    M, N, K = 300, 136, 390
    qa, sa = quant_per_token(r.standard_normal((M, K)))
    if per_block:
        qb, sb = quant_per_block(r.standard_normal((N, K)))
        s = np.repeat(np.repeat(sb.astype(np.float64), 128, 0), 128, 1)[:N, :K]
        db = qb.astype(np.float64) * s
    else:
        qb, sb = quant_per_token(r.standard_normal((N, K)))
        db = dequant_per_token(qb, sb)
    c = r.standard_normal((M, N)).astype(np.float32)
    d = np.full((M, N), 7, np.float32)
    getattr(dg, f"fp8_gemm_{layout}")((_store(qa, layout, "a"), sa), (_store(qb, layout, "b"), sb),
                                      d, c=c, target=target, chip="ascend950")
    close(d, dequant_per_token(qa, sa) @ db.T + c, "float32", scale=np.sqrt(K) * 4)


def test_fp32_scale_fp8_gemm_estimate_on_950():
    """DeepGEMM-Ascend's benchmark shape with fp32 (1, 128, 128) scales on the 950 preset: within
    10% of the published 1117.6 us (FixPipe-bound, docs/kernels.md says why), slower than the
    packed-UE8M0 form the cube scales itself, and the 256-row tile beats the 128-row one."""
    from ml_dtypes import bfloat16
    M, N, K = 4096, 7168, 16384
    kb = K // 128
    args = ((np.empty((M, K), FP8), np.empty((M, kb), np.float32)),
            (np.empty((N, K), FP8), np.empty((N // 128, kb), np.float32)),
            np.empty((M, N), bfloat16))
    est = dg.fp8_gemm_nt.estimate(*args, chip="ascend950")
    assert abs(est.time_us - 1117.6) / 1117.6 < 0.10, est
    mx = ((args[0][0], np.empty((kb // 2, M), np.uint16)),
          (args[1][0], np.empty((kb // 2, N), np.uint16)), args[2])
    assert dg.fp8_gemm_nt.estimate(*mx, chip="ascend950").time_us < est.time_us
    from tilelang_mini.kernels.deep_gemm._tiles import gemm_kernel
    from tilelang_mini.runtime.kernel import compile_call
    narrow = compile_call(gemm_kernel, (M, N, K, False, False, "float8_e4m3fn", "bfloat16", None,
                                        "block", True, 128, 128), target="numpy",
                          chip="ascend950")
    assert narrow.estimate().time_us > est.time_us


@pytest.mark.parametrize("ue8m0", (False, True))
def test_per_channel_cast_to_fp8(target, ue8m0):
    r = rng(20)
    x = (r.standard_normal((256, 200)) * r.uniform(0.01, 10, 200)).astype(np.float32)
    q, sf = dg.per_channel_cast_to_fp8(x, ue8m0, target=target)
    v = x.astype(np.float64).reshape(2, 128, 200)
    want_sf = np.maximum(np.abs(v).max(1), 1e-4) / 448.0
    if ue8m0:
        want_sf = 2.0 ** np.ceil(np.log2(want_sf))
    assert sf.shape == (2, 200) and q.shape == x.shape
    np.testing.assert_allclose(sf, want_sf, rtol=1e-6)
    deq = q.astype(np.float64).reshape(2, 128, 200) * sf.astype(np.float64)[:, None, :]
    assert np.all(np.abs(deq - v) <= np.abs(v) / 16 + sf[:, None, :] * 2 ** -9)  # e4m3 rounding
    with pytest.raises(ValueError, match="multiple of gran_k"):
        dg.per_channel_cast_to_fp8(x[:100], ue8m0)


@pytest.mark.parametrize("packed", (False, True))
def test_cast_back_from_fp4(target, packed):
    r = rng(21)
    M, N, g = 5, 100, 32   # N not a multiple of the group: a partial last group
    codes = r.integers(0, 16, (M, N))
    pk = (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8).view(np.int8)
    exps = r.integers(120, 135, (M, 4))
    vals = E2M1[codes]
    want = vals * np.repeat(2.0 ** (exps - 127), g, 1)[:, :N]
    if packed:
        sf = (exps[:, 0] | exps[:, 1] << 8 | exps[:, 2] << 16 | exps[:, 3] << 24)
        sf = sf.astype(np.uint32).view(np.int32).reshape(M, 1)
    else:
        sf = (2.0 ** (exps - 127)).astype(np.float32)
    got = dg.cast_back_from_fp4(pk, sf, g, packed, target=target)
    assert got.shape == (M, N)
    np.testing.assert_array_equal(got, want)  # exact: e2m1 times a power of two


def test_transpose_packed_fp4(target):
    r = rng(22)
    M, N = 70, 46
    codes = r.integers(0, 16, (M, N))
    pk = (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8).view(np.int8)
    t = codes.T
    want = (t[:, 0::2] | (t[:, 1::2] << 4)).astype(np.uint8).view(np.int8)
    got = dg.transpose_packed_fp4(pk, target=target)
    np.testing.assert_array_equal(got, want)
    with pytest.raises(ValueError, match="M even"):
        dg.transpose_packed_fp4(pk[:69])


@pytest.mark.parametrize("layout", ("nn", "tn"))
def test_fp8_gemm_transposed_channel_sfb_falls_back_to_128_rows(target, layout):
    """A transposed per-row sfb (DeepGEMM's sfb.T for an MN-major B) keeps a 256-row tile's
    vector work on each AIV, which overflows the 950's UB: the call takes 128-row tiles."""
    from refs import dequant_per_token
    from test_lib_deep_gemm import _store
    r = rng(23)
    M, N, K = 300, 136, 260
    qa, sa = quant_per_token(r.standard_normal((M, K)))
    qb, sb = quant_per_token(r.standard_normal((N, K)))
    sa_in = sa.T if layout == "tn" else sa
    d = np.full((M, N), 3, np.float32)
    c = r.standard_normal((M, N)).astype(np.float32)
    d[...] = c
    getattr(dg, f"fp8_gemm_{layout}")((_store(qa, layout, "a"), sa_in),
                                      (_store(qb, layout, "b"), sb.T), d, c=d, target=target,
                                      chip="ascend950")
    close(d, dequant_per_token(qa, sa) @ dequant_per_token(qb, sb).T + c, "float32",
          scale=np.sqrt(K) * 4)
