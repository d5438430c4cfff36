"""FlashMLA's sparse decode with an FP8 KV cache: `flash_mla_with_kvcache(..., is_fp8_kvcache=True,
indices=...)`, as tile kernels.

The cache (FlashMLA's V3.2 "FP8 sparse" layout) is uint8 [num_blocks, page_block_size, 1, 656]:
per token 512 e4m3 values (the latent, "NoPE" part), 4 fp32 scales (one per 128 values) and 64
bfloat16 values (the RoPE part, not quantised). indices [B, s_q, topk] int32 name the tokens
each query attends: `block * page_block_size + offset` into the cache, -1 (or past the cache) for
none; topk_length [B] keeps the first topk_length[b] of them; attn_sink [h_q] scales the output
by `exp(lse) / (exp(lse) + exp(sink))` (lse itself unchanged).

The split kernel (block = batch, query position, block of heads and a share of the topk list)
gathers ROWS tokens at a time (one copy of 656 bytes each, the row read from `indices` at run
time), decodes them on the vector unit (T.reinterpret of the e4m3 bytes times their scale; the
four scale bytes and the two bytes of each RoPE value assembled with shifts), and runs the online
softmax on the cube and vector units; invalid tokens score -1e30. The combine kernel of the dense
decode merges the splits (and applies the sink).
"""
import tilelang_mini.language as T

D_NOPE, D_ROPE, TILE = 512, 64, 128
SCALE_OFF = D_NOPE                      # 4 fp32 scales after the e4m3 values
ROPE_OFF = D_NOPE + 4 * (D_NOPE // TILE)  # then the bfloat16 RoPE part
TOKEN_BYTES = ROPE_OFF + 2 * D_ROPE     # 656
ROWS = 32                               # tokens gathered per step
NEG = -1e30


def sparse_split_kernel(B, SQ, HQ, TOPK, NT, S, per, scale, block_H=32):
    """Partials OP [B, S, SQ, HQ, 512] (normalised) and LP [B, S, SQ, HQ] (log-sum-exp) of
    split s: topk entries [s * per, (s + 1) * per)."""
    block_H = min(block_H, HQ)
    HB = T.ceildiv(HQ, block_H)
    D, DV = D_NOPE + D_ROPE, D_NOPE
    steps = per // ROWS
    from .flash_mla import online_softmax
    fold = online_softmax(block_H, ROWS, DV)

    @T.prim_func
    def mla_sparse_fp8_split(Q: T.Tensor((B, SQ, HQ, D), "bfloat16"),
                             KC: T.Tensor((NT, TOKEN_BYTES), "uint8"),
                             IND: T.Tensor((B, SQ, TOPK), "int32"), TL: T.Tensor((B,), "int32"),
                             OP: T.Tensor((B, S, SQ, HQ, DV), "float32"),
                             LP: T.Tensor((B, S, SQ, HQ), "float32")):
        with T.Kernel(HB * SQ, S, B) as (bh, s, b):
            q_s = T.alloc_shared((block_H, D), "bfloat16")
            raw = T.alloc_fragment((ROWS, TOKEN_BYTES), "uint8")
            sc = T.alloc_fragment((ROWS, D_NOPE // TILE), "float32")
            ok = T.alloc_fragment((ROWS,), "float32")
            ids = T.alloc_fragment((ROWS,), "int32")
            k_s = T.alloc_shared((ROWS, D), "bfloat16")
            acc_s = T.alloc_fragment((block_H, ROWS), "float32")
            p_s = T.alloc_fragment((block_H, ROWS), "bfloat16")
            acc_o = T.alloc_fragment((block_H, DV), "float32")
            m = T.alloc_fragment((block_H,), "float32")
            m_prev = T.alloc_fragment((block_H,), "float32")
            alpha = T.alloc_fragment((block_H,), "float32")
            l_sum = T.alloc_fragment((block_H,), "float32")
            row_sum = T.alloc_fragment((block_H,), "float32")
            lse = T.alloc_fragment((block_H,), "float32")
            sq = bh // HB
            h0 = (bh % HB) * block_H
            n_valid = T.min(TL[b], TOPK)
            T.copy(Q[b, sq, h0, 0], q_s)
            T.fill(acc_o, 0.0)
            T.fill(l_sum, 0.0)
            T.fill(m, NEG)
            T.clear(ids)
            for it in T.serial(steps):
                t0 = s * per + it * ROWS
                if t0 < n_valid:
                    for j in T.serial(ROWS):  # gather: one token's 656 bytes per copy
                        idx = IND[b, sq, T.min(t0 + j, TOPK - 1)]
                        T.copy(KC[T.max(T.min(idx, NT - 1), 0), 0:TOKEN_BYTES], raw[j, :])
                    T.copy(IND[b, sq, t0:t0 + ROWS], ids)  # (clipped at topk: masked below)
                    for j in T.Parallel(ROWS):
                        ok[j] = T.cast(t0 + j < n_valid, "float32") * T.cast(
                            ids[j] >= 0, "float32") * T.cast(ids[j] < NT, "float32")
                    for j, g in T.Parallel(ROWS, D_NOPE // TILE):
                        sc[j, g] = T.reinterpret(
                            T.cast(raw[j, SCALE_OFF + 4 * g], "uint32")
                            | (T.cast(raw[j, SCALE_OFF + 4 * g + 1], "uint32") << 8)
                            | (T.cast(raw[j, SCALE_OFF + 4 * g + 2], "uint32") << 16)
                            | (T.cast(raw[j, SCALE_OFF + 4 * g + 3], "uint32") << 24), "float32")
                    # an invalid token's row is 0 (its bytes may hold NaN: 0 * NaN is NaN)
                    for j, c in T.Parallel(ROWS, D_NOPE):
                        k_s[j, c] = T.if_then_else(ok[j] > 0.5, T.cast(
                            T.reinterpret(raw[j, c], "float8_e4m3fn") * sc[j, c // TILE],
                            "bfloat16"), 0.0)
                    for j, c in T.Parallel(ROWS, D_ROPE):  # bf16 bits as the top of a float32
                        k_s[j, D_NOPE + c] = T.if_then_else(ok[j] > 0.5, T.cast(T.reinterpret(
                            (T.cast(raw[j, ROPE_OFF + 2 * c], "uint32") << 16)
                            | (T.cast(raw[j, ROPE_OFF + 2 * c + 1], "uint32") << 24),
                            "float32"), "bfloat16"), 0.0)
                    T.gemm(q_s, k_s, acc_s, transpose_B=True, clear_accum=True)
                    for i, j in T.Parallel(block_H, ROWS):
                        acc_s[i, j] = acc_s[i, j] * scale - (1.0 - ok[j]) * 1e30
                    fold(acc_s, p_s, acc_o, m, m_prev, alpha, l_sum, row_sum)
                    T.gemm(p_s, k_s[:, 0:DV], acc_o)
            for i, j in T.Parallel(block_H, DV):
                acc_o[i, j] = acc_o[i, j] / T.max(l_sum[i], 1e-30)
            for i in T.Parallel(block_H):  # -1e30 scores only: no key (the combine drops it)
                lse[i] = T.if_then_else(m[i] > -1e29, m[i] + T.log(l_sum[i]), NEG)
            T.copy(acc_o, OP[b, s, sq, h0, 0])
            T.copy(lse, LP[b, s, sq, h0])

    return mla_sparse_fp8_split
