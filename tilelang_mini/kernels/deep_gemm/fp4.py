"""FP4 (e2m1) operands for `fp8_fp4_gemm_nt`: DeepGEMM's packed layout, two codes per byte
(the even K index in the low nibble), one scale per 32 K values (recipe gran_k = 32).

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
"""
import tilelang_mini.language as T

from ._tiles import sum_with_c


def dequant_gemm_kernel(M, N, K, a_fp4, b_fp4, gran_a, gran_b, out_dtype, separate_c,
                        block_M=64, block_N=128, block_K=128):
    KA = K // 2 if a_fp4 else K
    KB = K // 2 if b_fp4 else K
    a_dt = "int8" if a_fp4 else "float8_e4m3fn"
    b_dt = "int8" if b_fp4 else "float8_e4m3fn"
    sa_cols, sb_cols = -(-K // gran_a), -(-K // gran_b)
    ta, tb = block_K // 2 if a_fp4 else block_K, block_K // 2 if b_fp4 else block_K

    @T.macro
    def dequant(src, sf, dst, code, rows, fp4, gran):
        if fp4:
            for i, k in T.Parallel(rows, block_K):  # the nibble of K index k
                code[i, k] = (T.cast(src[i, k // 2], "int32") >> ((k % 2) * 4)) & 15
            for i, k in T.Parallel(rows, block_K):  # the code read as an e2m1 value
                dst[i, k] = T.cast(T.reinterpret(code[i, k], "float4_e2m1fn") * sf[i, k // gran],
                                   "bfloat16")
        else:
            for i, k in T.Parallel(rows, block_K):
                dst[i, k] = T.cast(src[i, k] * sf[i, k // gran], "bfloat16")

    @T.macro
    def body(A, SFA, B, SFB, C, D, bx, by):
        a_s = T.alloc_shared((block_M, ta), a_dt)
        b_s = T.alloc_shared((block_N, tb), b_dt)
        sa = T.alloc_fragment((block_M, block_K // gran_a), "float32")
        sb = T.alloc_fragment((block_N, block_K // gran_b), "float32")
        a_w = T.alloc_shared((block_M, block_K), "bfloat16")
        b_w = T.alloc_shared((block_N, block_K), "bfloat16")
        code_a = T.alloc_fragment((block_M, block_K), "uint8")
        code_b = T.alloc_fragment((block_N, block_K), "uint8")
        acc = T.alloc_fragment((block_M, block_N), "float32")
        out = T.alloc_fragment((block_M, block_N), out_dtype)
        T.clear(acc)
        for k in T.serial(T.ceildiv(K, block_K)):
            T.copy(A[by * block_M, k * ta], a_s)
            T.copy(B[bx * block_N, k * tb], b_s)
            T.copy(SFA[by * block_M, k * (block_K // gran_a)], sa)
            T.copy(SFB[bx * block_N, k * (block_K // gran_b)], sb)
            dequant(a_s, sa, a_w, code_a, block_M, a_fp4, gran_a)
            dequant(b_s, sb, b_w, code_b, block_N, b_fp4, gran_b)
            T.gemm(a_w, b_w, acc, transpose_B=True)
        add_c(C, acc, out, bx, by)
        T.copy(out, D[by * block_M, bx * block_N])

    add_c = sum_with_c(block_M, block_N, separate_c)
    return _prim_func(body, M, N, ((M, KA), a_dt), ((M, sa_cols), "float32"), ((N, KB), b_dt),
                      ((N, sb_cols), "float32"), out_dtype, separate_c, block_M, block_N)


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


def mx_gemm_kernel(M, N, K, out_dtype, c_mode, block_M=128, block_N=128, block_K=512):
    """D[M, N] (= C +) A @ B.T on the MX MMAD: A [M, K/2] and B [N, K/2] packed e2m1
    (float4_e2m1fn_x2), SFA [ceil(K/64), M] and SFB [ceil(K/64), N] uint16 UE8M0 pairs (groups
    2j, 2j + 1 of 32 K values, low byte first), MN-major. c_mode: None, "separate" or "inplace"."""
    KS, PK = K // 2, block_K // (2 * MX_GRAN)  # packed columns; scale pairs per K step
    KP = T.ceildiv(T.ceildiv(K, MX_GRAN), 2)
    x2 = "float4_e2m1fn_x2"

    @T.macro
    def body(A, SFA, B, SFB, C, D, bx, by):
        a_s = T.alloc_shared((block_M, block_K // 2), x2)
        b_s = T.alloc_shared((block_N, block_K // 2), x2)
        sa = T.alloc_shared((PK, block_M), "uint16")
        sb = T.alloc_shared((PK, block_N), "uint16")
        acc = T.alloc_fragment((block_M, block_N), "float32")
        out = T.alloc_fragment((block_M, block_N), out_dtype)
        T.clear(acc)
        for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
            T.copy(A[by * block_M, k * (block_K // 2)], a_s)
            T.copy(B[bx * block_N, k * (block_K // 2)], b_s)
            T.copy(SFA[k * PK:(k + 1) * PK, by * block_M:(by + 1) * block_M], sa)
            T.copy(SFB[k * PK:(k + 1) * PK, bx * block_N:(bx + 1) * block_N], sb)
            T.gemm(a_s, b_s, acc, transpose_B=True, scale_A=sa, scale_B=sb, scale_gran=MX_GRAN)
        add_c(C, acc, out, bx, by)
        T.copy(out, D[by * block_M, bx * block_N])

    add_c = sum_with_c(block_M, block_N, c_mode is not None)
    return _prim_func(body, M, N, ((M, KS), x2), ((KP, M), "uint16"), ((N, KS), x2),
                      ((KP, N), "uint16"), out_dtype, c_mode == "separate", block_M, block_N)
