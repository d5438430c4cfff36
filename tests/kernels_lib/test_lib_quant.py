"""DeepGEMM's quantisation helpers as tile kernels, against NumPy references written from
deep_gemm/utils/math.py's description (amax / 448, UE8M0 = exponent rounded up, e2m1 codes)."""
import numpy as np
import pytest
from refs import BF16, FP8, rng

from tilelang_mini.kernels import deep_gemm as dg


def ue8m0_ref(s):
    bits = np.abs(s).astype(np.float32).view(np.int32).astype(np.int64)
    e = ((bits >> 23) & 0xFF) + ((bits & 0x7FFFFF) != 0)
    return (np.clip(e, 1, 254) << 23).astype(np.int32).view(np.float32)


def token_ref(x, ue8m0, gran=128, qmax=448.0):
    m, n = x.shape
    kb = -(-n // gran)
    xp = np.zeros((m, kb * gran), np.float32)
    xp[:, :n] = x.astype(np.float32)
    sf = np.maximum(np.abs(xp.reshape(m, kb, gran)).max(-1), 1e-4).astype(np.float32) / np.float32(qmax)
    sf = ue8m0_ref(sf) if ue8m0 else sf
    scaled = (xp.reshape(m, kb, gran) * (np.float32(1) / sf[:, :, None])).reshape(m, -1)[:, :n]
    return scaled, sf


@pytest.mark.parametrize("ue8m0", (False, True))
def test_per_token_and_block_cast(target, ue8m0):
    x = (rng(40).standard_normal((21, 300)) * 3).astype(BF16)
    q, sf = dg.per_token_cast_to_fp8(x, ue8m0, target=target)
    scaled, want_sf = token_ref(x, ue8m0)
    np.testing.assert_allclose(sf, want_sf, rtol=1e-6)
    assert np.array_equal(q.astype(np.float32), scaled.astype(FP8).astype(np.float32))
    qb, sfb = dg.per_block_cast_to_fp8(x, ue8m0, target=target)
    assert sfb.shape == (1, 3)
    for j in range(3):
        blk = x[:, j * 128:(j + 1) * 128].astype(np.float32)
        s = np.float32(max(np.abs(blk).max(), 1e-4)) / np.float32(448)
        s = ue8m0_ref(np.array([s]))[0] if ue8m0 else s
        assert sfb[0, j] == pytest.approx(s, rel=1e-6)
        assert np.array_equal(qb[:, j * 128:(j + 1) * 128].astype(np.float32),
                              (blk * (np.float32(1) / sfb[0, j])).astype(FP8).astype(np.float32))


def test_ue8m0_pack_unpack(target):
    s = np.abs(rng(41).standard_normal((5, 8))).astype(np.float32) + 1e-6
    s[0, :3] = [1.0, 0.25, 2.0 ** -126]
    up = dg.ceil_to_ue8m0(s, target=target)
    assert np.array_equal(up, ue8m0_ref(s))
    packed = dg.pack_ue8m0_to_int(up, target=target)
    want = (up.view(np.int32) >> 23).astype(np.uint8).view(np.int32)  # bytes, little-endian
    assert packed.dtype == np.int32 and np.array_equal(packed, want)
    assert np.array_equal(dg.unpack_ue8m0_from_int(packed, target=target), up)
    t = dg.transform_sf_into_required_layout(packed, 5, 8 * 128, (1, 1, 128), target=target)
    assert np.array_equal(t, up)


def test_per_token_cast_to_fp4(target):
    x = rng(42).standard_normal((9, 64)).astype(np.float32) * 4
    packed, sf = dg.per_token_cast_to_fp4(x, False, gran_k=32, target=target)
    scaled, want_sf = token_ref(x, False, gran=32, qmax=6.0)
    np.testing.assert_allclose(sf, want_sf, rtol=1e-6)
    ax = np.abs(scaled)
    code = sum((ax > b).astype(np.int64) for b in (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0))
    code |= ((scaled < 0) & (code != 0)).astype(np.int64) << 3
    want = ((code[:, 0::2] & 15) | ((code[:, 1::2] & 15) << 4)).astype(np.uint8).view(np.int8)
    assert packed.shape == (9, 32) and np.array_equal(packed, want)
