"""Held-out sweep cases: upstream example kernels first ported in the dialect4 session (host
code and float64 references written here; the kernels are the examples' own, read from the
mirror at run time by upstream_sweep.py)."""
import numpy as np

from upstream_sweep import Check, case
from upstream_cases_ascend import attn_ref

A, TL = "ascend", "tilelang"
f64 = np.float64


def rn(rng, shape, dtype="float32", scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(dtype)


def int_operands(rng, M, N, K, lo, hi):
    """a [M, K] and b [N, K] int8 (the B operand K-major) with values in [lo, hi)."""
    return (rng.integers(lo, hi, (M, K)).astype(np.int8),
            rng.integers(lo, hi, (N, K)).astype(np.int8))


# ------------------------------------------------------------------------------ tilelang-ascend

@case("asc/flash_attention/flash_attn_bhsd_cc_sync", A, "examples/flash_attention/flash_attn_bhsd_cc_sync.py",
      "D=512, S and O accumulators at L0C address 0 (annotate_address)")
def _(m, rng):
    m["B"], m["S"] = 1, 128  # module globals the factory reads (host code)
    q, k, v = (rn(rng, (1, 1, 128, 512), "float16") for _ in range(3))
    return [Check(m["flash_attention_fwd"](heads=1, dim=512), [q, k, v], {0: attn_ref(q, k, v)},
                  dtype="float16", reduce_len=512)]


@case("asc/pipeline/flash_attn_bshd_pipeline", A, "examples/pipeline/flash_attn_bshd_pipeline.py",
      "D=512, T.Pipelined, auto CV sync through workspaces")
def _(m, rng):
    m["B"], m["S"] = 1, 128
    q, k, v = (rn(rng, (1, 1, 128, 512), "float16") for _ in range(3))
    return [Check(m["flash_attention_fwd"](heads=1, dim=512), [q, k, v], {0: attn_ref(q, k, v)},
                  dtype="float16", reduce_len=512)]


def gqa_ref(q, k, v):
    rep = q.shape[1] // k.shape[1]
    return attn_ref(q, np.repeat(k, rep, 1), np.repeat(v, rep, 1))


@case("asc/flash_attention/fa_opt_auto_pipeline_h32_d512", A,
      "examples/flash_attention/fa_opt/flash_attn_bhsd_auto_pipeline_h32_d512.py",
      "GQA, D=512 split in L0-sized column panels, T.max/T.min at trace time")
def _(m, rng):
    q = rn(rng, (1, 2, 256, 512), "float16")
    k, v = (rn(rng, (1, 1, 256, 512), "float16") for _ in range(2))
    return [Check(m["flash_attention_fwd"](1, 256, 2, 1, 512), [q, k, v], {0: gqa_ref(q, k, v)},
                  dtype="float16", reduce_len=512)]



def rope_pairs(x, sin, cos):
    """Interleaved-pair rotary embedding (both rope examples' torch reference): out[2i] =
    x[2i] cos - x[2i+1] sin, out[2i+1] = x[2i+1] cos + x[2i] sin."""
    rot = np.empty_like(x)
    rot[..., 0::2], rot[..., 1::2] = -x[..., 1::2], x[..., 0::2]
    return x * cos + rot * sin


def rope_mask_check(m, rng, bsz, heads, hidden, rd):
    """In-place interleaved rope of the last rd of hidden columns, bsz x heads rows, the
    host's uint32 gather offsets."""
    block_m = max(heads, 2)
    x = rn(rng, (bsz * heads, hidden), "float16")
    sin, cos = rn(rng, (bsz, rd), "float16"), rn(rng, (bsz, rd), "float16")
    idx = np.arange(rd * (block_m // 2))
    mask = np.empty(rd * (block_m // 2), np.uint32)
    mask[0::2], mask[1::2] = idx[1::2], idx[0::2]
    mask = (mask * 4).reshape(block_m // 2, rd)
    sin_mask = np.ones(rd, np.float32)
    sin_mask[0::2] = -1
    want = x.astype(f64)
    b = np.arange(bsz * heads) // heads
    want[:, hidden - rd:] = rope_pairs(want[:, hidden - rd:], sin.astype(f64)[b], cos.astype(f64)[b])
    k = m["rope_kernel_in_place"](bsz * heads, block_m, bsz, hidden, rd, heads)
    return [Check(k, [x, sin, cos, mask, sin_mask], {("arg", 0): want}, "float16")]


@case("asc/pos_embedding/rope_mask", A, "examples/pos_embedding/rope_mask.py",
      "in place, uint32 byte-offset gather mask from the host, 3-D heads")
def _(m, rng):
    return rope_mask_check(m, rng, 4, 4, 64, 32)


@case("asc/pos_embedding/rms_rope_fused", A, "examples/pos_embedding/rms_rope_fused.py",
      "RMSNorm + rope, createvecindex/bitwise_xor/reinterpretcast mask")
def _(m, rng):
    return [rms_rope_check(m, rng, 2, 16, 64, 32, 16)]


def rms_rope_check(m, rng, bsz, heads, hd, rd, block_M, eps=1e-6):
    """rms_rope_fused(bsz * heads, block_M, bsz, hd, rd, heads, eps): RMSNorm of each row, then
    the interleaved-pair rope of its last rd columns."""
    q = rn(rng, (bsz * heads, hd), "float16")
    sin, cos = rn(rng, (bsz, rd), "float16"), rn(rng, (bsz, rd), "float16")
    x = q.astype(f64)
    x = x / np.sqrt((x * x).mean(1, keepdims=True) + eps)
    b = np.arange(bsz * heads) // heads
    x[:, hd - rd:] = rope_pairs(x[:, hd - rd:], sin.astype(f64)[b], cos.astype(f64)[b])
    k = m["rms_rope_fused"](bsz * heads, block_M, bsz, hd, rd, heads, eps)
    return Check(k, [q, sin, cos], {0: x}, "float16", hd)


@case("asc/grouped_gemm/grouped_gemm_bwd", A, "examples/grouped_gemm/example_grouped_gemm_bwd.py",
      "expert C scope, block metadata, gemm_v0 init=(k == 0), T.Parallel fill of L0C")
def _(m, rng):
    sizes, M, N, bm, bn, bk = [64, 32, 96], 64, 64, 32, 32, 32
    meta, off = [], 0
    for g, s in enumerate(sizes):
        for i in range(M // bm):
            for j in range(N // bn):
                meta.append([g, i, j, off, s // bk])
        off += s
    meta = np.array(meta, np.int32)
    a, b = rn(rng, (sum(sizes), M), "float16"), rn(rng, (sum(sizes), N), "float16")
    offs = np.cumsum([0] + sizes)
    want = np.stack([a[offs[g]:offs[g + 1]].astype(f64).T @ b[offs[g]:offs[g + 1]]
                     for g in range(len(sizes))])
    k = m["grouped_gemm_bwd"](sum(sizes), len(sizes), M, N, max(sizes) // bk, bm, bn, bk, len(meta))
    return [Check(k, [a, b, meta], {0: want}, "float16", max(sizes))]


@case("asc/quant_batch_matmul/quant_matmul", A, "examples/quant_batch_matmul/example_quant_matmul.py",
      "int8 x int8 -> int32 cube, tile.cast CAST_RINT, per-tensor / per-channel scale")
def _(m, rng):
    return quant_matmul_checks(m, rng, 64, 64, 64, (32, 64, 32), 1e-3)


def quant_matmul_checks(m, rng, M, N, K, blocks, scale_mag):
    """simple_quant_matmul(M, N, K, size, *blocks) on random int8 operands: a per-tensor scale
    ("1") to bfloat16 and a per-channel one ("N") to float16, scales of magnitude scale_mag."""
    a = rng.integers(-128, 127, (M, K)).astype(np.int8)
    b = rng.integers(-128, 127, (K, N)).astype(np.int8)
    acc = a.astype(f64) @ b.astype(f64)
    out = []
    for size, dt in (("1", "bfloat16"), ("N", "float16")):
        scale = rn(rng, (N if size == "N" else 1,)) * scale_mag
        k = m["simple_quant_matmul"](M, N, K, size, *blocks, out_dtype=dt)
        out.append(Check(k, [a, b, scale], {0: acc * scale.astype(f64)}, dt))
    return out


@case("asc/deepseek_v4/int8_gemm", A, "examples/deepseek_v4/int8_gemm.py",
      "int8 gemm, symbolic M, expert C/V scopes with a cross flag, row/column scales")
def _(m, rng):
    M, N, K = 64, 64, 64
    a, b = int_operands(rng, M, N, K, -128, 127)
    sa, sb = np.abs(rn(rng, (M,))) * 1e-2, np.abs(rn(rng, (N,))) * 1e-2
    want = (a.astype(f64) @ b.astype(f64).T) * sa.astype(f64)[:, None] * sb.astype(f64)[None, :]
    # the example's own main asks for bfloat16; with float32 out its last T.tile.cast is float32
    # -> float32 with CAST_RINT, which AscendC's Cast rounds to integral values
    k = m["int8_gemm_kernel_corrected"](N, K, out_dtype="bfloat16")
    k32 = m["int8_gemm_kernel_corrected"](N, K)
    return [Check(k, [a, b, sa, sb], {0: want}, "bfloat16"),
            Check(k32, [a, b, sa, sb], {0: np.rint(want)}, "float32", tol=(1e-5, 1e-4))]


def chunk_cumsums(x, C):
    """float64 cumulative sums within chunks of C along the last axis of x: (forward,
    reverse)."""
    c = x.astype(f64).reshape(*x.shape[:-1], x.shape[-1] // C, C)
    fwd = np.cumsum(c, -1).reshape(x.shape)
    return fwd, np.flip(np.cumsum(np.flip(c, -1), -1), -1).reshape(x.shape)


@case("asc/cumsum_kda/chunk_local_cumsum", A, "examples/cumsum_kda/example_cumsum_kda.py",
      "scalar chunk cumsum, forward and reverse, vid-indexed heads")
def _(m, rng):
    B, H, L, BT = 1, 4, 64, 16
    s = rn(rng, (B, H, L))
    fwd, rev = chunk_cumsums(s, BT)
    return [Check(m["chunk_local_cumsum_scalar_kernel"](B, H, L, BT), [s], {0: fwd}, tol=(1e-5, 1e-5)),
            Check(m["chunk_local_cumsum_scalar_kernel"](B, H, L, BT, reverse=True), [s], {0: rev},
                  tol=(1e-5, 1e-5))]


@case("asc/cumsum_kda/chunk_global_cumsum", A, "examples/cumsum_kda/example_cumsum_kda.py",
      "scalar cumsum over chunks with a carry")
def _(m, rng):
    B, H, L, BT = 1, 4, 64, 16
    s = rn(rng, (B, H, L))
    fwd = np.cumsum(s.astype(f64), -1)
    return [Check(m["chunk_global_cumsum_scalar_kernel"](B, H, L, BT), [s], {0: fwd}, tol=(1e-5, 1e-5))]


@case("asc/gemm/intrinsic_persistent", A, "examples/gemm/example_gemm_intrinsic_persistent.py",
      "expert flags with run-time event ids, T.Persistent, T.mma(init=T.And(...)), staged L1/L0 tiles")
def _(m, rng):
    M, N, K = 256, 256, 512
    a, b = rn(rng, (M, K), "float16"), rn(rng, (K, N), "float16")
    k = m["matmul"](M, N, K, 128, 128, 64, 256, 2, 2)
    return [Check(k, [a, b], {0: a.astype(f64) @ b}, "float16", K)]


@case("asc/deepseek_v4/sparse_attention", A, "examples/deepseek_v4/sparse_attention.py",
      "D=512 (S 64x64 and O 64x512 float32 in L0C), symbolic b/m/n/topk, -1 indices, attention sink")
def _(m, rng):
    import ml_dtypes
    b, mq, n, h, d, topk = 1, 4, 64, 64, 512, 96
    q = rn(rng, (b, mq, h, d)).astype(ml_dtypes.bfloat16)
    kv = rn(rng, (b, n, d)).astype(ml_dtypes.bfloat16)
    sink = rn(rng, (h,))
    idx = rng.integers(0, n, (b, mq, topk)).astype(np.int32)
    idx[0, 1, 5], idx[0, 2, 70] = -1, -1
    scale = 512 ** -0.5
    kv64 = kv.astype(f64)
    g = np.where((idx != -1)[..., None], kv64[0][np.where(idx == -1, 0, idx)[0]][None], 0.0)
    s = np.einsum("bmhd,bmkd->bmhk", q.astype(f64), g) * scale
    s = np.where((idx == -1)[:, :, None, :], -np.inf, s)
    mx = s.max(-1, keepdims=True)
    e = np.exp(s - mx)
    p = e / (e.sum(-1, keepdims=True) + np.exp(sink.astype(f64)[None, None, :, None] - mx))
    want = np.einsum("bmhk,bmkd->bmhd", p, g)
    return [Check(m["sparse_attn_kernel"](h=h, d=d, scale=scale), [q, kv, sink, idx], {0: want},
                  "bfloat16", topk)]


# ------------------------------------------------------------------------------ TileLang

@case("tl/grouped_gemm_bwd", TL, "examples/grouped_gemm/example_grouped_gemm_bwd.py",
      "eager T.const, T.Pipelined over a run-time extent, T.Parallel + if_then_else filling shared tiles")
def _(m, rng):
    sizes, M, N, bk = [64, 32, 96], 64, 64, 32
    a, b = rn(rng, (sum(sizes), M), "float16"), rn(rng, (sum(sizes), N), "float16")
    offs = np.cumsum([0] + sizes)
    want = np.stack([a[offs[g]:offs[g + 1]].astype(f64).T @ b[offs[g]:offs[g + 1]]
                     for g in range(len(sizes))])
    bs, bo = np.array(sizes, np.int32), np.array(offs[:-1], np.int32)
    return [Check(m["grouped_gemm_bwd"], [a, b, bs, bo, 32, 32, bk, 2, 128], {0: want}, "float16",
                  max(sizes))]


@case("tl/grouped_gemm_fwd_bwd_pair/fwd", TL, "examples/grouped_gemm/example_grouped_gemm_bwd.py",
      "the same file's forward: T.alloc_var search over padded offsets, guarded row stores")
def _(m, rng):
    import math
    sizes, K, N, bm = [40, 17, 64], 64, 64, 32
    a = rn(rng, (sum(sizes), K), "float16")
    b = rn(rng, (len(sizes), K, N), "float16")
    offs, pad = [0], [0]
    for s in sizes[:-1]:
        offs.append(offs[-1] + s)
        pad.append(pad[-1] + math.ceil((s + 1) / bm) * bm)
    want = np.concatenate([a[offs[g]:offs[g] + s].astype(f64) @ b[g] for g, s in enumerate(sizes)])
    args = [a, b, np.array(sizes, np.int32), np.array(offs, np.int32), np.array(pad, np.int32),
            bm, 32, 32, 2, 128]
    return [Check(m["grouped_gemm_fwd"], args, {0: want}, "float16", K)]


def block_causal_mask(seq, d):
    """The dLLM block-causal mask of TileLang's block_causal_attention (noisy half first, then
    the clean half): a noisy query sees the clean keys of earlier dLLM blocks and the noisy keys
    of its own block; a clean query sees the clean keys of its block and earlier ones."""
    half = seq // 2
    q, k = np.arange(seq)[:, None], np.arange(seq)[None, :]
    noisy_q, noisy_k = q < half, k < half
    qb, kb = (np.where(noisy_q, q, q - half) // d), (np.where(noisy_k, k, k - half) // d)
    return np.where(noisy_q, np.where(noisy_k, qb == kb, kb < qb), ~noisy_k & (kb <= qb))


@case("tl/block_causal_attention/fwd", TL, "examples/block_causal_attention/block_causal_attention.py",
      "run-time T.Pipelined extent (T.if_then_else of bx), helper returning a mask expression, LSE in log2")
def _(m, rng):
    return [block_causal_check(m, rng, 1, 256, 1, 64, 16)]


def block_causal_check(m, rng, B, S, H, D, d):
    """_fwd_template's output and log2 LSE under the dLLM block-causal mask of block d."""
    scale = D ** -0.5
    q, k, v = (rn(rng, (B, S, H, D), "float16") for _ in range(3))
    s = np.einsum("bqhd,bkhd->bhqk", q.astype(f64), k.astype(f64)) * scale
    s = np.where(block_causal_mask(S, d), s, -np.inf)
    mx = s.max(-1, keepdims=True)
    p = np.exp(s - mx)
    o = np.einsum("bhqk,bkhd->bqhd", p / p.sum(-1, keepdims=True), v.astype(f64))
    lse = (np.log(p.sum(-1)) + mx[..., 0]) / np.log(2)
    k_ = m["_fwd_template"](B, H, S, D, d, scale, dtype="float16")
    return Check(k_, [q, k, v], {0: o, 1: lse}, "float16", S)


@case("tl/block_causal_attention/bwd_preprocess", TL,
      "examples/block_causal_attention/block_causal_attention.py", "Delta = rowsum(O * dO) over dim blocks")
def _(m, rng):
    B, S, H, D = 1, 128, 2, 128
    o, do = rn(rng, (B, S, H, D), "float16"), rn(rng, (B, S, H, D), "float16")
    want = np.einsum("bshd,bshd->bhs", o.astype(f64), do.astype(f64))
    return [Check(m["_bwd_preprocess_template"](B, H, S, D, dtype="float16"), [o, do], {0: want},
                  "float16", D)]


@case("tl/hadamard_transform/hadamard", TL, "examples/hadamard_transform/example_hadamard.py",
      "GPU threads + warp shuffles (T.get_thread_binding)")
def _(m, rng):
    n = 64
    x = rn(rng, (4, n))
    h = np.array([[1.0]])
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    return [Check(m["hadamard"], [x, n, "float32"], {0: x.astype(f64) @ h})]
