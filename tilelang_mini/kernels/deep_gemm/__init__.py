"""DeepGEMM's Python API on tilelang_mini tile kernels (names and conventions as DeepGEMM's)."""
from .einsum import einsum, fp8_einsum  # noqa: F401
from .hc import tf32_hc_prenorm_gemm  # noqa: F401
from .kgrouped import (  # noqa: F401
    k_grouped_bf16_gemm_tn_contiguous, k_grouped_fp8_gemm_nt_contiguous,
    k_grouped_fp8_gemm_tn_contiguous,
)
from .mega import bf16_mega_moe, fp8_mega_moe  # noqa: F401
from .mqa import fp8_fp4_mqa_logits, fp8_mqa_logits  # noqa: F401
from .paged_mqa import (  # noqa: F401
    fp8_fp4_paged_mqa_logits, fp8_paged_mqa_logits, get_paged_mqa_logits_metadata,
)
from .quant import (  # noqa: F401
    cast_back_from_fp4, ceil_to_ue8m0, pack_ue8m0_to_int, per_block_cast_to_fp8,
    per_channel_cast_to_fp8, per_token_cast_to_fp4, per_token_cast_to_fp8,
    transform_sf_into_required_layout, transpose_packed_fp4, unpack_ue8m0_from_int,
)
from .gemm import (  # noqa: F401
    bf16_gemm_nn, bf16_gemm_nt, bf16_gemm_tn, bf16_gemm_tt, bf16_m_grouped_gemm_nt_masked,
    cublaslt_gemm_nn, cublaslt_gemm_nt, cublaslt_gemm_tn, cublaslt_gemm_tt, fp8_fp4_gemm_nn,
    fp8_fp4_gemm_nt, fp8_fp4_gemm_tn, fp8_fp4_gemm_tt, fp8_gemm_nn, fp8_gemm_nt,
    fp8_gemm_nt_skip_head_mid, fp8_gemm_tn, fp8_gemm_tt, fp8_m_grouped_gemm_nt_masked,
    get_k_alignment_for_contiguous_layout, get_m_alignment_for_contiguous_layout,
    get_mk_alignment_for_contiguous_layout, get_theoretical_mk_alignment_for_contiguous_layout,
    m_grouped_bf16_gemm_nn_contiguous, m_grouped_bf16_gemm_nt_contiguous,
    m_grouped_bf16_gemm_nt_masked, m_grouped_fp8_fp4_gemm_nn_contiguous,
    m_grouped_fp8_fp4_gemm_nt_contiguous, m_grouped_fp8_fp4_gemm_nt_masked,
    m_grouped_fp8_gemm_nn_contiguous, m_grouped_fp8_gemm_nt_contiguous,
    m_grouped_fp8_gemm_nt_masked,
)
