"""DeepGEMM's quantisation and scale-layout helpers (deep_gemm.utils), as tile kernels.

* per_token_cast_to_fp8(x [M, N], use_ue8m0, gran_k=128) -> (e4m3 [M, N], sf [M, ceil(N/g)])
* per_block_cast_to_fp8(x [M, N], use_ue8m0, gran_k=128) -> (e4m3 [M, N], sf [ceil(M/g), ceil(N/g)])
* per_token_cast_to_fp4(x [M, N], use_ue8m0, gran_k=128) -> (int8 [M, N/2], sf [M, ceil(N/g)]):
  e2m1 codes (sign bit 3, magnitude index into {0, .5, 1, 1.5, 2, 3, 4, 6}), two per byte, the
  even column in the low nibble
* ceil_to_ue8m0(x) -> the power of two at or above |x| (exponent byte rounded up), float32
* pack_ue8m0_to_int(sf [..., 4k]) -> int32 [..., k]: exponent bytes, little-endian
* unpack_ue8m0_from_int(p [..., k]) -> float32 [..., 4k]
* per_channel_cast_to_fp8(x [M, N], use_ue8m0, gran_k=128) -> (e4m3 [M, N], sf [M/g, N])
* cast_back_from_fp4(packed [M, N/2], sf, gran_k=128, use_packed_ue8m0=False) -> float32 [M, N]
* transpose_packed_fp4(a [M, N/2]) -> [N, M/2] (the codes transposed, packed along M)
* transform_sf_into_required_layout(sf, mn, k, recipe, ...) -> the layout this library's GEMMs
  read: on ascend950 UE8M0 pairs packed in uint16, MN-major [ceil(k/256), mn] (the scaled MMAD's
  operands); elsewhere fp32 [mn, ceil(k/g)] (packed UE8M0 ints are unpacked; per-block B scales
  broadcast per row when asked for a (1, 1, 128) recipe)

Scales: amax over the group (at least 1e-4) / 448 (6 for FP4); UE8M0 rounds a scale up to a
power of two through its bits (T.reinterpret, shifts and masks).
"""
import numpy as np

import tilelang_mini.language as T

from .._core import Plan, as_input, ceil_div, dims, int_arg, library_function, to_numpy

FP8_MAX = 448.0
FP4_MAX = 6.0
ROWS = 16


@T.macro
def ue8m0_ceil(s, n):
    """s[i] = the power of two at or above s[i] (s positive float32)."""
    for i in T.Parallel(n):
        s[i] = T.reinterpret(T.min(T.max(((T.reinterpret(s[i], "int32") >> 23) & 255) + T.cast(
            (T.reinterpret(s[i], "int32") & 0x7FFFFF) != 0, "int32"), 1), 254) << 23, "float32")


@T.macro
def group_scales(x, amax, dim, n, qmax, ue8m0):
    """amax[i] = the scale of the n rows (dim=1) or columns (dim=0) of tile x: their absmax (at
    least 1e-4) / qmax, rounded up to a power of two when ue8m0."""
    T.reduce_absmax(x, amax, dim=dim)
    for i in T.Parallel(n):
        amax[i] = T.max(amax[i], 1e-4) / qmax
    if ue8m0:
        ue8m0_ceil(amax, n)


def per_token_kernel(M, N, in_dtype, gran, ue8m0, fp4, block_M=ROWS):
    KB = ceil_div(N, gran)
    qmax = FP4_MAX if fp4 else FP8_MAX
    half = gran // 2

    @T.macro
    def row_scales(X, x, amax, bx, kb):
        """x = the group (bx, kb) of X; amax[i] = the scale of its row i."""
        T.copy(X[bx * block_M, kb * gran], x)
        group_scales(x, amax, 1, block_M, qmax, ue8m0)

    @T.prim_func
    def per_token_cast(X: T.Tensor((M, N), in_dtype), Q: T.Tensor((M, N), "float8_e4m3fn"),
                       SF: T.Tensor((M, KB), "float32")):
        with T.Kernel(T.ceildiv(M, block_M), KB) as (bx, kb):
            x = T.alloc_fragment((block_M, gran), "float32")
            amax = T.alloc_fragment((block_M,), "float32")
            q = T.alloc_fragment((block_M, gran), "float8_e4m3fn")
            row_scales(X, x, amax, bx, kb)
            for i, j in T.Parallel(block_M, gran):
                q[i, j] = T.cast(x[i, j] * (1.0 / amax[i]), "float8_e4m3fn")
            T.copy(q, Q[bx * block_M, kb * gran])
            T.copy(amax, SF[bx * block_M:(bx + 1) * block_M, kb])

    if not fp4:  # (the FP4 form's packed [M, N/2] needs an even N)
        return per_token_cast

    @T.prim_func
    def per_token_cast_fp4(X: T.Tensor((M, N), in_dtype), Q: T.Tensor((M, N // 2), "int8"),
                           SF: T.Tensor((M, KB), "float32")):
        with T.Kernel(T.ceildiv(M, block_M), KB) as (bx, kb):
            x = T.alloc_fragment((block_M, gran), "float32")
            code = T.alloc_fragment((block_M, gran), "int32")
            amax = T.alloc_fragment((block_M,), "float32")
            q = T.alloc_fragment((block_M, half), "int8")
            row_scales(X, x, amax, bx, kb)
            for i, j in T.Parallel(block_M, gran):
                x[i, j] = x[i, j] * (1.0 / amax[i])
            for i, j in T.Parallel(block_M, gran):  # the e2m1 code: how many midpoints |x| passes
                code[i, j] = (T.cast(T.abs(x[i, j]) > 0.25, "int32")
                              + T.cast(T.abs(x[i, j]) > 0.75, "int32")
                              + T.cast(T.abs(x[i, j]) > 1.25, "int32")
                              + T.cast(T.abs(x[i, j]) > 1.75, "int32")
                              + T.cast(T.abs(x[i, j]) > 2.5, "int32")
                              + T.cast(T.abs(x[i, j]) > 3.5, "int32")
                              + T.cast(T.abs(x[i, j]) > 5.0, "int32"))
            for i, j in T.Parallel(block_M, gran):  # the sign, unless the code is zero
                code[i, j] = code[i, j] | (T.cast(x[i, j] < 0.0 and code[i, j] != 0, "int32") << 3)
            for i, j in T.Parallel(block_M, half):
                q[i, j] = (code[i, 2 * j] & 15) | ((code[i, 2 * j + 1] & 15) << 4)
            T.copy(q, Q[bx * block_M, kb * half])
            T.copy(amax, SF[bx * block_M:(bx + 1) * block_M, kb])

    return per_token_cast_fp4


def per_block_kernel(M, N, in_dtype, gran, ue8m0):
    MB, NB = ceil_div(M, gran), ceil_div(N, gran)

    @T.prim_func
    def per_block_cast(X: T.Tensor((M, N), in_dtype), Q: T.Tensor((M, N), "float8_e4m3fn"),
                       SF: T.Tensor((MB, NB), "float32")):
        with T.Kernel(NB, MB) as (bx, by):
            x = T.alloc_fragment((gran, gran), "float32")
            q = T.alloc_fragment((gran, gran), "float8_e4m3fn")
            rmax = T.alloc_fragment((gran,), "float32")
            amax = T.alloc_fragment((1,), "float32")
            T.copy(X[by * gran, bx * gran], x)
            T.reduce_absmax(x, rmax, dim=1)
            T.reduce_max(rmax, amax, dim=0)
            for i in T.Parallel(1):
                amax[i] = T.max(amax[i], 1e-4) / FP8_MAX
            if ue8m0:
                ue8m0_ceil(amax, 1)
            for i, j in T.Parallel(gran, gran):
                q[i, j] = T.cast(x[i, j] * (1.0 / amax[0]), "float8_e4m3fn")
            T.copy(q, Q[by * gran, bx * gran])
            T.copy(amax, SF[by, bx:bx + 1])

    return per_block_cast


def ue8m0_kernel(M, N, block_M=ROWS):
    @T.prim_func
    def ceil_ue8m0(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            T.copy(X[bx * block_M, 0], x)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = T.reinterpret(T.min(T.max(((T.reinterpret(x[i, j], "int32") >> 23) & 255)
                                                    + T.cast((T.reinterpret(x[i, j], "int32")
                                                              & 0x7FFFFF) != 0, "int32"), 1),
                                              254) << 23, "float32")
            T.copy(x, Y[bx * block_M, 0])

    return ceil_ue8m0


def pack_kernel(M, N4, block_M=ROWS):
    N = N4 // 4

    @T.prim_func
    def pack_ue8m0(X: T.Tensor((M, N4), "float32"), P: T.Tensor((M, N), "int32")):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            x = T.alloc_fragment((block_M, N4), "float32")
            p = T.alloc_fragment((block_M, N), "int32")
            T.copy(X[bx * block_M, 0], x)
            for i, j in T.Parallel(block_M, N):
                p[i, j] = (((T.reinterpret(x[i, 4 * j], "int32") >> 23) & 255)
                           | (((T.reinterpret(x[i, 4 * j + 1], "int32") >> 23) & 255) << 8)
                           | (((T.reinterpret(x[i, 4 * j + 2], "int32") >> 23) & 255) << 16)
                           | (((T.reinterpret(x[i, 4 * j + 3], "int32") >> 23) & 255) << 24))
            T.copy(p, P[bx * block_M, 0])

    return pack_ue8m0


def unpack_kernel(M, N, block_M=ROWS):
    @T.prim_func
    def unpack_ue8m0(P: T.Tensor((M, N), "int32"), X: T.Tensor((M, 4 * N), "float32")):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            p = T.alloc_fragment((block_M, N), "int32")
            x = T.alloc_fragment((block_M, 4 * N), "float32")
            T.copy(P[bx * block_M, 0], p)
            for i, j in T.Parallel(block_M, 4 * N):
                x[i, j] = T.reinterpret(((p[i, j // 4] >> (8 * (j % 4))) & 255) << 23, "float32")
            T.copy(x, X[bx * block_M, 0])

    return unpack_ue8m0


def _cast_input(x, gran_k):
    """The 2-D array to quantise: float32 or bfloat16 as given, any other dtype as float32
    (and `gran_k` checked: a positive integer group size; None too is a ValueError)."""
    xa = as_input(x, name="x")
    dims(xa, "M, N", "x")
    if int_arg(gran_k, "gran_k") < 1:
        raise ValueError(f"gran_k must be a positive integer, got {gran_k!r}")
    return xa if xa.dtype.name in ("float32", "bfloat16") else xa.astype(np.float32)


def _rows2d(a):
    return a.reshape(-1, a.shape[-1]) if a.ndim != 2 else a


@library_function
def per_token_cast_to_fp8(ctx, x, use_ue8m0=False, gran_k=128, use_packed_ue8m0=False):
    """-> (x_fp8 [M, N] e4m3, sf [M, ceil(N/gran_k)] fp32, or packed int32 when asked)."""
    plan, xa = Plan(), _cast_input(x, gran_k)
    M, N = xa.shape
    q = np.empty((M, N), _fp8())
    sf = np.empty((M, ceil_div(N, gran_k)), np.float32)
    kernel = ctx.compile(per_token_kernel, M, N, _dt(xa), int(gran_k), bool(use_ue8m0), False)
    plan.launch(kernel, xa, q, sf)
    plan.result = (q, sf)
    if use_packed_ue8m0:
        _then_pack(ctx, plan, sf)
    return plan


@library_function
def per_token_cast_to_fp4(ctx, x, use_ue8m0=False, gran_k=128, use_packed_ue8m0=False):
    """-> (packed e2m1 int8 [M, N/2], sf [M, ceil(N/gran_k)] fp32, or packed int32)."""
    plan, xa = Plan(), _cast_input(x, gran_k)
    M, N = xa.shape
    if N % 2 or gran_k % 2:
        raise ValueError(f"per_token_cast_to_fp4 packs two values per byte: N={N} must be even")
    if N % gran_k:
        padded = np.zeros((M, ceil_div(N, gran_k) * gran_k), xa.dtype)
        padded[:, :N] = xa
        xa = padded
    q = np.empty((M, xa.shape[1] // 2), np.int8)
    sf = np.empty((M, ceil_div(N, gran_k)), np.float32)
    kernel = ctx.compile(per_token_kernel, M, xa.shape[1], _dt(xa), int(gran_k),
                         bool(use_ue8m0), True)
    plan.launch(kernel, xa, q, sf)
    plan.result = (q[:, :N // 2], sf)
    if use_packed_ue8m0:
        _then_pack(ctx, plan, sf)
    return plan


@library_function
def per_block_cast_to_fp8(ctx, x, use_ue8m0=False, gran_k=128):
    """-> (x_fp8 [M, N] e4m3, sf [ceil(M/g), ceil(N/g)] fp32), one scale per g x g block."""
    plan, xa = Plan(), _cast_input(x, gran_k)
    M, N = xa.shape
    q = np.empty((M, N), _fp8())
    sf = np.empty((ceil_div(M, gran_k), ceil_div(N, gran_k)), np.float32)
    plan.launch(ctx.compile(per_block_kernel, M, N, _dt(xa), int(gran_k), bool(use_ue8m0)),
                xa, q, sf)
    plan.result = (q, sf)
    return plan


@library_function
def ceil_to_ue8m0(ctx, x):
    """The power of two at or above |x| (exponent rounded up, clamped to 2^-126..2^127)."""
    plan = Plan()
    xa = as_input(x, "float32", "x")
    shape = xa.shape
    flat = _rows2d(xa.reshape(1, -1) if xa.ndim < 2 else xa)
    out = np.empty_like(flat)
    plan.launch(ctx.compile(ue8m0_kernel, *flat.shape), flat, out)
    plan.result = out.reshape(shape)
    return plan


@library_function
def pack_ue8m0_to_int(ctx, x):
    """sf [..., 4k] (powers of two) -> int32 [..., k]: the exponent bytes, four per int."""
    plan = Plan()
    xa = as_input(x, "float32", "x")
    if xa.shape[-1] % 4:
        raise ValueError(f"pack_ue8m0_to_int packs 4 scales per int: last dim {xa.shape[-1]}")
    flat = _rows2d(xa.reshape(1, -1) if xa.ndim < 2 else xa)
    out = np.empty((flat.shape[0], flat.shape[1] // 4), np.int32)
    plan.launch(ctx.compile(pack_kernel, *flat.shape), flat, out)
    plan.result = out.reshape(xa.shape[:-1] + (xa.shape[-1] // 4,))
    return plan


@library_function
def unpack_ue8m0_from_int(ctx, packed):
    """int32 [..., k] -> float32 [..., 4k]: each byte e becomes 2 ** (e - 127)."""
    plan = Plan()
    pa = as_input(packed, "int32", "packed")
    flat = _rows2d(pa.reshape(1, -1) if pa.ndim < 2 else pa)
    out = np.empty((flat.shape[0], flat.shape[1] * 4), np.float32)
    plan.launch(ctx.compile(unpack_kernel, *flat.shape), flat, out)
    plan.result = out.reshape(pa.shape[:-1] + (pa.shape[-1] * 4,))
    return plan


PAIR_ROWS, PAIR_COLS = 64, 32  # a pair-packing block: 64 MN rows, 32 pairs (64 K groups)


def pair_pack_kernel(G, R, KB, MN, row_div):
    """SF fp32 [G, R, KB] (R = MN rows, or MN / 128 blocks when row_div = 128) -> P uint16
    [G, ceil(KB / 2), MN]: the exponent bytes of groups 2j and 2j + 1 of row i in P[g, j, i]
    (low byte first), MN-major; a group past KB gives byte 0."""
    KP = ceil_div(KB, 2)
    xr = 1 if row_div > 1 else PAIR_ROWS

    @T.prim_func
    def pack_ue8m0_pairs(SF: T.Tensor((G, R, KB), "float32"),
                         P: T.Tensor((G, KP, MN), "uint16")):
        with T.Kernel(T.ceildiv(MN, PAIR_ROWS), T.ceildiv(KP, PAIR_COLS), G) as (bx, by, g):
            x = T.alloc_fragment((xr, 2 * PAIR_COLS), "float32")
            p = T.alloc_fragment((PAIR_COLS, PAIR_ROWS), "uint16")
            if row_div > 1:  # one (128-row) block row serves the 64 rows of this block
                T.copy(SF[g, bx * PAIR_ROWS // row_div:bx * PAIR_ROWS // row_div + 1,
                          by * 2 * PAIR_COLS:(by + 1) * 2 * PAIR_COLS], x)
            else:
                T.copy(SF[g, bx * PAIR_ROWS:(bx + 1) * PAIR_ROWS,
                          by * 2 * PAIR_COLS:(by + 1) * 2 * PAIR_COLS], x)
            for j, i in T.Parallel(PAIR_COLS, PAIR_ROWS):
                p[j, i] = (((T.reinterpret(x[i % xr, 2 * j], "int32") >> 23) & 255)
                           | (((T.reinterpret(x[i % xr, 2 * j + 1], "int32") >> 23) & 255) << 8))
            T.copy(p, P[g, by * PAIR_COLS:(by + 1) * PAIR_COLS, bx * PAIR_ROWS:(bx + 1) * PAIR_ROWS])

    return pack_ue8m0_pairs


@library_function
def transform_sf_into_required_layout(ctx, sf, mn, k, recipe=(1, 1, 128), num_groups=None,
                                      is_sfa=False, disable_ue8m0_cast=False, **_ignored):
    """Scales in the layout this library's FP8 GEMMs read on ctx.chip.

    recipe: (gran_mn_a, gran_mn_b, gran_k) with is_sfa, or (gran_mn, gran_k); gran_k is 128
    (FP8) or 32 (FP4). On a chip whose cube applies block scales (ascend950), fp32 UE8M0 scales
    become DeepGEMM-Ascend's layout: uint16 [(G,) ceil(k/(2 gran_k)), mn], the exponent bytes of K groups
    2j and 2j + 1 packed in one uint16 (low byte first), MN-major; (128, 128)-block scales of B
    are spread to its mn rows by the kernel. As DeepGEMM, the exponent byte is taken as it is:
    the scales must be powers of two (use_ue8m0=True); disable_ue8m0_cast=True keeps fp32.

    Otherwise fp32 [(G,) mn, ceil(k/128)]: packed UE8M0 ints are unpacked (a kernel);
    (128, 128)-block scales are kept as blocks for the (1, 128, 128) recipe and broadcast to
    rows for a (1, 1, 128) one."""
    plan = Plan()
    arr = as_input(sf, name="sf")
    recipe = tuple(recipe)
    if len(recipe) not in (2, 3) or recipe[-1] not in (32, 128):
        raise ValueError(f"recipe {recipe!r}: expected (gran_mn_a, gran_mn_b, gran_k) or "
                         f"(gran_mn, gran_k) with gran_k 32 or 128")
    gran_k = recipe[-1]
    from ...arch import get_chip
    if get_chip(ctx.chip).mx_gran and arr.dtype == np.float32 and not disable_ue8m0_cast:
        kb = ceil_div(k, gran_k)
        grouped = arr.reshape((1,) + arr.shape) if arr.ndim == 2 else arr
        rows = grouped.shape[1]
        if grouped.ndim != 3 or grouped.shape[2] != kb or rows not in (mn, ceil_div(mn, 128)):
            raise ValueError(f"sf has shape {arr.shape}; expected ([G,] {mn} or "
                             f"{ceil_div(mn, 128)}, {kb}) fp32 scales")
        G = grouped.shape[0]
        row_div = 1 if rows == mn else 128
        out = np.empty((G, ceil_div(kb, 2), mn), np.uint16)
        plan.launch(ctx.compile(pair_pack_kernel, G, rows, kb, mn, row_div),
                    np.ascontiguousarray(grouped), out)
        plan.result = out if arr.ndim == 3 else out[0]
        return plan
    if arr.dtype == np.int32:
        flat = _rows2d(arr.reshape(1, -1) if arr.ndim < 2 else arr)
        out = np.empty((flat.shape[0], flat.shape[1] * 4), np.float32)
        plan.launch(ctx.compile(unpack_kernel, *flat.shape), flat, out)
        kb = ceil_div(k, gran_k)
        plan.result = out.reshape(arr.shape[:-1] + (arr.shape[-1] * 4,))[..., :kb]
        return plan
    arr = arr.astype(np.float32, copy=False)
    gran_mn = recipe[0] if len(recipe) == 2 else recipe[0 if is_sfa else 1]
    rows = arr.shape[-2]
    if gran_mn == 1 and rows == ceil_div(mn, 128) and rows != mn:
        plan.result = np.ascontiguousarray(np.repeat(arr, 128, axis=-2)[..., :mn, :])
    else:
        plan.result = np.ascontiguousarray(arr)
    return plan


def _then_pack(ctx, plan, sf):
    kb = sf.shape[1]
    padded = sf if kb % 4 == 0 else np.ones((sf.shape[0], ceil_div(kb, 4) * 4), np.float32)
    out = np.empty((sf.shape[0], padded.shape[1] // 4), np.int32)
    if padded is not sf:  # pad with 1.0 (2^0), as DeepGEMM does: the kernel copies the rest
        plan.launch(ctx.compile(_pad_kernel, sf.shape[0], kb, padded.shape[1]), sf, padded)
    plan.launch(ctx.compile(pack_kernel, *padded.shape), padded, out)
    plan.result = (plan.result[0], out)


def _pad_kernel(M, N, NP):
    @T.prim_func
    def pad_scales(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, NP), "float32")):
        with T.Kernel(T.ceildiv(M, ROWS)) as bx:
            y = T.alloc_fragment((ROWS, NP), "float32")
            T.fill(y, 1.0)
            T.copy(X[bx * ROWS, 0], y[:, 0:N])
            T.copy(y, Y[bx * ROWS, 0])

    return pad_scales


def _fp8():
    from ...ir import dtypes
    return dtypes.to_numpy("float8_e4m3fn")


def _dt(a) -> str:
    from ...ir import dtypes
    return dtypes.canonical(a.dtype)


# ----------------------------------------------------------------------------- more of deep_gemm.utils


def per_channel_kernel(M, N, in_dtype, gran, ue8m0, block_N=128):
    """Q [M, N] e4m3 and SF [M/gran, N]: one scale per column and per `gran` rows."""

    @T.prim_func
    def per_channel_cast(X: T.Tensor((M, N), in_dtype), Q: T.Tensor((M, N), "float8_e4m3fn"),
                         SF: T.Tensor((M // gran, N), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), M // gran) as (bx, by):
            x = T.alloc_fragment((gran, block_N), "float32")
            q = T.alloc_fragment((gran, block_N), "float8_e4m3fn")
            amax = T.alloc_fragment((block_N,), "float32")
            T.copy(X[by * gran, bx * block_N], x)
            group_scales(x, amax, 0, block_N, FP8_MAX, ue8m0)
            for i, j in T.Parallel(gran, block_N):
                q[i, j] = T.cast(x[i, j] * (1.0 / amax[j]), "float8_e4m3fn")
            T.copy(q, Q[by * gran, bx * block_N])
            T.copy(amax, SF[by, bx * block_N:(bx + 1) * block_N])

    return per_channel_cast


def cast_back_fp4_kernel(M, N, gran, packed_sf, block_M=ROWS):
    """Y [M, N] float32 = the e2m1 values of X [M, N/2] (two codes a byte, even column low) times
    their group's scale: SF [M, ceil(N/gran)] float32, or (packed_sf) the UE8M0 bytes
    SFB [M, 4 * ceil(ceil(N/gran)/4)] of DeepGEMM's int32-packed scales, 2^(byte - 127)."""
    KB = ceil_div(N, gran)
    sf_shape = (M, 4 * ceil_div(KB, 4)) if packed_sf else (M, KB)
    half = gran // 2

    @T.prim_func
    def cast_back_from_fp4(X: T.Tensor((M, N // 2), "int8"),
                           SF: T.Tensor(sf_shape, "uint8" if packed_sf else "float32"),
                           Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, block_M), KB) as (bx, kb):
            x = T.alloc_fragment((block_M, half), "int8")
            s = T.alloc_fragment((block_M, 1), "uint8" if packed_sf else "float32")
            code = T.alloc_fragment((block_M, gran), "int32")
            y = T.alloc_fragment((block_M, gran), "float32")
            T.copy(X[bx * block_M, kb * half], x)
            T.copy(SF[bx * block_M:(bx + 1) * block_M, kb:kb + 1], s)
            for i, j in T.Parallel(block_M, gran):
                code[i, j] = (T.cast(x[i, j // 2], "int32") >> ((j % 2) * 4)) & 15
            if packed_sf:
                for i, j in T.Parallel(block_M, gran):
                    y[i, j] = T.cast(T.reinterpret(code[i, j], "float4_e2m1fn"), "float32") \
                        * T.reinterpret(T.cast(s[i, 0], "int32") << 23, "float32")
            else:
                for i, j in T.Parallel(block_M, gran):
                    y[i, j] = T.cast(T.reinterpret(code[i, j], "float4_e2m1fn"), "float32") \
                        * s[i, 0]
            T.copy(y, Y[bx * block_M, kb * gran])

    return cast_back_from_fp4


def transpose_fp4_kernel(M, N, block_M=32, block_B=32):
    """Y [N, M/2] = the codes of X [M, N/2] transposed (both packed two a byte along their last
    axis, the even index in the low nibble): DeepGEMM's MN-major FP4 layout."""

    @T.prim_func
    def transpose_packed_fp4(X: T.Tensor((M, N // 2), "int8"), Y: T.Tensor((N, M // 2), "int8")):
        with T.Kernel(T.ceildiv(N // 2, block_B), T.ceildiv(M, block_M)) as (bx, by):
            x = T.alloc_fragment((block_M, block_B), "int8")
            code = T.alloc_fragment((block_M, 2 * block_B), "int32")
            y = T.alloc_fragment((2 * block_B, block_M // 2), "int8")
            T.copy(X[by * block_M, bx * block_B], x)
            for i, j in T.Parallel(block_M, 2 * block_B):
                code[i, j] = (T.cast(x[i, j // 2], "int32") >> ((j % 2) * 4)) & 15
            for j, i in T.Parallel(2 * block_B, block_M // 2):
                y[j, i] = code[2 * i, j] | (code[2 * i + 1, j] << 4)
            T.copy(y, Y[bx * 2 * block_B, by * (block_M // 2)])

    return transpose_packed_fp4


@library_function
def per_channel_cast_to_fp8(ctx, x, use_ue8m0=False, gran_k=128):
    """-> (x_fp8 [M, N] e4m3, sf [M/gran_k, N] fp32): one scale per column and per gran_k rows
    (the recipe (1, 1, 128) operands of the k-grouped GEMMs and fp8_einsum's bhd,bhr->hdr). M is
    a multiple of gran_k, as DeepGEMM asserts."""
    plan, xa = Plan(), _cast_input(x, gran_k)
    M, N = xa.shape
    if M % int(gran_k):
        raise ValueError(f"per_channel_cast_to_fp8: M={M} must be a multiple of gran_k={gran_k}")
    q = np.empty((M, N), _fp8())
    sf = np.empty((M // int(gran_k), N), np.float32)
    plan.launch(ctx.compile(per_channel_kernel, M, N, _dt(xa), int(gran_k), bool(use_ue8m0)),
                xa, q, sf)
    plan.result = (q, sf)
    return plan


@library_function
def cast_back_from_fp4(ctx, packed, sf, gran_k=128, use_packed_ue8m0=False):
    """packed e2m1 [M, N/2] (int8/uint8) and its scales (fp32 [M, ceil(N/gran_k)], or int32
    packed UE8M0 with use_packed_ue8m0) -> float32 [M, N], each value times its group's scale."""
    from .mqa import packed_fp4
    plan = Plan()
    p = to_numpy(packed, "packed")
    if p.ndim != 2:
        raise ValueError(f"packed must be [M, N/2], got {p.shape}")
    M, N = p.shape[0], 2 * p.shape[1]
    g = int(gran_k)
    if g % 2 or g <= 0:
        raise ValueError(f"gran_k={gran_k} must be a positive even number")
    xa = packed_fp4(p, p.shape, "packed")
    kb = ceil_div(N, g)
    if use_packed_ue8m0:
        sfa = as_input(sf, None, "sf")
        want = (M, ceil_div(kb, 4))
        if sfa.size == M * want[1]:   # [M] when one int holds a row's scales (DeepGEMM's kv_sf)
            sfa = sfa.reshape(want)
        if sfa.dtype.itemsize != 4 or sfa.dtype.kind not in "iu" or sfa.shape != want:
            raise ValueError(f"sf: packed UE8M0 scales are int32 {want}, got {sfa.dtype} "
                             f"{sfa.shape}")
        sfa = np.ascontiguousarray(sfa.astype("<i4", copy=False)).view(np.uint8)
    else:
        sfa = as_input(sf, "float32", "sf")
        if sfa.shape != (M, kb):
            raise ValueError(f"sf has shape {sfa.shape}; expected fp32 {(M, kb)}")
    if N % g:   # the last group is partial: decode a padded copy of the codes (zeros)
        pad = np.zeros((M, kb * g // 2), np.int8)
        pad[:, :N // 2] = xa
        xa = pad
    out = np.empty((M, xa.shape[1] * 2), np.float32)
    plan.launch(ctx.compile(cast_back_fp4_kernel, M, out.shape[1], g, bool(use_packed_ue8m0)),
                xa, sfa, out)
    plan.result = out[:, :N]
    return plan


@library_function
def transpose_packed_fp4(ctx, a):
    """int8 [M, N/2] packed e2m1 (two codes a byte along N) -> int8 [N, M/2] packed along M: the
    transposed codes (DeepGEMM's layout of an MN-major FP4 operand). M must be even."""
    from .mqa import packed_fp4
    plan = Plan()
    p = to_numpy(a, "a")
    if p.ndim != 2 or p.shape[0] % 2:
        raise ValueError(f"transpose_packed_fp4 takes [M, N/2] with M even, got {p.shape}")
    M, N = p.shape[0], 2 * p.shape[1]
    out = np.empty((N, M // 2), np.int8)
    plan.launch(ctx.compile(transpose_fp4_kernel, M, N), packed_fp4(p, p.shape, "a"), out)
    plan.result = out
    return plan
