"""Sweep cases added in session 12: the example files that had no case yet (Blackwell block-scaled
and tcgen05 GEMMs, the sm120 NVFP4 GEMM, the AMD preshuffled fp8 GEMM and MLA decode, the NSA
forward benchmark's kernel, gemm_sp's 2:4 compressor, the layout-visualisation GEMM and
tilelang-ascend's multi-device shmem examples). Host code and float64 references are written
here from each operation's meaning; the kernels are the examples' own, read from the mirror at
run time by upstream_sweep.py.

Files without a kernel of their own have no case: tilelang's examples/kda/FLA_KDA/*.py (Triton
kernels and torch helpers), examples/fusedmoe/example_fusedmoe_torch.py (the torch reference),
examples/plot_layout/*.py (layout objects drawn by tilelang.tools.plot_layout, no kernel),
examples/dequantize_gemm/quantize/*.py (T.macro / intrinsic helpers of kernels with cases);
tilelang-ascend's examples/flash_attention/fa_opt/flash_attn_bhsd_ascendc.py (torch_npu's
fused attention, no TileLang), examples/torch_tl_ascend/compile_tl_op/*.py (host code packaging
flash_attn_bhsd, which has a case) and examples/xllm_kernels/utils.py (macros of the xllm
kernels, which have cases)."""
import numpy as np

from upstream_sweep import Check, case, rn, with_kwargs
from upstream_cases_new import TL, f64
from upstream_cases_ascend import A

FP4 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
                -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])


def bf16(rng, shape):
    import ml_dtypes
    return rn(rng, shape).astype(ml_dtypes.bfloat16)


def fp8(rng, shape, scale=1.0):
    import ml_dtypes
    return rn(rng, shape, scale=scale).astype(ml_dtypes.float8_e4m3fn)


def packed_fp4(rng, rows, cols):
    """Random e2m1 codes (rows, cols) packed two a byte, the even column in the low nibble,
    as int8 (rows, cols // 2), and their float64 values."""
    codes = rng.integers(0, 16, (rows, cols)).astype(np.uint8)
    packed = (codes[:, 0::2] | (codes[:, 1::2] << 4)).view(np.int8)
    return packed, FP4[codes]


def ue8m0_groups(rng, mn, kblocks):
    """E8M0 exponents (mn, kblocks) near 127, padded with 127 to a multiple of 4 blocks and
    packed 4 a uint32 (block 4g + i in byte i), group-major: word (g, r) at g * mn + r. Returns
    the flat words and the float64 scales 2^(e - 127) (mn, kblocks)."""
    kpad = -(-kblocks // 4) * 4
    e = np.full((mn, kpad), 127, np.uint32)
    e[:, :kblocks] = rng.integers(122, 132, (mn, kblocks))
    words = e[:, 0::4] | (e[:, 1::4] << 8) | (e[:, 2::4] << 16) | (e[:, 3::4] << 24)
    return np.ascontiguousarray(words.T).reshape(-1), 2.0 ** (e[:, :kblocks].astype(f64) - 127)


def blockscaled_ref(a, b_nk, sa, sb, gran=128):
    """sum over K blocks of (A block * sa[:, blk]) @ (B block * sb[:, blk]).T, float64;
    a (M, K), b_nk (N, K) as float64 values."""
    out = np.zeros((a.shape[0], b_nk.shape[0]))
    for blk in range(sa.shape[1]):
        ks = slice(blk * gran, (blk + 1) * gran)
        out += (a[:, ks] * sa[:, blk:blk + 1]) @ (b_nk[:, ks] * sb[:, blk:blk + 1]).T
    return out


BS100 = "examples/blockscaled_gemm_sm100/"


@case("tl/blockscaled_gemm_sm100/mxfp8_1d1d", TL, BS100 + "gemm_mxfp8_blockscaled_1d1d.py",
      "MXFP8 block-scaled GEMM (E8M0 scales per 128 K, packed 4 a uint32) through tensor "
      "memory and tcgen05 block-scaled MMA, 1 CTA, 2 CTAs and persistent (GPU-only: located "
      "expected)")
def _(m, rng):
    M, N, K = 256, 256, 512
    a, b = fp8(rng, (M, K)), fp8(rng, (K, N))
    sfa, sa = ue8m0_groups(rng, M, K // 128)
    sfb, sb = ue8m0_groups(rng, N, K // 128)
    want = blockscaled_ref(a.astype(f64), b.astype(f64).T, sa, sb)
    args = [a, b, sfa, sfb, 128, 256, 128, "float8_e4m3fn", "bfloat16", "float32", 2]
    return [Check(m[name], args, {0: want}, "bfloat16", K)
            for name in ("mxfp8_blockscaled_gemm", "mxfp8_blockscaled_gemm_2cta",
                         "mxfp8_blockscaled_gemm_2cta_persistent")]


@case("tl/blockscaled_gemm_sm100/grouped_mxfp8_1d1d", TL,
      BS100 + "grouped_gemm_mxfp8_blockscaled_1d1d.py",
      "grouped MXFP8 block-scaled GEMM over expert row ranges (offsets), 2-CTA clusters "
      "(T.ClusterKernel), plain and persistent (GPU-only: located expected)")
def _(m, rng):
    E, N, K, sizes = 2, 256, 512, (128, 256)
    offs = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int32)
    a, b = fp8(rng, (offs[-1], K)), fp8(rng, (E, N, K))
    sfa, sa = ue8m0_groups(rng, offs[-1], K // 128)
    words, scales = zip(*(ue8m0_groups(rng, N, K // 128) for _ in range(E)))
    # SFB group-major over (expert, row): word (g, e, n) at (g * E + e) * N + n
    sfb = np.stack([w.reshape(-1, N) for w in words], 1).reshape(-1)
    want = np.zeros((offs[-1], N))
    for e in range(E):
        rows = slice(offs[e], offs[e + 1])
        want[rows] = blockscaled_ref(a[rows].astype(f64), b[e].astype(f64), sa[rows], scales[e])
    args = [a, b, sfa, sfb, offs, 128, 256, 128, "float8_e4m3fn", "bfloat16", "float32", 2,
            max(sizes)]
    return [Check(m[name], args, {0: want}, "bfloat16", K)
            for name in ("grouped_mxfp8_blockscaled_gemm_2cta",
                         "grouped_mxfp8_blockscaled_gemm_2cta_persistent")]


@case("tl/deepseek_v4/fp8_fp4_gemm_1d1d", TL, "examples/deepseek_v4/fp8_fp4_gemm_1d1d_sm100.py",
      "DeepSeek-V4 FP4 x FP8 GEMM with E8M0 block scales, persistent 2-CTA clusters, tensor "
      "memory (GPU-only: located expected)")
def _(m, rng):
    M, N, K = 256, 512, 256
    a_packed, a = packed_fp4(rng, M, K)
    b = fp8(rng, (N, K))
    sfa, sa = ue8m0_groups(rng, M, K // 128)
    sfb, sb = ue8m0_groups(rng, N, K // 128)
    want = blockscaled_ref(a, b.astype(f64), sa, sb)
    return [Check(m["fp8_fp4_gemm_1d1d_persistent"](M, N, K, "bfloat16"), [a_packed, b, sfa, sfb],
                  {0: want}, "bfloat16", K)]


@case("tl/gemm_sm120/nvfp4_blockscaled", TL, "examples/gemm_sm120/sm120_nvfp4_blockscaled_gemm.py",
      "NVFP4 x NVFP4 GEMM with e4m3 scales per 16 K (T.mma_gemm_blockscaled, the sm120 "
      "chunked K-major scale layout; GPU-only: located expected)")
def _(m, rng):
    import ml_dtypes
    M, N, K = 128, 128, 256
    a_packed, a = packed_fp4(rng, M, K)
    b_packed, b = packed_fp4(rng, N, K)
    checks_in = []
    for rows in (M, N):  # scale bytes 0 or 0x38 (e4m3 1.0), 4 a word along K
        byte = rng.integers(0, 2, (rows, K // 16)).astype(np.uint8) * 0x38
        words = (byte[:, 0::4].astype(np.uint32) | (byte[:, 1::4].astype(np.uint32) << 8)
                 | (byte[:, 2::4].astype(np.uint32) << 16) | (byte[:, 3::4].astype(np.uint32) << 24))
        # the sm120 chunk order: per 128 rows, (4, 32, words) -> (words, 32, 4)
        swz = words.reshape(rows // 128, 4, 32, -1).transpose(0, 3, 2, 1).reshape(rows, -1)
        checks_in.append((np.ascontiguousarray(swz),
                          byte.view(ml_dtypes.float8_e4m3fn).astype(f64)))
    (sfa, sa), (sfb, sb) = checks_in
    want = blockscaled_ref(a, b, sa, sb, gran=16)
    kern = m["sm120_nvfp4_blockscaled_gemm"](M, N, K)
    return [Check(kern, [a_packed, b_packed, sfa, sfb], {0: want}, "bfloat16", K)]


TC = "examples/gemm_tcgen05/"


@case("tl/gemm_tcgen05/gemm_tcgen5mma_ws_clc", TL, TC + "gemm_tcgen5mma_ws_clc.py",
      "persistent 2-CTA tcgen05 GEMM scheduled by cluster launch control (CLC), plain and with "
      "pipelined CLC queries (GPU-only: located expected)")
def _(m, rng):
    a, b = bf16(rng, (256, 128)), bf16(rng, (128, 512))
    want = a.astype(f64) @ b.astype(f64)
    base = [128, 256, 64, 64, "bfloat16", "bfloat16", "float32", 2]
    return [Check(m["gemm_clc_persistent_2cta"], [a, b] + base + [1, True], {0: want},
                  "bfloat16", 128),
            Check(m["gemm_clc_persistent_2cta_pipelined_clc"], [a, b] + base + [2, 1, True],
                  {0: want}, "bfloat16", 128)]


@case("tl/gemm_tcgen05/gemm_tcgen5mma_ws_persistent_streamk", TL,
      TC + "gemm_tcgen5mma_ws_persistent_streamk.py",
      "persistent 2-CTA tcgen05 GEMM with a Stream-K tail (partial tiles through a float32 "
      "workspace and fixup flags) (GPU-only: located expected)")
def _(m, rng):
    from tilelang_mini.carver.arch import driver
    M, N, K, bm, bn, bk = 256, 512, 512, 128, 256, 64
    clusters = driver.get_num_sms() // 2
    tiles = (M // (2 * bm)) * (N // bn)
    sk = tiles % clusters
    even = clusters % sk == 0 and clusters // sk <= K // bk
    a, b = bf16(rng, (M, K)), bf16(rng, (K, N))
    args = [a, b, np.zeros((clusters, 2, bm, bn), np.float32),
            np.full((clusters,), -1, np.int32), np.zeros((sk,), np.int32)]
    fn = with_kwargs(m["gemm_streamk_2cta"], streamk_tiles=sk, even_split=even, block_M=bm,
                     block_N=bn, store_block_N=64, block_K=bk, in_dtype="bfloat16",
                     out_dtype="bfloat16", accum_dtype="float32", num_stages=2)
    return [Check(fn, args, {0: a.astype(f64) @ b.astype(f64)}, "bfloat16", K)]


@case("tl/gemm_fp8/gemm_fp8_sm100", TL, "examples/gemm_fp8/example_tilelang_gemm_fp8_sm100.py",
      "fp8 GEMM accumulating in tensor memory by T.tcgen05_gemm with an mbarrier (eager jit, "
      ".compile(M=, N=, K=)) (GPU-only: located expected)", chip="ascend950")
def _(m, rng):
    M, N, K = 128, 256, 128
    a, b = fp8(rng, (M, K)), fp8(rng, (N, K))
    kern = m["matmul"].compile(M=M, N=N, K=K, block_M=64, block_N=256, block_K=32,
                               trans_A=False, trans_B=True, in_dtype="float8_e4m3fn",
                               out_dtype="float32", accum_dtype="float32", num_stages=2,
                               threads=256)
    return [Check(kern, [a, b], {0: a.astype(f64) @ b.astype(f64).T}, "float32", K)]


@case("tl/gemm_fp8/gemm_amd_fp8_preshuffle", TL,
      "examples/gemm_fp8/example_tilelang_gemm_amd_fp8_preshuffle.py",
      "AMD fp8 GEMM through the ROCm MFMA intrinsic emitter with B preshuffled into 16 x 32 "
      "tiles (per-warp matrix-core intrinsics: located expected)", chip="ascend950")
def _(m, rng):
    M, N, K, kp = 128, 128, 128, 2
    a, b = fp8(rng, (M, K), 0.1), fp8(rng, (N, K), 0.1)
    bk = 32 * kp  # B (N, K) as (N // 16, K // bk, 16, bk) tiles
    pre = np.ascontiguousarray(b.reshape(N // 16, 16, K // bk, bk).transpose(0, 2, 1, 3))
    kern = m["tl_matmul"](M, N, K, 64, 64, 128, 1, k_pack=kp, in_dtype="float8_e4m3fn",
                          out_dtype="float32", accum_dtype="float32")
    return [Check(kern, [a, pre], {0: a.astype(f64) @ b.astype(f64).T}, "float32", K)]


@case("tl/deepseek_mla/mla_decode_amd", TL,
      "examples/deepseek_mla/amd/benchmark_mla_decode_amd_tilelang.py",
      "MLA decode for AMD: split-KV partials (lse, output) as arguments then a combine launch, "
      "and the no-split kernel; @autotune above @jit given every config value")
def _(m, rng):
    from upstream_cases_tl import mla_decode_checks
    f = m["flashmla_decode"]
    return mla_decode_checks({"flashattn": lambda B, H, g, S, D, P, bn, bh, split: f(
        B, H, g, S, D, P, bn, bh, split, threads=128)}, rng, 2, 32, 256, 64, 32, 32, (1, 4),
        scale_arg=False, scratch=True)


@case("tl/deepseek_nsa/benchmark_nsa_fwd", TL, "examples/deepseek_nsa/benchmark/benchmark_nsa_fwd.py",
      "the NSA forward benchmark's TileLang kernel (@autotune above eager @jit, block_T, stages "
      "and threads given): selected KV blocks per query, causal, 16 query heads per KV head")
def _(m, rng):
    from upstream_cases_new2 import nsa_fwd_check
    f = m["tilelang_sparse_attention"]
    cfg = dict(block_T=128, num_stages=2, threads=32)  # every tuned key given: no search

    def fwd(*a, **kw):
        return f(*a, **cfg, **kw)
    fwd.kernel_for = lambda *a, **kw: f.factory.kernel_for(*a, **cfg, **kw)
    ns = {"native_sparse_attention": fwd}
    return [nsa_fwd_check(ns, rng, 1, 128, 1, 16, 32, 3, 32, 0.1)]


@case("tl/visual_layout_inference/matmul", TL,
      "examples/visual_layout_inference/visual_layout_inference.py",
      "eager GEMM with the layout-visualisation pass_configs (hints here)")
def _(m, rng):
    a, b = rn(rng, (128, 96), "float16"), rn(rng, (96, 64), "float16")
    return [Check(with_kwargs(m["matmul"], block_M=32, block_N=32, block_K=32), [a, b],
                  {0: a.astype(f64) @ b.astype(f64)}, "float16", 96)]


def compress_2to4_ref(dense):
    """TileLang's natural 2:4 compression of a (S, D) 16-bit tensor: per group of 4 two kept
    positions (the non-zeros in order; none: (0, 1); one at p: (0, 1) if p == 0 else (0, p)),
    their values, and a 4-bit field (first | second << 2), 4 fields an int16, least
    significant first."""
    S, D = dense.shape
    g = dense.reshape(S, D // 4, 4)
    kept = np.zeros((S, D // 4, 2), dense.dtype)
    fields = np.zeros((S, D // 4), np.int64)
    for r, c in np.ndindex(S, D // 4):
        nz = [i for i in range(4) if g[r, c, i] != 0]
        if len(nz) == 0:
            idx = [0, 1]
        elif len(nz) == 1:  # the kernel pairs a lone non-zero with a zero slot
            idx = [0, 1] if nz[0] == 0 else [0, nz[0]]
        else:
            idx = nz
        kept[r, c] = g[r, c, idx]
        fields[r, c] = idx[0] | (idx[1] << 2)
    f = fields.reshape(S, D // 16, 4)
    meta = f[..., 0] | (f[..., 1] << 4) | (f[..., 2] << 8) | (f[..., 3] << 12)
    return kept.reshape(S, D // 2), meta.astype(np.uint16).view(np.int16)


@case("tl/gemm_sp/compress", TL, "examples/gemm_sp/sparse_utils.py",
      "gemm_sp's 2:4 compressor: a per-thread (SIMT) kernel over threads=(16, 32), uint8 "
      "index locals, tuple swaps, shift/or metadata into int16, T.device_assert")
def _(m, rng):
    S, D = 32, 1024
    dense = rn(rng, (S, D), "float16").reshape(S, D // 4, 4)
    for r, c in np.ndindex(S, D // 4):  # 0, 1 or 2 non-zeros a group
        keep = rng.permutation(4)[:rng.integers(0, 3)]
        dense[r, c, [i for i in range(4) if i not in keep]] = 0
    dense = dense.reshape(S, D)
    kept, meta = compress_2to4_ref(dense)
    T = m["T"]
    kern = m["_compress_fn"](D, T.float16, T.int16)
    return [Check(kern, [dense], {0: kept.astype(f64), 1: meta.astype(f64)}, "float16",
                  tol=(0, 0))]


# ------------------------------------------------------------------ tilelang-ascend multi-device

for _op in ("get_nbi", "put_nbi", "ub_get_nbi", "ub_put_nbi"):
    def _shmem(m, rng, op=_op):
        """One PE (newPe = this rank): the transfer is a copy of A into B."""
        M, N = 1, 352  # the script's defaults
        a = rng.integers(-100, 100, (M, N)).astype(np.int8)
        kern = m[f"shmem_{op}"](M, N, M * N, 0)
        return [Check(kern, [a, np.zeros_like(a)], {("arg", 1): a.astype(f64)}, "int8",
                      tol=(0, 0))]
    case(f"asc/shmem/{_op}", A, f"examples/shmem/shmem_mm_test_{_op}.py",
         f"aclshmem {_op.replace('_', ' ')} of one (M, N) int8 tensor between NPUs "
         "(multi-device: located expected)")(_shmem)


@case("asc/dispatch_combine/moe_dispatch", A, "examples/dispatch_combine/dispatch_combine_shmem.py",
      "MoE all-to-all dispatch over aclshmem windows (T.shmem_ub_put_nbi), T.tile.*_experiment "
      "ops, status polling in a while loop; one rank of one (multi-device: located expected)")
def _(m, rng):
    Bs, H, K, experts, aiv = 8, 128, 2, 4, 2
    x = rn(rng, (Bs, H), "float32")
    import ml_dtypes
    x = x.astype(ml_dtypes.bfloat16)
    ids = np.stack([rng.permutation(experts)[:K] for _ in range(Bs)]).astype(np.int32)
    counts = np.bincount(ids.reshape(-1), minlength=experts).astype(f64)
    ub_size = (H * 2 + 31) // 32 * 32 + 32 + 12
    ub_size = (ub_size + 511) // 512 * 512 // 2  # the script's window row (bf16 elements)
    kern = m["moe_dispatch_kernel"](Bs, H, K, 1, experts, 0, ub_size, aiv)
    win = [np.zeros((experts * Bs, ub_size), ml_dtypes.bfloat16),
           np.zeros((experts, 8), np.float32)]
    # outputs: expand_x, expand_ids, the inclusive prefix sum of tokens per expert, the counts
    return [Check(kern, [x, ids] + win, {2: np.cumsum(counts), 3: counts}, "int32", tol=(0, 0))]
