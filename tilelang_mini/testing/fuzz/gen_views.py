"""Views: the same elements under another shape or dtype. Row blocks of an (M, N) float32
tensor, N = g * q; the block's tile `x` (bm, N) is loaded directly, or as a 3-D tile (bm, g, q)
from a 3-D GM view of X (`T.Tensor((M, g, q), dtype, X.data)` or `T.reshape(X, ...)`, inside or
before the `T.Kernel`) and seen 2-D through `T.reshape`. Then 1-4 statements on views of the
tiles: a 3-D `T.Parallel` map written through `T.reshape(x, (bm, g, q))`, `T.reduce_*` of that
view over any of its three dims (`clear=False` into a filled accumulator too), a flat 1-D view
read backwards, `T.fill`/`T.clear` of a flat view, and dtype views of the loaded (exact) tile:
the float32 bits as int32 (the exponent field by shifts and masks), the upper bfloat16 half of
each element through a `bfloat16` view of twice the columns (read in a map, or the low halves
zeroed by writes in serial loops). Out through `T.copy`, or a flat GM view of O
(`T.reshape(O, (M * N,))`) written element by element (the tail rows fall outside it), or a 3-D
GM view of O from a 3-D view of the tile.

The reference works on float64 NumPy tiles with NumPy's reshapes and `.view` of float32 bytes."""
from __future__ import annotations

from .case import EPS, Source, Tensor, build_case, tolerance
from .case import KERNEL_HEADER


def gen_views(d, seed):
    g, q = d.choice([1, 2, 3, 4]), d.choice([2, 4, 8, 16])
    N = g * q
    M = d.dim(1, 70)
    bm = d.choice([1, 2, 4, 8, 16])
    gm = -(-M // bm)
    load = d.choice(["direct", "gm_data", "gm_reshape"])
    gm_outside = d.boolean(0.5)
    store = d.choice(["copy", "flat", "view3"])
    feats = {"views", f"views_load_{load}", f"views_store_{store}"}
    red_dim = d.int(0, 2)
    red_op = d.choice(["sum", "max", "min"])
    rshape = [(g, q), (bm, q), (bm, g)][red_dim]

    k, r = [], []  # kernel lines (at the block's indent), reference lines
    exact = True
    scale = 1.0
    reduced = False
    for _ in range(d.int(1, 4)):
        kinds = ["map3", "reduce", "flat", "fillview", "cumsum", "regroup", "wide"] + (
            ["bits", "bf16", "bf16_write"] if exact else [])
        kind = d.choice(kinds)
        feats.add(f"views_{kind}")
        if kind == "map3":
            c = d.choice([0.5, -1.0, 1.5])
            k += [f"for i, a, b in T.Parallel({bm}, {g}, {q}):",
                  f'    xr[i, a, b] = xr[i, a, b] * {c} + T.cast(a * {q} - b, "float32") * 0.125']
            r += [f"x = (x.reshape({bm}, {g}, {q}) * {c} + (A * {q} - B) * 0.125).reshape({bm}, {N})"]
            exact = False
            scale = scale * abs(c) + N * 0.125
        elif kind == "reduce" and not reduced:
            reduced = True
            clear = d.boolean(0.5)
            init = d.choice([0.0, 0.5, -2.0])
            k += [f"T.fill(acc, {init})",
                  f"T.reduce_{red_op}(xr, acc, dim={red_dim}, clear={clear})"]
            fn = {"sum": "np.sum", "max": "np.max", "min": "np.min"}[red_op]
            v = f"{fn}(x.reshape({bm}, {g}, {q}), axis={red_dim})"
            if clear:
                r.append(f"acc = {v}")
            else:
                comb = {"sum": "{o} + {v}", "max": "np.maximum({o}, {v})",
                        "min": "np.minimum({o}, {v})"}[red_op]
                r.append("acc = " + comb.format(o=f"np.full({rshape!r}, {init})", v=v))
        elif kind == "cumsum":  # along a dim of the 3-D views, maybe reversed / in place
            cd, rev = d.int(0, 2), d.boolean(0.4)
            inplace = d.boolean(0.3)
            dst = "xr" if inplace else d.choice(["yr", f"T.reshape(y, ({bm}, {g}, {q}))"])
            k += [f"T.cumsum(xr, {dst}, dim={cd}, reverse={rev})"]
            v = f"x.reshape({bm}, {g}, {q})"
            v = (f"np.flip(np.cumsum(np.flip({v}, {cd}), axis={cd}), {cd})" if rev
                 else f"np.cumsum({v}, axis={cd})")
            r += [f"{'x' if inplace else 'y'} = {v}.reshape({bm}, {N})"]
            exact = exact and not inplace
            scale *= (bm, g, q)[cd]
        elif kind == "regroup":  # rows of q: (bm * g, q), a row statistic broadcast back
            red2 = d.choice(["sum", "max"])
            k += [f"T.reduce_{red2}(xq, rq, dim=1)",
                  f"for a, b in T.Parallel({bm * g}, {q}):",
                  "    yq[a, b] = xq[a, b] - rq[a] * 0.5"]
            fn = "np.sum" if red2 == "sum" else "np.max"
            r += [f"_xq = x.reshape({bm * g}, {q})",
                  f"y = (_xq - {fn}(_xq, axis=1)[:, None] * 0.5).reshape({bm}, {N})"]
            scale = max(scale, q * 0.5 + 1)
        elif kind == "wide":  # a bfloat16 tile of 2N columns read as N float32s
            k += [f"for i, j in T.Parallel({bm}, {N}):", "    hb[i, 2 * j] = 0.0",
                  "    hb[i, 2 * j + 1] = x[i, j]",
                  f"for i, j in T.Parallel({bm}, {N}):", "    y[i, j] = wv[i, j]"]
            r += ["y = rnd(x, 'bfloat16')"]
        elif kind == "flat":
            k += [f"for t in T.Parallel({bm * N}):", f"    yf[t] = xf[{bm * N - 1} - t]"]
            r += [f"y = x.reshape(-1)[::-1].reshape({bm}, {N}).copy()"]
        elif kind == "fillview":
            c = d.choice([0.0, 0.75])
            k += ["T.clear(yf)" if c == 0.0 and d.boolean(0.5) else f"T.fill(yf, {c})",
                  f"for i, j in T.Parallel({bm}, {N}):", "    y[i, j] = y[i, j] + x[i, j]"]
            r += [f"y = {c} + x"]
        elif kind == "bits":
            k += [f'xi = T.view(x, ({bm}, {N}), "int32")',
                  f"for i, j in T.Parallel({bm}, {N}):",
                  '    y[i, j] = T.cast((xi[i, j] >> 23) & 255, "float32") - 120.0']
            r += ["y = ((x.astype(np.float32).view(np.int32) >> 23) & 255).astype(np.float64) - 120.0"]
        elif kind == "bf16":
            k += [f'h = T.view(x, ({bm}, {2 * N}), "bfloat16")',
                  f"for i, j in T.Parallel({bm}, {N}):",
                  '    y[i, j] = T.cast(h[i, 2 * j + 1], "float32")']
            r += ["y = (x.astype(np.float32).view(np.uint32) & 0xFFFF0000).view(np.float32)"
                  ".astype(np.float64)"]
        elif kind == "bf16_write":
            k += [f'hw = T.view(x, ({bm}, {2 * N}), "bfloat16")',
                  f"for i in T.serial({bm}):", f"    for j in T.serial({N}):",
                  "        hw[i, 2 * j] = 0.0"]
            r += ["x = (x.astype(np.float32).view(np.uint32) & 0xFFFF0000).view(np.float32)"
                  ".astype(np.float64)"]
    if not reduced:
        k += [f"T.reduce_{red_op}(xr, acc, dim={red_dim})"]
        fn = {"sum": "np.sum", "max": "np.max", "min": "np.min"}[red_op]
        r += [f"acc = {fn}(x.reshape({bm}, {g}, {q}), axis={red_dim})"]
        feats.add("views_reduce")
    out = d.choice(["x", "y"])

    tensors = [Tensor("X", [M, N], "float32", -2.0, 2.0), Tensor("O", [M, N], "float32", output=True),
               Tensor("R", [gm, *rshape], "float32", output=True)]
    src = Source(KERNEL_HEADER)
    src.add(0, "def main(" + ", ".join(f'{t.name}: T.Tensor({tuple(t.shape)!r}, "{t.dtype}")'
                                         for t in tensors) + "):")
    gm_lines = []
    if load == "gm_data":
        gm_lines.append(f'Xv = T.Tensor(({M}, {g}, {q}), "float32", X.data)')
    elif load == "gm_reshape":
        gm_lines.append(f"Xv = T.reshape(X, ({M}, {g}, {q}))")
    if store == "flat":
        gm_lines.append(f"Of = T.reshape(O, ({M * N},))" if d.boolean(0.5)
                        else f'Of = T.Tensor(({M * N},), "float32", O.data)')
    elif store == "view3":
        gm_lines.append(f"O3 = T.reshape(O, ({M}, {g}, {q}))")
    if gm_outside:
        src.block(1, gm_lines)
    dev = d.boolean(0.35)  # developer mode: UB tiles the compiler splits between the AIVs
    if dev:
        feats.add("views_developer")
        src.add(1, f"with T.Kernel({gm}, is_npu=True) as (bx, vid):")
    else:
        src.add(1, f"with T.Kernel({gm}) as bx:")
    if not gm_outside:
        src.block(2, gm_lines)
    kind = lambda: "ub" if dev else d.choice(["fragment", "shared"])  # noqa: E731
    if load == "direct":
        src.add(2, f'x = T.alloc_{kind()}(({bm}, {N}), "float32")')
    else:
        src.add(2, f'x3 = T.alloc_{kind()}(({bm}, {g}, {q}), "float32")')
        src.add(2, f"x = T.reshape(x3, ({bm}, {N}))")
    tiles = {"y": (bm, N), "acc": rshape, "rq": (bm * g,), "hb": (bm, 2 * N)}
    for name, shape in tiles.items():
        dt = "bfloat16" if name == "hb" else "float32"
        src.add(2, f'{name} = T.alloc_{kind()}({tuple(shape)!r}, "{dt}")')
    views = {"xr": ("x", (bm, g, q)), "xf": ("x", (bm * N,)), "yf": ("y", (bm * N,)),
             "yr": ("y", (bm, g, q)), "xq": ("x", (bm * g, q)), "yq": ("y", (bm * g, q))}
    for name, (base, shape) in views.items():
        src.add(2, f"{name} = T.reshape({base}, {shape!r})")
    src.add(2, f'wv = T.view(hb, ({bm}, {N}), "float32")')
    if load == "direct":
        src.add(2, f"T.copy(X[bx * {bm}, 0], x)")
    else:
        src.add(2, f"T.copy(Xv[bx * {bm}, 0, 0], x3)")
    src.add(2, "T.clear(y)")
    src.block(2, k)
    if store == "copy":
        src.add(2, f"T.copy({out}, O[bx * {bm}, 0])")
    elif store == "flat":
        src.add(2, f"for i, j in T.Parallel({bm}, {N}):")
        src.add(3, f"Of[(bx * {bm} + i) * {N} + j] = {out}[i, j]")
    else:
        if d.boolean(0.5):
            src.add(2, f"o3 = T.reshape({out}, ({bm}, {g}, {q}))")
            src.add(2, f"T.copy(o3, O3[bx * {bm}, 0, 0])")
        else:  # the view written inline
            src.add(2, f"T.copy(T.reshape({out}, ({bm}, {g}, {q})), O3[bx * {bm}, 0, 0])")
    src.add(2, "T.copy(acc, R[bx, 0, 0])")

    ref = Source()
    ref.add(0, "def reference(X):")
    ref.block(1, [f"O = np.zeros(({M}, {N}))", f"R = np.zeros(({gm}, {rshape[0]}, {rshape[1]}))",
                  f"A = np.arange({g})[None, :, None]", f"B = np.arange({q})[None, None, :]",
                  f"for bx in range({gm}):",
                  f"    x = rnd(load(X, (bx * {bm}, 0), ({bm}, {N})), 'float32')",
                  f"    y = np.zeros(({bm}, {N}))"])
    ref.block(2, r)
    ref.block(2, [f"store(O, (bx * {bm}, 0), {out})", "R[bx] = acc"])
    ref.add(1, "return [O, R]")
    tol = tolerance("float32", EPS["float32"], terms=N * bm, slack=16.0 * max(1.0, scale))
    return build_case("views", seed, src, tensors, ref, {"O": tol, "R": tol}, feats)
