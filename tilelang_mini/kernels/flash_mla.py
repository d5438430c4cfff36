"""FlashMLA's decode API on tile kernels: `get_mla_metadata` and `flash_mla_with_kvcache`.

q [B, s_q, h_q, d] (d = 576: 512 latent + 64 rope), a paged KV cache k_cache
[num_blocks, 64, h_k, d] addressed through block_table [B, max_blocks] (int32), cache_seqlens [B]
(int32, read at run time). Query head h attends with KV head h // (h_q / h_k) (MLA has h_k = 1;
more KV heads are grouped-query attention, as FlashMLA's num_heads_per_head_k describes). V is the first head_dim_v (512) columns of each cached row.
Returns out [B, s_q, h_q, head_dim_v] bfloat16 and lse [B, h_q, s_q] float32; a query with no
key to attend (sequence length 0, or causally empty) gets out 0 and lse +inf, as FlashMLA.

Two kernels, as FlashMLA: the split kernel (block = batch b, split s, query position and a block
of heads) runs the online softmax over its share of b's pages (pages read through the block
table; the share and the key mask come from cache_seqlens and num_splits at run time) and writes
a normalised partial output with its log-sum-exp; the combine kernel merges the splits of each
row with weights exp(lse_s - lse).
"""
import math

import numpy as np

import tilelang_mini.language as T

from ._core import Plan, as_input, ceil_div, check_shape, library_function, to_numpy

PAGE = 64
NEG = -1e30


def head_block(HQ, HK, block_H):
    """Heads per block: at most block_H, and with several KV heads a divisor of each KV head's
    group (h_q / h_k), so a block's heads share one KV head."""
    if HK == 1:
        return min(block_H, HQ)
    group = HQ // HK
    return max(d for d in range(1, min(block_H, group) + 1) if group % d == 0)


def online_softmax(block_H, cols, DV):
    """The split kernels' online-softmax step as a T.macro: fold one (block_H x cols) tile of
    scaled scores `acc_s` into the running max `m`, sum `l_sum` and output `acc_o` (rescaled by
    exp(m_prev - m)), leaving the tile's probabilities in `p_s` for the caller's P @ V gemm."""

    @T.macro
    def fold(acc_s, p_s, acc_o, m, m_prev, alpha, l_sum, row_sum):
        T.copy(m, m_prev)
        T.reduce_max(acc_s, m, dim=1, clear=False)
        for i in T.Parallel(block_H):
            alpha[i] = T.exp(m_prev[i] - m[i])
        for i, j in T.Parallel(block_H, DV):
            acc_o[i, j] = acc_o[i, j] * alpha[i]
        for i, j in T.Parallel(block_H, cols):
            acc_s[i, j] = T.exp(acc_s[i, j] - m[i])
        T.reduce_sum(acc_s, row_sum, dim=1)
        for i in T.Parallel(block_H):
            l_sum[i] = l_sum[i] * alpha[i] + row_sum[i]
        T.copy(acc_s, p_s)

    return fold


def mla_split_kernel(B, SQ, HQ, D, DV, NB, MAXB, S, scale, causal, block_H=32, HK=1):
    block_H = head_block(HQ, HK, block_H)
    HB = T.ceildiv(HQ, block_H)
    group = HQ // HK
    fold = online_softmax(block_H, PAGE, DV)

    @T.prim_func
    def mla_decode_split(Q: T.Tensor((B, SQ, HQ, D), "bfloat16"),
                         KC: T.Tensor((NB, PAGE, HK, D), "bfloat16"),
                         BT: T.Tensor((B, MAXB), "int32"), SL: T.Tensor((B,), "int32"),
                         NS: T.Tensor((B + 1,), "int32"),
                         OP: T.Tensor((B, S, SQ, HQ, DV), "float32"),
                         LP: T.Tensor((B, S, SQ, HQ), "float32")):
        with T.Kernel(HB * SQ, S, B) as (bh, s, b):
            q_s = T.alloc_shared((block_H, D), "bfloat16")
            k_s = T.alloc_shared((PAGE, D), "bfloat16")
            v_s = T.alloc_shared((PAGE, DV), "bfloat16")
            acc_s = T.alloc_fragment((block_H, PAGE), "float32")
            p_s = T.alloc_fragment((block_H, PAGE), "bfloat16")
            acc_o = T.alloc_fragment((block_H, DV), "float32")
            m = T.alloc_fragment((block_H,), "float32")
            m_prev = T.alloc_fragment((block_H,), "float32")
            alpha = T.alloc_fragment((block_H,), "float32")
            l_sum = T.alloc_fragment((block_H,), "float32")
            row_sum = T.alloc_fragment((block_H,), "float32")
            lse = T.alloc_fragment((block_H,), "float32")
            seqlen = SL[b]
            nsplit = NS[b + 1] - NS[b]
            per = T.ceildiv(T.ceildiv(seqlen, PAGE), T.max(nsplit, 1))
            sq = bh // HB
            h0 = (bh % HB) * block_H
            hk = h0 // group  # the KV head of the block's query heads
            T.copy(Q[b, sq, h0, 0], q_s)
            T.fill(acc_o, 0.0)
            T.fill(l_sum, 0.0)
            T.fill(m, NEG)
            if s < nsplit:
                for it in T.serial(MAXB):
                    if it < per and s * per + it < T.ceildiv(seqlen, PAGE):
                        page = s * per + it
                        # (clamped although the guard holds: the llvm target evaluated the block
                        # table load outside the guard, notes/findings/llvm.md)
                        blk = BT[b, T.min(page, MAXB - 1)]
                        T.copy(KC[blk, 0:PAGE, hk, 0:D], k_s)
                        T.copy(KC[blk, 0:PAGE, hk, 0:DV], v_s)
                        T.gemm(q_s, k_s, acc_s, transpose_B=True, clear_accum=True)
                        # keys past the sequence (and, when causal, past the query) drop out
                        if causal:
                            for i, j in T.Parallel(block_H, PAGE):
                                acc_s[i, j] = acc_s[i, j] * scale - T.cast(
                                    page * PAGE + j >= seqlen - SQ + sq + 1, "float32") * 1e30
                        else:
                            for i, j in T.Parallel(block_H, PAGE):
                                acc_s[i, j] = acc_s[i, j] * scale - T.cast(
                                    page * PAGE + j >= seqlen, "float32") * 1e30
                        fold(acc_s, p_s, acc_o, m, m_prev, alpha, l_sum, row_sum)
                        T.gemm(p_s, v_s, acc_o)
            for i, j in T.Parallel(block_H, DV):
                acc_o[i, j] = acc_o[i, j] / T.max(l_sum[i], 1e-30)
            for i in T.Parallel(block_H):
                lse[i] = m[i] + T.log(l_sum[i])     # -inf for a split without keys
            T.copy(acc_o, OP[b, s, sq, h0, 0])
            T.copy(lse, LP[b, s, sq, h0])

    return mla_decode_split


def mla_combine_kernel(B, SQ, HQ, DV, S, block_H=32, sink=False):
    """O and LSE from the S splits' partials; with `sink`, O is scaled by
    1 / (1 + exp(SINK[h] - lse)) (FlashMLA's attn_sink; LSE unchanged)."""
    block_H = min(block_H, HQ)
    HB = T.ceildiv(HQ, block_H)

    @T.macro
    def body(OP, LP, O, LSE, SINK, bh, b):
        o_s = T.alloc_fragment((block_H, DV), "float32")
        acc = T.alloc_fragment((block_H, DV), "float32")
        l_s = T.alloc_fragment((block_H,), "float32")
        top = T.alloc_fragment((block_H,), "float32")
        w = T.alloc_fragment((block_H,), "float32")
        total = T.alloc_fragment((block_H,), "float32")
        valid = T.alloc_fragment((block_H,), "float32")
        lse = T.alloc_fragment((block_H, 1), "float32")
        sq = bh // HB
        h0 = (bh % HB) * block_H
        T.fill(top, NEG)
        for s in T.serial(S):
            T.copy(LP[b, s, sq, h0], l_s)
            for i in T.Parallel(block_H):
                top[i] = T.max(top[i], l_s[i])
        # a row without any key: out 0, lse +inf (log(0) = -inf, negated)
        for i in T.Parallel(block_H):
            valid[i] = T.cast(top[i] > -1e29, "float32")
        T.fill(acc, 0.0)
        T.fill(total, 0.0)
        for s in T.serial(S):
            T.copy(LP[b, s, sq, h0], l_s)
            T.copy(OP[b, s, sq, h0, 0], o_s)
            for i in T.Parallel(block_H):
                w[i] = T.exp(l_s[i] - top[i])
            for i in T.Parallel(block_H):
                total[i] = total[i] + w[i]
            for i, j in T.Parallel(block_H, DV):
                acc[i, j] = acc[i, j] + w[i] * o_s[i, j]
        for i, j in T.Parallel(block_H, 1):
            lse[i, j] = (top[i] + T.log(T.max(total[i], 1e-30))) * valid[i] - T.log(valid[i])
        if sink:
            sk = T.alloc_fragment((block_H,), "float32")
            T.copy(SINK[h0], sk)
            for i in T.Parallel(block_H):  # rows without keys: acc is 0 whatever w is
                w[i] = valid[i] / (1.0 + T.exp(sk[i] - top[i] - T.log(T.max(total[i], 1e-30))))
        else:
            T.copy(valid, w)
        for i, j in T.Parallel(block_H, DV):
            acc[i, j] = acc[i, j] / T.max(total[i], 1e-30) * w[i]
        T.copy(acc, O[b, sq, h0, 0])                       # rounds to bfloat16
        T.copy(lse, LSE[b, h0, sq])

    if sink:
        @T.prim_func
        def mla_decode_combine_sink(OP: T.Tensor((B, S, SQ, HQ, DV), "float32"),
                                    LP: T.Tensor((B, S, SQ, HQ), "float32"),
                                    SINK: T.Tensor((HQ,), "float32"),
                                    O: T.Tensor((B, SQ, HQ, DV), "bfloat16"),
                                    LSE: T.Tensor((B, HQ, SQ), "float32")):
            with T.Kernel(HB * SQ, B) as (bh, b):
                body(OP, LP, O, LSE, SINK, bh, b)
        return mla_decode_combine_sink

    @T.prim_func
    def mla_decode_combine(OP: T.Tensor((B, S, SQ, HQ, DV), "float32"),
                           LP: T.Tensor((B, S, SQ, HQ), "float32"),
                           O: T.Tensor((B, SQ, HQ, DV), "bfloat16"),
                           LSE: T.Tensor((B, HQ, SQ), "float32")):
        with T.Kernel(HB * SQ, B) as (bh, b):
            body(OP, LP, O, LSE, LP, bh, b)

    return mla_decode_combine


def mla_meta_kernel(B, PARTS):
    """One block of scalar code: NS [B + 1] (running sum of the splits per batch) and META
    [PARTS, 8] (per part: first batch, first split, last batch, last split + 1, then zeros),
    from the sequence lengths read at run time; see get_mla_metadata."""

    @T.prim_func
    def mla_metadata(SEQ: T.Tensor((B,), "int32"), META: T.Tensor((PARTS, 8), "int32"),
                     NS: T.Tensor((B + 1,), "int32")):
        with T.Kernel(1) as bx:
            pages = T.alloc_var("int32")
            per_part = T.alloc_var("int32")
            n_items = T.alloc_var("int32")
            per_items = T.alloc_var("int32")
            first = T.alloc_var("int32")
            last = T.alloc_var("int32")
            base = T.alloc_var("int32")
            n = T.alloc_var("int32")
            pages = 0
            for b in T.serial(B):
                pages = pages + (SEQ[b] + PAGE - 1) // PAGE
            per_part = T.max((pages + B + PARTS - 1) // PARTS, 1)  # pages (+1 per batch) a part
            n_items = 0
            NS[0] = 0
            for b in T.serial(B):
                n_items = n_items + T.max(((SEQ[b] + PAGE - 1) // PAGE + per_part - 1) // per_part,
                                          1)
                NS[b + 1] = n_items
            per_items = (n_items + PARTS - 1) // PARTS  # (batch, split) items a part
            for p in T.serial(PARTS):
                for c in T.serial(8):
                    META[p, c] = 0
                first = p * per_items
                last = T.min(first + per_items, n_items) - 1
                base = 0
                for b in T.serial(B):  # the batches holding items `first` and `last`
                    n = T.max(((SEQ[b] + PAGE - 1) // PAGE + per_part - 1) // per_part, 1)
                    if first <= last and base <= first and first < base + n:
                        META[p, 0] = b
                        META[p, 1] = first - base
                    if first <= last and base <= last and last < base + n:
                        META[p, 2] = b
                        META[p, 3] = last - base + 1
                    base = base + n

    return mla_metadata


@library_function
def get_mla_metadata(ctx, cache_seqlens=None, num_heads_per_head_k=None, num_heads_k=None,
                     num_parts=None):
    """(tile_scheduler_metadata [num_parts, 8] int32, num_splits [B + 1] int32), computed by a
    one-block scalar kernel (mla_metadata) that reads cache_seqlens at run time.

    Without cache_seqlens (FlashMLA's current form, and sparse decoding, whose splits follow
    the topk list): (zeros [num_parts, 8], None), no launch.

    Each batch's pages are split so that every part (cube core) gets about the same number of
    pages: batch b gets ceil(pages_b / per_part) splits (at least one), per_part =
    max(1, ceil((total pages + B) / num_parts)). num_splits is the running sum (splits of b =
    num_splits[b+1] - num_splits[b]); the (batch, split) work items are dealt out in order,
    ceil(items / num_parts) to a part, and row p of the metadata holds (first batch, first
    split, last batch, last split + 1) of part p's items, then zeros (all zeros for a part
    without items)."""
    plan = Plan()
    parts = int(num_parts or 24)
    meta = np.zeros((parts, 8), np.int32)
    if cache_seqlens is None:
        plan.result = (meta, None)
        return plan
    seqlens = as_input(cache_seqlens, "int32", "cache_seqlens").reshape(-1)
    num_splits = np.zeros(seqlens.size + 1, np.int32)
    if seqlens.size:  # an empty batch: nothing to schedule
        plan.launch(ctx.compile(mla_meta_kernel, seqlens.size, parts), seqlens, meta, num_splits)
    plan.result = (meta, num_splits)
    return plan


@library_function
def flash_mla_with_kvcache(ctx, q, k_cache, block_table, cache_seqlens, head_dim_v,
                           tile_scheduler_metadata, num_splits=None, softmax_scale=None,
                           causal=False, is_fp8_kvcache=False, indices=None, attn_sink=None,
                           extra_k_cache=None, extra_indices_in_kvcache=None, topk_length=None,
                           extra_topk_length=None):
    """-> (out [B, s_q, h_q, head_dim_v] bf16, lse [B, h_q, s_q] f32); see the module doc.
    Sparse decoding (indices [B, s_q, topk], an FP8 cache): flash_mla_sparse.py."""
    plan = Plan()
    q_arr = as_input(q, "bfloat16", "q")
    if q_arr.ndim != 4:
        raise ValueError(f"q must be [batch, s_q, h_q, head_dim], got {q_arr.shape}")
    B, SQ, HQ, D = q_arr.shape
    if extra_k_cache is not None or extra_indices_in_kvcache is not None or \
            extra_topk_length is not None:
        raise ValueError("extra_k_cache / extra_indices_in_kvcache / extra_topk_length are not "
                         "supported")
    if indices is not None:
        if causal:
            raise ValueError("causal must be False with sparse attention (indices given)")
        if not is_fp8_kvcache:
            raise ValueError("sparse attention (indices) reads FlashMLA's FP8 KV cache layout: "
                             "pass is_fp8_kvcache=True")
        return _sparse_plan(ctx, plan, q_arr, k_cache, indices, topk_length, attn_sink,
                            int(head_dim_v), softmax_scale)
    if is_fp8_kvcache:
        raise ValueError("an FP8 KV cache is FlashMLA's sparse layout: pass indices= (dense "
                         "decoding reads a bfloat16 cache)")
    if attn_sink is not None or topk_length is not None:
        raise ValueError("attn_sink and topk_length take sparse attention (indices=)")
    if num_splits is None:
        raise ValueError("dense decoding takes num_splits from get_mla_metadata")
    kc = as_input(k_cache, "bfloat16", "k_cache")
    if kc.ndim != 4 or kc.shape[1] != PAGE or kc.shape[3] != D or HQ % kc.shape[2]:
        raise ValueError(f"k_cache must be [num_blocks, {PAGE}, h_k, {D}] with h_k dividing "
                         f"h_q = {HQ}, got {kc.shape}")
    NB, HK = kc.shape[0], kc.shape[2]
    bt = as_input(block_table, "int32", "block_table")
    MAXB = bt.shape[1]
    check_shape(bt, (B, MAXB), "block_table")
    sl = as_input(cache_seqlens, "int32", "cache_seqlens").reshape(B)
    ns = as_input(num_splits, "int32", "num_splits").reshape(-1)
    check_shape(ns, (B + 1,), "num_splits")
    S = max(1, int(np.max(ns[1:] - ns[:-1])) if B else 1)  # the grid's split extent
    DV = int(head_dim_v)
    scale = float(softmax_scale) if softmax_scale is not None else 1.0 / math.sqrt(D)
    op = np.empty((B, S, SQ, HQ, DV), np.float32)  # split partials (a workspace)
    lp = np.empty((B, S, SQ, HQ), np.float32)
    out = np.empty((B, SQ, HQ, DV), q_arr.dtype)
    lse = np.empty((B, HQ, SQ), np.float32)
    from ..arch import get_chip
    block_H = 64 if get_chip(ctx.chip).capacity_of("L0C") >= DV * 64 * 4 * 2 else 32  # acc_o fits
    split = ctx.compile(mla_split_kernel, B, SQ, HQ, D, DV, NB, MAXB, S, scale, bool(causal),
                        block_H, HK)
    plan.launch(split, q_arr, kc, bt, sl, ns, op, lp)
    plan.launch(ctx.compile(mla_combine_kernel, B, SQ, HQ, DV, S), op, lp, out, lse)
    plan.result = (out, lse)
    return plan


def _sparse_plan(ctx, plan, q_arr, k_cache, indices, topk_length, attn_sink, DV, softmax_scale):
    from .flash_mla_sparse import D_NOPE, D_ROPE, ROWS, TOKEN_BYTES, sparse_split_kernel
    B, SQ, HQ, D = q_arr.shape
    if D != D_NOPE + D_ROPE or DV != D_NOPE:
        raise ValueError(f"the FP8 sparse cache holds {D_NOPE} + {D_ROPE} dims: q head_dim must be "
                         f"{D_NOPE + D_ROPE} and head_dim_v {D_NOPE}, got {D} and {DV}")
    kc = np.ascontiguousarray(to_numpy(k_cache, "k_cache"))
    if kc.dtype.itemsize != 1 or kc.ndim != 4 or kc.shape[2] != 1 or kc.shape[3] != TOKEN_BYTES:
        raise ValueError(f"k_cache must be [num_blocks, page_block_size, 1, {TOKEN_BYTES}] bytes "
                         f"(FlashMLA's FP8 sparse layout), got {kc.shape} {kc.dtype}")
    NT = kc.shape[0] * kc.shape[1]
    ind = as_input(indices, "int32", "indices")
    if ind.ndim != 3 or ind.shape[:2] != (B, SQ):
        raise ValueError(f"indices must be [{B}, {SQ}, topk] int32, got {ind.shape}")
    TOPK = ind.shape[2]
    tl_arr = (np.full(B, TOPK, np.int32) if topk_length is None
              else as_input(topk_length, "int32", "topk_length").reshape(-1))
    check_shape(tl_arr, (B,), "topk_length")
    steps = max(1, ceil_div(TOPK, ROWS))
    S = max(1, ceil_div(TOPK, 512))   # a split per 512 entries of the topk list
    per = ROWS * ceil_div(steps, S)
    S = ceil_div(steps * ROWS, per)
    scale = float(softmax_scale) if softmax_scale is not None else 1.0 / math.sqrt(D)
    op = np.empty((B, S, SQ, HQ, DV), np.float32)
    lp = np.empty((B, S, SQ, HQ), np.float32)
    out = np.empty((B, SQ, HQ, DV), q_arr.dtype)
    lse = np.empty((B, HQ, SQ), np.float32)
    split = ctx.compile(sparse_split_kernel, B, SQ, HQ, TOPK, NT, S, per, scale)
    plan.launch(split, q_arr, kc.view(np.uint8).reshape(NT, TOKEN_BYTES), ind, tl_arr, op, lp)
    if attn_sink is not None:
        sink = as_input(attn_sink, "float32", "attn_sink").reshape(-1)
        check_shape(sink, (HQ,), "attn_sink")
        combine = ctx.compile(mla_combine_kernel, B, SQ, HQ, DV, S, 32, True)
        plan.launch(combine, op, lp, sink, out, lse)
    else:
        plan.launch(ctx.compile(mla_combine_kernel, B, SQ, HQ, DV, S), op, lp, out, lse)
    plan.result = (out, lse)
    return plan
