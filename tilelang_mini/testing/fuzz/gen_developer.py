"""tilelang-ascend developer-mode family: `T.Kernel(n, is_npu=True) as (cid, vid)` with block
indices computed from `cid`, no `T.Scope`, chip and developer allocations mixed
(`alloc_L1`/`alloc_shared` operands, `alloc_L0C`/`alloc_fragment` accumulators,
`alloc_ub`/`alloc_shared`/`alloc_fragment` vector tiles). The compiler splits cube and vector
work and places the flags. A GEMM (or a plain load) is followed by a random chain of `T.tile.*`
vector operations on whole tiles and on row slices `c[h, :]` (binary, scalar, unary, axpy,
leaky_relu, clamp, broadcast, row_expand, compare + select, cast round trips, `T.reduce_*`),
optionally written per vector core (`vid` halves of the accumulator).

The reference follows the generator's own list of operations in float64 on zero-padded tiles.
"""
from __future__ import annotations

from .case import EPS, Source, Tensor, build_case, input_names, reference_source, signature
from .case import KERNEL_HEADER

_BIN = {"add": "{x} + {y}", "sub": "{x} - {y}", "mul": "{x} * {y}",
        "max": "np.maximum({x}, {y})", "min": "np.minimum({x}, {y})"}
_UNARY = {"abs": "np.abs({x})", "relu": "np.maximum({x}, 0.0)",
          "sigmoid": "1.0 / (1.0 + np.exp(-{x}))", "tanh": "np.tanh({x})"}
_CMP = {"GT": ">", "GE": ">=", "LT": "<", "LE": "<="}


class _Chain:
    """The epilogue being built: kernel lines, reference lines and a magnitude bound per tile."""

    def __init__(self, d, rows, bn, ind):
        self.d, self.rows, self.bn, self.ind = d, rows, bn, ind
        self.src: list = []      # (relative indent, text)
        self.ref: list = []
        self.bound = {"c": 1.0, "d": 1.0, "t": 1.0}
        self.feats: set = set()
        self.eps = EPS["float32"]
        self.nops = 0

    def k(self, text, ind=0):
        self.src.append((ind, text))

    def r(self, text):
        self.ref.append(text)

    def dst(self):
        return self.d.choice(["c", "t"])

    def op(self, allow_exp=True):
        d = self.d
        kind = d.weighted(["bin", "scalar", "unary", "exp", "div", "axpy", "leaky", "clamp",
                           "bias", "rowslice", "reduce", "select", "cast"],
                          [5, 3, 3, 2, 2, 1, 1, 1, 2, 2, 2, 2, 1])
        self.nops += 1
        self.feats.add(f"tile_{kind}")
        b = self.bound
        if kind == "bin":
            name = d.choice(list(_BIN))
            x, y, z = d.choice("cdt"), d.choice("cdt"), self.dst()
            self.k(f"T.tile.{name}({z}_ub, {x}_ub, {y}_ub)")
            self.r(f"{z} = " + _BIN[name].format(x=x, y=y))
            b[z] = {"add": b[x] + b[y], "sub": b[x] + b[y], "mul": b[x] * b[y]}.get(
                name, max(b[x], b[y]))
        elif kind == "scalar":
            name = d.choice(["adds", "muls", "maxs", "mins", "add", "mul"])
            c = d.choice([0.5, -1.5, 2.0, 0.25, -0.75])
            x, z = d.choice("cdt"), self.dst()
            self.k(f"T.tile.{name}({z}_ub, {x}_ub, {c})")
            op = {"adds": "+", "add": "+", "muls": "*", "mul": "*"}.get(name)
            self.r(f"{z} = {x} {op} {c}" if op else
                   f"{z} = np.{'maximum' if name == 'maxs' else 'minimum'}({x}, {c})")
            b[z] = b[x] + abs(c) if op == "+" else b[x] * abs(c) if op == "*" else max(b[x], abs(c))
        elif kind == "unary":
            name = d.choice(list(_UNARY))
            x, z = d.choice("cdt"), self.dst()
            self.k(f"T.tile.{name}({z}_ub, {x}_ub)")
            self.r(f"{z} = " + _UNARY[name].format(x=x))
            b[z] = 1.0 if name in ("sigmoid", "tanh") else b[x]
        elif kind == "exp":  # exp of a value kept small by a clamp
            x, z = d.choice("cdt"), self.dst()
            self.k(f"T.tile.clamp({z}_ub, {x}_ub, -3.0, 3.0)")
            self.k(f"T.tile.exp({z}_ub, {z}_ub)")
            self.r(f"{z} = np.exp(np.clip({x}, -3.0, 3.0))")
            b[z] = 20.1
        elif kind == "div":  # by |y| + 1 (also sqrt / rsqrt / ln of it)
            x, y = d.choice("cdt"), d.choice("cdt")
            z = "t" if x != "t" else "c"
            fn = d.choice(["div", "sqrt", "rsqrt", "ln", "reciprocal"])
            self.k(f"T.tile.abs(t_ub, {y}_ub)")
            self.k("T.tile.adds(t_ub, t_ub, 1.0)")
            self.r(f"t = np.abs({y}) + 1.0")
            if fn == "div":
                self.k(f"T.tile.div({z}_ub, {x}_ub, t_ub)")
                self.r(f"{z} = {x} / t")
                b[z] = b[x]
            else:
                z = d.choice(["c", "t"])
                self.k(f"T.tile.{fn}({z}_ub, t_ub)")
                self.r(f"{z} = " + {"sqrt": "np.sqrt(t)", "rsqrt": "1.0 / np.sqrt(t)",
                                    "ln": "np.log(t)", "reciprocal": "1.0 / t"}[fn])
                b[z] = b[y] + 1.0
            b["t"] = max(b["t"], b[y] + 1.0) if z != "t" else b[z]
        elif kind == "axpy":
            x, z = d.choice("cdt"), self.dst()
            c = d.choice([0.5, -2.0, 1.5])
            self.k(f"T.tile.axpy({z}_ub, {x}_ub, {c})")
            self.r(f"{z} = {z} + {x} * {c}")
            b[z] = b[z] + b[x] * abs(c)
        elif kind == "leaky":
            x, z = d.choice("cdt"), self.dst()
            c = d.choice([0.1, 0.5])
            self.k(f"T.tile.leaky_relu({z}_ub, {x}_ub, {c})")
            self.r(f"{z} = np.where({x} >= 0, {x}, {x} * {c})")
            b[z] = b[x]
        elif kind == "clamp":
            x, z = d.choice("cdt"), self.dst()
            lo, hi = d.choice([(-1.0, 1.0), (-0.5, 2.0), (0.0, 3.0)])
            self.k(f"T.tile.clamp({z}_ub, {x}_ub, {lo}, {hi})")
            self.r(f"{z} = np.clip({x}, {lo}, {hi})")
            b[z] = max(abs(lo), abs(hi))
        elif kind == "bias":  # a (bn,) row vector: broadcast into a tile, or per row slice
            z = self.dst()
            if d.boolean(0.5):
                self.k("T.tile.broadcast(t_ub, b_ub)")
                self.r("t = np.broadcast_to(bv[None, :], t.shape).copy()")
                b["t"] = 1.0
                self.feats.add("tile_broadcast")
            else:
                loop = d.choice(["T.serial", "range"])
                self.k(f"for h in {loop}({self.rows}):")
                self.k(f"T.tile.add({z}_ub[h, :], {z}_ub[h, :], b_ub)", 1)
                self.r(f"{z} = {z} + bv[None, :]")
                b[z] += 1.0
                self.feats.add("tile_row_region")
        elif kind == "rowslice":  # per-row scalar from a row statistic tile
            z = self.dst()
            loop = d.choice(["T.serial", "range"])
            self.k(f"T.reduce_max({z}_ub, r_ub, dim=-1)")
            self.r(f"rv = {z}.max(axis=1)")
            self.k("T.tile.mul(r_ub, r_ub, 0.5)")
            self.r("rv = rv * 0.5")
            self.k(f"for h in {loop}({self.rows}):")
            self.k(f"T.tile.sub({z}_ub[h, :], {z}_ub[h, :], r_ub[h])", 1)
            self.r(f"{z} = {z} - rv[:, None]")
            b[z] *= 2.0
            self.feats.add("tile_row_scalar")
        elif kind == "reduce":
            red = d.choice(["sum", "max", "min", "abssum", "absmax"])
            x, z = d.choice("cdt"), self.dst()
            dim = d.choice(["-1", "1"])
            self.k(f"T.reduce_{red}({x}_ub, r_ub, dim={dim})")
            self.r("rv = " + {"sum": f"{x}.sum(axis=1)", "max": f"{x}.max(axis=1)",
                              "min": f"{x}.min(axis=1)", "abssum": f"np.abs({x}).sum(axis=1)",
                              "absmax": f"np.abs({x}).max(axis=1)"}[red])
            n = self.bn if red in ("sum", "abssum") else 1
            rb = b[x] * n
            if rb > 1.0:
                self.k(f"T.tile.muls(r_ub, r_ub, {1.0 / n if n > 1 else 0.5})")
                self.r(f"rv = rv * {1.0 / n if n > 1 else 0.5}")
                rb = b[x]
            how = d.choice(["row_expand_sub", "row_expand_mul"])
            self.k(f"T.tile.{how}({z}_ub, {z}_ub, r_ub)")
            self.r(f"{z} = {z} {'-' if how == 'row_expand_sub' else '*'} rv[:, None]")
            b[z] = b[z] + rb if how == "row_expand_sub" else b[z] * rb
            self.eps = max(self.eps, EPS["float32"] * n)
        elif kind == "select":  # compare an exact input with a constant, select between tiles
            mode = d.choice(list(_CMP))
            c = d.choice([0.0, 0.25, -0.5])
            x, y, z = d.choice("cdt"), d.choice("cdt"), self.dst()
            self.k(f'T.tile.compare(m_ub, d_ub, {c}, "{mode}")')
            self.k(f"T.tile.select({z}_ub, m_ub, {x}_ub, {y}_ub)")
            self.r(f"{z} = np.where(d0 {_CMP[mode]} {c}, {x}, {y})")
            b[z] = max(b[x], b[y])
        else:  # cast round trip through a 16-bit tile
            x, z = d.choice("cdt"), self.dst()
            mode = d.choice(["CAST_RINT", "CAST_NONE"])
            self.k(f'T.tile.cast(h_ub, {x}_ub, "{mode}", {self.rows * self.bn})')
            self.k(f'T.tile.cast({z}_ub, h_ub, "CAST_NONE", {self.rows * self.bn})')
            self.r(f"{z} = rnd({x}, HDT)")
            b[z] = b[x]
            self.eps = max(self.eps, 2 * EPS["bfloat16"])
            self.feats.add("tile_cast")
        for z in "ct":  # keep magnitudes in check
            if b[z] > 50.0:
                self.k(f"T.tile.clamp({z}_ub, {z}_ub, -8.0, 8.0)")
                self.r(f"{z} = np.clip({z}, -8.0, 8.0)")
                b[z] = 8.0


def gen_developer(d, seed):
    """A developer-mode kernel: (GEMM or load) -> random T.tile chain -> store."""
    gemm = d.boolean(0.7)
    halves = gemm and d.boolean(0.3)  # vector work written per AIV: vid halves of the tile
    M = d.dim(1, 130)
    N = d.dim(1, 130)
    K = d.dim(1, 160)
    bm = d.choice([16, 32, 64]) if gemm else d.choice([1, 2, 3, 4, 8, 16, 32])
    bn = d.choice([16, 32, 64]) if gemm or d.boolean(0.7) else d.choice([1, 8, 24, 40])
    bk = d.choice([16, 32, 64])
    dt = d.choice(["float16", "bfloat16", "float32"])
    out_dt = d.choice(["float32", "float32", "float16", "bfloat16"])
    hdt = d.choice(["float16", "bfloat16"])
    ta, tb = gemm and d.boolean(0.25), gemm and d.boolean(0.3)
    # the vector cores prepare A (scale, cast) and copy it into the L1 operand (their rows)
    pro = gemm and not ta and d.boolean(0.35)
    pro_c = d.choice([0.5, -2.0, 1.5])
    swapped = halves and d.boolean(0.4)  # AIV v handles the rows of part 1 - v
    # packed int4 operands (TileLang's gemm_int4 layout, A [M, K] and B [N, K]) into an int32
    # L0C accumulator on the 910b cube; K even (whole bytes)
    int4 = gemm and tb and not ta and not pro and d.boolean(0.3)
    if int4:
        dt, K = "int4", K + K % 2
    m_num, n_num = -(-M // bm), -(-N // bn)
    rows = bm // 2 if halves else bm
    feats = {"developer", f"in_{dt}", f"out_{out_dt}"} | ({"developer_gemm"} if gemm else set())
    feats |= {"developer_vid_halves"} if halves else set()
    tensors = []
    if gemm:
        lo, hi = (-8, 7) if int4 else (-1.0, 1.0)
        tensors += [Tensor("A", [K, M] if ta else [M, K], "float32" if pro else dt, lo, hi),
                    Tensor("B", [N, K] if tb else [K, N], dt, lo, hi)]
        feats |= {"int4", "developer_int4"} if int4 else set()
        feats |= {"developer_prologue"} if pro else set()
        feats |= {"developer_vid_swapped"} if swapped else set()
        feats |= ({"transpose_A"} if ta else set()) | ({"transpose_B"} if tb else set())
    else:
        tensors.append(Tensor("X", [M, N], dt, -2.0, 2.0))
    tensors += [Tensor("D", [M, N], "float32", -1.0, 1.0), Tensor("Bias", [N], "float32", -1.0, 1.0),
                Tensor("C", [M, N], out_dt, output=True)]

    ch = _Chain(d, rows, bn, 3)
    if gemm:  # scale the GEMM's sum of K products to O(1) (by a power of two: exact)
        s = 2.0 ** -max(0, (K.bit_length() - 1) // 2)
        if int4:  # |a b| <= 64: the whole sum into [-1, 1]
            s = 2.0 ** -(64 * K).bit_length()
        ch.k(f"T.tile.muls(c_ub, c_ub, {s})")
        ch.r(f"c = c * {s}")
    for _ in range(d.int(1, 5)):
        ch.op()

    def alloc(kinds):
        return d.choice(kinds)
    src = Source(KERNEL_HEADER)
    src.add(0, signature(tensors))
    src.add(1, f"with T.Kernel({m_num * n_num}, is_npu=True) as (cid, vid):")
    if d.boolean(0.5):
        src.add(2, f"bx = cid // {n_num}")
        src.add(2, f"by = cid % {n_num}")
    else:  # the other order of the block walk
        src.add(2, f"by = cid // {m_num}")
        src.add(2, f"bx = cid % {m_num}")
    ub_kinds = ["ub", "shared", "fragment", "UB"]
    if gemm:
        a_tile = (bk, bm) if ta else (bm, bk)
        b_tile = (bn, bk) if tb else (bk, bn)
        src.add(2, f'A_L1 = T.alloc_{alloc(["L1", "shared"])}({a_tile}, "{dt}")')
        src.add(2, f'B_L1 = T.alloc_{alloc(["L1", "shared"])}({b_tile}, "{dt}")')
        src.add(2, f'C_L0 = T.alloc_{alloc(["L0C", "fragment"])}(({bm}, {bn}), '
                   f'"{"int32" if int4 else "float32"}")')
    for name, shape, dtype in [("c", (rows, bn), "float32"), ("d", (rows, bn), "float32"),
                               ("t", (rows, bn), "float32"), ("b", (bn,), "float32"),
                               ("r", (rows,), "float32"), ("m", (rows, bn), "bool"),
                               ("h", (rows, bn), hdt), ("o", (rows, bn), out_dt)]:
        if name == "m" and "tile_select" not in ch.feats:
            continue
        if name == "h" and "tile_cast" not in ch.feats:
            continue
        src.add(2, f'{name}_ub = T.alloc_{alloc(ub_kinds)}({shape}, "{dtype}")')
    part = "(1 - vid)" if swapped else "vid"
    row0 = f"bx * {bm} + {part} * {rows}" if halves else f"bx * {bm}"
    if pro:
        src.add(2, f'a_ub = T.alloc_{alloc(ub_kinds)}(({rows}, {bk}), "float32")')
        src.add(2, f'ah_ub = T.alloc_{alloc(ub_kinds)}(({rows}, {bk}), "{dt}")')
    if gemm:
        nk = f"T.ceildiv({K}, {bk})"
        kind = d.weighted(["pipelined", "serial", "range"], [3, 3, 1])
        loop = (f"T.Pipelined({nk}, num_stages={d.int(1, 3)})" if kind == "pipelined"
                else f"T.serial({nk})" if kind == "serial" else f"range({nk})")
        clear_in_loop = d.boolean(0.5)
        if not clear_in_loop:
            src.add(2, "T.clear(C_L0)")
        src.add(2, f"for k in {loop}:")
        if pro:
            src.add(3, f"T.copy(A[{row0}, k * {bk}], a_ub)")
            src.add(3, f"T.tile.muls(a_ub, a_ub, {pro_c})")
            cast = "CAST_NONE" if dt == "float32" else "CAST_RINT"  # (see the output cast)
            src.add(3, f'T.tile.cast(ah_ub, a_ub, "{cast}", {rows * bk})')
            src.add(3, f"T.copy(ah_ub, A_L1[{part} * {rows}:{part} * {rows} + {rows}, :])" if halves
                    else "T.copy(ah_ub, A_L1)")
        else:
            src.add(3, f"T.copy(A[k * {bk}, bx * {bm}], A_L1)" if ta else f"T.copy(A[bx * {bm}, k * {bk}], A_L1)")
        src.add(3, f"T.copy(B[by * {bn}, k * {bk}], B_L1)" if tb else f"T.copy(B[k * {bk}, by * {bn}], B_L1)")
        flags = (", transpose_A=True" if ta else "") + (", transpose_B=True" if tb else "")
        src.add(3, f"T.gemm(A_L1, B_L1, C_L0{flags}{', clear_accum=(k == 0)' if clear_in_loop else ''})")
        if halves:
            src.add(2, f"T.copy(C_L0[{part} * {rows}:{part} * {rows} + {rows}, :], c_ub)")
        else:
            src.add(2, "T.copy(C_L0, c_ub)")
    else:
        src.add(2, f"T.copy(X[{row0}, by * {bn}], c_ub)")
    src.add(2, f"T.copy(D[{row0}, by * {bn}], d_ub)")
    src.add(2, f"T.copy(Bias[by * {bn}], b_ub)")
    if d.boolean(0.5):
        src.add(2, "T.tile.fill(t_ub, 0.0)")
    else:
        src.add(2, "T.tile.clear(t_ub)")
    for ind, text in ch.src:
        src.add(2 + ind, text)
    if out_dt == "float32" and d.boolean(0.6):
        src.add(2, f"T.copy(c_ub, C[{row0}, by * {bn}])")
    else:
        # CAST_RINT from float32 into float32 rounds to integral values (AscendC's Cast float ->
        # same float, as tile.cast implements it): a plain float32 output takes CAST_NONE
        mode = "CAST_NONE" if out_dt == "float32" else "CAST_RINT"
        src.add(2, f'T.tile.cast(o_ub, c_ub, "{mode}", {rows * bn})')
        src.add(2, f"T.copy(o_ub, C[{row0}, by * {bn}])")

    ref, _ = reference_source(input_names(tensors), [("C", (M, N))],
                              [("bx", m_num), ("by", n_num)] + ([("v", 2)] if halves else []))
    ind = 3 + halves
    vpart = "(1 - v)" if swapped else "v"
    r0 = f"bx * {bm} + {vpart} * {rows}" if halves else f"bx * {bm}"
    ref.add(ind, f"HDT = '{hdt}'")
    if gemm:
        ref.add(ind, f"c = np.zeros(({bm}, {bn}))")
        ref.add(ind, f"for k in range(cdiv({K}, {bk})):")
        A_, B_ = ("unpack4(A)", "unpack4(B)") if int4 else ("A", "B")
        a = (f"load(A, (k * {bk}, bx * {bm}), {(bk, bm)}).T" if ta
             else f"load({A_}, (bx * {bm}, k * {bk}), {(bm, bk)})")
        if pro:
            a = f"rnd(rnd({a}, 'float32') * {pro_c}, '{dt}')"
        bb = (f"load({B_}, (by * {bn}, k * {bk}), {(bn, bk)}).T" if tb
              else f"load(B, (k * {bk}, by * {bn}), {(bk, bn)})")
        ref.add(ind + 1, f"c = c + {a} @ {bb}")
        if halves:
            ref.add(ind, f"c = c[{vpart} * {rows}:({vpart} + 1) * {rows}]")
    else:
        ref.add(ind, f"c = rnd(load(X, ({r0}, by * {bn}), ({rows}, {bn})), 'float32')")
    ref.add(ind, f"d = load(D, ({r0}, by * {bn}), ({rows}, {bn}))")
    ref.add(ind, "d0 = d")
    ref.add(ind, f"bv = load(Bias, (by * {bn},), ({bn},))")
    ref.add(ind, f"t = np.zeros(({rows}, {bn}))")
    for line in ch.ref:
        ref.add(ind, line)
    ref.add(ind, f"store(C, ({r0}, by * {bn}), rnd(c, '{out_dt}'))")
    ref.add(1, "return [C]")
    # values are O(1) after the GEMM's scale: the GEMM sums K products of |a|, |b| <= 1
    from .case import tolerance
    terms = (K if gemm else 1) + ch.nops
    rtol, atol = tolerance(out_dt, ch.eps, terms=terms, slack=32.0)
    scale_note = max(1.0, float(K) ** 0.5) if gemm else 1.0
    feats |= ch.feats
    case = build_case("developer", seed, src, tensors, ref, {"C": (rtol, atol * scale_note)}, feats)
    return case
