"""FP4 (e2m1) operands for `fp8_fp4_gemm_{nt,nn,tn,tt}` and the m-grouped GEMMs: DeepGEMM's
packed layout, two codes per byte along the contiguous axis (K-major [MN, K/2]: the even K index
in the low nibble; MN-major [K, MN/2]: the even MN index, transpose_packed_fp4's layout), one
scale per 32 K values (recipe gran_k = 32).

Each operand tile is dequantised on the vector unit into a bfloat16 tile (the nibble by shifts,
read as a float4_e2m1fn value with T.reinterpret, times its scale) and the cube runs a plain bfloat16 GEMM over all of K.
With UE8M0 (power-of-two) scales, as DeepGEMM uses for FP4, `value * scale` is exact in
bfloat16 (e2m1 and e4m3 values have at most 4 significant bits), so the result equals the
block-scaled product; other fp32 scales round the dequantised operand to bfloat16.
An FP8 operand in the same GEMM (scales per 128 K values) is dequantised the same way.

On a chip whose cube multiplies packed FP4 with UE8M0 block scales itself (ascend950's MX MMAD,
fp4x2_e2m1 operands, one scale per 32 K values: docs/machine_model.md), two FP4 operands with
their scales packed in uint16 pairs (transform_sf_into_required_layout) go to `mx_gemm_kernel`:
the packed bytes are copied as they are (float4_e2m1fn_x2 tiles, two codes a byte) and one
block-scaled gemm per 512 K values accumulates in L0C; the vector unit does nothing.
A mixed FP8 x FP4 pair with packed scales: the MMAD takes one format, so fp4_to_fp8_kernel widens
the FP4 operand to e4m3 first (exact) and regroup_pairs_kernel spreads gran-128 FP8 scale pairs
to gran 32; mx_gemm_kernel then runs on e4m3 tiles (operand="float8_e4m3fn").
"""
import tilelang_mini.language as T

from ._tiles import sum_with_c


def dequant_gemm_kernel(M, N, K, a_fp4, b_fp4, gran_a, gran_b, out_dtype, separate_c,
                        block_M=64, block_N=128, block_K=128, a_t=False, b_t=False,
                        sfa_t=False, sfb_t=False, groups=0, grouping=None, sfa_blk=False,
                        sfb_blk=False):
    """D[M, N] (= C +) A @ B with each operand dequantised to bfloat16 on the vector unit.

    a_fp4/b_fp4: the operand is packed e2m1 (int8, two codes a byte along its contiguous axis),
    else e4m3. a_t/b_t: the operand is MN-major (A stored [K, M], B [K, N]; packed FP4: [K, M/2],
    two M values a byte, DeepGEMM's transpose_packed_fp4 layout), read with transpose_A/B on the
    cube. gran_a/gran_b: K values per fp32 scale; scales [MN, ceil(K/gran)], or with sfa_t/sfb_t
    [ceil(K/gran), MN]. groups/grouping: 0/None dense (separate_c: a C parameter, else C is D);
    G/"contiguous" (B [G, N, .], grouped_layout [M], rows of group -1 left untouched) or
    G/"masked" (A [G, M, .], D [G, M, N], masked_m [G]); A K-major, B either (b_t: B [G, K, .],
    the nn_contiguous form, scales [G, ceil(K/gran), N] with sfb_t).
    separate_c: False (D = A @ B), True (a C parameter) or "inplace" (D holds C on entry).
    sfa_blk/sfb_blk: an FP8 operand's scales per (128 rows, gran K) block, [ceil(MN/128),
    ceil(K/gran)] (DeepGEMM's (1, 128, 128) recipe for B; [.., MN-blocks] with sf_t): the
    block's row of scales is loaded and spread over its rows on the vector unit."""
    masked, contiguous = grouping == "masked", grouping == "contiguous"
    pa, pb = (2 if a_fp4 else 1), (2 if b_fp4 else 1)
    a_dt = "int8" if a_fp4 else "float8_e4m3fn"
    b_dt = "int8" if b_fp4 else "float8_e4m3fn"
    ca, cb = block_K // gran_a, block_K // gran_b    # scale columns per K step
    sa_cols, sb_cols = -(-K // gran_a), -(-K // gran_b)
    G = max(groups, 1)

    def stored(rows, block, t, pack):  # (stored shape, tile shape) of an operand
        return ((K, rows // pack), (block_K, block // pack)) if t \
            else ((rows, K // pack), (block, block_K // pack))

    (a_shape, a_tile), (b_shape, b_tile) = stored(M, block_M, a_t, pa), stored(N, block_N, b_t, pb)
    sa_rows = -(-M // 128) if sfa_blk else M
    sb_rows = -(-N // 128) if sfb_blk else N
    sa_shape = (sa_cols, sa_rows) if sfa_t else (sa_rows, sa_cols)
    sb_shape = (sb_cols, sb_rows) if sfb_t else (sb_rows, sb_cols)
    if masked:
        a_shape, sa_shape = (G,) + a_shape, (G,) + sa_shape
    if groups:
        b_shape, sb_shape = (G,) + b_shape, (G,) + sb_shape

    @T.macro
    def dequant(src, sf, dst, code, rows, fp4, gran, mn_major, sf_t):
        """dst = the operand's K step as bfloat16: [rows, block_K], or [block_K, rows] when
        mn_major; code holds the nibbles of a packed FP4 operand (two a byte along the
        contiguous axis, the even index in the low nibble)."""
        if mn_major:
            if fp4:
                for k, i in T.Parallel(block_K, rows):
                    code[k, i] = (T.cast(src[k, i // 2], "int32") >> ((i % 2) * 4)) & 15
                if sf_t:
                    for k, i in T.Parallel(block_K, rows):
                        dst[k, i] = T.cast(T.reinterpret(code[k, i], "float4_e2m1fn")
                                           * sf[k // gran, i], "bfloat16")
                else:
                    for k, i in T.Parallel(block_K, rows):
                        dst[k, i] = T.cast(T.reinterpret(code[k, i], "float4_e2m1fn")
                                           * sf[i, k // gran], "bfloat16")
            elif sf_t:
                for k, i in T.Parallel(block_K, rows):
                    dst[k, i] = T.cast(src[k, i] * sf[k // gran, i], "bfloat16")
            else:
                for k, i in T.Parallel(block_K, rows):
                    dst[k, i] = T.cast(src[k, i] * sf[i, k // gran], "bfloat16")
        elif fp4:
            for i, k in T.Parallel(rows, block_K):  # the nibble of K index k
                code[i, k] = (T.cast(src[i, k // 2], "int32") >> ((k % 2) * 4)) & 15
            for i, k in T.Parallel(rows, block_K):  # the code read as an e2m1 value
                dst[i, k] = T.cast(T.reinterpret(code[i, k], "float4_e2m1fn") * sf[i, k // gran],
                                   "bfloat16")
        else:
            for i, k in T.Parallel(rows, block_K):
                dst[i, k] = T.cast(src[i, k] * sf[i, k // gran], "bfloat16")

    @T.macro
    def load(X, SF, x_s, s_s, s_b, g, r, rows, k, pack, cols, t, sf_t, grouped, blk):
        """K step k of row block r: the stored tile and its scales (group g's when grouped)."""
        if blk:  # the 128-row block's scales (rows divides 128), spread over the tile's rows
            if grouped and sf_t:
                T.copy(SF[g, k * cols:(k + 1) * cols, (r * rows) // 128:(r * rows) // 128 + 1],
                       s_b)
            elif grouped:
                T.copy(SF[g, (r * rows) // 128:(r * rows) // 128 + 1, k * cols:(k + 1) * cols],
                       s_b)
            elif sf_t:
                T.copy(SF[k * cols:(k + 1) * cols, (r * rows) // 128:(r * rows) // 128 + 1], s_b)
            else:
                T.copy(SF[(r * rows) // 128:(r * rows) // 128 + 1, k * cols:(k + 1) * cols], s_b)
            if sf_t:
                for j, i in T.Parallel(cols, rows):
                    s_s[j, i] = s_b[j, 0]
            else:
                for i, j in T.Parallel(rows, cols):
                    s_s[i, j] = s_b[0, j]
        if grouped:
            if t:
                T.copy(X[g, k * block_K:(k + 1) * block_K,
                         r * (rows // pack):(r + 1) * (rows // pack)], x_s)
            else:
                T.copy(X[g, r * rows:(r + 1) * rows,
                         k * (block_K // pack):(k + 1) * (block_K // pack)], x_s)
            if not blk:
                if sf_t:
                    T.copy(SF[g, k * cols:(k + 1) * cols, r * rows:(r + 1) * rows], s_s)
                else:
                    T.copy(SF[g, r * rows:(r + 1) * rows, k * cols:(k + 1) * cols], s_s)
        else:
            if t:
                T.copy(X[k * block_K, r * (rows // pack)], x_s)
            else:
                T.copy(X[r * rows, k * (block_K // pack)], x_s)
            if not blk:
                if sf_t:
                    T.copy(SF[k * cols:(k + 1) * cols, r * rows:(r + 1) * rows], s_s)
                else:
                    T.copy(SF[r * rows:(r + 1) * rows, k * cols:(k + 1) * cols], s_s)

    @T.macro
    def mainloop(A, SFA, B, SFB, acc, g, bx, by):
        a_s = T.alloc_shared(a_tile, a_dt)
        b_s = T.alloc_shared(b_tile, b_dt)
        sa = T.alloc_fragment((ca, block_M) if sfa_t else (block_M, ca), "float32")
        sb = T.alloc_fragment((cb, block_N) if sfb_t else (block_N, cb), "float32")
        sa_b = T.alloc_fragment((ca, 1) if sfa_t else (1, ca), "float32")
        sb_b = T.alloc_fragment((cb, 1) if sfb_t else (1, cb), "float32")
        a_w = T.alloc_shared((block_K, block_M) if a_t else (block_M, block_K), "bfloat16")
        b_w = T.alloc_shared((block_K, block_N) if b_t else (block_N, block_K), "bfloat16")
        code_a = T.alloc_fragment((block_K, block_M) if a_t else (block_M, block_K), "uint8")
        code_b = T.alloc_fragment((block_K, block_N) if b_t else (block_N, block_K), "uint8")
        T.clear(acc)
        for k in T.serial(T.ceildiv(K, block_K)):
            load(A, SFA, a_s, sa, sa_b, g, by, block_M, k, pa, ca, a_t, sfa_t, masked, sfa_blk)
            load(B, SFB, b_s, sb, sb_b, g, bx, block_N, k, pb, cb, b_t, sfb_t, groups, sfb_blk)
            dequant(a_s, sa, a_w, code_a, block_M, a_fp4, gran_a, a_t, sfa_t)
            dequant(b_s, sb, b_w, code_b, block_N, b_fp4, gran_b, b_t, sfb_t)
            T.gemm(a_w, b_w, acc, transpose_A=a_t, transpose_B=not b_t)

    @T.macro
    def body(A, SFA, B, SFB, C, D, bx, by):
        acc = T.alloc_fragment((block_M, block_N), "float32")
        out = T.alloc_fragment((block_M, block_N), out_dtype)
        mainloop(A, SFA, B, SFB, acc, 0, bx, by)
        add_c(C, acc, out, bx, by)
        T.copy(out, D[by * block_M, bx * block_N])

    @T.macro
    def grouped_body(A, SFA, B, SFB, D, INFO, bx, by, bz):
        """Contiguous: the block's group is its first row's; rows marked -1 are not stored.
        Masked: group bz's rows below masked_m[bz] only."""
        acc = T.alloc_fragment((block_M, block_N), "float32")
        out = T.alloc_fragment((block_M, block_N), out_dtype)
        if contiguous:
            g = INFO[by * block_M]
            if g >= 0:
                mainloop(A, SFA, B, SFB, acc, g, bx, by)
                T.copy(acc, out)
                for i in T.serial(block_M):
                    if by * block_M + i < M:
                        if INFO[by * block_M + i] >= 0:
                            T.copy(out[i:i + 1, :], D[by * block_M + i, bx * block_N])
        else:
            if by * block_M < INFO[bz]:
                mainloop(A, SFA, B, SFB, acc, bz, bx, by)
                T.copy(acc, out)
                for i in T.serial(block_M):
                    if by * block_M + i < INFO[bz]:
                        T.copy(out[i:i + 1, :],
                               D[bz, by * block_M + i, bx * block_N:(bx + 1) * block_N])

    add_c = sum_with_c(block_M, block_N, bool(separate_c))  # "inplace": C is D
    if grouping is None:
        return _prim_func(body, M, N, (a_shape, a_dt), (sa_shape, "float32"), (b_shape, b_dt),
                          (sb_shape, "float32"), out_dtype, separate_c not in (None, False,
                                                                            "inplace"),
                          block_M, block_N)
    d_shape = (G, M, N) if masked else (M, N)
    info_shape = (G,) if masked else (M,)
    gx, gy, gz = T.ceildiv(N, block_N), T.ceildiv(M, block_M), (G if masked else 1)

    @T.prim_func
    def fp8_fp4_grouped_gemm(A: T.Tensor(a_shape, a_dt), SFA: T.Tensor(sa_shape, "float32"),
                             B: T.Tensor(b_shape, b_dt), SFB: T.Tensor(sb_shape, "float32"),
                             D: T.Tensor(d_shape, out_dtype), INFO: T.Tensor(info_shape, "int32")):
        with T.Kernel(gx, gy, gz) as (bx, by, bz):
            grouped_body(A, SFA, B, SFB, D, INFO, bx, by, bz)
    return fp8_fp4_grouped_gemm


def _prim_func(body, M, N, a, sfa, b, sfb, out_dtype, with_c, block_M, block_N):
    """The FP4 GEMMs' prim_func around `body(A, SFA, B, SFB, C, D, bx, by)`: a, sfa, b, sfb are
    (shape, dtype) of the operands; with_c adds a float32 C [M, N] parameter (else C is D)."""
    gx, gy = T.ceildiv(N, block_N), T.ceildiv(M, block_M)
    (a_shape, a_dt), (sa_shape, sa_dt), (b_shape, b_dt), (sb_shape, sb_dt) = a, sfa, b, sfb
    if with_c:
        @T.prim_func
        def fp8_fp4_gemm_c(A: T.Tensor(a_shape, a_dt), SFA: T.Tensor(sa_shape, sa_dt),
                           B: T.Tensor(b_shape, b_dt), SFB: T.Tensor(sb_shape, sb_dt),
                           C: T.Tensor((M, N), "float32"), D: T.Tensor((M, N), out_dtype)):
            with T.Kernel(gx, gy) as (bx, by):
                body(A, SFA, B, SFB, C, D, bx, by)
        return fp8_fp4_gemm_c

    @T.prim_func
    def fp8_fp4_gemm(A: T.Tensor(a_shape, a_dt), SFA: T.Tensor(sa_shape, sa_dt),
                     B: T.Tensor(b_shape, b_dt), SFB: T.Tensor(sb_shape, sb_dt),
                     D: T.Tensor((M, N), out_dtype)):
        with T.Kernel(gx, gy) as (bx, by):
            body(A, SFA, B, SFB, D, D, bx, by)
    return fp8_fp4_gemm


MX_GRAN = 32  # K values per UE8M0 scale of FP4 operands (DeepGEMM's gran_k = 32)


def mx_gemm_kernel(M, N, K, out_dtype, c_mode, block_M=128, block_N=128, block_K=512,
                   operand="float4_e2m1fn_x2"):
    """D[M, N] (= C +) A @ B.T on the MX MMAD: A [M, K/2] and B [N, K/2] packed e2m1
    (float4_e2m1fn_x2), SFA [ceil(K/64), M] and SFB [ceil(K/64), N] uint16 UE8M0 pairs (groups
    2j, 2j + 1 of 32 K values, low byte first), MN-major. c_mode: None, "separate" or "inplace".
    operand="float8_e4m3fn": A [M, K] and B [N, K] e4m3 with the same gran-32 scales (the mixed
    FP8 x FP4 GEMM after its FP4 operand was widened by fp4_to_fp8_kernel), 256 K a step."""
    pack = 2 if operand == "float4_e2m1fn_x2" else 1
    block_K = block_K if pack == 2 else 256
    KS, PK = K // pack, block_K // (2 * MX_GRAN)  # stored columns; scale pairs per K step
    KP = T.ceildiv(T.ceildiv(K, MX_GRAN), 2)
    x2 = operand

    @T.macro
    def body(A, SFA, B, SFB, C, D, bx, by):
        a_s = T.alloc_shared((block_M, block_K // pack), x2)
        b_s = T.alloc_shared((block_N, block_K // pack), x2)
        sa = T.alloc_shared((PK, block_M), "uint16")
        sb = T.alloc_shared((PK, block_N), "uint16")
        acc = T.alloc_fragment((block_M, block_N), "float32")
        out = T.alloc_fragment((block_M, block_N), out_dtype)
        T.clear(acc)
        for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
            T.copy(A[by * block_M, k * (block_K // pack)], a_s)
            T.copy(B[bx * block_N, k * (block_K // pack)], b_s)
            T.copy(SFA[k * PK:(k + 1) * PK, by * block_M:(by + 1) * block_M], sa)
            T.copy(SFB[k * PK:(k + 1) * PK, bx * block_N:(bx + 1) * block_N], sb)
            T.gemm(a_s, b_s, acc, transpose_B=True, scale_A=sa, scale_B=sb, scale_gran=MX_GRAN)
        add_c(C, acc, out, bx, by)
        T.copy(out, D[by * block_M, bx * block_N])

    add_c = sum_with_c(block_M, block_N, c_mode is not None)
    return _prim_func(body, M, N, ((M, KS), x2), ((KP, M), "uint16"), ((N, KS), x2),
                      ((KP, N), "uint16"), out_dtype, c_mode == "separate", block_M, block_N)


def fp4_to_fp8_kernel(R, K, block_R=64, block_K=128):
    """Y [R, K] e4m3 = the e2m1 values of X [R, K/2] (packed, the even K index in the low
    nibble): every e2m1 value is an e4m3 value, so the widening is exact and the gran-32 scales
    stay as they are. The mixed FP8 x FP4 GEMM's prepass: the MX MMAD multiplies one format."""

    @T.prim_func
    def fp4_to_fp8(X: T.Tensor((R, K // 2), "uint8"), Y: T.Tensor((R, K), "float8_e4m3fn")):
        with T.Kernel(T.ceildiv(K, block_K), T.ceildiv(R, block_R)) as (bx, by):
            x_s = T.alloc_fragment((block_R, block_K // 2), "uint8")
            code = T.alloc_fragment((block_R, block_K), "uint8")
            y_s = T.alloc_fragment((block_R, block_K), "float8_e4m3fn")
            T.copy(X[by * block_R, bx * (block_K // 2)], x_s)
            for i, k in T.Parallel(block_R, block_K):
                code[i, k] = (T.cast(x_s[i, k // 2], "int32") >> ((k % 2) * 4)) & 15
            for i, k in T.Parallel(block_R, block_K):
                y_s[i, k] = T.cast(T.cast(T.reinterpret(code[i, k], "float4_e2m1fn"), "float32"),
                                   "float8_e4m3fn")
            T.copy(y_s, Y[by * block_R, bx * block_K])

    return fp4_to_fp8


def regroup_pairs_kernel(KP_in, MN, KP_out, ratio, block=128):
    """O [KP_out, MN] = UE8M0 pairs of groups `ratio` times finer than those of S [KP_in, MN]
    (uint16 pairs, MN-major): fine group j takes coarse group j // ratio's byte (a gran-128
    scale stands for its four gran-32 groups)."""

    @T.prim_func
    def ue8m0_pairs_regroup(S: T.Tensor((KP_in, MN), "uint16"),
                            O: T.Tensor((KP_out, MN), "uint16")):
        with T.Kernel(T.ceildiv(MN, block)) as bx:
            s_s = T.alloc_fragment((KP_in, block), "uint16")
            o_s = T.alloc_fragment((KP_out, block), "uint16")
            T.copy(S[0:KP_in, bx * block:(bx + 1) * block], s_s)
            for j, i in T.Parallel(KP_out, block):
                o_s[j, i] = T.cast(
                    ((T.cast(s_s[(2 * j) // ratio // 2, i], "int32")
                      >> (((2 * j) // ratio % 2) * 8)) & 255)
                    | (((T.cast(s_s[(2 * j + 1) // ratio // 2, i], "int32")
                         >> (((2 * j + 1) // ratio % 2) * 8)) & 255) << 8), "uint16")
            T.copy(o_s, O[0:KP_out, bx * block:(bx + 1) * block])

    return ue8m0_pairs_regroup
