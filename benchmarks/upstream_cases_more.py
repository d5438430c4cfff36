"""Sweep cases added for breadth (held-out coverage): more TileLang and tilelang-ascend example
kernels (host code and float64 references written here; the kernels are the examples' own, read
from the mirror at run time by upstream_sweep.py)."""
import numpy as np

from upstream_sweep import Check, case

A, TL = "ascend", "tilelang"
f64 = np.float64


def rn(rng, shape, dtype="float32", scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(dtype)


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def bf16(x):
    import ml_dtypes
    return x.astype(ml_dtypes.bfloat16)


# ------------------------------------------------------------------------------ tilelang-ascend

@case("asc/activation/swi_glu_v2", A, "examples/activation/swi_glu_v2.py", "symbolic M, N; fp32/bf16")
def _(m, rng):
    out = []
    for dt in ("float", "bfloat16"):
        a = rn(rng, (64, 128))
        a = bf16(a) if dt == "bfloat16" else a
        x = a.astype(f64)
        x1, x2 = x[:, :64], x[:, 64:]
        out.append(Check(m["swi_glu"](32, 32, 1, dtype=dt), [a], {0: x1 * sigmoid(x1) * x2},
                         "bfloat16" if dt == "bfloat16" else "float32"))
    return out


@case("asc/activation/swi_glu_grad", A, "examples/activation/swi_glu_grad.py", "backward, fp32")
def _(m, rng):
    a, dy = rn(rng, (64, 128)), rn(rng, (64, 64))
    x = a.astype(f64)
    x1, x2, g = x[:, :64], x[:, 64:], dy.astype(f64)
    s = sigmoid(x1)
    dx1 = g * x2 * s * (1 + x1 * (1 - s))
    dx2 = g * x1 * s
    return [Check(m["swi_glu_backward_db"](32, 32, 1), [a, dy],
                  {0: np.concatenate([dx1, dx2], 1)}, tol=(1e-4, 1e-5))]


@case("asc/activation/sigmoidv2_slice", A, "examples/activation/sigmoidv2_slice.py", "row slices")
def _(m, rng):
    a = rn(rng, (4, 8))
    return [Check(m["sigmoidv2"](), [a], {0: sigmoid(a.astype(f64))})]


@case("asc/reduce/row_reduce_max_slice", A, "examples/reduce/example_row_reduce_max_slice_buffer.py",
      "reduce_max(real_shape=)")
def _(m, rng):
    a = rn(rng, (4, 8))

    def cmp(got, want):
        np.testing.assert_allclose(got[0, :4], a[:, :4].astype(f64).max(1), rtol=1e-6)
    return [Check(m["reduce_max_slice_buffer"](), [a], {0: np.zeros((1, 8))}, compare=cmp)]


@case("asc/reduce/col_reduce_max_slice", A, "examples/reduce/example_col_reduce_max_slice_buffer.py",
      "reduce_max(dim=0, real_shape=)")
def _(m, rng):
    a = rn(rng, (5, 8))
    return [Check(m["reduce_max_slice_buffer"](), [a], {0: a[:3].astype(f64).max(0, keepdims=True)})]


@case("asc/simple_fusion/matmul_add_infer_scope", A,
      "examples/simple_fusion/matmul_add_infer_scope.py", "alloc_shared/fragment, developer mode")
def _(m, rng):
    a, b, d = rn(rng, (128, 64), "float16"), rn(rng, (64, 256), "float16"), rn(rng, (128, 256), "float16")
    return [Check(m["matmul_add"](128, 256, 64, 64, 128, 32), [a, b, d],
                  {0: a.astype(f64) @ b + d}, "float16", 64)]


@case("asc/pipeline/matmul_add_pipeline", A, "examples/pipeline/matmul_add_pipeline.py",
      "workspace_idx, auto CV sync")
def _(m, rng):
    a, b, d = rn(rng, (128, 64), "float16"), rn(rng, (64, 256), "float16"), rn(rng, (128, 256), "float16")
    return [Check(m["matmul_add"](128, 256, 64, 64, 128, 32), [a, b, d],
                  {0: a.astype(f64) @ b + d}, "float16", 64)]


@case("asc/pad/broadcast_pipeline", A, "examples/pad/example_broadcast_pipeline.py")
def _(m, rng):
    a = rn(rng, (1, 64))
    return [Check(m["broadcast_pipeline"](64, 64, 32, 16), [a], {0: np.repeat(a.astype(f64), 64, 0)})]


@case("asc/gemm/gemm_intrinsic", A, "examples/gemm/example_gemm_intrinsic.py",
      "expert mode, macros of flags, L1/L0 ping-pong")
def _(m, rng):
    a, b = rn(rng, (256, 256), "float16"), rn(rng, (256, 512), "float16")
    return [Check(m["matmul"](256, 512, 256, 128, 256, 64, 256, 2, 2), [a, b],
                  {0: a.astype(f64) @ b}, "float16", 256)]


# ------------------------------------------------------------------------------------- TileLang

@case("tl/gemm_splitk/vectorize_atomicadd", TL,
      "examples/gemm_splitk/example_tilelang_gemm_splitk_vectorize_atomicadd.py", "eager, C in place")
def _(m, rng):
    a, b = rn(rng, (128, 256), "float16"), rn(rng, (256, 128), "float16")
    c = np.zeros((128, 128), np.float32)
    return [Check(m["matmul"], [a, b, c, 64, 64, 32, 4], {("arg", 2): a.astype(f64) @ b},
                  "float16", 256)]


def mhc_post_check(m, rng, n, hc, h):
    """mHC post mixing of n tokens, hc streams of width h: c * d + sum_i a[i, o] * b[i]."""
    a, c = rn(rng, (n, hc, hc)), rn(rng, (n, hc))
    b, d = bf16(rn(rng, (n, hc, h))), bf16(rn(rng, (n, h)))
    x = bf16(np.zeros((n, hc, h), np.float32))
    want = c.astype(f64)[:, :, None] * d.astype(f64)[:, None, :] + np.einsum(
        "nio,nih->noh", a.astype(f64), b.astype(f64))
    return [Check(m["mhc_post_tilelang"], [a, b, c, d, x, hc, h, 128, 128], {("arg", 4): want},
                  "bfloat16", hc)]


@case("tl/deepseek_mhc/mhc_post", TL, "examples/deepseek_mhc/example_mhc_post.py",
      "eager, T.dynamic tokens, serial loop in a T.Parallel body")
def _(m, rng):
    return mhc_post_check(m, rng, 4, 4, 256)


@case("tl/gemm/autotune_matmul", TL, "examples/gemm/example_gemm_autotune.py",
      "the tuned kernel with a fixed config (B transposed, use_swizzle(enable=))")
def _(m, rng):
    a, b = rn(rng, (128, 64), "float16"), rn(rng, (192, 64), "float16")
    return [Check(m["matmul"](128, 192, 64, 64, 64, 32, 2, 128, True), [a, b],
                  {0: a.astype(f64) @ b.astype(f64).T}, "float16", 64)]


@case("asc/linear_attention_normalize", A,
      "examples/linear_attention_and_rnn/linear_attention_normalize.py", "K^T V and column sums")
def _(m, rng):
    B, H, L, D = 1, 2, 64, 32
    k, v = rn(rng, (B, H, L, D), "float16", 0.5), rn(rng, (B, H, L, D), "float16", 0.5)
    kf, vf = k.astype(f64), v.astype(f64)
    want = np.concatenate([np.einsum("bhld,bhle->bhde", kf, vf), kf.sum(2)[:, :, None, :]], 2)
    return [Check(m["linear_attention_ker1"](B, H, L, D, 32, 32), [k, v], {0: want}, "float16", L)]


def gqa_decode_ref(q, k, v, mask):
    """q [b, heads, d], k/v [b, s, groups, d], mask [b, s, groups]: masked softmax attention,
    query head h reads kv group h // (heads // groups)."""
    b, heads, d = q.shape
    groups = k.shape[2]
    g_of = np.arange(heads) // (heads // groups)
    kk, vv = k.astype(f64)[:, :, g_of], v.astype(f64)[:, :, g_of]        # [b, s, heads, d]
    s = np.einsum("bhd,bshd->bhs", q.astype(f64), kk) / np.sqrt(d)
    s = np.where(mask[:, :, g_of].transpose(0, 2, 1) != 0, s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return np.einsum("bhs,bshd->bhd", p, vv)


@case("tl/flash_decoding/gqa_decode", TL, "examples/flash_decoding/example_gqa_decode.py",
      "autotune over a factory, split + combine launches, uint8 mask")
def _(m, rng):
    return gqa_decode_checks(m, rng, 1, 8, 2, 256, 64, (1, 2))


def gqa_decode_checks(m, rng, B, H, G, S, D, splits):
    """flashattn(B, H, G, S, D, 64, 64, split, 2, 128) of the GQA decode example for each split,
    with a random uint8 KV mask (the first position kept)."""
    q, k, v = rn(rng, (B, H, D), "float16"), rn(rng, (B, S, G, D), "float16"), rn(rng, (B, S, G, D), "float16")
    mask = (rng.random((B, S, G)) < 0.8).astype(np.uint8)
    mask[:, 0] = 1
    want = gqa_decode_ref(q, k, v, mask)
    return [Check(m["flashattn"](B, H, G, S, D, 64, 64, split, 2, 128), [q, k, v, mask], {0: want},
                  "float16", S) for split in splits]


@case("asc/dequantize_gemm/fine_grained", A, "examples/dequantize_gemm/example_dequant_gemm_fine_grained.py",
      "fp16 and int8 cube GEMMs (the int4 unpacking is host code)")
def _(m, rng):
    a, b = rn(rng, (64, 128), "float16"), rn(rng, (128, 64), "float16")
    ai = rng.integers(-8, 8, (64, 128)).astype(np.int8)
    bi = rng.integers(0, 16, (128, 64)).astype(np.int8)
    return [Check(m["fp16_gemm"](64, 64, 128, 32, 32, 64), [a, b], {0: a.astype(f64) @ b}, "float16", 128),
            Check(m["int8_gemm"](64, 64, 128, 32, 32, 64), [ai, bi], {0: ai.astype(f64) @ bi},
                  tol=(0, 0))]
