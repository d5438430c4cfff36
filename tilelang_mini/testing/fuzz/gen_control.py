"""Control-flow and scalar families: 3-D grids, `if` on block indices, `T.macro`, `T.unroll`,
trace-time Python loops, scalar `alloc_var` accumulators (`acc += ...` in serial loops) used in
values, and big integer literals."""
from __future__ import annotations

from .case import EPS, KERNEL_HEADER, Tensor, build_case, kernel_source, reference_source, tolerance
from .gen_vector import FLOATS

MACRO = ["@T.macro", "def axpb(buf, a, b, rows, cols):",
         "    for i, j in T.Parallel(rows, cols):",
         "        buf[i, j] = buf[i, j] * a + b", "", ""]


def gen_control(d, seed):
    """O[b] = f(X[b]) per (column block, row block, batch), f built from the control features:
    each adds kernel statements on the tile x (a map is `P: statement`) and reference lines."""
    B, M, N = d.int(1, 3), d.int(1, 70), d.int(1, 90)
    bm, bn = d.choice([4, 8, 16, 32]), d.choice([8, 16, 32, 64])
    dt = d.choice(FLOATS)
    feats = {"control", "grid3d", f"in_{dt}"}
    use_macro, use_if, use_unroll = d.boolean(0.5), d.boolean(0.5), d.boolean(0.4)
    use_acc, use_trace_loop, big_int = d.boolean(0.5), d.boolean(0.3), d.boolean(0.15)
    tensors = [Tensor("X", [B, M, N], dt, -2.0, 2.0), Tensor("O", [B, M, N], "float32", output=True)]
    header = list(KERNEL_HEADER)
    if use_macro:
        header = header[:-1] + MACRO + header[-1:]
        feats.add("macro")
    tile = f"[bz, by * {bm}:(by + 1) * {bm}, bx * {bn}:(bx + 1) * {bn}]"
    src, _ = kernel_source(tensors, f"T.Kernel(T.ceildiv({N}, {bn}), T.ceildiv({M}, {bm}), {B}) "
                           "as (bx, by, bz)", [("x", "fragment", (bm, bn), "float32")], header)
    src.add(2, f"T.copy(X{tile}, x)")
    ref, ind = reference_source("X", [("O", (B, M, N))], [("bz", B), ("by", f"cdiv({M}, {bm})"),
                                                          ("bx", f"cdiv({N}, {bn})")])
    ref.add(ind, f"x = load(X[bz], (by * {bm}, bx * {bn}), ({bm}, {bn}))")
    P = f"for i, j in T.Parallel({bm}, {bn}):"

    def feature(name, dsl, ref_lines):
        """The feature's kernel lines (relative indentation kept; `P: s` is s in a T.Parallel
        over the tile) and reference lines."""
        feats.add(name)
        for line in dsl:
            pre, par, stmt = line.partition("P: ")
            src.block(2, [pre + P, f"{pre}    {stmt}"] if par else [line])
        ref.block(ind, ref_lines)

    terms = 2
    if use_acc:
        R = d.int(1, 6)
        c = d.choice([0.5, 0.25, 1.5])
        loop = d.choice([f"T.serial({R})", f"range({R})", f"T.unroll({R})", f"range(1, {R + 1}, 2)"])
        ts = loop if loop.startswith("range(1,") else f"range({R})"
        feature("scalar_acc", ['s = T.alloc_var("float32")', "s = 1.0", f"for t in {loop}:",
                               f"    s += {c} * t", "P: x[i, j] = x[i, j] * s"],
                [f"s = 1.0 + sum({c} * t for t in {ts})", "x = x * s"])
        terms += R
    if use_if:
        cond = d.choice(["bz == 0", "bx % 2 == 1", "by >= 1 and bz < 2", "not (bx == by)"])
        feature("if_block_index", [f"if {cond}:", "    P: x[i, j] = x[i, j] + 1.0", "else:",
                                   "    P: x[i, j] = x[i, j] - 0.5"],
                [f"x = x + 1.0 if ({cond}) else x - 0.5"])
    if use_unroll:
        R = d.int(1, 4)
        feature("unroll", [f"for t in T.unroll({R}):", '    P: x[i, j] = x[i, j] * 0.5 + T.cast(t, "float32")'],
                [f"for t in range({R}):", "    x = x * 0.5 + t"])
    if use_trace_loop:
        pairs = [(0.5, 1.0), (2.0, -0.25)][:d.int(1, 2)]
        feature("trace_loop", [f"for a, b in {pairs!r}:", "    P: x[i, j] = T.min(x[i, j] * a, 100.0) + b"],
                [f"for a, b in {pairs!r}:", "    x = np.minimum(x * a, 100.0) + b"])
    if use_macro:
        a, b = d.choice([(0.5, 1.0), (-1.0, 0.25), (2.0, 0.0)])
        feature("macro", [f"axpb(x, {a}, {b}, {bm}, {bn})"], [f"x = x * {a} + {b}"])
    if big_int:  # 2**62: in int64
        feature("big_int_literal", ["P: x[i, j] = (x[i, j] + 4611686018427387904) * 1e-18"],
                ["x = (x + 4611686018427387904.0) * 1e-18"])
    src.add(2, f"T.copy(x, O{tile})")
    ref.add(ind, f"store(O[bz], (by * {bm}, bx * {bn}), x)")
    ref.add(1, "return [O]")
    return build_case("control", seed, src, tensors, ref,
                      {"O": tolerance("float32", EPS["float32"], terms, slack=16.0)}, feats)
