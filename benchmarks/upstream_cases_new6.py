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
def _(m, rng):
    import ml_dtypes
    bf = ml_dtypes.bfloat16
    g = m
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
