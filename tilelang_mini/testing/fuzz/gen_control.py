"""Control-flow and scalar families: 3-D grids, `if` on block indices, `T.macro`, `T.unroll`,
trace-time Python loops, scalar `alloc_var` accumulators (`acc += ...` in serial loops) used in
values, and big integer literals."""
from __future__ import annotations

from .case import EPS, KERNEL_HEADER, Source, Tensor, tolerance
from .gen_vector import FLOATS, _case, _sig

MACRO = ["@T.macro", "def axpb(buf, a, b, rows, cols):",
         "    for i, j in T.Parallel(rows, cols):",
         "        buf[i, j] = buf[i, j] * a + b", "", ""]


def gen_control(d, seed):
    """O[b] = f(X[b]) per (column block, row block, batch), f built from the control features."""
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
    src = Source(header)
    src.add(0, _sig(tensors))
    src.add(1, f"with T.Kernel(T.ceildiv({N}, {bn}), T.ceildiv({M}, {bm}), {B}) as (bx, by, bz):")
    src.add(2, f'x = T.alloc_fragment(({bm}, {bn}), "float32")')
    src.add(2, f"T.copy(X[bz, by * {bm}:(by + 1) * {bm}, bx * {bn}:(bx + 1) * {bn}], x)")
    ref = Source()
    ref.add(0, "def reference(X):")
    ref.add(1, f"O = np.zeros(({B}, {M}, {N}))")
    ref.add(1, f"for bz in range({B}):")
    ref.add(2, f"for by in range(cdiv({M}, {bm})):")
    ref.add(3, f"for bx in range(cdiv({N}, {bn})):")
    ref.add(4, f"x = load(X[bz], (by * {bm}, bx * {bn}), ({bm}, {bn}))")
    P = f"for i, j in T.Parallel({bm}, {bn}):"
    terms = 2
    if use_acc:
        feats.add("scalar_acc")
        R = d.int(1, 6)
        c = d.choice([0.5, 0.25, 1.5])
        loop = d.choice([f"T.serial({R})", f"range({R})", f"T.unroll({R})", f"range(1, {R + 1}, 2)"])
        src.add(2, 's = T.alloc_var("float32")')
        src.add(2, "s = 1.0")
        src.add(2, f"for t in {loop}:")
        src.add(3, f"s += {c} * t")
        ts = {"range(1, %d, 2)" % (R + 1): f"range(1, {R + 1}, 2)"}.get(loop, f"range({R})")
        ref.add(4, f"s = 1.0 + sum({c} * t for t in {ts})")
        src.add(2, P)
        src.add(3, "x[i, j] = x[i, j] * s")
        ref.add(4, "x = x * s")
        terms += R
    if use_if:
        feats.add("if_block_index")
        cond_dsl, cond_ref = d.choice([("bz == 0", "bz == 0"), ("bx % 2 == 1", "bx % 2 == 1"),
                                       ("by >= 1 and bz < 2", "by >= 1 and bz < 2"),
                                       ("not (bx == by)", "not (bx == by)")])
        src.add(2, f"if {cond_dsl}:")
        src.add(3, P)
        src.add(4, "x[i, j] = x[i, j] + 1.0")
        src.add(2, "else:")
        src.add(3, P)
        src.add(4, "x[i, j] = x[i, j] - 0.5")
        ref.add(4, f"x = x + 1.0 if ({cond_ref}) else x - 0.5")
    if use_unroll:
        feats.add("unroll")
        R = d.int(1, 4)
        src.add(2, f"for t in T.unroll({R}):")
        src.add(3, P)
        src.add(4, 'x[i, j] = x[i, j] * 0.5 + T.cast(t, "float32")')
        ref.add(4, f"for t in range({R}):")
        ref.add(5, "x = x * 0.5 + t")
    if use_trace_loop:
        feats.add("trace_loop")
        pairs = [(0.5, 1.0), (2.0, -0.25)][:d.int(1, 2)]
        src.add(2, f"for a, b in {pairs!r}:")
        src.add(3, P)
        src.add(4, "x[i, j] = T.min(x[i, j] * a, 100.0) + b")
        ref.add(4, f"for a, b in {pairs!r}:")
        ref.add(5, "x = np.minimum(x * a, 100.0) + b")
    if use_macro:
        a, b = d.choice([(0.5, 1.0), (-1.0, 0.25), (2.0, 0.0)])
        src.add(2, f"axpb(x, {a}, {b}, {bm}, {bn})")
        ref.add(4, f"x = x * {a} + {b}")
    if big_int:
        feats.add("big_int_literal")
        src.add(2, P)
        src.add(3, "x[i, j] = (x[i, j] + 4611686018427387904) * 1e-18")  # 2**62: in int64
        ref.add(4, "x = (x + 4611686018427387904.0) * 1e-18")
    src.add(2, f"T.copy(x, O[bz, by * {bm}:(by + 1) * {bm}, bx * {bn}:(bx + 1) * {bn}])")
    ref.add(4, f"store(O[bz], (by * {bm}, bx * {bn}), x)")
    ref.add(1, "return [O]")
    return _case("control", seed, src, tensors, ref,
                 {"O": tolerance("float32", EPS["float32"], terms, slack=16.0)}, feats, {})
