"""Size variants for benchmarks/upstream_own_main.py (`--sizes alt`): other problem sizes for
cases of its table, keyed by the case's name. Each entry is a list of overrides merged into the
case's `how` (call / argv / subs), chosen as the smallest sizes the example's own asserts and
divisibility allow (one block, sequence lengths equal to a block, batch 1, heads = group size)
or odd / tail sizes where the kernel handles tails. A checker may pick such sizes; ours must
still compile and agree with the example's own reference."""
TL, AS = "tilelang", "ascend"
MNK = ["--m", "--n", "--k"]


def mnk(m, n, k):
    return {"argv": [a for pair in zip(MNK, map(str, (m, n, k))) for a in pair]}


def configs(text):
    return {"argv": [], "subs": [(r"(?s)test_configs = \[.*?\n\]", "test_configs = " + text)]}


ALT = {
    f"{TL}:examples/gemm/example_gemm.py": [{"subs": [(r"1024", "64")], "call": "main()"}],
    f"{TL}:examples/elementwise/example_elementwise_add.py": [
        {"call": "main(32, 32)"}, {"call": "main(100, 70)"}],
    f"{TL}:examples/flash_attention/example_mha_fwd_bhsd.py": [
        {"call": "main(1, 1, 64, 64, 64, False, False)"},
        {"call": "main(1, 1, 64, 192, 64, False, False)"}],
    f"{TL}:examples/flash_attention/example_mha_fwd_bhsd.py[causal]": [
        {"call": "main(1, 1, 64, 64, 64, True, False)"},
        {"call": "main(1, 1, 64, 192, 64, True, False)"}],
    f"{TL}:examples/flash_attention/example_mha_fwd_bshd.py": [
        {"call": "main(1, 1, 64, 64, False, False)"}, {"call": "main(1, 1, 64, 64, True, False)"},
        {"call": "main(2, 1, 192, 64, True, False)"}],
    f"{TL}:examples/flash_attention/example_gqa_fwd_bshd.py": [
        {"call": "main(1, 2, 64, 64, False, 2, False)"}, {"call": "main(1, 4, 64, 64, True, 4, False)"}],
    f"{TL}:examples/flash_decoding/example_gqa_decode.py": [
        {"call": "main(1, 2, 2, 128, 64)"}, {"call": "main(1, 8, 2, 64, 64)"},
        {"call": "main(2, 4, 4, 256, 64)"}],
    f"{TL}:examples/flash_decoding/example_mha_inference.py": [
        {"call": "main(1, 1, 32, 256, 64)"}],
    f"{TL}:examples/deepseek_mla/example_mla_decode.py": [
        {"call": "main(1, 1, 1, 64, 64, 32)"}, {"call": "main(1, 16, 1, 64, 64, 32)"}],
    f"{TL}:examples/topk/example_topk.py": [{"call": "main(['--M', '1', '--N', '64'])"},
                                            {"call": "main(['--M', '64', '--N', '8'])"}],
    f"{TL}:examples/gemv/example_gemv.py": [{"argv": ["--n", "64", "--k", "256"]}],
    f"{TL}:examples/norm/rms_norm.py": [
        {"subs": [(r"M, N, blk_m, blk_k = \d+, \d+", "M, N, blk_m, blk_k = 1, 64")]}],
    f"{TL}:examples/norm/layernorm.py": [{"subs": [(r"N, D = 4096, 8192", "N, D = 32, 1024")]}],
    f"{TL}:examples/online_softmax/online_softmax.py": [{"subs": [(r"\bM = \d+", "M = 1")]}],
    f"{TL}:examples/cast/example_per_token_cast_to_fp8.py": [{"call": "main(1, 128, 1)"}],
    f"{AS}:examples/gemm/example_gemm.py": [mnk(128, 256, 64), mnk(128, 256, 256)],
    f"{AS}:examples/elementwise/elementwise_add.py": [{"argv": ["--m", "128", "--n", "768"]}],
    f"{AS}:examples/developer_mode/gemm_developer.py": [mnk(128, 256, 64), mnk(256, 256, 256)],
    f"{AS}:examples/developer_mode/matmul_add_developer.py": [mnk(128, 256, 64)],
    f"{AS}:examples/simple_fusion/matmul_add.py": [mnk(128, 256, 64)],
    f"{AS}:examples/pipeline/gemm_v0_pipeline.py": [mnk(256, 256, 256), mnk(512, 512, 512)],
    f"{AS}:examples/batch_gemm/batch_gemm.py": [{"argv": ["--b", "1"] + mnk(128, 256, 64)["argv"]}],
    f"{AS}:examples/reduce/example_reduce_min.py": [{"argv": ["--m", "128", "--n", "64"]}],
    f"{AS}:examples/activation/silu.py": [configs("[(64, 64, 64, 64), (65, 70, 64, 64)]")],
    f"{AS}:examples/activation/gelu_mul.py": [configs("[(64, 64, 64, 64), (100, 130, 64, 64)]")],
    f"{AS}:examples/normalization/layer_norm.py": [configs('[(1, 32, 32, 32, "float"), (33, 40, 32, 32, "float16")]')],
    f"{AS}:examples/normalization/rms_norm.py": [configs('[(64, 64, 64, 64, "float"), (70, 100, 64, 64, "float")]')],
    f"{AS}:examples/softmax/example_online_softmax.py": [configs('[(1, 32, 32, 32, "float"), (33, 33, 32, 32, "float")]')],
    f"{AS}:examples/flash_attention/flash_attn_bhsd.py": [{"argv": ["--S", "64", "--D", "64"]}],
    f"{AS}:examples/gemv/example_gemv_c.py": [{"argv": ["--n", "64", "--k", "128"]}],
    # round 2
    f"{TL}:examples/gemm/example_gemm_persistent.py": [{"call": "main(128, 128, 64)"}],
    f"{TL}:examples/flash_attention/example_mha_bwd_bhsd.py": [{"call": "main(1, 1, 64, 64, False)"},
                                                               {"call": "main(1, 1, 64, 64, True)"}],
    f"{TL}:examples/flash_attention/example_gqa_bwd.py": [
        {"call": "main(1, 2, 64, 64, 64, 2, False, True)"}],
    f"{TL}:examples/attention_sink/example_mha_sink_fwd_bhsd.py": [{"call": "main(1, 1, 64, 64, 64)"}],
    f"{AS}:examples/gemm/example_gemm_persistent.py": [mnk(128, 256, 64)],
    f"{AS}:examples/gemm/example_gemm_infer_scope.py": [mnk(128, 256, 64)],
    f"{AS}:examples/elementwise/elementwise_add_pipeline.py": [{"argv": ["--m", "256", "--n", "512"]}],
    f"{AS}:examples/pad/example_broadcast.py": [{"argv": ["--m", "256", "--n", "512"]}],
    f"{AS}:examples/activation/sigmoid.py": [configs("[(64, 64, 64, 64), (65, 70, 64, 64)]")],
    f"{AS}:examples/activation/tanh.py": [configs("[(64, 64, 64, 64), (1, 130, 64, 64)]")],
    f"{AS}:examples/gemv/example_gemv_v.py": [{"argv": ["--n", "64", "--k", "128"]}],
    f"{AS}:examples/gemm/example_gemm_transpose_l1.py": [mnk(256, 128, 64)],
    f"{AS}:examples/cumsum_gdn/example_cumsum.py": [{"argv": ["--b", "1", "--h", "1", "--l", "64"]}],
    f"{AS}:examples/activation/swi_glu.py": [configs("[(64, 64, 64, 64, 0), (70, 66, 64, 64, 1)]")],
}
