"""The eager `@jit` style and scalar kernel parameters. Eager: `def main(X, B, rows, alpha,
reps, bm=.., bn=..)` whose body declares `M, N = T.const("M, N")`, `X: T.Tensor((M, N), dt)` (or
`T.Tensor[[N], dt]`), returns `T.empty` outputs, and takes Python numbers (the row limit, the
scale, a repeat count) as trace-time arguments; the worker wraps it in `tilelang_mini.jit`.
Prim_func: the same numbers as scalar parameters `rows: T.int32, alpha: T.float32, reps: T.int32`
among the tensors (the kernel is specialised per value), used in an `if` of the map, as a
scale and as a `T.serial` trip count. Both: row-major tiles of awkward shapes with tails, a
bias row, a per-block row maximum.

The reference applies the same arithmetic in float64 NumPy to the zero-padded tiles."""
from __future__ import annotations

from .case import EPS, Source, Tensor, build_case, tolerance
from .case import KERNEL_HEADER, signature


def gen_eager(d, seed):
    M, N = d.dim(1, 80), d.dim(1, 70)
    bm, bn = d.choice([1, 4, 8, 16]), d.choice([8, 16, 32])
    eager = d.boolean(0.6)
    spell = d.choice(["call", "getitem"])
    gm, gn = -(-M // bm), -(-N // bn)
    feats = {"eager_jit" if eager else "scalar_params", f"eager_bias_{spell}"}
    X = Tensor("X", [M, N], "float32", -2.0, 2.0)
    B = Tensor("B", [N], "float32")
    grid_rows = not eager and d.boolean(0.4)  # the grid's extent from the scalar parameter
    rows = Tensor("rows", [], "int32", 1 if grid_rows else 0, M + 2)
    if grid_rows:
        feats.add("scalar_param_grid")
    alpha = Tensor("alpha", [], "float32", -2.0, 2.0)
    reps = Tensor("reps", [], "int32", 0, 3)
    Y = Tensor("Y", [M, N], "float32", output=True)
    R = Tensor("R", [gn, M], "float32", output=True)
    tensors = [X, B, rows, alpha, reps, Y, R]

    body = [f"with T.Kernel(T.ceildiv(N, bn), T.ceildiv({'rows' if grid_rows else 'M'}, bm)) "
            "as (bx, by):",
            "    x = T.alloc_fragment((bm, bn), T.float32)",
            "    b = T.alloc_fragment((bn,), T.float32)",
            "    r = T.alloc_fragment((bm,), T.float32)",
            "    T.copy(X[by * bm, bx * bn], x)",
            "    T.copy(B[bx * bn:(bx + 1) * bn], b)",
            "    for i, j in T.Parallel(bm, bn):",
            "        if by * bm + i < rows:",
            "            x[i, j] = x[i, j] * alpha + b[j]",
            "    for k in T.serial(reps):",
            "        for i, j in T.Parallel(bm, bn):",
            "            x[i, j] = x[i, j] * 0.5 + 0.25",
            "    T.reduce_max(x, r, dim=1)",
            "    T.copy(x, Y[by * bm, bx * bn])",
            "    T.copy(r, R[bx, by * bm:(by + 1) * bm])"]
    src = Source(KERNEL_HEADER[:3])
    if eager:
        src.add(0, f"def main(X, B, rows, alpha, reps, bm={bm}, bn={bn}):")
        src.add(1, 'M, N = T.const("M, N")' if d.boolean(0.5) else 'M = T.const("M")')
        if "M, N" not in src.lines[-1]:
            src.add(1, 'N = T.const("N")')
        src.add(1, "X: T.Tensor((M, N), T.float32)")
        src.add(1, "B: T.Tensor[[N], T.float32]" if spell == "getitem" else "B: T.Tensor((N,), T.float32)")
        src.add(1, "Y = T.empty((M, N), T.float32)")
        src.add(1, "R = T.empty((T.ceildiv(N, bn), M), T.float32)")
        src.block(1, body)
        src.add(1, "return Y, R")
    else:
        src.add(0, "@T.prim_func")
        src.add(0, signature(tensors))
        src.add(1, f"M, N, bm, bn = {M}, {N}, {bm}, {bn}")
        src.block(1, body)

    ref = Source()
    ref.add(0, "def reference(X, B, rows, alpha, reps):")
    ref.block(1, [f"Y = np.zeros(({M}, {N}))", f"R = np.zeros(({gn}, {M}))",
                  "a = rnd(alpha, 'float32')",
                  f"for by in range({'min(cdiv(rows, %d), %d)' % (bm, gm) if grid_rows else gm}):",
                  f"    for bx in range({gn}):",
                  f"        x = load(X, (by * {bm}, bx * {bn}), ({bm}, {bn}))",
                  f"        b = load(B, (bx * {bn},), ({bn},))",
                  f"        live = (by * {bm} + np.arange({bm}))[:, None] < rows",
                  "        x = np.where(live, x * a + b[None, :], x)",
                  "        for k in range(reps):",
                  "            x = x * 0.5 + 0.25",
                  f"        store(Y, (by * {bm}, bx * {bn}), x)",
                  f"        store(R, (bx, by * {bm}), x.max(axis=1)[None, :])",
                  "return [Y, R]"])
    tol = tolerance("float32", EPS["float32"], terms=4, slack=16.0)
    return build_case("eager", seed, src, tensors, ref, {"Y": tol, "R": tol}, feats)
