"""Sweep cases added in the dialect10 session, second file: upstream example kernels not in the
other case files (host code and float64 references written here; the kernels are the
examples' own, read from the mirror at run time by upstream_sweep.py)."""
import numpy as np

from upstream_sweep import Check, case, rn
from upstream_cases_new import A, TL, f64, mm, sigmoid  # noqa: F401
from upstream_cases_new3 import (asc_gdn_inputs, chunk_h_checks, solve_tril_checks,
                                 wy_fast_checks)

# ------------------------------------------ tilelang-ascend linear_attention_and_rnn/opt_gdn

OPT = "examples/linear_attention_and_rnn/opt_gdn/"


@case("asc/opt_gdn/solve_tril", A, OPT + "opt_gdn_solve_tril.py",
      "(I + A)^-1 for chunks of 32 (row recurrence), 64 and 128 (blocked: gemms of the "
      "diagonal blocks' inverses)")
def _(m, rng):
    return (solve_tril_checks(m, rng, lambda B, H, L, C: m["solve_tril_ker"](B, H, L, C), 32)
            + solve_tril_checks(m, rng, lambda B, H, L, C: m["solve_tril_64_ker"](B, H, L), 64)
            + solve_tril_checks(m, rng, lambda B, H, L, C: m["solve_tril_128_ker"](B, H, L), 128))


@case("asc/opt_gdn/wy_fast", A, OPT + "opt_gdn_wy_fast.py",
      "W/U with the beta/gate scaling applied to A on the vector cores (two A workspaces)")
def _(m, rng):
    return wy_fast_checks(m, rng)


@case("asc/opt_gdn/chunk_h", A, OPT + "opt_gdn_chunk_h.py",
      "chunk state recurrence, whole DV per block")
def _(m, rng):
    return chunk_h_checks(m, rng)


@case("asc/opt_gdn/chunk_scaled_dot_kkt", A, OPT + "opt_gdn_chunk_scaled_dot_kkt.py",
      "strictly lower beta * exp(g_i - g_j) * K K^T per chunk, mask tensor")
def _(m, rng):
    B, H, L, DK, C = 1, 2, 128, 64, 32
    k, beta, g = asc_gdn_inputs(rng, B, H, L, DK, C)
    beta = rn(rng, (B, H, L), "float16")
    want = np.zeros((B, H, L, C))
    for c in range(L // C):
        r = slice(c * C, (c + 1) * C)
        kc, gc = k[:, :, r].astype(f64), g[:, :, r].astype(f64)
        a = np.einsum("bhid,bhjd->bhij", kc, kc) * beta[:, :, r, None].astype(f64)
        want[:, :, r] = np.tril(a * np.exp(gc[..., :, None] - gc[..., None, :]), -1)
    msk = np.tril(np.ones((C, C)), -1).astype(np.float32)
    return [Check(m["kkt_ker"](B, H, L, DK, C), [k, beta, g, msk], {0: want}, "float16", DK)]


@case("asc/opt_gdn/chunk_o", A, OPT + "opt_gdn_chunk_o.py",
      "exp(g)-scaled Q S plus the gated causal (Q K^T) V, whole DK/DV per block")
def _(m, rng):
    B, H, L, DK, DV, C = 1, 2, 128, 64, 64, 32
    q, k = rn(rng, (B, H, L, DK), "float16", 0.3), rn(rng, (B, H, L, DK), "float16", 0.3)
    v = rn(rng, (B, H, L, DV), "float16")
    _, _, g = asc_gdn_inputs(rng, B, H, L, DK, C)
    s = rn(rng, (B, H, L // C, DK, DV), "float16", 0.3)
    msk = np.tril(np.ones((C, C))).astype(np.float32)
    want = np.zeros((B, H, L, DV))
    for c in range(L // C):
        r = slice(c * C, (c + 1) * C)
        qc, kc, vc, gc = (x[:, :, r].astype(f64) for x in (q, k, v, g))
        t1 = np.exp(gc)[..., None] * (qc @ s[:, :, c].astype(f64))
        qk = (qc @ np.swapaxes(kc, -1, -2)) * np.exp(gc[..., :, None] - gc[..., None, :]) * msk
        want[:, :, r] = t1 + qk @ vc
    return [Check(m["chunk_o_ker"](B, H, L, DK, DV, C), [q, k, v, s, g, msk], {0: want},
                  "float16", C)]
