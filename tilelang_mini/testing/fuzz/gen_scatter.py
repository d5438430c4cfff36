"""Atomic scatters into GM and reducers: each block's (R, D) tile of values goes into the rows of
C that an index tensor names (`T.atomic_add(C[Idx[bx, i], j], v[i, j] * c)` in `T.Parallel`,
TileLang's sparse-MLA dKV scatter), also as `T.atomic_addx2/x4` over strided columns, or through
an index tile read into a per-lane name under a guard (`pos = rows[i]; if (pos > -1) & (pos <
n): ...`); the indices repeat (rows add up across lanes and blocks) and fall outside C (-1, n:
not stored). Optionally `T.atomic_max`/`T.atomic_min` scattered the same way, and a
`T.alloc_reducer` (sum or max) that the map reduces into, leaving out the row variable, then
`T.finalize_reducer`.

The reference is `np.add.at` / `np.maximum.at` over the indices that stay inside C."""
from __future__ import annotations

from .case import EPS, Source, Tensor, build_case, tolerance
from .case import KERNEL_HEADER


def gen_scatter(d, seed):
    G, R = d.int(1, 4), d.dim(1, 12)
    w = d.choice([1, 1, 2, 4])
    D = w * d.int(1, 8)
    NR = d.int(1, 20)
    form = d.choice(["direct", "guard"]) if w == 1 else "wide"
    c = d.choice([1.0, 2.0, -0.5])
    ext = d.choice([None, "max", "min"])
    reducer = d.choice([None, "sum", "max"])
    lim = d.int(0, NR)  # the guard's upper bound
    cdt = d.choice(["float32", "float32", "float16", "bfloat16"])
    hist = d.boolean(0.4)  # an int32 histogram of the rows: `T.atomic_add(Cnt[Idx[bx, i]], 1)`
    feats = {"scatter", f"scatter_{form}"} | ({f"scatter_atomic_{ext}"} if ext else set())
    feats |= {f"reducer_{reducer}"} if reducer else set()
    feats |= {f"scatter_out_{cdt}"} | ({"scatter_hist"} if hist else set())
    tensors = [Tensor("Idx", [G, R], "int32", -1, NR), Tensor("V", [G, R, D], "float32", -2.0, 2.0),
               Tensor("C", [NR, D], cdt, output=True)]
    if ext:
        tensors.append(Tensor("E", [NR, D], "float32", output=True))
    if reducer:
        tensors.append(Tensor("Q", [G, D], "float32", output=True))
    if hist:
        tensors.append(Tensor("Cnt", [NR], "int32", output=True))
    src = Source(KERNEL_HEADER)
    src.add(0, "def main(" + ", ".join(f'{t.name}: T.Tensor({tuple(t.shape)!r}, "{t.dtype}")'
                                         for t in tensors) + "):")
    src.add(1, f"with T.Kernel({G}) as bx:")
    src.add(2, f'v = T.alloc_fragment(({R}, {D}), "float32")')
    src.add(2, f'rows = T.alloc_shared(({R},), "int32")')
    if reducer:
        src.add(2, f'r = T.alloc_reducer(({D},), "float32", op="{reducer}")')
    src.add(2, "T.copy(V[bx, :, :], v)" if d.boolean(0.5) else "T.copy(V[bx, 0, 0], v)")
    src.add(2, "T.copy(Idx[bx, :], rows)")
    if form == "direct":
        src.add(2, f"for i, j in T.Parallel({R}, {D}):")
        src.add(3, f"T.atomic_add(C[Idx[bx, i], j], v[i, j] * {c})")
    elif form == "guard":
        src.add(2, f"for i, j in T.Parallel({R}, {D}):")
        src.add(3, "pos = rows[i]")
        src.add(3, f"if (pos > -1) & (pos < {lim}):")
        src.add(4, f"T.atomic_add(C[pos, j], v[i, j] * {c})")
    else:
        src.add(2, f"for i, j in T.Parallel({R}, {D // w}):")
        src.add(3, f"T.atomic_addx{w}(C[rows[i], j * {w}], v[i, j * {w}])")
    if hist:
        src.add(2, f"for i in T.Parallel({R}):")
        src.add(3, "T.atomic_add(Cnt[Idx[bx, i]], 1)")
    if ext:
        src.add(2, f"for i, j in T.Parallel({R}, {D}):")
        src.add(3, f"T.atomic_{ext}(E[Idx[bx, i], j], v[i, j])")
    if reducer:
        src.add(2, "T.clear(r)" if reducer == "sum" else "T.fill(r, -T.infinity(T.float32))")
        src.add(2, f"for i, j in T.Parallel({R}, {D}):")
        src.add(3, "r[j] += v[i, j]" if reducer == "sum" else "r[j] = T.max(r[j], v[i, j])")
        src.add(2, "T.finalize_reducer(r)")
        src.add(2, f"T.copy(r, Q[bx, 0:{D}])")

    ref = Source()
    ref.add(0, "def reference(Idx, V):")
    hi = lim if form == "guard" else NR
    scale = 1.0 if form == "wide" else c
    ref.block(1, [f"C = np.zeros(({NR}, {D}))", "idx = Idx.astype(np.int64)",
                  f"keep = (idx >= 0) & (idx < {hi})",
                  f"np.add.at(C, idx[keep], V[keep] * {scale})"])
    outs = ["C"]
    if ext:
        fn = "np.maximum" if ext == "max" else "np.minimum"
        ref.block(1, [f"E = np.zeros(({NR}, {D}))", f"inside = (idx >= 0) & (idx < {NR})",
                      f"{fn}.at(E, idx[inside], V[inside])"])
        outs.append("E")
    if reducer:
        ref.add(1, "Q = V.sum(axis=1)" if reducer == "sum" else "Q = V.max(axis=1)")
        outs.append("Q")
    if hist:
        ref.block(1, [f"Cnt = np.zeros({NR})", f"inside = (idx >= 0) & (idx < {NR})",
                      "np.add.at(Cnt, idx[inside], 1)"])
        outs.append("Cnt")
    ref.add(1, f"return [{', '.join(outs)}]")
    tol = tolerance("float32", EPS["float32"], terms=G * R, slack=16.0)
    # a narrow C rounds after every add (in some order): G * R roundings of its epsilon
    tol_c = tolerance(cdt, EPS[cdt], terms=G * R * G * R, slack=4.0)
    return build_case("scatter", seed, src, tensors, ref,
                      {"C": tol_c, "E": tol, "Q": tol, "Cnt": (0.0, 0.0)}, feats)
