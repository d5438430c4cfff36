"""Several launches in one prim_func (TileLang's split + combine kernels): a split launch
reduces slabs of X's rows (sum / max / absmax along dim 0) into a workspace, a `T.alloc_global`
or a caller-visible output, and a combine launch on its own grid reduces the slabs' results by
column chunks, scaled by a trace-time value computed between the launches; the two phases are
two `with T.Kernel` blocks, or one block split by `T.sync_grid()` (both phases on one grid).
Optionally a third launch walks (row block, column block) tiles with `T.Persistent` over fewer
blocks than tiles and writes X minus the combined row, reading what the second launch wrote.
Awkward sizes: slabs and chunks with tails, grids of 1.

The reference runs the launches in order on float64 NumPy tiles, zero-padded as clipped copies
are."""
from __future__ import annotations

from .case import EPS, Source, Tensor, build_case, tolerance
from .case import KERNEL_HEADER


def gen_launches(d, seed):
    M, N = d.dim(1, 90), d.dim(1, 70)
    S = d.int(1, 5)
    rb = -(-M // S)
    bn = d.choice([8, 16, 32])
    red = d.choice(["sum", "max", "absmax"])
    comb = d.choice(["sum", "max"])
    ws = d.choice(["global", "output"])
    sync = d.boolean(0.35)
    third = d.boolean(0.5)
    feats = {"launches", f"launch_ws_{ws}", f"launch_{red}_{comb}"}
    feats |= {"sync_grid"} if sync else {"two_launches"}
    if third:
        feats.add("persistent")
    gn = -(-N // bn)
    cb = -(-N // S)  # sync_grid: the combine phase's column chunk per block (same grid)
    tensors = [Tensor("X", [M, N], "float32", -2.0, 2.0)]
    if ws == "output":
        tensors.append(Tensor("Part", [S, N], "float32", output=True))
    tensors.append(Tensor("Y", [N], "float32", output=True))
    if third:
        tensors.append(Tensor("Z", [M, N], "float32", output=True))
    eager = d.boolean(0.3)  # the eager @jit style: T.const shapes, T.empty outputs returned
    if eager:
        feats.add("launches_eager")
        src = Source(KERNEL_HEADER[:3])
        src.add(0, "def main(X):")
        src.add(1, 'Mc, Nc = T.const("Mc, Nc")')
        src.add(1, 'X: T.Tensor((Mc, Nc), "float32")')
        for t in tensors[1:]:
            src.add(1, f'{t.name} = T.empty({tuple(t.shape)!r}, "{t.dtype}")')
    else:
        src = Source(KERNEL_HEADER)
        src.add(0, "def main(" + ", ".join(f'{t.name}: T.Tensor({tuple(t.shape)!r}, "{t.dtype}")'
                                             for t in tensors) + "):")
    part = "Part" if ws == "output" else "part"
    if ws == "global":
        src.add(1, f'part = T.alloc_global(({S}, {N}), "float32")')
    src.block(1, [f"with T.Kernel({S}) as bx:", f'    x = T.alloc_fragment(({rb}, {N}), "float32")',
                  f'    cs = T.alloc_fragment(({N},), "float32")', f"    T.copy(X[bx * {rb}, 0], x)",
                  f"    T.reduce_{red}(x, cs, dim=0)", f"    T.copy(cs, {part}[bx, 0:{N}])"])
    scale = d.choice([1.0, 0.5, -0.25])
    w = cb if sync else bn
    if sync:
        src.add(2, "T.sync_grid()")
        src.add(2, f"c = {scale}  # trace-time Python inside the block")
        idx = "bx"
    else:
        src.add(1, f"c = {scale} * {1}  # trace-time Python between the launches")
        src.add(1, f"with T.Kernel({gn}) as by:")
        idx = "by"
    src.block(2, [f'p = T.alloc_fragment(({S}, {w}), "float32")',
                  f'm = T.alloc_fragment(({w},), "float32")',
                  f"T.copy({part}[0, {idx} * {w}], p)", f"T.reduce_{comb}(p, m, dim=0)",
                  f"for j in T.Parallel({w}):", "    m[j] = m[j] * c",
                  f"T.copy(m, Y[{idx} * {w}:{idx} * {w} + {w}])"])
    if third:
        bm, bz = d.choice([4, 8, 16]), d.choice([8, 16])
        tm, tn = -(-M // bm), -(-N // bz)
        wave = d.int(1, max(1, tm * tn - 1)) if tm * tn > 1 else 1
        src.block(1, [f"with T.Kernel({wave}) as b:",
                      f'    z = T.alloc_fragment(({bm}, {bz}), "float32")',
                      f'    y = T.alloc_fragment(({bz},), "float32")',
                      f"    for i, j in T.Persistent([{tm}, {tn}], {wave}, b):",
                      f"        T.copy(X[i * {bm}, j * {bz}], z)",
                      f"        T.copy(Y[j * {bz}:j * {bz} + {bz}], y)",
                      f"        for r, k in T.Parallel({bm}, {bz}):",
                      "            z[r, k] = z[r, k] - y[k]",
                      f"        T.copy(z, Z[i * {bm}, j * {bz}])"])
        feats.add(f"persistent_waves_{-(-(tm * tn) // wave)}")

    if eager:
        src.add(1, "return " + ", ".join(t.name for t in tensors[1:]))
    ref = Source()
    ref.add(0, "def reference(X):")
    fn = {"sum": "np.sum(x, axis=0)", "max": "np.max(x, axis=0)",
          "absmax": "np.max(np.abs(x), axis=0)"}[red]
    cfn = {"sum": "np.sum(p, axis=0)", "max": "np.max(p, axis=0)"}[comb]
    ref.block(1, [f"part = np.zeros(({S}, {N}))", f"Y = np.zeros({N})",
                  f"for bx in range({S}):",
                  f"    x = load(X, (bx * {rb}, 0), ({rb}, {N}))",
                  f"    part[bx] = {fn}",
                  f"for by in range(cdiv({N}, {w})):",
                  f"    p = load(part, (0, by * {w}), ({S}, {w}))",
                  f"    store(Y, (by * {w},), {cfn} * {scale})"])
    outs = (["part"] if ws == "output" else []) + ["Y"]
    if third:
        ref.add(1, "Z = X - Y[None, :]")
        outs.append("Z")
    ref.add(1, f"return [{', '.join(outs)}]")
    t = tolerance("float32", EPS["float32"], terms=rb * S, slack=16.0)
    tol = {"Part": t, "Y": t, "Z": t}
    return build_case("launches", seed, src, tensors, ref, tol, feats)
