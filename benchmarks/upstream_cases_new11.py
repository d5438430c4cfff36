"""Sweep cases added in session 11 (part a): the NSA backward kernels, MInference's
vertical-slash attention, the BitNet prefill GEMM, the HISA fp8 pool / block-sparse indexers,
the DeepSeek-V4 sparse attention with sinks, the AutoDD bug-isolation examples and the IKET
profiling-marker examples. Host code and float64 references are written here from each
operation's meaning; the kernels are the examples' own, read from the mirror at run time by
upstream_sweep.py.

Files without a kernel of their own have no case: examples/dsa_hisa/hisa.py (host code chaining
four kernels that have cases), examples/dsa_sparse_finetune/dsa.py and index.py (torch host code
and index helpers). BitNet's tl_int8xint8.py is TileLang from the time it lived in BitBLAS as
`tvm.tl`: upstream_compat.py maps those imports to tilelang_mini's."""
import numpy as np

from upstream_sweep import Check, case, rn, tolerance, with_kwargs
from upstream_cases_new import TL, f64
from upstream_cases_new10 import indexer_windows

LOG2E = 1.0 / np.log(2.0)

# ------------------------------------------------------------------ NSA backward (deepseek_nsa)

NSA = "examples/deepseek_nsa/example_tilelang_nsa_bwd.py"


def nsa_grads(q, k, v, do, keys, scale):
    """Attention of each query row t (its heads h*G..h*G+G-1 share KV head h) over the key rows
    keys[b][t][h], in float64: output O, log2-sum-exp2 LSE (the kernels' base-2 units), Delta =
    rowsum(O * dO) and the gradients dQ, dK, dV."""
    B, L, HQ, D = q.shape
    HK = k.shape[2]
    G = HQ // HK
    q, k, v, do = (x.astype(f64) for x in (q, k, v, do))
    o, lse = np.zeros(q.shape), np.zeros((B, L, HQ))
    dq, dk, dv = np.zeros(q.shape), np.zeros(k.shape), np.zeros(v.shape)
    for b in range(B):
        for t in range(L):
            for h in range(HK):
                js = keys[b][t][h]
                hs = slice(h * G, (h + 1) * G)
                kk, vv = k[b, js, h], v[b, js, h]
                s = q[b, t, hs] @ kk.T * scale
                mx = s.max(-1, keepdims=True)
                e = np.exp(s - mx)
                p = e / e.sum(-1, keepdims=True)
                o[b, t, hs] = p @ vv
                lse[b, t, hs] = (np.log(e.sum(-1)) + mx[:, 0]) * LOG2E
                dp = do[b, t, hs] @ vv.T
                ds = p * (dp - (o[b, t, hs] * do[b, t, hs]).sum(-1, keepdims=True))
                dq[b, t, hs] = ds @ kk * scale
                np.add.at(dk[b, :, h], js, ds.T @ q[b, t, hs] * scale)
                np.add.at(dv[b, :, h], js, p.T @ do[b, t, hs])
    delta = (o * do).sum(-1)
    return o, lse, delta, dq, dk, dv


def nsa_selection(rng, B, L, HK, S, bs, sentinel=False):
    """Per query: S distinct selected blocks, its own block first (every query sees a key);
    BlockIndices [B, L, HK, S], the same selection as a 0/1 mask over the L // bs blocks
    [B, L, HK, NS], and the causal key rows of each query. `sentinel`: the queries of the
    first block select only it, their other entries are L (the example's padding: a block
    past every query, skipped by the kernels)."""
    nb = L // bs
    idx = np.zeros((B, L, HK, S), np.int32)
    mask = np.zeros((B, L, HK, nb), np.int32)
    keys = [[[None] * HK for _ in range(L)] for _ in range(B)]
    for b in range(B):
        for t in range(L):
            for h in range(HK):
                own = t // bs
                idx[b, t, h] = [own] + [x for x in rng.permutation(nb) if x != own][:S - 1]
                if sentinel and own == 0:
                    idx[b, t, h, 1:] = L
                mask[b, t, h, idx[b, t, h][idx[b, t, h] < nb]] = 1
                keys[b][t][h] = [blk * bs + j for blk in sorted(idx[b, t, h])
                                 if blk * bs <= t for j in range(bs) if blk * bs + j <= t]
    return idx, mask, keys


def nsa_problem(rng, B=1, L=64, HK=1, HQ=16, D=32, S=2, bs=32, scale=0.125, sentinel=False):
    q = rn(rng, (B, L, HQ, D), "float16")
    k, v = rn(rng, (B, L, HK, D), "float16"), rn(rng, (B, L, HK, D), "float16")
    do = rn(rng, (B, L, HQ, D), "float16")
    idx, mask, keys = nsa_selection(rng, B, L, HK, S, bs, sentinel)
    return (q, k, v, do), idx, mask, nsa_grads(q, k, v, do, keys, scale)


@case("tl/deepseek_nsa/nsa_bwd_fwd", TL, NSA,
      "NSA backward file's forward: selected KV blocks per query, exp2 online softmax, O and "
      "the base-2 LSE (eager jit, T.const sizes, groups of 16 query heads per KV head)")
def _(m, rng):
    fn = with_kwargs(m["tilelang_kernel_fwd"], dim=32, is_causal=True, scale=0.125,
                     block_size=32, groups=16, selected_blocks=2)
    checks = []
    for sentinel in (False, True):
        (q, k, v, _), idx, _, (o, lse, *_) = nsa_problem(rng, sentinel=sentinel)
        checks += [Check(fn, [q, k, v, idx], {0: o}, "float16", 64),
                   Check(fn, [q, k, v, idx], {1: lse}, "float32", 64, tol=(1e-3, 1e-3))]
    return checks


def nsa_bwd_check(m, rng, kernel, with_dq):
    """A Check of the example's `kernel` (dK/dV, or dQ/dK/dV): inputs, LSE and Delta from the
    float64 forward of a random selection, zeroed gradient outputs written in place."""
    (q, k, v, do), _, mask, (_, lse, delta, dq, dk, dv) = nsa_problem(rng)
    m["H"] = k.shape[2]  # the example's module-level head count (set by its __main__)
    dkz, dvz = np.zeros((1,) + k.shape, np.float16), np.zeros(v.shape, np.float16)
    args = [q, k, v, lse.astype(np.float32), delta.astype(np.float32), do]
    if with_dq:
        args.append(np.zeros((1,) + q.shape, np.float16))
    args += [dkz, dvz, mask]
    n = len(args)
    want = {("arg", n - 3): dk[None], ("arg", n - 2): dv}
    if with_dq:
        want[("arg", 6)] = dq[None]
    fn = with_kwargs(m[kernel], dim=32, is_causal=True, scale=0.125, block_size=32, groups=16,
                     selected_blocks=2)
    return Check(fn, args, want, "float16", 64)


@case("tl/deepseek_nsa/nsa_bwd_dkv", TL, NSA,
      "NSA dK/dV: per KV block, a Pipelined loop with run-time bounds over the queries whose "
      "block mask (GM scalar) is set, transposed gemms, a loop variable shadowed by T.Parallel")
def _(m, rng):
    return [nsa_bwd_check(m, rng, "tilelang_kernel_bwd_dkv", False)]


@case("tl/deepseek_nsa/nsa_bwd_dqkv", TL, NSA,
      "NSA dQ/dK/dV: as dkv plus dQ by an element-wise T.atomic_add into an fp16 GM tensor "
      "from a transpose_A gemm")
def _(m, rng):
    return [nsa_bwd_check(m, rng, "tilelang_kernel_bwd_dqkv", True)]


@case("tl/deepseek_nsa/nsa_bwd_preprocess", TL, NSA,
      "NSA Delta = rowsum(O * dO): fragments filled by T.copy in a Python range loop, reduce_sum")
def _(m, rng):
    o, do = rn(rng, (1, 64, 4, 64), "float16"), rn(rng, (1, 64, 4, 64), "float16")
    want = (o.astype(f64) * do.astype(f64)).sum(-1)
    return [Check(m["tilelang_kernel_preprocess"], [o, do], {0: want}, "float32", 64)]


@case("tl/deepseek_nsa/nsa_bwd_block_mask", TL, NSA,
      "NSA block mask: one GM scalar per program, a Python `and` of two TIR conditions, a "
      "bool stored into an int32 tensor, `block_counts` a module global")
def _(m, rng):
    B, L, HK, S, bs = 1, 64, 2, 2, 16
    idx, *_ = nsa_selection(rng, B, L, HK, S, bs)
    counts = rng.integers(1, S + 1, (B, L, HK)).astype(np.int32)
    m["block_counts"] = counts  # the example's module-level tensor (set by its __main__)
    t = np.arange(L)[None, :, None, None]
    want = ((idx * bs <= t) & (np.arange(S) < counts[..., None])).astype(f64)

    def first_s(got, want):  # the kernel writes entries [..., :S] of its [..., L // bs] mask
        np.testing.assert_array_equal(got[..., :S].astype(f64), want)
    return [Check(with_kwargs(m["tilelang_kernel_block_mask"], block_size=bs), [idx, counts],
                  {0: want}, "int32", compare=first_s)]


# ------------------------------------------------------------------ MInference

@case("tl/minference/vertical_slash_sparse_attn", TL,
      "examples/minference/example_vertical_slash_sparse_attn.py",
      "vertical-slash sparse attention: a warp-specialised producer (tid >= 128) and consumer "
      "synchronised by mbarriers, T.tma_copy, cp.async groups (GPU-only: a located error)")
def _(m, rng):
    B, H, L, D, bm = 1, 1, 128, 64, 64
    q, k, v = (rn(rng, (B, H, L, D), "float16") for _ in range(3))
    nblk = L // bm
    # query block x: slash key blocks [x * 64, x * 64 + 64) (causal inside) and, for x = 1,
    # vertical columns 0..5 (all visible, outside the slash block)
    count = np.ones((B, H, nblk), np.int32)
    offset = (np.arange(nblk) * bm).reshape(B, H, nblk, 1).astype(np.int32)
    ccount = np.array([0, 6], np.int32).reshape(B, H, nblk)
    cidx = np.zeros((B, H, nblk, 8), np.int32)
    cidx[0, 0, 1, :6] = np.arange(6)
    want = np.zeros((B, H, L, D))
    for t in range(L):
        x = t // bm
        js = list(range(x * bm, t + 1)) + (list(range(6)) if x == 1 else [])
        s = q[0, 0, t].astype(f64) @ k[0, 0, js].astype(f64).T / np.sqrt(D)
        p = np.exp(s - s.max())
        want[0, 0, t] = (p / p.sum()) @ v[0, 0, js].astype(f64)
    kern = m["_tl_vs_sparse_flashattn"](B, H, L, D, 8, 1)
    return [Check(kern, [q, k, v, count, offset, ccount, cidx], {0: want}, "float16", L)]


# ------------------------------------------------------------------ BitNet prefill

BITNET = "examples/bitnet-1.58b/kernel_benchmark/"


@case("tl/bitnet/int8xint2_prefill", TL, BITNET + "tilelang_bitnet_158_int8xint2_prefill.py",
      "2-bit weights decoded by inline CUDA (T.call_extern into a Kernel prelude), MMA "
      "emitter ldmatrix/mma/stmatrix per warp: a located error")
def _(m, rng):
    M, N, K = 64, 64, 128
    a = rng.integers(-8, 8, (M, K)).astype(np.int8)
    w = rng.integers(0, 4, (N, K))  # unsigned 2-bit weights (the kernel's decode_i2u_to_i8s)
    # 16 weights per little-endian int32: weight o of a group in byte o % 4, bits 2 * (o // 4)
    g = w.reshape(N, K // 16, 16).astype(np.uint32)
    o = np.arange(16)
    word = (g << ((o % 4) * 8 + (o // 4) * 2)).sum(-1).astype(np.uint32)
    packed = word.view(np.int8).reshape(N, K // 4)
    kern = m["bitnet_158_int8xint2_prefill"](M, N, K, "int8", "int32", "int32")
    want = {("arg", 2): a.astype(f64) @ w.astype(f64).T}
    return [Check(kern, [a, packed, np.zeros((M, N), np.int32)], want, "int32", tol=(0, 0))]


@case("tl/bitnet/tl_int8xint8", TL, BITNET + "tl_int8xint8.py",
      "BitBLAS-era (`tvm.tl`) int8 GEMM A @ B^T by the CUDA MMA emitter (ldmatrix/mma/"
      "stmatrix per warp, T.thread_binding): a located error")
def _(m, rng):
    M = N = K = 128
    a, b = (rng.integers(-7, 7, (M, K)).astype(np.int8) for _ in range(2))
    kern = m["tl_matmul"](M, N, K, "int8", "int32", "int32")
    want = {("arg", 2): a.astype(f64) @ b.astype(f64).T}
    return [Check(kern, [a, b, np.zeros((M, N), np.int32)], want, "int32", tol=(0, 0))]


# ------------------------------------------------------------------ HISA fp8 indexers

HISA = "examples/dsa_hisa/"


def fp8_window_cmp(inside, red):
    """Compare only inside each query's window (the kernels leave other entries undefined)."""
    def cmp(got, want):
        rtol, atol = tolerance("float32", red)
        g = got.astype(f64)
        ok = np.isclose(g, want, rtol=rtol, atol=atol * 4)
        assert ok[inside].all(), f"logits: {int((~ok[inside]).sum())} differ in the windows, " \
            f"max abs err {np.abs(g - want)[inside].max():.3g}"
    return cmp


@case("tl/dsa_hisa/pool_mqa_fp8", TL, HISA + "pool_mqa_fp8.py",
      "HISA stage 1: fp8 queries against pooled fp8 keys, the tile's KV window union by "
      "T.serial min/max on alloc_vars, a run-time Pipelined trip count, T.reshape of the "
      "score fragment to 3-D, reduce_sum over the last dim, per-element GM stores",
      chip="ascend950")
def _(m, rng):
    checks = []
    # small tiles, and the example's defaults (64 heads, 128 dims, block_N 256: a 256 x 128
    # float32 score tile per stage, three stages of it more than UB holds)
    for S, NB, H, D, bn in ((64, 256, 8, 64, 64), (4, 512, 64, 128, 256)):
        (q, kb, kscale, w, ks, ke), full, _, inside = indexer_windows(rng, S, NB, H, D)
        logits = np.zeros((S, NB), np.float32)
        fn = with_kwargs(m["pool_mqa_attn_return_logits_fp8"], heads=H, index_dim=D, block_N=bn)
        checks.append(Check(fn, [q, kb, kscale, logits, w, ks, ke], {("arg", 3): full},
                            compare=fp8_window_cmp(inside, D * H)))
    return checks


@case("tl/dsa_hisa/block_sparse_mqa_fp8", TL, HISA + "block_sparse_mqa_fp8.py",
      "HISA stage 2: fp8 MQA logits over each query's top-k KV blocks (int64 block ids cast "
      "to int32), -inf outside the query's [ks, ke) window, T.reshape, reduce_sum(dim=-1)",
      chip="ascend950")
def _(m, rng):
    import ml_dtypes
    S, SKV, H, D, kvb, topk = 16, 512, 16, 64, 64, 3
    q = rn(rng, (S * H, D)).astype(ml_dtypes.float8_e4m3fn)
    k = rn(rng, (SKV, D)).astype(ml_dtypes.float8_e4m3fn)
    kscale = (rng.random(SKV) + 0.5).astype(np.float32)
    w = rn(rng, (S, H), "float32")
    blocks = np.stack([rng.permutation(SKV // kvb)[:topk] for _ in range(S)]).astype(np.int64)
    ks = rng.integers(0, SKV // 2, S).astype(np.int32)
    ke = (ks + rng.integers(1, SKV // 2, S)).astype(np.int32)
    rows = blocks[:, :, None] * kvb + np.arange(kvb)                     # [S, topk, kvb]
    qf = q.astype(f64).reshape(S, H, D)
    s = np.einsum("shd,stid->stih", qf, k.astype(f64)[rows])             # [S, topk, kvb, H]
    lg = (np.maximum(s, 0) * w.astype(f64)[:, None, None, :]).sum(-1) * kscale.astype(f64)[rows]
    inwin = (rows >= ks[:, None, None]) & (rows < ke[:, None, None])
    want = np.where(inwin, lg, -np.inf).reshape(S, topk * kvb)
    fn = with_kwargs(m["fp8_native_block_sparse_mqa_attn_return_logits"], heads=H,
                     index_dim=D, kv_block_size=kvb, topk=topk)
    return [Check(fn, [q, k, kscale, blocks, w, ks, ke], {0: want}, "float32", D * H)]


# ------------------------------------------------------------------ DeepSeek-V4 sparse attention

@case("tl/deepseek_v4/sparse_attn_fwd_sm90", TL, "examples/deepseek_v4/sparse_attn_fwd_sm90.py",
      "DSV4 MQA sparse attention: top-k KV rows gathered per element from GM into shared "
      "memory, a bool fragment mask, exp2 online softmax with a per-head attention sink")
def _(m, rng):
    # 64 heads (one block of 64), and 8 (the example's own test: the block's copies of Q, the
    # sinks and the output run past the tensors' 8 heads, clipped to them)
    return [sparse_attn_sink_check(m, rng, H) for H in (64, 8)]


def sparse_attn_sink_check(m, rng, H):
    import ml_dtypes
    B, S, SKV, D, topk = 1, 4, 256, 64, 128
    q = rn(rng, (B, S, H, D)).astype(ml_dtypes.bfloat16)
    kv = rn(rng, (B, SKV, D)).astype(ml_dtypes.bfloat16)
    sinks = rn(rng, (H,)).astype(ml_dtypes.bfloat16)
    idx = rng.integers(0, SKV, (B, S, topk)).astype(np.int32)
    g = kv.astype(f64)[np.arange(B)[:, None, None], idx]                 # [B, S, topk, D]
    s = np.einsum("bshd,bstd->bsht", q.astype(f64), g) / np.sqrt(D)
    s = np.concatenate([s, np.broadcast_to(sinks.astype(f64)[None, None, :, None],
                                           (B, S, H, 1))], -1)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    want = np.einsum("bsht,bstd->bshd", p[..., :-1], g)
    kern = m["sparse_attn_fwd"](B, H, S, SKV, D, topk)
    return Check(kern, [q, kv, idx, sinks], {0: want}, "bfloat16", topk)


# ------------------------------------------------------------------ AutoDD (bug isolation)

AUTODD = "examples/autodd/"


@case("tl/autodd/buggy_matmul", TL, AUTODD + "tilelang_buggy.py",
      "the AutoDD example's deliberate bug: B_shared (block_M, block_N) fed to T.gemm as the "
      "(block_K, block_N) operand (expected: a located shape error)")
def _(m, rng):
    return [relu_matmul_check(m, rng, 64, 64, 32)]


def relu_matmul_check(m, rng, bm, bn, bk):
    """The AutoDD example's kernel with these tiles: relu(A @ B), 128 x 128 float16."""
    a, b = rn(rng, (128, 128), "float16"), rn(rng, (128, 128), "float16")
    want = np.maximum(a.astype(f64) @ b.astype(f64), 0)
    fn = with_kwargs(m["buggy_matmul"], block_M=bm, block_N=bn, block_K=bk)
    return Check(fn, [a, b], {0: want}, "float16", 128)


@case("tl/autodd/buggy_matmul_square", TL, AUTODD + "tilelang_buggy.py",
      "the same kernel with block_M == block_K, where its shapes agree: relu(A @ B) by a "
      "3-stage Pipelined GEMM, eager jit with T.empty output")
def _(m, rng):
    return [relu_matmul_check(m, rng, 32, 64, 32)]


@case("tl/autodd/minimized_expected", TL, AUTODD + "tilelang_minimized_expected.py",
      "AutoDD's minimised program: T.Kernel() without a grid, a gemm of (2, 1) by (2, 1) "
      "tiles (expected: a located shape error)")
def _(m, rng):
    a, b = rn(rng, (1, 1)), rn(rng, (1,))

    def must_not_compile(got, want):
        raise AssertionError("a gemm whose operands' K differ (1 vs 2) compiled and ran")
    fn = with_kwargs(m["buggy_matmul"], block_M=2, block_N=1, block_K=1)
    return [Check(fn, [a, b], {("arg", 0): a.astype(f64)}, compare=must_not_compile)]


# ------------------------------------------------------------------ IKET profiling markers

IKET = "examples/iket/"


def iket_check(kern, ins, want):
    return Check(kern, ins, {0: want}, "float32")


@case("tl/iket/minimal", TL, IKET + "minimal.py",
      "C = A + B with IKET trace markers (iket.range around the kernel body, iket.mark in a "
      "guarded T.Parallel body): profiling events that do not change the values")
def _(m, rng):
    import tilelang_mini
    n = 1000  # not a multiple of the 128 threads: the `idx < n` guard matters
    a, b = rn(rng, (n,)), rn(rng, (n,))
    kern = tilelang_mini.compile(m["elementwise_add_with_iket"](n), out_idx=-1)
    return [iket_check(kern, [a, b], a.astype(f64) + b.astype(f64))]


@case("tl/iket/all_features", TL, IKET + "all_features.py",
      "(A + B) * Scale[0] with IKET ranges, marks and run-time payloads (block and element "
      "indices)")
def _(m, rng):
    import tilelang_mini
    n = 1000
    a, b, sc = rn(rng, (n,)), rn(rng, (n,)), rn(rng, (1,))
    kern = tilelang_mini.compile(m["add_scale_with_iket"](n), out_idx=-1)
    return [iket_check(kern, [a, b, sc], (a.astype(f64) + b.astype(f64)) * f64(sc[0]))]


@case("tl/iket/payload_minimal", TL, IKET + "payload_minimal.py",
      "C = A + 1 with an IKET mark carrying the element index as a payload")
def _(m, rng):
    import tilelang_mini
    n = 200
    a = rn(rng, (n,))
    kern = tilelang_mini.compile(m["payload_mark_kernel"](n), out_idx=-1)
    return [iket_check(kern, [a], a.astype(f64) + 1.0)]
