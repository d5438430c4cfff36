"""TileLang's carver templates as tilelang-ascend's example_gemm_carver uses them:
`MatmulTemplate(M=, N=, K=, in_dtype=, accum_dtype=, out_dtype=).with_arch(Ascend())`, then
`recommend_hints(topk)`: tile shapes for a (M, K) @ (K, N) GEMM, each a `Hint` with
`block = [block_M, block_N]` and `rstep = [block_K]`.

The recommendation is a small search, not TileLang's roller: every (block_M, block_N, block_K)
of powers of two from 16 to 256 that divides M, N and K and fits the cube's buffers (A tile in
L0A, B tile in L0B, the float32 accumulator in L0C, double-buffered A and B tiles in L1), ranked
by an estimate of the time: waves of blocks over the cube cores times a block's cycles (its
multiply-adds, plus the GM bytes of its A and B tiles at the cube's load bandwidth per
multiply-add column), larger blocks first on ties. Deterministic."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..ir import dtypes

SIZES = (16, 32, 64, 128, 256)


@dataclass
class Hint:
    block: list
    rstep: list
    score: float = 0.0
    config: dict = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"Hint(block={self.block}, rstep={self.rstep})"


class MatmulTemplate:
    def __init__(self, M, N, K, in_dtype="float16", accum_dtype="float32", out_dtype="float16",
                 with_bias=False):
        self.M, self.N, self.K = int(M), int(N), int(K)
        self.in_dtype = dtypes.canonical(in_dtype) or in_dtype
        self.accum_dtype = dtypes.canonical(accum_dtype) or accum_dtype
        self.out_dtype = dtypes.canonical(out_dtype) or out_dtype
        self.arch = None

    def with_arch(self, arch):
        self.arch = arch
        return self

    def fits(self, bm, bn, bk) -> bool:
        arch = self.arch
        ib = dtypes.itemsize(self.in_dtype)
        return (bm * bk * ib <= arch.capacity("L0A") and bk * bn * ib <= arch.capacity("L0B")
                and bm * bn * 4 <= arch.capacity("L0C")
                and 2 * (bm * bk + bk * bn) * ib <= arch.capacity("L1"))

    def cost(self, bm, bn, bk) -> float:
        blocks = (self.M // bm) * (self.N // bn)
        waves = -(-blocks // self.arch.compute_max_core)
        macs = bm * bn * self.K
        loads = (bm + bn) * self.K * dtypes.itemsize(self.in_dtype)
        # a K step also pays a fixed start-up, so deeper steps amortise it
        return waves * (macs / 256 + loads / 32 + 64 * (self.K // bk))

    def recommend_hints(self, topk: int = 10) -> list:
        if self.arch is None:
            from .arch.ascend import Ascend
            self.arch = Ascend()
        cands = []
        for bm in SIZES:
            for bn in SIZES:
                for bk in SIZES:
                    if self.M % bm or self.N % bn or self.K % bk or not self.fits(bm, bn, bk):
                        continue
                    cands.append((self.cost(bm, bn, bk), -bm * bn, -bk, bm, bn, bk))
        cands.sort()
        return [Hint([bm, bn], [bk], c, {"block_M": bm, "block_N": bn, "block_K": bk})
                for c, _, _, bm, bn, bk in cands[:topk]]


__all__ = ["Hint", "MatmulTemplate"]
