"""Sweep cases added in session 13 (the coverage audit): every example file that defines a kernel
already had a case, but some kernel functions of covered files were never called by any case
(a file's backward kernels when only its forward had a case, a factory behind a check that
fails first, an autotuner helper). These cases call them. Host code and float64 references
are written here from each operation's meaning; the kernels are the examples' own, read from
the mirror at run time by upstream_sweep.py.

Not given a case: Triton kernels in TileLang example files (benchmark_nsa_fwd.py's
parallel_nsa_fwd_kernel, example_vertical_slash_sparse_attn.py's
_triton_mixed_sparse_attn_fwd_kernel, rand_uint.py's triton_rand_1d): no TileLang."""
import numpy as np

from upstream_sweep import Check, case, rn, tolerance, with_kwargs
from upstream_cases_new import A, TL, f64

LOG2 = np.log(2)


def bf16(x):
    import ml_dtypes
    return x.astype(ml_dtypes.bfloat16)


def summed_over_groups(dtype, reduce_len):
    """compare() of per-group dK/dV slots (groups, ...) whose sum (host code) is the gradient."""
    def cmp(got, want):
        rtol, atol = tolerance(dtype, reduce_len)
        s = got.astype(f64).sum(0)
        assert np.allclose(s, want, rtol=rtol, atol=2 * atol), \
            f"group sum: max abs err {np.abs(s - want).max():.3g}"
    return cmp


# ------------------------------------------------------------------------- norm/layernorm


@case("tl/norm/layernorm_bwd", TL, "examples/norm/layernorm.py",
      "LayerNorm backward: per-row dX from saved Mean/Rstd (T.serial over the block's rows), "
      "dGamma/dBeta accumulated per block and atomic_add(memory_order='relaxed') into float32")
def _(m, rng):
    N, D, blk = 64, 256, 32
    x, dy, g = bf16(rn(rng, (N, D))), bf16(rn(rng, (N, D))), bf16(rn(rng, (D,)))
    xf, dyf, gf = x.astype(f64), dy.astype(f64), g.astype(f64)
    mean = xf.mean(1).astype(np.float32)
    rstd = (1 / np.sqrt(xf.var(1) + 1e-5)).astype(np.float32)
    xhat = (xf - mean[:, None]) * rstd[:, None]
    dxhat = dyf * gf
    dx = rstd[:, None] * (dxhat - dxhat.mean(1, keepdims=True)
                          - xhat * (dxhat * xhat).mean(1, keepdims=True))
    kern = m["_layernorm_bwd"](N, D, blk_m=blk)
    args = [dy, x, g, mean, rstd, np.zeros(D, np.float32), np.zeros(D, np.float32)]
    return [Check(kern, args, {0: dx}, "bfloat16", D),
            Check(kern, args, {("arg", 5): (dyf * xhat).sum(0), ("arg", 6): dyf.sum(0)},
                  "float32", N, tol=(1e-4, 1e-4))]


# -------------------------------------------- attention backward pre/post-processing kernels


def delta_bhs(o, do, seq_axis_first):
    """rowsum(O * dO) over the head dim: (B, H, S) from BSHD (or BHSD) tensors."""
    d = (o.astype(f64) * do.astype(f64)).sum(-1)
    return np.swapaxes(d, 1, 2) if seq_axis_first else d


@case("tl/attention_sink/gqa_sink_bwd_bhsd_prepost", TL,
      "examples/attention_sink/example_gqa_sink_bwd_bhsd.py",
      "the GQA sink backward's preprocess (Delta over 32-wide dim tiles) and postprocess "
      "(float32 dQ to float16, T.annotate_layout of the global dQ)")
def _(m, rng):
    B, H, S, D = 1, 4, 128, 64
    o, do = rn(rng, (B, H, S, D), "float16"), rn(rng, (B, H, S, D), "float16")
    dq = rn(rng, (B, H, S, D))
    return [Check(m["flashattn_bwd_preprocess"](B, H, S, D), [o, do],
                  {0: delta_bhs(o, do, False)}, "float32", D, tol=(1e-3, 1e-3)),
            Check(m["flashattn_bwd_postprocess"](B, H, S, D), [dq], {0: dq.astype(f64)},
                  "float16")]


@case("tl/attention_sink/gqa_sink_bwd_varlen_prepost", TL,
      "examples/attention_sink/example_gqa_sink_bwd_varlen.py",
      "varlen sink backward's preprocess (masked element loads per sequence of cu_seqlens, "
      "Delta zero past each length is not written) and postprocess over packed tokens")
def _(m, rng):
    lens, H, D, NC = (40, 70), 2, 64, 96
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    U, B = int(cu[-1]), len(lens)
    o, do = rn(rng, (U, H, D), "float16"), rn(rng, (U, H, D), "float16")
    want = np.zeros((B, H, NC))
    for b, L in enumerate(lens):
        want[b, :, :L] = (o[cu[b]:cu[b + 1]].astype(f64) * do[cu[b]:cu[b + 1]]).sum(-1).T
    kern = m["flashattn_bwd_preprocess"](B, H, U, NC, max(lens), D)
    dq = rn(rng, (U, H, D))
    def written_rows(got, want):  # Delta past a sequence's length is never written
        for b, L in enumerate(lens):
            assert np.allclose(got[b, :, :L], want[b, :, :L], rtol=1e-3, atol=1e-3), \
                f"Delta of sequence {b}: max abs err {np.abs(got[b, :, :L] - want[b, :, :L]).max():.3g}"
    pre = Check(kern, [o, do, cu], {0: want}, compare=written_rows)
    return [pre, Check(m["flashattn_bwd_postprocess"](U, H, D), [dq], {0: dq.astype(f64)},
                       "float16")]


def gqa_prepost(m, rng, post_args, dims=(2, 4, 2, 128, 64, 32)):
    """The GQA backward examples' preprocess (Delta from BSHD O/dO of head dim DV) and
    postprocess (dQ, or dQ/dK/dV, float32 -> float16)."""
    B, H, HK, S, DQK, DV = dims
    o, do = rn(rng, (B, S, H, DV), "float16"), rn(rng, (B, S, H, DV), "float16")
    checks = [Check(m["flashattn_bwd_preprocess"](B, H, S, DV), [o, do],
                    {0: delta_bhs(o, do, True)}, "float32", DV, tol=(1e-3, 1e-3))]
    if post_args == "dq":
        dq = rn(rng, (B, S, H, DQK))
        checks.append(Check(m["flashattn_bwd_postprocess"](B, H, S, DQK), [dq],
                            {0: dq.astype(f64)}, "float16"))
    else:
        d32 = [rn(rng, s) for s in ((B, S, H, DQK), (B, S, HK, DQK), (B, S, HK, DV))]
        checks.append(Check(m["flashattn_bwd_postprocess"](B, H, HK, S, DQK, DV), d32,
                            {i: x.astype(f64) for i, x in enumerate(d32)}, "float16"))
    return checks


@case("tl/flash_attention/gqa_bwd_prepost", TL, "examples/flash_attention/example_gqa_bwd.py",
      "GQA backward's preprocess (Delta, dim_v != dim_qk) and postprocess (dQ with the 8x8 "
      "fragment T.Layout annotated on the global tensor)")
def _(m, rng):
    return gqa_prepost(m, rng, "dq")


@case("tl/flash_attention/gqa_bwd_tma_reduce_prepost", TL,
      "examples/flash_attention/example_gqa_bwd_tma_reduce.py",
      "GQA TMA-reduce backward's preprocess and its postprocess: two T.Kernel launches (dQ "
      "over the query heads, dK/dV over the K/V heads) with T.annotate_layout of globals")
def _(m, rng):
    return gqa_prepost(m, rng, "dqkv")


@case("tl/flash_attention/gqa_bwd_tma_reduce_varlen_split", TL,
      "examples/flash_attention/example_gqa_bwd_tma_reduce_varlen.py",
      "varlen GQA backward, split variant: dQ by atomic_add into float32, dK/dV of each query "
      "head of a group in its own slot (summed by host code), causal and not. Two sequences "
      "of equal length: every block of the ceil(max_seqlen / block_M) grid stores its whole "
      "block_M-row dK/dV tiles unmasked, so a sequence shorter than the longest (the example's "
      "own random lengths) stores tiles past its end over the next sequence's rows, a real "
      "race between blocks that the simulator reports")
def _(m, rng):
    from upstream_cases_new7 import varlen_gqa_problem
    lens, H, HK, DQK, DV, NC = (64, 64), 2, 1, 64, 32, 64
    g, B, U = H // HK, len(lens), sum(lens)
    slots = summed_over_groups("float16", NC)

    def dq_and_slots(got, want):  # dQ as is; dK/dV (groups, ...) summed over the groups
        if got.ndim == want.ndim:
            rtol, atol = tolerance("float16", NC)
            assert np.allclose(got.astype(f64), want, rtol=rtol, atol=atol), \
                f"dQ: max abs err {np.abs(got.astype(f64) - want).max():.3g}"
        else:
            slots(got, want)
    checks = []
    for causal in (False, True):
        cu, q, k, v, do, (_o, dq, dk, dv, (lse, delta)) = varlen_gqa_problem(
            rng, lens, H, HK, DQK, DV, NC, causal)
        kern = m["flashattn_bwd_split"](B, U, U, NC, H, max(lens), DQK, DV, causal, 32, 32,
                                        threads=128, num_stages=1, groups=g)
        args = [q, k, v, do, lse.astype(np.float32), delta.astype(np.float32), cu, cu,
                np.zeros((U, H, DQK), np.float32), np.zeros((g, U, HK, DQK), np.float16),
                np.zeros((g, U, HK, DV), np.float16)]
        checks.append(Check(kern, args, {("arg", 8): dq, ("arg", 9): dk, ("arg", 10): dv},
                            compare=dq_and_slots))
    return checks


# ----------------------------------------------------- block_causal_attention backward


def masked_attn_grads(q, k, v, do, allowed, scale):
    """float64 attention of (S, D) q/k/v/dO under a boolean (S, S) mask: O, log2 LSE, Delta,
    dQ, dK, dV (softmax(scale q k^T) v)."""
    q, k, v, do = (x.astype(f64) for x in (q, k, v, do))
    s = np.where(allowed, q @ k.T * scale, -np.inf)
    mx = s.max(-1, keepdims=True)
    e = np.exp(s - mx)
    den = e.sum(-1, keepdims=True)
    p = e / den
    o = p @ v
    delta = (o * do).sum(-1)
    ds = p * (do @ v.T - delta[:, None]) * scale
    return o, (np.log(den[:, 0]) + mx[:, 0]) / LOG2, delta, ds @ k, ds.T @ q, p.T @ do


def block_causal_grads(q, k, v, do, d, scale):
    """masked_attn_grads per batch and head of (B, S, H, D) tensors under the dLLM
    block-causal mask: lse/delta (B, H, S), the rest (B, S, H, D)."""
    from upstream_cases_held import block_causal_mask
    B, S, H, _ = q.shape
    mask = block_causal_mask(S, d)
    o, dq, dk, dv = (np.zeros(x.shape) for x in (q, q, k, v))
    lse, delta = np.zeros((B, H, S)), np.zeros((B, H, S))
    for b in range(B):
        for h in range(H):
            r = masked_attn_grads(q[b, :, h], k[b, :, h], v[b, :, h], do[b, :, h], mask, scale)
            o[b, :, h], lse[b, h], delta[b, h], dq[b, :, h], dk[b, :, h], dv[b, :, h] = r
    return o, lse, delta, dq, dk, dv


@case("tl/block_causal_attention/bwd_dq_dkv", TL,
      "examples/block_causal_attention/block_causal_attention.py",
      "dLLM block-causal backward: query-parallel dQ over the forward's sparse schedule and "
      "key-parallel dK/dV over its reverse (run-time T.Pipelined extents, tile masks)")
def _(m, rng):
    B, S, H, D, d = 1, 256, 2, 64, 16
    scale = D ** -0.5
    q, k, v, do = (rn(rng, (B, S, H, D), "float16") for _ in range(4))
    _o, lse, delta, dq, dk, dv = block_causal_grads(q, k, v, do, d, scale)
    ins = [q, k, v, do, lse.astype(np.float32), delta.astype(np.float32)]
    dq_k = m["_bwd_dq_template"](B, H, S, D, d, scale, dtype="float16")
    dkv_k = m["_bwd_dkv_template"](B, H, S, D, d, scale, dtype="float16")
    return [Check(dq_k, ins + [np.zeros_like(q)], {("arg", 6): dq}, "float16", S),
            Check(dkv_k, ins + [np.zeros_like(k), np.zeros_like(v)],
                  {("arg", 6): dk, ("arg", 7): dv}, "float16", S)]


@case("tl/block_causal_attention/bwd_varlen", TL,
      "examples/block_causal_attention/block_causal_attention_varlen.py",
      "varlen dLLM block-causal backward: preprocess over the packed tokens (T.dynamic), dQ and "
      "dK/dV per sequence of cu_seqlens with the scalar max_seqlen")
def _(m, rng):
    lens, H, D, d = (128, 256), 2, 64, 16
    scale = D ** -0.5
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    U = int(cu[-1])
    q, k, v, do = (rn(rng, (U, H, D), "float16") for _ in range(4))
    o = np.zeros((U, H, D))
    lse, delta = np.zeros((H, U)), np.zeros((H, U))
    dq, dk, dv = np.zeros((U, H, D)), np.zeros((U, H, D)), np.zeros((U, H, D))
    for b in range(len(lens)):
        r = slice(cu[b], cu[b + 1])
        t = lambda x: x[r][None]  # noqa: E731  (L, H, D) -> (1, L, H, D)
        res = block_causal_grads(t(q), t(k), t(v), t(do), d, scale)
        o[r], lse[:, r], delta[:, r], dq[r], dk[r], dv[r] = (
            res[0][0], res[1][0], res[2][0], res[3][0], res[4][0], res[5][0])
    o16 = o.astype(np.float16)
    pre = (o16.astype(f64) * do.astype(f64)).sum(-1).T
    ins = [q, k, v, do, cu, max(lens), lse.astype(np.float32), delta.astype(np.float32)]
    B = len(lens)
    return [Check(m["_bwd_preprocess_varlen_template"](H, D, dtype="float16"),
                  [o16, do, np.zeros((H, U), np.float32)], {("arg", 2): pre}, "float32", D,
                  tol=(1e-3, 1e-3)),
            Check(m["_bwd_dq_varlen_template"](B, H, D, d, scale, dtype="float16"),
                  ins + [np.zeros_like(q)], {("arg", 8): dq}, "float16", max(lens)),
            Check(m["_bwd_dkv_varlen_template"](B, H, D, d, scale, dtype="float16"),
                  ins + [np.zeros_like(k), np.zeros_like(v)],
                  {("arg", 8): dk, ("arg", 9): dv}, "float16", max(lens))]


# ------------------------------------------------------------------ deepseek_v4/act_quant


@case("tl/deepseek_v4/act_quant_fp4", TL, "examples/deepseek_v4/act_quant.py",
      "eager fp4 (e2m1) quantisation in groups of 32 columns: absmax, power-of-two scales by "
      "IEEE bit tricks, clamp to +-6, cast to float4_e2m1fn; T.dynamic M with a row tail")
def _(m, rng):
    import ml_dtypes
    checks = []
    for M, N in ((64, 128), (40, 96)):
        x = bf16(rn(rng, (M, N), scale=3.0))
        g = x.astype(f64).reshape(M, N // 32, 32)
        amax = np.maximum(np.abs(g).max(-1), 6 * 2.0 ** -126)
        s = 2.0 ** np.ceil(np.log2((amax.astype(np.float32) * np.float32(1 / 6.0)).astype(f64)))
        q = np.clip(g / s[..., None], -6, 6).reshape(M, N)
        want_q = q.astype(ml_dtypes.float4_e2m1fn).astype(f64)
        checks.append(Check(with_kwargs(m["fp4_quant_kernel"], block_size=32), [x],
                            {0: want_q, 1: s}, tol=(0, 0)))
    return checks


# ------------------------------------------------------------------------------- gemv


@case("tl/gemv/splitk_vectorized_tvm", TL, "examples/gemv/example_gemv.py",
      "split-K GEMV whose cross-thread sum is TVM's T.tvm_thread_allreduce under "
      "T.attr(T.comm_reducer(...), 'reduce_scope', ...); and the same kernel under @autotune "
      "(get_autotuned_kernel) with its configuration given")
def _(m, rng):
    N, K = 64, 256
    x, a = rn(rng, (K,), "float16"), rn(rng, (N, K), "float16")
    want = a.astype(f64) @ x
    return [Check(m["splitk_gemv_vectorized_tvm"].compile(N=N, K=K, BLOCK_N=2, reduce_threads=32),
                  [x, a], {0: want}, "float16", K),
            Check(m["get_autotuned_kernel"].compile(N=N, K=K, BLOCK_N=4, reduce_threads=8),
                  [x, a], {0: want}, "float16", K)]


# --------------------------------------------------------------------- gemm autotuners


def two_configs(*_a, **_k):
    """The host's choice of configurations (the examples' grids are hundreds long)."""
    return [dict(block_M=64, block_N=64, block_K=32, num_stages=2, thread_num=128,
                 enable_rasteration=False),
            dict(block_M=128, block_N=64, block_K=64, num_stages=1, thread_num=128,
                 enable_rasteration=True)]


def ab_bf16(rng, M, N, K):
    a, b = bf16(rn(rng, (M, K))), bf16(rn(rng, (N, K)))
    return a, b, a.astype(f64) @ b.astype(f64).T


@case("tl/gemm/autotune_get_best_config", TL, "examples/gemm/example_gemm_autotune.py",
      "AutoTuner.from_kernel(kernel=<factory of a T.prim_func>, configs=...)"
      ".set_compile_args(...).set_profile_args(ref_prog=...).run(): the best kernel")
def _(m, rng):
    M, N, K = 128, 128, 128
    m["get_configs"] = two_configs
    a, b, want = ab_bf16(rng, M, N, K)
    return [Check(m["get_best_config"](M, N, K).kernel, [a, b], {0: want}, "bfloat16", K)]


@case("tl/gemm/advanced_autotune_get_best_config", TL,
      "examples/gemm/example_gemm_advanced_autotune.py",
      "_build_autotuner's AutoTuner (skip_check, cache_input_tensors, topk) run with "
      "timeout / grouped compile options: the best kernel")
def _(m, rng):
    M, N, K = 128, 128, 128
    m["get_configs"] = two_configs
    a, b, want = ab_bf16(rng, M, N, K)
    return [Check(m["get_best_config"](M, N, K).kernel, [a, b], {0: want}, "bfloat16", K)]


@case("tl/gemm/autotune_early_stop_api", TL, "examples/gemm/example_gemm_autotune_early_stop.py",
      "make_kernel(): a T.prim_func factory reading module-level M, N, K, compiled directly "
      "and through AutoTuner.from_kernel(...).run(early_stop=...)")
def _(m, rng):
    import tilelang_mini as tilelang
    from tilelang_mini.autotuner import AutoTuner
    M = N = K = 128
    m["M"], m["N"], m["K"] = M, N, K
    a, b = rn(rng, (M, K), "float16"), rn(rng, (N, K), "float16")
    want = a.astype(f64) @ b.astype(f64).T
    factory = m["make_kernel"]()
    cfgs = [dict(block_M=64, block_N=64, block_K=32, num_stages=2, thread_num=128),
            dict(block_M=128, block_N=128, block_K=32, num_stages=1, thread_num=128)]
    direct = tilelang.compile(factory(**cfgs[0]), out_idx=[-1])
    tuned = AutoTuner.from_kernel(kernel=factory, configs=cfgs).set_compile_args(
        out_idx=[-1]).run(warmup=1, rep=2, early_stop=True).kernel
    return [Check(direct, [a, b], {0: want}, "float16", K),
            Check(tuned, [a, b], {0: want}, "float16", K)]


# ------------------------------------------------------- GPU-only / multi-device kernels


@case("tl/gemm_tcgen05/gemm_tcgen5mma_ws_persistent_2cta", TL,
      "examples/gemm_tcgen05/gemm_tcgen5mma_ws_persistent.py",
      "persistent warp-specialised tcgen5 GEMM over 2-CTA clusters (GPU-only: located "
      "expected)")
def _(m, rng):
    import ml_dtypes
    a = rn(rng, (256, 128)).astype(ml_dtypes.bfloat16)
    b = rn(rng, (128, 256)).astype(ml_dtypes.bfloat16)
    # the kernel's asserts: K % (2 * block_K) == 0, N / block_N a multiple of 2 * group_size
    return [Check(m["gemm_persistent_2cta"], [a, b, 128, 128, 64, 64, "bfloat16", "bfloat16",
                                             "float32", 2, 1, True],
                  {0: a.astype(f64) @ b.astype(f64)}, "bfloat16", 128)]


@case("tl/dequantize_gemm/fine_grained_ladder", TL,
      "examples/dequantize_gemm/example_dequant_gemm_fine_grained.py",
      "fp16 x int4 GEMM through the CUDA ladder-transform tensor-core emitter and bitblas's "
      "lop3 decoder (GPU-only: located expected)")
def _(m, rng):
    M, N, K = 256, 256, 256
    a = rn(rng, (M, K), "float16")
    q = rng.integers(0, 16, (N, K)).astype(np.uint8)
    packed = (q[:, 0::2] | (q[:, 1::2] << 4)).view(np.int8)
    # the host packs B in the ladder layout (bitblas.ops.LadderPermutate, then LOP3Permutate);
    # the kernel is GPU-only, so its factory's own error is what this case checks
    kern = m["tl_matmul_with_ladder_weight_only_transform_block_reduce_int4"](
        M, N, K, "float16", "float16", "float16", 3)
    return [Check(kern, [a, packed.reshape(N // 16, K // 16, 16, 8)],
                  {0: a.astype(f64) @ q.astype(f64).T}, "float16", K)]


@case("asc/dispatch_combine/moe_combine", A, "examples/dispatch_combine/dispatch_combine_shmem.py",
      "MoE all-to-all combine: expert outputs put back to their source rank's window "
      "(T.shmem_ub_put_nbi), status polling, a weighted sum of each token's K rows; one rank "
      "of one (multi-device: located expected)")
def _(m, rng):
    import ml_dtypes
    Bs, H, K, experts, aiv = 8, 128, 2, 4, 2
    ids = np.stack([rng.permutation(experts)[:K] for _ in range(Bs)])
    # rows in expert order, each with its triplet (rank, token, k) as dispatch produces them
    rows = sorted(((ids[b, j], b, j) for b in range(Bs) for j in range(K)))
    assist = np.array([(0, b, j) for _e, b, j in rows], np.int32)
    x = rn(rng, (len(rows), H)).astype(ml_dtypes.bfloat16)
    counts = np.bincount(ids.reshape(-1), minlength=experts).astype(np.int32)
    scales = rn(rng, (Bs, K))
    want = np.zeros((Bs, H))
    for i, (_e, b, j) in enumerate(rows):
        want[b] += scales[b, j] * x[i].astype(f64)
    kern = m["moe_combine_kernel"](Bs, len(rows), H, K, 1, experts, 0, aiv)
    win = [np.zeros((Bs * K, H), ml_dtypes.bfloat16), np.zeros((Bs * K, 8), np.float32)]
    return [Check(kern, [x, assist, counts, scales] + win, {0: want}, "bfloat16", K)]


# ------------------------------------------- tilelang-ascend opt_gdn solve_tril, blocked


@case("asc/opt_gdn/solve_tril_blocked", A,
      "examples/linear_attention_and_rnn/opt_gdn/opt_gdn_solve_tril.py",
      "(I + A)^-1 for chunks of 64 and 128 (blocked: gemms of the diagonal blocks' inverses); "
      "asc/opt_gdn/solve_tril stops at its chunk-32 kernel's race")
def _(m, rng):
    from upstream_cases_new3 import solve_tril_checks
    return (solve_tril_checks(m, rng, lambda B, H, L, C: m["solve_tril_128_ker"](B, H, L), 128)
            + solve_tril_checks(m, rng, lambda B, H, L, C: m["solve_tril_64_ker"](B, H, L), 64))
