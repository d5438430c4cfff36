"""The estimate table of docs/kernels.md: every library function's `f.estimate(...)` at a
DeepSeek-sized shape on both chip presets, next to its roofline.

    python benchmarks/kernel_estimates.py [--match REGEX] [--small] [--write]

"roof" is the larger of the memory roof (the call's arrays, inputs read once and outputs written
once, at the chip's HBM bandwidth) and the compute roof (each launch's cube FLOPs at the cube's
peak for its dtypes, as the estimate reports them). `--write` replaces the table between the
markers in docs/kernels.md; `--small` builds every row at a small shape (what
tests/kernels_lib/test_lib_estimates.py checks: each estimate at or above its roof). Rows whose
call a chip rejects (packed UE8M0 scales on ascend910b) say "(rejected)".
"""
from __future__ import annotations

import argparse
import math
import re
import sys
from pathlib import Path

import ml_dtypes
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "kernels.md"
BEGIN, END = "<!-- kernel-estimates:begin -->", "<!-- kernel-estimates:end -->"
CHIPS = ("ascend910b", "ascend950")
BF16, FP8 = ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn


def e(shape, dtype):
    return np.empty(shape, dtype)


def _contiguous(groups, rows, align=128):
    """grouped_layout: `groups` groups of `rows` rows each, padded to `align`."""
    padded = -(-rows // align) * align
    layout = np.full(groups * padded, -1, np.int32)
    for g in range(groups):
        layout[g * padded:g * padded + rows] = g
    return layout


def rows(small=False):
    """(name, shape text, function, args, kwargs, chips) per table row; `small` shrinks every
    shape (the same code paths: tails, several blocks and splits)."""
    from tilelang_mini.kernels import deep_gemm as dg
    from tilelang_mini.kernels import flash_mla, mhc, topk

    out = []
    M, N, K = (200, 136, 640) if small else (4096, 7168, 16384)
    mnk = f"{M}x{N}x{K}"
    out.append(("bf16_gemm_nt", mnk, dg.bf16_gemm_nt,
                (e((M, K), BF16), e((N, K), BF16), e((M, N), BF16)), {}, CHIPS))
    kb = -(-K // 128)
    out.append(("fp8_gemm_nt (1,128,128), fp32 scales", mnk, dg.fp8_gemm_nt,
                ((e((M, K), FP8), e((M, kb), np.float32)),
                 (e((N, K), FP8), e((-(-N // 128), kb), np.float32)), e((M, N), BF16)), {},
                CHIPS))
    kp = -(-kb // 2)
    out.append(("fp8_gemm_nt, packed UE8M0 scales (950 MX MMAD)", mnk, dg.fp8_gemm_nt,
                ((e((M, K), FP8), e((kp, M), np.uint16)), (e((N, K), FP8), e((kp, N), np.uint16)),
                 e((M, N), BF16)), {}, CHIPS))
    g32 = -(-K // 32)
    out.append(("fp8_fp4_gemm_nt FP4 x FP4, fp32 scales (vector dequant)", mnk,
                dg.fp8_fp4_gemm_nt,
                ((e((M, K // 2), np.int8), e((M, g32), np.float32)),
                 (e((N, K // 2), np.int8), e((N, g32), np.float32)), e((M, N), BF16)), {}, CHIPS))
    out.append(("fp8_fp4_gemm_nt FP4 x FP4, packed UE8M0 (950 MX MMAD)", mnk, dg.fp8_fp4_gemm_nt,
                ((e((M, K // 2), np.uint8), e((-(-g32 // 2), M), np.uint16)),
                 (e((N, K // 2), np.uint8), e((-(-g32 // 2), N), np.uint16)), e((M, N), BF16)),
                {}, CHIPS))
    out.append(("fp8_fp4_gemm_tn FP4 x FP4, fp32 scales (vector dequant, MN-major)", mnk,
                dg.fp8_fp4_gemm_tn,
                ((e((K, M // 2), np.int8), e((M, g32), np.float32)),
                 (e((K, N // 2), np.int8), e((N, g32), np.float32)), e((M, N), BF16)), {}, CHIPS))

    G, rows_g, GN, GK = (3, 70, 136, 384) if small else (8, 512, 4096, 7168)
    layout = _contiguous(G, rows_g)
    shape = f"{G} groups x {rows_g}, N {GN}, K {GK}"
    out.append(("m_grouped_bf16_gemm_nt_contiguous", shape, dg.m_grouped_bf16_gemm_nt_contiguous,
                (e((layout.size, GK), BF16), e((G, GN, GK), BF16), e((layout.size, GN), BF16),
                 layout), {}, CHIPS))
    gkb = -(-GK // 128)
    out.append(("m_grouped_fp8_gemm_nt_contiguous (fp32 scales)", shape,
                dg.m_grouped_fp8_gemm_nt_contiguous,
                ((e((layout.size, GK), FP8), e((layout.size, gkb), np.float32)),
                 (e((G, GN, GK), FP8), e((G, -(-GN // 128), gkb), np.float32)),
                 e((layout.size, GN), BF16), layout), {}, CHIPS))
    out.append(("m_grouped_bf16_gemm_nn_contiguous (B [G, K, N])", shape,
                dg.m_grouped_bf16_gemm_nn_contiguous,
                (e((layout.size, GK), BF16), e((G, GK, GN), BF16), e((layout.size, GN), BF16),
                 layout), {}, CHIPS))
    out.append(("m_grouped_fp8_gemm_nn_contiguous (B [G, K, N], sfb transposed)", shape,
                dg.m_grouped_fp8_gemm_nn_contiguous,
                ((e((layout.size, GK), FP8), e((layout.size, gkb), np.float32)),
                 (e((G, GK, GN), FP8), e((G, gkb, -(-GN // 128)), np.float32)),
                 e((layout.size, GN), BF16), layout), {}, CHIPS))
    g32 = -(-GK // 32)
    out.append(("m_grouped_fp8_fp4_gemm_nt_contiguous FP4 x FP4 (fp32 scales)", shape,
                dg.m_grouped_fp8_fp4_gemm_nt_contiguous,
                ((e((layout.size, GK // 2), np.int8), e((layout.size, g32), np.float32)),
                 (e((G, GN, GK // 2), np.int8), e((G, GN, g32), np.float32)),
                 e((layout.size, GN), BF16), layout), {}, CHIPS))
    mm = np.full(G, rows_g // 2, np.int32)
    out.append(("m_grouped_bf16_gemm_nt_masked (masked_m = maxM / 2)",
                f"{G} x max {rows_g}, N {GN}, K {GK}", dg.m_grouped_bf16_gemm_nt_masked,
                (e((G, rows_g, GK), BF16), e((G, GN, GK), BF16), e((G, rows_g, GN), BF16), mm,
                 rows_g // 2), {}, CHIPS))
    KG, KM, KN = ((3, 128, 136) if small else (4, 4096, 7168))
    ks = [128 * (i + 1) for i in range(KG)] if small else [4096] * KG
    sk = sum(ks)
    out.append(("k_grouped_fp8_gemm_tn_contiguous", f"{KG} groups, K {ks[0]}.., M {KM}, N {KN}",
                dg.k_grouped_fp8_gemm_tn_contiguous,
                ((e((sk, KM), FP8), e((sk // 128, KM), np.float32)),
                 (e((sk, KN), FP8), e((sk // 128, KN), np.float32)),
                 e((KG, KM, KN), np.float32), ks), {}, CHIPS))
    out.append(("k_grouped_fp8_gemm_nt_contiguous (flat K-major groups)",
                f"{KG} groups, K {ks[0]}.., M {KM}, N {KN}", dg.k_grouped_fp8_gemm_nt_contiguous,
                ((e((sk * KM,), FP8), e((KM, sk // 128), np.float32)),
                 (e((sk * KN,), FP8), e((KN, sk // 128), np.float32)),
                 e((KG, KM, KN), np.float32), ks), {}, CHIPS))
    out.append(("k_grouped_bf16_gemm_tn_contiguous", f"{KG} groups, K {ks[0]}.., M {KM}, N {KN}",
                dg.k_grouped_bf16_gemm_tn_contiguous,
                (e((sk, KM), BF16), e((sk, KN), BF16), e((KG, KM, KN), np.float32), ks), {},
                CHIPS))

    SM, SH, SK_ = (70, 2, 256) if small else (4096, 64, 512)
    sl, smid, sr = 128, 64, 128
    sn = SH * (sl + sr)
    out.append(("fp8_gemm_nt_skip_head_mid (128, 64, 128)", f"{SM}x{sn}x{SK_}, {SH} heads",
                dg.fp8_gemm_nt_skip_head_mid,
                ((e((SM, SK_), FP8), e((SM, -(-SK_ // 128)), np.float32)),
                 (e((sn, SK_), FP8), e((-(-sn // 128), -(-SK_ // 128)), np.float32)),
                 e((SM, SH * (sl + smid + sr)), BF16), (sl, smid, sr)), {}, CHIPS))
    EB, EH, ER, ED = (5, 3, 128, 136) if small else (4096, 128, 512, 128)
    out.append(("einsum bhr,hdr->bhd", f"B {EB}, H {EH}, R {ER}, D {ED}", dg.einsum,
                ("bhr,hdr->bhd", e((EB, EH, ER), BF16), e((EH, ED, ER), BF16),
                 e((EB, EH, ED), BF16)), {}, CHIPS))
    out.append(("fp8_einsum bhr,hdr->bhd", f"B {EB}, H {EH}, R {ER}, D {ED}", dg.fp8_einsum,
                ("bhr,hdr->bhd", (e((EB, EH, ER), FP8), e((EB, EH, -(-ER // 128)), np.float32)),
                 (e((EH, ED, ER), FP8), e((EH, -(-ED // 128), -(-ER // 128)), np.float32)),
                 e((EB, EH, ED), BF16)), {}, CHIPS))
    WB, WH, WD, WR = (200, 2, 37, 136) if small else (8192, 8, 1024, 4096)
    out.append(("fp8_einsum bhd,bhr->hdr (c = d)", f"B {WB}, H {WH}, D {WD}, R {WR}",
                dg.fp8_einsum,
                ("bhd,bhr->hdr", (e((WB, WH, WD), FP8), e((-(-WB // 128), WH, WD), np.float32)),
                 (e((WB, WH, WR), FP8), e((-(-WB // 128), WH, WR), np.float32)),
                 e((WH, WD, WR), np.float32)), {"recipe": (1, 1, 128)}, CHIPS))
    ES, EM, EN, EK = (3, 70, 136, 200) if small else (8, 4096, 7168, 2048)
    out.append(("einsum bmk,bnk->mn (bf16 d)", f"S {ES}, {EM}x{EN}x{EK}", dg.einsum,
                ("bmk,bnk->mn", e((ES, EM, EK), BF16), e((ES, EN, EK), BF16),
                 e((EM, EN), BF16)), {}, CHIPS))
    HM, HN, HK, S = (70, 24, 1000, 3) if small else (4096, 24, 28672, 16)
    hshape = f"{HM}x{HN}x{HK}, {S} splits"
    out.append(("tf32_hc_prenorm_gemm (partials)", hshape, dg.tf32_hc_prenorm_gemm,
                (e((HM, HK), BF16), e((HN, HK), np.float32), e((S, HM, HN), np.float32),
                 e((S, HM), np.float32)), {"num_splits": S}, CHIPS))
    out.append(("tf32_hc_prenorm_gemm (atomic_reduce)", hshape, dg.tf32_hc_prenorm_gemm,
                (e((HM, HK), BF16), e((HN, HK), np.float32), e((HM, HN), np.float32),
                 e((HM,), np.float32)), {"num_splits": S, "atomic_reduce": True}, CHIPS))
    Tn, n, C = (37, 4, 256) if small else (4096, 4, 7168)
    nm = n * (n + 2)
    out.append(("mhc_pre", f"T {Tn}, n {n}, C {C}", mhc.mhc_pre,
                (e((Tn, n, C), BF16), e((nm, n * C), np.float32),
                 np.ones(3, np.float32), np.zeros(nm, np.float32)), {}, CHIPS))
    out.append(("mhc_post", f"T {Tn}, n {n}, C {C}", mhc.mhc_post,
                (e((Tn, C), BF16), e((Tn, n, C), BF16), e((Tn, n), np.float32),
                 e((Tn, n, n), np.float32)), {}, CHIPS))

    Sq, H, D, SK = (70, 8, 128, 300) if small else (4096, 64, 128, 8192)
    ks_, ke_ = np.zeros(Sq, np.int32), np.minimum(np.arange(Sq, dtype=np.int32) + SK - Sq + 1, SK)
    out.append(("fp8_mqa_logits", f"S {Sq}, H {H}, D {D}, SK {SK}", dg.fp8_mqa_logits,
                (e((Sq, H, D), FP8), (e((SK, D), FP8), e((SK,), np.float32)),
                 e((Sq, H), np.float32), ks_, ke_), {}, CHIPS))
    out.append(("fp8_fp4_mqa_logits, FP4 q and kv", f"S {Sq}, H {H}, D {D}, SK {SK}",
                dg.fp8_fp4_mqa_logits,
                ((e((Sq, H, D // 2), np.int8), np.full((Sq, H), 0x7F7F7F7F, np.int32)),
                 (e((SK, D // 2), np.int8), np.full(SK, 0x7F7F7F7F, np.int32)),
                 e((Sq, H), np.float32), ks_, ke_), {}, CHIPS))
    PB, NN, PL, BKV = (3, 2, 300, 64) if small else (64, 2, 8192, 64)
    pages = -(-PL // BKV)
    cl = np.full(PB, PL, np.int32)
    out.append(("fp8_paged_mqa_logits", f"B {PB}, next_n {NN}, H {H}, ctx {PL}",
                dg.fp8_paged_mqa_logits,
                (e((PB, NN, H, D), FP8), e((PB * pages, BKV, 1, D + 4), np.uint8),
                 e((PB * NN, H), np.float32), cl,
                 np.arange(PB * pages, dtype=np.int32).reshape(PB, pages),
                 dg.get_paged_mqa_logits_metadata(cl, BKV), PL), {}, CHIPS))

    out.append(("fp8_fp4_paged_mqa_logits, FP4 q and cache", f"B {PB}, next_n {NN}, H {H}, "
                f"ctx {PL}", dg.fp8_fp4_paged_mqa_logits,
                ((e((PB, NN, H, D // 2), np.int8), np.full((PB, NN, H), 0x7F7F7F7F, np.int32)),
                 e((PB * pages, BKV, 1, D // 2 + 4), np.uint8), e((PB * NN, H), np.float32), cl,
                 np.arange(PB * pages, dtype=np.int32).reshape(PB, pages),
                 dg.get_paged_mqa_logits_metadata(cl, BKV), PL), {}, CHIPS))

    MB, MH, ML = (2, 16, 200) if small else (64, 128, 4096)
    seq = np.full(MB, ML, np.int32)
    meta, splits = flash_mla.get_mla_metadata(seq, MH, 1)
    mp = -(-ML // 64)
    out.append(("flash_mla_with_kvcache", f"B {MB}, h_q {MH}, seqlen {ML}",
                flash_mla.flash_mla_with_kvcache,
                (e((MB, 1, MH, 576), BF16), e((MB * mp, 64, 1, 576), BF16),
                 np.arange(MB * mp, dtype=np.int32).reshape(MB, mp), seq, 512, meta, splits), {},
                CHIPS))
    TK = 100 if small else 2048
    cache_rows = MB * mp * 64
    ind = (np.arange(MB * TK, dtype=np.int64) % cache_rows).astype(np.int32).reshape(MB, 1, TK)
    out.append(("flash_mla_with_kvcache, FP8 cache, sparse", f"B {MB}, h_q {MH}, topk {TK}",
                flash_mla.flash_mla_with_kvcache,
                (e((MB, 1, MH, 576), BF16), e((MB * mp, 64, 1, 656), np.uint8), None, None, 512,
                 None, None), {"is_fp8_kvcache": True, "indices": ind}, CHIPS))
    XK = TK // 4
    xind = (np.arange(MB * XK, dtype=np.int64) % 64).astype(np.int32).reshape(MB, 1, XK)
    out.append(("flash_mla_with_kvcache, FP8 cache, sparse + extra_k_cache",
                f"B {MB}, h_q {MH}, topk {TK} + extra {XK}", flash_mla.flash_mla_with_kvcache,
                (e((MB, 1, MH, 576), BF16), e((MB * mp, 64, 1, 656), np.uint8), None, None, 512,
                 None, None), {"is_fp8_kvcache": True, "indices": ind,
                               "extra_k_cache": e((1, 64, 1, 656), np.uint8),
                               "extra_indices_in_kvcache": xind}, CHIPS))

    R, RN, RK = (3, 3000, 300) if small else (64, 131072, 2048)
    out.append(("topk", f"{R} x {RN}, k {RK}", topk, (e((R, RN), np.float32), RK), {}, CHIPS))
    QM, QN = (70, 300) if small else (4096, 7168)
    out.append(("per_token_cast_to_fp8", f"{QM} x {QN}", dg.per_token_cast_to_fp8,
                (e((QM, QN), BF16), True), {}, CHIPS))

    ET, EH, EI, EE, EK = (40, 256, 128, 4, 2) if small else (2048, 7168, 2048, 32, 8)
    idx = (np.arange(ET * EK, dtype=np.int64) % EE).astype(np.int32).reshape(ET, EK)
    out.append(("bf16_mega_moe", f"T {ET}, H {EH}, I {EI}, {EE} experts, top-{EK}",
                dg.bf16_mega_moe,
                (e((ET, EH), BF16), idx, np.full((ET, EK), 1.0 / EK, np.float32),
                 e((EE, 2 * EI, EH), BF16), e((EE, EH, EI), BF16), e((ET, EH), BF16)), {}, CHIPS))
    return out


def _bytes(args, kwargs) -> int:
    total = 0
    for a in list(args) + list(kwargs.values()):
        if isinstance(a, tuple):
            total += _bytes(a, {})
        elif isinstance(a, np.ndarray):
            total += a.nbytes
    return total


def measure(row, chip):
    """(estimate us, roof us, bottleneck) of one row on `chip`, or None where the chip rejects
    the call."""
    from tilelang_mini.arch import get_chip
    from tilelang_mini.errors import TileLangMiniError
    _, _, f, args, kwargs, _ = row
    try:
        est = f.estimate(*args, chip=chip, **kwargs)
    except (ValueError, TileLangMiniError):
        return None
    mem = _bytes(args, kwargs) / (get_chip(chip).costs.gm_tbps * 1e12) * 1e6
    compute = sum(k.flops / (k.peak_tflops * 1e12) * 1e6 for _, k in est.kernels
                  if k.flops and k.peak_tflops)
    worst = max(est.kernels, key=lambda nk: nk[1].time_us)[1]
    return est.time_us, max(mem, compute), worst.bottleneck


def table(selected, small=False) -> str:
    lines = ["| function | shape | 910b us | 910b roof | 950 us | 950 roof | 950 bound by |",
             "|---|---|---:|---:|---:|---:|---|"]
    for row in selected:
        cells = []
        bound = ""
        for chip in CHIPS:
            got = measure(row, chip)
            if got is None:
                cells += ["(rejected)", ""]
            else:
                cells += [f"{got[0]:.1f}", f"{got[1]:.1f}"]
                bound = got[2] if chip == "ascend950" else bound
        lines.append(f"| {row[0]} | {row[1]} | " + " | ".join(cells) + f" | {bound} |")
        print(lines[-1], file=sys.stderr, flush=True)
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--match", default="", help="only rows whose function name matches")
    p.add_argument("--small", action="store_true", help="small shapes (a quick check)")
    p.add_argument("--write", action="store_true", help="replace the table in docs/kernels.md")
    args = p.parse_args(argv)
    selected = [r for r in rows(args.small) if re.search(args.match, r[0])]
    text = table(selected, args.small)
    print(text)
    if args.write:
        if args.match or args.small:
            raise SystemExit("--write takes the full table (no --match, no --small)")
        doc = DOC.read_text()
        head, rest = doc.split(BEGIN)
        _, tail = rest.split(END)
        DOC.write_text(f"{head}{BEGIN}\n{text}\n{END}{tail}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
