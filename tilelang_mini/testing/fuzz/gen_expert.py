"""Expert-mode families: hand-synchronised kernels (`T.Kernel(n, is_npu=True)`, `T.Scope`,
chip buffers, set/wait flags, pipe barriers). `expert` kernels are correctly synchronised and
must be right everywhere; in `expert_broken` one synchronisation is removed, so the hardware
would race: the compiler must reject it at its line, or at least the simulator must find it
(numpy and llvm run in program order and would hide it)."""
from __future__ import annotations

from .case import EPS, Source, Tensor, build_case, kernel_source, tolerance
from .gen_vector import FLOATS


def _sync(src, ind, a, b, eid, name, drop, dropped):
    """set_flag/wait_flag(a, b, eid) unless `name` is the dropped synchronisation."""
    if name == drop:
        dropped.append(name)
        return
    src.add(ind, f'T.set_flag("{a}", "{b}", {eid})')
    src.add(ind, f'T.wait_flag("{a}", "{b}", {eid})')


def gen_expert_vector(d, seed, broken=False):
    h = d.choice([1, 2, 4, 8, 16])
    N = d.choice([8, 16, 24, 32, 48, 64, 128])
    R = d.int(1, 3)  # row chunks per vector core
    nb = d.int(1, 4)
    dt = d.choice(FLOATS)
    two_maps = d.boolean(0.5)
    # a missing pipe_barrier(V) is no race: the compiler adds it, as the Ascend C compiler does
    # for tilelang-ascend's kernels (docs/machine_model.md); `bare` kernels leave it out
    drops = ["MTE2->V", "V->MTE3"] + (["MTE3->MTE2"] if R > 1 else [])
    drop = d.choice(drops) if broken else None
    bare = d.boolean(0.3)
    rows = nb * 2 * R * h
    feats = {"expert", "expert_vector", f"in_{dt}"} | ({"expert_broken", f"drop_{drop}"} if broken else set())
    feats |= {"v_barriers_by_compiler"} if bare else set()
    tensors = [Tensor("X", [rows, N], dt, -2.0, 2.0), Tensor("Y", [rows, N], "float32", output=True)]
    c = d.choice([0.5, 2.0, -1.0])
    src, _ = kernel_source(tensors, f"T.Kernel({nb}, is_npu=True) as (cid, vid)",
                           [("x_in", "ub", (h, N), dt), ("x", "ub", (h, N), "float32")])
    src.add(2, 'with T.Scope("V"):')
    dropped: list = []
    loop_ind = 3
    if R > 1:
        src.add(3, f"for t in T.serial({R}):")
        loop_ind = 4
    row = f"(cid * {2 * R} + vid * {R} + t) * {h}" if R > 1 else f"(cid * 2 + vid) * {h}"
    src.add(loop_ind, f"T.copy(X[{row}, 0], x_in)")
    _sync(src, loop_ind, "MTE2", "V", 0, "MTE2->V", drop, dropped)
    src.add(loop_ind, "T.copy(x_in, x)")  # a cast on V: the map after it needs a V barrier
    if not bare:
        src.add(loop_ind, 'T.pipe_barrier("V")')
    tile_form = d.choice([None, "whole", "rows"])  # T.tile.* instead of the first map
    if tile_form is None:
        src.add(loop_ind, f"for i, j in T.Parallel({h}, {N}):")
        src.add(loop_ind + 1, f"x[i, j] = x[i, j] * {c} + 1.0")
    elif tile_form == "whole":
        feats.add("expert_tile_ops")
        src.add(loop_ind, f"T.tile.muls(x, x, {c})")
        if not bare:
            src.add(loop_ind, 'T.pipe_barrier("V")')
        src.add(loop_ind, "T.tile.adds(x, x, 1.0)")
    else:  # on row slices x[r, :]
        feats.add("expert_tile_rows")
        src.add(loop_ind, f"for r in range({h}):")
        src.add(loop_ind + 1, f"T.tile.mul(x[r, :], x[r, :], {c})")
        if not bare:
            src.add(loop_ind, 'T.pipe_barrier("V")')
        src.add(loop_ind, f"for r in T.serial({h}):")
        src.add(loop_ind + 1, "T.tile.add(x[r, :], x[r, :], 1.0)")
    ref_expr = f"x * {c} + 1.0"
    if two_maps:
        if not bare:
            src.add(loop_ind, 'T.pipe_barrier("V")')
        src.add(loop_ind, f"for i, j in T.Parallel({h}, {N}):")
        src.add(loop_ind + 1, "x[i, j] = T.max(x[i, j], 0.0) * x[i, j]")
        ref_expr = f"np.maximum({ref_expr}, 0.0) * ({ref_expr})"
    _sync(src, loop_ind, "V", "MTE3", 0, "V->MTE3", drop, dropped)
    src.add(loop_ind, f"T.copy(x, Y[{row}, 0])")
    if R > 1:
        # the next iteration's load must not overwrite x_in / x while MTE3 still reads x;
        # MTE2 writes x_in (read by V, ordered by V->MTE3 before) and V writes x after MTE2->V
        _sync(src, loop_ind, "MTE3", "MTE2", 1, "MTE3->MTE2", drop, dropped)
    ref = Source()
    ref.add(0, "def reference(X):")
    ref.add(1, "x = X")
    ref.add(1, f"return [{ref_expr}]")
    case = build_case("expert_broken" if broken else "expert", seed, src, tensors, ref,
                      {"Y": tolerance("float32", EPS["float32"], 4)}, feats)
    case.broken = drop
    return case


def gen_expert_cube(d, seed, broken=False):
    M, N, K = d.int(1, 96), d.int(1, 96), d.int(1, 160)
    bm, bn, bk = d.choice([16, 32]), d.choice([16, 32]), d.choice([16, 32, 64])
    gm, gn, nk = -(-M // bm), -(-N // bn), -(-K // bk)
    dt = d.choice(["float16", "bfloat16", "float32"])
    drops = ["MTE2->MTE1", "MTE1->M", "M->FIX"] + (["M->MTE2"] if nk > 1 else [])
    drop = d.choice(drops) if broken else None
    feats = {"expert", "expert_cube", f"in_{dt}"} | ({"expert_broken", f"drop_{drop}"} if broken else set())
    tensors = [Tensor("A", [M, K], dt), Tensor("B", [K, N], dt),
               Tensor("C", [M, N], "float32", output=True)]
    src, _ = kernel_source(tensors, f"T.Kernel({gm * gn}, is_npu=True) as (cid, vid)",
                           [("A_L1", "L1", (bm, bk), dt), ("B_L1", "L1", (bk, bn), dt),
                            ("A_L0", "L0A", (bm, bk), dt), ("B_L0", "L0B", (bk, bn), dt),
                            ("C_L0", "L0C", (bm, bn), "float32")])
    src.block(2, ['with T.Scope("C"):', f"    row = cid // {gn} * {bm}", f"    col = cid % {gn} * {bn}",
                  "    T.clear(C_L0)", f"    for ko in T.serial({nk}):"])
    dropped: list = []
    src.add(4, f"T.copy(A[row, ko * {bk}], A_L1)")
    src.add(4, f"T.copy(B[ko * {bk}, col], B_L1)")
    _sync(src, 4, "MTE2", "MTE1", 0, "MTE2->MTE1", drop, dropped)
    src.add(4, "T.copy(A_L1, A_L0)")
    src.add(4, "T.copy(B_L1, B_L0)")
    _sync(src, 4, "MTE1", "M", 0, "MTE1->M", drop, dropped)
    src.add(4, "T.gemm(A_L0, B_L0, C_L0)")
    _sync(src, 4, "M", "MTE2", 0, "M->MTE2", drop, dropped)  # WAR for the next loads
    _sync(src, 3, "M", "FIX", 0, "M->FIX", drop, dropped)
    src.add(3, "T.copy(C_L0, C[row, col])")
    ref = Source()
    ref.add(0, "def reference(A, B):")
    ref.add(1, "return [(A @ B, np.abs(A) @ np.abs(B))]")
    case = build_case("expert_broken" if broken else "expert", seed, src, tensors, ref,
                      {"C": tolerance("float32", EPS["float32"], K)}, feats)
    case.broken = drop
    return case


def _expert_kind(d):
    from .gen_nd import gen_expert_exchange
    return d.weighted([gen_expert_cube, gen_expert_vector, gen_expert_exchange], [4, 4, 2])


def gen_expert(d, seed):
    return _expert_kind(d)(d, seed)


def gen_expert_broken(d, seed):
    return _expert_kind(d)(d, seed, broken=True)
