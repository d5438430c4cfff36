"""FlashMLA's decode API on tile kernels: `get_mla_metadata` and `flash_mla_with_kvcache`.

q [B, s_q, h_q, d] (d = 576: 512 latent + 64 rope), a paged KV cache k_cache
[num_blocks, 64, h_k, d] addressed through block_table [B, max_blocks] (int32), cache_seqlens [B]
(int32, read at run time). Query head h attends with KV head h // (h_q / h_k) (MLA has h_k = 1;
more KV heads are grouped-query attention, as FlashMLA's num_heads_per_head_k describes). V is the first head_dim_v (512) columns of each cached row.
Returns out [B, s_q, h_q, head_dim_v] bfloat16 and lse [B, h_q, s_q] float32; a query with no
key to attend (sequence length 0, or causally empty) gets out 0 and lse +inf, as FlashMLA.

Two kernels, as FlashMLA: the split kernel (block = batch b, split s, query position and a block
of heads) runs the online softmax over its share of b's pages (pages read through the block
table; its key range comes from the tile-scheduler metadata and cache_seqlens at run time) and writes
a normalised partial output with its log-sum-exp; the combine kernel merges the splits of each
row with weights exp(lse_s - lse).
"""
import math

import numpy as np

import tilelang_mini.language as T

from ._core import Plan, as_input, ceil_div, check_shape, dims, int_arg, library_function, to_numpy

PAGE = 64
NEG = -1e30


def head_block(HQ, HK, block_H):
    """Heads per block: at most block_H, and with several KV heads a divisor of each KV head's
    group (h_q / h_k), so a block's heads share one KV head."""
    if HK == 1:  # an even count (the tail row past h_q is clipped): the vector cores split it
        h = min(block_H, HQ)
        return h + h % 2 if h < block_H else h
    group = HQ // HK
    return max(d for d in range(1, min(block_H, group) + 1) if group % d == 0)


def row_vectors(block_H):
    """A T.macro allocating five float32 (block_H,) fragments, one value per head row: the
    running statistics of the online softmax and of the split combine."""

    @T.macro
    def five():
        a = T.alloc_fragment((block_H,), "float32")
        b = T.alloc_fragment((block_H,), "float32")
        c = T.alloc_fragment((block_H,), "float32")
        d = T.alloc_fragment((block_H,), "float32")
        e = T.alloc_fragment((block_H,), "float32")
        return a, b, c, d, e

    return five


@T.macro
def query_heads(Q, b, sq, h0, block_H, D):
    """`q_s = query_heads(...)`: the (block_H, D) bfloat16 tile of Q [B, SQ, HQ, D]'s heads
    [h0, h0 + block_H) of batch b's query sq."""
    q_s = T.alloc_shared((block_H, D), "bfloat16")
    T.copy(Q[b, sq, h0, 0], q_s)
    return q_s


def online_softmax(block_H, cols, DV):
    """The split kernels' online softmax as two T.macros over (block_H x cols) tiles of scores.

    `state()` allocates its tiles: `acc_s, p_s, acc_o, m, l_sum, lse, scratch = state()` gives the
    float32 scores, their bfloat16 probabilities (for the P @ V gemm), the output accumulator
    (block_H x DV), the running max and sum, a log-sum-exp row and fold's own tiles; the state
    starts empty (acc_o and l_sum 0, m -1e30).
    `fold(acc_s, p_s, acc_o, m, l_sum, scratch)` folds one tile of scaled scores `acc_s` into
    `m`, `l_sum` and `acc_o` (rescaled by exp(m_prev - m)), leaving its probabilities in `p_s`."""

    @T.macro
    def state():
        acc_s = T.alloc_fragment((block_H, cols), "float32")
        p_s = T.alloc_fragment((block_H, cols), "bfloat16")
        acc_o = T.alloc_fragment((block_H, DV), "float32")
        m, m_prev, alpha, l_sum, row_sum = rows()
        lse = T.alloc_fragment((block_H,), "float32")
        T.fill(acc_o, 0.0)
        T.fill(l_sum, 0.0)
        T.fill(m, NEG)
        return acc_s, p_s, acc_o, m, l_sum, lse, (m_prev, alpha, row_sum)

    rows = row_vectors(block_H)

    @T.macro
    def fold(acc_s, p_s, acc_o, m, l_sum, scratch):
        m_prev, alpha, row_sum = scratch
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

    return state, fold


def mla_split_kernel(B, SQ, HQ, D, DV, NB, MAXB, S, PARTS, scale, causal, block_H=32, HK=1):
    block_H = head_block(HQ, HK, block_H)
    HB = T.ceildiv(HQ, block_H)
    group = HQ // HK
    softmax_state, fold = online_softmax(block_H, PAGE, DV)

    @T.prim_func
    def mla_decode_split(Q: T.Tensor((B, SQ, HQ, D), "bfloat16"),
                         KC: T.Tensor((NB, PAGE, HK, D), "bfloat16"),
                         BT: T.Tensor((B, MAXB), "int32"), SL: T.Tensor((B,), "int32"),
                         META: T.Tensor((PARTS, 8), "int32"),
                         OP: T.Tensor((B, S, SQ, HQ, DV), "float32"),
                         LP: T.Tensor((B, S, SQ, HQ), "float32")):
        # split slowest: blocks go to cores in id order, so a batch's empty split blocks
        # (s past its splits) do not all land on the same cores
        with T.Kernel(HB * SQ, B, S) as (bh, b, s):
            k_s = T.alloc_shared((PAGE, D), "bfloat16")
            v_s = T.alloc_shared((PAGE, DV), "bfloat16")
            acc_s, p_s, acc_o, m, l_sum, lse, scratch = softmax_state()
            lo = T.alloc_var("int32")  # the split's keys [lo, hi), from the part that has it
            hi = T.alloc_var("int32")
            seqlen = SL[b]
            lo = 0
            hi = 0
            for p in T.serial(PARTS):
                if META[p, 0] <= b and b <= META[p, 2]:
                    if T.if_then_else(b == META[p, 0], META[p, 4], 0) == s:
                        lo = T.if_then_else(b == META[p, 0], META[p, 1], 0)
                        hi = T.if_then_else(b == META[p, 2], META[p, 3], seqlen)
            first = lo // PAGE
            n_pages = T.ceildiv(hi, PAGE) - first
            sq = bh // HB
            h0 = (bh % HB) * block_H
            hk = h0 // group  # the KV head of the block's query heads
            q_s = query_heads(Q, b, sq, h0, block_H, D)
            for it in T.serial(MAXB):
                if it < n_pages:
                    page = first + it
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
                    fold(acc_s, p_s, acc_o, m, l_sum, scratch)
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
    rows = row_vectors(block_H)

    @T.macro
    def body(OP, LP, O, LSE, SINK, bh, b):
        o_s = T.alloc_fragment((block_H, DV), "float32")
        acc = T.alloc_fragment((block_H, DV), "float32")
        l_s, top, w, total, valid = rows()
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


OVERHEAD = 5  # FlashMLA's fixed per-split cost, counted in pages of 64 keys


def mla_meta_kernel(B, PARTS):
    """One block of scalar code: FlashMLA's tile-scheduler metadata from the sequence lengths
    read at run time (see get_mla_metadata): META [PARTS, 8] = (first batch, its first key,
    last batch, its end key, split index of the first batch, 0, 0, 0) and NS [B + 1], the
    running sum of the splits per batch."""

    @T.prim_func
    def mla_metadata(SEQ: T.Tensor((B,), "int32"), META: T.Tensor((PARTS, 8), "int32"),
                     NS: T.Tensor((B + 1,), "int32")):
        with T.Kernel(1) as bx:
            total = T.alloc_var("int32")
            payload = T.alloc_var("int32")
            req = T.alloc_var("int32")     # the batch being dealt out
            blk = T.alloc_var("int32")     # its pages already given to earlier parts
            sp = T.alloc_var("int32")      # its splits so far
            cum = T.alloc_var("int32")
            remain = T.alloc_var("int32")  # the part's pages (and overheads) still free
            going = T.alloc_var("int32")
            left = T.alloc_var("int32")
            total = 0
            for b in T.serial(B):
                total = total + (SEQ[b] + PAGE - 1) // PAGE + OVERHEAD
            payload = T.max((total + PARTS - 1) // PARTS + OVERHEAD, 2 * OVERHEAD)
            req = 0
            blk = 0
            sp = 0
            cum = 0
            NS[0] = 0
            for p in T.serial(PARTS):
                META[p, 0] = req
                META[p, 1] = blk * PAGE
                META[p, 4] = sp
                for c in T.serial(3):
                    META[p, 5 + c] = 0
                remain = payload
                going = 1
                for r in T.serial(B):  # each step finishes a batch or ends the part
                    if going == 1 and req < B:
                        left = (SEQ[T.min(req, B - 1)] + PAGE - 1) // PAGE - blk
                        if remain >= left + OVERHEAD:  # the rest of the batch fits
                            cum = cum + sp + 1
                            NS[T.min(req, B - 1) + 1] = cum
                            remain = remain - left - OVERHEAD
                            req = req + 1
                            blk = 0
                            sp = 0
                        else:  # a split ends inside the batch (if room is left past the cost)
                            if remain > OVERHEAD:
                                blk = blk + remain - OVERHEAD
                                sp = sp + 1
                                remain = 0
                            going = 0
                if blk > 0:
                    META[p, 2] = req
                    META[p, 3] = blk * PAGE
                else:
                    META[p, 2] = req - 1
                    META[p, 3] = SEQ[T.max(req - 1, 0)]

    return mla_metadata


def default_parts(chip, num_heads_per_head_k, num_heads_k):
    """FlashMLA's number of scheduler parts: cube cores / h_k / ceil(heads per KV head / 64)."""
    from ..arch import get_chip
    cores = get_chip(chip).aic_cores
    if num_heads_per_head_k is None or num_heads_k is None:
        return cores
    return max(1, cores // max(1, int(num_heads_k)) // ceil_div(int(num_heads_per_head_k), 64))


@library_function(empty_ok=True)  # an empty batch: nothing to schedule
def get_mla_metadata(ctx, cache_seqlens=None, num_heads_per_head_k=None, num_heads_k=None,
                     num_parts=None):
    """(tile_scheduler_metadata [num_parts, 8] int32, num_splits [B + 1] int32), computed by a
    one-block scalar kernel (mla_metadata) that reads cache_seqlens at run time, with FlashMLA's
    tile-scheduler semantics.

    num_parts (FlashMLA's num_sm_parts) defaults to the chip's cube cores // num_heads_k //
    ceil(num_heads_per_head_k / 64). Every batch costs its pages (ceil(seqlen / 64)) plus a
    fixed overhead of 5 pages; each part gets payload = max(ceil(total / num_parts) + 5, 10).
    The batches are dealt out in order: a part takes each whole remaining batch that fits in
    what is left of its payload (paying the overhead), and the first that does not fit is cut
    there (a new split) if more than the overhead is left. Row p holds (first batch, first key,
    last batch, end key, split index of the first batch, 0, 0, 0); num_splits is the running sum
    of the splits per batch (an empty sequence has one split).

    Without cache_seqlens (FlashMLA's current form, and sparse decoding, whose splits follow
    the topk list): (zeros [num_parts, 8], None), no launch."""
    plan = Plan()
    if num_parts is not None and int_arg(num_parts, "num_parts") < 1:
        raise ValueError(f"num_parts must be at least 1, got {num_parts}")
    parts = int(num_parts or default_parts(ctx.chip, num_heads_per_head_k, num_heads_k))
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
    extra = (extra_k_cache, extra_indices_in_kvcache, extra_topk_length)
    if indices is None and any(x is not None for x in extra):
        raise ValueError("extra_k_cache / extra_indices_in_kvcache / extra_topk_length take "
                         "sparse attention (indices=)")
    if indices is not None:
        if causal:
            raise ValueError("causal must be False with sparse attention (indices given)")
        if not is_fp8_kvcache:
            raise ValueError("sparse attention (indices) reads FlashMLA's FP8 KV cache layout: "
                             "pass is_fp8_kvcache=True")
        return _sparse_plan(ctx, plan, q_arr, k_cache, indices, topk_length, attn_sink,
                            int(head_dim_v), softmax_scale, extra)
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
    MAXB = dims(bt, "B, max_blocks", "block_table")[1]
    check_shape(bt, (B, MAXB), "block_table")
    sl = as_input(cache_seqlens, "int32", "cache_seqlens").reshape(-1)
    check_shape(sl, (B,), "cache_seqlens")
    if ctx.check_data:
        _check_pages(bt, sl, NB)
    ns = as_input(num_splits, "int32", "num_splits").reshape(-1)
    check_shape(ns, (B + 1,), "num_splits")
    meta = as_input(tile_scheduler_metadata, "int32", "tile_scheduler_metadata")
    if meta.ndim != 2 or meta.shape[1] != 8:
        raise ValueError(f"tile_scheduler_metadata must be [num_parts, 8] int32 (from "
                         f"get_mla_metadata), got {meta.shape}")
    S = max(1, int(np.max(ns[1:] - ns[:-1])) if B else 1)  # the grid's split extent
    DV = int_arg(head_dim_v, "head_dim_v")
    if not 1 <= DV <= D:
        raise ValueError(f"head_dim_v must be in [1, {D}] (V is the first head_dim_v columns "
                         f"of each cached row), got {head_dim_v}")
    if meta.shape[0] < 1:
        raise ValueError("tile_scheduler_metadata has no rows (num_parts must be at least 1)")
    scale = float(softmax_scale) if softmax_scale is not None else 1.0 / math.sqrt(D)
    op = np.empty((B, S, SQ, HQ, DV), np.float32)  # split partials (a workspace)
    lp = np.empty((B, S, SQ, HQ), np.float32)
    out = np.empty((B, SQ, HQ, DV), q_arr.dtype)
    lse = np.empty((B, HQ, SQ), np.float32)
    from ..arch import get_chip
    block_H = 64 if get_chip(ctx.chip).capacity_of("L0C") >= DV * 64 * 4 * 2 else 32  # acc_o fits
    split = ctx.compile(mla_split_kernel, B, SQ, HQ, D, DV, NB, MAXB, S, meta.shape[0], scale,
                        bool(causal), block_H, HK)
    plan.launch(split, q_arr, kc, bt, sl, meta, op, lp)
    plan.launch(ctx.compile(mla_combine_kernel, B, SQ, HQ, DV, S), op, lp, out, lse)
    plan.result = (out, lse)
    return plan


def _check_pages(bt, seqlens, num_blocks):
    """The pages a sequence reads (its first ceil(seqlen / 64) block-table entries) must exist:
    a length past the table or an entry outside the cache is a ValueError (the kernel would
    read past k_cache)."""
    for b, n in enumerate(seqlens.tolist()):
        pages = ceil_div(n, PAGE)
        if n < 0:
            raise ValueError(f"cache_seqlens[{b}] = {n} is negative")
        if pages > bt.shape[1]:
            raise ValueError(f"cache_seqlens[{b}] = {n} needs {pages} pages; block_table has "
                             f"{bt.shape[1]} a sequence")
        used = bt[b, :pages]
        bad = used[(used < 0) | (used >= num_blocks)]
        if bad.size:
            raise ValueError(f"block_table[{b}] names block {int(bad[0])} for cache_seqlens[{b}]"
                             f" = {n}; k_cache has {num_blocks} blocks")


def _sparse_plan(ctx, plan, q_arr, k_cache, indices, topk_length, attn_sink, DV, softmax_scale,
                 extra=(None, None, None)):
    """The sparse decode's launches: the split kernel over the main list, again over the extra
    list (extra_k_cache, its own page size, extra_indices_in_kvcache, extra_topk_length) into
    the split slots after the main list's, then the combine kernel over all splits."""
    from .flash_mla_sparse import D_NOPE, D_ROPE, M1_NOPE, sparse_split_kernel
    B, SQ, HQ, D = q_arr.shape
    model1 = D == M1_NOPE + D_ROPE
    if D not in (D_NOPE + D_ROPE, M1_NOPE + D_ROPE) or DV != 512:
        raise ValueError(f"the FP8 sparse caches hold 512 + 64 (V3.2) or 448 + 64 (MODEL1) dims: "
                         f"q head_dim must be 576 or 512 and head_dim_v 512, got {D} and {DV}")
    extra_kc, extra_ind, extra_len = extra
    if (extra_kc is None) != (extra_ind is None) or (extra_len is not None and extra_ind is None):
        raise ValueError("extra_k_cache and extra_indices_in_kvcache come together "
                         "(extra_topk_length only with them)")
    lists = [(k_cache, indices, topk_length, "")]
    if extra_kc is not None:
        lists.append((extra_kc, extra_ind, extra_len, "extra_"))
    prepared = []
    for kc, ind, length, pre in lists:
        kc_arg, NT, page = _sparse_cache(kc, model1, f"{pre}k_cache")
        ind_arr, tl_arr, TOPK, S, per = _sparse_list(ind, length, B, SQ, pre)
        prepared.append((kc_arg, NT, page, ind_arr, tl_arr, TOPK, S, per))
    S_all = sum(p[6] for p in prepared)
    scale = float(softmax_scale) if softmax_scale is not None else 1.0 / math.sqrt(D)
    op = np.empty((B, S_all, SQ, HQ, DV), np.float32)
    lp = np.empty((B, S_all, SQ, HQ), np.float32)
    out = np.empty((B, SQ, HQ, DV), q_arr.dtype)
    lse = np.empty((B, HQ, SQ), np.float32)
    s0 = 0
    for kc_arg, NT, page, ind_arr, tl_arr, TOPK, S, per in prepared:
        split = ctx.compile(sparse_split_kernel, B, SQ, HQ, TOPK, NT, S, per, scale, 32, page,
                            s0, S_all)
        plan.launch(split, q_arr, kc_arg, ind_arr, tl_arr, op, lp)
        s0 += S
    if attn_sink is not None:
        sink = as_input(attn_sink, "float32", "attn_sink").reshape(-1)
        check_shape(sink, (HQ,), "attn_sink")
        combine = ctx.compile(mla_combine_kernel, B, SQ, HQ, DV, S_all, 32, True)
        plan.launch(combine, op, lp, sink, out, lse)
    else:
        plan.launch(ctx.compile(mla_combine_kernel, B, SQ, HQ, DV, S_all), op, lp, out, lse)
    plan.result = (out, lse)
    return plan


def _sparse_cache(k_cache, model1, name):
    """(the cache as the split kernel reads it, its token count, MODEL1's page size or 0)."""
    from .flash_mla_sparse import M1_TOKEN, TOKEN_BYTES
    token = M1_TOKEN if model1 else TOKEN_BYTES
    kc = to_numpy(k_cache, name)
    if kc.dtype.itemsize != 1 or kc.ndim != 4 or kc.shape[2] != 1 or kc.shape[3] != token:
        hk = f" (h_k = {kc.shape[2]}: FlashMLA's sparse decode takes one KV head)" \
            if kc.ndim == 4 and kc.shape[2] != 1 else ""
        raise ValueError(f"{name} must be [num_blocks, page_block_size, 1, {token}] bytes "
                         f"(FlashMLA's {'MODEL1' if model1 else 'V3.2'} FP8 sparse layout), got "
                         f"{kc.shape} {kc.dtype}{hk}")
    page = kc.shape[1] if model1 else 0
    if model1:  # each block's bytes (blocks may be padded apart): [num_blocks, page * 584]
        if kc.strides[1] != token or kc.strides[3] != 1:
            raise ValueError(f"a MODEL1 {name} must be a view of whole blocks: tokens "
                             f"{token} bytes apart, got strides {kc.strides}")
        kc = np.lib.stride_tricks.as_strided(kc, (kc.shape[0], page * token),
                                             (kc.strides[0], 1), writeable=False)
    kc = np.ascontiguousarray(kc)
    NT = kc.shape[0] * (page or kc.shape[1])
    kc_arg = kc.view(np.uint8) if model1 else kc.view(np.uint8).reshape(NT, TOKEN_BYTES)
    return kc_arg, NT, page


def _sparse_list(indices, length, B, SQ, pre):
    """(indices [B, SQ, topk] int32, lengths [B], topk, splits, entries per split)."""
    from .flash_mla_sparse import ROWS
    ind = as_input(indices, "int32", f"{pre}indices")
    if ind.ndim != 3 or ind.shape[:2] != (B, SQ):
        raise ValueError(f"{pre}indices{'_in_kvcache' if pre else ''} must be [{B}, {SQ}, "
                         f"{pre}topk] int32, got {ind.shape}")
    TOPK = ind.shape[2]
    tl_arr = (np.full(B, TOPK, np.int32) if length is None
              else as_input(length, "int32", f"{pre}topk_length").reshape(-1))
    check_shape(tl_arr, (B,), f"{pre}topk_length")
    steps = max(1, ceil_div(TOPK, ROWS))
    S = max(1, ceil_div(TOPK, 512))   # a split per 512 entries of the topk list
    per = ROWS * ceil_div(steps, S)
    S = ceil_div(steps * ROWS, per)
    return ind, tl_arr, TOPK, S, per
