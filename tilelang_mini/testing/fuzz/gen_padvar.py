"""Row blocks of a float32 matrix with odd tails through constructs no other family draws:
`T.copy(X[...], x, pad_value=v)` (a clipped copy whose out-of-tensor elements read v, the tile
wider than the matrix, as a start or as a region of up to 2 rows fewer than the tile);
`T.reduce_abssum/absmax(x, r, dim=, clear=False)` onto a row or column of preset values (the
pads count); `T.alloc_var(dt, init=)` scalars updated at run time in a `T.serial` loop (a float
recurrence, an int counter under a data-dependent `if`) and read by a later map; `T.clamp` of a
map; `T.reinterpretcast` of the padded tile into int32 bits (exact); a `T.sync_all()` after
which each block reads a neighbour block's row statistics from a workspace tensor written before
it; or, without the barrier, that tensor a `jit(workspace_idx=)` scratch (the runtime allocates
it; the caller neither passes nor receives it) through which each block passes its own row.

The reference pads, reduces and runs the recurrences in float64 NumPy from the drawn values."""
from __future__ import annotations

from .case import EPS, Source, Tensor, build_case, tolerance
from .case import kernel_source


def gen_padvar(d, seed):
    M, N = d.dim(1, 40), d.dim(1, 40)
    bm = d.choice([1, 2, 4, 8])
    bn = N + d.int(0, 9)
    gm = -(-M // bm)
    pv = d.choice([0.0, -1.5, 2.0, 0.75])
    spell = d.choice(["start", "region"])
    rr = bm - d.int(0, min(2, bm - 1)) if spell == "region" else bm  # the region's rows
    dim = d.choice([0, 1])
    red = d.choice(["abssum", "absmax"])
    rlen = bm if dim == 1 else bn
    r0 = d.choice([0.0, 0.25, -1.0, 3.0])
    recur, count = d.boolean(0.7), d.boolean(0.6)
    s0, hcoef = d.choice([0.0, 0.5, -1.0]), d.choice([0.5, -0.25, 0.75])
    c0, trips = d.int(-3, 3), d.int(1, bn)
    clamp = (d.choice([-2.0, -1.0, 0.0]), d.choice([0.5, 1.0, 3.0]))
    bits, sync = d.boolean(0.5), d.boolean(0.5)
    scratch = not sync and d.boolean(0.6)  # WS a jit(workspace_idx=) scratch tensor instead
    feats = {"padvar", f"pad_{spell}", f"reduce_{red}_noclear_dim{dim}", "clamp"}
    feats |= {n for n, on in (("alloc_var_recur", recur), ("alloc_var_count", count),
                              ("reinterpretcast", bits), ("sync_all", sync),
                              ("workspace_idx", scratch)) if on}
    if pv:
        feats.add("pad_value")
    tensors = [Tensor("X", [M, N], "float32", -2.0, 2.0)]
    if sync or scratch:  # overwritten first
        tensors.append(Tensor("WS", [gm, rlen], "float32", -5.0, 5.0, workspace=scratch))
    tensors += [Tensor("Y", [M, N], "float32", output=True),
                Tensor("R", [gm, rlen], "float32", output=True)]
    if bits:
        tensors.append(Tensor("Yb", [M, N], "int32", output=True))
    if sync or scratch:
        tensors.append(Tensor("Rn", [gm, rlen], "float32", output=True))

    src, _ = kernel_source(tensors, f"T.Kernel({gm}) as bx", [
        ("x", "fragment", (bm, bn), "float32"), ("r", "fragment", (rlen,), "float32")]
        + ([("xb", "fragment", (bm, bn), "int32")] if bits else []))
    if recur:
        src.add(2, f'sv = T.alloc_var("float32", init={s0})')
    if count:
        src.add(2, f'cnt = T.alloc_var("int32", init={c0})')
    region = f"X[bx * {bm}:bx * {bm} + {rr}, 0:{N}]" if spell == "region" else f"X[bx * {bm}, 0]"
    src.add(2, f"T.copy({region}, x" + (f", pad_value={pv})" if pv or d.boolean(0.5) else ")"))
    src.add(2, f"T.fill(r, {r0})")
    src.add(2, f"T.reduce_{red}(x, r, dim={dim}, clear=False)")
    if bits:
        src.add(2, 'T.reinterpretcast(xb, x, "int32_t")')
    if recur or count:
        src.add(2, f"for k in T.serial({trips}):")
        if recur:
            src.add(3, f"sv = sv * {hcoef} + x[k % {bm}, k]")
        if count:
            src.add(3, f"if x[(k * 3) % {bm}, k] > 0:")
            src.add(4, "cnt += 1")
    add = (" + sv" if recur else "") + (' + T.cast(cnt, "float32")' if count else "")
    src.add(2, f"for i, j in T.Parallel({bm}, {bn}):")
    ri = "i" if dim == 1 else "j"
    src.add(3, f"x[i, j] = T.clamp(x[i, j]{add}, {clamp[0]}, {clamp[1]}) * r[{ri}]")
    src.add(2, f"T.copy(x, Y[bx * {bm}, 0])")
    src.add(2, f"T.copy(r, R[bx, 0:{rlen}])")
    if bits:
        src.add(2, f"T.copy(xb, Yb[bx * {bm}, 0])")
    if sync or scratch:  # after the barrier the neighbour's row, else the block's own
        src.add(2, f"T.copy(r, WS[bx, 0:{rlen}])")
        if sync:
            src.add(2, "T.sync_all()")
        src.add(2, f'rn = T.alloc_fragment(({rlen},), "float32")')
        src.add(2, f"T.copy(WS[{f'(bx + 1) % {gm}' if sync else 'bx'}, 0:{rlen}], rn)")
        src.add(2, f"for i in T.Parallel({rlen}):")
        src.add(3, "rn[i] = rn[i] * 2.0")
        src.add(2, f"T.copy(rn, Rn[bx, 0:{rlen}])")

    ref = Source()
    ref.add(0, "def reference(X" + (", WS" if sync else "") + "):")
    ref.block(1, [f"Y = np.zeros(({M}, {N}))", f"R = np.zeros(({gm}, {rlen}))",
                  f"Yb = np.zeros(({M}, {N}))", f"Xp = np.full(({gm * bm}, {bn}), {pv})",
                  f"Xp[:{M}, :{N}] = X", f"for b in range({gm}):",
                  f"    x = Xp[b * {bm}:(b + 1) * {bm}].copy()",
                  f"    x[{rr}:] = {pv}",
                  f"    red = np.abs(x).{'sum' if red == 'abssum' else 'max'}(axis={dim})",
                  f"    r = {'r0 + red' if red == 'abssum' else 'np.maximum(r0, red)'}".replace(
                      "r0", repr(r0)),
                  "    store(R, (b, 0), r[None, :])",
                  f"    store(Yb, (b * {bm}, 0), x.astype(np.float32).view(np.int32))",
                  f"    sv, cnt = {s0}, {c0}",
                  f"    for k in range({trips}):",
                  f"        sv = sv * {hcoef} + x[k % {bm}, k]",
                  f"        cnt += x[(k * 3) % {bm}, k] > 0",
                  f"    v = np.clip(x{' + sv' if recur else ''}{' + cnt' if count else ''}, "
                  f"{clamp[0]}, {clamp[1]})",
                  f"    v = v * {'r[:, None]' if dim == 1 else 'r[None, :]'}",
                  f"    store(Y, (b * {bm}, 0), v)"])
    outs = ["Y", "R"] + (["Yb"] if bits else [])
    if sync or scratch:
        ref.add(1, f"Rn = np.roll(R, {-1 if sync else 0}, axis=0) * 2.0")
        outs.append("Rn")
    ref.add(1, f"return [{', '.join(outs)}]")
    t = tolerance("float32", EPS["float32"], terms=bn * bm, slack=32.0)
    return build_case("padvar", seed, src, tensors, ref,
                      {"Y": t, "R": t, "Rn": t, "Yb": (0.0, 0.0)}, feats)
