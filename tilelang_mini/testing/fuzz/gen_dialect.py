"""TileLang GPU-dialect tile kernels in forms the other families do not write: several
statements in one `T.Parallel` body reading what an earlier one wrote (also at other indices:
mirrored columns, the row's first element), `if`/`else` inside the map whose condition reads the
element its branch writes, `T.if_then_else`, `T.reduce_*` along dim 0 or 1 with `clear=False`
into accumulators, `T.cumsum` (either dim, reversed), copies with `pad_value` at the tails,
and a symbolic row count (`T.dynamic`), over odd shapes (1, primes, larger than a tile).

The reference runs the same statement list in float64 NumPy on the block's tiles (a map is one
vectorised statement after another, as the DSL defines it; an `if`/`else` in a map evaluates its
condition, then its `then` assignments masked, then its `else` assignments masked)."""
from __future__ import annotations

from .case import EPS, Source, Tensor, build_case, tolerance
from .case import KERNEL_HEADER
from .gen_vector import FLOATS


class _Tiles:
    """The kernel's statements and the reference's, with a magnitude bound per tile."""

    def __init__(self, d, bm, bn):
        self.d, self.bm, self.bn = d, bm, bn
        self.src: list = []
        self.ref: list = []
        self.bound = {"x": 2.0, "a": 0.0, "b": 0.0}
        self.exact = {"x": True, "a": True, "b": True}  # values exact in float32 (conditions)
        self.feats: set = set()
        self.terms = 1
        self.last = "x"

    def k(self, ind, text):
        self.src.append((ind, text))

    def r(self, text):
        self.ref.append(text)

    def leaf(self, names=("x", "a", "b")):
        """(dsl, ref, bound) of a read of one tile: the element, a mirrored column, the row's
        first element."""
        d, t = self.d, self.d.choice(names)
        how = d.weighted(["same", "mirror", "first"], [6, 1, 1])
        b = self.bound[t]
        if how == "mirror":
            self.feats.add("map_read_other_index")
            return f"{t}[i, {self.bn - 1} - j]", f"{t}[:, ::-1]", b
        if how == "first":
            self.feats.add("map_read_other_index")
            return f"{t}[i, 0]", f"{t}[:, :1]", b
        return f"{t}[i, j]", t, b

    def expr(self):
        d = self.d
        (xa, ra, ba), (xb, rb, bb) = self.leaf(), self.leaf()
        kind = d.choice(["add", "sub", "mul", "max", "min", "exp", "abs", "scale", "rowcol"])
        if kind == "add":
            return f"{xa} + {xb}", f"({ra} + {rb})", ba + bb
        if kind == "sub":
            return f"{xa} - {xb}", f"({ra} - {rb})", ba + bb
        if kind == "mul":
            return (f"T.min(T.max({xa}, -2.0), 2.0) * {xb}", f"(np.clip({ra}, -2.0, 2.0) * {rb})",
                    2.0 * bb)
        if kind == "max":
            return f"T.max({xa}, {xb})", f"np.maximum({ra}, {rb})", max(ba, bb)
        if kind == "min":
            return f"T.min({xa}, {xb})", f"np.minimum({ra}, {rb})", max(ba, bb)
        if kind == "exp":
            return (f"T.exp(T.min(T.max({xa}, -3.0), 3.0))", f"np.exp(np.clip({ra}, -3.0, 3.0))",
                    20.1)
        if kind == "abs":
            return f"T.abs({xa})", f"np.abs({ra})", ba
        if kind == "scale":
            c = d.choice([0.5, -0.25, 1.5])
            return f"{xa} * {c} + 1.0", f"({ra} * {c} + 1.0)", ba * abs(c) + 1.0
        # the global row and column as values
        return (f'{xa} + T.cast(by * {self.bm} + i, "float32") * 0.01 - '
                f'T.cast(bx * {self.bn} + j, "float32") * 0.02',
                f"({ra} + (r0 + ii) * 0.01 - (c0 + jj) * 0.02)", ba + 4.0)

    def cond(self):
        """(dsl, ref) of a condition: on an exact tile value or on the global row/column."""
        d = self.d
        exact = [t for t in ("x", "a", "b") if self.exact[t]]
        if exact and d.boolean(0.6):
            t = d.choice(exact)
            c = d.choice([0.0, 0.5, -0.25])
            op = d.choice([">", "<=", "<"])
            return f"{t}[i, j] {op} {c}", f"({t} {op} {c})", t
        lim = d.int(0, 40)
        if d.boolean(0.5):
            return f"by * {self.bm} + i < {lim}", f"((r0 + ii) < {lim})", None
        return f"bx * {self.bn} + j >= {lim}", f"((c0 + jj) >= {lim})", None

    def written(self, t, bound):
        self.last = t
        self.bound[t] = bound
        self.exact[t] = False

    def clamp_if_big(self, ind):
        for t in ("a", "b", "x"):
            if self.bound[t] > 40.0:
                self.k(ind, f"for i, j in T.Parallel({self.bm}, {self.bn}):")
                self.k(ind + 1, f"{t}[i, j] = T.min(T.max({t}[i, j], -8.0), 8.0)")
                self.r(f"{t} = np.clip({t}, -8.0, 8.0)")
                self.written(t, 8.0)

    def statement(self):
        d = self.d
        kind = d.weighted(["map", "if", "ite", "reduce_row", "reduce_col", "cumsum"],
                          [5, 3, 2, 2, 2, 2])
        self.feats.add(f"dialect_{kind}")
        P = f"for i, j in T.Parallel({self.bm}, {self.bn}):"
        if kind == "map":  # 1-3 statements in one body, each reading what the earlier wrote
            self.k(0, P)
            for _ in range(d.int(1, 3)):
                t = d.choice(["a", "b", "x"])
                e, re_, bd = self.expr()
                self.k(1, f"{t}[i, j] = {e}")
                self.r(f"{t} = np.broadcast_to({re_}, ({self.bm}, {self.bn})).copy()")
                self.written(t, bd)
        elif kind == "if":  # if/else in the map; the condition may read what the branch writes
            c, rc, on = self.cond()
            t = on if on is not None and d.boolean(0.6) else d.choice(["a", "b"])
            if on == t:
                self.feats.add("dialect_if_reads_written")
            e1, r1, b1 = self.expr()
            self.k(0, P)
            self.k(1, f"if {c}:")
            self.k(2, f"{t}[i, j] = {e1}")
            if d.boolean(0.6):
                e2, r2, b2 = self.expr()
                self.k(1, "else:")
                self.k(2, f"{t}[i, j] = {e2}")
            else:
                r2, b2 = t, self.bound[t]
            # the condition first; then each branch a masked statement, the `else` one after
            # the `then` one (a read of another lane sees that lane's `then` write)
            self.r(f"_c = np.broadcast_to({rc}, ({self.bm}, {self.bn})).copy()")
            self.r(f"{t} = np.where(_c, {r1}, {t})")
            self.r(f"{t} = np.where(_c, {t}, {r2})")
            self.written(t, max(b1, b2))
        elif kind == "ite":
            c, rc, _ = self.cond()
            t = d.choice(["a", "b"])
            e1, r1, b1 = self.expr()
            e2, r2, b2 = self.expr()
            self.k(0, P)
            self.k(1, f"{t}[i, j] = T.if_then_else({c}, {e1}, {e2})")
            self.r(f"{t} = np.where({rc}, {r1}, {r2})")
            self.written(t, max(b1, b2))
        elif kind in ("reduce_row", "reduce_col"):
            red = d.choice(["sum", "max", "min", "absmax", "abssum"])
            src = d.choice(["x", "a", "b"])
            row = kind == "reduce_row"
            acc, axis, n = ("r", 1, self.bn) if row else ("cs", 0, self.bm)
            dim = d.choice([str(axis), str(axis - 2)])
            clear = d.boolean(0.4)
            self.k(0, f"T.reduce_{red}({src}, {acc}, dim={dim}, clear={clear})")
            fn = {"sum": "np.sum({x}, axis={a})", "max": "np.max({x}, axis={a})",
                  "min": "np.min({x}, axis={a})", "absmax": "np.max(np.abs({x}), axis={a})",
                  "abssum": "np.sum(np.abs({x}), axis={a})"}[red].format(x=src, a=axis)
            comb = {"sum": "{o} + {v}", "abssum": "{o} + {v}", "max": "np.maximum({o}, {v})",
                    "absmax": "np.maximum({o}, {v})", "min": "np.minimum({o}, {v})"}[red]
            self.r(f"{acc} = {fn}" if clear else f"{acc} = " + comb.format(o=acc, v=fn))
            self.terms = max(self.terms, n * 4)
            if d.boolean(0.5) and row:  # use the row values in a map
                self.k(0, P)
                t = d.choice(["a", "b"])
                self.k(1, f"{t}[i, j] = {src}[i, j] - r[i] * {1.0 / n if 'sum' in red else 0.5}")
                self.r(f"{t} = {src} - r[:, None] * {1.0 / n if 'sum' in red else 0.5}")
                self.written(t, self.bound[src] * 4 + 4.0)
                self.k(0, "T.fill(r, 0.0)")  # keeps the accumulator's magnitude in check
                self.r("r = np.zeros_like(r)")
        else:  # cumsum along either dim, maybe reversed, into another tile or in place
            src = d.choice(["x", "a", "b"])
            dst = d.choice(["a", "b"]) if d.boolean(0.7) else src
            dim = d.int(0, 1)
            rev = d.boolean(0.4)
            self.k(0, f"T.cumsum({src}, {dst}, dim={dim}, reverse={rev})")
            if rev:
                self.r(f"{dst} = np.flip(np.cumsum(np.flip({src}, {dim}), axis={dim}), {dim})")
            else:
                self.r(f"{dst} = np.cumsum({src}, axis={dim})")
            n = self.bn if dim == 1 else self.bm
            self.terms = max(self.terms, n)
            self.written(dst, self.bound[src] * n)
            if dst == "x" or src == "x":
                self.exact["x"] = self.exact["x"] and dst != "x"
        self.clamp_if_big(0)


def gen_dialect(d, seed):
    M = d.dim(1, 140)
    N = d.dim(1, 100)
    bm = d.choice([1, 2, 4, 8, 16, 32])
    bn = d.choice([8, 16, 32, 64])
    in_dt, out_dt = d.choice(FLOATS), d.choice(FLOATS + ["float32"])
    dyn = d.boolean(0.4)
    pad = d.choice([None, None, -1.0, 2.0])
    gm, gn = -(-M // bm), -(-N // bn)
    feats = {"dialect", f"in_{in_dt}", f"out_{out_dt}"} | ({"dynamic_rows"} if dyn else set())
    if pad is not None:
        feats.add("copy_pad_value")
    tensors = [Tensor("X", [M, N], in_dt, -2.0, 2.0), Tensor("O", [M, N], out_dt, output=True),
               Tensor("R", [gn, M], "float32", output=True),
               Tensor("S", [gm, N], "float32", output=True)]
    ts = _Tiles(d, bm, bn)
    for _ in range(d.int(1, 5)):
        ts.statement()
    feats |= ts.feats

    src = Source(KERNEL_HEADER[:2])
    mrow = "m" if dyn else str(M)
    if dyn:
        src.add(0, 'm = T.dynamic("m")')
    src.add(0, "")
    src.add(0, "")
    src.add(0, "@T.prim_func")
    shp = {"X": f"({mrow}, {N})", "O": f"({mrow}, {N})", "R": f"({gn}, {mrow})",
           "S": f"(T.ceildiv(m, {bm}), {N})" if dyn else f"({gm}, {N})"}
    src.add(0, "def main(" + ", ".join(f'{t.name}: T.Tensor({shp[t.name]}, "{t.dtype}")'
                                         for t in tensors) + "):")
    src.add(1, f"with T.Kernel(T.ceildiv({N}, {bn}), T.ceildiv({mrow}, {bm})) as (bx, by):")
    for name, shape in [("x", (bm, bn)), ("a", (bm, bn)), ("b", (bm, bn)), ("r", (bm,)),
                        ("cs", (bn,))]:
        src.add(2, f'{name} = T.alloc_{d.choice(["fragment", "shared"])}({shape}, "float32")')
    padarg = f", pad_value={pad}" if pad is not None else ""
    src.add(2, f"T.copy(X[by * {bm}, bx * {bn}], x{padarg})")
    src.add(2, "T.clear(a)")
    src.add(2, "T.fill(b, 0.0)")
    src.add(2, "T.fill(r, 0.0)")
    src.add(2, "T.clear(cs)")
    for ind, text in ts.src:
        src.add(2 + ind, text)
    out = ts.last if d.boolean(0.8) else d.choice(["x", "a", "b"])
    src.add(2, f"T.copy({out}, O[by * {bm}, bx * {bn}])")
    src.add(2, f"T.copy(r, R[bx, by * {bm}])")
    src.add(2, f"T.copy(cs, S[by, bx * {bn}])")

    ref = Source()
    ref.add(0, "def reference(X):")
    ref.block(1, [f"O = np.zeros(({M}, {N}))", f"R = np.zeros(({gn}, {M}))",
                  f"S = np.zeros(({gm}, {N}))", f"for by in range({gm}):",
                  f"    for bx in range({gn}):"])
    ind = 3
    ref.block(ind, [f"r0, c0 = by * {bm}, bx * {bn}", f"ii, jj = np.indices(({bm}, {bn}))",
                    f"x = rnd(load(X, (r0, c0), ({bm}, {bn})), 'float32')"])
    if pad is not None:
        ref.add(ind, f"x = np.where((r0 + ii < {M}) & (c0 + jj < {N}), x, {pad})")
    ref.block(ind, [f"a = np.zeros(({bm}, {bn}))", f"b = np.zeros(({bm}, {bn}))",
                    f"r = np.zeros(({bm},))", f"cs = np.zeros(({bn},))"])
    for line in ts.ref:
        ref.add(ind, line)
    ref.block(ind, [f"store(O, (r0, c0), rnd({out}, '{out_dt}'))", "store(R, (bx, r0), r[None, :])",
                    "store(S, (by, c0), cs[None, :])"])
    ref.add(1, "return [O, R, S]")
    tol = tolerance(out_dt, EPS["float32"], terms=ts.terms, slack=32.0)
    tol_f = tolerance("float32", EPS["float32"], terms=ts.terms, slack=32.0)
    case = build_case("dialect", seed, src, tensors, ref, {"O": tol, "R": tol_f, "S": tol_f}, feats)
    return case
