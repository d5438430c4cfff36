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
