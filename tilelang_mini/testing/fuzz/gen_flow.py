"""Run-time control flow family: `while` loops whose trip counts come from data (a tile element
the vector cores computed, or a scalar read from GM), `while True` left by `break`, and `if`s
whose conditions read an element of a tile the compiler would split by rows between the two
vector cores (split_cores must then keep the tiles whole), inside serial loops of vector work,
with tile copies, vector maps and GEMMs inside the loops, in TileLang mode (`T.Parallel`,
fragments) and developer mode (`is_npu=True`, `T.tile.*`, chip allocations, the compiler
splitting cube and vector work).

Conditions only read values exact in float32 (inputs halved, doubled, negated, their absolute
maxima), so the float64 reference takes the same branches and trip counts; inexact work goes to
a separate tile the conditions never read.
"""
from __future__ import annotations

from .case import EPS, Source, Tensor, build_case, input_names, reference_source, signature
from .case import KERNEL_HEADER, tolerance
from .gen_cube import IN_DTYPES


class _Flow:
    """Kernel lines (indent, text) and reference lines (indent, text) built side by side; the
    vector operations are written in TileLang (`T.Parallel`) or developer (`T.tile.*`) form."""

    def __init__(self, d, dev, bm, bn, gm="D"):
        self.d, self.dev, self.bm, self.bn, self.gm = d, dev, bm, bn, gm
        self.reload = False  # a GM -> w copy inside a while
        self.src: list = []
        self.ref: list = []
        self.feats: set = set()
        self.terms = 1
        self.view = False  # the body reads xi, x's bytes as int32

    def k(self, ind, text):
        self.src.append((ind, text))

    def r(self, ind, text):
        self.ref.append((ind, text))

    def vec(self, ind, dev, z, expr, ref, inexact=True):
        """One vector operation on a whole tile: `dev` (developer mode, a `T.tile.*` call) or
        `z[i, j] = expr` in a `T.Parallel` (TileLang mode); `ref` in the reference."""
        if self.dev:
            self.k(ind, dev)
        else:
            self.k(ind, f"for i, j in T.Parallel({self.bm}, {self.bn}):")
            self.k(ind + 1, f"{z}[i, j] = {expr}")
        self.r(ind, ref)
        self.terms += inexact

    def scale(self, ind, z, x, c):
        """z = x * c (exact when c is a power of two)."""
        self.vec(ind, f"T.tile.muls({z}, {x}, {c})", z, f"{x}[i, j] * {c}", f"{z} = {x} * {c}",
                 inexact=False)

    def axpy(self, ind, z, x, c):
        """z = z + x * c (inexact: only into y)."""
        self.vec(ind, f"T.tile.axpy({z}, {x}, {c})", z, f"{z}[i, j] + {x}[i, j] * {c}",
                 f"{z} = {z} + {x} * {c}")

    def adds(self, ind, z, c):
        self.vec(ind, f"T.tile.adds({z}, {z}, {c})", z, f"{z}[i, j] + {c}", f"{z} = {z} + {c}")

    def absmax(self, ind):
        self.k(ind, f"T.reduce_absmax(x, m, dim={'-1' if self.dev else '1'})")
        self.r(ind, "m = np.abs(x).max(axis=1)")

    def clamp_y(self, ind):
        self.vec(ind, "T.tile.clamp(y, y, -64.0, 64.0)", "y", "T.clamp(y[i, j], -64.0, 64.0)",
                 "y = np.clip(y, -64.0, 64.0)", inexact=False)

    def declare(self, src, kind):
        """The row statistic m, the counter n, and what the body uses: xi (x's bytes as int32),
        w (the tile copied from GM in a while)."""
        bm, bn = self.bm, self.bn
        src.add(2, f'm = T.alloc_{kind}(({bm},), "float32")')
        src.add(2, 'n = T.alloc_var("int32")')
        if self.view:
            src.add(2, f'xi = T.view(x, [{bm}, {bn}], "int32")')
        if self.reload:
            src.add(2, f'w = T.alloc_{kind}(({bm}, {bn}), "float32")')

    def data_while(self, ind):
        """A while whose trip count is decided by a (row-split) tile element: halve x until
        the chosen row's largest magnitude is at most a limit (or `while True` + break)."""
        d = self.d
        r0 = d.int(0, self.bm - 1)
        lim = d.choice([0.25, 0.5, 1.0, 0.125])
        cap = d.choice([None, None, 2, 5])
        form = d.choice(["cond", "cond", "true_break"])
        self.feats |= {"while_data", f"while_{form}"} | ({"while_cap_break"} if cap else set())
        self.absmax(ind)
        if form == "cond":
            self.k(ind, f"while m[{r0}] > {lim}:")
            self.r(ind, f"while m[{r0}] > {lim}:")
        else:
            self.k(ind, "while True:")
            self.k(ind + 1, f"if m[{r0}] <= {lim}:")
            self.k(ind + 2, "break")
            self.r(ind, "while True:")
            self.r(ind + 1, f"if m[{r0}] <= {lim}:")
            self.r(ind + 2, "break")
        b = ind + 1
        self.scale(b, "x", "x", 0.5)
        if d.boolean(0.6):
            self.axpy(b, "y", "x", d.choice([0.5, -0.25, 1.5]))
        if d.boolean(0.4):  # a tile copy from GM in every trip
            self.reload = True
            self.feats.add("while_copy")
            self.k(b, f"T.copy({self.gm}[bx * {self.bm}, 0], w)")
            self.r(b, f"w = load({self.gm}, (bx * {self.bm}, 0), ({self.bm}, {self.bn}))")
            self.axpy(b, "y", "w", d.choice([0.5, -1.0]))
        self.absmax(b)
        self.k(b, "n = n + 1")
        self.r(b, "n += 1")
        if cap:
            self.feats.add("while_cap")
            self.k(b, f"if n >= {cap}:")
            self.k(b + 1, "break")
            self.r(b, f"if n >= {cap}:")
            self.r(b + 1, "break")
        self.terms += 8

    def tile_if(self, ind):
        """`if`/`else` on an element of the (row-split) tile x."""
        d = self.d
        r1, c1 = d.int(0, self.bm - 1), d.int(0, self.bn - 1)
        thr = d.choice([0.0, 0.25, -0.5])
        op = d.choice([">", ">=", "<"])
        self.feats.add("if_tile_element")
        if thr == 0.0 and op == ">" and d.boolean(0.5):  # the tile's bits as int32: same sign
            self.view = True
            self.feats.add("tile_view_cond")
            self.k(ind, f"if xi[{r1}, {c1}] > 0:")
        else:
            self.k(ind, f"if x[{r1}, {c1}] {op} {thr}:")
        self.r(ind, f"if x[{r1}, {c1}] {op} {thr}:")
        self.scale(ind + 1, "y", "y", d.choice([2.0, -1.0, 0.5]))
        if d.boolean(0.6):
            self.k(ind, "else:")
            self.r(ind, "else:")
            self.adds(ind + 1, "y", d.choice([-0.5, 0.75]))

    def body(self, ind, depth=0):
        """A random sequence of loop bodies over x (exact) and y (inexact)."""
        d = self.d
        for _ in range(d.int(1, 3)):
            kind = d.weighted(["while", "if", "serial", "map"], [4, 3, 2 if depth == 0 else 0, 2])
            if kind == "while":
                self.data_while(ind)
            elif kind == "if":
                self.tile_if(ind)
            elif kind == "serial":  # a serial loop of row-split vector work with ifs/whiles
                R = d.int(1, 3)
                self.feats.add("flow_in_serial")
                self.k(ind, f"for t in T.serial({R}):")
                self.r(ind, f"for t in range({R}):")
                self.body(ind + 1, depth + 1)
                self.scale(ind + 1, "x", "x", d.choice([2.0, 4.0, -2.0]))  # the next trip loops
                self.clamp_y(ind + 1)
            else:
                self.scale(ind, "x", "x", d.choice([-1.0, 2.0]))
                self.axpy(ind, "y", "x", d.choice([0.25, -0.5]))
                if not self.dev and d.boolean(0.4):  # y -= 1 where x's sign bit is set
                    self.view = True
                    self.feats.add("tile_view_map")
                    self.k(ind, f"for i, j in T.Parallel({self.bm}, {self.bn}):")
                    self.k(ind + 1, 'y[i, j] = y[i, j] + T.cast(T.shift_right(xi[i, j], 31), "float32")')
                    self.r(ind, "y = y - np.signbit(x)")
        self.clamp_y(ind)


def _header(tensors, dev, nb):
    src = Source(KERNEL_HEADER)
    src.add(0, signature(tensors))
    if dev:
        src.add(1, f"with T.Kernel({nb}, is_npu=True) as (cid, vid):")
        src.add(2, "bx = cid")
    else:
        src.add(1, f"with T.Kernel({nb}) as bx:")
    return src


def gen_flow_vector(d, seed):
    """Per row block: x, y tiles loaded, a random body of data-dependent whiles and tile-element
    ifs (possibly in serial loops), then x, y and the trip counter stored."""
    dev = d.boolean(0.5)
    M, N = d.dim(1, 100), d.dim(1, 80)
    bm = d.choice([2, 4, 8, 16, 32])
    bn = d.choice([16, 32, 64])
    nb = -(-M // bm)
    scale = d.choice([1.0, 4.0, 16.0])
    tensors = [Tensor("X", [M, N], "float32", -2.0 * scale, 2.0 * scale),
               Tensor("D", [M, N], "float32", -1.0, 1.0),
               Tensor("XO", [M, N], "float32", output=True),
               Tensor("YO", [M, N], "float32", output=True),
               Tensor("Trips", [nb], "int32", output=True)]
    fl = _Flow(d, dev, bm, bn)
    fl.body(3)
    kind = "ub" if dev else "fragment"
    src = _header(tensors, dev, nb)
    src.add(2, f'x = T.alloc_{kind}(({bm}, {bn}), "float32")')
    src.add(2, f'y = T.alloc_{kind}(({bm}, {bn}), "float32")')
    fl.declare(src, kind)
    src.add(2, f"T.copy(X[bx * {bm}, 0], x)")
    src.add(2, f"T.copy(D[bx * {bm}, 0], y)")
    src.add(2, "n = 0")
    for ind, text in fl.src:
        src.add(ind - 1, text)
    src.add(2, f"T.copy(x, XO[bx * {bm}, 0])")
    src.add(2, f"T.copy(y, YO[bx * {bm}, 0])")
    src.add(2, "Trips[bx] = n")
    ref, _ = reference_source(input_names(tensors), [("XO", (M, N)), ("YO", (M, N)),
                                                     ("Trips", (nb,))], [("bx", nb)])
    ref.add(2, f"x = load(X, (bx * {bm}, 0), ({bm}, {bn}))")
    ref.add(2, f"y = load(D, (bx * {bm}, 0), ({bm}, {bn}))")
    ref.add(2, "n = 0")
    for ind, text in fl.ref:
        ref.add(ind - 1, text)
    ref.add(2, f"store(XO, (bx * {bm}, 0), x)")
    ref.add(2, f"store(YO, (bx * {bm}, 0), y)")
    ref.add(2, "Trips[bx] = n")
    ref.add(1, "return [XO, YO, Trips]")
    feats = fl.feats | {"flow", "flow_vector", "developer" if dev else "tilelang_mode"}
    tol = tolerance("float32", EPS["float32"], fl.terms, slack=32.0)
    return build_case("flow", seed, src, tensors, ref,
                      {"XO": (0.0, 0.0), "YO": tol, "Trips": (0.0, 0.0)}, feats)


def gen_flow_gemm(d, seed):
    """Stream-K's walk: each row block runs `while k < Hi[bx]:` over its K range in chunks of bk
    (trip count from GM), with copies, a GEMM and a vector epilogue per trip; optionally an `if`
    on an element of a row-split exact tile inside the loop."""
    dev = d.boolean(0.5)
    M, N, K = d.dim(1, 100), d.dim(1, 64), d.dim(1, 150)
    bm, bn, bk = d.choice([16, 32]), d.choice([16, 32, 64]), d.choice([16, 32])
    bn = max(bn, 16)
    if N > bn:
        N = bn
    dt = d.weighted(IN_DTYPES[:3], [2, 3, 3])
    nb = -(-M // bm)
    step = d.choice([bk, bk, bk // 2])
    c = d.choice([0.5, -1.0, 0.25])
    use_if = d.boolean(0.5)
    tensors = [Tensor("A", [M, K], dt), Tensor("B", [K, N], dt),
               Tensor("Lo", [nb], "int32", 0, max(K - 1, 0)),
               Tensor("Hi", [nb], "int32", 0, K + 8),
               Tensor("G", [M, bn], "float32", -1.0, 1.0),
               Tensor("C", [M, N], "float32", output=True)]
    feats = {"flow", "flow_gemm", "while_scalar", f"in_{dt}", "developer" if dev else "tilelang_mode"}
    src = _header(tensors, dev, nb)
    if dev:
        src.add(2, f'A_s = T.alloc_L1(({bm}, {bk}), "{dt}")')
        src.add(2, f'B_s = T.alloc_L1(({bk}, {bn}), "{dt}")')
        src.add(2, f'C_f = T.alloc_L0C(({bm}, {bn}), "float32")')
        src.add(2, f'y = T.alloc_ub(({bm}, {bn}), "float32")')
        src.add(2, f'cu = T.alloc_ub(({bm}, {bn}), "float32")')
        src.add(2, f'x = T.alloc_ub(({bm}, {bn}), "float32")')
    else:
        src.add(2, f'A_s = T.alloc_shared(({bm}, {bk}), "{dt}")')
        src.add(2, f'B_s = T.alloc_shared(({bk}, {bn}), "{dt}")')
        src.add(2, f'C_f = T.alloc_fragment(({bm}, {bn}), "float32")')
        src.add(2, f'y = T.alloc_fragment(({bm}, {bn}), "float32")')
        src.add(2, f'x = T.alloc_fragment(({bm}, {bn}), "float32")')
    src.add(2, 'k = T.alloc_var("int32")')
    src.add(2, "T.tile.fill(y, 0.0)" if dev else "T.clear(y)")
    src.add(2, f"T.copy(G[bx * {bm}, 0], x)")
    src.add(2, "k = Lo[bx]")
    src.add(2, "while k < Hi[bx]:")
    src.add(3, f"T.copy(A[bx * {bm}, k], A_s)")
    src.add(3, "T.copy(B[k, 0], B_s)")
    src.add(3, "T.gemm(A_s, B_s, C_f, clear_accum=True)")
    if dev:
        src.add(3, "T.copy(C_f, cu)")
        src.add(3, f"T.tile.axpy(y, cu, {c})")
    else:
        src.add(3, f"for i, j in T.Parallel({bm}, {bn}):")
        src.add(4, f"y[i, j] += C_f[i, j] * {c}")
    r1, c1 = d.int(0, bm - 1), d.int(0, bn - 1)
    if use_if:
        feats.add("if_tile_element")
        if dev:
            src.add(3, f"if x[{r1}, {c1}] > 0.0:")
            src.add(4, "T.tile.muls(y, y, 0.5)")
            src.add(3, "T.tile.muls(x, x, -1.0)")
        else:
            src.add(3, f"if x[{r1}, {c1}] > 0.0:")
            src.add(4, f"for i, j in T.Parallel({bm}, {bn}):")
            src.add(5, "y[i, j] = y[i, j] * 0.5")
            src.add(3, f"for i, j in T.Parallel({bm}, {bn}):")
            src.add(4, "x[i, j] = -x[i, j]")
    src.add(3, f"k = k + {step}")
    epi = _Flow(d, dev, bm, bn, gm="G")
    if d.boolean(0.5):  # then data-dependent vector control flow on x, y (row-split tiles)
        epi.body(2)
        feats |= epi.feats | {"flow_epilogue"}
        kind = "ub" if dev else "fragment"
        epi.declare(src, kind)
        src.add(2, "n = 0")
        for ind, text in epi.src:
            src.add(ind, text)
    src.add(2, f"T.copy(y, C[bx * {bm}, 0])")
    ref, _ = reference_source(input_names(tensors), [("C", (M, N))], [("bx", nb)])
    ref.block(2, [f"y = np.zeros(({bm}, {bn}))", f"x = load(G, (bx * {bm}, 0), ({bm}, {bn}))",
                  "k = int(Lo[bx])", "while k < int(Hi[bx]):",
                  f"    a = load(A, (bx * {bm}, k), ({bm}, {bk}))",
                  f"    b = load(B, (k, 0), ({bk}, {bn}))",
                  f"    y = y + (a @ b) * {c}"]
              + ([f"    if x[{r1}, {c1}] > 0.0:", "        y = y * 0.5", "    x = -x"] if use_if else [])
              + [f"    k += {step}", "n = 0"])
    for ind, text in epi.ref:
        ref.add(ind, text)
    ref.add(2, f"store(C, (bx * {bm}, 0), y)")
    ref.add(1, "return [C]")
    trips = -(-(K + 8) // step)
    rtol, atol = tolerance("float32", EPS["float32"], K * trips + epi.terms, slack=16.0)
    return build_case("flow", seed, src, tensors, ref, {"C": (rtol, atol * max(1.0, K ** 0.5))},
                      feats)


def gen_flow_rng(d, seed):
    """Philox draws deciding control flow: per block `T.rng_init(seed, bx, off)`, a `while`
    drawing until a draw reaches a threshold (a geometric trip count), then a row of uniform
    floats drawn in a `T.Parallel` map, and an `if` on one of them inside a serial loop. The
    reference runs its own Philox stream (`philox_stream`)."""
    B, W = d.int(1, 6), d.choice([8, 16, 32, 40])
    rseed, off = d.choice([0, 7, 2 ** 33 + 5, 123456789]), d.int(0, 9)
    p = d.choice([1, 2, 3])   # continue while the draw is below p * 2^29
    cap = d.choice([None, 3])
    reps = d.int(1, 3)
    tensors = [Tensor("D", [B, W], "float32", -1.0, 1.0),
               Tensor("Y", [B, W], "float32", output=True),
               Tensor("Trips", [B], "int32", output=True)]
    feats = {"flow", "flow_rng", "rng", "while_data"} | ({"while_cap"} if cap else set())
    src = _header(tensors, False, B)
    src.add(2, f'f = T.alloc_fragment(({W},), "float32")')
    src.add(2, f'y = T.alloc_fragment(({W},), "float32")')
    src.add(2, 'r = T.alloc_var("uint32")')
    src.add(2, 'n = T.alloc_var("int32")')
    src.add(2, "T.copy(D[bx, 0], y)")
    src.add(2, f"T.rng_init({rseed}, bx, {off})")
    src.add(2, "n = 0")
    src.add(2, "r = T.rng_rand()")
    src.add(2, f"while r < {p * 2 ** 29}:")
    src.add(3, "n = n + 1")
    src.add(3, "r = T.rng_rand()")
    if cap:
        src.add(3, f"if n >= {cap}:")
        src.add(4, "break")
    i0 = d.int(0, W - 1)
    thr = d.choice([0.25, 0.5, 0.75])
    src.add(2, f"for t in T.serial({reps}):")
    src.add(3, f"for i in T.Parallel({W}):")
    src.add(4, "f[i] = T.rng_rand_float()")
    src.add(3, f"if f[{i0}] > {thr}:")
    src.add(4, f"for i in T.Parallel({W}):")
    src.add(5, "y[i] = y[i] + f[i]")
    src.add(3, "else:")
    src.add(4, f"for i in T.Parallel({W}):")
    src.add(5, "y[i] = y[i] * 0.5")
    src.add(2, "T.copy(y, Y[bx, 0])")
    src.add(2, "Trips[bx] = n")
    ref, _ = reference_source("D", [("Y", (B, W)), ("Trips", (B,))], [("bx", B)])
    ref.block(2, ["from tilelang_mini.testing.references import philox_stream",
                  f"x = philox_stream({rseed}, bx, {off}, {2 + (cap or 64) + reps * W + 8})",
                  "y = D[bx].copy()", "n, pos = 0, 1", "r = int(x[0])",
                  f"while r < {p * 2 ** 29}:", "    n += 1", "    r = int(x[pos])", "    pos += 1"]
              + ([f"    if n >= {cap}:", "        break"] if cap else [])
              + [f"for t in range({reps}):",
                 f"    f = x[pos:pos + {W}].astype(np.float64) * 2.0 ** -32 + 2.0 ** -33",
                 f"    pos += {W}", f"    if f[{i0}] > {thr}:", "        y = y + f",
                 "    else:", "        y = y * 0.5",
                 "Y[bx] = y", "Trips[bx] = n"])
    ref.add(1, "return [Y, Trips]")
    return build_case("flow", seed, src, tensors, ref,
                      {"Y": tolerance("float32", EPS["float32"], 2 * reps), "Trips": (0.0, 0.0)},
                      feats)


def gen_flow(d, seed):
    """Run-time while / if on tile elements: vector kernels or stream-K GEMM walks."""
    kind = d.weighted(["vector", "gemm", "rng"], [5, 3, 1])
    return {"vector": gen_flow_vector, "gemm": gen_flow_gemm, "rng": gen_flow_rng}[kind](d, seed)
