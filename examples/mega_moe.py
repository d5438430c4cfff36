"""A single-device MegaMoE expert layer on tilelang_mini (DeepGEMM's bf16_mega_moe): tokens
routed top-k to experts, FC1, SwiGLU, FC2 and the weighted combine back to token order, checked
against a float64 reference with DeepGEMM's bf16 roundings and estimated on both chips at a
DeepSeek-sized layer.

    python examples/mega_moe.py [--target numpy|llvm] [--chip ascend910b|ascend950] [--shape T H I E K]
"""
import numpy as np

from tilelang_mini.kernels import deep_gemm

DEFAULT_ARGS = (13, 256, 128, 4, 2)  # tokens, hidden, intermediate, experts, top-k


def bf16(x):
    from ml_dtypes import bfloat16
    return np.asarray(x, np.float64).astype(bfloat16).astype(np.float64)


def reference(x, idx, w, l1, l2):
    inter = l1.shape[1] // 2
    y = np.zeros((x.shape[0], l2.shape[1]))
    for t in range(x.shape[0]):
        for j, e in enumerate(idx[t]):
            if e < 0:
                continue
            h = bf16(x[t] @ l1[e].T)             # gate rows, then up rows
            g, u = h[:inter], h[inter:]
            a = bf16(g / (1 + np.exp(-g)) * u * w[t, j])
            y[t] += bf16(a @ l2[e].T)
    return y


def main(argv=None):
    from _common import example_args, library_run, print_estimates, verdict, verify
    from ml_dtypes import bfloat16
    args = example_args(__doc__, argv, dtype="bfloat16", shape=DEFAULT_ARGS)
    T, H, I, E, K = args.shape
    run, rng = library_run(args)
    x = rng.standard_normal((T, H)).astype(bfloat16)
    idx = np.stack([rng.choice(E, K, replace=False) for _ in range(T)]).astype(np.int32)
    idx[0, -1] = -1                              # an unused slot
    w = rng.uniform(0.1, 1, (T, K)).astype(np.float32)
    l1 = (rng.standard_normal((E, 2 * I, H)) / 8).astype(bfloat16)
    l2 = (rng.standard_normal((E, H, I)) / 8).astype(bfloat16)
    y = np.empty((T, H), bfloat16)
    deep_gemm.bf16_mega_moe(x, idx, w, l1, l2, y, **run)
    want = reference(x.astype(np.float64), idx, w, l1.astype(np.float64), l2.astype(np.float64))
    ok = verify("bf16_mega_moe", y, want, "bfloat16", reduce_len=I)

    bt, bh, bi, be, bk = 2048, 7168, 2048, 32, 8
    big_idx = (np.arange(bt * bk) % be).astype(np.int32).reshape(bt, bk)
    big = (np.empty((bt, bh), bfloat16), big_idx, np.full((bt, bk), 1 / bk, np.float32),
           np.empty((be, 2 * bi, bh), bfloat16), np.empty((be, bh, bi), bfloat16),
           np.empty((bt, bh), bfloat16))
    print_estimates(f"bf16_mega_moe (T {bt}, H {bh}, I {bi}, {be} experts, top-{bk})",
                    deep_gemm.bf16_mega_moe.estimate, *big)
    return verdict("mega_moe", ok)


if __name__ == "__main__":
    raise SystemExit(main())
