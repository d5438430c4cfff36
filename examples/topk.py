"""Top-k per row (the sparse-attention indexer's top-2048) on tilelang_mini: kernels.topk, built
on the T.sort tile op, checked against a stable NumPy sort and estimated on both chips.

    python examples/topk.py [--target numpy|llvm] [--chip ascend910b|ascend950] [--shape R N K]
"""
import numpy as np

from tilelang_mini.kernels import topk

DEFAULT_ARGS = (3, 3000, 300)  # rows, columns, k (k larger than a chunk's share, N not a multiple)


def reference(x, k):
    cols = np.broadcast_to(np.arange(x.shape[1]), x.shape)
    order = np.lexsort((cols, -x.astype(np.float64)), axis=-1)[:, :k]
    return np.take_along_axis(x, order, 1), order


def main(argv=None):
    from _common import example_args, print_estimates, verdict
    args = example_args(__doc__, argv, dtype="float32", shape=DEFAULT_ARGS)
    R, N, K = args.shape
    x = np.random.default_rng(args.seed).standard_normal((R, N)).astype(np.float32)
    x[0, 7:12] = x[0, 1]          # ties go to the smaller index
    values, indices = topk(x, K, target=args.target or "llvm", chip=args.chip)
    want_v, want_i = reference(x, K)
    ok = np.array_equal(indices, want_i) and np.array_equal(values, want_v)
    print(f"verify topk: {'OK' if ok else 'MISMATCH'} (indices and values exact)")
    big = np.empty((64, 131072), np.float32)
    print_estimates("topk k=2048 of 64 x 131072", topk.estimate, big, 2048)
    return verdict("topk", ok)


if __name__ == "__main__":
    raise SystemExit(main())
