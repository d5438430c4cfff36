"""The `fitting` family: `T.Pipelined` row-block loops whose stage versions do not fit UB, so
pipeline_fitting must cap the versions of the overflowing scope or, where even one version each
does not fit the unrolled stages, run the loop serially (pipeline_stages' docstrings); and
plan_memory must share the bytes of temporaries that die within an iteration.

Each iteration loads an R x C float32 block of X into t0, computes a chain of k temporaries
t1..tk (each a random expression of the one before, some also of an earlier one, so lifetimes
overlap by different amounts), writes tk out and optionally adds it into an accumulator carried
across the loop. The tile size is drawn against ascend910b's 192 KiB UB per vector core (the
rows split between the two): all the buffers side by side always fit (the loop can run
serially), a share u of that budget each, so two or three stages of them mostly do not. The
trip count is a constant or read from a tensor (the run-time unrolling with guarded tails).
"""
from __future__ import annotations

from .case import EPS, Tensor, build_case, kernel_source, reference_source, tolerance
from .exprs import Expr, gen_expr

UB_910B = 192 * 1024


def _value(d, i: int, bounds: list) -> tuple:
    """(kernel expression, reference expression, bound, node count) of t<i>: a random
    expression (exprs.gen_expr) over t<i-1> and maybe an earlier temporary (x is t0), which
    then stays live until here; clamped to [-8, 8] when its bound grows past 50."""
    leaves = [Expr(f"t{i - 1}[i, j]", f"t{i - 1}", bound=bounds[i - 1])]
    if i >= 2 and d.boolean(0.5):
        j = d.int(0, i - 2)
        leaves.append(Expr(f"t{j}[i, j]", f"t{j}", bound=bounds[j]))
    e = gen_expr(d, leaves, d.int(1, 3), allow_casts=False)
    if f"t{i - 1}[" not in e.dsl:  # keep the chain: t<i> reads t<i-1>
        e = Expr(f"({e.dsl} + t{i - 1}[i, j] * 0.5)", f"({e.ref} + t{i - 1} * 0.5)", e.nodes + 2,
                 bound=e.bound + bounds[i - 1] * 0.5)
    if e.bound > 50:
        return (f"T.min(T.max({e.dsl}, -8.0), 8.0)", f"np.clip({e.ref}, -8.0, 8.0)", 8.0,
                e.nodes + 2)
    return e.dsl, e.ref, e.bound, e.nodes


def gen_fitting(d, seed):
    C = d.choice([32, 64, 128, 256])
    k = d.int(2, 4)
    acc = d.boolean(0.5)
    nb = 1 + k + acc  # x, t1..tk, acc
    u = d.real(0.3, 1.0)
    half = max(8, int(u * UB_910B / nb / (C * 4)) // 8 * 8)  # rows per vector core
    R = 2 * half
    n = d.int(1, 4)
    stages = d.int(2, 3)
    rows = n * R - (d.int(0, R - 1) if d.boolean(0.4) else 0)  # maybe a short last block
    runtime = d.boolean(0.3)  # the trip count read from a tensor (guarded tail iterations)
    feats = {"fitting", f"stages{stages}", f"fitting_k{k}"} | ({"fitting_acc"} if acc else set())
    tensors = [Tensor("X", [rows, C], "float32", -2.0, 2.0)]
    if runtime:
        feats.add("fitting_runtime_trips")
        tensors.append(Tensor("NT", [1], "int32", n, n))
    tensors.append(Tensor("Y", [rows, C], "float32", output=True))
    if acc:
        tensors.append(Tensor("A", [R, C], "float32", output=True))
    allocs = [(f"t{i}", "fragment", (R, C), "float32") for i in range(k + 1)]
    allocs += [("acc", "fragment", (R, C), "float32")] if acc else []
    src, marks = kernel_source(tensors, "T.Kernel(1, threads=128)", allocs)
    if acc:
        src.add(2, "T.clear(acc)")
    trips = "NT[0]" if runtime else n
    marks["loop"] = src.add(2, f"for k in T.Pipelined({trips}, num_stages={stages}):")
    src.add(3, f"T.copy(X[k * {R}, 0], t0)")
    ref, _ = reference_source("X, NT" if runtime else "X", [("Y", (rows, C))] + ([("A", (R, C))] if acc else []))
    ref.add(1, f"for k in range({n}):")
    ref.add(2, f"t0 = load(X, (k * {R}, 0), ({R}, {C}))")
    bounds, nodes = [2.0], 0
    for i in range(1, k + 1):
        expr, rexpr, bound, n_ops = _value(d, i, bounds)
        bounds.append(bound)
        nodes += n_ops
        src.block(3, [f"for i, j in T.Parallel({R}, {C}):", f"    t{i}[i, j] = {expr}"])
        ref.add(2, f"t{i} = {rexpr}")
    src.add(3, f"T.copy(t{k}, Y[k * {R}, 0])")
    ref.add(2, f"store(Y, (k * {R}, 0), t{k})")
    if acc:
        src.block(3, [f"for i, j in T.Parallel({R}, {C}):", f"    acc[i, j] += t{k}[i, j]"])
        ref.add(2, f"A = A + t{k}")
        src.add(2, "T.copy(acc, A)")
    ref.add(1, "return [Y" + (", A]" if acc else "]"))
    tols = {"Y": tolerance("float32", EPS["float32"], terms=nodes, slack=32.0),
            "A": tolerance("float32", EPS["float32"], terms=nodes * n, slack=32.0)}
    return build_case("fitting", seed, src, tensors, ref, tols, feats, marks)
