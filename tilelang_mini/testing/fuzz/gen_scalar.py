"""Families with scalars read from global memory: `alloc_var` loaded from an int tensor and used
in an index or an `if` (row gather, grouped/MoE GEMM), and loop bounds read from tensors
(`T.serial(KS[bx] // bn, T.ceildiv(KE[bx], bn))`).
"""
from __future__ import annotations

from .case import (EPS, Tensor, build_case, input_names, kernel_source, reference_source,
                   tolerance)
from .gen_cube import IN_DTYPES, _ref_gemm
from .gen_vector import FLOATS


def gen_gather(d, seed):
    """O[b] = f(X[IDX[b]]) for row blocks b; IDX < 0 leaves the block zero (an `if` on a scalar)."""
    R, N, G = d.int(1, 60), d.int(1, 130), d.int(1, 12)
    rows = d.choice([1, 2, 4])
    dt = d.choice(FLOATS)
    guard = d.boolean(0.6)
    feats = {"gather", "scalar_index", f"in_{dt}"}
    if guard:
        feats.add("scalar_if")
    tensors = [Tensor("X", [R, N], dt, -2.0, 2.0),
               Tensor("IDX", [G], "int32", -1 if guard else 0, max(R - rows, 0)),
               Tensor("O", [G * rows, N], "float32", output=True)]
    c = d.choice([1.0, -0.5, 2.0])
    src, _ = kernel_source(tensors, f"T.Kernel({G}) as bx",
                           [("g", "var", None, "int32"), ("x", "fragment", (rows, N), "float32")])
    src.add(2, "g = IDX[bx]")
    ind = 2
    if guard:
        src.add(2, "T.clear(x)")
        src.add(2, "if g >= 0:")
        ind = 3
    src.add(ind, "T.copy(X[g, 0], x)")
    src.add(ind, f"for i, j in T.Parallel({rows}, {N}):")
    src.add(ind + 1, f"x[i, j] = x[i, j] * {c} + T.cast(g, \"float32\")")
    src.add(2, f"T.copy(x, O[bx * {rows}, 0])")
    ref, _ = reference_source("X, IDX", [("O", (G * rows, N))], [("b", G)])
    ref.block(2, ["g = int(IDX[b])", "if g >= 0:" if guard else "if True:",
                  f"    O[b * {rows}:(b + 1) * {rows}] = load(X, (g, 0), ({rows}, {N})) * {c} + g"])
    ref.add(1, "return [O]")
    return build_case("gather", seed, src, tensors, ref,
                      {"O": tolerance("float32", EPS["float32"], 2)}, feats)


def gen_grouped_gemm(d, seed):
    """MoE-style grouped GEMM: each row block reads its expert id from GM into a scalar, skips
    when it is negative, and indexes the expert's weights with it (cube work behind a scalar)."""
    M, N, K = d.int(1, 140), d.int(1, 140), d.int(1, 140)
    E = d.int(1, 4)
    dt = d.weighted(IN_DTYPES[:3], [2, 3, 3])
    bm, bn, bk = d.choice([16, 32, 64]), d.choice([16, 32, 64]), d.choice([16, 32, 64])
    gm = -(-M // bm)
    three_d = d.boolean(0.5)
    feats = {"grouped_gemm", "cross_core_scalar", "scalar_if", f"in_{dt}"}
    wshape = [E, K, N] if three_d else [E * K, N]
    tensors = [Tensor("A", [M, K], dt), Tensor("W", wshape, dt),
               Tensor("GID", [gm], "int32", -1, E - 1),
               Tensor("C", [M, N], "float32", output=True)]
    src, _ = kernel_source(tensors, f"T.Kernel(T.ceildiv({N}, {bn}), {gm}) as (bx, by)",
                           [("A_s", "shared", (bm, bk), dt), ("B_s", "shared", (bk, bn), dt),
                            ("C_f", "fragment", (bm, bn), "float32"), ("g", "var", None, "int32")])
    # W rows past the expert's K belong to the next expert (A is zero there); the 3-d region
    # clips at the expert's own K
    w_copy, w_ref = ((f"W[g, k * {bk}:(k + 1) * {bk}, bx * {bn}:(bx + 1) * {bn}]", "W[g], (k")
                     if three_d else (f"W[g * {K} + k * {bk}, bx * {bn}]", f"Wf, (g * {K} + k"))
    src.block(2, ["g = GID[by]", "T.clear(C_f)", "if g >= 0:",
                  f"    for k in T.Pipelined(T.ceildiv({K}, {bk}), num_stages={d.int(1, 3)}):",
                  f"        T.copy(A[by * {bm}, k * {bk}], A_s)", f"        T.copy({w_copy}, B_s)",
                  "        T.gemm(A_s, B_s, C_f)", f"T.copy(C_f, C[by * {bm}, bx * {bn}])"])
    ref = _ref_gemm("A, W, GID", M, N, bm, bn, f"range(cdiv({K}, {bk}))",
                    [f"a = load(A, (by * {bm}, k * {bk}), ({bm}, {bk}))",
                     f"b = load({w_ref} * {bk}, bx * {bn}), ({bk}, {bn}))", "c = c + a @ b",
                     "s = s + np.abs(a) @ np.abs(b)"],
                    grid=(gm, f"cdiv({N}, {bn})"), pre=[f"Wf = W.reshape({E * K}, {N})"],
                    per_row=["g = int(GID[by])", "if g < 0:", "    continue"])
    return build_case("grouped_gemm", seed, src, tensors, ref,
                      {"C": tolerance("float32", EPS["float32"], terms=K)}, feats)


def gen_dyn_bounds(d, seed):
    """Loop bounds read from tensors: each block sums (or multiplies) only its [KS, KE) range of
    column blocks."""
    cube = d.boolean(0.4)
    G = d.int(1, 6)
    bm, bn = d.choice([4, 8, 16, 32]), d.choice([16, 32, 64])
    N = d.int(1, 200)
    form = d.choice(["two_arg", "range", "one_arg"])
    feats = {"dyn_bounds", f"dyn_{form}"}
    if cube:
        feats |= {"dyn_bounds_gemm"}
        dt = d.choice(IN_DTYPES[:3])
        Nout = d.int(1, 100)
        tensors = [Tensor("A", [G * bm, N], dt), Tensor("B", [N, Nout], dt)]
    else:
        dt = d.choice(FLOATS)
        tensors = [Tensor("X", [G * bm, N], dt)]
    tensors += [Tensor("KS", [G], "int32", 0, N // 2), Tensor("KE", [G], "int32", N // 2, N)]
    out_t = Tensor("O", [G * bm, Nout] if cube else [G * bm], "float32", output=True)
    tensors.append(out_t)
    lo, hi = f"KS[bx] // {bn}", f"T.ceildiv(KE[bx], {bn})"
    loop = {"two_arg": f"T.serial({lo}, {hi})", "range": f"range({lo}, {hi})",
            "one_arg": f"T.serial({hi})"}[form]
    rows = f"[bx * {bm}:(bx + 1) * {bm}]"
    if cube:  # per block: loads, statements, then the block's value and its error scale
        allocs = [("A_s", "shared", (bm, bn), dt), ("B_s", "shared", (bn, Nout), dt),
                  ("C_f", "fragment", (bm, Nout), "float32")]
        body = [f"T.copy(A[bx * {bm}, k * {bn}], A_s)", f"T.copy(B[k * {bn}, 0], B_s)",
                "T.gemm(A_s, B_s, C_f)"]
        out = f"T.copy(C_f, O[bx * {bm}, 0])"
        ref_body = [f"a = load(A, (bx * {bm}, k * {bn}), ({bm}, {bn}))",
                    f"b = load(B, (k * {bn}, 0), ({bn}, {Nout}))"]
        value, scale = "a @ b", "np.abs(a) @ np.abs(b)"
    else:
        allocs = [("x", "fragment", (bm, bn), "float32"), ("acc", "fragment", (bm,), "float32")]
        body = [f"T.copy(X[bx * {bm}, k * {bn}], x)", "T.reduce_sum(x, acc, dim=1, clear=False)"]
        out = f"T.copy(acc, O[bx * {bm}])"
        ref_body = [f"x = load(X, (bx * {bm}, k * {bn}), ({bm}, {bn}))"]
        value, scale = "x.sum(axis=1)", "np.abs(x).sum(axis=1)"
    src, _ = kernel_source(tensors, f"T.Kernel({G}) as bx", allocs)
    src.block(2, [f"T.clear({allocs[-1][0]})", f"for k in {loop}:"]
              + ["    " + line for line in body] + [out])
    start = "0" if form == "one_arg" else f"int(KS[bx]) // {bn}"
    ref, _ = reference_source(input_names(tensors),
                              [("O", out_t.shape), ("Os", out_t.shape)],
                              [("bx", G), ("k", f"{start}, cdiv(int(KE[bx]), {bn})")])
    ref.block(3, ref_body + [f"O{rows} += {value}", f"Os{rows} += {scale}"])
    ref.add(1, "return [(O, Os)]")
    return build_case("dyn_bounds", seed, src, tensors, ref,
                      {"O": tolerance("float32", EPS["float32"], terms=N)}, feats)
