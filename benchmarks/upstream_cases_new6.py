"""Sweep cases added in the dialect10a session: upstream tilelang-ascend example kernels not in
the other case files (host code and float64 references written here; the kernels are the
examples' own, read from the mirror at run time by upstream_sweep.py)."""
import numpy as np

from upstream_sweep import Check, case, rn
from upstream_cases_new import A, f64, sigmoid

# ------------------------------------------------------------------------------ causal conv1d


def causal_conv1d_ref(x, weight, conv_state, cu, slots, has_init):
    """Varlen depthwise causal convolution + SiLU: token t of a sequence sees the width - 1
    tokens before it (the cache line's saved tokens before the first one when the sequence
    has an initial state, else zeros). Returns y and the conv state after the call (each
    sequence's cache line holds its last width - 1 tokens)."""
    hist = weight.shape[0] - 1
    y = np.zeros(x.shape)
    state = conv_state.astype(f64)
    for s in range(len(cu) - 1):
        seq = x[cu[s]:cu[s + 1]].astype(f64)
        before = state[slots[s], :hist] if has_init[s] else np.zeros((hist, x.shape[1]))
        ext = np.concatenate([before, seq])
        for t in range(len(seq)):
            acc = (ext[t:t + hist + 1] * weight.astype(f64)).sum(axis=0)
            y[cu[s] + t] = acc * sigmoid(acc)
        if len(seq) >= hist:
            state[slots[s], :hist] = seq[len(seq) - hist:]
    return y, state


def causal_conv1d_case(m, rng):
    seqlens, dim, blocks = (13, 22), 64, 4
    cu = np.concatenate([[0], np.cumsum(seqlens)]).astype(np.int32)
    x = rn(rng, (int(cu[-1]), dim), "float16")
    w = rn(rng, (4, dim), "float16", 0.5)
    cs = rn(rng, (5, 3, dim), "float16")
    checks = []
    for slots, init in (([3, 1], [1, 1]), ([0, 2], [0, 1])):
        slots, init = np.array(slots, np.int32), np.array(init, np.int32)
        y, state = causal_conv1d_ref(x, w, cs, cu, slots, init)
        kern = m["_build_kernel"](4, blocks, len(seqlens), dim, "float16")
        checks.append(Check(kern, [x, w, cs, cu, slots, init], {0: y, ("arg", 2): state},
                            "float16", 8))
    return checks


for _name, _file in (("causal_conv1d", "causal_conv1d.py"), ("causal_conv1d_pto", "causal_conv1d_pto.py")):
    case(f"asc/causal_conv1d/{_name}", A, f"examples/causal_conv1d/{_file}",
         "vector-only expert kernel without T.Scope: own MTE2/V/MTE3 flags over a run-time "
         "token loop, fp16 tile ops, conv state written back in place")(causal_conv1d_case)


# ------------------------------------------------------------------------------ xattention


def beam_decode_attention_ref(q, k_sh, v_sh, k_un, v_un, scale, group, steps):
    """Beam-search decode attention: each beam's query heads attend to the request's shared
    prefix (k_sh/v_sh: (tokens, kv_heads, D)) and to the beam's own `steps` decoded tokens
    (k_un/v_un: (beams, kv_heads, steps, D)) under one softmax; head h reads kv head h // group."""
    beams, heads, d = q.shape
    out = np.zeros((beams, heads, d))
    for b in range(beams):
        for h in range(heads):
            kv = h // group
            keys = np.concatenate([k_sh[:, kv], k_un[b, kv, :steps]]).astype(f64)
            vals = np.concatenate([v_sh[:, kv], v_un[b, kv, :steps]]).astype(f64)
            s = keys @ q[b, h].astype(f64) * scale
            p = np.exp(s - s.max())
            out[b, h] = p @ vals / p.sum()
    return out


@case("asc/xattention/xattention", A, "examples/xattention/xattention.py",
      "beam-search decode attention, shared prefix + per-beam decoded tokens: a persistent "
      "expert C/V kernel with flag-slot queues, brcb/row_expand experiments, T.sync_all "
      "between the attention and the merge phase, workspaces passed twice (flat views)")
def _(g, rng):
    from ml_dtypes import bfloat16 as bf
    beams, heads, kvh, d, steps = g["BEAM_SIZE"], g["NUM_HEADS"], g["KV_HEADS"], g["D"], g["DECODE_STEP"]
    cores, rows = g["NUM_CORES"], g["MERGE_ROWS"]
    q = rng.uniform(-1, 1, (beams, heads, d)).astype(bf)
    k_sh = rng.uniform(-1, 1, tuple(g["k_shared_shape"])).astype(bf)
    v_sh = rng.uniform(-1, 1, tuple(g["v_shared_shape"])).astype(bf)
    k_un = rng.uniform(-1, 1, (beams, kvh, steps, d)).astype(bf)
    v_un = rng.uniform(-1, 1, (beams, kvh, steps, d)).astype(bf)
    want = beam_decode_attention_ref(q, k_sh, v_sh, k_un, v_un, g["sm_scale"], heads // kvh, steps)
    qb, kb = g["Q_BATCH"], g["KV_BATCH"]
    mask = np.full((qb, kb), -1e10, np.float32)
    for b in range(g["UNSHARED_GROUPS_PER_TASK"]):
        mask[b * g["GROUP_SIZE"]:(b + 1) * g["GROUP_SIZE"], b * steps:(b + 1) * steps] = 0.0
    z = np.zeros
    f32, bm, en, slots = np.float32, g["BM"], g["EFFECTIVE_BLOCK_N"], g["TASKQUE_SLOTS"]
    ws_o, ws_gm = z((beams, heads, d), f32), z((beams, heads, g["UB_ALIGN_ELEMS"]), f32)
    ws_gl, u_o = z((beams, heads, g["UB_ALIGN_ELEMS"]), f32), z((beams, heads, d), f32)
    u_gm, u_gl = z((beams, heads), f32), z((beams, heads), f32)
    args = [q, k_sh, v_sh, z((slots, cores, bm, en), f32), z((slots, cores, bm, en), bf),
            z((slots, cores, bm, d), f32), k_un.reshape(-1, d), v_un.reshape(-1, d),
            q.reshape(rows, d), ws_o, ws_gm, ws_gl, u_o, u_gm, u_gl,
            ws_o.reshape(rows, d), ws_gm.reshape(rows, -1), ws_gl.reshape(rows, -1),
            u_o.reshape(rows, d), u_gm.reshape(rows), u_gl.reshape(rows), mask,
            np.arange(1, dtype=np.int32), np.array([g["KV_LEN"]], np.int32),
            np.array([steps], np.int32)]
    return [Check(g["xattention"](), args, {0: want.reshape(rows, d)}, "bfloat16", g["KV_LEN"])]


# ------------------------------------------------------------------------------ gated delta rule


def gated_delta_rule_ref(q, k, v, g, beta):
    """Sequential gated delta rule per (batch, head): S_t = exp(g_t) S_{t-1} (I - b_t k_t k_t^T)
    + b_t v_t k_t^T (S: dv x dk), o_t = S_t q_t."""
    B, H, L, dk = q.shape
    out = np.zeros(v.shape)
    for b in range(B):
        for h in range(H):
            S = np.zeros((v.shape[-1], dk))
            for t in range(L):
                kt, bt = k[b, h, t].astype(f64), f64(beta[b, h, t])
                S = np.exp(f64(g[b, h, t])) * (S - bt * np.outer(S @ kt, kt)) \
                    + bt * np.outer(v[b, h, t].astype(f64), kt)
                out[b, h, t] = S @ q[b, h, t].astype(f64)
    return out


class Chain:
    """Host code that calls several compiled kernels (the examples' end-to-end pipelines):
    `simulate` runs the same host code with every kernel call on the pipe-level simulator."""

    def __init__(self, run):
        self.run = run

    def __call__(self, *args):
        return self.run(*args)

    def simulate(self, *args):
        from tilelang_mini.runtime.kernel import JITKernel
        call = JITKernel.__call__
        JITKernel.__call__ = lambda kern, *a: kern.simulate(*a)[0]
        try:
            return self.run(*args), None
        finally:
            JITKernel.__call__ = call


def gdn_inputs(rng, B, H, L, DK, DV):
    q, k = rng.standard_normal((B, H, L, DK)), rng.standard_normal((B, H, L, DK))
    q = (q / np.linalg.norm(q, axis=-1, keepdims=True)).astype(np.float16)
    k = (k / np.linalg.norm(k, axis=-1, keepdims=True)).astype(np.float16)
    v = rng.standard_normal((B, H, L, DV)).astype(np.float16)
    g = (-np.log1p(np.exp(-rng.standard_normal((B, H, L))))).astype(np.float32)
    beta = rng.random((B, H, L)).astype(np.float16)
    return q, k, v, g, beta


def gdn_chain_check(rng, run):
    """The end-to-end gated delta rule checks: run(q, k, v, g, beta) with chunks of 32."""
    B, H, L, DK, DV = 1, 2, 128, 64, 64
    q, k, v, g, beta = gdn_inputs(rng, B, H, L, DK, DV)
    return [Check(Chain(run), [q, k, v, g, beta], {0: gated_delta_rule_ref(q, k, v, g, beta)},
                  "float16", L)]


GDN = "examples/linear_attention_and_rnn/"
DK_BLOCK = 64  # opt_gdn_full's BK = BV = DK


@case("asc/linear_attention_and_rnn/gdn_full", A, GDN + "gdn_full.py",
      "the gated delta rule end to end: the example's host chain of the six gdn/ kernels "
      "(cumsum, K K^T, triangular solve, WY, chunk state, output) against the token recurrence")
def _(m, rng):
    return gdn_chain_check(rng, lambda *a: m["kernel_chunk_gdn"](*a, 32, 32, 32))


@case("asc/linear_attention_and_rnn/opt_gdn_full", A, GDN + "opt_gdn_full.py",
      "the gated delta rule end to end through the six opt_gdn/ kernels, chained as the "
      "example's module-level test does (host code here), against the token recurrence")
def _(m, rng):
    B, H, L, DK, DV, C, BK, BV = 1, 2, 128, 64, 64, 32, DK_BLOCK, DK_BLOCK
    kers = (m["cumsum_ker"](B, H, L, C), m["kkt_ker"](B, H, L, DK, C, BK),
            m["solve_tril_ker"](B, H, L, C), m["wy_fast_ker"](B, H, L, DK, DV, C, BK, BV),
            m["chunk_h_ker"](B, H, L, DK, DV, C, BK, BV), m["chunk_o_ker"](B, H, L, DK, DV, C, BK, BV))

    def run(q, k, v, g, beta):
        cumsum, kkt, solve, wy, state, out = kers
        g_sum = cumsum(g)
        a = kkt(k, beta, g_sum, np.tril(np.ones((C, C), np.float32), -1))
        a = solve(a, np.eye(C, dtype=np.float32))
        w, u = wy(k, v, beta, g_sum, a)
        s = np.zeros((B, H, L // C, DK, DV), np.float16)
        nv, _ = state(k, w, u, g_sum, np.zeros((B * H * (DV // BV), DK, BV), np.float16), s)
        return out(q, k, nv, s, g_sum, np.tril(np.ones((C, C), np.float32)))
    return gdn_chain_check(rng, run)
