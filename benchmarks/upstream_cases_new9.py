"""Sweep cases of the TileLang examples that import TVM (`from tvm import DataType, tirx`,
`from tilelang import tvm`): the dequantize-GEMM family, whose Python helpers build the
unpacking of 4-bit fields with tvm.tirx bit operations (benchmarks/upstream_compat.py rewrites
the tvm imports to tilelang_mini.tvm). The math has an Ascend meaning: unpack fp4 / int4 on the
vector side to bf16 / fp16, then a bf16 / fp16 GEMM on the cube. References are float64 and
decode fp4 (e2m1: sign, 2 exponent bits with bias 1, 1 mantissa bit) from the format's
definition; the kernels' paths that call CUDA/HIP sources (`T.import_source`,
`T.call_extern`) or per-thread (SIMT) code are expected to give located errors."""
import numpy as np

from upstream_sweep import Check, case, rn
from upstream_cases_new import TL, f64

DEQ = "examples/dequantize_gemm/"


def e2m1(code):
    """The value of fp4 e2m1 codes (OCP MX v1.0): (-1)^s * 2^(e-1) * (1 + m/2) for e > 0 and
    (-1)^s * m/2 (subnormal) for e == 0."""
    code = np.asarray(code).astype(np.int64)
    s, e, m = code >> 3, (code >> 1) & 3, code & 1
    mag = np.where(e == 0, m * 0.5, 2.0 ** (e - 1) * (1 + m / 2))
    return np.where(s == 1, -mag, mag)


def normal_codes(rng, shape):
    """Random e2m1 codes with a nonzero exponent. The examples decode every code with the
    normal-number formula (exponent bits + bias), which differs from e2m1 on the four codes
    with e == 0 (0 and 0.5 read as 0.5 and 0.75); the GEMM inputs avoid those codes and the
    conversion checks cover them separately."""
    s = rng.integers(0, 2, shape)
    e = rng.integers(1, 4, shape)
    m = rng.integers(0, 2, shape)
    return (s << 3 | e << 1 | m).astype(np.uint8)


def pack_pairs(codes):
    """4-bit codes (N, K) packed two per uint8, element 2j in the low nibble."""
    return (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8)


def example_decode(code):
    """What the examples' helpers compute for every code, e == 0 included: the normal formula
    (-1)^s * 2^(e-1) * (1 + m/2). Equal to e2m1 wherever e > 0 (checked here)."""
    code = np.asarray(code).astype(np.int64)
    s, e, m = code >> 3, (code >> 1) & 3, code & 1
    mag = 2.0 ** (e - 1) * (1 + m / 2)
    normal = e > 0
    assert np.array_equal(np.where(normal, mag, 0) * np.where(s == 1, -1, 1),
                          np.where(normal, e2m1(code), 0))
    return np.where(s == 1, -mag, mag)


@case("tl/dequantize_gemm/fp4_hopper", TL, DEQ + "example_dequant_gemm_fp4_hopper.py",
      "fp4 (e2m1, two per uint8) -> fp16 by a tvm.tirx helper, then fp16 GEMM with a transposed "
      "fp16 output; and the conversion kernel alone on all 16 codes")
def _(m, rng):
    M, N, K = 64, 64, 256
    codes = rng.integers(0, 16, (64, 128)).astype(np.uint8)
    conv = m["test_convert"](64, 128, 32, 64, "float16")
    a = rn(rng, (M, K), "float16")
    bc = normal_codes(rng, (N, K))
    want = (a.astype(f64) @ e2m1(bc).T).T
    gemm = m["matmul"](M, N, K, "float16", "float16", "float32", 4, 64, 64, 128, 2, 256, 1)
    return [Check(conv, [pack_pairs(codes)], {0: example_decode(codes)}, "float16", tol=(0, 0)),
            Check(gemm, [a, pack_pairs(bc)], {0: want}, "float16", K)]


def bf16_fp4_checks(m, rng, fast):
    M, N, K = 64, 64, 256
    a = rn(rng, (M, K), "bfloat16")
    bc = normal_codes(rng, (N, K))
    gemm = m["matmul"](M, N, K, "bfloat16", "bfloat16", "float32", "uint32", 4, fast,
                       64, 64, 128, 2, 256, 1)
    return [Check(gemm, [a, pack_pairs(bc)], {0: a.astype(f64) @ e2m1(bc).T}, "bfloat16", K)]


def mxfp4_inputs(rng, M, N, K, scale_size=32):
    """A (bf16), packed fp4 codes, per-32 exponents and a bias; the examples scale block
    (n, k // 32) by 2**Scale (`T.shift_left(1, Scale)`; their references: `B *= 2 ** Scale`,
    an unbiased exponent, not e8m0's 2**(s - 127))."""
    a = rn(rng, (M, K), "bfloat16")
    bc = normal_codes(rng, (N, K))
    scale = rng.integers(0, 4, (N, K // scale_size)).astype(np.uint8)
    bias = rn(rng, (M, N), "bfloat16")
    b = e2m1(bc) * 2.0 ** np.repeat(scale.astype(f64), scale_size, axis=1)
    return a, pack_pairs(bc), scale, bias, a.astype(f64) @ b.T


def mxfp4_checks(m, rng, fast):
    M, N, K = 64, 64, 256
    a, packed, scale, bias, want = mxfp4_inputs(rng, M, N, K)
    out = []
    for with_bias in (False, True):
        gemm = m["matmul"](M, N, K, "bfloat16", "bfloat16", "float32", num_bits=4,
                           scale_size=32, block_M=64, block_N=64, block_K=128, num_stages=2,
                           threads=256, split=1, fast_dequant=fast, with_bias=with_bias)
        out.append(Check(gemm, [a, packed, scale, bias],
                         {0: want + (bias.astype(f64) if with_bias else 0)}, "bfloat16", K))
    return out


FAST = "the fast path: CUDA source (T.import_source / T.call_extern): a located error"
for _name, _file, _checks, _fast, _what in [
        ("bf16_fp4_hopper", "bf16_fp4_hopper", bf16_fp4_checks, False,
         "fp4 -> bf16 by the simple (tvm.tirx helper) path, bf16 GEMM A @ B^T"),
        ("bf16_fp4_hopper_fast", "bf16_fp4_hopper", bf16_fp4_checks, True, FAST),
        ("bf16_mxfp4_hopper", "bf16_mxfp4_hopper", mxfp4_checks, False,
         "mxfp4: fp4 -> bf16 (tvm.tirx helper) times 2**scale per 32 columns, bf16 GEMM, with "
         "and without a bias initialising the accumulator (the simple path)"),
        ("bf16_mxfp4_hopper_fast", "bf16_mxfp4_hopper", mxfp4_checks, True, FAST),
        ("bf16_mxfp4_cdna4", "bf16_mxfp4_cdna4", mxfp4_checks, False,
         "the AMD gfx950 variant of the mxfp4 GEMM (a tvm.target.Target string), simple path")]:
    case(f"tl/dequantize_gemm/{_name}", TL, f"{DEQ}example_dequant_gemm_{_file}.py", _what)(
        lambda m, rng, checks=_checks, fast=_fast: checks(m, rng, fast))


@case("tl/dequantize_gemm/fine_grained", TL, DEQ + "example_dequant_gemm_fine_grained.py",
      "uint4 -> fp16 dequant GEMM written per thread (T.get_thread_binding index arithmetic, "
      "T.alloc_local vectors): a located SIMT error")
def _(m, rng):
    codes, a = rng.integers(0, 16, (64, 128)).astype(np.uint8), rn(rng, (64, 128), "float16")
    gemm = m["matmul"](64, 64, 128, 64, 64, 64, "float16", "float16", "float32", 2, 128)
    want = a.astype(f64) @ codes.astype(f64).T
    return [Check(gemm, [a, pack_pairs(codes).view(np.int8)], {0: want}, "float16", 128)]


BITNET = "examples/bitnet-1.58b/kernel_benchmark/"


@case("tl/bitnet/int8xint2_decode", TL, BITNET + "tilelang_bitnet_158_int8xint2_decode.py",
      "ternary (int2) weights decoded by inline CUDA (T.import_source, T.call_extern, T.dp4a) "
      "in per-thread code: a located error")
def _(m, rng):
    a, w = rng.integers(-8, 8, (1, 512)).astype(np.int8), rng.integers(-1, 2, (64, 512))
    codes = (w + 1).astype(np.uint8)  # 2 bits per weight (w + 1), four per byte, lowest first
    packed = sum(codes[:, i::4] << (2 * i) for i in range(4)).astype(np.uint8).view(np.int8)
    kern = m["bitnet_158_int8xint2_decode"](1, 64, 512, "int8", "int32", "int32")
    want = {("arg", 2): a.astype(f64) @ w.astype(f64).T}
    return [Check(kern, [a, packed, np.zeros((1, 64), np.int32)], want, "int32", tol=(0, 0))]
