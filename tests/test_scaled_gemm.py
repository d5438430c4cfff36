"""The block-scaled (MX) gemm: `T.gemm(..., scale_A=, scale_B=, scale_gran=)`, the ascend950
cube's scaled MMAD. Checked against a float64 reference that decodes the UE8M0 bytes itself, on
every target and the simulator; located errors on the 910b and for malformed scale tiles."""
import ml_dtypes
import numpy as np
import pytest

import tilelang_mini as tl
import tilelang_mini.language as T
from tilelang_mini.ir.parser import parse_ir
from tilelang_mini.ir.printer import print_ir
from kernels import scaled_gemm

FP8 = ml_dtypes.float8_e4m3fn


def _pairs(e):
    """[MN, groups] exponent bytes -> uint16 [ceil(groups/2), MN] (low byte: even group)."""
    mn, g = e.shape
    ep = np.zeros((mn, 2 * (-(-g // 2))), np.int64)
    ep[:, :g] = e
    return (ep[:, 0::2] | (ep[:, 1::2] << 8)).T.astype(np.uint16).copy()


def _case(M, N, K, gran, seed):
    r = np.random.default_rng(seed)
    g = -(-K // gran)
    a = r.standard_normal((M, K)).astype(FP8)
    b = r.standard_normal((N, K)).astype(FP8)
    ea, eb = r.integers(110, 140, (M, g)), r.integers(110, 140, (N, g))
    ea[0, 0] = 0  # 2^-127, the smallest UE8M0
    k_group = np.arange(K) // gran
    want = (a.astype(np.float64) * 2.0 ** (ea[:, k_group] - 127.0)) @ (
        b.astype(np.float64) * 2.0 ** (eb[:, k_group] - 127.0)).T
    return a, b, _pairs(ea), _pairs(eb), want


@pytest.mark.parametrize("M,N,K,gran,a_t,b_t", [(33, 40, 200, 32, False, True),
                                                (17, 24, 96, 64, True, False),
                                                (8, 16, 384, 128, True, True)])
def test_scaled_gemm_matches_float64(target, M, N, K, gran, a_t, b_t):
    a, b, sa, sb, want = _case(M, N, K, gran, M)
    args = (np.ascontiguousarray(a.T) if a_t else a, sa,
            b if b_t else np.ascontiguousarray(b.T), sb)
    k = tl.compile(scaled_gemm(M, N, K, gran, a_t, b_t), target=target, chip="ascend950")
    c = np.full((M, N), np.nan, np.float32)
    k(*args, c)
    scale = np.abs(want).max()
    assert np.max(np.abs(c - want)) <= 1e-5 * scale
    if target == "numpy":
        c2 = np.full((M, N), np.nan, np.float32)
        _, report = k.simulate(*args, c2)
        assert report.cycles > 0 and np.max(np.abs(c2 - want)) <= 1e-5 * scale


def test_scaled_gemm_ir_text_round_trip():
    k = tl.compile(scaled_gemm(16, 16, 64, 32, False, True), target="numpy", chip="ascend950")
    for stage in ("frontend", "insert_sync"):
        text = k.get_ir(stage)
        assert "scale_A=sa, scale_B=sb, scale_gran=32" in text
        assert print_ir(parse_ir(text)) == text


def test_910b_rejects_scaled_gemm():
    with pytest.raises(tl.CompileError) as e:
        tl.compile(scaled_gemm(16, 16, 64, 32, False, True), target="numpy", chip="ascend910b")
    msg = str(e.value)
    assert "needs a cube that applies block scales" in msg and "ascend910b" in msg
    assert "T.gemm(a, b, c, transpose_A=a_t" in msg and "^" in msg


def test_scaled_gemm_errors():
    with pytest.raises(tl.CompileError) as e:
        tl.compile(scaled_gemm(16, 16, 96, 48, False, True), target="numpy", chip="ascend950")
    assert "multiple of 32" in str(e.value) and "^" in str(e.value)

    @T.prim_func
    def short(A: T.Tensor((16, 128), "float8_e4m3fn"), SA: T.Tensor((1, 16), "uint16"),
              B: T.Tensor((16, 128), "float8_e4m3fn"), C: T.Tensor((16, 16), "float32")):
        with T.Kernel(1) as bx:
            a = T.alloc_shared((16, 128), "float8_e4m3fn")
            b = T.alloc_shared((16, 128), "float8_e4m3fn")
            sa = T.alloc_shared((1, 16), "uint16")
            c = T.alloc_fragment((16, 16), "float32")
            T.copy(A, a)
            T.copy(B, b)
            T.copy(SA, sa)
            T.gemm(a, b, c, transpose_B=True, scale_A=sa, scale_B=sa, scale_gran=32)
            T.copy(c, C)

    with pytest.raises(tl.CompileError) as e:  # 4 groups need 2 pair rows, sa has 1
        tl.compile(short, target="numpy", chip="ascend950")
    assert "need (2, 16)" in str(e.value) and "T.gemm(a, b, c, transpose_B=True" in str(e.value)
