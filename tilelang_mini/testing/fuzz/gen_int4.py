"""The `int4` family: packed T.int4 tensors and tiles (two values a byte along the last dim, the
even index in the low nibble; the caller passes the packed int8 array, see make_inputs).

* `gemm`: TileLang's gemm_int4 shape, C = A @ B^T with A [M, K] and B [N, K] int4 on the 910b
  cube (int32 accumulate), stages / serial / range loops, awkward M, N, K (K even); optionally a
  float32 epilogue that dequantises the result with a per-column scale. The 950's cube has no
  int4: its simulate step must reject the gemm line (runner.CHIP_LIMITS).
* `dequant`: weight-only quantisation (W4A16): int4 weights W ([N, K], or [K, N]) copied into a
  vector tile, dequantised in a T.Parallel map ((w + offset) * scale, the scale per output column
  or per (K block, column)) into a float16/bfloat16 shared tile, then multiplied with A.
* `nibbles`: int4 copy-cast: an int4 tile read nibble by nibble into int32 / float32 outputs,
  rewritten serially (a mirrored nibble, so later writes read earlier ones; values wrap to 4
  bits), viewed as its packed bytes (T.view as int8, read and written), reduced whole
  (T.reduce_* over either dim reads the values), copied out as int4.

The references unpack and pack the bytes themselves (REFERENCE_PRELUDE's unpack4 / pack4).
The `developer` family also draws int4 GEMM operands (alloc_L1 tiles, an int32 L0C).
"""
from __future__ import annotations

from .case import (EPS, Tensor, build_case, input_names, kernel_source, reference_source,
                   tolerance)
from .gen_cube import _grid, _loop


def gen_int4(d, seed):
    kind = d.weighted(["gemm", "dequant", "nibbles"], [3, 3, 3])
    return {"gemm": _gemm, "dequant": _dequant, "nibbles": _nibbles}[kind](d, seed)


def _dim(d, lo, hi, even=False):
    n = d.dim(lo, hi)
    return n + (n % 2) if even else n


def _gemm(d, seed):
    M, N, K = _dim(d, 1, 200), _dim(d, 1, 200), _dim(d, 2, 300, even=True)
    bm, bn, bk = d.choice([16, 32, 64, 128]), d.choice([16, 32, 64, 128]), d.choice([16, 32, 64, 128])
    scaled = d.boolean(0.4)
    feats = {"int4", "int4_gemm", "in_int4", "transpose_B"}
    tensors = [Tensor("A", [M, K], "int4", -8, 7), Tensor("B", [N, K], "int4", -8, 7)]
    if scaled:
        feats.add("int4_gemm_scaled")
        tensors.append(Tensor("Sc", [N], "float32", 0.5, 2.0))
    tensors.append(Tensor("C", [M, N], "float32" if scaled else "int32", output=True))
    allocs = [("A_s", "shared", (bm, bk), "int4"), ("B_s", "shared", (bn, bk), "int4"),
              ("C_l", "fragment", (bm, bn), "int32")]
    if scaled:
        allocs += [("sc", "fragment", (bn,), "float32"), ("C_o", "fragment", (bm, bn), "float32")]
    src, marks = kernel_source(tensors, _grid(M, N, bm, bn), allocs)
    first_clear = d.boolean(0.3)
    if not first_clear:
        src.add(2, "T.clear(C_l)")
    marks["loop"] = src.add(2, f"for k in {_loop(d, f'T.ceildiv({K}, {bk})', feats)}:")
    marks["copy_a"] = src.add(3, f"T.copy(A[by * {bm}, k * {bk}], A_s)")
    marks["copy_b"] = src.add(3, f"T.copy(B[bx * {bn}, k * {bk}], B_s)")
    clear = ", clear_accum=(k == 0)" if first_clear else ""
    if first_clear:
        feats.add("clear_accum_k0")
    marks["gemm"] = src.add(3, f"T.gemm(A_s, B_s, C_l, transpose_B=True{clear})")
    if scaled:
        src.block(2, [f"T.copy(Sc[bx * {bn}], sc)",
                      f"for i, j in T.Parallel({bm}, {bn}):",
                      '    C_o[i, j] = T.cast(C_l[i, j], "float32") * sc[j]',
                      f"T.copy(C_o, C[by * {bm}, bx * {bn}])"])
    else:
        src.add(2, f"T.copy(C_l, C[by * {bm}, bx * {bn}])")
    params = input_names(tensors)
    ref, _ = reference_source(params)
    ref.block(1, ["a, b = unpack4(A), unpack4(B)", "c = a @ b.T"])
    if scaled:  # the int32 product is exact; one float32 product per element
        ref.add(1, "c = rnd(c * Sc[None, :], 'float32')")
    ref.add(1, "return [c]")
    tol = (tolerance("float32", EPS["float32"], terms=1, slack=2.0) if scaled else (0.0, 0.0))
    return build_case("int4", seed, src, tensors, ref, {"C": tol}, feats, marks)


def _dequant(d, seed):
    M, N, K = _dim(d, 1, 200), _dim(d, 2, 200, even=True), _dim(d, 2, 260, even=True)
    dt = d.choice(["float16", "bfloat16"])
    bm, bn, bk = d.choice([16, 32, 64]), d.choice([16, 32, 64, 128]), d.choice([16, 32, 64])
    nt = d.boolean(0.5)  # W stored [N, K] (the gemm transposes it) or [K, N]
    grouped = d.boolean(0.4)  # one scale per (K block, column), else per column
    offset = d.choice([0.0, 0.0, 0.5, -8.0])
    feats = {"int4", "int4_dequant", f"in_{dt}", "vector_cube"}
    feats.add("transpose_B" if nt else "int4_last_dim_n")
    nkb = -(-K // bk)
    tensors = [Tensor("A", [M, K], dt), Tensor("W", [N, K] if nt else [K, N], "int4", -8, 7),
               Tensor("S", [nkb, N] if grouped else [N], "float32", 0.01, 0.2),
               Tensor("C", [M, N], "float32", output=True)]
    w_tile = (bn, bk) if nt else (bk, bn)
    allocs = [("A_s", "shared", (bm, bk), dt), ("w", "fragment", w_tile, "int4"),
              ("wf", "shared", w_tile, dt), ("s", "fragment", (bn,), "float32"),
              ("C_f", "fragment", (bm, bn), "float32")]
    src, marks = kernel_source(tensors, _grid(M, N, bm, bn), allocs)
    src.add(2, "T.clear(C_f)")
    if not grouped:
        src.add(2, f"T.copy(S[bx * {bn}], s)")
    marks["loop"] = src.add(2, f"for k in {_loop(d, f'T.ceildiv({K}, {bk})', feats)}:")
    src.add(3, f"T.copy(A[by * {bm}, k * {bk}], A_s)")
    src.add(3, f"T.copy(W[bx * {bn}, k * {bk}], w)" if nt else
            f"T.copy(W[k * {bk}, bx * {bn}], w)")
    if grouped:
        feats.add("int4_group_scale")
        src.add(3, f"T.copy(S[k, bx * {bn}:bx * {bn} + {bn}], s)")
    col = "i" if nt else "j"
    off = f" + {offset}" if offset else ""
    src.block(3, [f"for i, j in T.Parallel({w_tile[0]}, {w_tile[1]}):",
                  f'    wf[i, j] = (T.cast(w[i, j], "float32"){off}) * s[{col}]'])
    src.add(3, "T.gemm(A_s, wf, C_f" + (", transpose_B=True)" if nt else ")"))
    src.add(2, f"T.copy(C_f, C[by * {bm}, bx * {bn}])")
    ref, _ = reference_source(input_names(tensors))
    ref.block(1, ["w = unpack4(W)" + ("" if nt else ".T") + "  # [N, K]",
                  f"s = np.repeat(S, {bk}, axis=0)[:{K}].T" if grouped else "s = S[:, None]",
                  f"wf = rnd(rnd((w + {offset}) * s, 'float32'), '{dt}')",
                  "c = A @ wf.T", "scale = np.abs(A) @ np.abs(wf).T + 1.0",
                  "return [(c, scale)]"])
    tol = tolerance("float32", EPS["float32"], terms=K, slack=16.0)
    return build_case("int4", seed, src, tensors, ref, {"C": tol}, feats, marks)


def _nibbles(d, seed):
    R, Cn = _dim(d, 1, 90), _dim(d, 2, 150, even=True)
    br, bc = d.choice([8, 16, 32]), d.choice([16, 32, 64])
    y_dt = d.choice(["int32", "float32"])
    a, b = d.int(-3, 3), d.int(-20, 20)
    mirror = d.boolean(0.7)
    view = d.boolean(0.5)
    red = d.choice(["sum", "max", "min", "abssum", "absmax"]) if d.boolean(0.4) else None
    rdim = d.int(0, 1)
    feats = {"int4", "int4_nibbles", f"out_{y_dt}"}
    tensors = [Tensor("X", [R, Cn], "int4", -8, 7), Tensor("Y", [R, Cn], y_dt, output=True),
               Tensor("Z", [R, Cn], "int4", output=True)]
    allocs = [("x", "fragment", (br, bc), "int4"), ("y", "fragment", (br, bc), y_dt)]
    if view:
        feats.add("int4_byte_view")
        tensors.insert(2, Tensor("V", [R, Cn // 2], "int32", output=True))
        allocs.append(("v", "fragment", (br, bc // 2), "int32"))
    nrb, ncb = -(-R // br), -(-Cn // bc)
    if red:  # T.reduce_* of the whole int4 tile (its values), per block
        feats |= {"int4_reduce", f"int4_reduce_{red}"}
        tensors.insert(len(tensors) - 1, Tensor("S", [ncb, R] if rdim else [nrb, Cn], "int32",
                                                output=True))
        allocs.append(("r", "fragment", (br,) if rdim else (bc,), "int32"))
    src, marks = kernel_source(tensors, f"T.Kernel(T.ceildiv({R}, {br})) as bx", allocs)
    marks["loop"] = src.add(2, f"for c in T.serial(T.ceildiv({Cn}, {bc})):")
    src.add(3, f"T.copy(X[bx * {br}, c * {bc}], x)")
    if y_dt == "int32":
        value = f"x[i, j] * {a} + T.abs(x[i, j]) + (c * {bc} + j) % 5 + {b}"
        ref_y = f"t * {a} + np.abs(t) + (c * {bc} + jj) % 5 + {b}"
    else:
        value = f'T.cast(x[i, j], "float32") * {a + 0.5} + T.cast(c * {bc} + j, "float32") * 0.25'
        ref_y = f"t * {a + 0.5} + (c * {bc} + jj) * 0.25"
    src.block(3, [f"for i, j in T.Parallel({br}, {bc}):", f"    y[i, j] = {value}"])
    if view:
        src.block(3, [f'xb = T.view(x, ({br}, {bc // 2}), "int8")',
                      f"for i, j in T.Parallel({br}, {bc // 2}):",
                      '    v[i, j] = T.cast(xb[i, j], "int32") * 2 + 1'])
    if red:
        src.block(3, [f"T.reduce_{red}(x, r, dim={rdim})",
                      f"T.copy(r, S[c, bx * {br}])" if rdim else f"T.copy(r, S[bx, c * {bc}])"])
    # the serial rewrite: new nibble = f(x[i, j], x[i, mirror]) wrapped to 4 bits (the max
    # reads sign-extended nibbles: a reference that did not wrap would differ)
    other = f"x[i, {bc - 1} - j]" if mirror else "x[i, j]"
    p, q = d.int(-3, 3), d.int(-9, 9)
    src.block(3, [f"for i in T.serial({br}):", f"    for j in T.serial({bc}):",
                  f"        x[i, j] = T.max(x[i, j] * {p}, {other}) + {q}"])
    if view and d.boolean(0.5):
        feats.add("int4_byte_view_store")
        row = d.int(0, br - 1)
        col = d.int(0, bc // 2 - 1)
        byte = d.int(-128, 127)
        src.block(3, [f"xb[{row}, {col}] = {byte}"])
        poke = ["pk = pack4(t)", f"pk[{row}, {col}] = {byte}", "t = unpack4(pk)"]
    else:
        poke = []
    src.block(3, [f"T.copy(y, Y[bx * {br}, c * {bc}])", f"T.copy(x, Z[bx * {br}, c * {bc}])"])
    if view:
        src.add(3, f"T.copy(v, V[bx * {br}, c * {bc // 2}])")
    ref, ind = reference_source(input_names(tensors),
                                [("Y", (R, Cn)), ("Zu", (R, Cn))] +
                                ([("V", (R, Cn // 2))] if view else []) +
                                ([("S", (ncb, R) if rdim else (nrb, Cn))] if red else []),
                                [("bx", f"cdiv({R}, {br})"), ("c", f"cdiv({Cn}, {bc})")])
    mirror_ref = f"t[:, {bc - 1} - j]" if mirror else "t[:, j]"
    ref.block(ind, [f"t = load(unpack4(X), (bx * {br}, c * {bc}), ({br}, {bc}))",
                    f"ii, jj = np.indices(({br}, {bc}))",
                    f"store(Y, (bx * {br}, c * {bc}), {ref_y})"])
    if view:
        ref.add(ind, f"store(V, (bx * {br}, c * {bc // 2}), pack4(t) * 2 + 1)")
    if red:  # over the whole tile, its zero padding included
        fn = {"sum": "sum", "abssum": "sum"}.get(red, red[-3:])
        val = "np.abs(t)" if red.startswith("abs") else "t"
        ref.add(ind, f"store(S, (c, bx * {br}) if {rdim} else (bx, c * {bc}), "
                     f"{val}.{fn}(axis={rdim})[None, :])")
    ref.block(ind, [f"for j in range({bc}):",
                    f"    t[:, j] = wrap4(np.maximum(t[:, j] * {p}, {mirror_ref}) + {q})"] + poke +
              [f"store(Zu, (bx * {br}, c * {bc}), t)"])
    ref.add(1, "return [Y" + (", V" if view else "") + (", S" if red else "") + ", pack4(Zu)]")
    exact = (0.0, 0.0)
    tols = {"Y": exact if y_dt == "int32" else tolerance("float32", EPS["float32"]),
            "Z": exact, "V": exact, "S": exact}
    return build_case("int4", seed, src, tensors, ref, tols, feats, marks)
