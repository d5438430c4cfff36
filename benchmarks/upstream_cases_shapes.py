"""Sweep cases: shape variants of passing cases ("<case>@shapes"). The held-out check runs the
examples with host code we do not write, so other shapes, dtypes and parameters than the other
case files' small, evenly dividing ones: each variant uses the example's own `main()` /
`__main__` defaults where they run in reasonable time here, or else larger / odd shapes the
example's kernel supports (tails not divisible by the block where the kernel handles tails,
more blocks than cores, batch > 1, the dtypes the example parametrises). The references are
the original cases' (imported)."""
import numpy as np

from upstream_sweep import Check, case, rn
from upstream_cases_ascend import A, attn_ref, gemm_case
from upstream_cases_tl import TL, attn, mla_decode_checks

f64 = np.float64


def bf16(x):
    import ml_dtypes
    return x.astype(ml_dtypes.bfloat16)


def inputs(rng, shape, dtype):
    """Random normal inputs in an example's dtype name ("float" = float32, "bfloat16")."""
    x = rn(rng, shape)
    return bf16(x) if dtype == "bfloat16" else x.astype("float32" if dtype == "float" else dtype)


def out_dtype(dtype):
    return "float32" if dtype == "float" else dtype


# ---------------------------------------------------------------- GEMMs

@case("tl/gemm/example_gemm@shapes", TL, "examples/gemm/example_gemm.py",
      "main()'s 1024^3 with 128x128x32 blocks; and M, N, K not multiples of the blocks")
def _(m, rng):
    a, b = rn(rng, (1024, 1024), "float16"), rn(rng, (1024, 1024), "float16")
    k = m["matmul"].compile(M=1024, N=1024, K=1024, block_M=128, block_N=128, block_K=32)
    a2, b2 = rn(rng, (200, 100), "float16"), rn(rng, (100, 136), "float16")
    return [Check(k, [a, b], {0: a.astype(f64) @ b}, "float16", 1024),
            Check(m["matmul"], [a2, b2, 64, 64, 32], {0: a2.astype(f64) @ b2}, "float16", 100)]


for _name, _path, _dims, _what in [
        ("asc/gemm/example_gemm", "examples/gemm/example_gemm.py",
         (1024, 1024, 1024, 128, 256, 64), "the script's 1024^3 with 128x256x64 blocks"),
        ("asc/gemm/example_gemm_transpose_l1", "examples/gemm/example_gemm_transpose_l1.py",
         (512, 256, 1024, 256, 128, 64), "the script's M, N, K = 512, 256, 1024 with 256x128x64 "
         "blocks, B transposed"),
        ("asc/developer_mode/gemm_developer", "examples/developer_mode/gemm_developer.py",
         (1024, 1024, 1024, 128, 256, 64), "the script's 1024^3 with 128x256x64 blocks")]:
    case(f"{_name}@shapes", A, _path, _what)(
        lambda m, rng, dims=_dims, tb="transpose" in _path: [gemm_case(m["matmul"], *dims,
                                                                       trans_b=tb)])


@case("asc/batch_gemm@shapes", A, "examples/batch_gemm/batch_gemm.py",
      "the script's 128x256x64 blocks, batch 4 (the script: 8 x 1024^3)")
def _(m, rng):
    Bt, M, N, K = 4, 512, 512, 256
    a, b = rn(rng, (Bt, M, K), "float16"), rn(rng, (Bt, K, N), "float16")
    return [Check(m["batch_matmul"](Bt, M, N, K, 128, 256, 64), [a, b],
                  {0: a.astype(f64) @ b.astype(f64)}, dtype="float16", reduce_len=K)]


@case("asc/gemm_splitk@shapes", A, "examples/gemm_splitk/example_tilelang_gemm_splitk.py",
      "main()'s test(128, 128, 128, 2) and test(1024, 1024, 1024, 4) (128x128x32 blocks)")
def _(m, rng):
    out = []
    for M, N, K, split in ((128, 128, 128, 2), (1024, 1024, 1024, 4)):
        a, b = rn(rng, (M, K), "float16"), rn(rng, (K, N), "float16")
        out.append(Check(m["gemm_splitk"](M, N, K, 128, 128, 32, split),
                         [a, b, np.zeros((M, N), np.float32)], {("arg", 2): a.astype(f64) @ b},
                         reduce_len=K))
    return out


@case("tl/gemm_splitk@shapes", TL, "examples/gemm_splitk/example_tilelang_gemm_splitk.py",
      "main()'s 1024^3, 128x128x32 blocks, split 4")
def _(m, rng):
    a, b = rn(rng, (1024, 1024), "float16"), rn(rng, (1024, 1024), "float16")
    c = np.zeros((1024, 1024), np.float32)
    return [Check(m["matmul"], [a, b, c, 128, 128, 32, 4], {("arg", 2): a.astype(f64) @ b},
                  reduce_len=1024)]


# ---------------------------------------------------------------- elementwise, norms, softmax

@case("tl/elementwise/add@shapes", TL, "examples/elementwise/example_elementwise_add.py",
      "main()'s 1024 x 1024 with 32x32 blocks; and 1000 x 1000 (tails)")
def _(m, rng):
    out = []
    for M, N in ((1024, 1024), (1000, 1000)):
        a, b = rn(rng, (M, N)), rn(rng, (M, N))
        out.append(Check(m["elementwise_add"], [a, b, 32, 32, "float32", "float32", 128],
                         {0: a.astype(f64) + b}))
    return out


@case("tl/norm/rms_norm@shapes", TL, "examples/norm/rms_norm.py",
      "test_rms_norm's 1024 x 1024, blk_m 1; the split-K kernel with blk_k 512")
def _(m, rng):
    from upstream_cases_tl import rms_norm_checks
    return rms_norm_checks(m, rn(rng, (1024, 1024)), 1, 512)


def row_checks(factory, ref, rng, configs):
    """factory(M, N, block_M, block_N, dtype=) of the tilelang-ascend row kernels (layer_norm,
    online_softmax) for each (M, N, block_M, block_N, dtype) against ref(input)."""
    out = []
    for M, N, bm, bn, dt in configs:
        a = inputs(rng, (M, N), dt)
        tol = (1e-4, 1e-4) if dt == "float" else None
        out.append(Check(factory(M, N, bm, bn, dtype=dt), [a], {0: ref(a)}, out_dtype(dt), N,
                         tol=tol))
    return out


@case("asc/normalization/layer_norm@shapes", A, "examples/normalization/layer_norm.py",
      "the script's test_configs: 34 x 34 (32x32 blocks: tails) in float, float16, bfloat16; "
      "270 x 270 (64x64 blocks) float; 1030 x 1030 (128x128) float16")
def _(m, rng):
    from upstream_cases_ascend import layer_norm_ref
    return row_checks(m["layer_norm"], layer_norm_ref, rng, (
        (34, 34, 32, 32, "float"), (34, 34, 32, 32, "float16"), (34, 34, 32, 32, "bfloat16"),
        (270, 270, 64, 64, "float"), (1030, 1030, 128, 128, "float16")))


@case("asc/softmax/online_softmax@shapes", A, "examples/softmax/example_online_softmax.py",
      "the script's test_configs: 34 x 130 (32x32 blocks: tails) in float, float16, bfloat16; "
      "a 1024-row float16 one with 128x128 blocks (the script: N = 51200)")
def _(m, rng):
    from upstream_cases_ascend import softmax_ref
    return row_checks(m["online_softmax"], softmax_ref, rng, (
        (34, 130, 32, 32, "float"), (34, 130, 32, 32, "float16"), (34, 130, 32, 32, "bfloat16"),
        (1024, 1280, 128, 128, "float16")))


# ---------------------------------------------------------------- attention

@case("tl/flash_attention/mha_fwd_bshd@shapes", TL, "examples/flash_attention/example_mha_fwd_bshd.py",
      "main()'s 128x128 blocks and dim 128 (the script: 8 x 32 heads x 4096), batch 2, 4 heads, "
      "seq 512, causal and not; and seq 300 (a tail of 44 rows and keys: the kernel masks keys "
      "past seq_len)")
def _(m, rng):
    out = []
    for B, H, S, D in ((2, 4, 512, 128), (1, 2, 300, 128)):
        q, k, v = (rn(rng, (B, S, H, D), "float16") for _ in range(3))
        out += [Check(m["flashattn"](B, H, S, D, causal, block_M=128, block_N=128, num_stages=1,
                                     threads=128), [q, k, v], {0: attn(q, k, v, causal)},
                      "float16", S) for causal in (False, True)]
    return out


@case("tl/flash_attention/gqa_fwd_bshd@shapes", TL, "examples/flash_attention/example_gqa_fwd_bshd.py",
      "main()'s groups 16, 64x64 blocks, 2 stages, dim 128 (the script: 64 heads x 4096): "
      "32 heads, seq 384, causal and not")
def _(m, rng):
    B, H, S, D, G = 1, 32, 384, 128, 16
    q = rn(rng, (B, S, H, D), "float16")
    k, v = rn(rng, (B, S, H // G, D), "float16"), rn(rng, (B, S, H // G, D), "float16")
    return [Check(m["flashattn"](B, H, S, D, causal, groups=G, block_M=64, block_N=64,
                                 num_stages=2, threads=128), [q, k, v],
                  {0: attn(q, k, v, causal)}, "float16", S) for causal in (False, True)]


@case("tl/flash_attention/mha_bwd_bshd@shapes", TL, "examples/flash_attention/example_mha_bwd_bshd.py",
      "main()'s dim 64 (the script: 8 x 32 heads x 1024): batch 2, 4 heads, seq 256")
def _(m, rng):
    from upstream_cases_new2 import mha_bwd_checks
    return mha_bwd_checks(m, rng, bshd=True, dims=(2, 4, 256, 64))


@case("tl/flash_attention/gqa_bwd@shapes", TL, "examples/flash_attention/example_gqa_bwd.py",
      "main()'s defaults: 32 heads, groups 16, seq 256, dim_qk 192, dim_v 128")
def _(m, rng):
    from upstream_cases_new3 import gqa_bwd_checks
    return gqa_bwd_checks(m, rng, "flashattn_bwd_split", dims=(1, 32, 2, 256, 192, 128))


@case("asc/developer_mode/flash_attn_bshd@shapes", A, "examples/developer_mode/flash_attn_bshd_developer.py",
      "the script's B, S, H, D = 1, 128, 1, 512; and batch 2, 3 heads, seq 256, dim 128")
def _(m, rng):
    out = []
    for B, S, H, D in ((1, 128, 1, 512), (2, 256, 3, 128)):
        m["B"], m["S"] = B, S  # module globals the factory reads (host code)
        q, k, v = (rn(rng, (B, H, S, D), "float16") for _ in range(3))
        out.append(Check(m["flash_attention_fwd"](heads=H, dim=D), [q, k, v],
                         {0: attn_ref(q, k, v)}, dtype="float16", reduce_len=S))
    return out


@case("asc/flash_attention/fa_opt_expert_h16_d128@shapes", A,
      "examples/flash_attention/fa_opt/flash_attn_bhsd_expert_h16_d128.py",
      "the script's num_stages 14, cross_interval 2, dim 128 (the script: 4 x 16 heads x 4096): "
      "seq 2048 (16 KV blocks: a full batch of 14 and a remainder of 2), one head; and GQA "
      "4 / 2 heads at seq 512. At most 24 tasks: with more tasks than the 24 cores a core runs "
      "a second task whose first write of acc_s_half races the MTE3 store of the previous "
      "task's output from it (no flag orders them: the example's own race, see the report)")
def _(m, rng):
    from upstream_cases_new import masked_attn_ref
    out = []
    for B, HQ, HK, S in ((1, 1, 1, 2048), (1, 4, 2, 512)):
        q = rn(rng, (B, HQ, S, 128), "float16")
        k, v = rn(rng, (B, HK, S, 128), "float16"), rn(rng, (B, HK, S, 128), "float16")
        g = HQ // HK
        want = masked_attn_ref(q, np.repeat(k, g, 1), np.repeat(v, g, 1), np.ones((S, S), bool))
        kern = m["flash_attention_fwd"](batch=B, seq_len=S, heads_q=HQ, heads_kv=HK, dim=128)
        out.append(Check(kern, [q, k, v], {0: want}, "float16", S))
    return out


@case("asc/flash_attention/flash_attn_bhsd@shapes", A, "examples/flash_attention/flash_attn_bhsd.py",
      "the script's B, S, H, D = 1, 128, 1, 512; and batch 2, 2 heads, seq 512, dim 128")
def _(m, rng):
    import inspect
    sig = inspect.signature(m["flash_attention_fwd"].factory)
    out = []
    for B, S, H, D in ((1, 128, 1, 512), (2, 512, 2, 128)):
        q, k, v = (rn(rng, (B, H, S, D), "float16") for _ in range(3))
        kw = dict(batch=B, heads=H, seq_len=S, dim=D)
        kw = {n: kw[n] for n in sig.parameters if n in kw}
        out.append(Check(m["flash_attention_fwd"](**kw), [q, k, v], {0: attn_ref(q, k, v)},
                         dtype="float16", reduce_len=S))
    return out


@case("tl/deepseek_mla/mla_decode@shapes", TL, "examples/deepseek_mla/example_mla_decode.py",
      "main()'s dim 512, pe_dim 64, BLOCK_N 64 (the script: 128 heads x 8192): batch 2, 64 heads, "
      "kv_ctx 1024, splits 1 and 4")
def _(m, rng):
    return mla_decode_checks(m, rng, 2, 64, 1024, 512, 64, 64, (1, 4), scale_arg=True,
                             scratch=False)


@case("tl/flash_decoding/gqa_decode@shapes", TL, "examples/flash_decoding/example_gqa_decode.py",
      "batch 2, 32 heads, 8 kv groups, seq 1024, dim 128, splits 1 and 4")
def _(m, rng):
    from upstream_cases_more import gqa_decode_checks
    return gqa_decode_checks(m, rng, 2, 32, 8, 1024, 128, (1, 4))


@case("tl/deepseek_v32/sparse_mla_fwd@shapes", TL, "examples/deepseek_v32/sparse_mla_fwd.py",
      "test_sparse_mla_fwd's DQK 576 = 512 + 64 and num_stages 2 (the script: 128 heads, 4096 "
      "queries, topk 2048): 32 heads, 32 queries, 256 KV rows, topk 128. At 64 heads and more "
      "the vector cores' O (64 x 512 float32) and its L0C hand-off do not fit one AIV's UB")
def _(m, rng):
    from upstream_cases_new5 import v32_sparse_checks
    return v32_sparse_checks(m, rng, topk=128, H=32, tail=64, S=32, SKV=256, dim=512)


# ---------------------------------------------------------------- top-k, convolution, reductions

@case("tl/deepseek_v32/topk_selector@shapes", TL, "examples/deepseek_v32/topk_selector.py",
      "test_topk_selector's seq_len 32768, topk 2048 (the script: batch 64): batch 3, one row "
      "ending early")
def _(m, rng):
    B, N, K = 3, 32 * 1024, 2048
    x = rng.standard_normal((B, N)).astype(np.float32)
    starts = np.zeros(B, np.int32)
    ends = np.array([N, N - 1000, N], np.int32)

    def cmp(got, want):
        for r in range(B):
            ref = set(np.argsort(-x[r, :ends[r]], kind="stable")[:K].tolist())
            assert set(got[r].tolist()) == ref, f"row {r}: a different top-{K} set"
    return [Check(m["tl_topk_impl"], [x, np.zeros((B, K), np.int32), starts, ends],
                  {("arg", 1): np.zeros((B, K))}, compare=cmp)]


@case("tl/topk@shapes", TL, "examples/topk/example_topk.py",
      "main()'s M 320 (not a multiple of blk_m 64... 5 blocks), N 128, topk 6")
def _(m, rng):
    M, N, K = 320, 128, 6
    x = rng.permutation(M * N).reshape(M, N).astype(np.float32) / (M * N)
    idx = np.argsort(-x, 1, kind="stable")[:, :K]
    return [Check(m["tl_topk"], [x, K, 64, 128], {0: np.take_along_axis(x, idx, 1).astype(f64),
                                                  1: idx.astype(f64)}, tol=(0, 0))]


@case("asc/topk_selector@shapes", A, "examples/topk_selector/example_topk_selector.py",
      "the script's N 4096 (batch 8, the script: 64), top_k 2048 / 4 ... and top_k 512")
def _(m, rng):
    B, N, K = 8, 4096, 512
    x = rng.permutation(B * N).reshape(B, N).astype(np.float32) / 7.0
    want = np.argsort(-x.astype(f64), 1, kind="stable")[:, :K].astype(f64)
    return [Check(m["simple_topk_selector"](B, N, K, K // 4), [x], {0: want}, dtype="int32",
                  tol=(0, 0))]


@case("tl/convolution@shapes", TL, "examples/convolution/example_convolution.py",
      "main()'s 64x128x32 blocks, 3 stages, 256 threads, c = f = 128, k 3 (the script: 128 x "
      "64 x 64 images): 2 x 12 x 10 images (tails), stride 1 and 2, dilation 2")
def _(m, rng):
    from upstream_cases_new import conv_nhwc_ref
    checks = []
    conv = m["convolution"]
    for (N, C, H, W, F, K, S, D, P) in ((2, 128, 12, 10, 128, 3, 1, 1, 1),
                                        (2, 128, 12, 10, 128, 3, 2, 2, 2)):
        a, w = rn(rng, (N, H, W, C), "float16"), rn(rng, (K, K, C, F), "float16")
        cfg = (S, D, P, 64, 128, 32, 3, 256)
        fn = lambda a, w, cfg=cfg: conv(a, w, *cfg)  # noqa: E731
        fn.kernel_for = lambda a, w, cfg=cfg: conv.kernel_for(a, w, *cfg)
        checks.append(Check(fn, [a, w], {0: conv_nhwc_ref(a, w, S, D, P)}, "float16", K * K * C))
    return checks


@case("asc/reduce/reduce_min@shapes", A, "examples/reduce/example_reduce_min.py",
      "main()'s M, N = 1024, 256 with 128-row blocks")
def _(m, rng):
    a = rn(rng, (1024, 256))
    return [Check(m["reduce_min"](1024, 256, 128), [a], {0: a.astype(f64).min(1)})]


@case("asc/convolution@shapes", A, "examples/convolution/example_convolution.py",
      "host im2col + the example's GEMM on more blocks: batch image 1 x 16 x 18 x 18, 64 filters")
def _(m, rng):
    from upstream_cases_ascend import asc_conv_check
    return [asc_conv_check(m, rng, 16, 18, 64, 192, 256)]


# ---------------------------------------------------------------- developer / expert mode, quant

@case("asc/developer_mode/matmul_add@shapes", A, "examples/developer_mode/matmul_add_developer.py",
      "the script's 1024^3 with 128x256x64 blocks")
def _(m, rng):
    a, b = rn(rng, (1024, 1024), "float16"), rn(rng, (1024, 1024), "float16")
    d = rn(rng, (1024, 1024), "float16")
    return [Check(m["matmul_add"](1024, 1024, 1024, 128, 256, 64), [a, b, d],
                  {0: a.astype(f64) @ b.astype(f64) + d}, dtype="float16", reduce_len=1024)]


@case("asc/developer_mode/gelu_mul@shapes", A, "examples/developer_mode/gelu_mul_developer.py",
      "the script's test_configs (256, 256, 64, 64) and (1024, 1024, 128, 128)")
def _(m, rng):
    from upstream_cases_ascend import gelu_mul_case
    return [gelu_mul_case(m, rng, 256, 256, 64, 64), gelu_mul_case(m, rng, 1024, 1024, 128, 128)]


@case("asc/gdn/chunk_h@shapes", A, "examples/linear_attention_and_rnn/gdn/gdn_chunk_h.py",
      "the script's test config: B, H, L = 2, 32, 256 (64 heads over the cores), DK = DV = 64, "
      "C = BK = BV = 32")
def _(m, rng):
    from upstream_cases_new3 import chunk_h_checks
    return chunk_h_checks(m, rng, 32, 32, dims=(2, 32, 256, 64, 64, 32))


@case("asc/gdn/chunk_o@shapes", A, "examples/linear_attention_and_rnn/gdn/gdn_chunk_o.py",
      "the script's test config: B, H, L = 2, 32, 256, DK = DV = 64, C = BK = BV = 32")
def _(m, rng):
    from upstream_cases_new2 import asc_chunk_o_checks
    return asc_chunk_o_checks(m, rng, 2, 32, 256, 64, 64, 32, 32, 32)


@case("tl/linear_attention/linear_attn_fwd@shapes", TL,
      "examples/linear_attention/example_linear_attn_fwd.py",
      "main()'s B, S, H, D = 1, 512, 16, 128; and batch 2")
def _(m, rng):
    from upstream_cases_new import linear_attn_fwd_checks
    return linear_attn_fwd_checks(m, rng, 1, 512, 16, 128) + \
        linear_attn_fwd_checks(m, rng, 2, 256, 4, 128)


@case("tl/deepseek_v32/inference_fp8_gemm@shapes", TL, "examples/deepseek_v32/inference/kernel.py",
      "T.dynamic M = 100 (not a multiple of block_M 32), N 512, K 512", chip="ascend950")
def _(m, rng):
    from upstream_cases_new10 import v32_fp8_gemm_check
    return [v32_fp8_gemm_check(m, rng, 100, 512, 512)]


@case("tl/cast/per_token_fp8@shapes", TL, "examples/cast/example_per_token_cast_to_fp8.py",
      "main()'s blk_m 8 (the script: 8192 x 8192): 1024 x 2048; and 1001 x 1000 (a row tail "
      "and a short last group)")
def _(m, rng):
    from upstream_cases_tl import per_token_fp8_checks
    return per_token_fp8_checks(m, rng, 1024, 2048, 8) + per_token_fp8_checks(m, rng, 1001, 1000, 8)


@case("tl/deepseek_v32/inference_act_quant@shapes", TL, "examples/deepseek_v32/inference/kernel.py",
      "T.dynamic M = 100 (not a multiple of blk_m 32), N 1024")
def _(m, rng):
    from upstream_cases_new10 import v32_act_quant_checks
    return v32_act_quant_checks(m, rng, 100, 1024)


@case("asc/deepseek_v4/act_quant_int8@shapes", A, "examples/deepseek_v4/act_quant.py",
      "test()'s M, N = 128, 1024 (block_M 16, block_N = N); and M = 208 (T.symbolic M, 13 "
      "blocks; the kernel runs M // block_M blocks, so M must be a multiple of 16)")
def _(m, rng):
    from upstream_cases_ascend import act_quant_int8_checks
    return act_quant_int8_checks(m, rng, 128, 1024) + act_quant_int8_checks(m, rng, 208, 1024)
