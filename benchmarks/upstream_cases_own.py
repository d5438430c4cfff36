"""tilelang-ascend cases of benchmarks/upstream_own_main.py (the examples' own host code, with
real torch on the CPU; sizes shrunk by their flags or a substitution in their host code)."""
AS = "ascend"
SMALL_MNK = ["--m", "128", "--n", "256", "--k", "128"]


def configs(text):
    """Replace the example's `test_configs = [...]` list by `text` (a small one)."""
    return (r"(?s)test_configs = \[.*?\n\]", "test_configs = " + text)


MORE = [
    (AS, "examples/gemm/example_gemm.py", {"argv": SMALL_MNK}),
    (AS, "examples/elementwise/elementwise_add.py", {"argv": ["--m", "128", "--n", "256"]}),
    (AS, "examples/developer_mode/gemm_developer.py", {"argv": SMALL_MNK}),
    (AS, "examples/developer_mode/matmul_add_developer.py", {"argv": SMALL_MNK}),
    (AS, "examples/simple_fusion/matmul_add.py", {"argv": SMALL_MNK}),
    (AS, "examples/pipeline/gemm_v0_pipeline.py", {"argv": SMALL_MNK}),
    (AS, "examples/batch_gemm/batch_gemm.py", {"argv": ["--b", "2"] + SMALL_MNK}),
    (AS, "examples/cumsum_gdn/example_cumsum.py", {"argv": ["--b", "1", "--h", "2", "--l", "64"]}),
    (AS, "examples/reduce/example_reduce_min.py", {"argv": ["--m", "128", "--n", "256"]}),
    (AS, "examples/topk_selector/example_topk_selector.py", {"argv": ["--b", "2", "--n", "4096"],
     "subs": [(r"check_case\(1024, 1024, 128\)", "check_case(4, 1024, 128)")]}),
    (AS, "examples/gemv/example_gemv_c.py", {"argv": ["--n", "128", "--k", "256"]}),
    (AS, "examples/activation/silu.py", {"argv": [], "subs": [configs("[(256, 256, 64, 64), (300, 300, 64, 64)]")]}),
    (AS, "examples/activation/gelu_mul.py", {"argv": [], "subs": [configs("[(256, 256, 64, 64)]")]}),
    (AS, "examples/activation/swi_glu.py", {"argv": [], "subs": [configs("[(256, 256, 64, 64, 0), (256, 256, 64, 64, 1)]")]}),
    (AS, "examples/normalization/layer_norm.py", {"argv": [], "subs": [configs(
        '[(34, 34, 32, 32, "float"), (34, 34, 32, 32, "float16"), (34, 34, 32, 32, "bfloat16")]')]}),
    (AS, "examples/normalization/rms_norm.py", {"argv": [], "subs": [configs(
        '[(256, 256, 64, 64, "float"), (128, 512, 64, 128, "bfloat16")]')]}),
    (AS, "examples/softmax/example_online_softmax.py", {"argv": [], "subs": [configs(
        '[(34, 130, 32, 32, "float"), (34, 130, 32, 32, "float16"), (34, 130, 32, 32, "bfloat16")]')]}),
    (AS, "examples/developer_mode/gelu_mul_developer.py", {"argv": [], "subs": [configs("[(256, 256, 64, 64)]")]}),
    (AS, "examples/developer_mode/flash_attn_bshd_developer.py", {"argv": []}),
    (AS, "examples/flash_attention/flash_attn_bhsd.py", {"argv": ["--S", "128", "--D", "128"]}),
    (AS, "examples/sort/example_merge_sort.py", {"argv": []}),
    (AS, "examples/pos_embedding/rope.py", {"argv": []}),
    (AS, "examples/lightning_indexer/example_lightning_indexer.py", {"argv": []}),
]

TL = "tilelang"
MORE += [
    (TL, "examples/flash_attention/example_mha_bwd_bhsd.py", {"call": "main(1, 2, 128, 64, False)"}),
    (TL, "examples/flash_attention/example_gqa_bwd.py",
     {"call": "main(1, 4, 128, 64, 64, 2, False, True)"}),
    (TL, "examples/attention_sink/example_mha_sink_fwd_bhsd.py", {"call": "main(1, 1, 128, 128, 64)"}),
    (TL, "examples/blocksparse_attention/example_tilelang_block_sparse_attn.py", {"call": "main()"}),
    (TL, "examples/seer_attention/block_sparse_attn_tilelang.py",
     {"call": "test_topk_sparse_attention_qlen_lt_klen()"}),
    (TL, "examples/deepseek_nsa/example_tilelang_nsa_fwd.py", {"call": "main()"}),
    (TL, "examples/deepseek_nsa/example_tilelang_nsa_decode.py", {"call": "main()"}),
    (TL, "examples/gdn/example_cumsum.py", {"call": "main()", "subs": [(r"S=32768", "S=256"),
                                                                        (r"H=32", "H=2")]}),
    (TL, "examples/gdn/example_chunk_o.py", {"call": "main()", "subs": [(r"S=32768", "S=128"),
                                                                         (r"H=32", "H=1")]}),
    (TL, "examples/linear_attention/example_mamba_chunk_state.py",
     {"argv": ["--batch", "1", "--heads", "2", "--seq_len", "256", "--chunk_size", "128"]}),
    (TL, "examples/linear_attention/example_mamba_chunk_scan.py",
     {"argv": ["--batch", "1", "--heads", "2", "--seq_len", "256", "--chunk_size", "128"]}),
    (TL, "examples/gemm_sp/example_gemm_sp.py", {"call": "main(128, 128, 128)"}),
    (TL, "examples/deepseek_mhc/example_mhc_post.py", {"call": "test(n=64, h=256)"}),
    (TL, "examples/deepseek_v32/sparse_mla_fwd.py",
     {"call": "test_sparse_mla_fwd(B=1, S=16, SKV=128, H=16, HKV=1, DQK=576, DV=512, topk=64, "
              "block_I=32, num_stages=1)"}),
    (TL, "examples/deepseek_v32/fp8_lighting_indexer.py",
     {"call": "test_fp8_lighting_indexer(S=512, SKV=512, H=4, HKV=1, D=64)"}),
    (TL, "examples/flash_decoding/example_gqa_decode_varlen_logits.py",
     {"call": "main()", "subs": [(r"k_seqlen=\d+", "k_seqlen=256"), (r"q_heads=32", "q_heads=8")]}),
    (TL, "examples/dequantize_gemm/example_dequant_gemv_fp16xint4.py", {"call": "main()",
     "subs": [(r"\b(N|K) = \d+", r"\1 = 256")]}),
    (TL, "examples/gemm/example_gemm_intrinsics.py", {"call": "main(M=128, N=128, K=128)"}),
    (TL, "examples/fusedmoe/example_fusedmoe_tilelang.py",
     {"call": "main(256, 128, 4, 1, 2, 1, 64)"}),
    (TL, "examples/block_causal_attention/block_causal_attention.py", {"call": "main()"}),
    (TL, "examples/warp_specialize/example_warp_specialize_gemm_copy_0_gemm_1.py",
     {"call": "main(M=128, N=128, K=128)"}),
    (TL, "examples/flash_attention/example_mha_fwd_varlen.py", {"call": "main(1, 2, 128, 64)"}),
]

MORE += [
    (AS, "examples/gemm_splitk/example_tilelang_gemm_splitk.py",
     {"argv": ["--M", "128", "--N", "256", "--K", "512", "--split-k", "2"]}),
    (AS, "examples/cross_entropy_loss/example_cross_entro.py", {"argv": ["--n", "64", "--c", "256"]}),
    (AS, "examples/activation/sigmoid.py", {"argv": [], "subs": [configs("[(256, 256, 64, 64), (300, 300, 64, 64)]")]}),
    (AS, "examples/activation/tanh.py", {"argv": [], "subs": [configs("[(256, 256, 64, 64), (300, 300, 64, 64)]")]}),
    (AS, "examples/gemm/example_gemm_persistent.py", {"argv": SMALL_MNK}),
    (AS, "examples/gemm/example_gemm_infer_scope.py", {"argv": SMALL_MNK}),
    (AS, "examples/elementwise/elementwise_add_pipeline.py", {"argv": ["--m", "128", "--n", "256"]}),
    (AS, "examples/pad/example_broadcast.py", {"argv": ["--m", "128", "--n", "256"]}),
    (AS, "examples/grouped_gemm/example_grouped_gemm_fwd.py",
     {"argv": ["--batch_sizes", "64, 128", "--K", "256", "--M", "256"]}),
    (AS, "examples/hadamard_transform/example_hadamard_transform.py",
     {"argv": ["--batch", "2", "--dim", "256", "--block_size", "256"]}),
    (AS, "examples/reduce/example_row_reduce_max_slice_buffer.py", {"argv": []}),
    (AS, "examples/reduce/example_col_reduce_max_slice_buffer.py", {"argv": []}),
    (AS, "examples/flash_attention/flash_attn_bhsd_cc_sync.py", {"argv": []}),
    (AS, "examples/pipeline/flash_attn_bshd_pipeline.py", {"argv": []}),
    (AS, "examples/developer_mode/sparse_flash_attn_developer.py", {"argv": []}),
    (AS, "examples/sparse_flash_attention/example_sparse_flash_attn.py", {"argv": []}),
    (AS, "examples/group_norm/example_group_norm.py", {"argv": []}),
    (AS, "examples/deepseek_v4/act_quant.py", {"argv": []}),
    (AS, "examples/convolution/example_convolution.py", {"argv": []}),
    (AS, "examples/moe_token_permute/moe_token_permute.py", {"argv": []}),
    (AS, "examples/pos_embedding/rms_rope_fused.py", {"argv": []}),
    (AS, "examples/pos_embedding/rms_norm.py", {"argv": []}),
    (AS, "examples/gemm/example_gemm_transpose_l1.py", {"argv": ["--m", "256", "--n", "128", "--k", "128"]}),
    (AS, "examples/gemm/example_gemm_tail_block_developer.py", {"argv": []}),
    (AS, "examples/random_1d/random_1d.py", {"argv": []}),
    (AS, "examples/elementwise/setvalue_example.py", {"argv": []}),
    (AS, "examples/lightning_indexer/example_lightning_indexer_dynamic_shape.py", {"argv": []}),
    (AS, "examples/quant_batch_matmul/example_quant_matmul.py", {"argv": []}),
    (AS, "examples/gemv/example_gemv_v.py", {"argv": ["--n", "128", "--k", "256"]}),
    (AS, "examples/blocksparse_gemm/example_blocksparse_gemm.py", {"argv": []}),
    (AS, "examples/linear_attention_and_rnn/linear_attention_causal.py", {"argv": []}),
]
