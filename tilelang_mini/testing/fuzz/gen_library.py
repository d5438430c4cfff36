"""The `library` family: random calls of the DeepSeek kernel library (`tilelang_mini.kernels`:
the deep_gemm API, mhc, topk) with random legal shapes, dtypes and options (awkward sizes that
are no multiple of any tile: 1, 2^k +- 1, tails), on both targets (and the simulator when the
call is small), against float64 NumPy references written here from the functions' documented
meaning (docs/kernels.md), not from the library's own reference code. One case in four is an
illegal call (gen_library_bad.py) that must be refused with a clear error.

A case's source defines `call(target, chip, sim, **inputs) -> [outputs]` (library_call.py runs
it); its reference `reference(**inputs) -> [outputs or (output, scale)]`. Integer tables (group
layouts, row counts, windows) are literals written into both."""
from __future__ import annotations

from .case import EPS, Case, Source, Tensor, tolerance

HEADER = ["import ml_dtypes", "import numpy as np", "", "from tilelang_mini.kernels import deep_gemm as dg, flash_mla as fm, mhc, topk",
          "from tilelang_mini.testing.fuzz.library_call import run_call", "", ""]
LAYOUTS = ("nt", "nn", "tn", "tt")
BF, F32, E4 = "bfloat16", "float32", "float8_e4m3fn"
CHIPS = ("ascend910b", "ascend950")


def library_case(seed, kind, tensors, call_body, ref_body, tol, feats, chip, sim=False,
                 illegal=None) -> Case:
    """The Case of one library call: `call_body` / `ref_body` are lines (relative indentation
    kept) of `call(target, chip, sim, <inputs>)` and `reference(<inputs>)`."""
    params = ", ".join(t.name for t in tensors if not t.output)
    src = Source(HEADER)
    src.add(0, f"def call(target, chip, sim, {params}):")
    src.block(1, call_body)
    ref = Source()
    if ref_body:
        ref.add(0, f"def reference({params}):")
        ref.block(1, ref_body)
    case = Case("library", str(seed), src.text(), tensors, ref.text() if ref_body else "", tol,
                sorted(set(feats) | {"library", f"lib_{kind}", f"chip_{chip}"}))
    case.library = {"kind": kind, "chip": chip, "sim": bool(sim), "illegal": illegal}
    return case


def _nan_output(shape, dtype):
    """An output array full of NaN (an element the call does not write shows)."""
    cast = "" if dtype == F32 else ".astype(ml_dtypes.bfloat16)"
    return f"np.full({tuple(shape)!r}, np.nan, np.float32){cast}"


def _run(fn, args, kw="", lhs=None):
    """The line calling `fn(*args, **kw)` through run_call."""
    call = f"run_call({fn}, ({args},), dict({kw}), target, chip, sim)"
    return f"{lhs} = {call}" if lhs else call


# ----------------------------------------------------------------------------- GEMMs


def _gemm_shapes(layout, M, N, K):
    a_t, b_kn = layout[0] == "t", layout[1] == "n"
    return ([K, M] if a_t else [M, K]), ([K, N] if b_kn else [N, K]), a_t, b_kn


def lib_bf16_gemm(d):
    layout = d.choice(LAYOUTS)
    M, N, K = d.dim(1, 200), d.dim(1, 200), d.dim(1, 320)
    out = d.choice([BF, F32])
    cmode = d.choice(["none", "separate"] + (["inplace"] if out == F32 else []))
    a_shape, b_shape, a_t, b_kn = _gemm_shapes(layout, M, N, K)
    tensors = [Tensor("A", a_shape, BF), Tensor("B", b_shape, BF)]
    if cmode != "none":
        tensors.append(Tensor("C", [M, N], F32, -2.0, 2.0))
    tensors.append(Tensor("D", [M, N], out, output=True))
    body = [f"d = {_nan_output([M, N], out) if cmode != 'inplace' else 'C.copy()'}",
            _run(f"dg.bf16_gemm_{layout}", "A, B, d",
                 {"none": "", "separate": "c=C", "inplace": "c=d"}[cmode]),
            "return [d]"]
    ref = [f"a = A{'.T' if a_t else ''}", f"b = B{'' if b_kn else '.T'}",
           "want, scale = a @ b, np.abs(a) @ np.abs(b)"]
    if cmode != "none":
        ref.append("want, scale = want + C, scale + np.abs(C)")
    ref.append("return [(want, scale)]")
    tol = {"D": tolerance(out, EPS[F32], K)}
    sim = M * N <= 64 * 128 and K <= 128
    return "bf16_gemm", tensors, body, ref, tol, {f"layout_{layout}", f"c_{cmode}", f"out_{out}"}, sim


def _dequant_lines(name, var, rows_first, K, blockwise):
    """Reference lines: `var` = the logical [MN, K] values of operand `name` times its scales
    (per row and 128-K block, or per (128, 128) block)."""
    lines = [f"{var} = {name}{'.T' if rows_first else ''}.copy()",
             f"s = np.repeat(sf{name}, 128, axis=1)[:, :{K}]"]
    if blockwise:
        lines.append(f"s = np.repeat(s, 128, axis=0)[:{var}.shape[0]]")
    lines.append(f"{var} = {var} * s")
    return lines


def lib_fp8_gemm(d):
    layout = d.choice(LAYOUTS)
    M, N, K = d.dim(1, 200), d.dim(1, 200), d.dim(1, 400)
    out = d.choice([BF, F32])
    separate_c = d.boolean(0.3)
    blockwise = d.boolean(0.5)
    a_shape, b_shape, a_t, b_kn = _gemm_shapes(layout, M, N, K)
    KB = -(-K // 128)
    feats = {f"layout_{layout}", f"out_{out}", "sfb_block" if blockwise else "sfb_row"}
    tensors = [Tensor("A", a_shape, E4, -3.0, 3.0), Tensor("sfA", [M, KB], F32, 0.05, 2.0),
               Tensor("B", b_shape, E4, -3.0, 3.0),
               Tensor("sfB", [-(-N // 128) if blockwise else N, KB], F32, 0.05, 2.0)]
    if separate_c:
        tensors.append(Tensor("C", [M, N], F32, -2.0, 2.0))
    tensors.append(Tensor("D", [M, N], out, output=True))
    packed = d.boolean(0.3)  # UE8M0 pairs for the 950's scaled MMAD (power-of-two scales)
    pow2 = "(2.0 ** np.round(np.log2(np.asarray({0}, np.float64)))).astype(np.float32)"
    body = [f"sfA = {pow2.format('sfA')}", f"sfB = {pow2.format('sfB')}"] if packed else []
    forms = []
    if packed:
        feats |= {"packed_ue8m0", "needs_950"}
        body += [_run("dg.transform_sf_into_required_layout", f"sfA, {M}, {K}, (1, 128, 128)",
                      "is_sfa=True", lhs="psa"),
                 _run("dg.transform_sf_into_required_layout",
                      f"sfB, {N}, {K}, {(1, 128, 128) if blockwise else (1, 1, 128)}", lhs="psb")]
        forms = ["psa", "psb"]
    # an MN-major operand's scales may come transposed (DeepGEMM's aliases pass sf.T): as the
    # `.T` view of the per-row array, or as a C-contiguous [KB, MN] array when not square
    for name, mn_major, rows in (("sfA", a_t, M), ("sfB", b_kn, tensors[3].shape[0])):
        if packed:
            break
        form = d.choice(["row", "view_T"] + (["contig_T"] if rows != KB else [])) if mn_major else "row"
        forms.append({"row": name, "view_T": f"{name}.T",
                      "contig_T": f"np.ascontiguousarray({name}.T)"}[form])
        feats.add(f"{name}_{form}")
    body += [f"d = {_nan_output([M, N], out)}",
            _run(f"dg.fp8_gemm_{layout}", f"(A, {forms[0]}), (B, {forms[1]}), d",
                 "c=C" if separate_c else ""),
            "return [d]"]
    ref = ([f"sfA = {pow2.format('sfA')}", f"sfB = {pow2.format('sfB')}"] if packed else []) \
        + (_dequant_lines("A", "a", a_t, K, False) + _dequant_lines("B", "b", b_kn, K, blockwise)
           + ["want, scale = a @ b.T, np.abs(a) @ np.abs(b.T)"])
    if separate_c:
        ref.append("want, scale = want + C, scale + np.abs(C)")
    ref.append("return [(want, scale)]")
    tol = {"D": tolerance(out, EPS[F32], K, slack=16.0)}
    return "fp8_gemm", tensors, body, ref, tol, feats, M * N <= 64 * 128 and K <= 128


def lib_k_grouped(d):
    G, M, N = d.int(1, 3), d.dim(1, 150), d.dim(1, 150)
    ks = [d.choice([0, 128, 256]) for _ in range(G)]
    if not any(ks) and d.boolean(0.7):
        ks[0] = 128
    SK = sum(ks)
    cmode = d.choice(["none", "inplace", "separate"])
    tensors = [Tensor("A", [SK, M], BF), Tensor("Bk", [SK, N], BF)]
    if cmode != "none":
        tensors.append(Tensor("C", [G, M, N], F32, -2.0, 2.0))
    tensors.append(Tensor("D", [G, M, N], F32, output=True))
    body = [f"d = {'C.copy()' if cmode == 'inplace' else _nan_output([G, M, N], F32)}",
            _run("dg.k_grouped_bf16_gemm_tn_contiguous", f"A, Bk, d, {ks!r}",
                 {"none": "", "inplace": "c=d", "separate": "c=C"}[cmode]), "return [d]"]
    ref = [f"want, scale = np.zeros(({G}, {M}, {N})), np.zeros(({G}, {M}, {N}))", "o = 0",
           f"for g, k in enumerate({ks!r}):",
           "    want[g], scale[g] = A[o:o + k].T @ Bk[o:o + k], np.abs(A[o:o + k].T) @ np.abs(Bk[o:o + k])",
           "    o += k"]
    if cmode != "none":
        ref.append("want, scale = want + C, scale + np.abs(C)")
    ref.append("return [(want, scale)]")
    tol = {"D": tolerance(F32, EPS[F32], max(ks + [1]))}
    return "k_grouped", tensors, body, ref, tol, {f"c_{cmode}"}, M * N <= 64 * 64 and SK <= 256


def _layout_lines(sizes, M):
    return [f"layout = np.full({M}, -1, np.int32)", "row = 0",
            f"for g, s in enumerate({sizes!r}):",
            "    layout[row:row + s] = g", "    row += -(-s // 128) * 128"]


def lib_m_grouped(d):
    G = d.int(1, 4)
    N, K = d.dim(1, 160), d.dim(1, 200)
    out = d.choice([BF, F32])
    grouping = d.choice(["nt_contiguous", "nn_contiguous", "nt_masked"])
    feats = {f"grouped_{grouping}", f"out_{out}"}
    b_shape = [G, K, N] if grouping == "nn_contiguous" else [G, N, K]
    if grouping != "nt_masked":
        sizes = [d.choice([0, 1, d.dim(1, 200)]) for _ in range(G)]
        if not any(sizes):
            sizes[-1] = d.dim(1, 130)
        M = sum(-(-s // 128) * 128 for s in sizes)
        tensors = [Tensor("A", [M, K], BF), Tensor("Bw", b_shape, BF),
                   Tensor("D0", [M, N], out, -4.0, 4.0), Tensor("D", [M, N], out, output=True)]
        body = _layout_lines(sizes, M) + [
            "d = D0.copy()", _run(f"dg.m_grouped_bf16_gemm_{grouping}", "A, Bw, d, layout"),
            "return [d]"]
        ref = _layout_lines(sizes, M) + [
            "want, scale = D0.copy(), np.zeros(D0.shape)",
            f"w = Bw{'' if grouping == 'nn_contiguous' else '.transpose(0, 2, 1)'}",
            f"for i in range({M}):",
            "    if layout[i] >= 0:",
            "        want[i] = A[i] @ w[layout[i]]", "        scale[i] = np.abs(A[i]) @ np.abs(w[layout[i]])",
            "return [(want, scale)]"]
        sim = M <= 128 and K <= 128 and N <= 128
    else:
        maxM = d.dim(1, 150)
        masked = [d.choice([0, maxM, d.int(0, maxM)]) for _ in range(G)]
        expected = d.choice(["None", str(d.int(1, maxM))])
        tensors = [Tensor("A", [G, maxM, K], BF), Tensor("Bw", b_shape, BF),
                   Tensor("D0", [G, maxM, N], out, -4.0, 4.0),
                   Tensor("D", [G, maxM, N], out, output=True)]
        body = [f"masked = np.array({masked!r}, np.int32)", "d = D0.copy()",
                _run("dg.m_grouped_bf16_gemm_nt_masked", "A, Bw, d, masked",
                     f"expected_m={expected}"), "return [d]"]
        ref = ["want, scale = D0.copy(), np.zeros(D0.shape)",
               f"for g, m in enumerate({masked!r}):",
               "    want[g, :m] = A[g, :m] @ Bw[g].T",
               "    scale[g, :m] = np.abs(A[g, :m]) @ np.abs(Bw[g].T)", "return [(want, scale)]"]
        sim = G * maxM <= 128 and K <= 128 and N <= 128
    tol = {"D": tolerance(out, EPS[F32], K)}
    return "m_grouped", tensors, body, ref, tol, feats, sim


def lib_hc_prenorm(d):
    M, N, K = d.dim(1, 100), d.choice([24, d.dim(1, 40)]), d.dim(1, 1500)
    mode = d.choice(["single", "splits", "atomic"])
    S = d.int(1, 5)
    tensors = [Tensor("A", [M, K], BF), Tensor("Bw", [N, K], F32),
               Tensor("D", [M, N], F32, output=True), Tensor("SQ", [M], F32, output=True)]
    if mode == "splits":
        body = [f"d = np.full(({S}, {M}, {N}), np.nan, np.float32)",
                f"s = np.full(({S}, {M}), np.nan, np.float32)",
                _run("dg.tf32_hc_prenorm_gemm", "A, Bw, d, s", f"num_splits={S}"),
                "return [d.astype(np.float64).sum(0), s.astype(np.float64).sum(0)]"]
    else:
        kw = "" if mode == "single" else f"num_splits={S}, atomic_reduce=True"
        body = [f"d = np.full(({M}, {N}), np.nan, np.float32)",
                f"s = np.full(({M},), np.nan, np.float32)",
                _run("dg.tf32_hc_prenorm_gemm", "A, Bw, d, s", kw), "return [d, s]"]
    ref = ["return [(A @ Bw.T, np.abs(A) @ np.abs(Bw.T)), (A ** 2).sum(1)]"]
    tol = {"D": tolerance(F32, EPS[F32], K, slack=16.0), "SQ": tolerance(F32, EPS[F32], K, 16.0)}
    return "hc_prenorm", tensors, body, ref, tol, {f"hc_{mode}"}, M <= 64 and K <= 256


# ----------------------------------------------------------------------------- vector kernels


def lib_topk(d):
    R, N = d.dim(1, 12), d.dim(1, 2500)
    k = d.choice([1, N, d.int(1, min(N, 300)), d.int(1, N)])
    dt = d.choice([F32, BF])
    ties = d.boolean(0.5)
    neg_inf = d.choice([0, 0, 2, 5])   # every p-th column -inf
    tensors = [Tensor("X", [R, N], dt, -3.0, 3.0), Tensor("V", [R, k], dt, output=True),
               Tensor("I", [R, k], "int32", output=True)]
    prep = ["x = X.astype(np.float64)"] + (["x = np.round(x * 2)"] if ties else []) \
        + ([f"x[:, ::{neg_inf}] = -np.inf"] if neg_inf else [])
    body = prep + ["x = x.astype(X.dtype)", _run("topk", f"x, {k}", lhs="v, i"), "return [v, i]"]
    ref = prep + [f"cols = np.broadcast_to(np.arange({N}), x.shape)",
                  f"order = np.lexsort((cols, -x), axis=-1)[:, :{k}]",
                  "return [np.take_along_axis(x, order, 1), order]"]
    feats = {f"in_{dt}"} | ({"ties"} if ties else set()) | ({"neg_inf"} if neg_inf else set())
    return "topk", tensors, body, ref, {"V": (0.0, 0.0), "I": (0.0, 0.0)}, feats, R * N <= 4096


def lib_mhc_post(d):
    Tn, n, C = d.dim(1, 40), d.choice([1, 2, 3, 4]), d.dim(1, 600)
    tensors = [Tensor("X", [Tn, C], BF, -2.0, 2.0), Tensor("Res", [Tn, n, C], BF, -2.0, 2.0),
               Tensor("Post", [Tn, n], F32, 0.0, 2.0), Tensor("Comb", [Tn, n, n], F32, 0.0, 1.0),
               Tensor("Y", [Tn, n, C], BF, output=True)]
    body = [_run("mhc.mhc_post", "X, Res, Post, Comb", lhs="y"), "return [y]"]
    ref = ["want = Post[:, :, None] * X[:, None, :] + np.einsum('tjk,tjc->tkc', Comb, Res)",
           "scale = np.abs(Post[:, :, None] * X[:, None, :]) + np.einsum('tjk,tjc->tkc', "
           "np.abs(Comb), np.abs(Res))", "return [(want, scale)]"]
    return "mhc_post", tensors, body, ref, {"Y": tolerance(BF, EPS[F32], n + 1)}, set(), Tn * C <= 2048


def lib_sinkhorn(d):
    Tn, n, rep = d.dim(1, 40), d.int(1, 8), d.int(1, 20)
    eps = d.choice([1e-6, 1e-3, 0.05])
    tensors = [Tensor("X", [Tn, n, n], F32, -3.0, 3.0), Tensor("Y", [Tn, n, n], F32, output=True)]
    body = [_run("mhc.sinkhorn", "X", f"repeat={rep}, eps={eps}", lhs="y"), "return [y]"]
    ref = ["e = np.exp(X - X.max(axis=2, keepdims=True))",
           f"x = e / e.sum(axis=2, keepdims=True) + {eps}",
           f"x = x / (x.sum(axis=1, keepdims=True) + {eps})",
           f"for _ in range({rep - 1}):",
           f"    x = x / (x.sum(axis=2, keepdims=True) + {eps})",
           f"    x = x / (x.sum(axis=1, keepdims=True) + {eps})", "return [x]"]
    tol = {"Y": tolerance(F32, EPS[F32], 4 * n * rep, slack=16.0)}
    return "sinkhorn", tensors, body, ref, tol, set(), Tn * n * n <= 1024


def lib_einsum(d):
    expr = d.choice(["bhr,hdr->bhd", "bhd,hdr->bhr", "bmk,bnk->mn"])
    if expr == "bmk,bnk->mn":
        S, M, N, K = d.int(1, 3), d.dim(1, 160), d.dim(1, 160), d.dim(1, 200)
        out = d.choice([BF, F32])
        tensors = [Tensor("A", [S, M, K], BF), Tensor("Bw", [S, N, K], BF)]
        if out == F32:
            tensors.append(Tensor("D0", [M, N], F32, -2.0, 2.0))
        tensors.append(Tensor("D", [M, N], out, output=True))
        body = (["d = D0.copy()", _run("dg.einsum", f"'{expr}', A, Bw, d", "c=d")] if out == F32
                else [f"d = {_nan_output([M, N], BF)}", _run("dg.einsum", f"'{expr}', A, Bw, d")])
        ref = ["want = np.einsum('bmk,bnk->mn', A, Bw)",
               "scale = np.einsum('bmk,bnk->mn', np.abs(A), np.abs(Bw))"]
        if out == F32:
            ref.append("want, scale = want + D0, scale + np.abs(D0)")
        terms, sim = S * K, S * M * N <= 128 * 64 and K <= 128
    else:
        Bn, H, Kd, Nd = d.dim(1, 40), d.int(1, 6), d.dim(1, 200), d.dim(1, 160)
        k_major = expr == "bhr,hdr->bhd"
        out = BF
        tensors = [Tensor("A", [Bn, H, Kd], BF), Tensor("Bw", [H, Nd, Kd] if k_major else [H, Kd, Nd], BF),
                   Tensor("D", [Bn, H, Nd], BF, output=True)]
        body = [f"d = {_nan_output([Bn, H, Nd], BF)}", _run("dg.einsum", f"'{expr}', A, Bw, d")]
        spec = "bhk,hnk->bhn" if k_major else "bhk,hkn->bhn"
        ref = [f"want = np.einsum('{spec}', A, Bw)",
               f"scale = np.einsum('{spec}', np.abs(A), np.abs(Bw))"]
        terms, sim = Kd, Bn * H * Nd <= 4096 and Kd <= 128
    body.append("return [d]")
    ref.append("return [(want, scale)]")
    return "einsum", tensors, body, ref, {"D": tolerance(out, EPS[F32], terms)}, {f"einsum_{expr}"}, sim


def lib_fp8_einsum(d):
    expr = d.choice(["bhr,hdr->bhd", "bhd,hdr->bhr"])
    Bn, H, D, R = d.dim(1, 40), d.int(1, 4), d.dim(1, 200), d.dim(1, 300)
    out = d.choice([BF, F32])
    add_c = out == F32 and d.boolean(0.4)
    k_major = expr == "bhr,hdr->bhd"   # A [B, H, K] with K = R (or D), B [H, D, R] both ways
    K, Nn = (R, D) if k_major else (D, R)
    cd = lambda n: -(-n // 128)  # noqa: E731
    tensors = [Tensor("A", [Bn, H, K], E4, -3.0, 3.0), Tensor("sfA", [Bn, H, cd(K)], F32, 0.05, 2.0),
               Tensor("Bw", [H, D, R], E4, -3.0, 3.0),
               Tensor("sfB", [H, cd(D), cd(R)], F32, 0.05, 2.0)]
    if add_c:
        tensors.append(Tensor("C", [Bn, H, Nn], F32, -2.0, 2.0))
    tensors.append(Tensor("D", [Bn, H, Nn], out, output=True))
    body = [f"d = {_nan_output([Bn, H, Nn], out)}",
            _run("dg.fp8_einsum", f"'{expr}', (A, sfA), (Bw, sfB), d", "c=C" if add_c else ""),
            "return [d]"]
    ref = [f"a = A * np.repeat(sfA, 128, axis=2)[:, :, :{K}]",
           f"s = np.repeat(np.repeat(sfB, 128, axis=1)[:, :{D}], 128, axis=2)[:, :, :{R}]",
           "b = Bw * s",
           f"spec = '{'bhr,hdr->bhd' if k_major else 'bhd,hdr->bhr'}'",
           "want, scale = np.einsum(spec, a, b), np.einsum(spec, np.abs(a), np.abs(b))"]
    if add_c:
        ref.append("want, scale = want + C, scale + np.abs(C)")
    ref.append("return [(want, scale)]")
    tol = {"D": tolerance(out, EPS[F32], K, slack=16.0)}
    return "fp8_einsum", tensors, body, ref, tol, {f"einsum_{expr}", f"out_{out}"}, \
        Bn * H * Nn <= 4096 and K <= 128


def lib_mqa_logits(d):
    S, H, D, SK = d.dim(1, 40), d.dim(1, 12), d.choice([32, 64, 128, d.choice([16, 48, 96])]), d.dim(1, 600)
    clean = d.boolean(0.6)
    ks = [d.int(0, SK) for _ in range(S)]
    ke = [d.choice([SK, d.int(a, SK)]) for a in ks]
    tensors = [Tensor("Q", [S, H, D], E4, -2.0, 2.0), Tensor("KV", [SK, D], E4, -2.0, 2.0),
               Tensor("SF", [SK], F32, 0.05, 1.5), Tensor("W", [S, H], F32, -1.0, 1.0),
               Tensor("L", [S, SK], F32, output=True)]
    win = [f"ks, ke = np.array({ks!r}, np.int32), np.array({ke!r}, np.int32)",
           f"inside = (np.arange({SK})[None, :] >= ks[:, None]) & (np.arange({SK})[None, :] < ke[:, None])"]
    body = win + [_run("dg.fp8_mqa_logits", "Q, (KV, SF), W, ks, ke", f"clean_logits={clean}",
                       lhs="logits")]
    body.append("return [logits]" if clean else "return [np.where(inside, logits, 0.0)]")
    ref = win + ["dots = np.einsum('shd,td->sht', Q, KV) * SF[None, None, :]",
                 "want = (np.maximum(dots, 0) * W[:, :, None]).sum(1)",
                 "scale = (np.einsum('shd,td->sht', np.abs(Q), np.abs(KV)) * SF * np.abs(W)[:, :, None]).sum(1)",
                 f"want = np.where(inside, want, {'-np.inf' if clean else '0.0'})",
                 "return [(want, scale)]"]
    tol = {"L": tolerance(F32, EPS[F32], D * H, slack=16.0)}
    return "mqa_logits", tensors, body, ref, tol, {f"clean_{clean}", f"head_dim_{D}"}, S * SK <= 2048


def lib_quant(d):
    M, N = d.dim(1, 100), d.dim(1, 700)
    gran = d.choice([128, 128, 64, 32])
    ue8m0 = d.boolean(0.5)
    dt = d.choice([F32, BF])
    mag = d.choice([1e-3, 1.0, 300.0])
    KB = -(-N // gran)
    tensors = [Tensor("X", [M, N], dt, -mag, mag), Tensor("Q", [M, N], F32, output=True),
               Tensor("SFo", [M, KB], F32, output=True)]
    body = [_run("dg.per_token_cast_to_fp8", "X", f"use_ue8m0={ue8m0}, gran_k={gran}", lhs="q, sf"),
            f"s = np.repeat(sf.astype(np.float64), {gran}, axis=1)[:, :{N}]",
            "return [q.astype(np.float64) * s, sf]"]
    ref = [f"pad = np.zeros(({M}, {KB * gran}))", f"pad[:, :{N}] = np.abs(X)",
           f"sf = np.maximum(pad.reshape({M}, {KB}, {gran}).max(axis=2), 1e-4) / 448.0"]
    if ue8m0:
        ref.append("sf = 2.0 ** np.ceil(np.log2(sf))")
    ref += [f"s = np.repeat(sf, {gran}, axis=1)[:, :{N}]",
            "return [(X, s), (sf, sf)]"]
    # q * sf is x within half an e4m3 step (2^-4 relative, 2^-10 * sf below the normal range)
    tol = {"Q": (2.0 ** -4 * 1.001 + 8 * EPS[F32], 2.0 ** -10), "SFo": (4 * EPS[F32], 0.0)}
    return "quant", tensors, body, ref, tol, {f"gran_{gran}", f"ue8m0_{ue8m0}", f"in_{dt}"}, M * N <= 4096


def lib_mhc_pre(d):
    Tn, n, C = d.dim(1, 24), d.choice([1, 2, 4]), d.dim(1, 300)
    N = n * (n + 2)
    rep, post_mult = d.int(1, 20), d.choice([2.0, 1.0, 0.5])
    splits = d.choice(["None", str(d.int(1, 4))])
    tensors = [Tensor("Res", [Tn, n, C], BF), Tensor("Fn", [N, n * C], F32, -0.2, 0.2),
               Tensor("Sc", [3], F32, 0.2, 2.0), Tensor("Base", [N], F32, -1.0, 1.0),
               Tensor("Post", [Tn, n], F32, output=True), Tensor("Comb", [Tn, n, n], F32, output=True),
               Tensor("Li", [Tn, C], BF, output=True)]
    body = [_run("mhc.mhc_pre", "Res, Fn, Sc, Base",
                 f"sinkhorn_repeat={rep}, post_mult={post_mult}, num_splits={splits}",
                 lhs="post, comb, li"), "return [post, comb, li]"]
    eps = 1e-6
    ref = [f"x = Res.reshape({Tn}, {n * C})",
           f"mix = (x @ Fn.T) / np.sqrt((x ** 2).sum(1) / {n * C} + {eps})[:, None]",
           f"mix = mix * np.repeat(Sc, [{n}, {n}, {n * n}]) + Base",
           "sig = 1.0 / (1.0 + np.exp(-mix))",
           f"pre, post = sig[:, :{n}] + {eps}, sig[:, {n}:{2 * n}] * {post_mult}",
           f"c = mix[:, {2 * n}:].reshape({Tn}, {n}, {n})",
           "e = np.exp(c - c.max(axis=2, keepdims=True))",
           f"c = e / e.sum(axis=2, keepdims=True) + {eps}",
           f"c = c / (c.sum(axis=1, keepdims=True) + {eps})",
           f"for _ in range({rep - 1}):",
           f"    c = c / (c.sum(axis=2, keepdims=True) + {eps})",
           f"    c = c / (c.sum(axis=1, keepdims=True) + {eps})",
           "li = (pre[:, :, None] * Res).sum(1)",
           "return [post, c, (li, (np.abs(pre[:, :, None]) * np.abs(Res)).sum(1))]"]
    tol = {"Post": tolerance(F32, EPS[F32], n * C, 32.0),
           "Comb": tolerance(F32, EPS[F32], n * C * rep, 32.0),
           "Li": tolerance(BF, EPS[F32], n * C, 32.0)}
    return "mhc_pre", tensors, body, ref, tol, {f"streams_{n}"}, Tn * C <= 1024


def _perm(d, n):
    items = list(range(n))
    for i in range(n - 1, 0, -1):
        j = d.int(0, i)
        items[i], items[j] = items[j], items[i]
    return items


def lib_flash_mla(d):
    B, SQ, HK = d.int(1, 3), d.int(1, 2), d.choice([1, 1, 2])
    HQ = HK * d.choice([1, 3, 16, d.dim(1, 70)])
    D = d.choice([576, 576, 64, 128, 192])
    DV = 512 if D == 576 else d.choice([D, D // 2])
    MAXB = d.int(1, 3)
    NB = B * MAXB + d.int(0, 2)
    bt = _perm(d, NB)[:B * MAXB]
    seqlens = [d.choice([0, 1, 64, MAXB * 64, d.int(0, MAXB * 64)]) for _ in range(B)]
    causal, parts = d.boolean(0.5), d.choice(["None", str(d.int(1, 6))])
    scale = d.choice([None, d.real(0.01, 0.2)])
    tensors = [Tensor("Q", [B, SQ, HQ, D], BF), Tensor("KC", [NB, 64, HK, D], BF),
               Tensor("O", [B, SQ, HQ, DV], BF, output=True),
               Tensor("LSE", [B, HQ, SQ], F32, output=True)]
    tables = [f"seqlens = np.array({seqlens!r}, np.int32)",
              f"bt = np.array({bt!r}, np.int32).reshape({B}, {MAXB})"]
    body = tables + [
        _run("fm.get_mla_metadata", f"seqlens, {SQ * HQ // HK}, {HK}", f"num_parts={parts}",
             lhs="meta, splits"),
        _run("fm.flash_mla_with_kvcache", f"Q, KC, bt, seqlens, {DV}, meta, splits",
             f"causal={causal}, softmax_scale={scale}", lhs="out, lse"),
        "return [out, lse]"]
    sm = scale if scale is not None else f"1 / np.sqrt({D})"
    ref = tables + [
        f"out, lse = np.zeros(({B}, {SQ}, {HQ}, {DV})), np.full(({B}, {HQ}, {SQ}), np.inf)",
        f"for b in range({B}):", "    n = seqlens[b]",
        f"    keys = KC[bt[b]].reshape({MAXB * 64}, {HK}, {D})[:n]",
        f"    for h in range({HQ}):",
        f"        k = keys[:, h // {HQ // HK}]",
        f"        s = (Q[b, :, h] @ k.T) * ({sm})",
        f"        for i in range({SQ}):",
        f"            row = s[i, :max(0, n - {SQ} + i + 1)] if {causal} else s[i]",
        "            if row.size == 0:", "                continue",
        "            m = row.max()", "            lse[b, h, i] = m + np.log(np.exp(row - m).sum())",
        f"            out[b, i, h] = np.exp(row - lse[b, h, i]) @ k[:row.size, :{DV}]",
        "return [out, (lse, np.maximum(np.abs(lse), 1.0))]"]
    tol = {"O": tolerance(BF, EPS[F32], 64, 32.0), "LSE": tolerance(F32, EPS[F32], D, 32.0)}
    feats = {f"causal_{causal}", f"head_dim_{D}", f"kv_heads_{HK}"}
    return "flash_mla", tensors, body, ref, tol, feats, B * SQ * HQ <= 32 and MAXB <= 2


def moe_ref_lines(idx, Tn, K, H, I, clamp, w1, w2, q):
    """Reference lines of a MegaMoE: y[t] = sum_j FC2(swiglu(FC1(x_t))) with DeepGEMM's
    epilogue roundings; `q` names a function applied to FC1's and FC2's inputs ("" none)."""
    ref = [f"idx = np.array({idx!r}).reshape({Tn}, {K})",
           f"y, scale = np.zeros(({Tn}, {H})), np.zeros(({Tn}, {H}))",
           f"for t in range({Tn}):", f"    for j in range({K}):", "        e = idx[t, j]",
           "        if e < 0:", "            continue",
           f"        h = rnd({w1}[e] @ {q}(X[t]), 'bfloat16')", f"        g, u = h[:{I}], h[{I}:]"]
    if clamp is not None:
        ref += [f"        g, u = np.minimum(g, {clamp}), np.clip(u, -{clamp}, {clamp})"]
    return ref + [f"        a = {q}(rnd(g / (1 + np.exp(-g)) * u * Wt[t, j], 'bfloat16'))",
                  f"        y[t] += rnd({w2}[e] @ a, 'bfloat16')",
                  f"        scale[t] += np.abs({w2}[e]) @ np.abs(a)", "return [(y, scale)]"]


def lib_mega_moe(d):
    Tn, H, I, E = d.dim(1, 20), d.dim(16, 200), d.dim(16, 160), d.int(1, 5)
    K = d.int(1, min(E, 3))
    idx = [[e if d.boolean(0.85) else -1 for e in _perm(d, E)[:K]] for _ in range(Tn)]
    clamp = d.choice([None, d.real(0.5, 4.0)])
    tensors = [Tensor("X", [Tn, H], BF), Tensor("Wt", [Tn, K], F32, 0.0, 1.0),
               Tensor("L1", [E, 2 * I, H], BF, -0.3, 0.3), Tensor("L2", [E, H, I], BF, -0.3, 0.3),
               Tensor("Y", [Tn, H], BF, output=True)]
    body = [f"idx = np.array({idx!r}, np.int32).reshape({Tn}, {K})",
            f"y = {_nan_output([Tn, H], BF)}",
            _run("dg.bf16_mega_moe", "X, idx, Wt, L1, L2, y", f"activation_clamp={clamp}"),
            "return [y]"]
    ref = moe_ref_lines(idx, Tn, K, H, I, clamp, "L1", "L2", "")
    # the gate/up and SwiGLU values are rounded to bfloat16 from fp32 sums: one bf16 step apart
    # from the float64 rounding at worst, which FC2 carries into y
    tol = {"Y": (4 * EPS[BF], 4 * EPS[BF])}
    return "mega_moe", tensors, body, ref, tol, {f"clamp_{clamp is not None}"}, False


LEGAL = {"bf16_gemm": (lib_bf16_gemm, 4), "fp8_gemm": (lib_fp8_gemm, 3),
         "m_grouped": (lib_m_grouped, 3), "k_grouped": (lib_k_grouped, 1), "hc_prenorm": (lib_hc_prenorm, 2),
         "topk": (lib_topk, 2), "mhc_post": (lib_mhc_post, 1), "sinkhorn": (lib_sinkhorn, 1),
         "einsum": (lib_einsum, 2), "fp8_einsum": (lib_fp8_einsum, 1), "mqa_logits": (lib_mqa_logits, 2), "quant": (lib_quant, 2),
         "mhc_pre": (lib_mhc_pre, 1), "flash_mla": (lib_flash_mla, 2), "mega_moe": (lib_mega_moe, 1)}


def gen_library(d, seed) -> Case:
    chip = d.choice(CHIPS)
    if d.boolean(0.25):
        from .gen_library_bad import gen_library_bad
        return gen_library_bad(d, seed, chip)
    from .gen_library2 import LEGAL2
    legal = {**LEGAL, **LEGAL2}
    names = list(legal)
    gen = legal[d.weighted(names, [legal[n][1] for n in names])][0]
    kind, tensors, body, ref, tol, feats, sim = gen(d)
    if "needs_950" in feats:  # (the 910b refuses packed UE8M0 scales: the illegal family's)
        chip = "ascend950"
    return library_case(seed, kind, tensors, body, ref, tol, feats, chip, sim=sim)
