"""Sweep cases: tilelang-ascend example kernels (host code and float64 references written here;
the kernels are the examples' own, read from the mirror at run time by upstream_sweep.py)."""
import numpy as np

from upstream_sweep import Check, blocksparse_ref, case, rn

A = "ascend"
f64 = np.float64


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


@case("asc/activation/sigmoid", A, "examples/activation/sigmoid.py")
def _(m, rng):
    a = rn(rng, (128, 128))
    return [Check(m["sigmoid"](128, 128, 64, 64), [a], {0: sigmoid(a.astype(f64))})]


@case("asc/activation/silu", A, "examples/activation/silu.py")
def _(m, rng):
    a = rn(rng, (128, 192))
    x = a.astype(f64)
    return [Check(m["silu"](128, 192, 64, 64), [a], {0: x * sigmoid(x)})]


@case("asc/activation/tanh", A, "examples/activation/tanh.py")
def _(m, rng):
    a = rn(rng, (128, 128))
    return [Check(m["tanh"](128, 128, 64, 64), [a], {0: np.tanh(a.astype(f64))})]


def gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def gelu_mul_case(m, rng, M, N, bm, bn):
    """gelu_mul(M, N, ...): Y = gelu(X[:, :N/2]) * X[:, N/2:] for X (M, N)."""
    a = rn(rng, (M, N))
    x = a.astype(f64)
    return Check(m["gelu_mul"](M, N, bm, bn), [a],
                 {0: gelu_tanh(x[:, :N // 2]) * x[:, N // 2:]}, tol=(1e-4, 1e-4))


@case("asc/activation/gelu_mul", A, "examples/activation/gelu_mul.py")
def _(m, rng):
    return [gelu_mul_case(m, rng, 128, 256, 64, 64)]


@case("asc/activation/swi_glu", A, "examples/activation/swi_glu.py")
def _(m, rng):
    a = rn(rng, (128, 256))
    x = a.astype(f64)
    return [Check(m["swi_glu"](128, 256, 64, 64, 1), [a],
                  {0: x[:, :128] * sigmoid(x[:, :128]) * x[:, 128:]}),
            Check(m["swi_glu"](128, 256, 32, 64, 0), [a],
                  {0: x[:64] * sigmoid(x[:64]) * x[64:]})]


@case("asc/elementwise/elementwise_add", A, "examples/elementwise/elementwise_add.py")
def _(m, rng):
    a, b = rn(rng, (128, 256)), rn(rng, (128, 256))
    return [Check(m["vec_add"](128, 256, 64, 128), [a, b], {0: a.astype(f64) + b})]


def gemm_case(factory, M, N, K, bm, bn, bk, out="float16", trans_b=False):
    rng = np.random.default_rng(1)
    a = rn(rng, (M, K), "float16")
    b = rn(rng, (N, K) if trans_b else (K, N), "float16")
    bb = b.astype(f64).T if trans_b else b.astype(f64)
    return Check(factory(M, N, K, bm, bn, bk), [a, b], {0: a.astype(f64) @ bb}, dtype=out,
                 reduce_len=K)


@case("asc/gemm/example_gemm", A, "examples/gemm/example_gemm.py", "expert gemm_v0")
def _(m, rng):
    return [gemm_case(m["matmul"], 128, 256, 192, 64, 128, 64)]


@case("asc/gemm/example_gemm_transpose_l1", A, "examples/gemm/example_gemm_transpose_l1.py")
def _(m, rng):
    return [gemm_case(m["matmul"], 128, 128, 128, 64, 64, 64, trans_b=True)]


@case("asc/developer_mode/gemm_developer", A, "examples/developer_mode/gemm_developer.py")
def _(m, rng):
    return [gemm_case(m["matmul"], 128, 256, 192, 64, 128, 64)]


@case("asc/batch_gemm", A, "examples/batch_gemm/batch_gemm.py")
def _(m, rng):
    a, b = rn(rng, (2, 64, 96), "float16"), rn(rng, (2, 96, 128), "float16")
    return [Check(m["batch_matmul"](2, 64, 128, 96, 32, 64, 32), [a, b],
                  {0: a.astype(f64) @ b.astype(f64)}, dtype="float16", reduce_len=96)]


@case("asc/developer_mode/matmul_add", A, "examples/developer_mode/matmul_add_developer.py")
def _(m, rng):
    a, b, d = rn(rng, (128, 64), "float16"), rn(rng, (64, 256), "float16"), rn(rng, (128, 256), "float16")
    k = m["matmul_add"](128, 256, 64, 64, 128, 32)
    return [Check(k, [a, b, d], {0: a.astype(f64) @ b.astype(f64) + d}, dtype="float16",
                  reduce_len=64)]


@case("asc/developer_mode/gelu_mul", A, "examples/developer_mode/gelu_mul_developer.py")
def _(m, rng):
    return [gelu_mul_case(m, rng, 64, 128, 32, 64)]


def attn_ref(q, k, v, scale=None, causal=False):
    q, k, v = (t.astype(f64) for t in (q, k, v))
    s = np.einsum("bhsd,bhkd->bhsk", q, k) * (scale or q.shape[-1] ** -0.5)
    if causal:
        n = s.shape[-1]
        s = np.where(np.tril(np.ones((s.shape[-2], n), bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return np.einsum("bhsk,bhkd->bhsd", p / p.sum(-1, keepdims=True), v)


@case("asc/developer_mode/flash_attn_bshd", A, "examples/developer_mode/flash_attn_bshd_developer.py")
def _(m, rng):
    m["B"], m["S"] = 1, 128  # the factory reads these module globals (host code)
    q, k, v = (rn(rng, (1, 2, 128, 64), "float16") for _ in range(3))
    return [Check(m["flash_attention_fwd"](heads=2, dim=64), [q, k, v], {0: attn_ref(q, k, v)},
                  dtype="float16", reduce_len=128)]


@case("asc/flash_attention/flash_attn_bhsd", A, "examples/flash_attention/flash_attn_bhsd.py")
def _(m, rng):
    import inspect
    sig = inspect.signature(m["flash_attention_fwd"].factory)
    q, k, v = (rn(rng, (1, 2, 128, 64), "float16") for _ in range(3))
    kw = dict(batch=1, heads=2, seq_len=128, dim=64)
    kw = {n: kw[n] for n in sig.parameters if n in kw}
    return [Check(m["flash_attention_fwd"](**kw), [q, k, v], {0: attn_ref(q, k, v)},
                  dtype="float16", reduce_len=128)]


@case("asc/normalization/layer_norm", A, "examples/normalization/layer_norm.py")
def _(m, rng):
    a = rn(rng, (64, 256))
    return [Check(m["layer_norm"](64, 256, 32, 128), [a], {0: layer_norm_ref(a)}, tol=(1e-4, 1e-4))]


def layer_norm_ref(a):
    """Rows normalised to mean 0, variance 1 (eps 1e-5), no affine (float64)."""
    x = a.astype(f64)
    return (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-5)


def softmax_ref(a):
    """Row softmax (float64)."""
    x = a.astype(f64)
    e = np.exp(x - x.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


@case("asc/normalization/rms_norm", A, "examples/normalization/rms_norm.py", "fwd + grad")
def _(m, rng):
    a, dy = rn(rng, (64, 256)), rn(rng, (64, 256))
    x, g = a.astype(f64), dy.astype(f64)
    r = 1 / np.sqrt((x * x).mean(1, keepdims=True) + 1e-5)
    dx = r * g - x * r ** 3 * (g * x).mean(1, keepdims=True)
    return [Check(m["_rms_norm"](64, 256, 32, 64), [a], {0: x * r}, tol=(1e-4, 1e-4)),
            Check(m["_rms_norm_grad"](64, 256, 32, 64), [dy, a], {0: dx}, tol=(1e-4, 1e-4))]


@case("asc/softmax/online_softmax", A, "examples/softmax/example_online_softmax.py")
def _(m, rng):
    a = rn(rng, (64, 320))
    return [Check(m["online_softmax"](64, 320, 32, 128), [a], {0: softmax_ref(a)})]


@case("asc/reduce/reduce_min", A, "examples/reduce/example_reduce_min.py")
def _(m, rng):
    a = rn(rng, (128, 64))
    return [Check(m["reduce_min"](128, 64, 32), [a], {0: a.astype(f64).min(1)})]


@case("asc/pad/broadcast", A, "examples/pad/example_broadcast.py")
def _(m, rng):
    a = rn(rng, (1, 64))
    return [Check(m["broadcast"](128, 64, 32), [a], {0: np.repeat(a.astype(f64), 128, 0)})]


def sorted_block(rng, n):
    v = rng.standard_normal(n).astype(np.float32)
    idx = np.argsort(-v, kind="stable")
    blk = np.zeros(2 * n, np.float32)
    blk[0::2], blk[1::2] = v[idx], idx
    return blk


@case("asc/sort/merge_sort", A, "examples/sort/example_merge_sort.py", "T.tile.merge_sort")
def _(m, rng):
    checks = []
    for ways, name in ((2, "generate_merge_sort_2way"), (4, "generate_merge_sort_4way")):
        blocks = [sorted_block(rng, m["N"]) for _ in range(ways)]
        pairs = sorted(((b[2 * j], b[2 * j + 1]) for b in blocks for j in range(m["N"])),
                       key=lambda p: -p[0])
        want = np.array([x for p in pairs for x in p], f64)
        checks.append(Check(m[name](), blocks, {0: want}, tol=(0, 0)))
    return checks


@case("asc/topk_selector", A, "examples/topk_selector/example_topk_selector.py", "T.tile.topk")
def _(m, rng):
    x = rng.permutation(4 * 256).reshape(4, 256).astype(np.float32) / 7.0  # distinct values
    want = np.argsort(-x.astype(f64), 1, kind="stable")[:, :32].astype(f64)
    return [Check(m["simple_topk_selector"](4, 256, 32, 8), [x], {0: want}, dtype="int32",
                  tol=(0, 0))]


@case("asc/gemv/gemv_c", A, "examples/gemv/example_gemv_c.py")
def _(m, rng):
    x, a = rn(rng, (256,), "float16"), rn(rng, (128, 256), "float16")
    return [Check(m["simple_gemv"](128, 256, 64, 128), [x, a], {0: a.astype(f64) @ x},
                  dtype="float16", reduce_len=256)]


@case("asc/gemv/gemv_v", A, "examples/gemv/example_gemv_v.py")
def _(m, rng):
    x, a = rn(rng, (256,), "float16"), rn(rng, (128, 256), "float16")
    return [Check(m["simple_gemv"](128, 256, 64, 128), [x, a], {0: a.astype(f64) @ x},
                  dtype="float16", reduce_len=256)]


@case("asc/blocksparse_gemm", A, "examples/blocksparse_gemm/example_blocksparse_gemm.py")
def _(m, rng):
    M = N = 128
    K = 128
    a, b = rn(rng, (M, K), "float16"), rn(rng, (K, N), "float16")
    mask = (rng.random((2, 2, 4)) > 0.4).astype(np.int8)
    want = blocksparse_ref(a, b, mask, 64, 64, 32)
    return [Check(m["blocksparse_matmul"](M, N, K, 64, 64, 32), [a, b, mask], {0: want},
                  dtype="float16", reduce_len=K)]


@case("asc/gemm_splitk", A, "examples/gemm_splitk/example_tilelang_gemm_splitk.py", "atomic_add")
def _(m, rng):
    a, b = rn(rng, (128, 256), "float16"), rn(rng, (256, 128), "float16")
    c = np.zeros((128, 128), np.float32)
    return [Check(m["gemm_splitk"](128, 128, 256, 64, 64, 64, 2), [a, b, c],
                  {("arg", 2): a.astype(f64) @ b}, reduce_len=256)]


@case("asc/pos_embedding/rms_norm", A, "examples/pos_embedding/rms_norm.py")
def _(m, rng):
    q = rn(rng, (64, 128), "float16")
    x = q.astype(f64)
    want = x / np.sqrt((x * x).mean(1, keepdims=True) + 1e-6)
    return [Check(m["rms_norm"](64, 128, 32, 1e-6), [q], {0: want}, dtype="float16")]


@case("asc/pos_embedding/rope", A, "examples/pos_embedding/rope.py", "gather + bitwise")
def _(m, rng):
    # the kernel reads one sin/cos row per vector core (row_x // head_num): heads >= rows per core
    return [rope_check(m, rng, 2, 16, 128, 64, 32)]


def rope_check(m, rng, bs, heads, hidden, rd, block_M):
    """rope_kernel_in_place(bs * heads, block_M, bs, hidden, rd, heads) on x (bs * heads rows),
    the last rd columns rotated in interleaved pairs by each batch's sin/cos row."""
    x = rn(rng, (bs * heads, hidden), "float16")
    sin, cos = rn(rng, (bs, rd), "float16"), rn(rng, (bs, rd), "float16")
    xf = x.astype(f64).copy()
    part = xf[:, hidden - rd:]
    rot = np.empty_like(part)
    rot[:, 0::2], rot[:, 1::2] = part[:, 1::2], part[:, 0::2]
    sgn = np.tile([-1.0, 1.0], rd // 2)
    s, c = np.repeat(sin.astype(f64), heads, 0), np.repeat(cos.astype(f64), heads, 0)
    xf[:, hidden - rd:] = part * c + rot * s * sgn
    k = m["rope_kernel_in_place"](bs * heads, block_M, bs, hidden, rd, heads)
    return Check(k, [x, sin, cos], {("arg", 0): xf}, dtype="float16")


@case("asc/cumsum_gdn", A, "examples/cumsum_gdn/example_cumsum.py")
def _(m, rng):
    g = rn(rng, (2, 4, 128))
    x = g.astype(f64).reshape(2, 4, 2, 64)
    return [Check(m["cumsum_ker"](2, 4, 128, 64), [g], {0: np.cumsum(x, -1).reshape(2, 4, 128)},
                  reduce_len=64)]


@case("asc/cross_entropy", A, "examples/cross_entropy_loss/example_cross_entro.py")
def _(m, rng):
    N, C = 64, 256
    x = rn(rng, (N, C), "float16")
    y = rng.integers(0, C, N).astype(np.int32)
    xf = x.astype(f64)
    lp = xf - xf.max(1, keepdims=True)
    lp = lp - np.log(np.exp(lp).sum(1, keepdims=True))
    return [Check(m["cross_entropy"](N, C, 32, 128), [x, y], {0: -lp[np.arange(N), y], 1: lp},
                  dtype="float16")]


@case("asc/activation/sigmoidv2", A, "examples/activation/sigmoidv2.py", "T.tile.sigmoid")
def _(m, rng):
    a = rn(rng, (4, 8))
    return [Check(m["sigmoidv2"](), [a], {0: sigmoid(a.astype(f64))})]


@case("asc/activation/gelu_grad", A, "examples/activation/gelu_grad.py", "uint8 compare mask")
def _(m, rng):
    dy, a = rn(rng, (64, 128)), rn(rng, (64, 128))
    x = a.astype(f64)
    c = np.sqrt(2 / np.pi)
    t = np.tanh(c * (x + 0.044715 * x ** 3))
    d = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * c * (1 + 3 * 0.044715 * x * x)
    return [Check(m["gelu_grad"](64, 128, 32, 64), [dy, a], {0: dy * d}, tol=(1e-4, 1e-4))]


@case("asc/elementwise/setvalue", A, "examples/elementwise/setvalue_example.py", "scalar reads")
def _(m, rng):
    a = np.arange(1024, dtype=np.int32)
    return [Check(m["getvalue"](1, 1024, 1, 256), [a], {0: a[::128].astype(f64)}, "int32",
                  tol=(0, 0))]


@case("asc/simple_fusion/matmul_add", A, "examples/simple_fusion/matmul_add.py")
def _(m, rng):
    a, b, d = rn(rng, (128, 64), "float16"), rn(rng, (64, 256), "float16"), rn(rng, (128, 256), "float16")
    k = m["matmul_add"](128, 256, 64, 64, 128, 32)
    return [Check(k, [a, b, d], {0: a.astype(f64) @ b + d}, "float16", 64)]


@case("asc/gemm/infer_scope", A, "examples/gemm/example_gemm_infer_scope.py")
def _(m, rng):
    return [gemm_case(m["matmul"], 128, 256, 128, 64, 128, 64)]


@case("asc/gemm/tail_block_developer", A, "examples/gemm/example_gemm_tail_block_developer.py")
def _(m, rng):
    return [gemm_case(m["matmul"], 100, 200, 96, 64, 128, 64)]


@case("asc/gemm/persistent", A, "examples/gemm/example_gemm_persistent.py")
def _(m, rng):
    return [gemm_case(m["matmul"], 256, 256, 128, 64, 128, 64)]


@case("asc/pipeline/gemm_v0_pipeline", A, "examples/pipeline/gemm_v0_pipeline.py")
def _(m, rng):
    # The example's jit says out_idx=[-2] (its B), yet its host code passes (a, b) and checks
    # C = a @ b: with B as the output the kernel would multiply by an uninitialised B. Host code
    # here: the kernel it builds, compiled with C (the tensor the body writes) as the output.
    import tilelang_mini
    chk = gemm_case(m["matmul"], 128, 256, 128, 64, 128, 64)
    chk.fn = tilelang_mini.compile(chk.fn.prim_func, out_idx=[-1])
    return [chk]


@case("asc/elementwise/add_pipeline", A, "examples/elementwise/elementwise_add_pipeline.py")
def _(m, rng):
    a, b = rn(rng, (256, 256)), rn(rng, (256, 256))
    return [Check(m["vec_add_pipeline"](256, 256, 128, 128, 32), [a, b], {0: a.astype(f64) + b})]


@case("asc/reduce/reduce_min_pipeline", A, "examples/reduce/example_reduce_min_pipeline.py")
def _(m, rng):
    a = rn(rng, (128, 128))  # one block column (block_N = N): the kernel reduces one block's row
    return [Check(m["reduce_min_pipeline"](128, 128, 64, 128, 16), [a], {0: a.astype(f64).min(1)})]


@case("asc/deepseek_v4/act_quant_int8", A, "examples/deepseek_v4/act_quant.py", "int8, T.symbolic")
def _(m, rng):
    return act_quant_int8_checks(m, rng, 64, 256)


def act_quant_int8_checks(m, rng, M, N):
    """act_quant_kernel_int8_optimized(N, block_M=16, block_N=N): per-row int8 values and
    scales (absmax / 127)."""
    import ml_dtypes
    x = rn(rng, (M, N)).astype(ml_dtypes.bfloat16)
    xf = x.astype(f64)
    s = np.maximum(np.abs(xf).max(1), 0) / 127.0
    y = np.clip(np.round(xf / s[:, None]), -127, 127)
    k = m["act_quant_kernel_int8_optimized"](N, block_M=16, block_N=N)

    def cmp_q(got, want):  # float32 vs float64 division may move a value across a .5 boundary
        d = np.abs(got.astype(f64) - want)
        assert d.max() <= 1 and np.mean(d == 0) >= 0.995, f"int8 values differ ({d.max()})"
    return [Check(k, [x], {0: y}, compare=cmp_q), Check(k, [x], {1: s}, tol=(1e-5, 1e-9))]


@case("asc/linear_attention_causal", A, "examples/linear_attention_and_rnn/linear_attention_causal.py",
      "workspace_idx, T.symbolic, cross flags")
def _(m, rng):
    m["core_num"] = 4  # host code: the device's cube core count (torch_npu)
    q, k, v = (rn(rng, (1, 2, 128, 64), "float16", 0.3) for _ in range(3))
    qf, kf, vf = (t.astype(f64) for t in (q, k, v))
    s = np.einsum("bhid,bhjd->bhij", qf, kf) * np.tril(np.ones((128, 128)))
    return [Check(m["linear_attention_ker"](2, 64, 64), [q, k, v], {0: s @ vf}, "float16", 128)]


@case("asc/lightning_indexer", A, "examples/lightning_indexer/example_lightning_indexer.py",
      "expert C+V, topk, copy(enable_relu=)")
def _(m, rng):
    return indexer_checks(rng, lambda B, N2, G, S1, S2, D, K:
                          m["indexer"](B, N2, G, S1, S2, D, K, 64, 4, 64, 64, 64))


def indexer_checks(rng, make, dims=(2, 1, 4, 64, 128, 64, 16)):
    """The lightning indexer's check: `make(B, N2, G, S1, S2, D, K)` builds the kernel for
    `dims` = (B, N2, G, S1, S2, D, K)."""
    B, N2, G, S1, S2, D, K = dims
    q = rn(rng, (B, S1, N2, G * D), "float16", 0.3)
    k = rn(rng, (B, S2, N2, D), "float16", 0.3)
    w = rn(rng, (B, S1, N2, G))
    qf = q.astype(f64).reshape(B, S1, N2, G, D)
    s = np.maximum(np.einsum("bsngd,btnd->bnsgt", qf, k.astype(f64)), 0)
    score = np.einsum("bnsgt,bsng->bnst", s, w.astype(f64))

    def cmp(got, want):  # the chosen indices hold the top-k scores (ties within tolerance)
        kth = -np.sort(-score, -1)[..., K - 1:K]
        picked = np.take_along_axis(score, got.astype(np.int64), -1)
        assert np.all(picked >= kth - 1e-3 * (1 + np.abs(kth))), "an index outside the top-k"
        assert all(len(set(r)) == K for r in got.reshape(-1, K)), "repeated indices"
    return [Check(make(B, N2, G, S1, S2, D, K), [q, k, w], {0: score}, compare=cmp)]


def hadamard_matrix(k):
    """The k x k Sylvester Hadamard matrix (k a power of two), float64."""
    h = np.array([[1.0]])
    while h.shape[0] < k:
        h = np.block([[h, h], [h, -h]])
    return h


@case("asc/hadamard_transform", A, "examples/hadamard_transform/example_hadamard_transform.py",
      "intra + cross-block butterflies")
def _(m, rng):
    n, b = 256, 4
    hadamard = hadamard_matrix
    x = rn(rng, (b, n))
    xf = x.astype(f64)
    out = [Check(m["hadamard_block_intra"](b, n, n, "float"), [x], {0: xf @ hadamard(n)},
                 reduce_len=n)]
    bs = 64  # the host-coordinated form: intra-block kernel, then one cross-block pair stage
    intra = (xf.reshape(b, n // bs, bs) @ hadamard(bs)).reshape(b, n)
    out.append(Check(m["hadamard_block_intra"](b, n, bs, "float"), [x], {0: intra}, reduce_len=bs))
    for stage in (6, 7):
        half = 1 << stage
        c = xf.reshape(b, n // (2 * half), 2, half)
        pair = np.stack([c[:, :, 0] + c[:, :, 1], c[:, :, 0] - c[:, :, 1]], 2).reshape(b, n)
        out.append(Check(m["hadamard_cross_block_pair"](b, n, bs, stage, "float"), [x], {0: pair}))
    return out


@case("asc/group_norm", A, "examples/group_norm/example_group_norm.py",
      "the serial kernel called with its host function's parameters (one S tile) and with two")
def _(m, rng):
    N, C, S, G = 2, 32, 64, 4
    cpg = C // G
    x, g, b = rn(rng, (N, C, S)), rn(rng, (C,)), rn(rng, (C,))
    xf = x.astype(f64).reshape(N, G, -1)
    y = (xf - xf.mean(-1, keepdims=True)) / np.sqrt(xf.var(-1, keepdims=True) + 1e-5)
    y = y.reshape(N, C, S) * g.astype(f64)[None, :, None] + b.astype(f64)[None, :, None]
    args = [x.reshape(N, G, cpg, S), g.reshape(G, cpg), b.reshape(G, cpg)]
    want = {0: y.reshape(N, G, cpg, S)}
    # group_norm(x, g, b, G) picks block_S = 64, s_num = 1, cpg_padded = 16 (the serial kernel)
    k1 = m["group_norm_kernel_serial"](N, G, 16, S, 64, 1, 1e-5, cpg, S, "float32")
    k2 = m["group_norm_kernel_serial"](N, G, 16, S, 32, 2, 1e-5, cpg, S, "float32")
    return [Check(k1, args, want, tol=(1e-4, 1e-4)), Check(k2, args, want, tol=(1e-4, 1e-4))]


@case("asc/convolution", A, "examples/convolution/example_convolution.py", "host im2col + gemm")
def _(m, rng):
    return [asc_conv_check(m, rng, 8, 10, 32, 128, 128)]


def asc_conv_check(m, rng, C, H, OC, Kp, Np):
    """The example's GEMM matmul(OC, Np, Kp, 32, 64, 64) on a host im2col of one C x H x H
    image and OC 3x3 filters, zero-padded to Kp x Np."""
    Bn, W, KH = 1, H, 3
    x, w = rn(rng, (Bn, C, H, W), "float16"), rn(rng, (OC, C, KH, KH), "float16")
    OH = H - KH + 1
    cols = np.stack([x[0, :, i:i + OH, j:j + OH].reshape(C, -1) for i in range(KH) for j in range(KH)], 1)
    cols = cols.reshape(C * KH * KH, OH * OH)            # host code: im2col (rows c, kh, kw)
    wf = w.reshape(OC, -1)
    a = np.zeros((OC, Kp), np.float16)
    a[:, :C * KH * KH] = wf
    bm = np.zeros((Kp, Np), np.float16)
    bm[:C * KH * KH, :OH * OH] = cols
    want = np.zeros((OC, Np))
    want[:, :OH * OH] = np.einsum("ocij,bchwij->obhw", w.astype(f64), np.lib.stride_tricks.sliding_window_view(
        x.astype(f64), (KH, KH), axis=(2, 3))).reshape(OC, -1)
    k = m["matmul"](OC, Np, Kp, 32, 64, 64)
    return Check(k, [a, bm], {0: want}, "float16", C * KH * KH)


@case("asc/hisa/block_sparse_mqa_attn_expert", A, "examples/HISA/block_sparse_mqa_attn_expert_test.py",
      "expert mode; packed compare masks (GE/LT), bitwise_and, select")
def _(m, rng):
    S, SKV, H, D, KV, TOPK, PAIRS = 4, 512, 16, 32, 32, 4, 2
    k = m["block_sparse_mqa_attn_return_logits"](S, SKV, KV, TOPK, H, D, num_pairs=PAIRS)
    q = rng.random((S, H, D)).astype(np.float16)
    kk = rng.random((SKV, D)).astype(np.float16)
    w = rng.random((S, H)).astype(np.float16)
    ks = np.array([0, 40, 0, 100], np.int32)                       # windows that cut blocks
    ke = np.array([128, 200, 512, 300], np.int32)
    idx = rng.integers(0, SKV // KV, (S, TOPK)).astype(np.int32)
    pos = idx[:, :, None] * KV + np.arange(KV)                      # (S, TOPK, KV)
    kg = kk.astype(f64)[pos]                                        # (S, TOPK, KV, D)
    scores = np.maximum(np.einsum("shd,stbd->stbh", q.astype(f64), kg), 0) * w.astype(f64)[:, None, None, :]
    logits = scores.sum(-1)
    bad = (pos < ks[:, None, None]) | (pos >= ke[:, None, None]) | (pos >= SKV)
    want = np.where(bad, -np.inf, logits)

    def cmp(got, want):
        g = got.astype(f64)
        assert np.array_equal(np.isinf(g), np.isinf(want)), "masked positions differ"
        fin = ~np.isinf(want)
        assert np.allclose(g[fin], want[fin], rtol=2e-3, atol=2e-3), \
            f"max abs err {np.abs(g[fin] - want[fin]).max():.3g}"
    return [Check(k, [q, kk, idx, w, ks, ke], {0: want}, compare=cmp)]
