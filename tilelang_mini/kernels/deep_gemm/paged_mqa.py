"""DeepGEMM's paged MQA logits: `get_paged_mqa_logits_metadata` and `fp8_paged_mqa_logits`.

q [B, next_n, H, D] e4m3; kv_cache [num_blocks, block_kv, 1, D + 4] uint8, each block holding
its block_kv rows of e4m3 values (block_kv * D bytes) and then their fp32 scales (block_kv * 4
bytes), as DeepGEMM's kv_cache_cast_to_fp8 lays them out; weights [B * next_n, H] fp32;
context_lens [B]; block_table [B, max_blocks]. Query i of batch b sits at position
`context_len - next_n + i`; logits [B * next_n, max_context_len]:

    logits[b*next_n + i, t] = sum_h relu(q[b, i, h] . kv[t] * sf[t]) * weights[b*next_n + i, h]

for t <= the query's position (< context_len), -inf elsewhere.

One kernel: block (page p, batch b) reads its block-table entry and context length at run time,
decodes the page's bytes in the kernel (T.reinterpret of uint8 as e4m3; the four scale bytes
assembled with shifts into an int32 and reinterpreted as float32), and for each head folds
`relu(score * sf) * w` into the page's logits. Pages past the context write -inf.

FP4 (`fp8_fp4_paged_mqa_logits` with q = (q [B, next_n, H, D/2] packed e2m1, q_sf [B, next_n, H]
int32)): the cache is DeepGEMM's FP4 layout, kv_cache [num_blocks, block_kv, 1, D/2 + 4] uint8,
each block holding its rows' packed e2m1 codes (block_kv * D/2 bytes) and then one int32 of four
UE8M0 exponents (one per 32 values) per row; the kernel decodes the page's nibbles and exponent
bytes into a bfloat16 tile (exact), q likewise per head, and the score needs no further scale.
"""
import numpy as np

import tilelang_mini.language as T

from .._core import (Plan, as_input, as_output, check_shape, dims, int_arg, library_function,
                     to_numpy)
from ._tiles import fp8_cube
from .mqa import logit_tiles

NEG_INF = float("-inf")


@T.macro
def load_page(KV, BT, b, p, MAXB, vbytes, row_bytes):
    """`raw, sfb = load_page(...)`: the values (first vbytes bytes) and then the scale bytes of
    KV's page for batch b's page p (its block table entry; p past the table reads the last
    entry), in uint8 tiles of their own."""
    raw = T.alloc_fragment((vbytes,), "uint8")
    sfb = T.alloc_fragment((row_bytes - vbytes,), "uint8")
    blk = BT[b, T.min(p, MAXB - 1)]
    T.copy(KV[blk, 0:vbytes], raw)
    T.copy(KV[blk, vbytes:row_bytes], sfb)
    return raw, sfb


@T.macro
def fp8_page(raw, sfb, BKV, D, mma):
    """`kv, sf = fp8_page(...)`: the page's e4m3 values (raw, BKV rows of D bytes) as a BKV x D
    tile of `mma`, and its fp32 scales sf, each assembled from 4 little-endian bytes of sfb."""
    kv = T.alloc_shared((BKV, D), mma)
    sf = T.alloc_fragment((BKV,), "float32")
    for r, d in T.Parallel(BKV, D):
        kv[r, d] = T.reinterpret(raw[r * D + d], "float8_e4m3fn")
    for r in T.Parallel(BKV):
        sf[r] = T.reinterpret(T.cast(sfb[4 * r], "int32")
                              | (T.cast(sfb[4 * r + 1], "int32") << 8)
                              | (T.cast(sfb[4 * r + 2], "int32") << 16)
                              | (T.cast(sfb[4 * r + 3], "int32") << 24), "float32")
    return kv, sf


@T.macro
def fp4_page(raw, sfb, BKV, D):
    """`kv = fp4_page(...)`: the page's packed e2m1 codes (raw, BKV rows of D/2 bytes, low nibble
    first) times their UE8M0 scales (sfb, 4 bytes a row, one per 32 values), a BKV x D bfloat16
    tile (exact)."""
    D2 = D // 2
    code = T.alloc_fragment((BKV, D), "int32")
    kv = T.alloc_shared((BKV, D), "bfloat16")
    for r, d in T.Parallel(BKV, D):
        code[r, d] = (T.cast(raw[r * D2 + d // 2], "int32") >> ((d % 2) * 4)) & 15
    for r, d in T.Parallel(BKV, D):
        kv[r, d] = T.cast(T.reinterpret(code[r, d], "float4_e2m1fn") * T.reinterpret(
            T.cast(sfb[r * 4 + d // 32], "int32") << 23, "float32"), "bfloat16")
    return kv


@T.macro
def causal_mask(acc, CL, b, col0, NN, rows, BKV):
    """acc[i, j] = -inf where key col0 + j is past query i's position (batch b's length CL[b]
    holds its NN queries last)."""
    for i, j in T.Parallel(rows, BKV):
        acc[i, j] = T.if_then_else(col0 + j <= CL[b] - NN + i, acc[i, j], NEG_INF)


def paged_mqa_kernel(B, NN, H, D, NB, BKV, MAXB, L, cube_fp8):
    mma = "float8_e4m3fn" if cube_fp8 else "bfloat16"
    row_bytes = BKV * (D + 4)
    rows = max(16, NN)

    @T.prim_func
    def fp8_paged_mqa_logits(Q: T.Tensor((B, NN, H, D), "float8_e4m3fn"),
                             KV: T.Tensor((NB, row_bytes), "uint8"),
                             W: T.Tensor((B * NN, H), "float32"),
                             CL: T.Tensor((B,), "int32"), BT: T.Tensor((B, MAXB), "int32"),
                             LOG: T.Tensor((B * NN, L), "float32")):
        with T.Kernel(T.ceildiv(L, BKV), B) as (p, b):
            s, w, acc = logit_tiles(rows, BKV, H, NEG_INF)  # -inf: pages past the context
            q8 = T.alloc_shared((rows, D), "float8_e4m3fn")
            qw = T.alloc_shared((rows, D), mma)
            if p * BKV < CL[b]:
                raw, sfb = load_page(KV, BT, b, p, MAXB, BKV * D, row_bytes)
                kv, sf = fp8_page(raw, sfb, BKV, D, mma)
                T.copy(W[b * NN, 0], w)
                T.clear(q8)
                T.clear(acc)
                for h in T.serial(H):
                    T.copy(Q[b, 0:NN, h, :], q8[0:NN, :])
                    if cube_fp8:
                        T.gemm(q8, kv, s, transpose_B=True, clear_accum=True)
                    else:
                        T.copy(q8, qw)
                        T.gemm(qw, kv, s, transpose_B=True, clear_accum=True)
                    for i, j in T.Parallel(rows, BKV):
                        acc[i, j] = acc[i, j] + T.max(s[i, j] * sf[j], 0.0) * w[i, h]
                causal_mask(acc, CL, b, p * BKV, NN, rows, BKV)
            T.copy(acc[0:NN, :], LOG[b * NN, p * BKV])

    return fp8_paged_mqa_logits


def paged_mqa_fp4_kernel(B, NN, H, D, NB, BKV, MAXB, L):
    """The FP4 form: Q [B, NN, H, D/2] int8, QSF [B * NN, H * 4] uint8 (the packed int32 scales'
    bytes), KV [NB, BKV * (D/2 + 4)] uint8."""
    from .mqa import fp4_dequant
    D2 = D // 2
    row_bytes = BKV * (D2 + 4)
    rows = max(16, NN)
    dq_q = fp4_dequant(rows, D)

    @T.prim_func
    def fp4_paged_mqa_logits(Q: T.Tensor((B, NN, H, D2), "int8"),
                             QSF: T.Tensor((B * NN, H * 4), "uint8"),
                             KV: T.Tensor((NB, row_bytes), "uint8"),
                             W: T.Tensor((B * NN, H), "float32"),
                             CL: T.Tensor((B,), "int32"), BT: T.Tensor((B, MAXB), "int32"),
                             LOG: T.Tensor((B * NN, L), "float32")):
        with T.Kernel(T.ceildiv(L, BKV), B) as (p, b):
            s, w, acc = logit_tiles(rows, BKV, H, NEG_INF)  # -inf: pages past the context
            q_b = T.alloc_shared((rows, D2), "int8")
            q_sf = T.alloc_fragment((rows, H * 4), "uint8")
            q_c = T.alloc_fragment((rows, D), "int32")
            qw = T.alloc_shared((rows, D), "bfloat16")
            if p * BKV < CL[b]:
                raw, sfb = load_page(KV, BT, b, p, MAXB, BKV * D2, row_bytes)
                kv = fp4_page(raw, sfb, BKV, D)
                T.copy(W[b * NN, 0], w)
                T.clear(q_b)
                T.clear(q_sf)
                T.copy(QSF[b * NN:(b + 1) * NN, :], q_sf[0:NN, :])
                T.clear(acc)
                for h in T.serial(H):
                    T.copy(Q[b, 0:NN, h, :], q_b[0:NN, :])
                    dq_q(q_b, q_sf, h * 4, q_c, qw)
                    T.gemm(qw, kv, s, transpose_B=True, clear_accum=True)
                    for i, j in T.Parallel(rows, BKV):
                        acc[i, j] = acc[i, j] + T.max(s[i, j], 0.0) * w[i, h]
                causal_mask(acc, CL, b, p * BKV, NN, rows, BKV)
            T.copy(acc[0:NN, :], LOG[b * NN, p * BKV])

    return fp4_paged_mqa_logits


def paged_meta_kernel(B, NSM, BKV):
    """META [NSM + 1, 2]: row s is (batch, page within it) where SM s's share starts, the pages
    of all batches (ceil(len / BKV) each) split evenly; past the last page: (B, 0)."""

    @T.prim_func
    def paged_mqa_metadata(CL: T.Tensor((B,), "int32"), META: T.Tensor((NSM + 1, 2), "int32")):
        with T.Kernel(1) as bx:
            total = T.alloc_var("int32")
            start = T.alloc_var("int32")
            bi = T.alloc_var("int32")
            off = T.alloc_var("int32")
            g = T.alloc_var("int32")
            total = 0
            for b in T.serial(B):
                total = total + (CL[b] + BKV - 1) // BKV
            for s in T.serial(NSM + 1):
                g = T.min(s * ((total + NSM - 1) // NSM), total)  # SM s's first global page
                start = 0
                bi = B
                off = 0
                for b in T.serial(B):  # the batch whose pages hold page g (empty ones never)
                    if bi == B and g < start + (CL[b] + BKV - 1) // BKV:
                        bi = b
                        off = g - start
                    start = start + (CL[b] + BKV - 1) // BKV
                META[s, 0] = bi
                META[s, 1] = off

    return paged_mqa_metadata


@library_function
def get_paged_mqa_logits_metadata(ctx, context_lens, block_kv, num_sms=24):
    """[num_sms + 1, 2] int32: the (batch, first page) where each SM's share of the pages starts,
    pages split evenly over the SMs (a one-block scalar kernel; fp8_paged_mqa_logits itself reads
    context_lens at run time)."""
    plan = Plan()
    cl = as_input(context_lens, "int32", "context_lens").reshape(-1)
    num_sms, block_kv = int_arg(num_sms, "num_sms"), int_arg(block_kv, "block_kv")
    meta = np.empty((num_sms + 1, 2), np.int32)
    plan.launch(ctx.compile(paged_meta_kernel, cl.size, int(num_sms), int(block_kv)), cl, meta)
    plan.result = meta
    return plan


def _paged_operands(plan, weights, context_lens, block_table, max_context_len, logits, B, NN, H):
    """The operands both cache forms share: weights [B * NN, H] fp32, context_lens [B] and
    block_table [B, max_blocks] int32, L = max_context_len and the logits [B * NN, L] fp32 the
    kernel writes (`logits` itself, or a new array), made the plan's result."""
    w = as_input(weights, "float32", "weights")
    check_shape(w, (B * NN, H), "weights")
    cl = as_input(context_lens, "int32", "context_lens").reshape(-1)
    check_shape(cl, (B,), "context_lens")
    bt = as_input(block_table, "int32", "block_table")
    L = int_arg(max_context_len, "max_context_len")
    out = np.empty((B * NN, L), np.float32) if logits is None else as_output(
        plan, logits, "logits", "float32")
    check_shape(out, (B * NN, L), "logits")
    plan.result = out if logits is None else logits
    return w, cl, bt, L, out


@library_function
def fp8_paged_mqa_logits(ctx, q, kv_cache, weights, context_lens, block_table, schedule_meta,
                         max_context_len, clean_logits=True, logits=None):
    """-> logits [B * next_n, max_context_len] float32; see the module doc."""
    plan = Plan()
    qa = as_input(q, "float8_e4m3fn", "q")
    B, NN, H, D = dims(qa, "B, next_n, H, D", "q")
    kv = as_input(kv_cache, "uint8", "kv_cache")
    if kv.ndim != 4 or kv.shape[2] != 1 or kv.shape[3] != D + 4:
        raise ValueError(f"kv_cache must be [num_blocks, block_kv, 1, {D + 4}] uint8, got "
                         f"{kv.shape}")
    NB, BKV = kv.shape[:2]
    w, cl, bt, L, out = _paged_operands(plan, weights, context_lens, block_table,
                                        max_context_len, logits, B, NN, H)
    kernel = ctx.compile(paged_mqa_kernel, B, NN, H, D, NB, BKV, bt.shape[1], L,
                         fp8_cube(ctx.chip))
    plan.launch(kernel, qa, kv.reshape(NB, BKV * (D + 4)), w, cl, bt, out)
    return plan


def _paged_fp4(ctx, q0, q_sf, kv_cache, weights, context_lens, block_table, max_context_len,
               logits):
    from .mqa import packed_fp4, packed_sf_bytes
    plan = Plan()
    q_np = to_numpy(q0, "q")
    if q_np.ndim != 4:
        raise ValueError(f"q must be [B, next_n, H, D/2] packed FP4, got {q_np.shape}")
    B, NN, H, D2 = q_np.shape
    D = 2 * D2
    if D % 32 or D > 128:
        raise ValueError(f"FP4 q: head dim {D} must be a multiple of 32 up to 128 (one UE8M0 "
                         f"scale per 32 values, four packed in an int32)")
    qa = packed_fp4(q_np, (B, NN, H, D2), "q")
    qsf = packed_sf_bytes(q_sf, (B, NN, H), "q_sf").reshape(B * NN, H * 4)
    kv = as_input(to_numpy(kv_cache, "kv_cache").view(np.uint8), None, "kv_cache")
    if kv.ndim != 4 or kv.shape[2] != 1 or kv.shape[3] != D2 + 4:
        raise ValueError(f"kv_cache must be DeepGEMM's FP4 cache [num_blocks, block_kv, 1, "
                         f"{D2 + 4}] uint8 (D/2 code bytes and an int32 of UE8M0 scales a row), "
                         f"got {kv.shape}")
    NB, BKV = kv.shape[:2]
    w, cl, bt, L, out = _paged_operands(plan, weights, context_lens, block_table,
                                        max_context_len, logits, B, NN, H)
    kernel = ctx.compile(paged_mqa_fp4_kernel, B, NN, H, D, NB, BKV, bt.shape[1], L)
    plan.launch(kernel, qa, qsf, kv.reshape(NB, BKV * (D2 + 4)), w, cl, bt, out)
    return plan


@library_function
def fp8_fp4_paged_mqa_logits(ctx, q, kv_cache, weights, context_lens, block_table, schedule_meta,
                             max_context_len, clean_logits=True, logits_dtype=None, indices=None,
                             logits=None):
    """DeepGEMM's newer name: q = (q e4m3, None) or q alone is fp8_paged_mqa_logits (FP8 cache);
    q = (packed FP4 q, q_sf int32) reads DeepGEMM's FP4 cache (module doc). `indices` is not
    supported. Logits are float32."""
    q0, q_sf = q if isinstance(q, tuple) else (q, None)
    if indices is not None:
        raise ValueError("fp8_fp4_paged_mqa_logits: indices are not supported")
    if logits_dtype not in (None, "float32", np.float32) and str(logits_dtype) != "torch.float32":
        raise ValueError(f"logits_dtype {logits_dtype!r}: only float32 logits are supported")
    if q_sf is not None:
        return _paged_fp4(ctx, q0, q_sf, kv_cache, weights, context_lens, block_table,
                          max_context_len, logits)
    return fp8_paged_mqa_logits.plan(ctx, q0, kv_cache, weights, context_lens, block_table,
                                     schedule_meta, max_context_len, clean_logits, logits)
