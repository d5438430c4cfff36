"""More kinds of the `library` family (gen_library.py): the FP4 GEMMs (packed e2m1 operands,
fp32 gran-32 scales on the dequantising path in every layout, packed UE8M0 pairs on the 950's
MX MMAD), the per-block / per-channel FP8 casts and `fp8_mega_moe`. References are float64,
written from docs/kernels.md: an FP4 operand is drawn as e2m1 codes (int32 0..15) that the call
packs two per byte and the reference decodes from the e2m1 table."""
from __future__ import annotations

from .case import EPS, Tensor, tolerance
from .gen_library import BF, E4, F32, _nan_output, _run

E2M1 = "np.array([0, .5, 1, 1.5, 2, 3, 4, 6, -0., -.5, -1, -1.5, -2, -3, -4, -6])"
POW2 = "(2.0 ** np.round(np.log2(np.asarray({0}, np.float64)))).astype(np.float32)"


def _pack_lines(name, codes, mn_major):
    """Call lines: `name` = the bytes of int32 e2m1 codes [MN, K], packed along K ([MN, K/2],
    the even K index in the low nibble) or, MN-major, along MN ([K, MN/2])."""
    src = f"{codes}.T" if mn_major else codes
    return [f"c_ = np.asarray({src}, np.int64)",
            f"{name} = ((c_[:, 0::2] & 15) | ((c_[:, 1::2] & 15) << 4)).astype(np.uint8).view(np.int8)"]


def lib_fp4_gemm(d):
    mx = d.boolean(0.25)  # both FP4, packed UE8M0 pairs: the 950's MX MMAD, nt only
    layout = "nt" if mx else d.choice(("nt", "nn", "tn", "tt"))
    a_t, b_t = layout[0] == "t", layout[1] == "n"
    kinds = ("fp4", "fp4") if mx else d.choice([("fp4", "fp4"), ("fp4", "fp8"), ("fp8", "fp4")])
    M, N = d.dim(1, 150), d.dim(1, 150)
    if a_t and kinds[0] == "fp4":
        M += M % 2   # an MN-major FP4 operand is packed along MN
    if b_t and kinds[1] == "fp4":
        N += N % 2
    K = 128 * d.int(1, 3) if mx else 32 * d.int(1, 10)
    out = d.choice([BF, F32])
    cmode = d.choice(["none", "separate"] + (["inplace"] if out == F32 else []))
    tensors, body, ref, feats = [], [], [f"t_ = {E2M1}"], {f"layout_{layout}", f"out_{out}",
                                                           f"kinds_{kinds[0]}_{kinds[1]}"}
    forms = []
    for name, kind, mn, mn_major in (("A", kinds[0], M, a_t), ("B", kinds[1], N, b_t)):
        gran = 32 if kind == "fp4" else d.choice([128, 32])
        KB = -(-K // gran)
        if kind == "fp4":
            tensors.append(Tensor(f"c{name}", [mn, K], "int32", 0, 15))
            body += _pack_lines(f"q{name}", f"c{name}", mn_major)
            ref.append(f"v{name} = t_[c{name}]")
        else:
            tensors.append(Tensor(f"c{name}", [K, mn] if mn_major else [mn, K], E4, -3.0, 3.0))
            body.append(f"q{name} = c{name}")
            ref.append(f"v{name} = c{name}{'.T' if mn_major else ''}.astype(np.float64)")
        tensors.append(Tensor(f"sf{name}", [mn, KB], F32, 0.05, 2.0))
        if mx:
            body += [f"sf{name} = {POW2.format(f'sf{name}')}",
                     _run("dg.transform_sf_into_required_layout", f"sf{name}, {mn}, {K}, (1, 32)",
                          lhs=f"p{name}")]
            ref.append(f"sf{name} = {POW2.format(f'sf{name}')}")
            forms.append(f"p{name}")
        else:
            form = d.choice(["row", "contig_T"]) if mn_major and mn != KB else "row"
            forms.append(f"np.ascontiguousarray(sf{name}.T)" if form == "contig_T" else f"sf{name}")
            feats.add(f"sf{name}_{form}_g{gran}")
        ref.append(f"v{name} = v{name} * np.repeat(sf{name}, {gran}, axis=1)[:, :{K}]")
        if not mx:  # docs/kernels.md: the dequantising path widens each tile to bfloat16
            ref.append(f"v{name} = rnd(v{name}, 'bfloat16')")
    if mx:
        feats |= {"packed_ue8m0", "needs_950"}
    if cmode == "separate":
        tensors.append(Tensor("C", [M, N], F32, -2.0, 2.0))
    tensors.append(Tensor("D", [M, N], out, output=True))
    body += [f"d = np.full(({M}, {N}), 0.5, np.float32)" if cmode == "inplace"
             else f"d = {_nan_output([M, N], out)}",
             _run(f"dg.fp8_fp4_gemm_{layout}", f"(qA, {forms[0]}), (qB, {forms[1]}), d",
                  {"none": "", "separate": "c=C", "inplace": "c=d"}[cmode]), "return [d]"]
    ref.append("want, scale = vA @ vB.T, np.abs(vA) @ np.abs(vB.T)")
    if cmode == "separate":
        ref.append("want, scale = want + C, scale + np.abs(C)")
    elif cmode == "inplace":
        ref.append("want, scale = want + 0.5, scale + 0.5")
    ref.append("return [(want, scale)]")
    tol = {"D": tolerance(out, EPS[F32], K, slack=16.0)}
    return "fp4_gemm", tensors, body, ref, tol, feats, M * N <= 64 * 128 and K <= 128


def lib_cast2(d):
    per_channel = d.boolean(0.5)
    gran = d.choice([128, 128, 64, 32])
    M, N = (gran * d.int(1, 3), d.dim(1, 300)) if per_channel else (d.dim(1, 300), d.dim(1, 300))
    ue8m0, dt = d.boolean(0.5), d.choice([F32, BF])
    mag = d.choice([1e-3, 1.0, 300.0])
    MB, NB = (M // gran, N) if per_channel else (-(-M // gran), -(-N // gran))
    fn = "dg.per_channel_cast_to_fp8" if per_channel else "dg.per_block_cast_to_fp8"
    tensors = [Tensor("X", [M, N], dt, -mag, mag), Tensor("Q", [M, N], F32, output=True),
               Tensor("SFo", [MB, NB], F32, output=True)]
    rep = (f"s = np.repeat(sf.astype(np.float64), {gran}, axis=0)" if per_channel else
           f"s = np.repeat(np.repeat(sf.astype(np.float64), {gran}, 0), {gran}, 1)[:{M}, :{N}]")
    body = [_run(fn, "X", f"use_ue8m0={ue8m0}, gran_k={gran}", lhs="q, sf"), rep,
            "return [q.astype(np.float64) * s, sf]"]
    if per_channel:
        ref = [f"sf = np.abs(X).reshape({MB}, {gran}, {N}).max(axis=1)"]
    else:
        ref = [f"pad = np.zeros(({MB * gran}, {NB * gran}))", f"pad[:{M}, :{N}] = np.abs(X)",
               f"sf = pad.reshape({MB}, {gran}, {NB}, {gran}).max(axis=(1, 3))"]
    ref.append("sf = np.maximum(sf, 1e-4) / 448.0")
    if ue8m0:
        ref.append("sf = 2.0 ** np.ceil(np.log2(sf))")
    ref += [rep.replace("sf.astype(np.float64)", "sf"), "return [(X, s), (sf, sf)]"]
    # q * sf is x within half an e4m3 step (2^-4 relative, 2^-10 * sf below the normal range)
    tol = {"Q": (2.0 ** -4 * 1.001 + 8 * EPS[F32], 2.0 ** -10), "SFo": (4 * EPS[F32], 0.0)}
    feats = {"per_channel" if per_channel else "per_block", f"gran_{gran}", f"ue8m0_{ue8m0}", f"in_{dt}"}
    return "cast2", tensors, body, ref, tol, feats, M * N <= 4096


def _block_weights(name, E, R, C):
    """Tensors of an e4m3 weight [E, R, C] with (128, 128) block scales."""
    return [Tensor(name, [E, R, C], E4, -2.0, 2.0),
            Tensor(f"s{name}", [E, -(-R // 128), -(-C // 128)], F32, 0.01, 0.2)]


def lib_fp8_moe(d):
    from .gen_library import _perm, moe_ref_lines
    Tn, H, I, E = d.dim(1, 16), d.dim(16, 200), d.dim(16, 160), d.int(1, 4)
    K = d.int(1, min(E, 3))
    idx = [[e if d.boolean(0.85) else -1 for e in _perm(d, E)[:K]] for _ in range(Tn)]
    clamp = d.choice([None, d.real(0.5, 4.0)])
    tensors = [Tensor("X", [Tn, H], BF), Tensor("Wt", [Tn, K], F32, 0.0, 1.0),
               *_block_weights("L1", E, 2 * I, H), *_block_weights("L2", E, H, I),
               Tensor("Y", [Tn, H], BF, output=True)]
    body = [f"idx = np.array({idx!r}, np.int32).reshape({Tn}, {K})",
            f"y = {_nan_output([Tn, H], BF)}",
            _run("dg.fp8_mega_moe", "X, idx, Wt, (L1, sL1), (L2, sL2), y",
                 f"activation_clamp={clamp}"), "return [y]"]
    deq = "np.repeat(np.repeat(s{0}, 128, 1), 128, 2)[:, :{1}, :{2}] * {0}"
    ref = [f"w1, w2 = {deq.format('L1', 2 * I, H)}, {deq.format('L2', H, I)}",
           "def q8(v):",   # per-token (1, 128) e4m3 quantisation of a row, as documented
           "    n = v.size; kb = -(-n // 128); p = np.zeros(kb * 128); p[:n] = v",
           "    sf = np.maximum(np.abs(p.reshape(kb, 128)).max(1), 1e-4) / 448.0",
           "    s = np.repeat(sf, 128)[:n]",
           "    return rnd(v / s, 'float8_e4m3fn') * s",
           ] + moe_ref_lines(idx, Tn, K, H, I, clamp, "w1", "w2", "q8")
    # docs/kernels.md: an intermediate one bf16 ulp from the float64 one can pick the
    # neighbouring e4m3 value in the per-token quantisation: about 1-2.5% of the magnitude
    tol = {"Y": (4 * EPS[BF], 2.0 ** -5)}
    return "fp8_mega_moe", tensors, body, ref, tol, {f"clamp_{clamp is not None}"}, False





def lib_paged_mqa(d):
    from .gen_library import _perm
    B, NN, H, D = d.int(1, 3), d.int(1, 3), d.dim(1, 8), d.choice([32, 64, 128])
    BKV, MAXB = d.choice([16, 64, d.choice([8, 32])]), d.int(1, 4)
    NB = B * MAXB + d.int(0, 2)
    bt = _perm(d, NB)[:B * MAXB]
    lens = [d.choice([0, 1, NN, MAXB * BKV, d.int(0, MAXB * BKV)]) for _ in range(B)]
    L = d.choice([MAXB * BKV, d.int(1, MAXB * BKV + 10)])
    clean, sms = d.boolean(0.6), d.int(1, 24)
    tensors = [Tensor("Q", [B, NN, H, D], E4, -2.0, 2.0), Tensor("KVv", [NB, BKV, D], E4, -2.0, 2.0),
               Tensor("KVs", [NB, BKV], F32, 0.05, 1.5), Tensor("W", [B * NN, H], F32, -1.0, 1.0),
               Tensor("L", [B * NN, L], F32, output=True)]
    tables = [f"lens = np.array({lens!r}, np.int32)",
              f"bt = np.array({bt!r}, np.int32).reshape({B}, {MAXB})",
              f"pos = np.repeat(lens, {NN}) - {NN} + np.tile(np.arange({NN}), {B})",
              f"inside = np.arange({L})[None, :] <= pos[:, None]"]
    # DeepGEMM's byte layout: per block its BKV e4m3 rows, then their BKV fp32 scales
    body = tables + [f"kv = np.empty(({NB}, {BKV * (D + 4)}), np.uint8)",
                     f"kv[:, :{BKV * D}] = KVv.reshape({NB}, -1).view(np.uint8)",
                     f"kv[:, {BKV * D}:] = np.ascontiguousarray(KVs).view(np.uint8)",
                     f"kv = kv.reshape({NB}, {BKV}, 1, {D + 4})",
                     _run("dg.get_paged_mqa_logits_metadata", f"lens, {BKV}, {sms}", lhs="meta"),
                     _run("dg.fp8_paged_mqa_logits", f"Q, kv, W, lens, bt, meta, {L}",
                          f"clean_logits={clean}", lhs="logits"),
                     "return [logits]" if clean else "return [np.where(inside, logits, 0.0)]"]
    ref = tables + [f"want, scale = np.zeros(({B * NN}, {L})), np.zeros(({B * NN}, {L}))",
                    f"for b in range({B}):",
                    f"    keys = (KVv * KVs[:, :, None])[bt[b]].reshape({MAXB * BKV}, {D})[:{L}]",
                    f"    for i in range({NN}):",
                    f"        r = b * {NN} + i",
                    "        dots = Q[b, i] @ keys.T",
                    "        want[r, :keys.shape[0]] = (np.maximum(dots, 0) * W[r][:, None]).sum(0)",
                    "        scale[r, :keys.shape[0]] = ((np.abs(Q[b, i]) @ np.abs(keys.T)) * np.abs(W[r])[:, None]).sum(0)",
                    f"want = np.where(inside, want, {'-np.inf' if clean else '0.0'})",
                    "return [(want, scale)]"]
    tol = {"L": tolerance(F32, EPS[F32], D * H, slack=16.0)}
    return "paged_mqa", tensors, body, ref, tol, {f"clean_{clean}", f"block_kv_{BKV}"}, \
        B * NN * L <= 2048



def lib_sparse_mla(d):
    """flash_mla_with_kvcache's sparse decode on FlashMLA's V3.2 FP8 cache (656 bytes a token:
    512 e4m3, 4 fp32 scales, 64 bfloat16 RoPE values), indices with -1 and past-the-cache
    entries, topk_length, attn_sink; the decoded NoPE values go to the cube as bfloat16."""
    B, SQ, HQ = d.int(1, 2), d.int(1, 2), d.choice([1, 16, d.dim(1, 70)])
    PBS, NBK = d.choice([64, 64, 16, 32]), d.int(1, 4)
    NT, topk = PBS * NBK, d.choice([1, d.dim(1, 100), d.dim(1, 700)])
    tl = d.choice(["None", repr([d.int(0, topk) for _ in range(B)])])
    sink = d.boolean(0.4)
    scale = d.choice([None, d.real(0.01, 0.2)])
    tensors = [Tensor("Q", [B, SQ, HQ, 576], BF), Tensor("KN", [NT, 4, 128], E4, -2.0, 2.0),
               Tensor("KS", [NT, 4], F32, 0.05, 1.5), Tensor("KR", [NT, 64], BF),
               Tensor("Idx", [B, SQ, topk], "int32", -1, NT + 3)]
    if sink:
        tensors.append(Tensor("Sink", [HQ], F32, -2.0, 2.0))
    tensors += [Tensor("O", [B, SQ, HQ, 512], BF, output=True),
                Tensor("LSE", [B, HQ, SQ], F32, output=True)]
    body = [f"raw = np.zeros(({NT}, 656), np.uint8)",
            f"raw[:, :512] = KN.reshape({NT}, 512).view(np.uint8)",
            f"raw[:, 512:528] = np.ascontiguousarray(KS).view(np.uint8).reshape({NT}, 16)",
            f"raw[:, 528:] = np.ascontiguousarray(KR).view(np.uint8).reshape({NT}, 128)",
            _run("fm.flash_mla_with_kvcache",
                 f"Q, raw.reshape({NBK}, {PBS}, 1, 656), None, None, 512, fm.get_mla_metadata()[0], None",
                 f"is_fp8_kvcache=True, indices=Idx, softmax_scale={scale}, "
                 f"topk_length={'None' if tl == 'None' else f'np.array({tl}, np.int32)'}, "
                 f"attn_sink={'Sink' if sink else 'None'}", lhs="out, lse"),
            "return [out, lse]"]
    sm = scale if scale is not None else "1 / np.sqrt(576)"
    ref = [f"nope = rnd((KN * KS[:, :, None]).reshape({NT}, 512), 'bfloat16')",
           "keys = np.concatenate([nope, KR], axis=1)",
           f"out, oscale = np.zeros(({B}, {SQ}, {HQ}, 512)), np.zeros(({B}, {SQ}, {HQ}, 512))",
           f"lse = np.full(({B}, {HQ}, {SQ}), np.inf)",
           f"tl = {tl}",
           f"for b in range({B}):", f"    for i in range({SQ}):",
           "        ids = Idx[b, i]",
           f"        keep = (ids >= 0) & (ids < {NT})",
           "        if tl is not None:", f"            keep &= np.arange({topk}) < tl[b]",
           "        if not keep.any():", "            continue",
           "        k = keys[ids[keep]]",
           f"        s = (Q[b, i] @ k.T) * ({sm})",
           "        m = s.max(1, keepdims=True)",
           "        l = np.log(np.exp(s - m).sum(1)) + m[:, 0]",
           "        p = np.exp(s - l[:, None])",
           "        o, so = p @ k[:, :512], p @ np.abs(k[:, :512])"]
    if sink:
        ref += ["        f = 1 / (1 + np.exp(Sink - l))", "        o, so = o * f[:, None], so * f[:, None]"]
    ref += ["        out[b, i], oscale[b, i], lse[b, :, i] = o, so, l",
            "return [(out, oscale), (lse, np.maximum(np.abs(lse), 1.0))]"]
    tol = {"O": tolerance(BF, EPS[F32], 64, 32.0), "LSE": tolerance(F32, EPS[F32], 576, 32.0)}
    feats = {f"page_{PBS}", f"sink_{sink}", f"topk_length_{tl != 'None'}"}
    return "sparse_mla", tensors, body, ref, tol, feats, B * SQ * HQ <= 32 and topk <= 128


LEGAL2 = {"fp4_gemm": (lib_fp4_gemm, 3), "cast2": (lib_cast2, 2), "fp8_mega_moe": (lib_fp8_moe, 1),
          "paged_mqa": (lib_paged_mqa, 2), "sparse_mla": (lib_sparse_mla, 2)}
