"""Kernels on 3-D and 4-D tiles (`tile_nd`), and expert kernels whose two vector cores exchange
data through GM (`expert` / `expert_broken`, the exchange variant).

`tile_nd`: a chain of element maps over 3-D/4-D tiles of 3-D/4-D tensors, the grid over one or
two leading dimensions, temporaries that die early (plan_memory reuses their bytes, so the
simulator's byte-exact aliasing of >= 3-D buffers is exercised), the global index of the split
(leading) dimension used as a value, and optionally a reduction over any axis of the result.

The exchange: each AIV stores its half of a tile to a GM workspace, the cube relays cross-core
flags, and each AIV reads back the other's half. Broken variants drop the relay (the read races
the other AIV's store) or store both halves to the same rows; check_sync must reject them at
compile time (they compute right in program order).
"""
from __future__ import annotations

from .case import (EPS, KERNEL_HEADER, Source, Tensor, build_case, input_names, reference_source,
                   signature, tolerance)
from .exprs import Expr, gen_expr
from .gen_vector import FLOATS, _RED, _tile_alloc


def _prod(xs):
    out = 1
    for x in xs:
        out *= x
    return out


def gen_tile_nd(d, seed):
    nd = d.choice([3, 3, 4])
    shape = [d.dim(1, 40)] + [d.dim(1, 16 if nd == 3 else 8) for _ in range(nd - 1)]
    two_grid = d.boolean(0.4)
    b0 = d.choice([1, 2, 4, 8, 16])
    b1 = d.choice([1, 2, 4]) if two_grid else shape[1]
    tile = [b0, b1] + shape[2:]
    while b0 > 1 and b0 * b1 * max(1, _prod(shape[2:])) > 2048:  # a few tiles fit in UB
        b0 //= 2
        tile[0] = b0
    in_dt, out_dt = d.choice(FLOATS), d.choice(FLOATS)
    cdt = d.weighted(["float32", "float16"], [5, 1])
    red = d.boolean(0.35)
    feats = {"tile_nd", f"tile_{nd}d", f"in_{in_dt}", f"out_{out_dt}", f"compute_{cdt}"}
    tensors = [Tensor("X", shape, in_dt, -2.0, 2.0)]
    if d.boolean(0.5):
        tensors.append(Tensor("Y", shape, in_dt, -2.0, 2.0))
    has_y = len(tensors) == 2
    tensors.append(Tensor("O", shape, out_dt, output=True))
    letters = "ijkl"[:nd]
    idx = ", ".join(letters)
    leaves = [Expr(f"x[{idx}]", "x", bound=2.0)]
    if has_y:
        leaves.append(Expr(f"y[{idx}]", "y", bound=2.0))
    if d.boolean(0.4):  # the global index of the split leading dimension as a value
        leaves.append(Expr(f'T.cast(by * {b0} + i, "float32") * 0.05', "(r0 + ii) * 0.05",
                           bound=2.0, features={"rowvar_in_value"}))
    e1 = gen_expr(d, leaves, d.int(1, 2), allow_casts=False)
    feats |= e1.features
    chain = d.int(1, 3)  # temporaries t1 .. t<chain>, each from the previous one and x
    consts = [d.choice([0.5, -1.0, 1.5, 0.25]) for _ in range(chain)]

    gm0 = -(-shape[0] // b0)
    gm1 = -(-shape[1] // b1) if two_grid else 1
    if red:
        rdim = d.int(0, nd - 1)
        kind = d.choice(list(_RED))
        out_tile = tuple(e for k, e in enumerate(tile) if k != rdim)
        tensors.append(Tensor("R", [gm0 * gm1] + list(out_tile), "float32", output=True))
        feats |= {f"reduce_{kind}", f"reduce_dim{rdim}", "tile_nd_reduce"}

    src = Source(KERNEL_HEADER)
    src.add(0, signature(tensors))
    if two_grid:
        src.add(1, f"with T.Kernel({gm1}, {gm0}) as (bx, by):")
        corner = [f"by * {b0}", f"bx * {b1}"] + ["0"] * (nd - 2)
    else:
        src.add(1, f"with T.Kernel({gm0}) as by:")
        corner = [f"by * {b0}"] + ["0"] * (nd - 1)
    corner = ", ".join(corner)
    t = tuple(tile)
    alloc = _tile_alloc(d)
    marks = {"alloc_x": src.add(2, f'x = T.alloc_{alloc}({t}, "{cdt}")')}
    if has_y:
        src.add(2, f'y = T.alloc_{alloc}({t}, "{cdt}")')
    for n in range(1, chain + 1):
        src.add(2, f't{n} = T.alloc_{alloc}({t}, "float32")')
    if red:
        src.add(2, f'r = T.alloc_fragment({out_tile}, "float32")')
    src.add(2, f"T.copy(X[{corner}], x)")
    if has_y:
        src.add(2, f"T.copy(Y[{corner}], y)")
    loop = f"for {idx} in T.Parallel({', '.join(map(str, t))}):"
    src.add(2, loop)
    src.add(3, f"t1[{idx}] = {e1.dsl}")
    for n in range(2, chain + 1):
        src.add(2, loop)
        src.add(3, f"t{n}[{idx}] = t{n - 1}[{idx}] * {consts[n - 1]} + x[{idx}]")
    src.add(2, f"T.copy(t{chain}, O[{corner}])")
    if red:
        src.add(2, f"T.reduce_{kind}(t{chain}, r, dim={rdim})")
        blk = "by * %d + bx" % gm1 if two_grid else "by"
        src.add(2, f"T.copy(r, R[{blk}, {', '.join(['0'] * len(out_tile))}])")

    zeros = [("O", shape)] + ([("R", (gm0 * gm1,) + tuple(out_tile))] if red else [])
    ref, _ = reference_source(input_names(tensors), zeros, [("by", gm0), ("bx", gm1)])
    ref.add(3, f"ii = np.indices({t!r})[0]")
    starts = f"(by * {b0}, bx * {b1 if two_grid else 0}" + ", 0" * (nd - 2) + ")"
    ref.add(3, f"r0 = by * {b0}")
    ref.add(3, f"x = rnd(load(X, {starts}, {t!r}), '{cdt}')")
    if has_y:
        ref.add(3, f"y = rnd(load(Y, {starts}, {t!r}), '{cdt}')")
    ref.add(3, f"t = rnd(np.broadcast_to({e1.ref}, {t!r}), 'float32')")
    for n in range(2, chain + 1):
        ref.add(3, f"t = rnd(t * {consts[n - 1]} + x, 'float32')")
    ref.add(3, f"store(O, {starts}, rnd(t, '{out_dt}'))")
    if red:
        ref.add(3, f"R[by * {gm1} + bx] = " + _RED[kind][0].format(x="t", d=rdim))
    ref.add(1, "return [O, R]" if red else "return [O]")
    tol = {"O": tolerance(out_dt, EPS[cdt], terms=e1.nodes + 2 * chain, slack=16.0)}
    if red:
        tol["R"] = tolerance("float32", EPS[cdt], terms=tile[rdim] * (e1.nodes + 2 * chain),
                             slack=16.0)
    return build_case("tile_nd", seed, src, tensors, ref, tol, feats, marks)


def gen_expert_exchange(d, seed, broken=False):
    """Each AIV loads rows of X, stores them scaled to W, meets the other AIV through the
    cube's cross flags, reads the other AIV's rows of W and writes them to Y (halves swapped
    within each block)."""
    h = d.choice([1, 2, 4, 8])
    N = d.choice([8, 16, 32, 48])
    nb = d.int(1, 3)
    dt = d.choice(FLOATS)
    c = d.choice([0.5, 2.0, -1.0])
    drop = d.choice(["relay", "same_rows"]) if broken else None
    rows = nb * 2 * h
    feats = {"expert", "expert_exchange", f"in_{dt}"} | (
        {"expert_broken", f"drop_{drop}"} if broken else set())
    tensors = [Tensor("X", [rows, N], dt, -2.0, 2.0), Tensor("W", [rows, N], "float32"),
               Tensor("Y", [rows, N], "float32", output=True)]
    src = Source(KERNEL_HEADER)
    src.add(0, signature(tensors))
    src.add(1, f"with T.Kernel({nb}, is_npu=True) as (cid, vid):")
    src.add(2, f'x_in = T.alloc_ub(({h}, {N}), "{dt}")')
    src.add(2, f'x = T.alloc_ub(({h}, {N}), "float32")')
    src.add(2, f'u = T.alloc_ub(({h}, {N}), "float32")')
    src.add(2, 'with T.Scope("V"):')
    own = f"(cid * 2 + vid) * {h}"
    other = f"(cid * 2 + 1 - vid) * {h}"
    src.add(3, f"T.copy(X[{own}, 0], x_in)")
    src.add(3, 'T.set_flag("MTE2", "V", 0)')
    src.add(3, 'T.wait_flag("MTE2", "V", 0)')
    src.add(3, "T.copy(x_in, x)")
    src.add(3, 'T.pipe_barrier("V")')
    src.add(3, f"for i, j in T.Parallel({h}, {N}):")
    src.add(4, f"x[i, j] = x[i, j] * {c}")
    src.add(3, 'T.set_flag("V", "MTE3", 0)')
    src.add(3, 'T.wait_flag("V", "MTE3", 0)')
    store_rows = f"cid * {2 * h}" if drop == "same_rows" else own
    src.add(3, f"T.copy(x, W[{store_rows}, 0])")
    src.add(3, 'T.set_flag("MTE3", "MTE2", 0)')
    src.add(3, 'T.wait_flag("MTE3", "MTE2", 0)')
    if drop != "relay":
        src.add(3, 'T.set_cross_flag("MTE3", 1)')
        src.add(2, 'with T.Scope("C"):')
        src.add(3, 'T.wait_cross_flag("MTE2", 1)')
        src.add(3, 'T.set_cross_flag("MTE2", 2)')
    src.add(2, 'with T.Scope("V"):')
    if drop != "relay":
        src.add(3, 'T.wait_cross_flag("MTE2", 2)')
    src.add(3, f"T.copy(W[{other}, 0], u)")
    src.add(3, 'T.set_flag("MTE2", "MTE3", 1)')
    src.add(3, 'T.wait_flag("MTE2", "MTE3", 1)')
    src.add(3, f"T.copy(u, Y[{own}, 0])")
    ref = Source()
    ref.add(0, "def reference(X, W):")
    ref.add(1, f"x = X.reshape({nb}, 2, {h}, {N}) * {c}")
    ref.add(1, f"return [x[:, ::-1].reshape({rows}, {N})]")
    case = build_case("expert_broken" if broken else "expert", seed, src, tensors, ref,
                 {"Y": tolerance("float32", EPS["float32"], 2)}, feats, {})
    case.broken = f"the cross-core relay ({drop})" if broken else None
    return case
