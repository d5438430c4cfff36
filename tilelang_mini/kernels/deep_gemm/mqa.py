"""DeepGEMM's `fp8_mqa_logits`: the logits of the sparse-attention indexer.

q [S, H, D] e4m3, kv = (kv [SK, D] e4m3, kv_sf [SK] fp32), weights [S, H] fp32, and per query row
the key window [ks[s], ke[s]) (int32):

    logits[s, t] = sum_h relu((q[s, h] . kv[t]) * kv_sf[t]) * weights[s, h]

and, with clean_logits, -inf outside the window. One kernel: block (bx, by) owns block_M query
rows and block_N keys; for each head the cube computes the (block_M x block_N) scores and the
vector unit folds relu(score * sf) * w into the accumulator. The window is applied as
`+ log(inside)` (log 1 = 0, log 0 = -inf), which needs no select.

FP4 (`fp8_fp4_mqa_logits` with q = (q, q_sf)): q [S, H, D/2] and kv [SK, D/2] hold e2m1 codes two
a byte (the even index in the low nibble), with UE8M0 scales per 32 values packed four to an
int32 (byte j, little-endian, is group j's exponent: DeepGEMM's `per_token_cast_to_fp4(...,
gran_k=32, use_packed_ue8m0=True)`), q_sf [S, H], kv_sf [SK]. The kernel dequantises the tiles
(a prepass kernel per operand, `fp4_decode`: nibble, `T.reinterpret` as float4_e2m1fn, times
`2^(e - 127)` built as the float32 bits `e << 23`) into bfloat16 (exact), once for all key
blocks, then runs the same logits kernel on bfloat16 tiles (no scale left to apply): the logits
are `sum_h relu(q_h . kv) * w_h` (the scales are inside the dot product). On a chip whose cube
applies UE8M0 scales per 32 K values (ascend950's MX MMAD) and D a multiple of 64, the codes go
to the cube as they are (float4_e2m1fn_x2 tiles, one scaled MMAD per head); a small kernel
regroups the scale bytes into the MMAD's MN-major uint16 pairs first (`ue8m0_mqa_pairs`).
"""
import numpy as np

import tilelang_mini.language as T

from ...ir import dtypes

from .._core import Plan, as_input, as_output, check_shape, dims, library_function, to_numpy
from ._tiles import fp8_cube, fp8_operand_tiles


@T.macro
def logit_tiles(rows, cols, H, init=0.0):
    """`score, w, acc = logit_tiles(...)`: a head's scores and the logits accumulator (rows x cols
    float32, acc filled with `init`) and the rows' head weights w (rows x H float32)."""
    score = T.alloc_fragment((rows, cols), "float32")
    w = T.alloc_fragment((rows, H), "float32")
    acc = T.alloc_fragment((rows, cols), "float32")
    T.fill(acc, init)
    return score, w, acc


@T.macro
def store_logits(KS, KE, acc, L, row0, col0, block_M, block_N, clean):
    """L[row0:, col0:] = acc, with (clean) -inf outside each query row's key window: acc[i, j]
    += log(KS[row0 + i] <= col0 + j < KE[row0 + i])."""
    if clean:
        ks = T.alloc_fragment((block_M,), "int32")
        ke = T.alloc_fragment((block_M,), "int32")
        T.copy(KS[row0], ks)
        T.copy(KE[row0], ke)
        for i, j in T.Parallel(block_M, block_N):
            acc[i, j] = acc[i, j] + T.log(T.cast(
                (col0 + j >= ks[i]) and (col0 + j < ke[i]), "float32"))
    T.copy(acc, L[row0, col0])


def mqa_logits_kernel(S, H, D, SK, clean, cube_fp8, block_M=64, block_N=128,
                      in_dtype="float8_e4m3fn"):
    """in_dtype "bfloat16": q and kv already hold the values (the FP4 form, decoded by
    fp4_decode_kernel), SF is all ones and not read."""
    mma = "float8_e4m3fn" if cube_fp8 else "bfloat16"
    mma = "bfloat16" if in_dtype == "bfloat16" else mma
    widen = mma != in_dtype
    scaled = in_dtype != "bfloat16"

    @T.prim_func
    def fp8_mqa_logits(Q: T.Tensor((S, H, D), in_dtype),
                       KV: T.Tensor((SK, D), in_dtype), SF: T.Tensor((SK,), "float32"),
                       W: T.Tensor((S, H), "float32"), KS: T.Tensor((S,), "int32"),
                       KE: T.Tensor((S,), "int32"), L: T.Tensor((S, SK), "float32")):
        with T.Kernel(T.ceildiv(SK, block_N), T.ceildiv(S, block_M)) as (bx, by):
            q_s, k_s, q_w, k_w = fp8_operand_tiles((block_M, D), (block_N, D), mma, in_dtype)
            score, w, acc = logit_tiles(block_M, block_N, H)
            sf = T.alloc_fragment((block_N,), "float32")
            T.copy(KV[bx * block_N, 0], k_s)
            if scaled:
                T.copy(SF[bx * block_N], sf)
            T.copy(W[by * block_M, 0], w)
            if widen:
                T.copy(k_s, k_w)
            for h in T.serial(H):
                T.copy(Q[by * block_M:(by + 1) * block_M, h, :], q_s)
                if widen:
                    T.copy(q_s, q_w)
                    T.gemm(q_w, k_w, score, transpose_B=True, clear_accum=True)
                else:
                    T.gemm(q_s, k_s, score, transpose_B=True, clear_accum=True)
                if scaled:
                    for i, j in T.Parallel(block_M, block_N):
                        acc[i, j] = acc[i, j] + T.max(score[i, j] * sf[j], 0.0) * w[i, h]
                else:
                    for i, j in T.Parallel(block_M, block_N):
                        acc[i, j] = acc[i, j] + T.max(score[i, j], 0.0) * w[i, h]
            store_logits(KS, KE, acc, L, by * block_M, bx * block_N, block_M, block_N, clean)

    return fp8_mqa_logits


def fp4_dequant(ctx_rows, D):
    """A T.macro: dst [rows, D] bfloat16 = the packed e2m1 codes src [rows, D/2] (int8) times the
    UE8M0 exponent byte of their 32-value group, sfb[i, sf0 + k // 32] (uint8); code is an int32
    scratch tile [rows, D]."""

    @T.macro
    def dequant(src, sfb, sf0, code, dst):
        for i, k in T.Parallel(ctx_rows, D):
            code[i, k] = (T.cast(src[i, k // 2], "int32") >> ((k % 2) * 4)) & 15
        for i, k in T.Parallel(ctx_rows, D):
            dst[i, k] = T.cast(T.reinterpret(code[i, k], "float4_e2m1fn") * T.reinterpret(
                T.cast(sfb[i, sf0 + k // 32], "int32") << 23, "float32"), "bfloat16")

    return dequant


def fp4_decode_kernel(R, D, block_R=64):
    """Y [R, D] bfloat16 = the values of X [R, D/2] (packed e2m1 codes, int8) times the UE8M0
    exponent bytes SF [R, 4] (uint8, one per 32 values): exact in bfloat16."""
    dq = fp4_dequant(block_R, D)

    @T.prim_func
    def fp4_decode(X: T.Tensor((R, D // 2), "int8"), SF: T.Tensor((R, 4), "uint8"),
                   Y: T.Tensor((R, D), "bfloat16")):
        with T.Kernel(T.ceildiv(R, block_R)) as bx:
            x_b = T.alloc_fragment((block_R, D // 2), "int8")
            s_b = T.alloc_fragment((block_R, 4), "uint8")
            code = T.alloc_fragment((block_R, D), "int32")
            y = T.alloc_fragment((block_R, D), "bfloat16")
            T.copy(X[bx * block_R, 0], x_b)
            T.copy(SF[bx * block_R, 0], s_b)
            dq(x_b, s_b, 0, code, y)
            T.copy(y, Y[bx * block_R, 0])

    return fp4_decode


def packed_sf_bytes(x, shape, name):
    """The bytes of DeepGEMM's int32-packed UE8M0 scales (four a value, little-endian), as a
    uint8 view [*shape, 4] (layout only: no arithmetic)."""
    arr = as_input(x, None, name)
    if arr.dtype.itemsize != 4 or arr.dtype.kind not in "iu":
        raise ValueError(f"{name}: FP4 scales are UE8M0 bytes packed four to an int32 "
                         f"(per_token_cast_to_fp4(..., use_packed_ue8m0=True)), got {arr.dtype}")
    check_shape(arr, shape, name)
    return np.ascontiguousarray(arr.astype("<i4", copy=False)).view(np.uint8).reshape(*shape, 4)


def packed_fp4(x, shape, name):
    """Packed e2m1 codes (int8/uint8, or torch's float4_e2m1fn_x2 bytes) of `shape` as int8."""
    arr = to_numpy(x, name)
    if arr.dtype not in (np.int8, np.uint8):
        raise ValueError(f"{name}: FP4 values are e2m1 codes packed two a byte (int8/uint8), got "
                         f"{arr.dtype}")
    arr = np.ascontiguousarray(arr.view(np.int8))
    check_shape(arr, shape, name)
    return arr


def _logits_fp4(ctx, plan, q, q_sf, kv, weights, ks, ke, clean, logits):
    q0 = to_numpy(q, "q")
    if q0.ndim != 3:
        raise ValueError(f"q must be [S, H, D/2] packed FP4, got {q0.shape}")
    S, H, D2 = q0.shape
    D = 2 * D2
    if D % 32 or D > 128:
        raise ValueError(f"FP4 q: head dim {D} must be a multiple of 32 up to 128 (one UE8M0 "
                         f"scale per 32 values, four packed in an int32)")
    q_arr = packed_fp4(q0, (S, H, D2), "q").reshape(S * H, D2)
    qsf = packed_sf_bytes(q_sf, (S, H), "q_sf").reshape(S * H, 4)
    kv0 = to_numpy(kv[0], "kv")
    SK = kv0.shape[0]
    kv_arr = packed_fp4(kv0, (SK, D2), "kv (packed FP4 with an FP4 q)")
    ksf = packed_sf_bytes(kv[1], (SK,), "kv_sf")
    w_arr = as_input(weights, "float32", "weights")
    check_shape(w_arr, (S, H), "weights")
    out = np.empty((S, SK), np.float32) if logits is None else as_output(plan, logits, "logits",
                                                                          "float32")
    check_shape(out, (S, SK), "logits")
    from ...arch import get_chip
    if get_chip(ctx.chip).mx_gran and D % 64 == 0:   # the MX MMAD takes codes and scales as they are
        KPD = D // 64
        qp = np.empty((H, KPD, S), np.uint16)
        kp = np.empty((1, KPD, SK), np.uint16)
        plan.launch(ctx.compile(pairs_kernel, S, H, KPD), qsf.reshape(S, H * 4), qp)
        plan.launch(ctx.compile(pairs_kernel, SK, 1, KPD), ksf, kp)
        kernel = ctx.compile(mqa_logits_mx_kernel, S, H, D, SK, bool(clean))
        plan.launch(kernel, q_arr.view(np.uint8).reshape(S, H, D2), qp, kv_arr.view(np.uint8), kp,
                    w_arr, ks, ke, out)
        plan.result = out if logits is None else logits
        return plan
    q_bf = np.empty((S, H, D), dtypes.to_numpy("bfloat16"))   # the decoded values (work arrays)
    kv_bf = np.empty((SK, D), dtypes.to_numpy("bfloat16"))
    plan.launch(ctx.compile(fp4_decode_kernel, S * H, D), q_arr, qsf, q_bf.reshape(S * H, D))
    plan.launch(ctx.compile(fp4_decode_kernel, SK, D), kv_arr, ksf, kv_bf)
    kernel = ctx.compile(mqa_logits_kernel, S, H, D, SK, bool(clean), False, 64, 128, "bfloat16")
    plan.launch(kernel, q_bf, kv_bf, np.ones(SK, np.float32), w_arr, ks, ke, out)
    plan.result = out if logits is None else logits
    return plan


def _windows(ks, ke, S):
    ks = as_input(ks, "int32", "cu_seq_len_k_start").reshape(-1)
    ke = as_input(ke, "int32", "cu_seq_len_k_end").reshape(-1)
    check_shape(ks, (S,), "cu_seq_len_k_start")
    check_shape(ke, (S,), "cu_seq_len_k_end")
    return ks, ke


@library_function
def fp8_mqa_logits(ctx, q, kv, weights, cu_seq_len_k_start, cu_seq_len_k_end, clean_logits=True,
                   max_seqlen_k=0, logits=None):
    """-> logits [S, SK] float32 (written into `logits` when given); see the module doc.
    max_seqlen_k: DeepGEMM's narrower logits layout is not supported (0 only)."""
    plan = Plan()
    if int(max_seqlen_k or 0):
        raise ValueError(f"max_seqlen_k={max_seqlen_k}: only the full [S, SK] logits layout "
                         f"(max_seqlen_k=0) is supported")
    q_arr = as_input(q, "float8_e4m3fn", "q")
    S, H, D = dims(q_arr, "S, H, D", "q")
    kv_arr, sf_arr = as_input(kv[0], "float8_e4m3fn", "kv"), as_input(kv[1], "float32", "kv_sf")
    SK = kv_arr.shape[0]
    check_shape(kv_arr, (SK, D), "kv")
    sf_arr = sf_arr.reshape(-1)
    check_shape(sf_arr, (SK,), "kv_sf")
    w_arr = as_input(weights, "float32", "weights")
    check_shape(w_arr, (S, H), "weights")
    ks = as_input(cu_seq_len_k_start, "int32", "cu_seq_len_k_start").reshape(-1)
    ke = as_input(cu_seq_len_k_end, "int32", "cu_seq_len_k_end").reshape(-1)
    check_shape(ks, (S,), "cu_seq_len_k_start")
    check_shape(ke, (S,), "cu_seq_len_k_end")
    out = np.empty((S, SK), np.float32) if logits is None else as_output(plan, logits, "logits",
                                                                          "float32")
    check_shape(out, (S, SK), "logits")
    kernel = ctx.compile(mqa_logits_kernel, S, H, D, SK, bool(clean_logits), fp8_cube(ctx.chip))
    plan.launch(kernel, q_arr, kv_arr, sf_arr, w_arr, ks, ke, out)
    plan.result = out if logits is None else logits
    return plan


@library_function
def fp8_fp4_mqa_logits(ctx, q, kv, weights, cu_seq_len_k_start, cu_seq_len_k_end,
                       clean_logits=True, max_seqlen_k=0, logits_dtype=None, logits=None):
    """DeepGEMM's newer name: q = (q e4m3, None) or q alone is fp8_mqa_logits; q = (q packed
    FP4 [S, H, D/2], q_sf int32 [S, H]) with kv = (packed FP4 [SK, D/2], kv_sf int32 [SK]) is
    the FP4 form (module doc). Logits are float32."""
    q0, q_sf = q if isinstance(q, tuple) else (q, None)
    if logits_dtype not in (None, "float32", np.float32) and str(logits_dtype) not in (
            "torch.float32", "float32"):
        raise ValueError(f"logits_dtype {logits_dtype!r}: only float32 logits are supported")
    if q_sf is None:
        return fp8_mqa_logits.plan(ctx, q0, kv, weights, cu_seq_len_k_start, cu_seq_len_k_end,
                                   clean_logits, max_seqlen_k, logits)
    if int(max_seqlen_k or 0):
        raise ValueError(f"max_seqlen_k={max_seqlen_k}: only the full [S, SK] logits layout "
                         f"(max_seqlen_k=0) is supported")
    S = to_numpy(q0, "q").shape[0]
    ks, ke = _windows(cu_seq_len_k_start, cu_seq_len_k_end, S)
    return _logits_fp4(ctx, Plan(), q0, q_sf, kv, weights, ks, ke, clean_logits, logits)


# ----------------------------------------------------------------------------- FP4 on the MX MMAD


def pairs_kernel(R, H, KP, block_R=64):
    """P [H, KP, R] uint16 = the UE8M0 bytes B [R, H * 4] (four a row and head: DeepGEMM's int32
    packed scales) regrouped as the MX MMAD's pairs, MN-major: P[h, p, r] = B[r, 4h + 2p] |
    B[r, 4h + 2p + 1] << 8."""

    @T.prim_func
    def ue8m0_mqa_pairs(B: T.Tensor((R, H * 4), "uint8"), P: T.Tensor((H, KP, R), "uint16")):
        with T.Kernel(T.ceildiv(R, block_R), H) as (bx, h):
            b = T.alloc_fragment((block_R, H * 4), "uint8")
            p = T.alloc_fragment((KP, block_R), "uint16")
            T.copy(B[bx * block_R, 0], b)
            for j, i in T.Parallel(KP, block_R):
                p[j, i] = T.cast(T.cast(b[i, 4 * h + 2 * j], "int32")
                                 | (T.cast(b[i, 4 * h + 2 * j + 1], "int32") << 8), "uint16")
            T.copy(p, P[h, 0:KP, bx * block_R:(bx + 1) * block_R])

    return ue8m0_mqa_pairs


def mqa_logits_mx_kernel(S, H, D, SK, clean, block_M=64, block_N=128):
    """The FP4 logits on the MX MMAD (a chip whose cube applies UE8M0 scales per 32 K values):
    Q [S, H, D/2] and KV [SK, D/2] packed e2m1 as they are, their scale pairs QP [H, D/64, S] and
    KP [1, D/64, SK] (pairs_kernel); one scaled MMAD per head."""
    KPD = D // 64
    x2 = "float4_e2m1fn_x2"

    @T.prim_func
    def fp4_mqa_logits_mx(Q: T.Tensor((S, H, D // 2), x2), QP: T.Tensor((H, KPD, S), "uint16"),
                          KV: T.Tensor((SK, D // 2), x2), KP: T.Tensor((1, KPD, SK), "uint16"),
                          W: T.Tensor((S, H), "float32"), KS: T.Tensor((S,), "int32"),
                          KE: T.Tensor((S,), "int32"), L: T.Tensor((S, SK), "float32")):
        with T.Kernel(T.ceildiv(SK, block_N), T.ceildiv(S, block_M)) as (bx, by):
            q_s = T.alloc_shared((block_M, D // 2), x2)
            k_s = T.alloc_shared((block_N, D // 2), x2)
            sa = T.alloc_shared((KPD, block_M), "uint16")
            sb = T.alloc_shared((KPD, block_N), "uint16")
            score, w, acc = logit_tiles(block_M, block_N, H)
            T.copy(KV[bx * block_N, 0], k_s)
            T.copy(KP[0, 0:KPD, bx * block_N:(bx + 1) * block_N], sb)
            T.copy(W[by * block_M, 0], w)
            for h in T.serial(H):
                T.copy(Q[by * block_M:(by + 1) * block_M, h, :], q_s)
                T.copy(QP[h, 0:KPD, by * block_M:(by + 1) * block_M], sa)
                T.gemm(q_s, k_s, score, transpose_B=True, clear_accum=True, scale_A=sa,
                       scale_B=sb, scale_gran=32)
                for i, j in T.Parallel(block_M, block_N):
                    acc[i, j] = acc[i, j] + T.max(score[i, j], 0.0) * w[i, h]
            store_logits(KS, KE, acc, L, by * block_M, bx * block_N, block_M, block_N, clean)

    return fp4_mqa_logits_mx
