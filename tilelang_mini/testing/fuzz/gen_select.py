"""Selections, integer round trips and accumulating reductions; atomic adds across blocks.

`select`: O = f(X[, Y]) per tile, f built from `T.if_then_else`, `T.clamp`, `T.floor`, casts
through int8 / int32 (floor `%`) / bfloat16 / float16 / FP8, shifts by a run-time count,
`T.sigmoid`/`T.tanh`, and `if`/`elif`/`else` on the global row or column; then `T.reduce_*`
along axis 0 or 1 with `clear=False` in a stepped loop (`T.serial(start, stop, step)` or
`range`) into a tile first cleared or filled. The discontinuous operations only ever see
values that are exact in float32 (inputs, their doubles, negations, max/min, clamps to dyadic
bounds), so the float64 reference takes the same branch as every target.

`atomic`: split-K GEMMs whose K slices (a third grid axis) `T.atomic_add` their partial tile
(whole-tile or TileLang's element form) into C, and column sums added over row blocks into a
float32 / float16 / bfloat16 vector; the reference rounds after each block's add, in order.
"""
from __future__ import annotations

from .case import EPS, Tensor, build_case, input_names, kernel_source, reference_source, tolerance
from .gen_vector import FLOATS


def _exact(d, leaves, depth):
    """(dsl, ref) of an expression whose value is exact in float32 (|value| <= 8)."""
    if depth == 0 or d.boolean(0.3):
        return d.choice(leaves)
    k = d.choice(["dbl", "neg", "abs", "max", "min", "clamp", "ite"])
    a = _exact(d, leaves, depth - 1)
    if k == "dbl":
        return f"({a[0]} * 2.0)", f"(({a[1]}) * 2.0)"
    if k == "neg":
        return f"(-{a[0]})", f"(-({a[1]}))"
    if k == "abs":
        return f"T.abs({a[0]})", f"np.abs({a[1]})"
    if k == "clamp":
        lo, hi = d.choice([(-0.75, 1.5), (-2.0, 0.25), (0.0, 1.0)])
        return f"T.clamp({a[0]}, {lo}, {hi})", f"np.clip({a[1]}, {lo}, {hi})"
    b = _exact(d, leaves, depth - 1)
    if k in ("max", "min"):
        return f"T.{k}({a[0]}, {b[0]})", f"np.{k}imum({a[1]}, {b[1]})"
    c = _exact(d, leaves, depth - 1)
    t, op = d.choice([0.3, -0.6, 1.1, 0.0]), d.choice([">", "<", ">=", "<="])
    return (f"T.if_then_else({a[0]} {op} {t}, {b[0]}, {c[0]})",
            f"np.where(({a[1]}) {op} {t}, {b[1]}, {c[1]})")


def _select_expr(d, leaves):
    """(dsl, ref, features) of a float expression over exact parts and their integer images."""
    e = _exact(d, leaves, d.int(1, 3))
    k = d.choice(["i8", "i32mod", "floor", "lowp", "shift", "sig", "tanh", "plain"])
    if k == "i8":
        return (f'T.cast(T.cast(T.clamp({e[0]} * 8.0, -100.0, 100.0), "int8"), "float32") * 0.125',
                f"np.trunc(np.clip(({e[1]}) * 8.0, -100.0, 100.0)) * 0.125", {"cast_int8"})
    if k == "i32mod":
        return (f'T.cast(T.cast({e[0]} * 8.0, "int32") % 5, "float32")',
                f"np.mod(np.trunc(({e[1]}) * 8.0), 5)", {"cast_int32", "floor_mod"})
    if k == "floor":
        return f"T.floor({e[0]} * 4.0) * 0.25", f"np.floor(({e[1]}) * 4.0) * 0.25", {"floor"}
    if k == "lowp":
        dt = d.choice(["bfloat16", "float16", "float8_e4m3fn"])
        return (f'T.cast(T.cast({e[0]}, "{dt}"), "float32")', f"rnd({e[1]}, '{dt}')",
                {f"roundtrip_{dt}"})
    if k == "shift":  # a count that is not a constant: the run-time shift path
        return (f'T.cast(T.shift_right(T.cast(T.abs({e[0]}) * 64.0, "int32"), j % 4), "float32")'
                " * 0.015625",
                f"np.floor(np.trunc(np.abs({e[1]}) * 64.0) / 2.0 ** (jj % 4)) * 0.015625",
                {"shift_runtime"})
    if k == "sig":
        return f"T.sigmoid({e[0]})", f"(1.0 / (1.0 + np.exp(-({e[1]}))))", {"sigmoid"}
    if k == "tanh":
        return f"T.tanh({e[0]})", f"np.tanh({e[1]})", {"tanh"}
    return e[0], e[1], set()


_RED = {"sum": ("{o}.sum({a})", "s + {r}"), "abssum": ("np.abs({o}).sum({a})", "s + {r}"),
        "max": ("{o}.max({a})", "np.maximum(s, {r})"), "min": ("{o}.min({a})", "np.minimum(s, {r})"),
        "absmax": ("np.abs({o}).max({a})", "np.maximum(s, {r})")}


def gen_select(d, seed):
    M, N = d.dim(1, 130), d.dim(1, 100)
    bm, bn = d.choice([1, 2, 4, 8, 16, 32]), d.choice([8, 16, 32, 64])
    in_dt, out_dt = d.choice(FLOATS), d.choice(FLOATS)
    has_y, reduce = d.boolean(0.4), d.boolean(0.6)
    GM, GN = -(-M // bm), -(-N // bn)
    tensors = [Tensor("X", [M, N], in_dt, -2.0, 2.0)]
    tensors += [Tensor("Y", [M, N], "float32", -1.0, 1.0)] if has_y else []
    tensors.append(Tensor("O", [M, N], out_dt, output=True))
    feats = {"select", f"in_{in_dt}", f"out_{out_dt}"}
    rshape = sshape = None
    if reduce:
        axis, op = d.choice([0, 1]), d.choice(list(_RED))
        rshape, sshape = ((bn,), (GM, N)) if axis == 0 else ((bm,), (M, GN))
        tensors.append(Tensor("S", list(sshape), "float32", output=True))
        feats |= {f"reduce_{op}_axis{axis}", "reduce_accumulate"}
    leaves = [("x[i, j]", "x"), ("0.5", "0.5")] + [("y[i, j]", "y")] * has_y
    leaves += [(f'T.cast(by * {bm} + i, "float32") * 0.125', f"((by * {bm} + ii) * 0.125)")] \
        * d.boolean(0.3)
    dsl, ref_e, efeats = _select_expr(d, leaves)
    feats |= efeats
    allocs = [("x", d.choice(["fragment", "shared"]), (bm, bn), "float32"),
              ("o", "fragment", (bm, bn), "float32")]
    allocs += [("y", "fragment", (bm, bn), "float32")] * has_y
    allocs += [("s", "fragment", rshape, "float32")] if reduce else []
    src, marks = kernel_source(tensors, f"T.Kernel(T.ceildiv({N}, {bn}), T.ceildiv({M}, {bm}))"
                               " as (bx, by)", allocs)
    src.add(2, d.choice([f"T.copy(X[by * {bm}, bx * {bn}], x)",
                         f"T.copy(X[by * {bm}:(by + 1) * {bm}, bx * {bn}:(bx + 1) * {bn}], x)"]))
    if has_y:
        src.add(2, f"T.copy(Y[by * {bm}, bx * {bn}], y)")
    src.block(2, [f"for i, j in T.Parallel({bm}, {bn}):", f"    o[i, j] = {dsl}"])
    ref, ind = reference_source(input_names(tensors), [("O", (M, N))] + ([("S", sshape)] if reduce else []),
                                [("by", GM), ("bx", GN)])
    ref.add(ind, f"ii, jj = np.indices(({bm}, {bn}))")
    ref.add(ind, f"x = load(X, (by * {bm}, bx * {bn}), ({bm}, {bn}))")
    if has_y:
        ref.add(ind, f"y = load(Y, (by * {bm}, bx * {bn}), ({bm}, {bn}))")
    ref.add(ind, f"o = rnd(np.broadcast_to({ref_e}, ({bm}, {bn})), 'float32')")
    if d.boolean(0.5):  # if / elif / else on the global row or column
        r0, c0 = d.int(0, M), d.int(0, N)
        cond = d.choice([(f"by * {bm} + i < {r0}", f"(by * {bm} + ii < {r0})"),
                         (f"bx * {bn} + j >= {c0}", f"(bx * {bn} + jj >= {c0})")])
        src.block(2, [f"for i, j in T.Parallel({bm}, {bn}):", f"    if {cond[0]}:",
                      "        o[i, j] = o[i, j] * 2.0", f"    elif j < {bn // 3}:",
                      "        o[i, j] = o[i, j] + 3.0", "    else:", "        o[i, j] = o[i, j] - 1.0"])
        ref.add(ind, f"o = np.where({cond[1]}, o * 2.0, np.where(jj < {bn // 3}, o + 3.0, o - 1.0))")
        feats.add("if_elif_global_index")
    terms = 1
    if reduce:
        fill = d.choice([None, -0.5, 1.25])
        src.add(2, "T.clear(s)" if fill is None else f"T.fill(s, {fill})")
        ref.add(ind, f"s = np.full({rshape}, {fill or 0.0})")
        start, stop, step = d.choice([(0, 1, 1), (0, 3, 1), (1, 7, 2), (2, 9, 3), (0, 2, 5)])
        loop = (f"range({start}, {stop}, {step})" if step == 1 or d.boolean()
                else f"T.serial({start}, {stop}, {step})")
        src.block(2, [f"for t in {loop}:", f"    T.reduce_{op}(o, s, dim={axis}, clear=False)"])
        red, comb = _RED[op]
        ref.add(ind, f"for t in range({start}, {stop}, {step}):")
        ref.add(ind + 1, "s = " + comb.format(r=red.format(o="o", a=axis)))
        if axis == 0:
            src.add(2, d.choice([f"T.copy(s, S[by, bx * {bn}])",
                                 f"T.copy(s, S[by, bx * {bn}:(bx + 1) * {bn}])"]))
            ref.add(ind, f"store(S, (by, bx * {bn}), s[None, :])")
        else:
            src.add(2, f"T.copy(s, S[by * {bm}:(by + 1) * {bm}, bx])")
            ref.add(ind, f"store(S, (by * {bm}, bx), s[:, None])")
        terms = max(bm, bn) * len(range(start, stop, step))
    src.add(2, f"T.copy(o, O[by * {bm}, bx * {bn}])")
    ref.add(ind, f"store(O, (by * {bm}, bx * {bn}), rnd(o, '{out_dt}'))")
    ref.add(1, "return [O" + (", S]" if reduce else "]"))
    tol = {"O": tolerance(out_dt, EPS["float32"], 4), "S": tolerance("float32", EPS["float32"], terms)}
    return build_case("select", seed, src, tensors, ref, tol, feats, marks)


def gen_atomic(d, seed):
    if d.boolean(0.6):
        return _splitk(d, seed)
    M, N, bm = d.dim(1, 100), d.dim(1, 40), d.choice([1, 4, 16, 32])
    out = d.choice(FLOATS)
    tensors = [Tensor("X", [M, N], "float32"), Tensor("Y", [N], out, output=True)]
    src, marks = kernel_source(tensors, f"T.Kernel(T.ceildiv({M}, {bm})) as bx",
                               [("x", "fragment", (bm, N), "float32"),
                                ("s", "fragment", (N,), "float32")])
    src.block(2, [f"T.copy(X[bx * {bm}, 0], x)", "T.reduce_sum(x, s, dim=0)",
                  f"T.atomic_add(Y[0:{N}], s)"])
    nb = -(-M // bm)
    ref, ind = reference_source("X", [("Y", (N,))], [("bx", nb)])
    ref.add(ind, f"Y = rnd(Y + rnd(load(X, (bx * {bm}, 0), ({bm}, {N})).sum(0), 'float32'), '{out}')")
    ref.add(1, "return [Y]")
    rtol, atol = tolerance(out, EPS["float32"], M)
    return build_case("atomic", seed, src, tensors, ref, {"Y": (rtol * nb, atol * nb)},
                      {"atomic", "atomic_colsum", f"out_{out}"}, marks)


def _splitk(d, seed):
    dt, out = d.choice(["float16", "bfloat16"]), d.choice(["float32", "float32", "float16", "bfloat16"])
    M, N, K = d.dim(1, 100), d.dim(1, 70), d.dim(16, 300)
    bm, bn, bk = d.choice([16, 32, 64]), d.choice([16, 32, 64]), d.choice([16, 32, 64])
    S = d.int(1, 4)
    kper = -(-(-(-K // bk)) // S)
    tensors = [Tensor("A", [M, K], dt), Tensor("B", [K, N], dt), Tensor("C", [M, N], out, output=True)]
    src, marks = kernel_source(tensors, f"T.Kernel(T.ceildiv({N}, {bn}), T.ceildiv({M}, {bm}), "
                               f"{S}) as (bx, by, bz)",
                               [("a", "shared", (bm, bk), dt), ("b", "shared", (bk, bn), dt),
                                ("c", "fragment", (bm, bn), "float32")])
    src.block(2, ["T.clear(c)", f"for k in T.Pipelined({kper}, num_stages={d.int(1, 2)}):",
                  f"    T.copy(A[by * {bm}, (bz * {kper} + k) * {bk}], a)",
                  f"    T.copy(B[(bz * {kper} + k) * {bk}, bx * {bn}], b)", "    T.gemm(a, b, c)"])
    element = d.boolean()
    if element:
        src.block(2, [f"for i, j in T.Parallel({bm}, {bn}):",
                      f"    T.atomic_add(C[by * {bm} + i, bx * {bn} + j], c[i, j])"])
    else:
        src.add(2, f"T.atomic_add(C[by * {bm}, bx * {bn}], c)")
    ref, ind = reference_source("A, B", [("C", (M, N))], [("bz", S)])
    ref.add(ind, f"part = load(A, (0, bz * {kper * bk}), ({M}, {kper * bk})) @ "
                 f"load(B, (bz * {kper * bk}, 0), ({kper * bk}, {N}))")
    ref.add(ind, f"C = rnd(C + rnd(part, 'float32'), '{out}')")
    ref.add(1, "return [C]")
    rtol, atol = tolerance(out, EPS["float32"], K)
    return build_case("atomic", seed, src, tensors, ref, {"C": (rtol * S, atol * S)},
                      {"atomic", "atomic_splitk", "atomic_element" if element else "atomic_tile",
                       f"in_{dt}", f"out_{out}"}, marks)
