"""Sweep cases: shape variants ("<case>@shapes") of tilelang-ascend cases, continued from
upstream_cases_shapes3.py (rotary embeddings, MoE permute, the GQA pipeline, merge sort): the
example's own test configs where they run in reasonable time here, else other sizes the kernel
supports. References are the original cases' (imported)."""
import numpy as np

from upstream_sweep import Check, case
from upstream_cases_ascend import A
from upstream_cases_shapes import inputs

f64 = np.float64

# ---------------------------------------------------------------- rotary embeddings

@case("asc/pos_embedding/rope@shapes", A, "examples/pos_embedding/rope.py",
      "the script's default shape (batch 16, 64 heads, hidden 512, rope_dim 256) and its "
      "host's block_M 32, in place")
def _(m, rng):
    from upstream_cases_ascend import rope_check
    return [rope_check(m, rng, 16, 64, 512, 256, 32)]


@case("asc/pos_embedding/rms_rope_fused@shapes", A, "examples/pos_embedding/rms_rope_fused.py",
      "the script's default shape (batch 16, 64 heads, head_dim 512, rope_dim 256) and its "
      "host's block_M 16")
def _(m, rng):
    from upstream_cases_held import rms_rope_check
    return [rms_rope_check(m, rng, 16, 64, 512, 256, 16)]


@case("asc/moe/token_permute@shapes", A, "examples/moe_token_permute/moe_token_permute.py",
      "its _compile_fused host defaults (NUM_CORES 24) at 100 tokens (5 per core, a padded last "
      "chunk), top-8 of 16 experts, hidden 256, float16 and bfloat16, all rows and clipped to "
      "300 (the script: 16 tokens, hidden 8)")
def _(m, rng):
    from upstream_cases_new import permute_ref
    nt, topk, hid, ne = 100, 8, 256, 16
    checks = []
    for dt, out_len in (("float16", nt * topk), ("bfloat16", 300)):
        tokens = inputs(rng, (nt, hid), dt)
        idx = rng.integers(0, ne, nt * topk).astype(np.int32)
        fn, padded = m["_compile_fused"](nt, topk, hid, nt * topk, out_len, ne, dtype=dt)
        ip = np.zeros((1, padded), np.int32)
        ip[0, :nt * topk] = idx
        out, dest = permute_ref(tokens.astype(f64), idx, topk, out_len)
        checks.append(Check(fn, [tokens, ip], {0: out, 1: dest[None, :].astype(f64)}, dt,
                            compare=_first_columns_equal))
    return checks


def _first_columns_equal(got, want):
    """Exact equality of `want` with the leading columns of `got` (the host's MoeTokenPermute
    keeps the first num_tokens * topK entries of the padded sorted-index output)."""
    g = np.asarray(got)[..., :want.shape[-1]].astype(f64)
    assert g.shape == want.shape, f"shape {g.shape} != {want.shape}"
    bad = int(np.sum(g != want))
    assert bad == 0, f"{bad} of {g.size} differ"


@case("asc/cv/sparse_flash_attn_gqa_pipeline@shapes", A, "examples/pipeline/sparse_flash_attn_gqa_pipeline.py",
      "the script's 64 heads in 4 KV groups (16 per group), dim 128, tail 0 at batch 2, seq 4, "
      "seq_kv 2048, topk 512 (the script: topk 2048)")
def _(m, rng):
    from upstream_cases_cv import _gqa_inputs
    q, kv, idx, want = _gqa_inputs(rng, 64, 4, 128, 512, B=2, S=4, SKV=2048)
    k = m["sparse_attention_fwd"](heads=64, dim=128, tail_dim=0, topk=512, kv_stride=1, kv_group=4)
    return [Check(k, [q, kv, idx], {0: want}, "float16", 512)]


@case("asc/sort/merge_sort@shapes", A, "examples/sort/example_merge_sort.py",
      "2-, 3- and 4-way merges of sorted (value, index) blocks of N = 1024 (the module global "
      "the factories read, host code; the script: 64)")
def _(m, rng):
    from upstream_cases_ascend import sorted_block
    m["N"] = n = 1024
    checks = []
    for ways in (2, 3, 4):
        blocks = [sorted_block(rng, n) for _ in range(ways)]
        pairs = sorted(((b[2 * j], b[2 * j + 1]) for b in blocks for j in range(n)),
                       key=lambda p: -p[0])
        want = np.array([x for p in pairs for x in p], f64)
        checks.append(Check(m[f"generate_merge_sort_{ways}way"](), blocks, {0: want}, tol=(0, 0)))
    return checks
