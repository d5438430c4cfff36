"""tilelang-ascend `T.tile` operations no other family draws, in developer mode
(`T.Kernel(G, is_npu=True) as (cid, vid)`, each vector core one row `cid * 2 + vid` in UB):
`T.tile.topk` of the first n elements then `T.tile.gather_mask` ("P0101" values, "P1010"
indices) and a `CAST_ROUND` of the indices; `T.tile.sort` of the whole row and of its negation and
`T.tile.merge_sort` of both; `T.tile.createvecindex` / `T.tile.arith_progression` byte offsets
(rotated in a map, or descending) and `T.tile.gather`; packed uint8 masks from
`T.tile.compare` against two bounds combined by `T.tile.bitwise_and/or` and read by
`T.tile.select` with a scalar; `T.tile.silu` and `T.tile.mul_add_dst`.

The reference sorts with NumPy's stable argsort (largest first, ties to the smaller index; the
rows' values are distinct), packs masks with `np.packbits(bitorder="little")`."""
from __future__ import annotations

from .case import EPS, Source, Tensor, build_case, tolerance
from .case import KERNEL_HEADER


def gen_tileops(d, seed):
    G = d.int(1, 3)
    rows = 2 * G
    N = d.choice([8, 16, 24, 32, 64])
    n = d.int(1, N)
    K = d.int(1, min(8, n))
    kinds = ["topk", "sort", "gather", "mask", "silu"]
    picked = [k for k in kinds if d.boolean(0.4)] or [d.choice(kinds)]
    feats = {"tileops"} | {f"tileops_{k}" for k in picked}
    tensors = [Tensor("X", [rows, N], "float32", -2.0, 2.0)]
    k, r, outs = [], [], []
    allocs = [("x", (N,), "float32")]
    if "topk" in picked:
        tensors += [Tensor("V", [rows, K], "float32", output=True),
                    Tensor("I", [rows, K], "int32", output=True)]
        allocs += [("pairs", (2 * K,), "float32"), ("v", (K,), "float32"),
                   ("fi", (K,), "float32"), ("ii", (K,), "int32")]
        k += [f"T.tile.topk(pairs, x, {K}, {n})", 'T.tile.gather_mask(v, pairs, "P0101")',
              'T.tile.gather_mask(fi, pairs, "P1010")', f'T.tile.cast(ii, fi, "CAST_ROUND", {K})',
              "T.copy(v, V[row, 0])", "T.copy(ii, I[row, 0])"]
        r += [f"o = np.argsort(-X[:, :{n}], axis=1, kind='stable')[:, :{K}]",
              "V = np.take_along_axis(X, o, 1)", "I = o.astype(np.float64)"]
        outs += ["V", "I"]
    if "sort" in picked:
        tensors += [Tensor("S", [rows, 2 * N], "float32", output=True),
                    Tensor("Mg", [rows, 4 * N], "float32", output=True)]
        allocs += [("xn", (N,), "float32"), ("sa", (2 * N,), "float32"),
                   ("sb", (2 * N,), "float32"), ("mg", (4 * N,), "float32")]
        k += [f"T.tile.sort(sa, x, {N})", "T.tile.muls(xn, x, -1.0)", f"T.tile.sort(sb, xn, {N})",
              "T.tile.merge_sort(mg, sa, sb)", "T.copy(sa, S[row, 0])", "T.copy(mg, Mg[row, 0])"]
        r += ["S = np.zeros((X.shape[0], %d))" % (2 * N), "Mg = np.zeros((X.shape[0], %d))" % (4 * N),
              "for q in range(X.shape[0]):",
              "    a = X[q]",
              "    oa = np.argsort(-a, kind='stable')",
              "    S[q] = np.stack([a[oa], oa], 1).reshape(-1)",
              "    ob = np.argsort(a, kind='stable')",
              "    pa = [(a[i], float(i), 0) for i in oa] + [(-a[i], float(i), 1) for i in ob]",
              "    pa.sort(key=lambda p: (-p[0], p[2]))",
              "    Mg[q] = np.array([x for p in pa for x in p[:2]])"]
        outs += ["S", "Mg"]
    if "gather" in picked:
        tensors.append(Tensor("Gt", [rows, N], "float32", output=True))
        allocs += [("off", (N,), "int32"), ("g", (N,), "float32")]
        if d.boolean(0.5):
            p, s = d.choice([1, 3, 5, 7]), d.int(0, N - 1)
            k += ["T.tile.createvecindex(off, 0)", f"for i in T.Parallel({N}):",
                  f"    off[i] = ((off[i] * {p} + {s}) % {N}) * 4"]
            r += [f"Gt = X[:, (np.arange({N}) * {p} + {s}) % {N}]"]
        else:
            k += [f"T.tile.arith_progression(off, {(N - 1) * 4}, -4)"]
            r += ["Gt = X[:, ::-1]"]
        k += ["T.tile.gather(g, x, off, 0)", "T.copy(g, Gt[row, 0])"]
        outs.append("Gt")
    if "mask" in picked:
        lo, hi = d.choice([-1.0, -0.5, 0.0]), d.choice([0.25, 0.5, 1.5])
        mlo, mhi = d.choice(["GE", "GT"]), d.choice(["LT", "LE"])
        comb = d.choice(["and", "or"])
        fill = d.choice([0.0, -3.0])
        tensors += [Tensor("Y", [rows, N], "float32", output=True),
                    Tensor("Mo", [rows, N // 8], "uint8", output=True)]
        allocs += [("m1", (N // 8,), "uint8"), ("m2", (N // 8,), "uint8"), ("y", (N,), "float32")]
        k += [f'T.tile.compare(m1, x, {lo}, "{mlo}")', f'T.tile.compare(m2, x, {hi}, "{mhi}")',
              f"T.tile.bitwise_{comb}(m1, m1, m2)",
              f'T.tile.select(y, m1, x, {fill}, "VSEL_TENSOR_SCALAR_MODE")',
              "T.copy(y, Y[row, 0])", "T.copy(m1, Mo[row, 0])"]
        ops = {"GE": ">=", "GT": ">", "LT": "<", "LE": "<="}
        r += [f"keep = (X {ops[mlo]} {lo}) {'&' if comb == 'and' else '|'} (X {ops[mhi]} {hi})",
              f"Y = np.where(keep, X, {fill})",
              "Mo = np.packbits(keep, axis=1, bitorder='little').astype(np.float64)"]
        outs += ["Y", "Mo"]
    if "silu" in picked:
        tensors.append(Tensor("W", [rows, N], "float32", output=True))
        allocs += [("w", (N,), "float32")]
        k += ["T.tile.silu(w, x)", "T.tile.mul_add_dst(w, x, x)", "T.copy(w, W[row, 0])"]
        r += ["W = X / (1.0 + np.exp(-X)) + X * X"]
        outs.append("W")

    src = Source(KERNEL_HEADER)
    src.add(0, "def main(" + ", ".join(f'{t.name}: T.Tensor({tuple(t.shape)!r}, "{t.dtype}")'
                                         for t in tensors) + "):")
    src.add(1, f"with T.Kernel({G}, is_npu=True) as (cid, vid):")
    src.add(2, "row = cid * 2 + vid")
    for name, shape, dt in allocs:
        src.add(2, f'{name} = T.alloc_ub({shape!r}, "{dt}")')
    src.add(2, "T.copy(X[row, 0], x)")
    src.block(2, k)
    ref = Source()
    ref.add(0, "def reference(X):")
    ref.block(1, r)
    ref.add(1, f"return [{', '.join(outs)}]")
    t = tolerance("float32", EPS["float32"], terms=2, slack=16.0)
    tol = {name: (0.0, 0.0) for name in ("V", "I", "S", "Mg", "Gt", "Y", "Mo")}
    tol["W"] = t
    return build_case("tileops", seed, src, tensors, ref, tol, feats)
