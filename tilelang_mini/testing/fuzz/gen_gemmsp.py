"""TileLang's 2:4 structured-sparse GEMM `T.gemm_sp(a, e, b, c)` with its metadata built in the
kernel by integer bit code: per group of 4 (float16/bfloat16 A; 2 of 4 kept) the kept positions
p0 < p1 come from two drawn int32 choices (p0 = q0, p1 = p0 + 1 + T.floormod(q1, 3 - p0)), per
group of 2 (float32 A; 1 of 2) the position is `q0 & 1`; a metadata element packs its groups'
4-bit fields (p0 | p1 << 2, or 0b0100 / 0b1110) least significant first with `<<` and `|` in
int32, cast to uint8, or to int16 after a sign fold `((v & 65535) ^ 32768) - 32768`. Sizes have
tails in M, N and in K's blocks (the clipped metadata reads 0: positions 0 and 0 of zero values).

The reference scatters the kept values into a dense float64 A from the same choices and
multiplies; it never reads the metadata layout the kernel computes."""
from __future__ import annotations

from .case import EPS, Source, Tensor, build_case, tolerance
from .case import kernel_source


def gen_gemmsp(d, seed):
    adt = d.choice(["float16", "float16", "bfloat16", "float32"])
    edt = d.choice(["uint8", "int16"])
    wide = adt == "float32"
    group, keep = (2, 1) if wide else (4, 2)
    fields = 2 if edt == "uint8" else 4
    ef = fields * group                       # A columns per metadata element
    M, N = d.dim(1, 48), d.dim(1, 48)
    bm, bn, bk = d.choice([16, 32]), d.choice([16, 32]), d.choice([32, 64])
    K = ef * d.int(1, max(1, 2 * bk // ef + 2))
    gm, gn, nk = -(-M // bm), -(-N // bn), -(-K // bk)
    stages = d.choice([1, 2])
    feats = {"gemm_sp", f"gemm_sp_{adt}", f"gemm_sp_meta_{edt}", "bits_metadata"}
    tensors = [Tensor("A", [M, K * keep // group], adt), Tensor("Q0", [M, K // group], "int32", 0,
                                                              1 if wide else 2),
               Tensor("Q1", [M, K // group], "int32", 0, 5), Tensor("B", [K, N], adt),
               Tensor("C", [M, N], "float32", output=True)]
    src, _ = kernel_source(tensors, f"T.Kernel({gn}, {gm}) as (bx, by)", [
        ("a", "shared", (bm, bk * keep // group), adt),
        ("q0", "fragment", (bm, bk // group), "int32"), ("q1", "fragment", (bm, bk // group), "int32"), ("e", "fragment", (bm, bk // ef), edt),
        ("b", "shared", (bk, bn), adt), ("c", "fragment", (bm, bn), "float32")])
    src.add(2, "T.clear(c)")
    src.add(2, f"for k in T.Pipelined({nk}, num_stages={stages}):")
    src.add(3, f"T.copy(A[by * {bm}, k * {bk * keep // group}], a)")
    src.add(3, f"T.copy(Q0[by * {bm}, k * {bk // group}], q0)")
    src.add(3, f"T.copy(Q1[by * {bm}, k * {bk // group}], q1)")
    src.add(3, f"for i, j in T.Parallel({bm}, {bk // ef}):")
    parts = []
    for t in range(fields):
        g = f"j * {fields} + {t}"
        if wide:
            nib = f"(4 + 10 * (q0[i, {g}] & 1))"
        else:
            p0 = f"q0[i, {g}]"
            nib = f"({p0} | (({p0} + 1 + T.floormod(q1[i, {g}], 3 - {p0})) << 2))"
        parts.append(f"({nib} << {4 * t})" if t else nib)
    v = " | ".join(parts)
    if edt == "int16":
        v = f"((({v}) & 65535) ^ 32768) - 32768"
    src.add(4, f'e[i, j] = T.cast({v}, "{edt}")')
    src.add(3, f"T.copy(B[k * {bk}, bx * {bn}], b)")
    src.add(3, "T.gemm_sp(a, e, b, c)")
    src.add(2, f"T.copy(c, C[by * {bm}, bx * {bn}])")

    ref = Source()
    ref.add(0, "def reference(A, Q0, Q1, B):")
    ref.add(1, f"D = np.zeros(({M}, {K}))")
    ref.add(1, f"for g in range({K // group}):")
    if wide:
        ref.block(2, ["pos = Q0[:, g] & 1", f"D[np.arange({M}), 2 * g + pos] = A[:, g]"])
    else:
        ref.block(2, ["p0 = Q0[:, g]", "p1 = p0 + 1 + Q1[:, g] % (3 - p0)",
                      f"D[np.arange({M}), 4 * g + p0] = A[:, 2 * g]",
                      f"D[np.arange({M}), 4 * g + p1] = A[:, 2 * g + 1]"])
    ref.add(1, "return [D @ B]")
    tol = tolerance("float32", EPS["float32"], terms=K, slack=16.0)
    return build_case("gemmsp", seed, src, tensors, ref, {"C": tol}, feats)
