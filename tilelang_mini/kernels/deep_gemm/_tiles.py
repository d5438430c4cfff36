"""The tile kernels behind DeepGEMM's dense and grouped GEMMs.

One kernel shape serves every layout: a (block_M x block_N) output tile per block, a K loop that
loads the A and B tiles in their stored layout (K-major or MN-major, i.e. `transpose_A` /
`transpose_B` on the cube), and an epilogue that adds C and casts to D's dtype.

FP8 (block-scaled) GEMMs run the K loop in steps of the scale granularity (128): each step's
partial product `P = A_k @ B_k` comes out of the cube (L0C) and the vector unit folds it in,
`acc += P * sfa[m, k] * sfb[n, k]`. On a chip whose cube has no FP8 (ascend910b) the FP8 tiles
are widened to bfloat16 on the vector unit first (exact: every e4m3 value is a bfloat16).

With UE8M0 scales packed in pairs (uint16, MN-major: DeepGEMM-Ascend's layout) on a chip whose
cube applies block scales (ascend950's MX MMAD), the K loop is one scaled gemm per 256 K values
into the L0C accumulator: no partial leaves L0C and the vector unit has nothing to do.

Grouped forms read their group of each block from a tensor at run time (contiguous layout: the
group of the block's first row; masked layout: the block's group and that group's row count), and
store only the rows that belong to a group (rows marked -1 and rows past masked_m are left as
they were).
"""
import tilelang_mini.language as T

SF_GRAN = 128  # DeepGEMM's (1, 128, 128) recipe: one scale per 128 K values (and 128 N rows of B)


def fp8_cube(chip: str) -> bool:
    from ...arch import get_chip
    return get_chip(chip).fp8_cube


@T.macro
def fp8_operand_tiles(a_tile, b_tile, mma_dtype, in_dtype="float8_e4m3fn"):
    """`a_s, b_s, a_w, b_w = fp8_operand_tiles(...)`: a cube product's operand tiles as loaded (`in_dtype`)
    and their copies in the cube's dtype `mma_dtype` (bfloat16 where the cube has no FP8: the
    vector unit widens the FP8 tiles into them; unused otherwise)."""
    a_s = T.alloc_shared(a_tile, in_dtype)
    b_s = T.alloc_shared(b_tile, in_dtype)
    a_w = T.alloc_shared(a_tile, mma_dtype)
    b_w = T.alloc_shared(b_tile, mma_dtype)
    return a_s, b_s, a_w, b_w


@T.macro
def store_zeros(dst, shape):
    """dst (a float32 tensor, or the corner `X[i, j]` of its region) = 0 over `shape`: a cleared
    fragment copied out (the accumulators a later launch adds into)."""
    z = T.alloc_fragment(shape, "float32")
    T.clear(z)
    T.copy(z, dst)


def scaled_block_m(chip: str, M: int) -> int:
    """The M tile of a dense FP8 GEMM with fp32 scales on an FP8 cube: every 128-K step's fp32
    partial leaves L0C through FixPipe, 4 bytes an output element per 128 K, and on the 950 that
    is as fast as the cube (FixPipe 256 B/cycle, FP8 MMAD 8192 MACs/cycle: 1/64 cycle an output
    element a step for each), so the per-transfer FixPipe latency decides the bound. A 256-row
    tile halves the transfers (and the B loads) per output; it is taken when M has more than one
    128-row tile and L0C holds two 256 x 128 fp32 partials (the next step's MMAD writes one while
    FixPipe drains the other). 128 otherwise (the 910b widens on the vector unit: 64 there)."""
    from ...arch import get_chip
    c = get_chip(chip)
    if c.fp8_cube and M > SF_GRAN and c.capacity_of("L0C") >= 2 * (2 * SF_GRAN) * SF_GRAN * 4:
        return 2 * SF_GRAN
    return SF_GRAN


def compile_fitting(ctx, block_M, call):
    """ctx.compile(*call(block_M)), or with 128-row tiles when the wider tile's buffers do not
    fit the chip's on-chip memories (e.g. a transposed per-row sfb keeps a whole tile's
    vector work on each AIV): the largest M tile that fits."""
    from ...errors import BufferOverflowError
    key = (call(block_M), ctx)
    if key not in _TOO_BIG:
        try:
            return ctx.compile(*call(block_M))
        except BufferOverflowError:
            if block_M <= SF_GRAN:
                raise
            _TOO_BIG.add(key)   # (not tried again in this process)
    return ctx.compile(*call(SF_GRAN))


_TOO_BIG: set = set()


def sum_with_c(block_M, block_N, with_c):
    """The epilogue's sum as a T.macro: out = C tile (float32, at (by, bx)) + acc, or acc."""

    @T.macro
    def sum_into(C, acc, out, bx, by):
        if with_c:
            c_f = T.alloc_fragment((block_M, block_N), "float32")
            T.copy(C[by * block_M, bx * block_N], c_f)
            for i, j in T.Parallel(block_M, block_N):
                out[i, j] = c_f[i, j] + acc[i, j]
        else:
            T.copy(acc, out)

    return sum_into


def gemm_kernel(M, N, K, a_t, b_t, in_dtype, out_dtype, c_mode, sf_mode, cube_fp8,
                block_M=128, block_N=128, block_K=64, groups=0, grouping=None, sfa_t=False,
                sfb_t=False):
    """D[M,N] (= C +) A @ B for one layout.

    a_t/b_t: A stored [K,M] / B stored [K,N] (MN-major) instead of [M,K] / [N,K].
    c_mode: None, "separate" (a C parameter) or "inplace" (D holds C on entry).
    sf_mode: None (bf16), "block" (sfb [ceil(N/128), ceil(K/128)]), "channel" (sfb [N, ...]) or
    "mx" (sfa [ceil(KB/2), M], sfb [ceil(KB/2), N] uint16 UE8M0 pairs, MN-major: the scaled MMAD).
    groups/grouping: 0/None dense; G/"contiguous" (B [G,N,K], or [G,K,N] with b_t, layout [M]);
    G/"masked" (A [G,M,K], B [G,N,K], D [G,M,N], masked_m [G]).
    sfa_t/sfb_t (fp32 scales): the scales of that operand are stored transposed, K blocks first
    (sfa [KB, M]; sfb [KB, NB] or [KB, N], after the group index when grouped): DeepGEMM's
    aliases pass an MN-major operand's scales transposed with it."""
    mx = sf_mode == "mx"
    scaled = sf_mode is not None and not mx
    with_c = c_mode is not None
    if scaled:
        block_K = SF_GRAN
        block_N = SF_GRAN if sf_mode == "block" else block_N
    if mx:  # the cube scales each 128-K group itself: one UE8M0 pair (two groups) per K step
        block_M, block_N, block_K = 128, 128, 2 * SF_GRAN
    KB = T.ceildiv(K, SF_GRAN)
    NB = T.ceildiv(N, SF_GRAN)
    mma_dtype = in_dtype if (not scaled or cube_fp8) else "bfloat16"
    widen = mma_dtype != in_dtype
    if widen:  # the widened copies and the fp32 partial share UB with the fp8 stages
        block_M = min(block_M, 64)
    stages = 1 if widen else 2
    a_tile = (block_K, block_M) if a_t else (block_M, block_K)
    b_tile = (block_K, block_N) if b_t else (block_N, block_K)
    sfb_rows = NB if sf_mode == "block" else N
    masked = grouping == "masked"
    grouped = grouping is not None
    contiguous = grouping == "contiguous"
    G = max(groups, 1)
    a_shape = ((G, M, K) if masked else ((K, M) if a_t else (M, K)))
    b_shape = ((K, N) if b_t else (N, K))
    b_shape = (G,) + b_shape if groups else b_shape
    d_shape = (G, M, N) if masked else (M, N)
    sfa_shape = (KB, M) if sfa_t else (M, KB)
    sfa_shape = (G,) + sfa_shape if masked else sfa_shape
    sfb_shape = (KB, sfb_rows) if sfb_t else (sfb_rows, KB)
    sfb_shape = (G,) + sfb_shape if groups else sfb_shape
    sf_dtype = "float32"
    if mx:  # UE8M0 pairs packed in uint16, MN-major
        KP = T.ceildiv(KB, 2)
        sfa_shape = (G, KP, M) if masked else (KP, M)
        sfb_shape = (G, KP, N) if groups else (KP, N)
        sf_dtype = "uint16"
    info_shape = (M,) if contiguous else (G,)
    add_c = sum_with_c(block_M, block_N, with_c)
    grid_z = G if masked else 1

    @T.macro
    def load_tile(X, X_s, g, rows, r, k, grouped, k_major):
        """K block k of the operand's row block r (`rows` rows): from group g's [rows, K] (or
        [K, rows] when k_major) slice when `grouped`, else a [K, rows] (k_major) or [rows, K]
        matrix."""
        if grouped and k_major:
            T.copy(X[g, k * block_K:(k + 1) * block_K, r * rows:(r + 1) * rows], X_s)
        elif grouped:
            T.copy(X[g, r * rows:(r + 1) * rows, k * block_K:(k + 1) * block_K], X_s)
        elif k_major:
            T.copy(X[k * block_K, r * rows], X_s)
        else:
            T.copy(X[r * rows, k * block_K], X_s)

    @T.macro
    def load_scales(SF, s, s_row, g, rows, r, k, grouped, sf_t):
        """The fp32 scales of K block k for row block r into s [rows, 1]; stored transposed
        (sf_t, [KB, rows]) they arrive as a row s_row [1, rows] and are turned into s's column."""
        if sf_t:
            if grouped:
                T.copy(SF[g, k:k + 1, r * rows:(r + 1) * rows], s_row)
            else:
                T.copy(SF[k:k + 1, r * rows:(r + 1) * rows], s_row)
            for i, j in T.Parallel(rows, 1):
                s[i, j] = s_row[j, i]
        elif grouped:
            T.copy(SF[g, r * rows:(r + 1) * rows, k:k + 1], s)
        else:
            T.copy(SF[r * rows:(r + 1) * rows, k:k + 1], s)

    @T.macro
    def load_tiles(A, B, A_s, B_s, g, bx, by, k):
        load_tile(A, A_s, g, block_M, by, k, masked, a_t)
        load_tile(B, B_s, g, block_N, bx, k, groups, b_t)

    @T.macro
    def mainloop(A, B, SFA, SFB, acc, g, bx, by):
        A_s = T.alloc_shared(a_tile, in_dtype)
        B_s = T.alloc_shared(b_tile, in_dtype)
        if mx:
            sa = T.alloc_shared((1, block_M), "uint16")
            sb = T.alloc_shared((1, block_N), "uint16")
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                load_tiles(A, B, A_s, B_s, g, bx, by, k)
                if masked:
                    T.copy(SFA[g, k:k + 1, by * block_M:(by + 1) * block_M], sa)
                else:
                    T.copy(SFA[k:k + 1, by * block_M:(by + 1) * block_M], sa)
                if groups:
                    T.copy(SFB[g, k:k + 1, bx * block_N:(bx + 1) * block_N], sb)
                else:
                    T.copy(SFB[k:k + 1, bx * block_N:(bx + 1) * block_N], sb)
                T.gemm(A_s, B_s, acc, transpose_A=a_t, transpose_B=not b_t, scale_A=sa,
                       scale_B=sb, scale_gran=SF_GRAN)
        elif not scaled:
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                load_tiles(A, B, A_s, B_s, g, bx, by, k)
                T.gemm(A_s, B_s, acc, transpose_A=a_t, transpose_B=not b_t)
        else:
            P = T.alloc_fragment((block_M, block_N), "float32")
            sa = T.alloc_fragment((block_M, 1), "float32")
            A_w = T.alloc_shared(a_tile, mma_dtype)
            B_w = T.alloc_shared(b_tile, mma_dtype)
            sb = T.alloc_fragment((block_N, 1), "float32")
            sa_row = T.alloc_fragment((1, block_M), "float32")
            sb_row = T.alloc_fragment((1, block_N), "float32")
            s_b = T.alloc_var("float32")
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=stages):
                load_tiles(A, B, A_s, B_s, g, bx, by, k)
                load_scales(SFA, sa, sa_row, g, block_M, by, k, masked, sfa_t)
                if sf_mode == "block" and groups and sfb_t:
                    s_b = SFB[g, k, bx]   # one scale for the whole tile: a scalar
                elif sf_mode == "block" and groups:
                    s_b = SFB[g, bx, k]
                elif sf_mode == "block" and sfb_t:
                    s_b = SFB[k, bx]
                elif sf_mode == "block":
                    s_b = SFB[bx, k]
                else:
                    load_scales(SFB, sb, sb_row, g, block_N, bx, k, groups, sfb_t)
                if widen:
                    T.copy(A_s, A_w)                      # fp8 -> bf16 on the vector unit
                    T.copy(B_s, B_w)
                    T.gemm(A_w, B_w, P, transpose_A=a_t, transpose_B=not b_t, clear_accum=True)
                else:
                    T.gemm(A_s, B_s, P, transpose_A=a_t, transpose_B=not b_t, clear_accum=True)
                if sf_mode == "block":
                    for i, j in T.Parallel(block_M, block_N):
                        acc[i, j] = acc[i, j] + P[i, j] * (sa[i, 0] * s_b)
                else:
                    for i, j in T.Parallel(block_M, block_N):
                        acc[i, j] = acc[i, j] + P[i, j] * (sa[i, 0] * sb[j, 0])

    @T.macro
    def epilogue(C, D, INFO, acc, g, bx, by):
        out = T.alloc_fragment((block_M, block_N), out_dtype)
        add_c(C, acc, out, bx, by)
        if contiguous:
            for i in T.serial(block_M):
                if by * block_M + i < M:
                    if INFO[by * block_M + i] >= 0:
                        T.copy(out[i:i + 1, :], D[by * block_M + i, bx * block_N])
        elif masked:
            for i in T.serial(block_M):
                if by * block_M + i < INFO[g]:
                    T.copy(out[i:i + 1, :], D[g, by * block_M + i, bx * block_N:(bx + 1) * block_N])
        else:
            T.copy(out, D[by * block_M, bx * block_N])

    @T.macro
    def body(A, B, SFA, SFB, C, D, INFO, bx, by, bz):
        acc = T.alloc_fragment((block_M, block_N), "float32")
        if contiguous:
            g = INFO[by * block_M]
            if g >= 0:
                mainloop(A, B, SFA, SFB, acc, g, bx, by)
                epilogue(C, D, INFO, acc, g, bx, by)
        elif masked:
            if by * block_M < INFO[bz]:
                mainloop(A, B, SFA, SFB, acc, bz, bx, by)
                epilogue(C, D, INFO, acc, bz, bx, by)
        else:
            mainloop(A, B, SFA, SFB, acc, 0, bx, by)
            epilogue(C, D, INFO, acc, 0, bx, by)

    grid_x, grid_y = T.ceildiv(N, block_N), T.ceildiv(M, block_M)
    if grouped and (scaled or mx):
        @T.prim_func
        def fp8_grouped_gemm(A: T.Tensor(a_shape, in_dtype), SFA: T.Tensor(sfa_shape, sf_dtype),
                             B: T.Tensor(b_shape, in_dtype), SFB: T.Tensor(sfb_shape, sf_dtype),
                             D: T.Tensor(d_shape, out_dtype), INFO: T.Tensor(info_shape, "int32")):
            with T.Kernel(grid_x, grid_y, grid_z) as (bx, by, bz):
                body(A, B, SFA, SFB, D, D, INFO, bx, by, bz)
        return fp8_grouped_gemm
    if grouped:
        @T.prim_func
        def bf16_grouped_gemm(A: T.Tensor(a_shape, in_dtype), B: T.Tensor(b_shape, in_dtype),
                              D: T.Tensor(d_shape, out_dtype), INFO: T.Tensor(info_shape, "int32")):
            with T.Kernel(grid_x, grid_y, grid_z) as (bx, by, bz):
                body(A, B, A, B, D, D, INFO, bx, by, bz)
        return bf16_grouped_gemm
    if (scaled or mx) and c_mode == "separate":
        @T.prim_func
        def fp8_gemm_c(A: T.Tensor(a_shape, in_dtype), SFA: T.Tensor(sfa_shape, sf_dtype),
                       B: T.Tensor(b_shape, in_dtype), SFB: T.Tensor(sfb_shape, sf_dtype),
                       C: T.Tensor((M, N), "float32"), D: T.Tensor((M, N), out_dtype)):
            with T.Kernel(grid_x, grid_y) as (bx, by):
                body(A, B, SFA, SFB, C, D, D, bx, by, 0)
        return fp8_gemm_c
    if scaled or mx:
        @T.prim_func
        def fp8_gemm(A: T.Tensor(a_shape, in_dtype), SFA: T.Tensor(sfa_shape, sf_dtype),
                     B: T.Tensor(b_shape, in_dtype), SFB: T.Tensor(sfb_shape, sf_dtype),
                     D: T.Tensor((M, N), out_dtype)):
            with T.Kernel(grid_x, grid_y) as (bx, by):
                body(A, B, SFA, SFB, D, D, D, bx, by, 0)
        return fp8_gemm
    if c_mode == "separate":
        @T.prim_func
        def bf16_gemm_c(A: T.Tensor(a_shape, in_dtype), B: T.Tensor(b_shape, in_dtype),
                        C: T.Tensor((M, N), "float32"), D: T.Tensor((M, N), out_dtype)):
            with T.Kernel(grid_x, grid_y) as (bx, by):
                body(A, B, A, B, C, D, D, bx, by, 0)
        return bf16_gemm_c

    @T.prim_func
    def bf16_gemm(A: T.Tensor(a_shape, in_dtype), B: T.Tensor(b_shape, in_dtype),
                  D: T.Tensor((M, N), out_dtype)):
        with T.Kernel(grid_x, grid_y) as (bx, by):
            body(A, B, A, B, D, D, D, bx, by, 0)
    return bf16_gemm


def head_split_kernel(M, N, left, mid, right, dtype, block_M=32):
    """D [M, heads * (left + mid + right)] from X [M, N] (N = heads * (left + right)): head h's
    first `left` columns of X go to D's columns h*W + [0, left), its last `right` columns to
    h*W + left + mid + [0, right); the `mid` columns between are not written."""
    heads, W = N // (left + right), left + mid + right

    @T.prim_func
    def skip_head_mid(X: T.Tensor((M, N), dtype), D: T.Tensor((M, heads * W), dtype)):
        with T.Kernel(heads, T.ceildiv(M, block_M)) as (h, by):
            if left > 0:
                l_s = T.alloc_fragment((block_M, left), dtype)
                T.copy(X[by * block_M:(by + 1) * block_M,
                         h * (left + right):h * (left + right) + left], l_s)
                T.copy(l_s, D[by * block_M:(by + 1) * block_M, h * W:h * W + left])
            if right > 0:
                r_s = T.alloc_fragment((block_M, right), dtype)
                T.copy(X[by * block_M:(by + 1) * block_M,
                         h * (left + right) + left:(h + 1) * (left + right)], r_s)
                T.copy(r_s, D[by * block_M:(by + 1) * block_M, h * W + left + mid:(h + 1) * W])

    return skip_head_mid
