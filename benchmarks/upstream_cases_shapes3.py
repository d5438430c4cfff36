"""Sweep cases: more shape variants ("<case>@shapes") of tilelang-ascend cases that
upstream_cases_shapes.py does not vary. As there: the example's own test configs / `main()`
defaults where they run in reasonable time here, else other sizes the kernel supports (tails
where the kernel clips them, more tasks than the 24 cores, batch > 1, other head counts and
dims, the dtypes the example parametrises). References are the original cases' (imported) or
written here from the operation's meaning in float64."""
import numpy as np

from upstream_sweep import Check, blocksparse_ref, case, rn
from upstream_cases_ascend import A, attn_ref, gelu_tanh, gemm_case, sigmoid
from upstream_cases_shapes import inputs, out_dtype
from upstream_cases_new2 import paged_kv

f64 = np.float64


# ---------------------------------------------------------------- activations, elementwise

for _name, _ref, _cfgs, _what in [
        ("sigmoid", sigmoid, ((256, 256, 64, 64), (300, 300, 64, 64)),
         "the script's 256^2 and 300^2 (tails in both dims) with 64x64 blocks"),
        ("silu", lambda x: x * sigmoid(x), ((300, 300, 64, 64), (1024, 2048, 128, 128)),
         "the script's 300^2 (tails) with 64x64 blocks; 1024 x 2048 with 128x128 blocks (the "
         "script: 1024 x 50176)"),
        ("tanh", np.tanh, ((300, 300, 64, 64), (1100, 1000, 128, 128)),
         "the script's 300^2 with 64x64 blocks; 1100 x 1000 with 128x128 blocks, tails in both "
         "dims (the script: 1100 x 50000)")]:
    case(f"asc/activation/{_name}@shapes", A, f"examples/activation/{_name}.py", _what)(
        lambda m, rng, name=_name, ref=_ref, cfgs=_cfgs: [
            Check(m[name](M, N, bm, bn), [a], {0: ref(a.astype(f64))}, tol=(1e-5, 1e-5))
            for M, N, bm, bn in cfgs for a in [rn(rng, (M, N))]])


@case("asc/activation/gelu_mul@shapes", A, "examples/activation/gelu_mul.py",
      "the script's configs: 256^2 with 64x64 blocks and 1024^2 with 128x128 blocks")
def _(m, rng):
    out = []
    for M, N, bm, bn in ((256, 256, 64, 64), (1024, 1024, 128, 128)):
        x = rn(rng, (M, N))
        xf = x.astype(f64)
        out.append(Check(m["gelu_mul"](M, N, bm, bn), [x],
                         {0: gelu_tanh(xf[:, :N // 2]) * xf[:, N // 2:]}, tol=(1e-4, 1e-4)))
    return out


@case("asc/activation/gelu_grad@shapes", A, "examples/activation/gelu_grad.py",
      "the script's (512, 512, 64, 256), (3184, 1712, 64, 256) and (21293, 256, 128, 128): rows "
      "and columns with tails")
def _(m, rng):
    out = []
    c = np.sqrt(2 / np.pi)
    for M, N, bm, bn in ((512, 512, 64, 256), (3184, 1712, 64, 256), (21293, 256, 128, 128)):
        dy, a = rn(rng, (M, N)), rn(rng, (M, N))
        x = a.astype(f64)
        t = np.tanh(c * (x + 0.044715 * x ** 3))
        d = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * c * (1 + 3 * 0.044715 * x * x)
        out.append(Check(m["gelu_grad"](M, N, bm, bn), [dy, a], {0: dy * d}, tol=(1e-4, 1e-4)))
    return out


@case("asc/activation/swi_glu@shapes", A, "examples/activation/swi_glu.py",
      "the script's 1024^2 with 128x128 blocks, split_dim -2 (rows) and -1 (columns)")
def _(m, rng):
    out = []
    for sd in (-2, -1):
        a = rn(rng, (1024, 1024))
        x = a.astype(f64)
        x1, x2 = (x[:512], x[512:]) if sd == -2 else (x[:, :512], x[:, 512:])
        out.append(Check(m["swi_glu"](1024, 1024, 128, 128, sd), [a],
                         {0: x1 * sigmoid(x1) * x2}, tol=(1e-5, 1e-5)))
    return out


@case("asc/activation/swi_glu_v2@shapes", A, "examples/activation/swi_glu_v2.py",
      "the script's (1024, 1024, 64, 64) bf16 and (256, 256, 64, 64) float, symbolic M, N; "
      "and its N = 18432 in bf16 at M = 128 (the script: 1024)")
def _(m, rng):
    out = []
    for M, N, dt in ((1024, 1024, "bfloat16"), (256, 256, "float"), (128, 18432, "bfloat16")):
        a = inputs(rng, (M, N), dt)
        x = a.astype(f64)
        x1, x2 = x[:, :N // 2], x[:, N // 2:]
        out.append(Check(m["swi_glu"](64, 64, 1, dtype=dt), [a], {0: x1 * sigmoid(x1) * x2},
                         out_dtype(dt)))
    return out


@case("asc/activation/swi_glu_grad@shapes", A, "examples/activation/swi_glu_grad.py",
      "the script's (1024, 1024, 64, 128) and (256, 256, 64, 128), float")
def _(m, rng):
    out = []
    for M, N in ((1024, 1024), (256, 256)):
        a, dy = rn(rng, (M, N)), rn(rng, (M, N // 2))
        x = a.astype(f64)
        x1, x2, g = x[:, :N // 2], x[:, N // 2:], dy.astype(f64)
        s = sigmoid(x1)
        dx = np.concatenate([g * x2 * s * (1 + x1 * (1 - s)), g * x1 * s], 1)
        out.append(Check(m["swi_glu_backward_db"](64, 128, 1), [a, dy], {0: dx}, tol=(1e-4, 1e-5)))
    return out


@case("asc/elementwise/elementwise_add@shapes", A, "examples/elementwise/elementwise_add.py",
      "the script's 1024^2 with 128x256 blocks")
def _(m, rng):
    a, b = rn(rng, (1024, 1024)), rn(rng, (1024, 1024))
    return [Check(m["vec_add"](1024, 1024, 128, 256), [a, b], {0: a.astype(f64) + b})]


@case("asc/pad/broadcast@shapes", A, "examples/pad/example_broadcast.py",
      "the script's M, N = 1024, 256 with block_M 128")
def _(m, rng):
    a = rn(rng, (1, 256))
    return [Check(m["broadcast"](1024, 256, 128), [a], {0: np.repeat(a.astype(f64), 1024, 0)})]


# ---------------------------------------------------------------- norms, softmax-like, scans

@case("asc/normalization/rms_norm@shapes", A, "examples/normalization/rms_norm.py",
      "the script's (1024, 1024, 128, 128, float), a bf16 config with its 64x128 blocks "
      "(2048 x 512; the script: 16384 x 512), and its N = 51200 float at M = 128 (the script: "
      "1024), forward and grad")
def _(m, rng):
    out = []
    for M, N, bm, bn, dt in ((1024, 1024, 128, 128, "float"), (2048, 512, 64, 128, "bfloat16"),
                             (128, 51200, 128, 128, "float")):
        a, dy = inputs(rng, (M, N), dt), inputs(rng, (M, N), dt)
        x, g = a.astype(f64), dy.astype(f64)
        r = 1 / np.sqrt((x * x).mean(1, keepdims=True) + 1e-5)
        dx = r * g - x * r ** 3 * (g * x).mean(1, keepdims=True)
        tol = (1e-4, 1e-4) if dt == "float" else None
        out += [Check(m["_rms_norm"](M, N, bm, bn, dtype=dt), [a], {0: x * r}, out_dtype(dt),
                      N, tol=tol),
                Check(m["_rms_norm_grad"](M, N, bm, bn, dtype=dt), [dy, a], {0: dx},
                      out_dtype(dt), N, tol=tol)]
    return out


@case("asc/pos_embedding/rms_norm@shapes", A, "examples/pos_embedding/rms_norm.py",
      "the script's q of 16 x 64 heads x 512 through its host function (1024 rows, block_M 16)")
def _(m, rng):
    q = rn(rng, (16 * 64, 512), "float16")
    x = q.astype(f64)
    want = x / np.sqrt((x * x).mean(1, keepdims=True) + 1e-6)
    return [Check(m["rms_norm"](1024, 512, 16, 1e-6), [q], {0: want}, "float16", 512)]


@case("asc/cross_entropy@shapes", A, "examples/cross_entropy_loss/example_cross_entro.py",
      "main()'s N, C = 1024 with 128x128 blocks, float16 and float32; 300 x 1000 (tails); and "
      "bfloat16 logits with int64 labels (the factory's other dtypes) at 512 x 1000")
def _(m, rng):
    out = []
    for N, C, dt, yt in ((1024, 1024, "float16", "int32"), (1024, 1024, "float32", "int32"),
                         (300, 1000, "float16", "int32"), (512, 1000, "bfloat16", "int64")):
        x = inputs(rng, (N, C), dt)
        y = rng.integers(0, C, N).astype(yt)
        xf = x.astype(f64)
        lp = xf - xf.max(1, keepdims=True)
        lp = lp - np.log(np.exp(lp).sum(1, keepdims=True))
        out.append(Check(m["cross_entropy"](N, C, 128, 128, x_dtype=dt, y_dtype=yt), [x, y],
                         {0: -lp[np.arange(N), y], 1: lp}, dt, C))
    return out


@case("asc/cumsum_gdn@shapes", A, "examples/cumsum_gdn/example_cumsum.py",
      "the script's B, H, L, C = 2, 32, 256, 32 (256 tasks), forward and reverse, "
      "with and without the fragment buffer")
def _(m, rng):
    from upstream_cases_held import chunk_cumsums
    B, H, L, C = 2, 32, 256, 32
    g = rn(rng, (B, H, L))
    fwd, rev = chunk_cumsums(g, C)
    return [Check(m["cumsum_ker"](B, H, L, C, reverse=r, use_fragment=u), [g],
                  {0: rev if r else fwd}, reduce_len=C)
            for r, u in ((False, False), (True, False), (True, True))]


# ---------------------------------------------------------------- GEMV, GEMMs

for _name in ("gemv_c", "gemv_v"):
    case(f"asc/gemv/{_name}@shapes", A, f"examples/gemv/example_{_name}.py",
         "main()'s N, K = 1024 with 128x128 blocks, float16 and float32; and 64^2 with 16x16")(
        lambda m, rng: [Check(m["simple_gemv"](N, K, bn, bk, dtype=dt), [x, a],
                              {0: a.astype(f64) @ x}, dt, K)
                        for N, K, bn, bk, dt in ((1024, 1024, 128, 128, "float16"),
                                                 (1024, 1024, 128, 128, "float32"),
                                                 (64, 64, 16, 16, "float16"))
                        for x, a in [(rn(rng, (K,), dt), rn(rng, (N, K), dt))]])


@case("asc/blocksparse_gemm@shapes", A, "examples/blocksparse_gemm/example_blocksparse_gemm.py",
      "main()'s 1024^3, sparsity 0.5, the default 128x128x32 blocks")
def _(m, rng):
    M = N = K = 1024
    a, b = rn(rng, (M, K), "float16"), rn(rng, (K, N), "float16")
    mask = (rng.random((M // 128, N // 128, K // 32)) > 0.5).astype(np.int8)
    want = blocksparse_ref(a, b, mask, 128, 128, 32)
    return [Check(m["blocksparse_matmul"](M, N, K, 128, 128, 32), [a, b, mask], {0: want},
                  dtype="float16", reduce_len=K)]


for _name, _path, _cfgs, _what in [
        ("gemm/infer_scope", "gemm/example_gemm_infer_scope.py", ((1024, 1024, 1024, 128, 256, 64),),
         "the script's 1024^3 with 128x256 blocks, K_L1 64"),
        ("gemm/persistent", "gemm/example_gemm_persistent.py", ((1024, 1024, 1024, 128, 256, 64),),
         "the script's 1024^3 with 128x256 blocks, K_L1 64 (32 tiles over 24 cores)"),
        ("gemm/pto_developer", "gemm/example_gemm_pto_developer.py",
         ((1024, 1024, 1024, 128, 256, 64),), "the script's 1024^3 with 128x256 blocks"),
        ("gemm/tail_block_developer", "gemm/example_gemm_tail_block_developer.py",
         ((126, 80, 159, 32, 32, 32), (557, 512, 539, 64, 64, 64), (512, 611, 512, 128, 128, 128),
          (1142, 1230, 1079, 128, 256, 64)),
         "the script's four configs: M, N, K with tails in every dim")]:
    case(f"asc/{_name}@shapes", A, f"examples/{_path}", _what)(
        lambda m, rng, cfgs=_cfgs: [gemm_case(m["matmul"], *c) for c in cfgs])


for _name, _dims, _what in [
        ("gemm_intrinsic", (1024, 1024, 2048), "the script's blocks (128, 256, 64, K_L1 256, "
         "2 stages) at M, N, K = 1024, 1024, 2048 (the script: 8192 x 1024 x 8192)"),
        ("intrinsic_persistent", (2048, 1024, 1024), "the script's blocks (128, 256, 64, K_L1 "
         "256, 2 stages) at M, N, K = 2048, 1024, 1024: 64 tiles over 24 persistent cores (the "
         "script: 8192 x 1024 x 8192)")]:
    case(f"asc/gemm/{_name}@shapes", A, f"examples/gemm/example_gemm_{_name.replace('gemm_', '')}.py",
         _what)(lambda m, rng, dims=_dims: [_intrinsic_check(m, rng, *dims)])


def _intrinsic_check(m, rng, M, N, K):
    """The expert intrinsic GEMMs' matmul(M, N, K, 128, 256, 64, 256, 2, 2)."""
    a, b = rn(rng, (M, K), "float16"), rn(rng, (K, N), "float16")
    return Check(m["matmul"](M, N, K, 128, 256, 64, 256, 2, 2), [a, b], {0: a.astype(f64) @ b},
                 "float16", K)


@case("asc/quant_batch_matmul/quant_matmul@shapes", A,
      "examples/quant_batch_matmul/example_quant_matmul.py",
      "main()'s 1024^3 with 128x256x64 blocks: per-tensor scale to bf16, per-channel to fp16")
def _(m, rng):
    from upstream_cases_held import quant_matmul_checks
    return quant_matmul_checks(m, rng, 1024, 1024, 1024, (128, 256, 64), 1e-4)


@case("asc/deepseek_v4/int8_gemm@shapes", A, "examples/deepseek_v4/int8_gemm.py",
      "the script's test(): 1024^3 int8 with 64x64x64 blocks, per-row absmax scales, bf16 out")
def _(m, rng):
    M = N = K = 1024

    def quant(x):
        s = np.maximum(np.abs(x).max(1, keepdims=True), 1e-4) / 127.0
        return np.clip(np.round(x / s), -128, 127).astype(np.int8), s[:, 0].astype(np.float32)
    a, sa = quant(rn(rng, (M, K)).astype(f64))
    b, sb = quant(rn(rng, (N, K)).astype(f64))
    want = (a.astype(f64) @ b.astype(f64).T) * sa.astype(f64)[:, None] * sb.astype(f64)[None, :]
    k = m["int8_gemm_kernel_corrected"](N, K, block_M=64, block_N=64, block_K=64,
                                        out_dtype=m["BF16"])
    return [Check(k, [a, b, sa, sb], {0: want}, "bfloat16")]


# ---------------------------------------------------------------- attention

def gqa_attn_ref(q, k, v):
    """Full (non-causal) attention, query head h reading KV head h // (HQ / HK)."""
    g = q.shape[1] // k.shape[1]
    return attn_ref(q, np.repeat(k, g, 1), np.repeat(v, g, 1))


def _fa_checks(make, shapes, dim, rng):
    out = []
    for B, HQ, HK, S in shapes:
        q = rn(rng, (B, HQ, S, dim), "float16")
        k, v = rn(rng, (B, HK, S, dim), "float16"), rn(rng, (B, HK, S, dim), "float16")
        out.append(Check(make(B, S, HQ, HK), [q, k, v], {0: gqa_attn_ref(q, k, v)}, "float16", S))
    return out


@case("asc/flash_attention/fa_opt_auto_pipeline_h16_d128@shapes", A,
      "examples/flash_attention/fa_opt/flash_attn_bhsd_auto_pipeline_h16_d128.py",
      "the script's dim 128, num_stages 8, cross_interval 1 (the script: 4 x 16 heads x 4096) "
      "at seq 1024 (the example asserts seq / 128 divisible by num_stages): batch 2 x 8 heads "
      "(128 tasks over the 24 cores), and GQA 8 / 2 heads; and the script's --cross-interval 2 "
      "with num_stages 4 at batch 2, GQA 4 / 2, seq 512")
def _(m, rng):
    out = _fa_checks(lambda B, S, HQ, HK: m["flash_attention_fwd"](B, S, HQ, HK, 128),
                     ((2, 8, 8, 1024), (1, 8, 2, 1024)), 128, rng)
    return out + _fa_checks(lambda B, S, HQ, HK: m["flash_attention_fwd"](
        B, S, HQ, HK, 128, num_stages=4, cross_interval=2), ((2, 4, 2, 512),), 128, rng)


@case("asc/flash_attention/fa_opt_auto_pipeline_h32_d512@shapes", A,
      "examples/flash_attention/fa_opt/flash_attn_bhsd_auto_pipeline_h32_d512.py",
      "the script's dim 512 (the script: 4 x 32 heads x 4096): batch 2, GQA 4 / 2 heads at "
      "seq 512 (64 tasks over the 24 cores)")
def _(m, rng):
    return _fa_checks(lambda B, S, HQ, HK: m["flash_attention_fwd"](B, S, HQ, HK, 512),
                      ((2, 4, 2, 512),), 512, rng)


def _global_bshd(m, B, S, H, D, rng):
    """The examples whose factory reads module globals B, S (host code sets them)."""
    m["B"], m["S"] = B, S
    q, k, v = (rn(rng, (B, H, S, D), "float16") for _ in range(3))
    return Check(m["flash_attention_fwd"](heads=H, dim=D), [q, k, v], {0: attn_ref(q, k, v)},
                 "float16", S)


@case("asc/flash_attention/flash_attn_bhsd_cc_sync@shapes", A,
      "examples/flash_attention/flash_attn_bhsd_cc_sync.py",
      "the script's dim 512 at batch 2, 2 heads, seq 256 (the script: 1 x 1 head x 128)")
def _(m, rng):
    return [_global_bshd(m, 2, 256, 2, 512, rng)]


@case("asc/pipeline/flash_attn_bshd_pipeline@shapes", A, "examples/pipeline/flash_attn_bshd_pipeline.py",
      "the script's dim 512 at batch 2, 2 heads, seq 256 (the script: 1 x 1 head x 128)")
def _(m, rng):
    return [_global_bshd(m, 2, 256, 2, 512, rng)]


@case("asc/flash_attention/paged_flash_attn_bhsd@shapes", A,
      "examples/flash_attention/paged_flash_attn_bhsd.py",
      "main()'s batch 1, 16 heads, seq 128, dim 128, block 128; batch 2, 4 heads, seq 384 "
      "over shuffled cache blocks; and check_case's block_size 64 (two cache blocks per 128-row "
      "KV tile) at batch 2, 2 heads, seq 256")
def _(m, rng):
    out = []
    for B, H, S, D, bs in ((1, 16, 128, 128, 128), (2, 4, 384, 128, 128), (2, 2, 256, 128, 64)):
        q, k, v = (rn(rng, (B, H, S, D), "float16") for _ in range(3))
        nb = S // bs
        table, kc, vc = paged_kv(rng, k, v, bs)
        kern = m["paged_flash_attention_fwd"](B, H, S, D, B * nb, nb, block_size=bs)
        out.append(Check(kern, [q, kc, vc, table], {0: attn_ref(q, k, v)}, "float16", S))
    return out


def sparse_mla_ref(q, rows, dim, scale):
    """q [S, H, Dq], rows [S, K, Dq] (the gathered KV rows): softmax(scale q . row) over the K
    rows, times their first `dim` columns (float64, BLAS matmuls)."""
    q, rows = q.astype(f64), rows.astype(f64)
    s = q @ rows.transpose(0, 2, 1) * scale
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ rows[..., :dim]


def _sparse_mla_check(m, rng, heads, dim, tail, topk, dtype="float16"):
    """The MLA-style sparse attention examples (batch 1, seq 128, seq_kv 32768 fixed in the
    factory): sparse_attention_fwd(heads, dim, tail_dim, topk, kv_stride=1)."""
    S, SKV, dq = 128, 32768, dim + tail
    q = inputs(rng, (1, S, heads, dq), dtype)
    kv = inputs(rng, (1, SKV, 1, dq), dtype)
    idx = np.stack([rng.choice(SKV, topk, replace=False) for _ in range(S)]).astype(np.int32)
    want = sparse_mla_ref(q[0], kv[0, idx, 0], dim, dq ** -0.5)[None]
    k = m["sparse_attention_fwd"](heads=heads, dim=dim, tail_dim=tail, topk=topk, kv_stride=1)
    return Check(k, [q, kv, idx.reshape(1, S, 1, topk)], {0: want}, out_dtype(dtype), topk)


for _name, _path in (
        ("sparse_flash_attention/sparse_flash_attn", "sparse_flash_attention/example_sparse_flash_attn.py"),
        ("cv/sparse_flash_attn_developer", "developer_mode/sparse_flash_attn_developer.py"),
        ("cv/sparse_flash_attn_developer_vid_reduce",
         "developer_mode/sparse_flash_attn_developer_vid_reduce.py")):
    case(f"asc/{_name}@shapes", A, f"examples/{_path}",
         "the script's dim 512, tail 64 (MLA) at 32 heads, topk 512, and at its 128 heads with "
         "topk 256 (the script: topk 2048)" + (
             "; vid_reduce (threads=2, `as (cid)`): each AIV holds and computes half of each "
             "vector tile's rows, as upstream's vid reduction" if "vid_reduce" in _name else ""))(
        lambda m, rng: [_sparse_mla_check(m, rng, 32, 512, 64, 512),
                        _sparse_mla_check(m, rng, 128, 512, 64, 256)])


@case("asc/sparse_flash_attention/sparse_flash_attn_gqa@shapes", A,
      "examples/sparse_flash_attention/example_sparse_flash_attn_gqa.py",
      "the script's 64 heads in 4 KV groups, dim 128, tail 0 at batch 2, seq 16, seq_kv 4096, "
      "topk 512 (the script: topk 2048)")
def _(m, rng):
    B, S, SKV, H, G, dim, topk = 2, 16, 4096, 64, 4, 128, 512
    q = rn(rng, (B, S, H, dim), "float16")
    kv = rn(rng, (B, SKV, G, dim), "float16")
    # indices below SKV - S: every one visible to every query row (the original case's choice)
    idx = np.stack([rng.choice(SKV - S, topk, replace=False) for _ in range(B * S * G)])
    idx = idx.reshape(B, S, G, topk).astype(np.int32)
    hg = H // G
    want = np.zeros((B, S, H, dim))
    for b in range(B):
        for g in range(G):
            rows = kv[b, idx[b, :, g], g]                              # [S, topk, dim]
            want[b, :, g * hg:(g + 1) * hg] = sparse_mla_ref(q[b, :, g * hg:(g + 1) * hg], rows,
                                                             dim, dim ** -0.5)
    k = m["sparse_attention_fwd"](heads=H, dim=dim, tail_dim=0, topk=topk, kv_stride=1, kv_group=G)
    return [Check(k, [q, kv, idx], {0: want}, "float16", topk)]


@case("asc/deepseek_v4/sparse_attention@shapes", A, "examples/deepseek_v4/sparse_attention.py",
      "the script's shape 1 (b, m, n, h, d, topk = 1, 256, 256, 64, 512, 128) with -1 indices, "
      "and its shape 2 (1, 6, 6, 16, 512, 6: topk below one 64-block)")
def _(m, rng):
    import ml_dtypes
    out = []
    for b, mq, n, h, d, topk in ((1, 256, 256, 64, 512, 128), (1, 6, 6, 16, 512, 6)):
        q = rn(rng, (b, mq, h, d)).astype(ml_dtypes.bfloat16)
        kv = rn(rng, (b, n, d)).astype(ml_dtypes.bfloat16)
        sink = rn(rng, (h,))
        idx = rng.integers(0, n, (b, mq, topk)).astype(np.int32)
        idx[0, 1, 5 % topk], idx[0, mq - 1, topk - 1] = -1, -1
        scale = d ** -0.5
        g = np.where((idx != -1)[..., None], kv.astype(f64)[0][np.where(idx == -1, 0, idx)[0]][None], 0.0)
        s = (q.astype(f64) @ g.transpose(0, 1, 3, 2)) * scale           # [b, m, h, topk]
        s = np.where((idx == -1)[:, :, None, :], -np.inf, s)
        mx = s.max(-1, keepdims=True)
        e = np.exp(s - mx)
        p = e / (e.sum(-1, keepdims=True) + np.exp(sink.astype(f64)[None, None, :, None] - mx))
        out.append(Check(m["sparse_attn_kernel"](h=h, d=d, scale=scale), [q, kv, sink, idx],
                         {0: p @ g}, "bfloat16", topk))
    return out


@case("asc/hisa/block_sparse_mqa_attn_expert@shapes", A, "examples/HISA/block_sparse_mqa_attn_expert_test.py",
      "the script's defaults: seq 32, seq_kv 128K, 32 heads, index_dim 128, KV blocks of 128, "
      "topk 64, 16 pairs; its window ends (i + 1) * seq_kv / seq and random block indices. "
      "Expected outcome: race, the example's own (as its original case, see "
      "docs/tilelang_compat.md: MTE1's copy into l0a waits only for SIG_L0AB_0 while the cube "
      "may still read l0a for the mma that sets SIG_L0AB_1)")
def _(m, rng):
    S, SKV, H, D, KV, TOPK, PAIRS = 32, 128 * 1024, 32, 128, 128, 64, 16
    k = m["block_sparse_mqa_attn_return_logits"](S, SKV, KV, TOPK, H, D, num_pairs=PAIRS)
    q = rng.random((S, H, D)).astype(np.float16)
    kk = rng.random((SKV, D)).astype(np.float16)
    w = rng.random((S, H)).astype(np.float16)
    ks = np.zeros(S, np.int32)
    ke = np.minimum(np.arange(1, S + 1) * (SKV // S), SKV).astype(np.int32)
    idx = rng.integers(0, SKV // KV, (S, TOPK)).astype(np.int32)
    pos = idx[:, :, None] * KV + np.arange(KV)                      # (S, TOPK, KV)
    kf, qf = kk.astype(f64), q.astype(f64)
    logits = np.stack([np.maximum(kf[pos[s]] @ qf[s].T, 0) @ w[s].astype(f64) for s in range(S)])
    bad = (pos < ks[:, None, None]) | (pos >= ke[:, None, None])
    want = np.where(bad, -np.inf, logits)

    def cmp(got, want):
        g = got.astype(f64).reshape(want.shape)
        assert np.array_equal(np.isinf(g), np.isinf(want)), "masked positions differ"
        fin = ~np.isinf(want)
        assert np.allclose(g[fin], want[fin], rtol=2e-3, atol=2e-3 * D), \
            f"max abs err {np.abs(g[fin] - want[fin]).max():.3g}"
    return [Check(k, [q, kk, idx, w, ks, ke], {0: want}, compare=cmp)]


@case("asc/lightning_indexer@shapes", A, "examples/lightning_indexer/example_lightning_indexer.py",
      "the script's B, N2, G, D = 2, 1, 32, 64 and its blocks (256, 16, 64, 64, 64) at S1 128, "
      "S2 1024, TOP_K 256 (the script: S1 512, S2 4096, TOP_K 1024)")
def _(m, rng):
    from upstream_cases_ascend import indexer_checks
    return indexer_checks(rng, lambda B, N2, G, S1, S2, D, K: m["indexer"](
        B, N2, G, S1, S2, D, K, 256, 16, 64, 64, 64), dims=(2, 1, 32, 128, 1024, 64, 256))


# ---------------------------------------------------------------- linear attention, conv

@case("asc/linear_attention_causal@shapes", A,
      "examples/linear_attention_and_rnn/linear_attention_causal.py",
      "the script's (B, H, L, D, C) = (32, 2, 128, 128, 64) (64 work items over its 24 cores) "
      "and (1, 2, 1024, 128, 64), unit-norm q and k as the script makes them")
def _(m, rng):
    m["core_num"] = 24  # host code: the script's fallback core count
    out = []
    for B, H, L, D, C in ((32, 2, 128, 128, 64), (1, 2, 1024, 128, 64)):
        q, k, v = (rn(rng, (B, H, L, D)) for _ in range(3))
        q = (q / (np.sqrt((q * q).sum(-1, keepdims=True)) + 1e-6)).astype(np.float16)
        k = (k / (np.sqrt((k * k).sum(-1, keepdims=True)) + 1e-6)).astype(np.float16)
        v = v.astype(np.float16)
        s = (q.astype(f64) @ k.astype(f64).transpose(0, 1, 3, 2)) * np.tril(np.ones((L, L)))
        out.append(Check(m["linear_attention_ker"](H, D, C), [q, k, v], {0: s @ v.astype(f64)},
                         "float16", L))
    return out


def _conv1d_case(m, rng):
    from upstream_cases_new6 import causal_conv1d_ref
    dim, width = 2048, 4
    cu = np.array([0, 662, 2048], np.int32)
    slots, init = np.array([0, 1], np.int32), np.array([1, 1], np.int32)
    out = []
    for dt in ("float16", "bfloat16"):
        x = inputs(rng, (2048, dim), dt)
        w = inputs(rng, (width, dim), dt)
        cs = inputs(rng, (804, width - 1, dim), dt)
        y, state = causal_conv1d_ref(x, w, cs, cu, slots, init)
        kern = m["_build_kernel"](width, m["CORE_NUM"], 2, dim, dt)
        out.append(Check(kern, [x, w, cs, cu, slots, init], {0: y, ("arg", 2): state}, dt,
                         2 * width))
    return out


# ---------------------------------------------------------------- block-sparse attention, GDN

@case("asc/seer_attention/block_sparse_attn@shapes", A, "examples/seer_attention/block_sparse_attn.py",
      "the script's test: batch 4, 2 heads, seq 256, dim 64, top-2 block mask with the first "
      "block column always on, causal")
def _(m, rng):
    from upstream_cases_new import masked_attn_ref
    B, H, S, D, blk, topk = 4, 2, 256, 64, 64, 2
    ds = S // blk
    q, k, v = (rn(rng, (B, H, S, D), "float16") for _ in range(3))
    x = rng.standard_normal((B, H, ds, ds))
    x[..., 0] = 100
    top = np.argsort(-x, -1)[..., :topk]
    mask = np.zeros((B, H, ds, ds), np.int8)
    np.put_along_axis(mask, top, 1, -1)
    allowed = np.kron(mask, np.ones((blk, blk))).astype(bool) & np.tril(np.ones((S, S), bool))
    kern = m["blocksparse_flashattn_ascend"](B, H, S, S, D, ds, is_causal=True)
    return [Check(kern, [q, k, v, mask], {0: masked_attn_ref(q, k, v, allowed)}, "float16", S)]


@case("asc/gdn/chunk_scaled_dot_kkt@shapes", A,
      "examples/linear_attention_and_rnn/gdn/gdn_chunk_scaled_dot_kkt.py",
      "the script's (B, H, L, DK, C, BK) = (2, 32, 256, 64, 32, 32), g standard normal as there")
def _(m, rng):
    B, H, L, DK, C, BK = 2, 32, 256, 64, 32, 32
    k = rn(rng, (B, H, L, DK), "float16")
    beta = rn(rng, (B, H, L), "float16")
    g = rn(rng, (B, H, L))
    msk = np.tril(np.ones((C, C)), -1).astype(np.float32)
    want = np.zeros((B, H, L, C))
    for c in range(L // C):
        sl = slice(c * C, (c + 1) * C)
        kk = k[:, :, sl].astype(f64)
        a = kk @ kk.transpose(0, 1, 3, 2) * beta[:, :, sl, None].astype(f64)
        a *= np.exp(g[:, :, sl, None].astype(f64) - g[:, :, None, sl].astype(f64))
        want[:, :, sl] = a * np.tril(np.ones((C, C)), -1)
    return [Check(m["kkt_ker"](B, H, L, DK, C, BK), [k, beta, g, msk], {0: want}, "float16", DK)]


for _name, _path, _dims in (("gdn/chunk_cumsum", "gdn/gdn_chunk_cumsum.py", (2, 32, 256, 32)),
                            ("opt_gdn/chunk_cumsum", "opt_gdn/opt_gdn_chunk_cumsum.py",
                             (2, 16, 16384, 128))):
    case(f"asc/{_name}@shapes", A, f"examples/linear_attention_and_rnn/{_path}",
         f"the script's (B, H, L, C) = {_dims}")(
        lambda m, rng, dims=_dims: [
            Check(m["cumsum_ker"](*dims), [g], {0: np.cumsum(g.astype(f64).reshape(
                *dims[:2], dims[2] // dims[3], dims[3]), -1).reshape(g.shape)}, reduce_len=dims[3])
            for g in [rn(rng, dims[:3])]])


@case("asc/hisa/paged_block_sparse_mqa@shapes", A, "examples/HISA/paged_block_sparse_mqa_attn_expert.py",
      "the script's decode defaults (seq 1, 1024 physical blocks of 128, 32 heads, index_dim 128, "
      "topk 64, 256 table entries) at batch 4 with shuffled block tables and random context lengths")
def _(m, rng):
    from upstream_cases_hisa import hisa_logits
    B, S, NPB, H, D, KV, TOPK, MAXB = 4, 1, 1024, 32, 128, 128, 64, 256
    T_ = B * S
    q = rng.random((T_, H, D)).astype(np.float16)
    cache = rng.random((NPB, KV, 1, D)).astype(np.float16)
    w = rng.random((T_, H)).astype(np.float16)
    ctx = rng.integers(KV, MAXB * KV + 1, B).astype(np.int32)
    tables = np.stack([rng.choice(NPB, MAXB, replace=False) for _ in range(B)]).astype(np.int32)
    nlog = (ctx.max() + KV - 1) // KV
    idx = rng.integers(0, nlog, (T_, TOPK)).astype(np.int32)
    batch = np.arange(T_) // S
    phys = tables[batch[:, None], idx]
    want = hisa_logits(q, cache[phys, :, 0, :], w, np.zeros(T_, np.int64), ctx[batch], idx * KV)
    kern = m["paged_block_sparse_mqa_attn_return_logits"](B, S, NPB, KV, TOPK, H, D, MAXB)
    return [Check(kern, [q, cache, idx, w, ctx, tables], {0: want}, reduce_len=D * H,
                  tol=(2e-3, 2e-3))]


@case("asc/grouped_gemm/grouped_gemm_fwd@shapes", A, "examples/grouped_gemm/example_grouped_gemm_fwd.py",
      "the script's groups [64, 128, 256] with 64x64x64 blocks at K = N = 1024 (112 tiles over "
      "the 24 cores; the script: 8192). Its groups with partial blocks ([100, 200, 300, 400]) are "
      "left out: the example copies whole block_M-row tiles out ('tail handling is not supported "
      "yet'), overwriting the next group's rows")
def _(m, rng):
    sizes, K, N, bm = (64, 128, 256), 1024, 1024, 64
    a = rn(rng, (sum(sizes), K), "float16")
    b = rn(rng, (len(sizes), K, N), "float16")
    meta, off = [], 0
    want = np.zeros((sum(sizes), N))
    for g, sz in enumerate(sizes):
        for i in range(0, sz, bm):
            meta.append([g, off + i, min(bm, sz - i)])
        want[off:off + sz] = a[off:off + sz].astype(f64) @ b[g].astype(f64)
        off += sz
    kern = m["grouped_gemm"](sizes, K, N, bm, 64, 64)
    return [Check(kern, [a, b, np.array(meta, np.int32)], {0: want}, "float16", K)]


for _name in ("causal_conv1d", "causal_conv1d_pto"):
    case(f"asc/causal_conv1d/{_name}@shapes", A, f"examples/causal_conv1d/{_name}.py",
         "the script's _run_test: dim 2048, width 4, sequences of 662 and 1386 tokens with "
         "initial states in cache lines 0 and 1 (of 804), its CORE_NUM blocks; float16 and "
         "bfloat16. Expected outcome: race, the example's own (as its original case, see "
         "docs/tilelang_compat.md: V's fill of hist0 and MTE2's load of the cache line into it "
         "are not ordered)")(_conv1d_case)


@case("asc/xllm/fused_gdn_gating@shapes", A, "examples/xllm_kernels/fused_gdn_gating.py",
      "the script's reference-check lists: batches 275, 4096 and 1 with 4, 24 and 8 heads, each "
      "compiled for its own batch count as the script does; beta 1, threshold 20")
def _(m, rng):
    import ml_dtypes
    from upstream_cases_new import softplus
    checks = []
    for nb, nh in ((275, 4), (4096, 24), (1, 8)):
        A_log, dt_bias = rn(rng, (nh,)), rn(rng, (nh,))
        a = rn(rng, (nb, nh)).astype(ml_dtypes.bfloat16)
        b = rn(rng, (nb, nh)).astype(ml_dtypes.bfloat16)
        g = np.zeros((nb, nh), np.float32)
        beta = np.zeros((nb, nh), ml_dtypes.bfloat16)
        want_g = -np.exp(A_log.astype(f64)) * softplus(a.astype(f64) + dt_bias, 1.0, 20.0)
        k = m["fused_gdn_gating_kernel_jit"](num_batches=nb, compile_max_batch=nb, num_heads=nh)
        checks.append(Check(k, [A_log, a, b, dt_bias, g, beta, nb, 1.0, 20.0],
                            {("arg", 4): want_g, ("arg", 5): sigmoid(b.astype(f64))},
                            compare=_gating_cmp))
    return checks


def _gating_cmp(got, want):
    """g in float32 (rtol 1e-4), beta in bfloat16 (rtol 2^-7)."""
    tol = (1e-4, 1e-4) if got.dtype == np.float32 else (2 ** -7, 2 ** -8)
    np.testing.assert_allclose(got.astype(f64), want, rtol=tol[0], atol=tol[1])


@case("asc/gdn/wy_fast@shapes", A, "examples/linear_attention_and_rnn/gdn/gdn_wy_fast.py",
      "the script's (B, H, L, DK, DV, C, BK, BV) = (2, 32, 256, 64, 64, 32, 32, 32)")
def _(m, rng):
    from upstream_cases_new3 import wy_fast_checks
    return wy_fast_checks(m, rng, 32, 32, dims=(2, 32, 256, 64, 64, 32))


@case("asc/gdn/solve_tril@shapes", A, "examples/linear_attention_and_rnn/gdn/gdn_solve_tril.py",
      "the script's (B, H, L, C) = (2, 32, 256, 32), A from the gated K K^T of the original case's "
      "inputs")
def _(m, rng):
    from upstream_cases_new3 import asc_gdn_inputs, asc_kkt
    B, H, L, DK, C = 2, 32, 256, 64, 32
    k, beta, g = asc_gdn_inputs(rng, B, H, L, DK, C)
    a = asc_kkt(k, beta, g, C)
    want = np.zeros((B, H, L, C))
    for c in range(L // C):
        r = slice(c * C, (c + 1) * C)
        want[:, :, r] = np.linalg.inv(np.eye(C) + a[:, :, r].astype(f64))
    return [Check(m["solve_tril_ker"](B, H, L, C), [a, np.eye(C, dtype=np.float32)], {0: want},
                  "float16", C)]
