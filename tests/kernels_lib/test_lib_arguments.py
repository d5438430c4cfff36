"""Illegal arguments of the library functions are refused with a ValueError that says what is
wrong (found by the fuzzer's `library` family: before, arrays of the wrong rank failed with
Python's "not enough values to unpack", a wrong topk_weights shape with an IndexError, gran_k=0
with a ZeroDivisionError, sinkhorn repeat=0 with a CompileError about a loop extent inside the
library, a float64 d with a TypeError, and out-of-range index data ran: a block-table entry past
k_cache, a sequence longer than its block table, head_dim_v past the head dim, a group id past
b, masked_m past maxM). The legal neighbours of each check still compute the right numbers."""
import numpy as np
import pytest
from refs import BF16, close, rng

from tilelang_mini.kernels import deep_gemm as dg
from tilelang_mini.kernels import flash_mla as fm
from tilelang_mini.kernels import mhc, topk

F32 = np.float32


def _bf(*shape, seed=0):
    return rng(seed).standard_normal(shape).astype(BF16)


RANK_CASES = {
    "gemm a 1-D": (lambda t: dg.bf16_gemm_nt(_bf(8), _bf(4, 8), np.zeros((1, 4), F32), target=t),
                   r"a must be 2-D \[M, K\], got shape \(8,\)"),
    "gemm b 3-D": (lambda t: dg.bf16_gemm_nn(_bf(3, 8), _bf(2, 8, 4), np.zeros((3, 4), F32), target=t),
                   r"b must be 2-D \[K, N\]"),
    "hc a 1-D": (lambda t: dg.tf32_hc_prenorm_gemm(_bf(8), np.ones((24, 8), F32), np.zeros((1, 24), F32),
                                                   np.zeros(1, F32), target=t), r"a must be 2-D"),
    "quant x 3-D": (lambda t: dg.per_token_cast_to_fp8(np.ones((2, 3, 40), F32), target=t),
                    r"x must be 2-D \[M, N\]"),
    "quant x 1-D": (lambda t: dg.per_block_cast_to_fp8(np.ones(40, F32), target=t), r"x must be 2-D"),
    "mqa q 2-D": (lambda t: dg.fp8_mqa_logits(np.ones((4, 8), F32), (np.ones((6, 8), F32), np.ones(6, F32)),
                                              np.ones((4, 1), F32), np.zeros(4, np.int32),
                                              np.full(4, 6, np.int32), target=t), r"q must be 3-D"),
    "mhc_post residual 2-D": (lambda t: mhc.mhc_post(_bf(5, 8), _bf(5, 8), np.ones((5, 1), F32),
                                                     np.ones((5, 1, 1), F32), target=t),
                              r"residual must be 3-D \[T, n, C\]"),
    "mhc_pre residual 2-D": (lambda t: mhc.mhc_pre(_bf(4, 8), np.ones((3, 8), F32), np.ones(3, F32),
                                                   np.ones(3, F32), target=t), r"residual must be 3-D"),
    "sinkhorn 2-D": (lambda t: mhc.sinkhorn(np.ones((4, 4), F32), target=t), r"x must be 3-D"),
}


@pytest.mark.parametrize("name", sorted(RANK_CASES))
def test_wrong_rank_is_a_value_error(target, name):
    call, message = RANK_CASES[name]
    with pytest.raises(ValueError, match=message):
        call(target)


@pytest.mark.parametrize("call", (
    lambda t: dg.bf16_gemm_nt(_bf(0, 8), _bf(4, 8), np.zeros((0, 4), F32), target=t),
    lambda t: dg.bf16_gemm_nt(_bf(3, 0), _bf(4, 0), np.zeros((3, 4), F32), target=t),
    lambda t: dg.per_token_cast_to_fp8(np.zeros((5, 0), F32), target=t),
    lambda t: mhc.sinkhorn(np.zeros((0, 2, 2), F32), target=t),
    lambda t: dg.fp8_mqa_logits(np.ones((4, 1, 32), F32), (np.ones((0, 32), F32), np.ones(0, F32)),
                                np.ones((4, 1), F32), np.zeros(4, np.int32), np.zeros(4, np.int32),
                                target=t)))
def test_empty_arrays_are_a_value_error(target, call):
    """(before: a CompileError 'tensor shapes must be positive' located in the library's kernel
    source); the k-grouped GEMMs' empty groups keep their meaning (test_lib_edges.py)."""
    with pytest.raises(ValueError, match=r"(a|x|kv)(\[0\])? has shape \(.*0.*\); the library "
                                         r"takes no empty arrays"):
        call(target)
    with pytest.raises(ValueError, match="M and N must be at least 1"):
        dg.k_grouped_bf16_gemm_tn_contiguous(_bf(128, 0), _bf(128, 3), np.zeros((1, 0, 3), F32),
                                             [128], target=target)


def _moe(T_=5, H=40, I=16, E=3, K=2):
    x, l1, l2 = _bf(T_, H, seed=1), _bf(E, 2 * I, H, seed=2) * 0.3, _bf(E, H, I, seed=3) * 0.3
    idx = np.array([[t % E, (t + 1) % E] for t in range(T_)], np.int32)[:, :K]
    return x, idx, l1.astype(BF16), l2.astype(BF16)


@pytest.mark.parametrize("bad", ("weights", "l1", "idx", "x"))
def test_mega_moe_argument_checks(bad):
    x, idx, l1, l2 = _moe()
    w = np.ones((5, 2), F32)
    y = np.zeros((5, 40), BF16)
    args = {"weights": (x, idx, w[:, :1], l1, l2, y), "l1": (x, idx, w, l1[0], l2, y),
            "idx": (x, idx[:, 0], w, l1, l2, y), "x": (x[0], idx, w, l1, l2, y)}[bad]
    message = {"weights": r"topk_weights has shape \(5, 1\); expected \(5, 2\)",
               "l1": r"l1 weights must be 3-D", "idx": r"topk_idx must be 2-D",
               "x": r"x must be 2-D \[T, H\]"}[bad]
    with pytest.raises(ValueError, match=message):
        dg.bf16_mega_moe(*args, target="numpy")


@pytest.mark.parametrize("gran", (0, -128, 1.5))
def test_quant_gran_k_must_be_positive(gran):
    with pytest.raises(ValueError, match="gran_k must be a(n| positive) integer"):
        dg.per_token_cast_to_fp8(np.ones((4, 40), F32), gran_k=gran, target="numpy")


@pytest.mark.parametrize("call,message", [
    (lambda: topk(np.ones((2, 5), F32), "a", target="numpy"), r"topk: k must be an integer, got 'a'"),
    (lambda: topk(np.ones((2, 5), F32), 2.5, target="numpy"), r"topk: k must be an integer, got 2.5"),
    (lambda: mhc.sinkhorn(np.ones((2, 3, 3), F32), repeat="3", target="numpy"), r"repeat must be an integer"),
    (lambda: dg.per_token_cast_to_fp8(np.ones((4, 40), F32), gran_k="a", target="numpy"), r"gran_k must be an integer"),
    (lambda: dg.per_block_cast_to_fp8(np.ones((4, 40), F32), gran_k=None, target="numpy"),
     r"gran_k must be an integer, got None"),  # before: a TypeError in ceil_div
    (lambda: dg.get_paged_mqa_logits_metadata(np.ones(2, np.int32), "64", 4, target="numpy"), r"block_kv must be an integer"),
    (lambda: fm.get_mla_metadata(np.ones(2, np.int32), 16, 1, num_parts="2", target="numpy"), r"num_parts must be an integer"),
])
def test_non_numeric_integer_arguments_name_the_argument(call, message):
    """A string (or a non-integral float) where an integer is expected: before, Python's
    `invalid literal for int()` (or a silent truncation of 2.5 to 2)."""
    with pytest.raises(ValueError, match=message):
        call()


def test_integer_arguments_take_numpy_integers_and_integral_floats(target):
    x = rng(3).standard_normal((3, 40)).astype(F32)
    want = np.argsort(-x.astype(np.float64), axis=1, kind="stable")[:, :4]
    for k in (4, np.int64(4), 4.0):
        _, idx = topk(x, k, target=target)
        assert np.array_equal(idx, want)


def test_sinkhorn_repeat_and_d_dtype():
    with pytest.raises(ValueError, match="sinkhorn needs repeat >= 1, got 0"):
        mhc.sinkhorn(np.ones((2, 4, 4), F32), repeat=0, target="numpy")
    with pytest.raises(ValueError, match="sinkhorn_repeat >= 1"):
        mhc.mhc_pre(_bf(2, 1, 8), np.ones((3, 8), F32), np.ones(3, F32), np.ones(3, F32),
                    sinkhorn_repeat=0, target="numpy")
    with pytest.raises(ValueError, match="d has dtype float64"):
        dg.bf16_gemm_nt(_bf(3, 8), _bf(4, 8), np.zeros((3, 4)), target="numpy")


def test_mhc_post_takes_post_as_t_n_1(target):
    """TileKernels' post [T, n, 1] is still read as [T, n]; another size is refused."""
    r = rng(5)
    Tn, n, C = 3, 2, 20
    x, res = _bf(Tn, C, seed=6), _bf(Tn, n, C, seed=7)
    post, comb = r.uniform(0, 2, (Tn, n, 1)).astype(F32), r.uniform(0, 1, (Tn, n, n)).astype(F32)
    out = mhc.mhc_post(x, res, post, comb, target=target)
    want = post.astype(np.float64) * x.astype(np.float64)[:, None, :] + np.einsum(
        "tjk,tjc->tkc", comb.astype(np.float64), res.astype(np.float64))
    close(out, want, "bfloat16", scale=4)
    with pytest.raises(ValueError, match=r"post has shape \(3, 3\)"):
        mhc.mhc_post(x, res, np.ones((3, 3), F32), comb, target=target)


def _mla(seqlens, bt, nb=3, d=64):
    q, kc = _bf(len(seqlens), 1, 4, d, seed=8), _bf(nb, 64, 1, d, seed=9)
    seqlens = np.array(seqlens, np.int32)
    meta, splits = fm.get_mla_metadata(seqlens, 4, 1, target="numpy")
    return q, kc, np.array(bt, np.int32), seqlens, meta, splits


@pytest.mark.parametrize("bad,message", [
    ("block", r"block_table\[0\] names block 7 for cache_seqlens\[0\] = 100; k_cache has 3"),
    ("long", r"cache_seqlens\[1\] = 130 needs 3 pages; block_table has 2"),
    ("negative", r"cache_seqlens\[0\] = -1"),
    ("dv", r"head_dim_v must be in \[1, 64\]"),
    ("rank", r"block_table must be 2-D"),
])
def test_flash_mla_index_data_is_checked(bad, message):
    seq = {"long": [100, 130], "negative": [-1, 5]}.get(bad, [100, 5])
    bt = {"block": [[0, 7], [2, 1]], "rank": [0, 1]}.get(bad, [[0, 1], [2, 0]])
    q, kc, bt, seqlens, meta, splits = _mla(seq, bt) if bad != "negative" else _mla([1, 5], bt)
    seqlens = np.array(seq, np.int32)
    with pytest.raises(ValueError, match=message):
        fm.flash_mla_with_kvcache(q, kc, bt, seqlens, 128 if bad == "dv" else 64, meta, splits,
                                  target="numpy")
    with pytest.raises(ValueError, match="num_parts must be at least 1, got 0"):
        fm.get_mla_metadata(np.array([5], np.int32), 4, 1, num_parts=0, target="numpy")


def test_flash_mla_unused_table_entries_and_estimates_are_not_checked(target):
    """Entries past a sequence's pages may hold anything (as FlashMLA's); the estimate of a call
    on np.empty index arrays compiles without reading them."""
    q, kc, bt, seqlens, meta, splits = _mla([64, 0], [[2, -5], [99, 99]])
    out, lse = fm.flash_mla_with_kvcache(q, kc, bt, seqlens, 64, meta, splits, target=target)
    keys = kc[2, :, 0].astype(np.float64)
    s = q[0, 0].astype(np.float64) @ keys.T / 8.0
    p = np.exp(s - s.max(1, keepdims=True))
    close(out[0, 0], (p / p.sum(1, keepdims=True)) @ keys, "bfloat16", scale=2)
    assert np.all(out[1] == 0) and np.all(np.isinf(lse[1]))
    garbage = np.full((2, 2), 12345, np.int32)
    est = fm.flash_mla_with_kvcache.estimate(q, kc, garbage, np.full(2, 10 ** 6, np.int32), 64,
                                             meta, splits, data=False)
    assert est.time_us > 0


def test_grouped_index_data_is_checked(target):
    a, b = _bf(256, 32, seed=10), _bf(2, 16, 32, seed=11)
    d = np.zeros((256, 16), F32)
    layout = np.full(256, -1, np.int32)
    layout[:3], layout[128:200] = 1, 0      # padding rows stay -1: legal, left untouched
    dg.m_grouped_bf16_gemm_nt_contiguous(a, b, d, layout, target=target)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    close(d[:3], a64[:3] @ b64[1].T, "float32", scale=6)
    close(d[128:200], a64[128:200] @ b64[0].T, "float32", scale=6)
    assert np.all(d[3:128] == 0) and np.all(d[200:] == 0)
    layout[5] = 2
    with pytest.raises(ValueError, match="grouped_layout names group 2; b has 2 groups"):
        dg.m_grouped_bf16_gemm_nt_contiguous(a, b, d, layout, target=target)
    am = _bf(2, 64, 32, seed=12)
    dm = np.zeros((2, 64, 16), F32)
    dg.m_grouped_bf16_gemm_nt_masked(am, b, dm, np.array([64, 0], np.int32), target=target)
    close(dm[0], am[0].astype(np.float64) @ b64[0].T, "float32", scale=6)
    assert np.all(dm[1] == 0)
    with pytest.raises(ValueError, match=r"masked_m must be in \[0, 64\]"):
        dg.m_grouped_bf16_gemm_nt_masked(am, b, dm, np.array([65, 0], np.int32), target=target)
    est = dg.m_grouped_bf16_gemm_nt_masked.estimate(am, b, dm, np.full(2, 10 ** 6, np.int32),
                                                    data=False)
    assert est.time_us > 0
