"""Vector-core families: element-wise maps, reductions over any axis, softmax/norm row kernels.

Each generator takes a `Draw` and returns a `Case` whose reference is NumPy text that follows
the generator's own description block by block (tiles loaded with zero padding as the DSL does).
"""
from __future__ import annotations

from .case import (EPS, Case, Tensor, build_case, input_names, kernel_source,
                   reference_source, tolerance)
from .exprs import Expr, gen_expr

FLOATS = ["float32", "float16", "bfloat16"]


def _tile_alloc(d) -> str:
    return d.choice(["fragment", "shared"])


def gen_elementwise(d, seed) -> Case:
    """O = f(X, Y, bias) over a 1-D or 2-D grid of tiles, f a random expression tree."""
    two_d = d.boolean(0.7)
    M = d.dim(1, 150)
    N = d.dim(1, 150) if two_d else 1
    bm = d.choice([8, 16, 32, 64]) if two_d else d.choice([16, 32, 64, 128])
    bn = d.choice([8, 16, 32, 64]) if two_d else 1
    in_dt, out_dt = d.choice(FLOATS), d.choice(FLOATS)
    cdt = d.weighted(["float32", "float16", "bfloat16"], [6, 1, 1])
    has_y, has_bias = d.boolean(0.5), two_d and d.boolean(0.4)
    shape = [M, N] if two_d else [M]
    tensors = [Tensor("X", shape, in_dt, -2.0, 2.0)]
    if has_y:
        tensors.append(Tensor("Y", shape, in_dt, -2.0, 2.0))
    if has_bias:
        tensors.append(Tensor("Bias", [N], "float32", -1.0, 1.0))
        feats_extra = {"unsplit_tile"}
    else:
        feats_extra = set()
    tensors.append(Tensor("O", shape, out_dt, output=True))
    feats = {"elementwise", f"in_{in_dt}", f"out_{out_dt}", f"compute_{cdt}"} | feats_extra
    idx = "i, j" if two_d else "i"
    leaves = [Expr(f"x[{idx}]", "x", bound=2.0)]
    if has_y:
        leaves.append(Expr(f"y[{idx}]", "y", bound=2.0))
    if has_bias:
        leaves.append(Expr("b[j]", "b[None, :]", bound=1.0))
    if d.boolean(0.35):  # the global row index as a value (a split row must be substituted)
        r0 = "by * %d" % bm if two_d else "bx * %d" % bm
        leaves.append(Expr(f'T.cast({r0} + i, "float32") * 0.01', "(r0 + ii) * 0.01", bound=2.0,
                           features={"rowvar_in_value"}))
    if two_d and d.boolean(0.25):  # a mask on the global column (a tail mask)
        cut = d.int(0, N)
        leaves.append(Expr(f'T.cast(bx * {bn} + j >= {cut}, "float32")',
                           f"((c0 + jj) >= {cut}).astype(np.float64)", bound=1.0,
                           features={"colmask"}))
    expr = gen_expr(d, leaves, d.int(1, 3))
    feats |= expr.features
    tile = (bm, bn) if two_d else (bm,)
    grid = f"T.ceildiv({N}, {bn}), T.ceildiv({M}, {bm})" if two_d else f"T.ceildiv({M}, {bm})"
    alloc = _tile_alloc(d)
    src, marks = kernel_source(
        tensors, f"T.Kernel({grid}) as {'(bx, by)' if two_d else 'bx'}",
        [("x", alloc, tile, cdt)] + [("y", alloc, tile, cdt)] * has_y
        + [("b", "fragment", (bn,), "float32")] * has_bias + [("o", alloc, tile, cdt)])
    corner = f"[by * {bm}, bx * {bn}]" if two_d else f"[bx * {bm}]"
    if two_d and d.boolean(0.3):
        corner = f"[by * {bm}:(by + 1) * {bm}, bx * {bn}:(bx + 1) * {bn}]"
        feats.add("slice_copy")
    marks["copy_x"] = src.add(2, f"T.copy(X{corner}, x)")
    if has_y:
        src.add(2, f"T.copy(Y{corner}, y)")
    if has_bias:
        src.add(2, f"T.copy(Bias[bx * {bn}], b)")
    loop = f"for {idx} in T.Parallel({', '.join(map(str, tile))}):"
    marks["map_loop"] = src.add(2, loop)
    marks["map"] = src.add(3, f"o[{idx}] = {expr.dsl}")
    post = d.choice([None, "scale", "inplace2", "raw"])
    post_ref = ""
    if post == "scale":
        c = d.choice([0.5, -2.0, 1.25])
        src.add(2, loop)
        src.add(3, f"o[{idx}] = o[{idx}] * {c}")
        post_ref = f"o = rnd(o * {c}, '{cdt}')"
    elif post == "inplace2":
        src.add(2, loop)
        src.add(3, f"o[{idx}] += x[{idx}]")
        post_ref = f"o = rnd(o + x, '{cdt}')"
    elif post == "raw":  # reads, in the same Parallel body, what it wrote a line earlier
        feats.add("parallel_raw")
        src.add(3, f"o[{idx}] = o[{idx}] + 1.0")
        post_ref = f"o = rnd(o + 1.0, '{cdt}')"
    marks["copy_out"] = src.add(2, f"T.copy(o, O{corner})")

    blocks = ([("by", f"cdiv({M}, {bm})"), ("bx", f"cdiv({N}, {bn})")] if two_d
              else [("bx", f"cdiv({M}, {bm})")])
    ref, ind = reference_source(input_names(tensors), [("O", shape)], blocks)
    if two_d:
        ref.add(ind, f"ii, jj = np.indices({tile!r})")
        starts = f"(by * {bm}, bx * {bn})"
        ref.add(ind, f"r0, c0 = by * {bm}, bx * {bn}")
    else:
        ref.add(ind, f"ii = np.arange({bm})")
        starts = f"(bx * {bm},)"
        ref.add(ind, f"r0 = bx * {bm}")
    ref.add(ind, f"x = rnd(load(X, {starts}, {tile!r}), '{cdt}')")
    if has_y:
        ref.add(ind, f"y = rnd(load(Y, {starts}, {tile!r}), '{cdt}')")
    if has_bias:
        ref.add(ind, f"b = load(Bias, (bx * {bn},), ({bn},))")
    ref.add(ind, f"o = rnd(np.broadcast_to({expr.ref}, {tile!r}), '{cdt}')")
    if post_ref:
        ref.add(ind, post_ref)
    ref.add(ind, f"store(O, {starts}, rnd(o, '{out_dt}'))")
    ref.add(1, "return [O]")
    ceps = max(EPS[cdt], expr.cast_eps)
    tol = tolerance(out_dt, ceps, terms=expr.nodes + 2, slack=16.0)
    return build_case("elementwise", seed, src, tensors, ref, {"O": tol}, feats, marks)


_RED = {"sum": ("np.sum({x}, axis={d})", "{a} + {r}", 0.0),
        "abssum": ("np.sum(np.abs({x}), axis={d})", "{a} + {r}", 0.0),
        "max": ("np.max({x}, axis={d})", "np.maximum({a}, {r})", -1e30),
        "min": ("np.min({x}, axis={d})", "np.minimum({a}, {r})", 1e30),
        "absmax": ("np.max(np.abs({x}), axis={d})", "np.maximum({a}, {r})", 0.0)}


def gen_reduce(d, seed) -> Case:
    """T.reduce_<kind> of a 2-D or 3-D tile over any axis; clear, an initial fill, or
    accumulation across a loop over column blocks (clear=False)."""
    kind = d.choice(list(_RED))
    three = d.boolean(0.2)
    M, N = d.dim(1, 130), d.dim(1, 130)
    bm, bn = d.choice([4, 8, 16, 32]), d.choice([8, 16, 32, 64])
    P = d.int(1, 4) if three else None
    in_dt = d.choice(FLOATS)
    ndim = 3 if three else 2
    dim = d.int(-ndim, ndim - 1)
    dd = dim % ndim
    mode = d.choice(["clear", "init", "loop"]) if not three else d.choice(["clear", "init"])
    keep = d.boolean(0.25)
    tile = (bm, bn, P) if three else (bm, bn)
    xshape = [M, N, P] if three else [M, N]
    red_ext = [e for k, e in enumerate(tile) if k != dd]
    out_tile = tuple(red_ext[:dd] + [1] + red_ext[dd:]) if keep else tuple(red_ext)
    # Output: one reduced tile per block, laid out as (blocks, *reduced extent).
    gm = -(-M // bm)
    gn = 1 if mode == "loop" else -(-N // bn)
    oshape = [gm * gn] + list(out_tile)
    tensors = [Tensor("X", xshape, in_dt, -2.0, 2.0), Tensor("O", oshape, "float32", output=True)]
    feats = {"reduce", f"reduce_{kind}", f"reduce_dim{dd}", f"reduce_{mode}", f"in_{in_dt}"}
    if keep:
        feats.add("reduce_keepdim")
    if three:
        feats.add("reduce_3d")
    init = _RED[kind][2] if mode != "init" else d.choice([0.0, 1.5, -0.75])
    src, marks = kernel_source(tensors, f"T.Kernel({gn}, {gm}) as (bx, by)",
                               [("x", _tile_alloc(d), tile, "float32"),
                                ("r", "fragment", out_tile, "float32")])
    zero = ", 0" if three else ""
    clear = "True"
    if mode == "init":
        src.add(2, f"T.fill(r, {init})")
        clear = "False"
    if mode == "loop":
        src.add(2, f"T.fill(r, {init})")
        lk = d.choice(["T.serial", "T.Pipelined", "range"])
        src.add(2, f"for k in {lk}(T.ceildiv({N}, {bn})):")
        marks["copy_x"] = src.add(3, f"T.copy(X[by * {bm}, k * {bn}{zero}], x)")
        marks["reduce"] = src.add(3, f"T.reduce_{kind}(x, r, dim={dim}, clear=False)")
    else:
        marks["copy_x"] = src.add(2, f"T.copy(X[by * {bm}, bx * {bn}{zero}], x)")
        marks["reduce"] = src.add(2, f"T.reduce_{kind}(x, r, dim={dim}, clear={clear})")
    out_corner = ", ".join(["by * %d + bx" % gn] + ["0"] * len(out_tile))
    marks["copy_out"] = src.add(2, f"T.copy(r, O[{out_corner}])")

    red, comb, _ = _RED[kind]
    ref, _ = reference_source("X", [("O", oshape)], [("by", gm), ("bx", gn)])
    ref.add(3, f"r = np.full({tuple(red_ext)!r}, {init!r})")
    ks = f"range(cdiv({N}, {bn}))" if mode == "loop" else "[bx]"
    ref.add(3, f"for k in {ks}:")
    starts = f"(by * {bm}, k * {bn}{zero})"
    ref.add(4, f"x = rnd(load(X, {starts}, {tile!r}), 'float32')")
    acc = "r" if mode != "clear" else None
    red_expr = red.format(x="x", d=dd)
    if acc:
        ref.add(4, "r = " + comb.format(a="r", r=red_expr))
    else:
        ref.add(4, "r = " + red_expr)
    ref.add(3, f"O[by * {gn} + bx] = r.reshape({out_tile!r})")
    ref.add(1, "return [O]")
    terms = tile[dd] * (-(-N // bn) if mode == "loop" else 1)
    return build_case("reduce", seed, src, tensors, ref,
                      {"O": tolerance("float32", EPS["float32"], terms)}, feats, marks)


# Whole-row kernels as statements on x (the block's rows), e, and the row values r and r2:
# "P: s" is `s` in a T.Parallel over (rows, N), "P1: s" one over the rows; then the reference
# (float64 NumPy on the whole X, with the returned outputs).
_MAX_EXP_SUM = ["T.reduce_max(x, r, dim=1)", "P: e[i, j] = T.exp(x[i, j] - r[i])",
                "T.reduce_sum(e, r2, dim=1)"]
_ROWNORM = {
    "softmax": (_MAX_EXP_SUM + ["P: e[i, j] = e[i, j] / r2[i]"],
                ["z = np.exp(x - x.max(axis=1, keepdims=True))",
                 "return [(z / z.sum(axis=1, keepdims=True), np.full(z.shape, 1.0 / z.shape[1]))]"]),
    "logsumexp": (_MAX_EXP_SUM + ["P1: r2[i] = T.log(r2[i]) + r[i]"],
                  ["m = x.max(axis=1)", "return [np.log(np.exp(x - m[:, None]).sum(axis=1)) + m]"]),
    "rmsnorm": (["P: e[i, j] = x[i, j] * x[i, j]", "T.reduce_sum(e, r, dim=1)",
                 "P1: r[i] = T.rsqrt(r[i] / {N} + 1e-6)", "P: e[i, j] = x[i, j] * r[i] * w[j]"],
                ["s = 1.0 / np.sqrt((x * x).mean(axis=1, keepdims=True) + 1e-6)",
                 "return [x * s * W[None, :]]"]),
    "layernorm": (["T.reduce_sum(x, r, dim=1)", "P1: r[i] = r[i] / {N}",
                   "P: e[i, j] = (x[i, j] - r[i]) * (x[i, j] - r[i])", "T.reduce_sum(e, r2, dim=1)",
                   "P1: r2[i] = T.rsqrt(r2[i] / {N} + 1e-5)",
                   "P: e[i, j] = (x[i, j] - r[i]) * r2[i] * w[j]"],
                  ["mu = x.mean(axis=1, keepdims=True)",
                   "v = ((x - mu) ** 2).mean(axis=1, keepdims=True)",
                   "return [(x - mu) / np.sqrt(v + 1e-5) * W[None, :]]"]),
}


def gen_rownorm(d, seed) -> Case:
    """Whole-row kernels: softmax, rmsnorm, layernorm, logsumexp (one block = bm rows)."""
    kind = d.choice(["softmax", "rmsnorm", "layernorm", "logsumexp"])
    M, N = d.dim(1, 160), d.dim(1, 160)
    bm = d.choice([1, 2, 4, 8, 16, 32])
    in_dt, out_dt = d.choice(FLOATS), d.choice(FLOATS)
    feats = {"rownorm", f"rownorm_{kind}", f"in_{in_dt}", f"out_{out_dt}"}
    oshape = [M] if kind == "logsumexp" else [M, N]
    tensors = [Tensor("X", [M, N], in_dt, -3.0, 3.0)]
    weighted = kind in ("rmsnorm", "layernorm")
    if weighted:
        tensors.append(Tensor("W", [N], "float32", 0.5, 1.5))
        feats.add("unsplit_tile")
    tensors.append(Tensor("O", oshape, out_dt, output=True))
    src, _ = kernel_source(tensors, f"T.Kernel(T.ceildiv({M}, {bm})) as bx",
                           [(v, "fragment", shape, "float32") for v, shape in
                            [("x", (bm, N)), ("e", (bm, N)), ("r", (bm,)), ("r2", (bm,))]
                            + [("w", (N,))] * weighted])
    if weighted:
        src.add(2, "T.copy(W, w)")
    src.add(2, f"T.copy(X[bx * {bm}, 0], x)")
    loops = {"P": f"for i, j in T.Parallel({bm}, {N}):", "P1": f"for i in T.Parallel({bm}):"}
    steps, ref_lines = _ROWNORM[kind]
    for step in steps:
        loop, _, stmt = step.partition(": ") if step.startswith("P") else ("", "", step)
        if loop:
            src.add(2, loops[loop])
        src.add(3 if loop else 2, stmt.format(N=N))
    src.add(2, f"T.copy(r2, O[bx * {bm}])" if kind == "logsumexp" else f"T.copy(e, O[bx * {bm}, 0])")
    ref, _ = reference_source(input_names(tensors))
    ref.block(1, ["x = X"] + ref_lines)
    # rows are sums of N terms; layernorm of a near-constant row amplifies: scale from the data
    tol = tolerance(out_dt, EPS["float32"], terms=N, slack=32.0)
    return build_case("rownorm", seed, src, tensors, ref, {"O": tol}, feats)
