"""Sweep cases: shape variants ("<case>@shapes") of passing cases that had none (session 12):
GEMMs of both dialects, elementwise and reduction kernels, norms, attention and top-k, at other
sizes than the original cases' (tails where the kernel handles them, odd sizes, more blocks
than the 24 cores, batch > 1, the other dtypes an example parametrises). References are written
as the original cases' (their helpers imported)."""
import numpy as np

from upstream_sweep import Check, case, rn
from upstream_cases_ascend import A, gemm_case
from upstream_cases_new import TL, mm

f64 = np.float64


def fp8(rng, shape, kind="e4m3"):
    import ml_dtypes
    dt = ml_dtypes.float8_e4m3fn if kind == "e4m3" else ml_dtypes.float8_e5m2
    return rn(rng, shape).astype(dt)


# ---------------------------------------------------------------- GEMMs (tilelang-ascend)

@case("asc/autotune/gemm_autotune@shapes", A, "examples/autotune/example_gemm_autotune.py",
      "tuned over its three configs at M, N, K = 512, 768, 384 (the module globals its "
      "supply_prog reads, host code)")
def _(m, rng):
    M, N, K = 512, 768, 384
    m.update(M=M, N=N, K=K)
    a, b = rn(rng, (M, K), "float16"), rn(rng, (K, N), "float16")
    return [Check(m["matmul"](M, N, K), [a, b], {0: mm(a, b)}, "float16", K)]


@case("asc/gemm_aot/example_gemm@shapes", A, "examples/gemm_aot/example_gemm.py",
      "the script's 128x256x64 blocks at 1024 x 1024 x 512 (32 blocks on 24 cores)")
def _(m, rng):
    import tilelang_mini
    a, b = rn(rng, (1024, 512), "float16"), rn(rng, (512, 1024), "float16")
    k = tilelang_mini.compile(m["matmul"](1024, 1024, 512, 128, 256, 64), out_idx=[-1])
    return [Check(k, [a, b], {0: mm(a, b)}, "float16", 512)]


for _name, _path in [("asc/simple_fusion/matmul_add", "examples/simple_fusion/matmul_add.py"),
                     ("asc/simple_fusion/matmul_add_infer_scope",
                      "examples/simple_fusion/matmul_add_infer_scope.py"),
                     ("asc/pipeline/matmul_add_pipeline", "examples/pipeline/matmul_add_pipeline.py")]:
    def _matmul_add(m, rng):
        """The scripts' 128x256x64 blocks at 1024 x 1024 x 256 (32 blocks) and 64x128x32
        blocks at 192 x 384 x 96 (3 K steps)."""
        checks = []
        for M, N, K, bm, bn, bk in ((1024, 1024, 256, 128, 256, 64), (192, 384, 96, 64, 128, 32)):
            a, b, d = (rn(rng, s, "float16") for s in ((M, K), (K, N), (M, N)))
            checks.append(Check(m["matmul_add"](M, N, K, bm, bn, bk), [a, b, d],
                                {0: mm(a, b) + d}, "float16", K))
        return checks
    case(f"{_name}@shapes", A, _path, "the script's 128x256x64 blocks at 1024 x 1024 x 256 "
         "(32 blocks on 24 cores); 64x128x32 blocks at 192 x 384 x 96")(_matmul_add)


@case("asc/pipeline/gemm_v0_pipeline@shapes", A, "examples/pipeline/gemm_v0_pipeline.py",
      "the script's 128x256x64 blocks at 1024 x 768 x 320 (24 blocks, 5 K steps), C the output "
      "as in the original case")
def _(m, rng):
    import tilelang_mini
    chk = gemm_case(m["matmul"], 1024, 768, 320, 128, 256, 64)
    chk.fn = tilelang_mini.compile(chk.fn.prim_func, out_idx=[-1])
    return [chk]


@case("asc/gemm/fp8_pto@shapes", A, "examples/gemm/example_gemm_fp8_pto.py",
      "e4m3 at 512 x 384 x 256 and e5m2 at 256 x 384 x 512 (the script's --fp8 choices; jit "
      "memoises by the arguments, not the module global), 128x128x64 blocks", chip="ascend950")
def _(m, rng):
    checks = []
    for kind, (M, N, K) in (("e4m3", (512, 384, 256)), ("e5m2", (256, 384, 512))):
        m["input_dtype_str"] = f"{kind}_float8"  # module-level host code (argparse)
        a, b = fp8(rng, (M, K), kind), fp8(rng, (K, N), kind)
        checks.append(Check(m["fp8_matmul"](M, N, K, 128, 128, 64), [a, b], {0: mm(a, b)},
                            "float32", K))
    return checks


# ---------------------------------------------------------------- GEMMs (TileLang)

@case("tl/gemm/autotune_matmul@shapes", TL, "examples/gemm/example_gemm_autotune.py",
      "a fixed config at M, N, K = 200, 328, 96 (tails in M and N), rasterisation off and on")
def _(m, rng):
    M, N, K = 200, 328, 96
    a, b = rn(rng, (M, K), "float16"), rn(rng, (N, K), "float16")
    return [Check(m["matmul"](M, N, K, 64, 64, 32, 2, 128, ras), [a, b],
                  {0: a.astype(f64) @ b.astype(f64).T}, "float16", K) for ras in (False, True)]


@case("tl/quickstart@shapes", TL, "examples/quickstart.py",
      "gemm + relu at 1024^3 (the script) and at 100 x 72 x 200 (tails everywhere)")
def _(m, rng):
    checks = []
    for M, N, K in ((1024, 1024, 1024), (100, 72, 200)):
        a, b = rn(rng, (M, K), "float16"), rn(rng, (K, N), "float16")
        k = m["matmul"].compile(M=M, N=N, K=K, block_M=128, block_N=128, block_K=32)
        checks.append(Check(k, [a, b], {0: np.maximum(mm(a, b), 0)}, "float16", K))
    return checks


@case("tl/gemm_tcgen05/gemm_mma@shapes", TL, "examples/gemm_tcgen05/gemm_mma.py",
      "eager GEMM (B as (N, K)) at 320 x 192 x 160 and at odd 130 x 70 x 96")
def _(m, rng):
    checks = []
    for M, N, K in ((320, 192, 160), (130, 70, 96)):
        a, b = rn(rng, (M, K), "float16"), rn(rng, (N, K), "float16")
        checks.append(Check(m["matmul"], [a, b, 64, 64, 32], {0: a.astype(f64) @ b.astype(f64).T},
                            "float16", K))
    return checks


@case("tl/gemm_fp8@shapes", TL, "examples/gemm_fp8/example_tilelang_gemm_fp8.py",
      "e4m3 and e5m2 (the script's two dtypes) at 256 x 192 x 512, B as (N, K)",
      chip="ascend950")
def _(m, rng):
    M, N, K = 256, 192, 512
    checks = []
    for kind in ("e4m3", "e5m2"):
        a, b = fp8(rng, (M, K), kind), fp8(rng, (N, K), kind)
        want = a.astype(f64) @ b.astype(f64).T

        def cmp(got, want, rtol=0.07 if kind == "e4m3" else 0.13):
            # the output is fp8 (C in the input dtype): half an ulp is 2^-4 / 2^-3 relative
            g = got.astype(np.float32).astype(f64)
            assert np.allclose(g, want, rtol=rtol, atol=0.05 * np.sqrt(K)), "fp8 gemm differs"
        checks.append(Check(m["matmul"], [a, b, 64, 64, 64, f"float8_{kind}" + (
            "fn" if kind == "e4m3" else "")], {0: want}, compare=cmp))
    return checks


@case("tl/gemm_fp8/gemm_amd@shapes", TL, "examples/gemm_fp8/example_tilelang_gemm_amd.py",
      "both gemm types at 512 x 256 x 512 with 128x128x64 blocks (16 blocks)", chip="ascend950")
def _(m, rng):
    from upstream_cases_new8 import fp8_cmp, mm_nt
    M, N, K = 512, 256, 512
    a, b = fp8(rng, (M, K)), fp8(rng, (N, K))
    return [Check(m["fp8_matmul"](M, N, K, 128, 128, 64, 2, 256, kp, gt), [a, b],
                  {0: mm_nt(a, b)}, compare=fp8_cmp(K)) for gt, kp in (("ss", 1), ("rs", 2))]


@case("tl/gemm_int4/gemm_int4@shapes", TL, "examples/gemm_int4/example_tilelang_gemm_int4.py",
      "int4 x int4 -> int32 at 256 x 256 x 512 (128x128x64 blocks) and 192 x 320 x 256 (64x64x128)")
def _(m, rng):
    import tilelang_mini
    from upstream_cases_held import int_operands
    from upstream_cases_new4 import pack_int4
    checks = []
    for M, N, K, bm, bn, bk in ((256, 256, 512, 128, 128, 64), (192, 320, 256, 64, 64, 128)):
        a, b = int_operands(rng, M, N, K, -8, 8)
        pack = lambda t: pack_int4(t).view(np.int8)  # noqa: E731
        kern = tilelang_mini.compile(m["matmul_nt_int4"](M, N, K, bm, bn, bk), out_idx=-1)
        checks.append(Check(kern, [pack(a), pack(b)], {0: a.astype(f64) @ b.astype(f64).T},
                            "int32", tol=(0, 0)))
    return checks


# ---------------------------------------------------------------- elementwise, reductions, scans

@case("asc/elementwise/add_pipeline@shapes", A, "examples/elementwise/elementwise_add_pipeline.py",
      "the script's 128x128 blocks, sub_M 32, at 1024 x 768 (48 blocks on 24 cores) and 64x256 "
      "blocks, sub_M 16, at 192 x 512")
def _(m, rng):
    checks = []
    for M, N, bm, bn, sub in ((1024, 768, 128, 128, 32), (192, 512, 64, 256, 16)):
        a, b = rn(rng, (M, N)), rn(rng, (M, N))
        checks.append(Check(m["vec_add_pipeline"](M, N, bm, bn, sub), [a, b],
                            {0: a.astype(f64) + b}))
    return checks


@case("asc/elementwise/setvalue@shapes", A, "examples/elementwise/setvalue_example.py",
      "the first value of each vector core's half block read back: 8192 int32 in blocks of 512 "
      "(16 blocks) and of 128 (64 blocks on 24 cores)")
def _(m, rng):
    a = rng.integers(-2 ** 31, 2 ** 31 - 1, 8192).astype(np.int32)
    return [Check(m["getvalue"](1, 8192, 1, bn), [a], {0: a[::bn // 2].astype(f64)}, "int32",
                  tol=(0, 0)) for bn in (512, 128)]


@case("asc/pad/broadcast_pipeline@shapes", A, "examples/pad/example_broadcast_pipeline.py",
      "a row broadcast to 1024 x 512 in 64-row blocks, sub_M 16 (16 blocks), and to 96 x 256")
def _(m, rng):
    checks = []
    for M, N, bm, sub in ((1024, 512, 64, 16), (96, 256, 32, 16)):
        a = rn(rng, (1, N))
        checks.append(Check(m["broadcast_pipeline"](M, N, bm, sub), [a],
                            {0: np.repeat(a.astype(f64), M, 0)}))
    return checks


@case("asc/reduce/reduce_min_pipeline@shapes", A, "examples/reduce/example_reduce_min_pipeline.py",
      "row minima of 1024 x 256 in 32-row blocks of the whole width, sub_M 16 (32 blocks)")
def _(m, rng):
    M, N = 1024, 256
    a = rn(rng, (M, N))
    return [Check(m["reduce_min_pipeline"](M, N, 32, N, 16), [a], {0: a.astype(f64).min(1)})]


@case("asc/random_1d@shapes", A, "examples/random_1d/random_1d.py",
      "the script's M = 1024 and a ragged M = 1000 (its output padded to whole 256-blocks, the "
      "host keeping the first M), other seeds")
def _(m, rng):
    a, c = 1103515245, 12345
    checks = []
    for M, seed in ((1024, 42), (1000, 7)):
        pad = -(-M // 256) * 256  # TOTAL_BLOCK_SIZE = block 128 x 2 vector cores
        state = seed + np.arange(pad, dtype=np.int64)
        for _ in range(3):
            state = (state * a + c) % 2 ** 32
        want = np.where(state >= 2 ** 31, state - 2 ** 32, state).astype(f64)
        checks.append(Check(m["random_1d"](M, 128, seed, a, c), [], {0: want}, "int32",
                            tol=(0, 0)))
    return checks


@case("asc/cumsum_kda/chunk_local_cumsum@shapes", A, "examples/cumsum_kda/example_cumsum_kda.py",
      "batch 2, 8 heads, 256 steps in chunks of 64, forward and reverse; and the vector kernel "
      "(2 x 4 heads x 128 steps x 96 columns, chunks of 32, 32-column blocks)")
def _(m, rng):
    from upstream_cases_held import chunk_cumsums
    s = rn(rng, (2, 8, 256))
    fwd, rev = chunk_cumsums(s, 64)
    v = rn(rng, (2, 4, 128, 96))
    vf, vr = (np.swapaxes(x, -1, -2) for x in chunk_cumsums(np.swapaxes(v, -1, -2), 32))
    kern, vec = m["chunk_local_cumsum_scalar_kernel"], m["chunk_local_cumsum_vector_kernel"]
    tol = (1e-5, 1e-5)
    return [Check(kern(2, 8, 256, 64), [s], {0: fwd}, tol=tol),
            Check(kern(2, 8, 256, 64, reverse=True), [s], {0: rev}, tol=tol),
            Check(vec(2, 4, 128, 96, 32, 32), [v], {0: vf}, tol=tol),
            Check(vec(2, 4, 128, 96, 32, 32, reverse=True), [v], {0: vr}, tol=tol)]


@case("asc/cumsum_kda/chunk_global_cumsum@shapes", A, "examples/cumsum_kda/example_cumsum_kda.py",
      "batch 2, 6 heads, 512 steps carried over chunks of 64; and the vector kernel (2 x 2 heads "
      "x 128 steps x 64 columns)")
def _(m, rng):
    s = rn(rng, (2, 6, 512))
    v = rn(rng, (2, 2, 128, 64))
    tol = (1e-4, 1e-4)
    return [Check(m["chunk_global_cumsum_scalar_kernel"](2, 6, 512, 64), [s],
                  {0: np.cumsum(s.astype(f64), -1)}, tol=tol),
            Check(m["chunk_global_cumsum_vector_kernel"](2, 2, 128, 64, 32, 32), [v],
                  {0: np.cumsum(v.astype(f64), -2)}, tol=tol)]


@case("asc/group_norm@shapes", A, "examples/group_norm/example_group_norm.py",
      "the serial kernel at batch 3, 64 channels in 8 groups, 256 positions in 4 tiles of 64 "
      "(float32 and float16); the cpipeline kernel (one S tile, 32 channels a group in tiles of 16)")
def _(m, rng):
    def gn(x, g, b, G):
        N, C, S = x.shape
        xf = x.astype(f64).reshape(N, G, -1)
        y = (xf - xf.mean(-1, keepdims=True)) / np.sqrt(xf.var(-1, keepdims=True) + 1e-5)
        return y.reshape(N, C, S) * g.astype(f64)[None, :, None] + b.astype(f64)[None, :, None]
    checks = []
    for dt, tol in (("float32", (1e-4, 1e-4)), ("float16", (1e-2, 1e-2))):
        N, C, S, G = 3, 64, 256, 8
        cpg = C // G
        x, g, b = rn(rng, (N, C, S), dt), rn(rng, (C,), dt), rn(rng, (C,), dt)
        k = m["group_norm_kernel_serial"](N, G, 16, S, 64, 4, 1e-5, cpg, S, dt)
        checks.append(Check(k, [x.reshape(N, G, cpg, S), g.reshape(G, cpg), b.reshape(G, cpg)],
                            {0: gn(x, g, b, G).reshape(N, G, cpg, S)}, dt, tol=tol))
    N, C, S, G = 2, 64, 64, 2
    cpg = C // G
    x, g, b = rn(rng, (N, C, S)), rn(rng, (C,)), rn(rng, (C,))
    k = m["group_norm_kernel_cpipeline"](N, G, cpg, S, 64, 1e-5, cpg, S, "float32")
    checks.append(Check(k, [x.reshape(N, G, cpg, S), g.reshape(G, cpg), b.reshape(G, cpg)],
                        {0: gn(x, g, b, G).reshape(N, G, cpg, S)}, tol=(1e-4, 1e-4)))
    return checks


@case("asc/linear_attention_normalize@shapes", A,
      "examples/linear_attention_and_rnn/linear_attention_normalize.py",
      "K^T V with column sums at batch 2, 4 heads, 256 steps, dim 64 in 64 x 32 blocks; and the "
      "second kernel (Q (K^T V) normalised by Q . ksum) on them")
def _(m, rng):
    B, H, L, D = 2, 4, 256, 64
    k, v = rn(rng, (B, H, L, D), "float16", 0.5), rn(rng, (B, H, L, D), "float16", 0.5)
    kf, vf = k.astype(f64), v.astype(f64)
    kv = np.concatenate([np.einsum("bhld,bhle->bhde", kf, vf), kf.sum(2)[:, :, None, :]], 2)
    # the second kernel on positive Q and K sums (denominators far from 0), Acc in float16
    q = rng.uniform(0.1, 1.0, (B, H, L, D)).astype(np.float16)
    acc = np.concatenate([kv[:, :, :D], np.abs(kv[:, :, D:]) + 1.0], 2).astype(np.float16)
    qf, af = q.astype(f64), acc.astype(f64)
    o = np.einsum("bhld,bhde->bhle", qf, af[:, :, :D]) / \
        np.einsum("bhld,bhd->bhl", qf, af[:, :, D])[..., None]
    return [Check(m["linear_attention_ker1"](B, H, L, D, 64, 32), [k, v], {0: kv}, "float16", L),
            Check(m["linear_attention_ker2"](B, H, L, D, 64, 32), [q, acc], {0: o}, "float16", D)]


# ---------------------------------------------------------------- attention, top-k (TileLang)

AMD = "examples/amd/"


@case("tl/amd/flash_attn_fwd@shapes", TL, AMD + "example_amd_flash_attn_fwd.py",
      "batch 2, 8 heads in 2 KV groups, 512 tokens, dim 128; 5 persistent q workers over 8 "
      "q blocks (uneven `while` trips); causal and not")
def _(m, rng):
    from upstream_cases_new8 import amd_fwd_checks
    return amd_fwd_checks(m, rng, 2, 8, 512, 128, 4, 5)


@case("tl/amd/flash_attn_bwd@shapes", TL, AMD + "example_amd_flash_attn_bwd.py",
      "batch 2, 4 query heads on one KV head (MQA), 256 tokens, dim 64: fwd, preprocess, bwd "
      "(dK/dV atomics from 4 heads), postprocess")
def _(m, rng):
    from upstream_cases_new8 import amd_bwd_checks
    return amd_bwd_checks(m, rng, 2, 4, 256, 64, 4)


@case("tl/block_causal_attention/fwd_varlen@shapes", TL,
      "examples/block_causal_attention/block_causal_attention_varlen.py",
      "three packed sequences of 128, 384 and 256 tokens (noisy half then clean half, whole "
      "64-blocks each, as the kernel requires), 2 heads, dim 128, dLLM blocks of 32")
def _(m, rng):
    from upstream_cases_new2 import block_causal_varlen_check
    return block_causal_varlen_check(m, rng, [128, 384, 256], 2, 128, 32)


@case("tl/attention_sink/gqa_sink_fwd_varlen@shapes", TL,
      "examples/attention_sink/example_gqa_sink_fwd_varlen.py",
      "three sequences (q 100 / 33 / 128 on k 130 / 33 / 256), 8 heads in 2 KV groups, "
      "dim 128, causal, windows none and 128 (a multiple of block_N, as it asserts)")
def _(m, rng):
    from upstream_cases_new import varlen_inputs
    from upstream_cases_new2 import sink_varlen_ref
    lq, lk, H, HK, D = [100, 33, 128], [130, 33, 256], 8, 2, 128
    checks = []
    for window in (None, 128):
        q, k, v, cu_q, cu_k = varlen_inputs(rng, lq, lk, H, HK, D)
        sinks = rn(rng, (H,), "float16")
        kern = m["flashattn_sink"](3, H // HK, int(cu_q[-1]), int(cu_k[-1]), H, D, True,
                                   window_size=window)
        checks.append(Check(kern, [q, k, v, cu_q, cu_k, max(lq), sinks],
                            {0: sink_varlen_ref(q, k, v, cu_q, cu_k, sinks, H // HK, True,
                                                window)}, "float16", max(lk)))
    return checks


@case("tl/deepseek_mla/mla_decode_kv_fp8@shapes", TL,
      "examples/deepseek_mla/experimental/example_mla_decode_kv_fp8.py",
      "batch 2, 32 heads (two head blocks), 512 cached tokens, dims 128 + 64")
def _(m, rng):
    from upstream_cases_new8 import mla_kv_fp8_check
    return mla_kv_fp8_check(m, rng, 2, 32, 512, 128, 64)


@case("tl/deepseek_nsa/nsa_decode@shapes", TL, "examples/deepseek_nsa/example_tilelang_nsa_decode.py",
      "batch 3, 4 KV heads x 16 query heads, dim 64, one selected block of 64 out of 256")
def _(m, rng):
    from upstream_cases_new4 import nsa_decode_check
    return nsa_decode_check(m, rng, 3, 256, 4, 64, 64, 1, 64)


@case("tl/dsa_sparse_finetune/indexer_topk_reducesum@shapes", TL,
      "examples/dsa_sparse_finetune/indexer_topk_reducesum.py",
      "three sequences (100, 33, 64 tokens), 16 heads of dim 64, top-64")
def _(m, rng):
    from upstream_cases_new7 import indexer_topk_checks
    return indexer_topk_checks(m, rng, (100, 33, 64), 16, 64, 64)


# ---------------------------------------------------------------- tilelang-ascend: attention, MoE, norms

@case("asc/sparse_flash_attention/sparse_flash_attn_mask@shapes", A,
      "examples/sparse_flash_attention/example_sparse_flash_attn_mask.py",
      "40 queries on 256 keys, 16 heads, dim 128 + tail 64, top-128 (two index blocks), "
      "bfloat16 (its default) and float16")
def _(m, rng):
    from upstream_cases_new4 import sfa_mask_check
    return [c for dt in ("bfloat16", "float16")
            for c in sfa_mask_check(m, rng, 40, 256, 16, 128, 64, 128, dt)]


@case("asc/moe/token_unpermute@shapes", A, "examples/moe_token_permute/moe_token_unpermute.py",
      "100 tokens x top-8 rows of hidden 256 on its default 24 cores (a ragged last core), "
      "float16 and bfloat16")
def _(m, rng):
    from upstream_cases_new2 import unpermute_checks
    return unpermute_checks(m, rng, 100, 8, 256, 24) + \
        unpermute_checks(m, rng, 100, 8, 256, 24, "bfloat16")


@case("asc/aclgraph/rms_rope_aclgraph@shapes", A, "examples/aclgraph/rms_rope_aclgraph.py",
      "RMSNorm and in-place rope at batch 4 x 32 heads, hidden 128, rope_dim 64 (block_M 32, "
      "its script's; 4 blocks)")
def _(m, rng):
    from upstream_cases_new4 import aclgraph_checks
    return aclgraph_checks(m, rng, 4, 32, 128, 64, 1e-6)


@case("asc/lightning_indexer/dynamic_shape@shapes", A,
      "examples/lightning_indexer/example_lightning_indexer_dynamic_shape.py",
      "batch 3, one KV head (the kernel's grid is B * N2 with cid the batch) x 8 query heads, "
      "128 queries (whole 64-blocks, as its loops need) on 256 keys, top-32 (MAX_S2 256)")
def _(m, rng):
    from upstream_cases_ascend import indexer_checks
    return indexer_checks(rng, lambda B, N2, G, S1, S2, D, K:
                          m["indexer"](N2, G, D, K, 64, 4, 64, 64, 64, MAX_S2=S2),
                          dims=(3, 1, 8, 128, 256, 64, 32))


@case("asc/dequantize_gemm/fine_grained@shapes", A,
      "examples/dequantize_gemm/example_dequant_gemm_fine_grained.py",
      "the fp16 and int8 cube GEMMs at 256 x 192 x 512 in 64x64x128 blocks (12 blocks)")
def _(m, rng):
    M, N, K = 256, 192, 512
    a, b = rn(rng, (M, K), "float16"), rn(rng, (K, N), "float16")
    ai = rng.integers(-8, 8, (M, K)).astype(np.int8)
    bi = rng.integers(0, 16, (K, N)).astype(np.int8)
    return [Check(m["fp16_gemm"](M, N, K, 64, 64, 128), [a, b], {0: mm(a, b)}, "float16", K),
            Check(m["int8_gemm"](M, N, K, 64, 64, 128), [ai, bi], {0: mm(ai, bi)}, tol=(0, 0))]


@case("tl/gemm_sp/gemm_sp@shapes", TL, "examples/gemm_sp/example_gemm_sp.py",
      "2:4 sparse GEMM at 256 x 192 x 512 in 128x64x64 blocks and at 64 x 320 x 128")
def _(m, rng):
    from tilelang_mini.testing.references import compress_2to4, semi_sparse
    m["get_e_factor"] = lambda a_dtype, e_dtype: np.dtype(e_dtype).itemsize * 2 * 4
    checks = []
    for M, N, K, bm, bn, bk in ((256, 192, 512, 128, 64, 64), (64, 320, 128, 64, 64, 64)):
        a = semi_sparse(rng, M, K, np.float16)
        vals, meta = compress_2to4(a, "int16")
        b = rn(rng, (K, N), "float16")
        kern = m["matmul_sp_fp16"](M, N, K, "float32", "int16", bm, bn, bk, 2, 128, 0, True)
        checks.append(Check(kern, [vals, meta, b], {0: mm(a, b)}, "float32", K, tol=(1e-2, 1e-2)))
    return checks


@case("asc/quant_batch_matmul/quant_batch_matmul@shapes", A,
      "examples/quant_batch_matmul/example_quant_batch_matmul.py",
      "int8 batch GEMM with per-tensor (float16 out) and per-channel (bfloat16 out) scales at "
      "batch 3, 256 x 384 x 256 (36 blocks)")
def _(m, rng):
    from upstream_cases_new3 import quant_bmm_checks
    return quant_bmm_checks(m, rng, 3, 256, 384, 256)


@case("asc/grouped_gemm/grouped_gemm_fwd_ptr@shapes", A,
      "examples/grouped_gemm/example_grouped_gemm_fwd_ptr.py",
      "five groups (1, 64, 100, 7, 130 rows) at K 256, N 192 in 64-row blocks")
def _(m, rng):
    from upstream_cases_new3 import grouped_inputs
    sizes, K, N, bm = (1, 64, 100, 7, 130), 256, 192, 64
    a, b, meta, want = grouped_inputs(rng, sizes, K, N, bm)
    kern = m["grouped_gemm_fwd_ptr"](tuple(sizes), K, N, bm, 64, 64)
    return [Check(kern, [a, b, meta], {0: want}, "float16", K)]


@case("asc/deepseek_v4/hc_split_sinkhorn@shapes", A, "examples/deepseek_v4/hc_split_sinkhorn.py",
      "37 tokens (odd, symbolic n), hc 4, 20 sinkhorn iterations; and 64 tokens with 7")
def _(m, rng):
    from upstream_cases_new3 import sinkhorn_checks
    return sinkhorn_checks(m, rng, ((37, 4, 20), (64, 4, 7)))


@case("asc/pos_embedding/rms_rope_fused_mask@shapes", A, "examples/pos_embedding/rms_rope_fused_mask.py",
      "RMSNorm + rope at batch 4 x 32 heads, head_dim 128, rope_dim 64, block_M 32")
def _(m, rng):
    from upstream_cases_new2 import rms_rope_mask_check
    return rms_rope_mask_check(m, rng, 4, 32, 128, 64, 1e-6, 32)


@case("tl/deepseek_mhc/mhc_post@shapes", TL, "examples/deepseek_mhc/example_mhc_post.py",
      "37 tokens (T.dynamic, not a multiple of the block), hc 4, hidden 512")
def _(m, rng):
    from upstream_cases_more import mhc_post_check
    return mhc_post_check(m, rng, 37, 4, 512)


# ---------------------------------------------------------------- TileLang: decode, sinks, chunked recurrences

BSA = "examples/blocksparse_attention/"


@case("tl/blocksparse_attention/sparse_gqa_decode_varlen_indice@shapes", TL,
      BSA + "example_tilelang_sparse_gqa_decode_varlen_indice.py",
      "batch 3, 32 heads on 4 KV heads, 512 cached rows (lengths 200, 300, 512), up to 6 "
      "blocks of 32 a head, dim 128")
def _(m, rng):
    from upstream_cases_new4 import indice_decode_check
    return indice_decode_check(m, rng, 3, 32, 4, 128, 32, 512, 2, 6, (200, 300, 512))


@case("tl/blocksparse_attention/sparse_gqa_decode_paged@shapes", TL,
      BSA + "example_tilelang_sparse_gqa_decode_paged.py",
      "batch 3, 32 heads on 4 KV heads, 512 rows in pages of 128 (20 pages), lengths 260 / 512 "
      "/ 300, up to 8 blocks of 32 a head")
def _(m, rng):
    from upstream_cases_new4 import paged_decode_check
    return paged_decode_check(m, rng, 3, 32, 4, 64, 32, 128, 512, 2, 8, 20, (260, 512, 300))


@case("tl/attention_sink/mha_sink_bwd_bhsd@shapes", TL,
      "examples/attention_sink/example_mha_sink_bwd_bhsd.py",
      "batch 2, 16 heads, 256 tokens, dim 64: fwd, preprocess, bwd, postprocess, dsink")
def _(m, rng):
    from upstream_cases_new4 import sink_bwd_checks
    return sink_bwd_checks(m, rng, 2, 16, 256, 64)


@case("tl/deepseek_v32/inference_fp8_index@shapes", TL, "examples/deepseek_v32/inference/kernel.py",
      "batch 2, 5 queries of 32 heads on 1024 keys, dim 128", chip="ascend950")
def _(m, rng):
    from upstream_cases_new10 import fp8_index_check
    return fp8_index_check(m, rng, 2, 5, 1024, 32, 128)


@case("tl/gdn/chunk_delta_h@shapes", TL, "examples/gdn/example_chunk_delta_h.py",
      "batch 2, 256 steps (4 chunks of 64), 3 heads, key/value dims 64 / 128")
def _(m, rng):
    from upstream_cases_new3 import delta_h_checks
    return delta_h_checks(m, rng, (2, 256, 3, 64, 128, 64))


@case("tl/kda/wy_fast@shapes", TL, "examples/kda/wy_fast.py",
      "batch 2, 192 steps (3 chunks of 64), 3 heads, dims 64 / 128")
def _(m, rng):
    from upstream_cases_new7 import kda_wy_checks
    return kda_wy_checks(m, rng, (2, 192, 3, 64, 128, 64))


@case("tl/deepseek_nsa/nsa_bwd_fwd@shapes", TL, "examples/deepseek_nsa/example_tilelang_nsa_bwd.py",
      "the NSA backward file's forward at batch 2, 128 tokens, 2 KV heads x 16, dim 64, 3 "
      "selected blocks of 32, sentinel padding")
def _(m, rng):
    from upstream_cases_new11 import nsa_problem
    from upstream_sweep import with_kwargs
    fn = with_kwargs(m["tilelang_kernel_fwd"], dim=64, is_causal=True, scale=0.125,
                     block_size=32, groups=16, selected_blocks=3)
    (q, k, v, _), idx, _, (o, lse, *_) = nsa_problem(rng, B=2, L=128, HK=2, HQ=32, D=64, S=3,
                                                     sentinel=True)
    return [Check(fn, [q, k, v, idx], {0: o}, "float16", 96),
            Check(fn, [q, k, v, idx], {1: lse}, "float32", 96, tol=(1e-3, 1e-3))]


# ---------------------------------------------------------------- fp8 GEMMs, quantisation, transforms

@case("tl/deepseek_deepgemm/deepgemm_fp8_2xAcc@shapes", TL,
      "examples/deepseek_deepgemm/example_deepgemm_fp8_2xAcc.py",
      "block-scaled fp8 GEMM at 256 x 384 x 640 (5 scale groups along K)", chip="ascend950")
def _(m, rng):
    from upstream_cases_new8 import deepgemm_check
    return deepgemm_check(m, rng, 256, 384, 640)


@case("tl/gemm_fp8/gemm_fp8_2xAcc@shapes", TL, "examples/gemm_fp8/example_tilelang_gemm_fp8_2xAcc.py",
      "two-level accumulation at 256 x 192 x 1024 (e4m3) and 192 x 128 x 448 (e5m2, a tail "
      "promotion)", chip="ascend950")
def _(m, rng):
    from upstream_cases_new8 import fp8_cmp, mm_nt
    checks = []
    for dt, (M, N, K) in (("e4m3", (256, 192, 1024)), ("e5m2", (192, 128, 448))):
        a, b = fp8(rng, (M, K), dt), fp8(rng, (N, K), dt)
        name = "float8_e4m3fn" if dt == "e4m3" else "float8_e5m2"
        checks.append(Check(m["matmul"], [a, b, 64, 64, 64, name], {0: mm_nt(a, b)},
                            compare=fp8_cmp(K)))
    return checks


@case("tl/deepseek_v4/act_quant_fp8@shapes", TL, "examples/deepseek_v4/act_quant.py",
      "100 rows (T.dynamic M, a tail of the 32-row blocks) x 512 columns (4 groups)")
def _(m, rng):
    from upstream_cases_new2 import act_quant_checks
    return act_quant_checks(m, rng, 100, 512)


@case("tl/flash_attention/gqa_bwd_tma_reduce@shapes", TL,
      "examples/flash_attention/example_gqa_bwd_tma_reduce.py",
      "batch 2, 8 heads on 2 KV heads, 256 tokens, dims 64 / 64")
def _(m, rng):
    from upstream_cases_new3 import gqa_bwd_checks
    return gqa_bwd_checks(m, rng, "flashattn_bwd_split_novarlen", dims=(2, 8, 2, 256, 64, 64))


@case("asc/hadamard_transform@shapes", A, "examples/hadamard_transform/example_hadamard_transform.py",
      "8 rows of 512: the whole transform in one block, and blocks of 128 then the two "
      "cross-block pair stages")
def _(m, rng):
    from upstream_cases_ascend import hadamard_matrix as hadamard
    n, b, bs = 512, 8, 128
    x = rn(rng, (b, n))
    xf = x.astype(f64)
    out = [Check(m["hadamard_block_intra"](b, n, n, "float"), [x], {0: xf @ hadamard(n)},
                 reduce_len=n)]
    intra = (xf.reshape(b, n // bs, bs) @ hadamard(bs)).reshape(b, n)
    out.append(Check(m["hadamard_block_intra"](b, n, bs, "float"), [x], {0: intra}, reduce_len=bs))
    for stage in (7, 8):
        half = 1 << stage
        c = xf.reshape(b, n // (2 * half), 2, half)
        pair = np.stack([c[:, :, 0] + c[:, :, 1], c[:, :, 0] - c[:, :, 1]], 2).reshape(b, n)
        out.append(Check(m["hadamard_cross_block_pair"](b, n, bs, stage, "float"), [x], {0: pair}))
    return out


@case("asc/xllm/rope@shapes", A, "examples/xllm_kernels/rope.py",
      "300 tokens (ragged over the cores) on its default 48 vector cores, head_dim 128, "
      "rope_dim 64; and 7 tokens with head_dim 256, rope_dim 128")
def _(m, rng):
    from upstream_cases_new2 import xllm_rope_check
    return xllm_rope_check(m, rng, 128, 64, 300, 48) + xllm_rope_check(m, rng, 256, 128, 7, 48)


@case("asc/pos_embedding/rope_mask@shapes", A, "examples/pos_embedding/rope_mask.py",
      "batch 8 x 16 heads (block_M 16, 8 blocks), hidden 128, rope_dim 64")
def _(m, rng):
    from upstream_cases_held import rope_mask_check
    return rope_mask_check(m, rng, 8, 16, 128, 64)
