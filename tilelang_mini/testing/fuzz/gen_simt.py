"""Per-thread (SIMT) TileLang kernels: `T.get_thread_binding` / `T.thread_binding` values as
indices, one row per thread of a `T.Kernel(g, threads=n)` block. Each thread accumulates its row
in a `T.alloc_local((1,), ..)` or a per-thread `T.alloc_var` (sum, sum of squares, sum of |x|,
max), maybe leaving its loop by a per-thread `break` on an element over a limit; writes its
result under a per-thread `if`/`else`, a `T.if_then_else`, through a `T.tvm_warp_shuffle` of a
partner's value or through a per-thread `alloc_var`; then (optionally) a stable counting sort of
the block's rows by a key: `T.atomic_add(hist[key], 1)` on a shared tile per thread, a one-thread
(`if tx == 0`) exclusive scan, `pos = T.atomic_add(offs[key], 1, return_prev=True)` and a store
at the data-dependent position. Rows past the tensor are guarded by `if row < M:` (per-thread
code is scalar code: an access outside a tensor is the kernel's fault, not masked).

The reference is written per row and per block in float64 NumPy; the threads of a block run in
thread order (the documented lockstep order), so the counting sort is stable."""
from __future__ import annotations

from .case import EPS, Source, Tensor, build_case, tolerance
from .case import KERNEL_HEADER


def gen_simt(d, seed):
    nt = d.choice([4, 8, 16, 32])
    g = d.int(1, 4)
    tail = d.boolean(0.5) and nt > 1
    M = g * nt - (d.int(1, nt - 1) if tail else 0)
    g = -(-M // nt)
    C = d.dim(1, 24)
    nb = d.choice([2, 3, 4, 8])
    bind = d.choice(["get0", "get", "binding"])
    acc_kind = d.choice(["local", "var"])
    op = d.choice(["sum", "sq", "abs", "max"])
    tw = d.choice([1, 1, 2, 4])  # a second thread dimension: each row's columns split by ty
    brk = d.boolean(0.4) and tw == 1
    lim = d.choice([0.25, 0.5, 0.8])
    yform = d.choice(["plain", "if", "ite", "let"] + (["shuffle"] if tw == 1 else []))
    sort = d.boolean(0.7)
    block = d.boolean(0.4)  # per-thread results into a shared tile, then a block-level reduce
    vec = d.boolean(0.3)  # a per-thread T.vectorized run of a row's first columns
    vw = min(C, d.choice([2, 4]))
    gm_atomic = d.boolean(0.4)  # each row's result added into GM at its key (per-thread atomics)
    guard = tail or d.boolean(0.3)
    # rows past M: per-thread code is scalar code (no T.Parallel safe access), so a tail is
    # always guarded; without one the guard of the loop is optional
    guard_loop = tail or (guard and (sort or yform == "shuffle" or d.boolean(0.5)))
    a, b, c = d.choice([0.5, 2.0, -1.5]), d.choice([0.25, 1.0]), d.choice([0.0, 0.5, -0.25])
    w = d.choice([v for v in (2, 4, 8) if v <= nt])
    m = d.int(1, w - 1)
    feats = {"simt", f"simt_{bind}", f"simt_acc_{acc_kind}", f"simt_{op}", f"simt_y_{yform}"}
    feats |= {"simt_break"} if brk else set()
    feats |= {"simt_counting_sort", "atomic_return_prev"} if sort else set()
    feats |= ({"simt_block_reduce"} if block else set()) | ({"simt_vectorized"} if vec else set())
    if tw > 1:
        feats.add("simt_2d_threads")

    tensors = [Tensor("X", [M, C], "float32"), Tensor("K", [M], "int32", 0, nb - 1),
               Tensor("Y", [M], "float32", output=True)]
    shift = d.int(1, nt - 1) if nt > 1 else 0
    if block:
        tensors.append(Tensor("Z", [g], "float32", output=True))
        tensors.append(Tensor("Nb", [M], "float32", output=True))
    if vec:
        tensors.append(Tensor("W", [M, vw], "float32", output=True))
    if gm_atomic:
        tensors += [Tensor("G", [nb], "float32", output=True),
                    Tensor("Gc", [nb], "int32", output=True)]
        feats.add("simt_gm_atomic")
    if sort:  # (the reference returns Y, Z, W, P, H in this order)
        tensors += [Tensor("P", [M], "float32", output=True),
                    Tensor("H", [g, nb], "int32", output=True)]
    src = Source(KERNEL_HEADER)
    src.add(0, "def main(" + ", ".join(f'{t.name}: T.Tensor({tuple(t.shape)!r}, "{t.dtype}")'
                                         for t in tensors) + "):")
    src.add(1, f"with T.Kernel({g}, threads={nt if tw == 1 else (nt, tw)}) as bx:")
    src.add(2, {"get0": "tx = T.get_thread_binding(0)", "get": "tx = T.get_thread_binding()",
                "binding": f'tx = T.thread_binding(0, {nt}, thread="threadIdx.x")'}[bind])
    if tw > 1:
        src.add(2, "ty = T.get_thread_binding(1)" if bind != "binding"
                else f'ty = T.thread_binding(0, {tw}, thread="threadIdx.y")')
        src.add(2, f'part = T.alloc_shared(({nt},), "float32")')
    if acc_kind == "local":
        src.add(2, 'acc = T.alloc_local((1,), "float32")')
        A = "acc[0]"
    else:
        src.add(2, 'acc = T.alloc_var("float32")')
        A = "acc"
    if yform == "let":
        src.add(2, 'v = T.alloc_var("float32")')
    if sort:
        src.add(2, f'hist = T.alloc_shared(({nb},), "int32")')
        src.add(2, f'offs = T.alloc_shared(({nb},), "int32")')
        src.add(2, 'pos = T.alloc_var("int32")')
    src.add(2, f"row = bx * {nt} + tx")
    src.add(2, "T.clear(acc)" if d.boolean(0.5) else f"{A} = 0.0")

    def guarded(lines, on, one_column=False):
        """`lines` under `if row < M:` (`on`), and with `one_column` run by the ty == 0
        threads only (once per row)."""
        conds = ([f"row < {M}"] if on else []) + (["ty == 0"] if one_column and tw > 1 else [])
        if conds:
            src.add(2, f"if {' and '.join(conds)}:")
        src.block(3 if conds else 2, lines)

    x = "X[row, k]" if tw == 1 else f"X[row, k * {tw} + ty]"
    upd = {"sum": f"{A} + {x}", "sq": f"{A} + {x} * {x}", "abs": f"{A} + T.abs({x})",
           "max": f"T.max({A}, {x})"}[op]
    upd = f"{A} += {x}" if op == "sum" and d.boolean(0.5) else f"{A} = {upd}"
    if tw == 1:
        loop = [f"for k in T.serial({C}):"]
        if brk:
            loop += [f"    if {x} > {lim}:", "        break"]
        loop += [f"    {upd}"]
    else:  # each (tx, ty) a strided part of row tx; the parts meet in a shared tile
        loop = [f"for k in T.serial({-(-C // tw)}):", f"    if k * {tw} + ty < {C}:",
                f"        {upd}"]
    guarded(loop, guard_loop)
    if tw > 1:
        src.add(2, "if ty == 0:")
        src.add(3, "part[tx] = 0.0")
        src.add(2, f"T.atomic_{'max' if op == 'max' else 'add'}(part[tx], {A})")
        A = "part[tx]"
    if yform == "plain":
        ylines = [f"Y[row] = {A} * {a} + {b}"]
    elif yform == "if":
        ylines = [f"if X[row, 0] > {c}:", f"    Y[row] = {A} * {a}", "else:",
                  f"    Y[row] = {A} - {b}"]
    elif yform == "ite":
        ylines = [f"Y[row] = T.if_then_else(X[row, 0] > {c}, {A} * {a}, {A} - {b})"]
    elif yform == "shuffle":
        ylines = [f"Y[row] = {A} + T.tvm_warp_shuffle(0xFFFFFFFF, {A}, tx ^ {m}, {w}, {w})"]
    else:
        ylines = [f"v = {A} * {a}", f"Y[row] = v + X[row, {C - 1}]"]
    guarded(ylines, guard)
    if block:
        src.add(2, f'red = T.alloc_shared(({nt},), "float32")')
        src.add(2, 'tot = T.alloc_fragment((1,), "float32")')
        src.add(2, f"red[tx] = {A}")  # threads past M hold 0 (their loop is guarded)
        src.add(2, "T.sync_threads()")
        guarded([f"Nb[row] = red[(tx + {shift}) % {nt}]"], guard)  # another thread's value
        src.add(2, "T.reduce_sum(red, tot, dim=0)")
        src.add(2, "Z[bx] = tot[0]")
    if vec:
        guarded([f"for v in T.vectorized({vw}):", f"    W[row, v] = X[row, v] * 2.0 - {b}"],
                guard)
    if gm_atomic:
        guarded([f"T.atomic_add(G[K[row]], {A})", "T.atomic_add(Gc[K[row]], 1)"], guard, True)
    if sort:
        src.add(2, "T.clear(hist)")
        src.add(2, "T.clear(offs)")
        guarded(["T.atomic_add(hist[K[row]], 1)"], guard, True)
        src.add(2, "if tx == 0:")
        src.add(3, f"for q in T.serial(1, {nb}):")
        src.add(4, "offs[q] = offs[q - 1] + hist[q - 1]")
        guarded(["pos = T.atomic_add(offs[K[row]], 1, return_prev=True)",
                 f"P[bx * {nt} + pos] = X[row, 0]"], guard, True)
        src.add(2, f"for q in T.serial({nb}):")
        src.add(3, "H[bx, q] = hist[q]")

    ref = Source()
    ref.add(0, "def reference(X, K):")
    ref.block(1, [f"M, C, NT, NB = {M}, {C}, {nt}, {nb}", "accs = np.zeros(M)",
                  "for r in range(M):", "    acc = 0.0", "    for k in range(C):",
                  "        x = X[r, k]"])
    if brk:
        ref.add(3, f"if x > {lim}:")
        ref.add(4, "break")
    ref.add(3, {"sum": "acc = acc + x", "sq": "acc = acc + x * x", "abs": "acc = acc + abs(x)",
                "max": "acc = max(acc, x)"}[op])
    ref.add(2, "accs[r] = acc")
    yref = {"plain": f"accs * {a} + {b}",
            "if": f"np.where(X[:, 0] > {c}, accs * {a}, accs - {b})",
            "ite": f"np.where(X[:, 0] > {c}, accs * {a}, accs - {b})",
            "shuffle": "accs + part",
            "let": f"accs * {a} + X[:, {C - 1}]"}[yform]
    if yform == "shuffle":  # the partner tx ^ m of each thread; threads past M hold 0
        ref.block(1, [f"padded = np.zeros({g * nt})", "padded[:M] = accs",
                      f"t = np.arange({g * nt})", f"part = padded[t ^ {m}][:M]"])
    ref.add(1, f"Y = {yref}")
    outs = "[Y"
    if block:
        ref.add(1, f"Z = np.array([accs[b * NT:(b + 1) * NT].sum() for b in range({g})])")
        ref.block(1, [f"padded = np.zeros({g * nt})", "padded[:M] = accs",
                      f"t = np.arange({g * nt})",
                      f"Nb = padded[t - t % NT + (t % NT + {shift}) % NT][:M]"])
        outs += ", Z, Nb"
    if vec:
        ref.add(1, f"W = X[:, :{vw}] * 2.0 - {b}")
        outs += ", W"
    if gm_atomic:
        ref.block(1, ["G = np.zeros(NB)", "np.add.at(G, K.astype(np.int64), accs)",
                      "Gc = np.bincount(K.astype(np.int64), minlength=NB).astype(np.float64)"])
        outs += ", G, Gc"
    outs += "]"
    if sort:
        ref.block(1, ["P = np.zeros(M)", f"H = np.zeros(({g}, NB))",
                      f"for bx in range({g}):",
                      "    rows = list(range(bx * NT, min(M, bx * NT + NT)))",
                      "    hist = np.bincount(K[rows].astype(np.int64), minlength=NB)",
                      "    H[bx] = hist",
                      "    offs = np.concatenate([[0], np.cumsum(hist)[:-1]])",
                      "    for r in rows:",
                      "        P[bx * NT + offs[K[r]]] = X[r, 0]",
                      "        offs[K[r]] += 1"])
        outs = outs[:-1] + ", P, H]"
    ref.add(1, f"return {outs}")
    tol = {"Y": tolerance("float32", EPS["float32"], terms=C, slack=16.0), "P": (0.0, 0.0),
           "H": (0.0, 0.0), "Z": tolerance("float32", EPS["float32"], terms=C * nt, slack=16.0),
           "W": tolerance("float32"),
           "Nb": tolerance("float32", EPS["float32"], terms=C, slack=16.0),
           "G": tolerance("float32", EPS["float32"], terms=C * M, slack=16.0), "Gc": (0.0, 0.0)}
    return build_case("simt", seed, src, tensors, ref, tol, feats)
