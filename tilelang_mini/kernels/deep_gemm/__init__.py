"""DeepGEMM's Python API on tilelang_mini tile kernels (names and conventions as DeepGEMM's)."""
from .hc import tf32_hc_prenorm_gemm  # noqa: F401
from .mqa import fp8_mqa_logits  # noqa: F401
from .gemm import (  # noqa: F401
    bf16_gemm_nn, bf16_gemm_nt, bf16_gemm_tn, bf16_gemm_tt, fp8_fp4_gemm_nn, fp8_fp4_gemm_nt,
    fp8_fp4_gemm_tn, fp8_fp4_gemm_tt, fp8_gemm_nn, fp8_gemm_nt, fp8_gemm_tn, fp8_gemm_tt,
    get_mk_alignment_for_contiguous_layout, m_grouped_bf16_gemm_nt_contiguous,
    m_grouped_bf16_gemm_nt_masked, m_grouped_fp8_fp4_gemm_nt_contiguous,
    m_grouped_fp8_fp4_gemm_nt_masked, m_grouped_fp8_gemm_nt_contiguous,
    m_grouped_fp8_gemm_nt_masked,
)
