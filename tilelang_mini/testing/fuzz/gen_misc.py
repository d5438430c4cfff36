"""Smaller TileLang constructs no other family draws, in one transposing kernel: Y = f(X)^T by
(bm, bn) blocks, the transpose a `T.copy(..., transpose=True)` GM -> tile, tile -> tile or tile ->
GM; block indices also through `T.get_block_binding(d)`; `with T.If(c): with T.Then(): ...
with T.Else(): ...` on the block; element loops over `T.grid(a, b)`; the float32 bits of an
element through `T.reinterpret(x, "int32")` (the sign bit as a value) and back
(`T.reinterpret(bits, "float32")`, an absolute value by masking); `T.vectorized` column loops.

The reference transposes the zero-padded blocks in float64 NumPy with NumPy's bit views."""
from __future__ import annotations

from .case import EPS, Source, Tensor, build_case, tolerance
from .case import KERNEL_HEADER


def gen_misc(d, seed):
    M, N = d.dim(1, 70), d.dim(1, 70)
    bm, bn = d.choice([1, 4, 8, 16]), d.choice([8, 16, 32])
    gm, gn = -(-M // bm), -(-N // bn)
    how = d.choice(["gm_tile", "tile_tile", "tile_gm"])
    binding = d.boolean(0.5)
    feats = {"misc", f"transpose_{how}"} | ({"get_block_binding"} if binding else set())
    tensors = [Tensor("X", [M, N], "float32", -2.0, 2.0), Tensor("Y", [N, M], "float32", output=True)]
    src = Source(KERNEL_HEADER)
    src.add(0, "def main(" + ", ".join(f'{t.name}: T.Tensor({tuple(t.shape)!r}, "{t.dtype}")'
                                         for t in tensors) + "):")
    src.add(1, f"with T.Kernel({gn}, {gm}) as (bx, by):")
    if binding:
        src.add(2, "cb = T.get_block_binding(0)")
        src.add(2, "rb = T.get_block_binding(1)")
    else:
        src.add(2, "cb, rb = bx, by")
    src.add(2, f'x = T.alloc_fragment(({bm}, {bn}), "float32")')
    src.add(2, f't = T.alloc_shared(({bn}, {bm}), "float32")')
    # statements on x (bm, bn) before the transpose, then on t (bn, bm) after it
    pre, post, rpre, rpost = [], [], [], []
    for _ in range(d.int(1, 3)):
        kind = d.choice(["if_then", "grid", "bits_sign", "bits_abs", "vectorized"])
        feats.add(f"misc_{kind}")
        on_x = True if how == "tile_gm" else False if how == "gm_tile" else d.boolean(0.5)
        tile, shape, ks, rs = ("x", (bm, bn), pre, rpre) if on_x else ("t", (bn, bm), post, rpost)
        a, b = shape
        if kind == "if_then":
            c = d.choice([0.5, -1.0, 2.0])
            par = d.int(2, 3)
            ks += [f"with T.If((rb + cb) % {par} == 0):", "    with T.Then():",
                   f"        for i, j in T.Parallel({a}, {b}):",
                   f"            {tile}[i, j] = {tile}[i, j] * {c}",
                   "    with T.Else():", f"        for i, j in T.Parallel({a}, {b}):",
                   f"            {tile}[i, j] = {tile}[i, j] + {c}"]
            rs += [f"{tile} = {tile} * {c} if (by + bx) % {par} == 0 else {tile} + {c}"]
        elif kind == "grid":
            c = d.choice([0.125, -0.25])
            ks += [f"for i, j in T.grid({a}, {b}):",
                   f'    {tile}[i, j] = {tile}[i, j] + T.cast(i - j, "float32") * {c}']
            rs += [f"{tile} = {tile} + (np.arange({a})[:, None] - np.arange({b})[None, :]) * {c}"]
        elif kind == "bits_sign":  # the sign bit as a number: 1.0 for negatives (and -0.0)
            ks += [f"for i, j in T.Parallel({a}, {b}):",
                   f'    {tile}[i, j] = {tile}[i, j] + T.cast((T.reinterpret({tile}[i, j], "int32")'
                   ' >> 31) & 1, "float32")']
            rs += [f"{tile} = {tile} + ((rnd({tile}, 'float32').astype(np.float32).view(np.int32)"
                   " >> 31) & 1)"]
        elif kind == "bits_abs":  # |x| by clearing the sign bit
            ks += [f"for i, j in T.Parallel({a}, {b}):",
                   f'    {tile}[i, j] = T.reinterpret(T.reinterpret({tile}[i, j], "int32") & '
                   '2147483647, "float32")']
            rs += [f"{tile} = np.abs(rnd({tile}, 'float32'))"]
        else:
            c = d.choice([2.0, -0.5])
            ks += [f"for i in T.serial({a}):", f"    for j in T.vectorized({b}):",
                   f"        {tile}[i, j] = {tile}[i, j] * {c}"]
            rs += [f"{tile} = {tile} * {c}"]

    if how == "gm_tile":  # the GM block straight into the transposed tile
        src.add(2, f"T.copy(X[rb * {bm}, cb * {bn}], t, transpose=True)")
        src.block(2, post)
        src.add(2, f"T.copy(t, Y[cb * {bn}, rb * {bm}])")
    else:
        src.add(2, f"T.copy(X[rb * {bm}, cb * {bn}], x)")
        src.block(2, pre)
        if how == "tile_tile":
            src.add(2, "T.copy(x, t, transpose=True)")
            src.block(2, post)
            src.add(2, f"T.copy(t, Y[cb * {bn}, rb * {bm}])")
        else:
            src.add(2, f"T.copy(x, Y[cb * {bn}, rb * {bm}], transpose=True)")
            rpost = []

    ref = Source()
    ref.add(0, "def reference(X):")
    ref.block(1, [f"Y = np.zeros(({N}, {M}))", f"for by in range({gm}):",
                  f"    for bx in range({gn}):",
                  f"        x = load(X, (by * {bm}, bx * {bn}), ({bm}, {bn}))"])
    ref.block(3, rpre + ["t = x.T.copy()"] + rpost + [f"store(Y, (bx * {bn}, by * {bm}), t)"])
    ref.add(1, "return [Y]")
    tol = tolerance("float32", EPS["float32"], terms=4, slack=16.0)
    return build_case("misc", seed, src, tensors, ref, {"Y": tol}, feats)
