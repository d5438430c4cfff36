"""Integer element code no other family draws: a random expression tree per element over int32,
int16, int8, uint16 or uint8 tiles (with tails) of `T.floordiv` / `T.floormod` by constants of
either sign (negative values floor: -7 // 2 == -4, -7 % 2 == 1, 7 % -2 == -1), shifts `<<` /
`>>` (arithmetic on negatives) by constants and by `j % 4`, `&`, `|`, `^` with masks, `~`,
`T.clamp`, `T.min` / `T.max`, `+` / `-`, the loop indices, over tiles copied in with an integer
`pad_value` at the tails; and a `T.alloc_var(dtype, init=)` hash updated at run time over a
`T.serial` loop of tile elements (`h = T.floormod(h * 31 + v, P)` or a xor-shift), read after
the loop.

Every intermediate's range is tracked so no value leaves its dtype (uint8: never negative), so
the reference (int64 NumPy from the drawn tree, floor semantics) needs no wrapping rules;
outputs must match exactly."""
from __future__ import annotations

from .case import Source, Tensor, build_case
from .case import kernel_source

RANGE = {"int32": (-2 ** 31, 2 ** 31 - 1), "int16": (-2 ** 15, 2 ** 15 - 1), "uint8": (0, 255),
         "int8": (-128, 127), "uint16": (0, 2 ** 16 - 1)}
INPUT = {"int32": (-3000, 3000), "int16": (-300, 300), "uint8": (0, 255), "int8": (-40, 40),
         "uint16": (0, 3000)}
UNSIGNED = ("uint8", "uint16")


def _fits(dt, lo, hi):
    a, b = RANGE[dt]
    return a <= lo and hi <= b


def _fdiv_bounds(lo, hi, c):
    vals = [lo // c, hi // c]
    return min(vals), max(vals)


def _expr(d, dt, depth, feats, leaves):
    """(kernel text, reference text, lo, hi) of a random integer expression over `leaves`
    (such 4-tuples) and the loop indices."""
    if depth == 0 or d.boolean(0.1):
        if d.boolean(0.2):
            feats.add("bits_index")
            return ("(i + j)", "(I + J)", 0, 80) if dt in UNSIGNED or d.boolean(0.5) else \
                ("(i - j)", "(I - J)", -40, 40)
        return d.choice(leaves)
    signed = dt not in UNSIGNED
    ops = ["floordiv", "floormod", "shl", "shr", "shr_j", "and", "or", "xor", "clamp", "minmax",
           "add", "sub"] + (["not"] if signed else [])
    op = d.choice(ops)
    k, r, lo, hi = _expr(d, dt, depth - 1, feats, leaves)
    out = None
    if op in ("floordiv", "floormod"):
        c = d.choice([c for c in range(-9, 10) if c != 0 and (signed or c > 0)])
        if op == "floordiv":
            out = (f"T.floordiv({k}, {c})", f"({r} // {c})", *_fdiv_bounds(lo, hi, c))
        else:
            out = (f"T.floormod({k}, {c})", f"({r} % {c})", *((0, c - 1) if c > 0 else (c + 1, 0)))
    elif op == "shl":
        s = d.int(0, 3)
        out = (f"({k} << {s})", f"({r} << {s})", lo << s, hi << s)
    elif op == "shr":
        s = d.int(0, 5)
        out = (f"({k} >> {s})", f"({r} >> {s})", lo >> s, hi >> s)
    elif op == "shr_j":
        out = (f"({k} >> (j % 4))", f"({r} >> (J % 4))", min(lo, lo >> 3), max(hi, hi >> 3))
    elif op in ("and", "or", "xor"):
        m = d.int(0, 255 if RANGE[dt][1] > 255 else 63)
        sym = {"and": "&", "or": "|", "xor": "^"}[op]
        bounds = {"and": (0, m) if lo < 0 or signed else (0, min(m, hi)),
                  "or": (lo, hi + m), "xor": (lo - m, hi + m)}[op]
        if not signed:
            bounds = (max(0, bounds[0]), bounds[1])
        out = (f"({k} {sym} {m})", f"({r} {sym} {m})", *bounds)
    elif op == "not":
        out = (f"(~{k})", f"(~{r})", -hi - 1, -lo - 1)
    elif op == "clamp":
        a = d.int(max(lo, RANGE[dt][0]), min(hi, RANGE[dt][1]))
        b = d.int(a, min(hi, RANGE[dt][1]))
        out = (f"T.clamp({k}, {a}, {b})", f"np.clip({r}, {a}, {b})", a, b)
    else:
        k2, r2, lo2, hi2 = _expr(d, dt, depth - 1, feats, leaves)
        if op == "minmax":
            f = d.choice(["min", "max"])
            out = (f"T.{f}({k}, {k2})", f"np.{f}imum({r}, {r2})",
                   min(lo, lo2) if f == "min" else max(lo, lo2),
                   min(hi, hi2) if f == "min" else max(hi, hi2))
        elif op == "add":
            out = (f"({k} + {k2})", f"({r} + {r2})", lo + lo2, hi + hi2)
        else:
            out = (f"({k} - {k2})", f"({r} - {r2})", lo - hi2, hi - lo2)
    if out is None or not _fits(dt, out[2], out[3]):
        return k, r, lo, hi  # the operation could leave the dtype: keep the operand
    feats.add(f"bits_{op}")
    call = {"shl": "shift_left", "shr": "shift_right", "and": "bitwise_and",
            "or": "bitwise_or", "xor": "bitwise_xor", "not": "bitwise_not"}.get(op)
    if call and d.boolean(0.3):  # the function spelling: T.shift_left(x, s), T.bitwise_not(x)
        feats.add("bits_call")
        args = [k] + ([out[0][len(k) + 2:-1].split(" ", 1)[1]] if op != "not" else [])
        out = (f"T.{call}({', '.join(args)})", *out[1:])
    return out


def gen_bits(d, seed):
    dt = d.choice(["int32", "int32", "int16", "uint8", "int8", "uint16"])
    M, N = d.dim(1, 40), d.dim(1, 70)
    bm, bn = d.choice([1, 4, 8]), d.choice([8, 16, 32])
    gm, gn = -(-M // bm), -(-N // bn)
    feats = {"bits", f"bits_{dt}"}
    lo, hi = INPUT[dt]
    tensors = [Tensor("A", [M, N], dt, lo, hi), Tensor("B", [M, N], dt, lo, hi),
               Tensor("Y", [M, N], dt, output=True)]
    leaves = [("a[i, j]", "A_", lo, hi), ("a[i, j]", "A_", lo, hi), ("b[i, j]", "B_", lo, hi)]
    exprs = [_expr(d, dt, d.int(2, 5), feats, leaves)]
    if d.boolean(0.4):  # a second statement reading the first's result in place of b
        c_leaf = ("c[i, j]", "C", *exprs[0][2:])
        exprs.append(_expr(d, dt, d.int(1, 3), feats, leaves[:2] + [c_leaf]))
    hashed = d.boolean(0.6)
    pad = d.int(lo, hi) if d.boolean(0.4) else 0  # T.copy(..., pad_value=) of A at the tails
    if pad:
        feats.add("bits_pad_value")
    if hashed:
        tensors.append(Tensor("H", [gm, gn], "int32", output=True))
        hk = d.choice(["mod", "xorshift"])
        h0 = d.int(-50, 50)
        trips = d.int(1, bm * bn)
        feats |= {"alloc_var_init", f"bits_hash_{hk}"}
    src, _ = kernel_source(tensors, f"T.Kernel({gn}, {gm}) as (bx, by)",
                           [(name, "fragment", (bm, bn), dt) for name in "abc"])
    src.add(2, f"T.copy(A[by * {bm}, bx * {bn}], a{f', pad_value={pad}' if pad else ''})")
    src.add(2, f"T.copy(B[by * {bm}, bx * {bn}], b)")
    src.add(2, f"for i, j in T.Parallel({bm}, {bn}):")
    src.add(3, f"c[i, j] = {exprs[0][0]}")
    ref = Source()
    ref.add(0, "def reference(A, B):")
    ref.block(1, [f"Y = np.zeros(({M}, {N}))", f"H = np.zeros(({gm}, {gn}))",
                  f"I, J = np.meshgrid(np.arange({bm}), np.arange({bn}), indexing='ij')",
                  f"for by in range({gm}):", f"    for bx in range({gn}):",
                  f"        A_ = load(A - {pad}, (by * {bm}, bx * {bn}), ({bm}, {bn}))"
                  f".astype(np.int64) + {pad}",
                  f"        B_ = load(B, (by * {bm}, bx * {bn}), ({bm}, {bn})).astype(np.int64)",
                  f"        C = {exprs[0][1]} + 0 * I"])
    if len(exprs) > 1:
        src.add(2, f"for i, j in T.Parallel({bm}, {bn}):")
        src.add(3, f"c[i, j] = {exprs[1][0]}")
        feats.add("bits_two_maps")
        ref.add(3, f"C = {exprs[1][1]}")
    if hashed:
        src.add(2, f'h = T.alloc_var("int32", init={h0})')
        src.add(2, f"for k in T.serial({trips}):")
        v = f"T.cast(c[k // {bn}, k % {bn}], \"int32\")"
        if hk == "mod":
            src.add(3, f"h = T.floormod(h * 31 + {v}, 65521)")
        else:
            src.add(3, f"h = ((h << 3) ^ {v}) & 1048575")
        src.add(2, "H[by, bx] = h")
        ref.block(3, [f"h = {h0}", "flat = C.reshape(-1)", f"for k in range({trips}):"])
        ref.add(4, "h = (h * 31 + int(flat[k])) % 65521" if hk == "mod"
                else "h = ((h << 3) ^ int(flat[k])) & 1048575")
        ref.add(3, "H[by, bx] = h")
    src.add(2, f"T.copy(c, Y[by * {bm}, bx * {bn}])")
    ref.add(3, f"store(Y, (by * {bm}, bx * {bn}), C.astype(np.float64))")
    ref.add(1, "return [Y, H]" if hashed else "return [Y]")
    tol = {"Y": (0.0, 0.0), "H": (0.0, 0.0)}
    return build_case("bits", seed, src, tensors, ref, tol, feats)
