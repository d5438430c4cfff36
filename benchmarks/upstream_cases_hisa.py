"""Sweep case: tilelang-ascend's paged HISA block-sparse MQA logits kernel (expert mode: manual
C/V scopes, flags and cross flags, the cross-flag id picked from the vector core). The unpaged
kernel's case is asc/hisa/block_sparse_mqa_attn_expert in upstream_cases_ascend.py."""
import numpy as np

from upstream_sweep import Check, case

A = "ascend"
f64 = np.float64


def hisa_logits(q, k_blocks, w, lo, hi, starts):
    """float64 logits[t, j, i] = sum_h relu(q[t, h] . k_blocks[t, j, i]) * w[t, h], -inf where the
    key position starts[t, j] + i lies outside [lo[t], hi[t])."""
    s = np.einsum("thd,tjid->tjih", q.astype(f64), k_blocks.astype(f64))
    out = (np.maximum(s, 0) * w.astype(f64)[:, None, None, :]).sum(-1)
    pos = starts[:, :, None] + np.arange(k_blocks.shape[2])
    bad = (pos < lo[:, None, None]) | (pos >= hi[:, None, None])
    return np.where(bad, -np.inf, out)


@case("asc/hisa/paged_block_sparse_mqa", A, "examples/HISA/paged_block_sparse_mqa_attn_expert.py",
      "expert C/V, paged KV, cross-flag id = FLAG + vid (run-time id)")
def _(m, rng):
    B, S, NPB, H, D, KV, TOPK, MAXB = 3, 1, 6, 16, 32, 32, 8, 6  # decode: the grid has one token per batch
    T_ = B * S
    q = rng.random((T_, H, D)).astype(np.float16)
    cache = rng.random((NPB, KV, 1, D)).astype(np.float16)
    w = rng.random((T_, H)).astype(np.float16)
    ctx = np.array([100, 170, 60], np.int32)
    tables = np.stack([rng.permutation(MAXB) for _ in range(B)]).astype(np.int32)
    nlog = (ctx.max() + KV - 1) // KV
    idx = rng.integers(0, nlog, (T_, TOPK)).astype(np.int32)
    batch = np.arange(T_) // S
    phys = tables[batch[:, None], idx]                       # (T, TOPK) physical blocks
    want = hisa_logits(q, cache[phys, :, 0, :], w, np.zeros(T_, np.int64), ctx[batch], idx * KV)
    kern = m["paged_block_sparse_mqa_attn_return_logits"](B, S, NPB, KV, TOPK, H, D, MAXB)
    return [Check(kern, [q, cache, idx, w, ctx, tables], {0: want}, reduce_len=D * H,
                  tol=(2e-3, 2e-3))]
