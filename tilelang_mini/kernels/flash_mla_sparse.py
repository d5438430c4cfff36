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

MODEL1's layout (q head_dim 512 = 448 NoPE + 64 RoPE, head_dim_v 512: V is the whole row): a
block of page_block_size tokens holds each token's 448 e4m3 values and 64 bfloat16 RoPE values
(576 bytes a token, one after another), then each token's 7 UE8M0 scales (one per 64 values)
and a pad byte (8 bytes a token); blocks may be padded (the cache is a view [num_blocks,
page_block_size, 1, 584] of the blocks' bytes). The kernel reads it as [num_blocks,
page_block_size * 584] bytes: two copies per token (its 576 bytes, its 8 scale bytes).
"""
import tilelang_mini.language as T

D_NOPE, D_ROPE, TILE = 512, 64, 128
SCALE_OFF = D_NOPE                      # 4 fp32 scales after the e4m3 values
ROPE_OFF = D_NOPE + 4 * (D_NOPE // TILE)  # then the bfloat16 RoPE part
TOKEN_BYTES = ROPE_OFF + 2 * D_ROPE     # 656
ROWS = 32                               # tokens gathered per step
NEG = -1e30
M1_NOPE, M1_TILE = 448, 64              # MODEL1: 448 e4m3 values, a UE8M0 scale per 64
M1_DATA = M1_NOPE + 2 * D_ROPE          # 576 bytes of values a token
M1_SCALES = 8                           # then 7 scale bytes and a pad byte a token
M1_TOKEN = M1_DATA + M1_SCALES          # 584


def sparse_split_kernel(B, SQ, HQ, TOPK, NT, S, per, scale, block_H=32, page=0, s0=0,
                        S_out=0):
    """Partials OP [B, S_out, SQ, HQ, 512] (normalised) and LP [B, S_out, SQ, HQ] (log-sum-exp)
    of split s (written at s0 + s): topk entries [s * per, (s + 1) * per). page > 0: MODEL1's
    layout with blocks of `page` tokens (KC [NT / page, page * 584] bytes), else V3.2's
    (KC [NT, 656]). S_out (default S) and s0 let a second launch over FlashMLA's
    extra_k_cache / extra_indices_in_kvcache write its splits after the main list's, so the
    combine kernel merges both lists into one softmax."""
    S_out = S_out or S
    block_H = min(block_H, HQ)
    HB = T.ceildiv(HQ, block_H)
    model1 = page > 0
    nope, tile = (M1_NOPE, M1_TILE) if model1 else (D_NOPE, TILE)
    D = nope + D_ROPE
    DV = D if model1 else D_NOPE
    tiles = nope // tile
    rope_off = 448 if model1 else ROPE_OFF
    row_bytes = M1_DATA if model1 else TOKEN_BYTES
    kc_shape = (NT // page, page * M1_TOKEN) if model1 else (NT, TOKEN_BYTES)
    steps = per // ROWS
    from .flash_mla import online_softmax, query_heads
    softmax_state, fold = online_softmax(block_H, ROWS, DV)

    @T.prim_func
    def mla_sparse_fp8_split(Q: T.Tensor((B, SQ, HQ, D), "bfloat16"),
                             KC: T.Tensor(kc_shape, "uint8"),
                             IND: T.Tensor((B, SQ, TOPK), "int32"), TL: T.Tensor((B,), "int32"),
                             OP: T.Tensor((B, S_out, SQ, HQ, DV), "float32"),
                             LP: T.Tensor((B, S_out, SQ, HQ), "float32")):
        with T.Kernel(HB * SQ, S, B) as (bh, s, b):
            raw = T.alloc_fragment((ROWS, row_bytes), "uint8")
            sc = T.alloc_fragment((ROWS, tiles), "float32")
            sraw = T.alloc_fragment((ROWS, M1_SCALES), "uint8")  # MODEL1's scale bytes
            ok = T.alloc_fragment((ROWS,), "float32")
            ids = T.alloc_fragment((ROWS,), "int32")
            k_s = T.alloc_shared((ROWS, D), "bfloat16")
            acc_s, p_s, acc_o, m, l_sum, lse, scratch = softmax_state()
            sq = bh // HB
            h0 = (bh % HB) * block_H
            n_valid = T.min(TL[b], TOPK)
            q_s = query_heads(Q, b, sq, h0, block_H, D)
            T.clear(ids)
            for it in T.serial(steps):
                t0 = s * per + it * ROWS
                if t0 < n_valid:
                    if model1:  # a token's 576 value bytes, then its 8 scale bytes
                        for j in T.serial(ROWS):
                            tok = T.max(T.min(IND[b, sq, T.min(t0 + j, TOPK - 1)], NT - 1), 0)
                            T.copy(KC[tok // page, (tok % page) * M1_DATA:
                                      (tok % page) * M1_DATA + M1_DATA], raw[j, :])
                            T.copy(KC[tok // page, page * M1_DATA + (tok % page) * M1_SCALES:
                                      page * M1_DATA + (tok % page) * M1_SCALES + M1_SCALES],
                                   sraw[j, :])
                        for j, g in T.Parallel(ROWS, tiles):  # UE8M0 byte e: 2^(e - 127)
                            sc[j, g] = T.cast(T.reinterpret(sraw[j, g], "float8_e8m0fnu"),
                                              "float32")
                    else:
                        for j in T.serial(ROWS):  # gather: one token's 656 bytes per copy
                            idx = IND[b, sq, T.min(t0 + j, TOPK - 1)]
                            T.copy(KC[T.max(T.min(idx, NT - 1), 0), 0:TOKEN_BYTES], raw[j, :])
                    T.copy(IND[b, sq, t0:t0 + ROWS], ids)  # (clipped at topk: masked below)
                    for j in T.Parallel(ROWS):
                        ok[j] = T.cast(t0 + j < n_valid, "float32") * T.cast(
                            ids[j] >= 0, "float32") * T.cast(ids[j] < NT, "float32")
                    if not model1:
                        for j, g in T.Parallel(ROWS, tiles):
                            sc[j, g] = T.reinterpret(
                                T.cast(raw[j, SCALE_OFF + 4 * g], "uint32")
                                | (T.cast(raw[j, SCALE_OFF + 4 * g + 1], "uint32") << 8)
                                | (T.cast(raw[j, SCALE_OFF + 4 * g + 2], "uint32") << 16)
                                | (T.cast(raw[j, SCALE_OFF + 4 * g + 3], "uint32") << 24),
                                "float32")
                    # an invalid token's row is 0 (its bytes may hold NaN: 0 * NaN is NaN)
                    for j, c in T.Parallel(ROWS, nope):
                        k_s[j, c] = T.if_then_else(ok[j] > 0.5, T.cast(
                            T.reinterpret(raw[j, c], "float8_e4m3fn") * sc[j, c // tile],
                            "bfloat16"), 0.0)
                    for j, c in T.Parallel(ROWS, D_ROPE):  # bf16 bits as the top of a float32
                        k_s[j, nope + c] = T.if_then_else(ok[j] > 0.5, T.cast(T.reinterpret(
                            (T.cast(raw[j, rope_off + 2 * c], "uint32") << 16)
                            | (T.cast(raw[j, rope_off + 2 * c + 1], "uint32") << 24),
                            "float32"), "bfloat16"), 0.0)
                    T.gemm(q_s, k_s, acc_s, transpose_B=True, clear_accum=True)
                    for i, j in T.Parallel(block_H, ROWS):
                        acc_s[i, j] = acc_s[i, j] * scale - (1.0 - ok[j]) * 1e30
                    fold(acc_s, p_s, acc_o, m, l_sum, scratch)
                    T.gemm(p_s, k_s[:, 0:DV], acc_o)
            for i, j in T.Parallel(block_H, DV):
                acc_o[i, j] = acc_o[i, j] / T.max(l_sum[i], 1e-30)
            for i in T.Parallel(block_H):  # -1e30 scores only: no key (the combine drops it)
                lse[i] = T.if_then_else(m[i] > -1e29, m[i] + T.log(l_sum[i]), NEG)
            T.copy(acc_o, OP[b, s0 + s, sq, h0, 0])
            T.copy(lse, LP[b, s0 + s, sq, h0])

    return mla_sparse_fp8_split
