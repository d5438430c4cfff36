"""tilelang-ascend's AUTO_CV_COMBINE developer mode (`cv_combine`): `T.Kernel(n, is_npu=True)
as (cid, vid)` or `as (cid)` with threads=2, chip and developer allocations mixed, no
`T.Scope`: a cube GEMM per loop iteration feeding vector post-processing, the compiler placing
each statement on its core and the hand-offs between them. Drawn:

* who stages the GEMM's B tile: the cube from GM, or the vector cores through UB (UB -> L1),
  before the GEMM in the loop body (program order) or after it (the cube's read of iteration
  k waits for the vector's write of iteration k: two concurrent programs);
* the post-processing of the cube's result (L0C -> UB): in place on the hand-off tile
  (`c = c * s`, `T.tile.*` ops, a row max subtracted) or into another tile, accumulated over
  the iterations, each iteration's tile maybe copied out;
* maybe a hand-back: the processed tile cast to fp16 into L1 for a second GEMM whose result
  the vector cores accumulate (cube -> vector -> cube);
* the vector rows: split by the compiler (`as (cid)`, or vid unused), or written per AIV with
  vid (each AIV's half of the result rows, `C_L0[vid * h:...]`, and half of B's rows staged).

The reference follows the generator's own list of operations in float64."""
from __future__ import annotations

from .case import EPS, KERNEL_HEADER, Source, Tensor, build_case, input_names, tolerance
from .case import reference_source, signature


def _post(d, rows, bn, names):
    """The post-processing chain: (kernel lines, reference lines, features, ops). `names`:
    (x, y) the hand-off tile and the tile the chain writes (x itself: in place)."""
    x, y = names
    src, ref, feats = [], [], set()
    n = d.int(1, 3)
    cur = x  # the tile holding the current value
    for _ in range(n):
        kind = d.weighted(["scale_map", "scale_tile", "add_d", "relu", "rowmax", "exp"],
                          [3, 2, 2, 2, 2, 1])
        feats.add(f"cv_{kind}")
        if kind == "scale_map":
            c = d.choice([0.5, -1.5, 0.375, 2.0])
            src += [f"for i, j in T.Parallel({rows}, {bn}):", f"    {y}_ub[i, j] = {cur}_ub[i, j] * {c}"]
            ref.append(f"{y} = {cur} * {c}")
        elif kind == "scale_tile":
            c = d.choice([0.5, -0.75, 1.25])
            src.append(f"T.tile.muls({y}_ub, {cur}_ub, {c})")
            ref.append(f"{y} = {cur} * {c}")
        elif kind == "add_d":
            src.append(f"T.tile.add({y}_ub, {cur}_ub, d_ub)")
            ref.append(f"{y} = {cur} + d")
        elif kind == "relu":
            if d.boolean(0.5):
                src.append(f"T.tile.relu({y}_ub, {cur}_ub)")
            else:
                src += [f"for i, j in T.Parallel({rows}, {bn}):",
                        f"    {y}_ub[i, j] = T.max({cur}_ub[i, j], 0.0)"]
            ref.append(f"{y} = np.maximum({cur}, 0.0)")
        elif kind == "rowmax":  # a row vector of the tile's rows, subtracted back
            src += [f"T.reduce_max({cur}_ub, m_ub, dim=-1)",
                    f"for i, j in T.Parallel({rows}, {bn}):",
                    f"    {y}_ub[i, j] = {cur}_ub[i, j] - m_ub[i]"]
            ref.append(f"{y} = {cur} - {cur}.max(axis=1, keepdims=True)")
            feats.add("cv_row_vector")
        else:  # exp of a clamped value
            src += [f"T.tile.clamp({y}_ub, {cur}_ub, -2.0, 2.0)", f"T.tile.exp({y}_ub, {y}_ub)"]
            ref.append(f"{y} = np.exp(np.clip({cur}, -2.0, 2.0))")
        cur = y
    return src, ref, feats, n


def gen_cv_combine(d, seed):
    bm = d.choice([16, 32])
    bn = d.choice([16, 32])
    K = d.choice([32, 64])
    ni = d.int(1, 3)
    blocks = d.int(1, 2)
    M, N = blocks * bm, bn
    launch = d.weighted(["cid", "cid_vid", "vid_rows"], [3, 2, 2])
    per_aiv = launch == "vid_rows"
    rows = bm // 2 if per_aiv else bm
    stage = d.weighted(["cube", "vector_before", "vector_after"], [2, 2, 3])
    in_place = d.boolean(0.6)
    hand_back = d.boolean(0.3)
    per_iter_out = d.boolean(0.4)
    uses_d = d.boolean(0.5)
    feats = {"cv_combine", f"cv_launch_{launch}", f"cv_stage_{stage}",
             "cv_in_place" if in_place else "cv_out_of_place"}
    feats |= {"cv_hand_back"} if hand_back else set()
    feats |= {"cv_per_iteration_out"} if per_iter_out else set()
    n2 = d.choice([16, 32]) if hand_back else 0

    tensors = [Tensor("A", [M, K], "float16"), Tensor("B", [ni, K, N], "float16")]
    if uses_d:
        tensors.append(Tensor("D", [M, N], "float32"))
    if hand_back:
        tensors.append(Tensor("W", [N, n2], "float16"))
    tensors.append(Tensor("C", [M, N], "float32", output=True))
    if per_iter_out:
        tensors.append(Tensor("Z", [ni, M, N], "float32", output=True))
    if hand_back:
        tensors.append(Tensor("O", [M, n2], "float32", output=True))

    scale = 2.0 ** -max(0, (K.bit_length() - 1) // 2)  # the GEMM's sum of K products to O(1)
    y = "c" if in_place else "t"
    chain, chain_ref, chain_feats, nops = _post(d, rows, bn, ("c", y))
    if not uses_d:
        chain = [ln.replace("d_ub", "c_ub") for ln in chain]
        chain_ref = [ln.replace(" + d", " + c") for ln in chain_ref]
    feats |= chain_feats

    def alloc(kinds):
        return d.choice(kinds)
    src = Source(KERNEL_HEADER)
    src.add(0, signature(tensors))
    src.add(1, f"with T.Kernel({blocks}, is_npu=True, threads=2) as (cid):" if launch == "cid"
            else f"with T.Kernel({blocks}, is_npu=True) as (cid, vid):")
    ub_kinds = ["ub", "shared", "UB"]
    src.add(2, f'a_l1 = T.alloc_{alloc(["L1", "shared"])}(({bm}, {K}), "float16")')
    src.add(2, f'b_l1 = T.alloc_{alloc(["L1", "shared"])}(({K}, {bn}), "float16")')
    src.add(2, f'c_l0 = T.alloc_{alloc(["L0C", "fragment"])}(({bm}, {bn}), "float32")')
    kh = K // 2 if per_aiv else K
    if stage != "cube":
        src.add(2, f'b_ub = T.alloc_{alloc(ub_kinds)}(({kh}, {bn}), "float16")')
    for name in ["c", "acc"] + ([] if in_place else ["t"]) + (["d"] if uses_d else []):
        src.add(2, f'{name}_ub = T.alloc_{alloc(ub_kinds)}(({rows}, {bn}), "float32")')
    if "cv_row_vector" in feats:
        src.add(2, f'm_ub = T.alloc_{alloc(ub_kinds)}(({rows},), "float32")')
    l1_kinds, l0c_kinds = ["L1", "shared"], ["L0C", "fragment"]
    for name, kinds, shape, dtype in ([
            ("p_ub", ub_kinds, (rows, bn), "float16"), ("p_l1", l1_kinds, (bm, bn), "float16"),
            ("w_l1", l1_kinds, (bn, n2), "float16"), ("o_l0", l0c_kinds, (bm, n2), "float32"),
            ("o_ub", ub_kinds, (rows, n2), "float32"), ("oacc", ub_kinds, (rows, n2), "float32")]
            if hand_back else []):
        src.add(2, f'{name} = T.alloc_{alloc(kinds)}({shape}, "{dtype}")')
    row0 = f"cid * {bm} + vid * {rows}" if per_aiv else f"cid * {bm}"
    part = f"vid * {rows}:vid * {rows} + {rows}" if per_aiv else None
    src.add(2, f"T.copy(A[cid * {bm}, 0], a_l1)")
    if hand_back:
        src.add(2, "T.copy(W[0, 0], w_l1)")
        src.add(2, "T.tile.fill(oacc, 0.0)")
    if uses_d:
        src.add(2, f"T.copy(D[{row0}, 0], d_ub)")
    src.add(2, "T.tile.fill(acc_ub, 0.0)" if d.boolean(0.5) else "T.tile.clear(acc_ub)")
    src.add(2, f"for k in T.serial({ni}):")

    def gemm():
        src.add(3, "T.gemm_v0(a_l1, b_l1, c_l0, init=True)")
        src.add(3, f"T.copy(c_l0[{part}, :], c_ub)" if per_aiv else "T.copy(c_l0, c_ub)")

    def staging():
        if stage == "cube":
            src.add(3, "T.copy(B[k, 0, 0], b_l1)")
        elif per_aiv:  # each AIV stages half of B's rows
            src.add(3, f"T.copy(B[k, vid * {kh}, 0], b_ub)")
            src.add(3, f"T.copy(b_ub, b_l1[vid * {kh}:vid * {kh} + {kh}, :])")
        else:
            src.add(3, "T.copy(B[k, 0, 0], b_ub)")
            src.add(3, "T.copy(b_ub, b_l1)")
    if stage == "vector_after":
        gemm()
        staging()
    else:
        staging()
        gemm()
    tail = [f"T.tile.muls(c_ub, c_ub, {scale})", *chain, f"T.tile.add(acc_ub, acc_ub, {y}_ub)"]
    tail += [f"T.copy({y}_ub, Z[k, {row0}, 0])"] if per_iter_out else []
    if hand_back:  # cast to fp16 into L1 (each AIV its rows), a second GEMM, accumulated
        sub = f"[{part}, :]" if per_aiv else ""
        tail += [f"T.copy({y}_ub, p_ub)", f"T.copy(p_ub, p_l1{sub})",
                 "T.gemm_v0(p_l1, w_l1, o_l0, init=True)", f"T.copy(o_l0{sub}, o_ub)",
                 "T.tile.add(oacc, oacc, o_ub)"]
    src.block(3, tail)
    src.add(2, f"T.copy(acc_ub, C[{row0}, 0])")
    if hand_back:
        src.add(2, f"T.copy(oacc, O[{row0}, 0])")

    outs = [("C", (M, N))] + ([("Z", (ni, M, N))] if per_iter_out else []) + \
        ([("O", (M, n2))] if hand_back else [])
    ref, _ = reference_source(input_names(tensors), outs, [("b", blocks)])
    r = "b * " + str(bm)
    ref.block(2, [f"a = A[{r}:{r} + {bm}]"] + ([f"d = D[{r}:{r} + {bm}]"] if uses_d else []) +
              [f"acc = np.zeros(({bm}, {bn}))"] +
              ([f"oacc = np.zeros(({bm}, {n2}))"] if hand_back else []) +
              [f"for k in range({ni}):"])
    steps = [f"c = (a @ B[k]) * {scale}"] + ([] if in_place else ["t = c"]) + chain_ref
    steps.append(f"acc = acc + {y}")
    steps += [f"Z[k, {r}:{r} + {bm}] = {y}"] if per_iter_out else []
    steps += [f"oacc = oacc + rnd({y}, 'float16') @ W"] if hand_back else []
    ref.block(3, steps)
    ref.add(2, f"C[{r}:{r} + {bm}] = acc")
    if hand_back:
        ref.add(2, f"O[{r}:{r} + {bm}] = oacc")
    ref.add(1, "return [" + ", ".join(name for name, _ in outs) + "]")
    terms = K * ni + nops * ni
    rtol, atol = tolerance("float32", EPS["float32"], terms=terms, slack=64.0)
    tol = {"C": (rtol, atol), "Z": (rtol, atol)}
    if hand_back:  # the hand-back rounds to fp16: products of n2-long sums of rounded values
        tol["O"] = (4 * EPS["float16"], 4 * EPS["float16"] * max(1.0, float(bn * ni) ** 0.5))
    return build_case("cv_combine", seed, src, tensors, ref, {k: v for k, v in tol.items()
                                                              if k in dict(outs)}, feats)
