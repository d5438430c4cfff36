"""pipeline + plan_memory on kernels the lowering was not written against (issue 8): a value
the loop leaves for after it keeps one home, the stage versions of a pipelined loop with fewer
iterations than stages never share bytes, and the plan is checked (no two buffers live at the
same time on shared bytes)."""
from dataclasses import replace

import numpy as np
import pytest

import tilelang_mini
import tilelang_mini.language as T
from tilelang_mini import CompileError
from tilelang_mini.ir.nodes import Alloc, body_fields
from tilelang_mini.transform.plan_memory import check_plan, nbytes

import kernels

CHIPS = ["ascend910b", "ascend950"]
RNG = np.random.default_rng(5)


def last_block_gemm(stages):
    """Each iteration's gemm clears the accumulator: C is the last K block's product."""
    return kernels.gemm(16, 16, 192, block_M=16, block_N=16, block_K=64, dtype="float16",
                        num_stages=stages, clear_accum=True)


@pytest.mark.parametrize("stages", [2, 3])
def test_an_accumulator_read_after_the_loop_is_not_versioned(target, stages):
    a, b = RNG.standard_normal((16, 192)).astype("float16"), RNG.standard_normal((192, 16)).astype("float16")
    ref = a[:, 128:].astype(np.float64) @ b[128:].astype(np.float64)
    prim = last_block_gemm(stages)
    out = tilelang_mini.compile(prim, out_idx=[-1], target=target)(a, b)
    np.testing.assert_allclose(out, ref, rtol=1e-3, atol=1e-3)
    for chip in CHIPS:
        simulated, _ = tilelang_mini.compile(prim, out_idx=[-1], chip=chip).simulate(a, b)
        np.testing.assert_allclose(simulated, ref, rtol=1e-3, atol=1e-3)


def allocs(body):
    for s in body:
        if isinstance(s, Alloc):
            yield s
        for f in body_fields(s):
            yield from allocs(getattr(s, f))


@pytest.mark.parametrize("chip", CHIPS)
@pytest.mark.parametrize("S,block_N,stages", [(64, 32, 2), (128, 64, 2), (64, 32, 3)])
def test_stage_versions_of_a_short_pipelined_loop_never_share_bytes(chip, S, block_N, stages):
    """Two iterations of a two-stage attention loop (no full group of stages left after the
    rotation): Q_s, P (acc_s_cast), V_s_1 and the other L1 tiles are all in use together."""
    prim = kernels.flash_attention(1, S, 64, block_M=32, block_N=block_N, num_stages=stages)
    lowered = tilelang_mini.compile(prim, out_idx=[-1], chip=chip).ir
    together = {"Q_shared", "K_shared_1", "V_shared_1", "acc_s_cast"}  # F(1), B(0) overlap
    l1 = [a for a in allocs(lowered.body) if a.buffer.name in together]
    assert {a.buffer.name for a in l1} == together and all(a.buffer.scope == "L1" for a in l1)
    spans = sorted((a.offset, a.offset + nbytes(a.buffer), a.buffer.name) for a in l1)
    for (s0, e0, n0), (s1, e1, n1) in zip(spans, spans[1:]):
        assert e0 <= s1, f"{n0} [{s0}, {e0}) and {n1} [{s1}, {e1}) share bytes"


def test_the_plan_check_rejects_live_buffers_on_shared_bytes():
    kernel = tilelang_mini.compile(kernels.flash_attention(1, 64, 32, num_stages=2),
                                   out_idx=[-1], chip="ascend910b").ir
    check_plan(kernel)  # the compiler's own plan passes

    def move(body):  # put K_shared on Q_shared's bytes
        q = next(a for a in allocs(kernel.body) if a.buffer.name == "Q_shared")
        out = []
        for s in body:
            if isinstance(s, Alloc) and s.buffer.name == "K_shared":
                s = replace(s, offset=q.offset)
            out.append(s)
        return tuple(out)
    broken = replace(kernel, body=move(kernel.body))
    with pytest.raises(CompileError) as err:
        check_plan(broken)
    text = str(err.value)
    assert "internal" in text and "'Q_shared'" in text and "'K_shared'" in text, text


def mla_page(S=128, D=576, DV=512, bm=64, bn=64, stages=2):
    """An MLA-shaped step: S = Q @ K^T over a 576-wide page, P = S * c, O += P @ V (V: the
    first 512 columns of the page). Both gemms' L0A/L0B tiles live through the loop together."""
    @T.prim_func
    def main(Q: T.Tensor((bm, D), "bfloat16"), KV: T.Tensor((S, D), "bfloat16"),
             O: T.Tensor((bm, DV), "float32")):
        with T.Kernel(1) as bx:
            Q_s, K_s, V_s, acc_s, P, acc_o = kernels.attention_tiles(bm, bn, D, DV, "bfloat16")
            T.copy(Q, Q_s)
            T.clear(acc_o)
            for k in T.Pipelined(S // bn, num_stages=stages):
                T.copy(KV[k * bn, 0], K_s)
                T.copy(KV[k * bn, 0], V_s)
                T.gemm(Q_s, K_s, acc_s, transpose_B=True, clear_accum=True)
                for i, j in T.Parallel(bm, bn):
                    P[i, j] = acc_s[i, j] * 0.01
                T.gemm(P, V_s, acc_o)
            T.copy(acc_o, O)
    return main


@pytest.mark.parametrize("stages", [1, 2])
def test_the_gemms_of_a_loop_share_l0_an_mla_page_fits(target, stages):
    import ml_dtypes
    q = RNG.standard_normal((64, 576)).astype(ml_dtypes.bfloat16)
    kv = RNG.standard_normal((128, 576)).astype(ml_dtypes.bfloat16)
    qf, kvf = q.astype(np.float64), kv.astype(np.float64)
    ref = np.zeros((64, 512))
    for k in range(2):
        s = (qf @ kvf[k * 64:(k + 1) * 64].T).astype(np.float32)
        p = (s * np.float32(0.01)).astype(ml_dtypes.bfloat16).astype(np.float64)
        ref += p @ kvf[k * 64:(k + 1) * 64, :512]
    prim = mla_page(stages=stages)
    out = tilelang_mini.compile(prim, out_idx=[-1], target=target, chip="ascend950")(q, kv)
    np.testing.assert_allclose(out, ref, rtol=2e-2, atol=2e-2 * np.abs(ref).max())
    simulated, _ = tilelang_mini.compile(prim, out_idx=[-1], chip="ascend950").simulate(q, kv)
    np.testing.assert_allclose(simulated, ref, rtol=2e-2, atol=2e-2 * np.abs(ref).max())
    # ascend910b's L0C (128 KiB) cannot hold the 64x512 fp32 accumulator and S: located error
    with pytest.raises(CompileError) as err:
        tilelang_mini.compile(prim, out_idx=[-1], chip="ascend910b")
    assert "L0C overflow" in str(err.value) and "acc_o" in str(err.value)


def test_ir_text_declaring_a_buffer_twice_is_a_located_error():
    """Not plan_memory's internal self-check: `check` names the second declaration."""
    @T.prim_func
    def k(X: T.Tensor((16,), "float32"), Y: T.Tensor((16,), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((16,), "float32")
            T.copy(X, x)
            T.copy(x, Y)
    lines = str(k.ir if hasattr(k, "ir") else k).splitlines()
    i = next(n for n, line in enumerate(lines) if "alloc_fragment" in line)
    lines.insert(i + 1, lines[i])
    with pytest.raises(CompileError) as err:
        tilelang_mini.compile_ir("\n".join(lines), out_idx=[-1])
    text = str(err.value)
    assert "'x' is declared twice" in text and "internal" not in text, text
