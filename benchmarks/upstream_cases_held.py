"""Held-out sweep cases: upstream example kernels first ported in the dialect4 session (host
code and float64 references written here; the kernels are the examples' own, read from the
mirror at run time by upstream_sweep.py)."""
import numpy as np

from upstream_sweep import Check, case
from upstream_cases_ascend import attn_ref

A, TL = "ascend", "tilelang"
f64 = np.float64


def rn(rng, shape, dtype="float32", scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(dtype)


# ------------------------------------------------------------------------------ tilelang-ascend

@case("asc/flash_attention/flash_attn_bhsd_cc_sync", A, "examples/flash_attention/flash_attn_bhsd_cc_sync.py",
      "D=512, S and O accumulators at L0C address 0 (annotate_address)")
def _(m, rng):
    m["B"], m["S"] = 1, 128  # module globals the factory reads (host code)
    q, k, v = (rn(rng, (1, 1, 128, 512), "float16") for _ in range(3))
    return [Check(m["flash_attention_fwd"](heads=1, dim=512), [q, k, v], {0: attn_ref(q, k, v)},
                  dtype="float16", reduce_len=512)]


@case("asc/pipeline/flash_attn_bshd_pipeline", A, "examples/pipeline/flash_attn_bshd_pipeline.py",
      "D=512, T.Pipelined, auto CV sync through workspaces")
def _(m, rng):
    m["B"], m["S"] = 1, 128
    q, k, v = (rn(rng, (1, 1, 128, 512), "float16") for _ in range(3))
    return [Check(m["flash_attention_fwd"](heads=1, dim=512), [q, k, v], {0: attn_ref(q, k, v)},
                  dtype="float16", reduce_len=512)]


def gqa_ref(q, k, v):
    rep = q.shape[1] // k.shape[1]
    return attn_ref(q, np.repeat(k, rep, 1), np.repeat(v, rep, 1))


@case("asc/flash_attention/fa_opt_auto_pipeline_h32_d512", A,
      "examples/flash_attention/fa_opt/flash_attn_bhsd_auto_pipeline_h32_d512.py",
      "GQA, D=512 split in L0-sized column panels, T.max/T.min at trace time")
def _(m, rng):
    q = rn(rng, (1, 2, 256, 512), "float16")
    k, v = (rn(rng, (1, 1, 256, 512), "float16") for _ in range(2))
    return [Check(m["flash_attention_fwd"](1, 256, 2, 1, 512), [q, k, v], {0: gqa_ref(q, k, v)},
                  dtype="float16", reduce_len=512)]

