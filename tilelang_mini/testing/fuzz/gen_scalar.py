"""Families with scalars read from global memory: `alloc_var` loaded from an int tensor and used
in an index or an `if` (row gather, grouped/MoE GEMM), and loop bounds read from tensors
(`T.serial(KS[bx] // bn, T.ceildiv(KE[bx], bn))`).
"""
from __future__ import annotations

from .case import EPS, KERNEL_HEADER, Source, Tensor, tolerance
from .gen_cube import IN_DTYPES
from .gen_vector import FLOATS, _case, _sig


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
    src = Source(KERNEL_HEADER)
    src.add(0, _sig(tensors))
    src.add(1, f"with T.Kernel({G}) as bx:")
    src.add(2, 'g = T.alloc_var("int32")')
    src.add(2, f'x = T.alloc_fragment(({rows}, {N}), "float32")')
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
    ref = Source()
    ref.add(0, "def reference(X, IDX):")
    ref.add(1, f"O = np.zeros(({G * rows}, {N}))")
    ref.add(1, f"for b in range({G}):")
    ref.add(2, "g = int(IDX[b])")
    ref.add(2, "if g >= 0:" if guard else "if True:")
    ref.add(3, f"O[b * {rows}:(b + 1) * {rows}] = load(X, (g, 0), ({rows}, {N})) * {c} + g")
    ref.add(1, "return [O]")
    return _case("gather", seed, src, tensors, ref, {"O": tolerance("float32", EPS["float32"], 2)},
                 feats, {})


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
    src = Source(KERNEL_HEADER)
    src.add(0, _sig(tensors))
    src.add(1, f"with T.Kernel(T.ceildiv({N}, {bn}), {gm}) as (bx, by):")
    src.add(2, f'A_s = T.alloc_shared(({bm}, {bk}), "{dt}")')
    src.add(2, f'B_s = T.alloc_shared(({bk}, {bn}), "{dt}")')
    src.add(2, f'C_f = T.alloc_fragment(({bm}, {bn}), "float32")')
    src.add(2, 'g = T.alloc_var("int32")')
    src.add(2, "g = GID[by]")
    src.add(2, "T.clear(C_f)")
    src.add(2, "if g >= 0:")
    src.add(3, f"for k in T.Pipelined(T.ceildiv({K}, {bk}), num_stages={d.int(1, 3)}):")
    src.add(4, f"T.copy(A[by * {bm}, k * {bk}], A_s)")
    if three_d:
        src.add(4, f"T.copy(W[g, k * {bk}:(k + 1) * {bk}, bx * {bn}:(bx + 1) * {bn}], B_s)")
    else:
        src.add(4, f"T.copy(W[g * {K} + k * {bk}, bx * {bn}], B_s)")
    src.add(4, "T.gemm(A_s, B_s, C_f)")
    src.add(2, f"T.copy(C_f, C[by * {bm}, bx * {bn}])")
    ref = Source()
    ref.add(0, "def reference(A, W, GID):")
    ref.add(1, f"C = np.zeros(({M}, {N}))")
    ref.add(1, f"Cs = np.zeros(({M}, {N}))")
    ref.add(1, f"Wf = W.reshape({E * K}, {N})")
    ref.add(1, f"for by in range({gm}):")
    ref.add(2, "g = int(GID[by])")
    ref.add(2, "if g < 0:")
    ref.add(3, "continue")
    ref.add(2, f"for bx in range(cdiv({N}, {bn})):")
    ref.add(3, f"c = np.zeros(({bm}, {bn}))")
    ref.add(3, f"s = np.zeros(({bm}, {bn}))")
    ref.add(3, f"for k in range(cdiv({K}, {bk})):")
    ref.add(4, f"a = load(A, (by * {bm}, k * {bk}), ({bm}, {bk}))")
    if three_d:  # the 3-d region clips at the expert's own K
        ref.add(4, f"b = load(W[g], (k * {bk}, bx * {bn}), ({bk}, {bn}))")
    else:  # rows past K belong to the next expert (A is zero there)
        ref.add(4, f"b = load(Wf, (g * {K} + k * {bk}, bx * {bn}), ({bk}, {bn}))")
    ref.add(4, "c = c + a @ b")
    ref.add(4, "s = s + np.abs(a) @ np.abs(b)")
    ref.add(3, f"store(C, (by * {bm}, bx * {bn}), c)")
    ref.add(3, f"store(Cs, (by * {bm}, bx * {bn}), s)")
    ref.add(1, "return [(C, Cs)]")
    return _case("grouped_gemm", seed, src, tensors, ref,
                 {"C": tolerance("float32", EPS["float32"], terms=K)}, feats, {})


def gen_dyn_bounds(d, seed):
    """Loop bounds read from tensors: each block sums (or multiplies) only its [KS, KE) range of
    column blocks."""
    cube = d.boolean(0.4)
    G = d.int(1, 6)
    bm, bn = d.choice([4, 8, 16, 32]), d.choice([16, 32, 64])
    N = d.int(1, 200)
    nb = -(-N // bn)
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
    out = Tensor("O", [G * bm, Nout] if cube else [G * bm], "float32", output=True)
    tensors.append(out)
    lo, hi = f"KS[bx] // {bn}", f"T.ceildiv(KE[bx], {bn})"
    loop = {"two_arg": f"T.serial({lo}, {hi})", "range": f"range({lo}, {hi})",
            "one_arg": f"T.serial({hi})"}[form]
    src = Source(KERNEL_HEADER)
    src.add(0, _sig(tensors))
    src.add(1, f"with T.Kernel({G}) as bx:")
    if cube:
        src.add(2, f'A_s = T.alloc_shared(({bm}, {bn}), "{dt}")')
        src.add(2, f'B_s = T.alloc_shared(({bn}, {Nout}), "{dt}")')
        src.add(2, f'C_f = T.alloc_fragment(({bm}, {Nout}), "float32")')
        src.add(2, "T.clear(C_f)")
        src.add(2, f"for k in {loop}:")
        src.add(3, f"T.copy(A[bx * {bm}, k * {bn}], A_s)")
        src.add(3, f"T.copy(B[k * {bn}, 0], B_s)")
        src.add(3, "T.gemm(A_s, B_s, C_f)")
        src.add(2, f"T.copy(C_f, O[bx * {bm}, 0])")
    else:
        src.add(2, f'x = T.alloc_fragment(({bm}, {bn}), "float32")')
        src.add(2, f'acc = T.alloc_fragment(({bm},), "float32")')
        src.add(2, "T.clear(acc)")
        src.add(2, f"for k in {loop}:")
        src.add(3, f"T.copy(X[bx * {bm}, k * {bn}], x)")
        src.add(3, "T.reduce_sum(x, acc, dim=1, clear=False)")
        src.add(2, f"T.copy(acc, O[bx * {bm}])")
    ref = Source()
    args = "A, B, KS, KE" if cube else "X, KS, KE"
    ref.add(0, f"def reference({args}):")
    ref.add(1, f"O = np.zeros({tuple(out.shape)!r})")
    ref.add(1, f"Os = np.zeros({tuple(out.shape)!r})")
    ref.add(1, f"for bx in range({G}):")
    start = "0" if form == "one_arg" else f"int(KS[bx]) // {bn}"
    ref.add(2, f"for k in range({start}, cdiv(int(KE[bx]), {bn})):")
    if cube:
        ref.add(3, f"a = load(A, (bx * {bm}, k * {bn}), ({bm}, {bn}))")
        ref.add(3, f"b = load(B, (k * {bn}, 0), ({bn}, {Nout}))")
        ref.add(3, f"O[bx * {bm}:(bx + 1) * {bm}] += a @ b")
        ref.add(3, f"Os[bx * {bm}:(bx + 1) * {bm}] += np.abs(a) @ np.abs(b)")
    else:
        ref.add(3, f"x = load(X, (bx * {bm}, k * {bn}), ({bm}, {bn}))")
        ref.add(3, f"O[bx * {bm}:(bx + 1) * {bm}] += x.sum(axis=1)")
        ref.add(3, f"Os[bx * {bm}:(bx + 1) * {bm}] += np.abs(x).sum(axis=1)")
    ref.add(1, "return [(O, Os)]")
    return _case("dyn_bounds", seed, src, tensors, ref,
                 {"O": tolerance("float32", EPS["float32"], terms=N)}, feats, {})
