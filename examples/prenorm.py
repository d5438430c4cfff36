"""mHC prenorm (DeepGEMM's tf32_hc_prenorm_gemm): D = float(A) @ B.T and sqr_sum = sum(float(A)^2).

    python examples/prenorm.py [--target numpy|llvm] [--chip ascend910b|ascend950] [--shape M N K]

A is (M, K) bfloat16, B is (N, K) float32 with N small (24 or 32 in DeepSeek's mHC), so one tile
covers all of N, as in DeepGEMM. Each K step loads an A tile, casts it to float32 (a casting
T.copy), feeds it to the cube (T.gemm with transpose_B) and, as a separate vector tile op,
squares it (T.Parallel) and accumulates the row sums (T.reduce_sum with clear=False): the
block is the library's (`prenorm_block` of tilelang_mini/kernels/deep_gemm/hc.py, a T.macro that
allocates its tiles and returns the two accumulators to the kernel, which stores them).
"""
import tilelang_mini
import tilelang_mini.language as T
from tilelang_mini.kernels.deep_gemm.hc import prenorm_block  # the library kernel's block

DEFAULT_ARGS = (300, 24, 1000)  # M, N, K: awkward on purpose (not multiples of the tiles)


@tilelang_mini.jit(out_idx=[-2, -1])
def hc_prenorm(M, N, K, block_M=64, block_N=32, block_K=128, num_stages=2):
    if N > block_N:
        raise ValueError(f"hc_prenorm keeps all of N in one tile: N={N} > block_N={block_N}")

    @T.prim_func
    def main(A: T.Tensor((M, K), "bfloat16"), B: T.Tensor((N, K), "float32"),
             D: T.Tensor((M, N), "float32"), sqr_sum: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            D_f, ss = prenorm_block(A, B, bx * block_M, 0, T.ceildiv(K, block_K),
                                    block_M, block_N, block_K, num_stages)
            T.copy(D_f, D[bx * block_M, 0])
            T.copy(ss, sqr_sum[bx * block_M])

    return main


def reference(a, b):
    """Independent float64 NumPy reference: (A @ B.T, sum(A^2, axis=1))."""
    import numpy as np
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    return a64 @ b64.T, np.sum(a64 * a64, axis=1)


def main(argv=None):
    from _common import example_args, make_inputs, report, timed, verify
    args = example_args(__doc__, argv, dtype="bfloat16", shape=DEFAULT_ARGS)
    M, N, K = args.shape
    (a,) = make_inputs(args.seed, [(M, K)], "bfloat16")
    (b,) = make_inputs(args.seed + 1, [(N, K)], "float32")
    factory = hc_prenorm.factory(M, N, K)
    kernel = tilelang_mini.compile(factory, out_idx=[-2, -1], target=args.target, chip=args.chip)
    (d, s), seconds = timed(kernel, a, b)
    want_d, want_s = reference(a, b)
    ok = verify("D", d, want_d, "float32", reduce_len=K)
    ok &= verify("sqr_sum", s, want_s, "float32", reduce_len=K)
    return report(kernel, seconds, ok, args)


if __name__ == "__main__":
    raise SystemExit(main())
