"""Convolution as im2col + GEMM (TileLang's example_convolution form, as a prim_func): an NHWC
float16 or bfloat16 image of awkward size, a (KH * KW * C, F) weight matrix, `T.im2col(img, col,
by, k, K, S, D, P)` building block (by, k) of the patch matrix in a shared tile, `T.gemm` into a
float32 fragment over `T.Pipelined` k blocks, the result written to the (N * OH * OW, F) output
with `T.copy(acc, Out[...], enable_relu=True)` (the FixPipe's relu) or a plain copy, optionally
through an output of the image's dtype.

The reference builds the padded, strided, dilated windows in float64 NumPy from the drawn sizes
(not from the patch-matrix layout the kernel uses)."""
from __future__ import annotations

from .case import EPS, Source, Tensor, build_case, tolerance
from .case import kernel_source


def gen_conv(d, seed):
    n, C = d.int(1, 2), d.choice([1, 3, 4, 8, 16])
    K, S, D, P = d.choice([1, 2, 3]), d.choice([1, 2]), d.choice([1, 1, 2]), d.int(0, 2)
    span = D * (K - 1) + 1
    H, W = d.int(max(1, span - 2 * P), 10), d.int(max(1, span - 2 * P), 10)
    F = d.dim(1, 40)
    OH, OW = (H + 2 * P - span) // S + 1, (W + 2 * P - span) // S + 1
    bm, bn, bk = d.choice([16, 32]), d.choice([16, 32]), d.choice([16, 32])
    rows, kk = n * OH * OW, K * K * C
    relu = d.boolean(0.6)
    dt = d.choice(["float16", "float16", "bfloat16"])
    out_dt = d.choice(["float32", dt])
    stages = d.choice([1, 2])
    feats = {"conv", "im2col", f"conv_{dt}", f"conv_out_{out_dt}"}
    if relu:
        feats.add("copy_enable_relu")
    tensors = [Tensor("Img", [n, H, W, C], dt), Tensor("Wt", [kk, F], dt),
               Tensor("Out", [rows, F], out_dt, output=True)]
    src, _ = kernel_source(tensors, f"T.Kernel({-(-F // bn)}, {-(-rows // bm)}) as (bx, by)",
                           [("col", "shared", (bm, bk), dt), ("w", "shared", (bk, bn), dt),
                            ("acc", "fragment", (bm, bn), "float32")])
    src.add(2, "T.clear(acc)")
    src.add(2, f"for k in T.Pipelined({-(-kk // bk)}, num_stages={stages}):")
    src.add(3, f"T.im2col(Img, col, by, k, {K}, {S}, {D}, {P})")
    src.add(3, f"T.copy(Wt[k * {bk}, bx * {bn}], w)")
    src.add(3, "T.gemm(col, w, acc)")
    src.add(2, f"T.copy(acc, Out[by * {bm}, bx * {bn}]{', enable_relu=True' if relu else ''})")

    ref = Source()
    ref.add(0, "def reference(Img, Wt):")
    ref.block(1, [f"pad = np.zeros(({n}, {H + 2 * P}, {W + 2 * P}, {C}))",
                  f"pad[:, {P}:{P + H}, {P}:{P + W}] = Img",
                  f"w = Wt.reshape({K}, {K}, {C}, {F})",
                  f"out = np.zeros(({n}, {OH}, {OW}, {F}))",
                  f"for kh in range({K}):",
                  f"    for kw in range({K}):",
                  f"        win = pad[:, kh * {D}:kh * {D} + {(OH - 1) * S + 1}:{S}, "
                  f"kw * {D}:kw * {D} + {(OW - 1) * S + 1}:{S}]",
                  "        out += win @ w[kh, kw]",
                  f"out = out.reshape({rows}, {F})"])
    ref.add(1, "return [np.maximum(out, 0)]" if relu else "return [out]")
    tol = tolerance(out_dt, EPS["float32"], terms=kk, slack=16.0)
    return build_case("conv", seed, src, tensors, ref, {"Out": tol}, feats)
