"""Sweep cases: tilelang-ascend's developer-style sparse flash attention examples written for
TL_ASCEND_AUTO_CV_COMBINE (cube and vector statements as two concurrent programs meeting at
workspaces, `concurrent_programs`) or for developer-mode vid. Host code and float64 references
are written here from the operation's meaning: each query row attends, with softmax, to the
`topk` KV rows its index list selects (score = scale * q . kv over the full q/kv width
including the rope tail; the value is the first `dim` columns of the same rows)."""
import numpy as np

from upstream_sweep import Check, case, rn

A = "ascend"
f64 = np.float64


def sparse_ref(q, rows, dim, scale, valid=None):
    """q [..., H, Dq]; rows [..., K, Dq] (the gathered KV rows of each query position);
    valid [..., K] bool (None: all). Returns [..., H, dim] in float64."""
    q, rows = q.astype(f64), rows.astype(f64)
    s = np.einsum("...hd,...kd->...hk", q, rows) * scale
    if valid is not None:
        s = np.where(valid[..., None, :], s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return np.einsum("...hk,...kd->...hd", p, rows[..., :dim])


def _mla_inputs(rng, heads, dq, topk):
    """The developer_mode examples fix batch=1, seq_len=128, seq_len_kv=32768, one KV group."""
    S, SKV = 128, 32768
    q = rn(rng, (1, S, heads, dq), "float16")
    kv = rn(rng, (1, SKV, 1, dq), "float16")
    idx = np.stack([rng.choice(SKV, topk, replace=False) for _ in range(S)]).astype(np.int32)
    idx = idx.reshape(1, S, 1, topk)
    rows = kv[0, idx[0, :, 0], 0]                        # [S, topk, dq]
    return q, kv, idx, rows


def _developer_check(m, rng, heads=16, dim=64, tail=32, topk=128):
    """The developer-mode sparse attention examples' sparse_attention_fwd(heads, dim, tail_dim,
    topk, kv_stride=1) on one batch, against sparse_ref."""
    q, kv, idx, rows = _mla_inputs(rng, heads, dim + tail, topk)
    want = sparse_ref(q[0], rows, dim, (dim + tail) ** -0.5)[None]
    k = m["sparse_attention_fwd"](heads=heads, dim=dim, tail_dim=tail, topk=topk, kv_stride=1)
    return Check(k, [q, kv, idx], {0: want}, "float16", topk)


def developer_case(m, rng):
    """The case of every developer-mode sparse attention example (this file's and
    upstream_cases_new2's): its kernel at the default shapes, _developer_check."""
    return [_developer_check(m, rng)]


case("asc/cv/sparse_flash_attn_developer", A, "examples/developer_mode/sparse_flash_attn_developer.py",
     "auto CV combine: five workspaces read before written, vid-split gather, D=64 + tail 32")(
    developer_case)
case("asc/cv/sparse_flash_attn_developer_vid_reduce", A,
     "examples/developer_mode/sparse_flash_attn_developer_vid_reduce.py",
     "no workspaces: threads=2 without vid, UB->L1 gather, L0C->UB copies, gemm before its "
     "operand's write in the loop body")(developer_case)


@case("asc/cv/sparse_flash_attn_pa_developer", A,
      "examples/sparse_flash_attention/bench_sfa/sparse_flash_attn_pa_developer.py",
      "paged KV (block table), causal mask via tile.compare/select, fixed core count loop, bf16")
def _(m, rng):
    return sfa_pa_case(m, rng, 16, block_num=8)


def sfa_pa_case(m, rng, heads, tail=32, **kw):
    """bench_sfa's paged sparse attention: two batches of paged KV (block table), indices of
    a 128-token prefix, causal visibility kv_len - q_len + s, bf16."""
    import ml_dtypes
    dim, topk = 64, 128
    B, S, nblk, bsz = 2, 3, 8, 32
    dq = dim + tail
    q = rn(rng, (B, S, heads, dq)).astype(ml_dtypes.bfloat16)
    kv = rn(rng, (nblk, bsz, 1, dq)).astype(ml_dtypes.bfloat16)
    table = rng.permutation(nblk).reshape(B, nblk // B).astype(np.int32)
    q_len, kv_len = np.array([S, S], np.int32), np.array([100, 128], np.int32)
    idx = np.stack([rng.permutation(128)[:topk] for _ in range(S)]).astype(np.int32)[:, None, :]
    want = np.empty((B, S, heads, dim))
    for b in range(B):
        for s in range(S):
            i = idx[s, 0]
            rows = kv[table[b, i // bsz], i % bsz, 0]
            want[b, s] = sparse_ref(q[b, s], rows, dim, dq ** -0.5, i <= kv_len[b] - q_len[b] + s)
    k = m["sparse_attention_fwd"](heads, dim, tail, topk, block_size=bsz, core_num=4, **kw)
    return [Check(k, [q, kv, idx, q_len, kv_len, table], {0: want}, "bfloat16", topk)]


def _gqa_inputs(rng, heads, groups, dim, topk, B=1, S=3, SKV=256):
    q = rn(rng, (B, S, heads, dim), "float16")
    kv = rn(rng, (B, SKV, groups, dim), "float16")
    idx = np.stack([rng.choice(SKV, topk, replace=False) for _ in range(B * S * groups)])
    idx = idx.reshape(B, S, groups, topk).astype(np.int32)
    hg = heads // groups
    want = np.empty((B, S, heads, dim))
    for b in range(B):
        for s in range(S):
            for g in range(groups):
                rows = kv[b, idx[b, s, g], g]
                want[b, s, g * hg:(g + 1) * hg] = sparse_ref(q[b, s, g * hg:(g + 1) * hg], rows,
                                                             dim, dim ** -0.5)
    return q, kv, idx, want


def _gqa_check(m, rng, heads, workspaces=None, groups=2, dim=64, topk=128):
    """The Check of a GQA sparse attention case: the example's kernel for `heads` heads in
    `groups` KV groups on _gqa_inputs, with the workspaces the caller passes (a function of the
    inputs' sizes, or None when the kernel allocates its own)."""
    q, kv, idx, want = _gqa_inputs(rng, heads, groups, dim, topk)
    k = m["sparse_attention_fwd"](heads=heads, dim=dim, tail_dim=0, topk=topk, kv_stride=1,
                                  kv_group=groups)
    ws = workspaces(q.shape[0] * q.shape[1] * groups, heads // groups, dim) if workspaces else []
    return [Check(k, [q, kv, idx, *ws], {0: want}, "float16", topk)]


@case("asc/cv/sparse_flash_attn_gqa_pto_developer", A,
      "examples/sparse_flash_attention/example_sparse_flash_attn_gqa_pto_developer.py",
      "GQA, workspaces passed by the caller (not workspace_idx), target='pto'")
def _(m, rng):
    return _gqa_check(m, rng, 32, lambda n, hg, dim: [
        np.zeros((n, 64, dim), np.float16), np.zeros((n, hg, 64), np.float32),
        np.zeros((n, hg, 64), np.float16), np.zeros((n, hg, dim), np.float32)])


@case("asc/cv/sparse_flash_attn_gqa_pipeline", A, "examples/pipeline/sparse_flash_attn_gqa_pipeline.py",
      "GQA, T.Pipelined(num_stages=2) over workspaces read before written, 6-D workspaces, "
      "an inner loop var shadowing an outer name")
def _(m, rng):
    return _gqa_check(m, rng, 32)


@case("asc/cv/sparse_flash_attn_gqa_pipeline_4heads", A, "examples/pipeline/sparse_flash_attn_gqa_pipeline.py",
      "4 heads per KV group: the row statistics are padded to 8 floats (ub_len) and reduced into "
      "whole (a located error: the example's own shapes have 16 heads per group)")
def _(m, rng):
    return _gqa_check(m, rng, 8)
