"""DeepGEMM's dense and grouped GEMM API: `D = C + A @ B` with DeepGEMM's layouts.

Layout letters (DeepGEMM's): the first is A, the second B; `n` for A and `t` for B mean K-major
(A stored [M, K], B stored [N, K]); the other letter means MN-major (A stored [K, M], B [K, N]).
D is [M, N] (N-major), bfloat16 or float32; C, when given, is float32 [M, N] and may be D itself.
"""
from __future__ import annotations

import numpy as np

from .._core import (Plan, as_input, as_output, ceil_div, check_shape, dims, dtype_of,
                     library_function,
                     to_numpy)
from ._tiles import (SF_GRAN, compile_fitting, fp8_cube, gemm_kernel, head_split_kernel,
                     scaled_block_m)

MK_ALIGNMENT = 128  # rows of a group in the contiguous layout are padded to this (one M block)

LAYOUTS = {"nt": (False, False), "nn": (False, True), "tn": (True, True), "tt": (True, False)}


def get_mk_alignment_for_contiguous_layout() -> int:
    """Rows of each group in an m-grouped contiguous layout are padded to a multiple of this
    (one block_M: every M block then belongs to a single group)."""
    return MK_ALIGNMENT


def get_theoretical_mk_alignment_for_contiguous_layout(expected_m=None) -> int:
    """DeepGEMM's tuning hint: here always the one alignment the grouped kernels use."""
    return MK_ALIGNMENT


# DeepGEMM's aliases (deep_gemm.utils.layout)
get_m_alignment_for_contiguous_layout = get_mk_alignment_for_contiguous_layout
get_k_alignment_for_contiguous_layout = get_mk_alignment_for_contiguous_layout


def _same_memory(x, y) -> bool:
    return x is y or (x is not None and y is not None and np.shares_memory(to_numpy(x), to_numpy(y)))


def _mnk(a, b, layout):
    a_t, b_t = LAYOUTS[layout]
    M, K = dims(a, "K, M", "a")[::-1] if a_t else dims(a, "M, K", "a")
    N, K2 = dims(b, "K, N", "b")[::-1] if b_t else dims(b, "N, K", "b")
    if K != K2:
        raise ValueError(f"gemm_{layout}: A and B disagree on K ({K} and {K2}); A {a.shape}, "
                         f"B {b.shape}")
    return M, N, K


def _d_and_c(plan, d, c, M, N):
    """(the array the kernel writes for d, d's dtype, the C mode, the C arguments)."""
    d_arr = to_numpy(d, "d")
    out_dtype = dtype_of(d_arr)
    if out_dtype not in ("bfloat16", "float32"):
        raise ValueError(f"d must be bfloat16 or float32, got {d_arr.dtype}")
    check_shape(d_arr, (M, N), "d")
    c_mode, c_args = _c_mode(plan, c, d, M, N)
    return as_output(plan, d_arr, "d"), out_dtype, c_mode, c_args


def _c_mode(plan, c, d, M, N):
    if c is None:
        return None, ()
    if _same_memory(c, d):
        return "inplace", ()
    c_arr = as_input(c, "float32", "c")
    check_shape(c_arr, (M, N), "c")
    return "separate", (c_arr,)


def _packed_fp4(x) -> bool:
    return to_numpy(x).dtype in (np.int8, np.uint8)


def _fp4_operand(x, fp4, mn_major, name):
    """(the stored array, its MN, its K) of an FP8/FP4 operand: K-major [MN, K] (FP4 packed
    [MN, K/2]) or MN-major [K, MN] (FP4 packed [K, MN/2], two MN values a byte)."""
    arr = as_input(to_numpy(x).view(np.int8) if fp4 else x, "int8" if fp4 else "float8_e4m3fn",
                   name)
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-D, got {arr.shape}")
    rows, cols = arr.shape
    cols *= 2 if fp4 else 1
    return (arr, cols, rows) if mn_major else (arr, rows, cols)


def _scale_form(sf, rows, K, name, grans, blocks, transposable, lead=()):
    """(fp32 scales, gran, transposed, per 128-row block) of one operand's scales, by shape.

    The one rule for every FP8/FP4 entry point: per row [*lead, rows, ceil(K/g)] for each gran g
    in `grans`; with `blocks` (an FP8 operand) also per (128 rows, 128 K) block
    [*lead, ceil(rows/128), ceil(K/128)]; and when `transposable` (the operand is stored
    MN-major: DeepGEMM's nn/tn/tt aliases transpose its scales with it) the same forms
    transposed, [*lead, ceil(K/g), rows] / [*lead, ceil(K/128), ceil(rows/128)]. A shape that is
    both (square) is read as DeepGEMM's transposed form when the array is a transposed view
    (`sf.T`, as DeepGEMM's own tests pass it: its last two axes swapped are C-contiguous while it
    is not), else per row."""
    view = to_numpy(sf, name)
    t_view = (view.ndim >= 2 and not view.flags.c_contiguous
              and np.swapaxes(view, -1, -2).flags.c_contiguous)
    arr = as_input(view, "float32", name)
    shape = tuple(arr.shape)
    forms = [((*lead, rows, ceil_div(K, g)), g, False, False) for g in grans]
    if blocks:
        forms.append(((*lead, ceil_div(rows, 128), ceil_div(K, 128)), 128, False, True))
    if transposable:
        t_forms = [((*lead, f[-1], f[-2]), g, True, blk) for f, g, _, blk in forms]
        forms = t_forms + forms if t_view else forms + t_forms
    for form, gran, t, blk in forms:
        if shape == form:
            return arr, gran, t, blk
    raise ValueError(f"{name} has shape {shape}; expected fp32 scales "
                     + " or ".join(str(f[0]) for f in forms)
                     + f" (per row, gran_k {' or '.join(map(str, grans))}"
                     + ("; or per (128, 128) block" if blocks else "")
                     + ("; transposed as DeepGEMM's aliases pass an MN-major operand's"
                        if transposable else "") + ")")


def _fp4_scales(sf, rows, K, name, fp4, transposable, lead=()):
    """_scale_form for the dequantising FP4 path: gran 32 or 128, blocks for an FP8 operand."""
    return _scale_form(sf, rows, K, f"{name} ({'FP4' if fp4 else 'FP8'} operand)", (32, 128),
                       not fp4, transposable, lead)


def _dense_fp4(ctx, layout, a, b, d, c):
    """An FP4 operand (packed e2m1 bytes, gran_k 32 scales) in any layout: both operands
    dequantised to bfloat16 tiles in the kernel (fp4.py), MN-major ones read with transpose_A/B
    on the cube. An MN-major FP4 operand is packed along MN (DeepGEMM's transpose_packed_fp4:
    [K, MN/2]), so its MN is even. Packed UE8M0 scales (the MX MMAD) take the nt layout."""
    plan = Plan()
    (a0, sfa), (b0, sfb) = a, b
    a_fp4, b_fp4 = _packed_fp4(a0), _packed_fp4(b0)
    a_t, b_t = LAYOUTS[layout]
    if _packed_sf(sfa, sfb):
        if layout != "nt":
            raise ValueError(f"fp8_fp4_gemm_{layout}: packed UE8M0 scales (the MX MMAD) with FP4 "
                             f"operands take the nt layout (K-major A and B); for {layout} pass "
                             f"fp32 scales (the vector-dequantising path)")
        return _mx_fp4(ctx, plan, a0, sfa, b0, sfb, d, c, a_fp4 and b_fp4)
    d_np = to_numpy(d, "d")
    for fp4, t, which, dim in ((a_fp4, a_t, "A", 0), (b_fp4, b_t, "B", 1)):
        if fp4 and t and d_np.ndim == 2 and d_np.shape[dim] % 2:
            mn = "M" if which == "A" else "N"
            raise ValueError(f"fp8_fp4_gemm_{layout}: an MN-major FP4 {which} is packed two {mn} "
                             f"values a byte ([K, {mn}/2]), so {mn} must be even; d has {mn} = "
                             f"{d_np.shape[dim]}")
    a_arr, M, K = _fp4_operand(a0, a_fp4, a_t, "a")
    b_arr, N, KB = _fp4_operand(b0, b_fp4, b_t, "b")
    if K != KB:
        raise ValueError(f"fp8_fp4_gemm_{layout}: A and B disagree on K ({K} and {KB}); A "
                         f"{a_arr.shape}{' packed' if a_fp4 else ''}, B {b_arr.shape}"
                         f"{' packed' if b_fp4 else ''}")
    sfa_arr, gran_a, sfa_t, sfa_blk = _fp4_scales(sfa, M, K, "sfa", a_fp4, a_t)
    sfb_arr, gran_b, sfb_t, sfb_blk = _fp4_scales(sfb, N, K, "sfb", b_fp4, b_t)
    out_dtype = dtype_of(d_np)
    if out_dtype not in ("bfloat16", "float32"):
        raise ValueError(f"d must be bfloat16 or float32, got {d_np.dtype}")
    check_shape(d_np, (M, N), "d")
    c_mode, c_args = _c_mode(plan, c, d, M, N)
    d_arr = as_output(plan, d_np, "d")
    from .fp4 import dequant_gemm_kernel
    kernel = ctx.compile(dequant_gemm_kernel, M, N, K, a_fp4, b_fp4, gran_a, gran_b,
                         out_dtype, c_mode or False, 64, 128, 128, a_t, b_t, sfa_t, sfb_t, 0,
                         None, sfa_blk, sfb_blk)
    plan.launch(kernel, a_arr, sfa_arr, b_arr, sfb_arr, *c_args, d_arr)
    return plan


def _grouped_fp4(ctx, plan, a, sfa, b, sfb, d, info, grouping, expected_m, b_t=False):
    """The m-grouped GEMMs with an FP4 operand (packed e2m1; A K-major, B K-major or, b_t, the
    nn form [G, K, N] packed along N): the dequantising kernel of the dense form, with the group
    read at run time."""
    if _packed_sf(sfa, sfb):
        raise ValueError(f"m-grouped {grouping} GEMM with FP4 operands: packed UE8M0 scales are "
                         f"not supported here (the MX MMAD path is dense nt only); pass fp32 "
                         f"scales [rows, ceil(K/32)]")
    a_fp4, b_fp4 = _packed_fp4(a), _packed_fp4(b)
    a_arr = as_input(to_numpy(a).view(np.int8) if a_fp4 else a,
                     "int8" if a_fp4 else "float8_e4m3fn", "a")
    b_arr = as_input(to_numpy(b).view(np.int8) if b_fp4 else b,
                     "int8" if b_fp4 else "float8_e4m3fn", "b")
    if b_arr.ndim != 3:
        want = "[G, K, N] (FP4 packed [G, K, N/2])" if b_t else "[G, N, K] (FP4 packed [G, N, K/2])"
        raise ValueError(f"b must be {want}, got {b_arr.shape}")
    if b_t:
        G, K, N = b_arr.shape
        N *= 2 if b_fp4 else 1
    else:
        G, N, K = b_arr.shape
        K *= 2 if b_fp4 else 1
    masked = grouping == "masked"
    ka = a_arr.shape[-1] * (2 if a_fp4 else 1)
    if a_arr.ndim != (3 if masked else 2) or ka != K or (masked and a_arr.shape[0] != G):
        want = f"[{G}, maxM, {K // 2 if a_fp4 else K}]" if masked else \
            f"[M, {K // 2 if a_fp4 else K}]"
        raise ValueError(f"a must be {want}{' (packed FP4)' if a_fp4 else ''} to match b "
                         f"{b_arr.shape}, got {a_arr.shape}")
    M = a_arr.shape[-2]
    sfa_arr, gran_a, _, sfa_blk = _fp4_scales(sfa, M, K, "sfa", a_fp4, False,
                                              (G,) if masked else ())
    sfb_arr, gran_b, sfb_t, sfb_blk = _fp4_scales(sfb, N, K, "sfb", b_fp4, b_t, (G,))
    info_arr = as_input(info, "int32", "masked_m" if masked else "grouped_layout")
    check_shape(info_arr, (G,) if masked else (M,), "masked_m" if masked else "grouped_layout")
    if ctx.check_data:
        _check_groups(info_arr, G, M, masked)
    d_np = to_numpy(d, "d")
    out_dtype = dtype_of(d_np)
    if out_dtype not in ("bfloat16", "float32"):
        raise ValueError(f"d must be bfloat16 or float32, got {d_np.dtype}")
    check_shape(d_np, (G, M, N) if masked else (M, N), "d")
    d_arr = as_output(plan, d_np, "d")
    from .fp4 import dequant_gemm_kernel
    kernel = ctx.compile(dequant_gemm_kernel, M, N, K, a_fp4, b_fp4, gran_a, gran_b, out_dtype,
                         False, 64, 128, 128, False, b_t, False, sfb_t, G, grouping, sfa_blk,
                         sfb_blk)
    arrays = (a_arr, sfa_arr, b_arr, sfb_arr, d_arr)
    plan.launch(kernel, *arrays, info_arr, estimate_with=_hint(expected_m, arrays, info_arr))
    return plan


def _mx_fp4(ctx, plan, a0, sfa, b0, sfb, d, c, both_fp4):
    """Packed FP4 operands with UE8M0 pair scales (gran_k 32): the chip's MX MMAD. Both FP4: the
    bytes go to the cube as they are. One FP8 (e4m3, its pairs of gran 128 [ceil(K/256), MN] or
    of gran 32 [ceil(K/64), MN]) and one FP4: the MMAD multiplies one format, so a prepass widens
    the FP4 operand to e4m3 (exact) and regroups the FP8 operand's gran-128 pairs to gran 32, then
    the FP8 MX GEMM runs with one scale per 32 K values."""
    from ...arch import get_chip
    if not get_chip(ctx.chip).mx_gran:
        raise ValueError(f"packed UE8M0 scales (uint16) need a cube that applies block scales "
                         f"itself; {ctx.chip} has none: pass fp32 scales [MN, ceil(K/32)]")
    from .fp4 import MX_GRAN, fp4_to_fp8_kernel, mx_gemm_kernel, regroup_pairs_kernel
    fp4s = (_packed_fp4(a0), _packed_fp4(b0))
    ops = [as_input(to_numpy(x).view(np.uint8), "uint8", n) if f else
           as_input(x, "float8_e4m3fn", n) for x, f, n in zip((a0, b0), fp4s, ("a", "b"))]
    for x, n in zip(ops, ("a", "b")):
        if x.ndim != 2:
            raise ValueError(f"{n} must be 2-D (K-major [MN, K] or packed [MN, K/2]), got {x.shape}")
    (M, ka), (N, kb) = ops[0].shape, ops[1].shape
    K = ka * (2 if fp4s[0] else 1)
    if kb * (2 if fp4s[1] else 1) != K:
        raise ValueError(f"A and B disagree on K: A {ops[0].shape}, B {ops[1].shape} "
                         f"({'packed bytes' if fp4s[0] else 'e4m3'}, "
                         f"{'packed bytes' if fp4s[1] else 'e4m3'})")
    if K % 128:
        raise ValueError(f"FP4 GEMMs take K a multiple of 128, got {K}")
    kp = ceil_div(ceil_div(K, MX_GRAN), 2)
    if both_fp4:
        sfa_arr, sfb_arr = _packed_pair(sfa, sfb, (kp, M), (kp, N), "ceil(K/64)")
        d_arr, out_dtype, c_mode, c_args = _d_and_c(plan, d, c, M, N)
        kernel = ctx.compile(mx_gemm_kernel, M, N, K, out_dtype, c_mode)
        plan.launch(kernel, ops[0], sfa_arr, ops[1], sfb_arr, *c_args, d_arr)  # bytes as they are
        return plan
    kp128 = ceil_div(ceil_div(K, SF_GRAN), 2)
    operands, scales = [], []
    for x, f, sf, mn, n in zip(ops, fp4s, (sfa, sfb), (M, N), ("sfa", "sfb")):
        sf_arr = as_input(sf, "uint16", n)
        if f:
            check_shape(sf_arr, (kp, mn), f"{n} (FP4 operand: UE8M0 pairs [ceil(K/64), {mn}])")
            wide = np.empty((mn, K), _e4m3())
            plan.launch(ctx.compile(fp4_to_fp8_kernel, mn, K), x, wide)
            x = wide
        elif sf_arr.shape == (kp128, mn):  # gran-128 pairs: each byte stands for 4 groups
            fine = np.empty((kp, mn), np.uint16)
            plan.launch(ctx.compile(regroup_pairs_kernel, kp128, mn, kp, SF_GRAN // MX_GRAN),
                        sf_arr, fine)
            sf_arr = fine
        elif sf_arr.shape != (kp, mn):
            raise ValueError(f"{n} (FP8 operand) has shape {sf_arr.shape}; expected UE8M0 pairs "
                             f"({kp128}, {mn}) (gran 128) or ({kp}, {mn}) (gran 32)")
        operands.append(x)
        scales.append(sf_arr)
    d_arr, out_dtype, c_mode, c_args = _d_and_c(plan, d, c, M, N)
    kernel = ctx.compile(mx_gemm_kernel, M, N, K, out_dtype, c_mode, 128, 128, 256,
                         "float8_e4m3fn")
    plan.launch(kernel, operands[0], scales[0], operands[1], scales[1], *c_args, d_arr)
    return plan


def _e4m3():
    from ...ir import dtypes
    return dtypes.to_numpy("float8_e4m3fn")


def _dense(ctx, layout, a, b, d, c, scaled):
    if scaled and (_packed_fp4(a[0]) or _packed_fp4(b[0])):
        return _dense_fp4(ctx, layout, a, b, d, c)
    plan = Plan()
    if scaled:
        (a, sfa), (b, sfb) = a, b
    a_arr, b_arr = to_numpy(a, "a"), to_numpy(b, "b")
    in_dtype = "float8_e4m3fn" if scaled else "bfloat16"
    a_arr, b_arr = as_input(a_arr, in_dtype, "a"), as_input(b_arr, in_dtype, "b")
    M, N, K = _mnk(a_arr, b_arr, layout)
    d_arr, out_dtype, c_mode, c_args = _d_and_c(plan, d, c, M, N)
    a_t, b_t = LAYOUTS[layout]
    if not scaled:
        kernel = ctx.compile(gemm_kernel, M, N, K, a_t, b_t, "bfloat16", out_dtype, c_mode, None,
                             False)
        plan.launch(kernel, a_arr, b_arr, *c_args, d_arr)
        return plan
    KB = ceil_div(K, SF_GRAN)
    if _packed_sf(sfa, sfb):
        sfa_arr, sfb_arr = _packed_pair(sfa, sfb, (ceil_div(KB, 2), M), (ceil_div(KB, 2), N))
        kernel = ctx.compile(gemm_kernel, M, N, K, a_t, b_t, "float8_e4m3fn", out_dtype, c_mode,
                             "mx", True)
        plan.launch(kernel, a_arr, sfa_arr, b_arr, sfb_arr, *c_args, d_arr)
        return plan
    sfa_arr, _, sfa_t, _ = _scale_form(sfa, M, K, "sfa", (SF_GRAN,), False, a_t)
    sfb_arr, _, sfb_t, blk = _scale_form(sfb, N, K, "sfb", (SF_GRAN,), True, b_t)
    kernel = compile_fitting(ctx, scaled_block_m(ctx.chip, M), lambda bm: (
        gemm_kernel, M, N, K, a_t, b_t, "float8_e4m3fn", out_dtype, c_mode,
        "block" if blk else "channel", fp8_cube(ctx.chip), bm, 128, 64, 0, None, sfa_t, sfb_t))
    plan.launch(kernel, a_arr, sfa_arr, b_arr, sfb_arr, *c_args, d_arr)
    return plan


def _packed_sf(sfa, sfb) -> bool:
    """UE8M0 scales packed in pairs (uint16, MN-major: transform_sf_into_required_layout's
    layout for ascend950), which the cube applies itself (the scaled MMAD)."""
    packed = [to_numpy(x).dtype == np.uint16 for x in (sfa, sfb)]
    if packed[0] != packed[1]:
        raise ValueError("sfa and sfb must both be fp32 scales or both packed UE8M0 pairs "
                         "(uint16, from transform_sf_into_required_layout)")
    return packed[0]


def _packed_pair(sfa, sfb, shape_a, shape_b, rows="ceil(K/256)"):
    sfa_arr, sfb_arr = as_input(sfa, "uint16", "sfa"), as_input(sfb, "uint16", "sfb")
    check_shape(sfa_arr, shape_a, f"sfa (packed UE8M0 pairs [{rows}, M])")
    check_shape(sfb_arr, shape_b, f"sfb (packed UE8M0 pairs [{rows}, N])")
    return sfa_arr, sfb_arr


def _make_dense(layout, scaled):
    kind = "fp8" if scaled else "bf16"

    def plan(ctx, a, b, d, c=None, recipe=None, **_ignored):
        if recipe is not None and tuple(recipe)[1:] not in ((128, 128), (1, 128)):
            raise ValueError(f"recipe {recipe!r} is not supported: (1, 128, 128) or (1, 1, 128)")
        return _dense(ctx, layout, a, b, d, c, scaled)

    a_t, b_t = LAYOUTS[layout]
    plan.__name__ = plan.__qualname__ = f"{kind}_gemm_{layout}"
    plan.__doc__ = (f"D = C + A @ B on {'FP8 e4m3 operands with fp32 block scales' if scaled else 'bfloat16 operands'}"
                    f"; A stored {'[K, M]' if a_t else '[M, K]'}, B stored {'[K, N]' if b_t else '[N, K]'}"
                    f"{'; a = (A, sfa [M, ceil(K/128)]), b = (B, sfb [ceil(N/128), ceil(K/128)] or [N, ceil(K/128)])' if scaled else ''}"
                    "; d (bfloat16 or float32 [M, N]) is written in place; c (float32, may be d).")
    return library_function(plan)


bf16_gemm_nt = _make_dense("nt", False)
bf16_gemm_nn = _make_dense("nn", False)
bf16_gemm_tn = _make_dense("tn", False)
bf16_gemm_tt = _make_dense("tt", False)
fp8_gemm_nt = _make_dense("nt", True)
fp8_gemm_nn = _make_dense("nn", True)
fp8_gemm_tn = _make_dense("tn", True)
fp8_gemm_tt = _make_dense("tt", True)
fp8_fp4_gemm_nt, fp8_fp4_gemm_nn = fp8_gemm_nt, fp8_gemm_nn
fp8_fp4_gemm_tn, fp8_fp4_gemm_tt = fp8_gemm_tn, fp8_gemm_tt
# DeepGEMM's cuBLASLt baselines (D = C + A @ B without scales): the bf16 GEMMs, whose inputs are
# cast to bfloat16 (exact for e4m3 operands)
cublaslt_gemm_nt, cublaslt_gemm_nn = bf16_gemm_nt, bf16_gemm_nn
cublaslt_gemm_tn, cublaslt_gemm_tt = bf16_gemm_tn, bf16_gemm_tt


# ----------------------------------------------------------------------------- grouped (MoE)


def _grouped(ctx, a, b, d, info, grouping, scaled, expected_m=None, b_t=False):
    """The m-grouped GEMMs; b_t: B stored [G, K, N] (the nn_contiguous form)."""
    plan = Plan()
    if scaled:
        (a, sfa), (b, sfb) = a, b
        if _packed_fp4(a) or _packed_fp4(b):  # (an int8 array cast to e4m3 would be wrong)
            return _grouped_fp4(ctx, plan, a, sfa, b, sfb, d, info, grouping, expected_m, b_t)
    in_dtype = "float8_e4m3fn" if scaled else "bfloat16"
    a_arr, b_arr = as_input(a, in_dtype, "a"), as_input(b, in_dtype, "b")
    info_arr = as_input(info, "int32", "grouped_layout" if grouping == "contiguous" else "masked_m")
    if b_arr.ndim != 3:
        raise ValueError(f"b must be {'[G, K, N]' if b_t else '[G, N, K]'}, got {b_arr.shape}")
    G, N, K = (b_arr.shape[0], b_arr.shape[2], b_arr.shape[1]) if b_t else b_arr.shape
    d_arr = to_numpy(d, "d")
    out_dtype = dtype_of(d_arr)
    if out_dtype not in ("bfloat16", "float32"):
        raise ValueError(f"d must be bfloat16 or float32, got {d_arr.dtype}")
    masked = grouping == "masked"
    if not masked:
        M = a_arr.shape[0]
        check_shape(a_arr, (M, K), "a")
        check_shape(info_arr, (M,), "grouped_layout")
        check_shape(d_arr, (M, N), "d")
    else:
        M = a_arr.shape[1] if a_arr.ndim == 3 else -1
        check_shape(a_arr, (G, M, K), "a")
        check_shape(info_arr, (G,), "masked_m")
        check_shape(d_arr, (G, M, N), "d")
    if ctx.check_data:
        _check_groups(info_arr, G, M, masked)
    d_arr = as_output(plan, d_arr, "d")
    if not scaled:
        kernel = ctx.compile(gemm_kernel, M, N, K, False, b_t, "bfloat16", out_dtype, None, None,
                             False, 128, 128, 64, G, grouping)
        plan.launch(kernel, a_arr, b_arr, d_arr, info_arr,
                    estimate_with=_hint(expected_m, (a_arr, b_arr, d_arr), info_arr))
        return plan
    KB = ceil_div(K, SF_GRAN)
    if _packed_sf(sfa, sfb):
        KP = ceil_div(KB, 2)
        sfa_arr, sfb_arr = _packed_pair(sfa, sfb, (G, KP, M) if masked else (KP, M), (G, KP, N))
        kernel = ctx.compile(gemm_kernel, M, N, K, False, b_t, "float8_e4m3fn", out_dtype, None,
                             "mx", True, 128, 128, 64, G, grouping)
    else:
        sfa_arr, _, sfa_t, _ = _scale_form(sfa, M, K, "sfa", (SF_GRAN,), False, False,
                                           (G,) if masked else ())
        sfb_arr, _, sfb_t, blk = _scale_form(sfb, N, K, "sfb", (SF_GRAN,), True, b_t, (G,))
        kernel = ctx.compile(gemm_kernel, M, N, K, False, b_t, "float8_e4m3fn", out_dtype, None,
                             "block" if blk else "channel", fp8_cube(ctx.chip), 128, 128, 64, G,
                             grouping, sfa_t, sfb_t)
    arrays = (a_arr, sfa_arr, b_arr, sfb_arr, d_arr)
    plan.launch(kernel, *arrays, info_arr, estimate_with=_hint(expected_m, arrays, info_arr))
    return plan


def _check_groups(info, G, M, masked):
    """A grouped_layout names groups below G (negative: a padding row); masked_m[g] is in
    [0, maxM]. Else a ValueError: the kernel would read past b (or d)."""
    if not info.size:
        return
    if masked and (info.min() < 0 or info.max() > M):
        raise ValueError(f"masked_m must be in [0, {M}] (the rows of a group), got "
                         f"{info.min()}..{info.max()}")
    if not masked and info.max() >= G:
        raise ValueError(f"grouped_layout names group {info.max()}; b has {G} groups")


def _hint(expected_m, arrays, info):
    """The masked GEMM's estimate with expected_m rows per group (DeepGEMM's hint)."""
    if expected_m is None:
        return None
    return (*arrays, np.full(info.shape, int(expected_m), np.int32))


@library_function
def m_grouped_bf16_gemm_nt_contiguous(ctx, a, b, d, grouped_layout, **_ignored):
    """MoE forward: rows of A [M, K] belong to the group in grouped_layout [M] (int32; -1 marks
    padding rows, which are left untouched); D[m] = A[m] @ B[group(m)].T with B [G, N, K]."""
    return _grouped(ctx, a, b, d, grouped_layout, "contiguous", False)


@library_function
def m_grouped_fp8_gemm_nt_contiguous(ctx, a, b, d, grouped_layout, recipe=None, **_ignored):
    """The FP8 form of m_grouped_bf16_gemm_nt_contiguous: a = (A, sfa [M, ceil(K/128)]),
    b = (B [G, N, K], sfb [G, ceil(N/128), ceil(K/128)])."""
    return _grouped(ctx, a, b, d, grouped_layout, "contiguous", True)


@library_function
def m_grouped_bf16_gemm_nt_masked(ctx, a, b, d, masked_m, expected_m=None, **_ignored):
    """MoE decode: D[g, :masked_m[g]] = A[g, :masked_m[g]] @ B[g].T; A [G, maxM, K],
    B [G, N, K], D [G, maxM, N]; rows past masked_m[g] are left untouched."""
    return _grouped(ctx, a, b, d, masked_m, "masked", False, expected_m)


@library_function
def m_grouped_fp8_gemm_nt_masked(ctx, a, b, d, masked_m, expected_m=None, recipe=None,
                                 **_ignored):
    """The FP8 form of m_grouped_bf16_gemm_nt_masked: a = (A, sfa [G, maxM, ceil(K/128)]),
    b = (B, sfb [G, ceil(N/128), ceil(K/128)])."""
    return _grouped(ctx, a, b, d, masked_m, "masked", True, expected_m)


m_grouped_fp8_fp4_gemm_nt_contiguous = m_grouped_fp8_gemm_nt_contiguous
m_grouped_fp8_fp4_gemm_nt_masked = m_grouped_fp8_gemm_nt_masked


@library_function
def m_grouped_bf16_gemm_nn_contiguous(ctx, a, b, d, grouped_layout, **_ignored):
    """m_grouped_bf16_gemm_nt_contiguous with B stored MN-major, [G, K, N] (DeepGEMM passes
    b.transpose(1, 2) to the nt form)."""
    return _grouped(ctx, a, b, d, grouped_layout, "contiguous", False, b_t=True)


@library_function
def m_grouped_fp8_gemm_nn_contiguous(ctx, a, b, d, grouped_layout, recipe=None, **_ignored):
    """m_grouped_fp8_gemm_nt_contiguous with B stored MN-major: b = (B [G, K, N], sfb), sfb
    [G, ceil(N/128), ceil(K/128)] or, as DeepGEMM's alias passes it, transposed
    [G, ceil(K/128), ceil(N/128)] (per-channel: [G, N, ceil(K/128)] or [G, ceil(K/128), N]).
    FP4 B (packed along N, [G, K, N/2]) takes gran-32 scales the same two ways."""
    return _grouped(ctx, a, b, d, grouped_layout, "contiguous", True, b_t=True)


m_grouped_fp8_fp4_gemm_nn_contiguous = m_grouped_fp8_gemm_nn_contiguous
# DeepGEMM's legacy names (its __init__ keeps them as aliases)
fp8_m_grouped_gemm_nt_masked = m_grouped_fp8_gemm_nt_masked
bf16_m_grouped_gemm_nt_masked = m_grouped_bf16_gemm_nt_masked


# ----------------------------------------------------------------------------- head splits


@library_function
def fp8_gemm_nt_skip_head_mid(ctx, a, b, d, head_splits, recipe=None, **_ignored):
    """fp8_gemm_nt whose output columns come in heads of (left + right) and are stored with
    `mid` columns skipped inside each head: d [M, N + N / (left + right) * mid]; GEMM column j
    of head h = j // (left + right) goes to column j + h * mid (left part) or j + (h + 1) * mid
    (right part), DeepGEMM's EpilogueHeadSplits; the skipped columns are left as they were.
    Launches fp8_gemm_nt into a work array, then a column-scatter kernel."""
    left, mid, right = (int(x) for x in head_splits)
    if min(left, mid, right) < 0 or left + right == 0:
        raise ValueError(f"head_splits {head_splits!r}: (left, mid, right) >= 0, left + right > 0")
    (a0, _), (b0, _) = a, b
    M, N = to_numpy(a0, "a").shape[0], to_numpy(b0, "b").shape[0]
    if N % (left + right):
        raise ValueError(f"N = {N} is not a multiple of left + right = {left + right}")
    d_np = to_numpy(d, "d")
    out_dtype = dtype_of(d_np)
    check_shape(d_np, (M, N + N // (left + right) * mid), "d")
    work = np.empty((M, N), d_np.dtype)
    plan = fp8_gemm_nt.plan(ctx, a, b, work, recipe=recipe)
    d_arr = as_output(plan, d_np, "d")
    plan.launch(ctx.compile(head_split_kernel, M, N, left, mid, right, out_dtype), work, d_arr)
    return plan
