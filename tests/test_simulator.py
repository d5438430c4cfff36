"""The pipe-level simulator (tilelang_mini/sim/simulator.py) on expert-mode kernels.

Kernels are written in the DSL already lowered: Scope("C") / Scope("V") blocks, chip buffers and
hand-placed flags. Mutants drop sync instructions to check that the simulator finds the races,
deadlocks and flag misuse, naming the kernel lines."""

from dataclasses import replace

import numpy as np
import pytest

import tilelang_mini.language as T

import kernels
from markers import Marked
from tilelang_mini.arch import get_chip
from tilelang_mini.errors import DeadlockError, RaceError, SyncError
from tilelang_mini.ir.nodes import (
    Buffer, For, If, Kernel, Scope, SetFlag, WaitFlag, transform,
)
from tilelang_mini.sim.ordered import run_ordered
from tilelang_mini.sim.simulator import simulate_kernel
from kernels import load_for

CHIP = get_chip("ascend910b")
line_of = Marked(__file__, prefix="").line_of
RNG = np.random.default_rng(1)


# ------------------------------------------------------------------------------ kernels


def cube_gemm(M, N, K, bm=64, bn=64, bk=32, ragged=False):
    """Single-buffered cube GEMM: MTE2 -> L1, MTE1 -> L0A/L0B, M (mmad), FIX -> GM. `ragged`:
    trip count and epilogue depend on the block id (block cid runs cid % 3 + 1 K steps; only
    blocks 0 and 1 store C)."""
    nbn = N // bn

    @T.prim_func
    def gemm1(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
              C: T.Tensor((M, N), "float32")):
        with T.Kernel((M // bm) * nbn, is_npu=True) as (cid, vid):
            A_L1 = T.alloc_L1((bm, bk), "float16")
            B_L1 = T.alloc_L1((bk, bn), "float16")
            A_L0 = T.alloc_L0A((bm, bk), "float16")
            B_L0 = T.alloc_L0B((bk, bn), "float16")
            C_L0 = T.alloc_L0C((bm, bn), "float32")
            with T.Scope("C"):
                T.set_flag("MTE1", "MTE2", 0)  # PRESET_L1
                T.set_flag("M", "MTE1", 0)  # PRESET_L0
                T.clear(C_L0)
                for k in T.serial(cid % 3 + 1 if ragged else K // bk):
                    T.wait_flag("MTE1", "MTE2", 0)  # WAIT_L1_FREE
                    T.copy(A[cid // nbn * bm, k * bk], A_L1)  # L1_WRITE
                    T.copy(B[k * bk, cid % nbn * bn], B_L1)
                    T.set_flag("MTE2", "MTE1", 0)  # SET_L1_FULL
                    T.wait_flag("MTE2", "MTE1", 0)  # WAIT_L1_FULL
                    T.wait_flag("M", "MTE1", 0)  # WAIT_L0_FREE
                    T.copy(A_L1, A_L0)  # L1_READ
                    T.copy(B_L1, B_L0)
                    T.set_flag("MTE1", "MTE2", 0)  # SET_L1_FREE
                    T.set_flag("MTE1", "M", 0)  # SET_L0_FULL
                    T.wait_flag("MTE1", "M", 0)  # WAIT_L0_FULL
                    T.gemm(A_L0, B_L0, C_L0)  # MMAD
                    T.set_flag("M", "MTE1", 0)  # SET_L0_FREE
                T.set_flag("M", "FIX", 0)  # SET_C_FULL
                T.wait_flag("M", "FIX", 0)  # WAIT_C_FULL
                if ragged:
                    if cid < 2:
                        T.copy(C_L0, C[cid // nbn * bm, cid % nbn * bn])
                else:
                    T.copy(C_L0, C[cid // nbn * bm, cid % nbn * bn])  # FIX_OUT
                T.wait_flag("MTE1", "MTE2", 0)  # DRAIN_L1
                T.wait_flag("M", "MTE1", 0)  # DRAIN_L0

    return gemm1.ir


def cube_gemm_db(M, N, K, bm=64, bn=64, bk=32):
    """The same GEMM double-buffered: two L1/L0 sets, event ids 0/1 ping-pong (the expert
    example's kernel, examples/gemm_expert.py)."""
    return kernels.gemm_expert(M, N, K, bm=bm, bn=bn, bk=bk).ir


def vector_kernel(R, W, barrier: bool, split: int = 1, differ: bool = False):
    """y = (x * 2) + 1 on the two AIVs, each a half of a block of rows (split=0: both AIVs take
    the same rows; differ: AIV 1 adds 1 more)."""
    h = 8

    @T.prim_func
    def vec(X: T.Tensor((R, W), "float32"), Y: T.Tensor((R, W), "float32")):
        with T.Kernel(R // (2 * h), is_npu=True) as (cid, vid):
            x_ub = T.alloc_ub((h, W), "float32")
            t_ub = T.alloc_ub((h, W), "float32")
            with T.Scope("V"):
                load_for("V", X[cid * 2 * h + vid * h * split, 0], x_ub)
                for i, j in T.Parallel(h, W):  # VEC_1
                    t_ub[i, j] = x_ub[i, j] * 2.0
                if barrier:
                    T.pipe_barrier("V")
                for i, j in T.Parallel(h, W):  # VEC_2
                    x_ub[i, j] = t_ub[i, j] + 1.0 + T.cast(vid, "float32") * float(differ)
                T.set_flag("V", "MTE3", 0)
                T.wait_flag("V", "MTE3", 0)
                T.copy(x_ub, Y[cid * 2 * h + vid * h * split, 0])  # Y_OUT

    return vec.ir


def cube_vector(M, N, K, cross: bool = True, back: bool = True, s_wait: bool = False, rounds=2):
    """C = relu(A @ B) through a workspace: the AIC computes A @ B into W (FIX), each AIV takes
    half of the rows, applies relu and writes C. Two rounds reuse W: the AIVs hand it back."""
    h = M // 2

    @T.prim_func
    def cv(A: T.Tensor((rounds * M, K), "float16"), B: T.Tensor((K, N), "float16"),
           C: T.Tensor((rounds * M, N), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            A_L1 = T.alloc_L1((M, K), "float16")
            B_L1 = T.alloc_L1((K, N), "float16")
            A_L0 = T.alloc_L0A((M, K), "float16")
            B_L0 = T.alloc_L0B((K, N), "float16")
            C_L0 = T.alloc_L0C((M, N), "float32")
            W = T.alloc_L1((M, N), "float32")  # becomes a workspace buffer below
            c_ub = T.alloc_ub((h, N), "float32")
            with T.Scope("C"):
                T.set_flag("FIX", "M", 0)
                for r in T.serial(rounds):
                    T.copy(A[r * M, 0], A_L1)
                    T.copy(B, B_L1)
                    kernels.l1_to_l0(A_L1, B_L1, A_L0, B_L0)
                    T.set_flag("MTE1", "MTE2", 0)
                    T.wait_flag("MTE1", "MTE2", 0)
                    T.wait_flag("FIX", "M", 0)
                    T.gemm(A_L0, B_L0, C_L0, clear_accum=True)
                    T.set_flag("M", "MTE1", 0)
                    T.wait_flag("M", "MTE1", 0)
                    T.set_flag("M", "FIX", 0)
                    T.wait_flag("M", "FIX", 0)
                    if back:
                        if r > 0:
                            T.wait_cross_flag("FIX", 1)  # WAIT_W_FREE
                    T.copy(C_L0, W)  # W_WRITE
                    T.set_flag("FIX", "M", 0)
                    if cross:
                        T.set_cross_flag("FIX", 0)  # SET_W_FULL
                T.wait_flag("FIX", "M", 0)
            with T.Scope("V"):
                for r in T.serial(rounds):
                    if cross:
                        if s_wait:
                            T.wait_cross_flag("S", 0)
                        else:
                            T.wait_cross_flag("MTE2", 0)  # WAIT_W_FULL
                    T.copy(W[vid * h, 0], c_ub)  # W_READ
                    if back:
                        if r < rounds - 1:
                            T.set_cross_flag("MTE2", 1)  # SET_W_FREE
                    T.set_flag("MTE2", "V", 0)
                    T.wait_flag("MTE2", "V", 0)
                    for i, j in T.Parallel(h, N):
                        c_ub[i, j] = T.max(c_ub[i, j], 0.0)
                    T.set_flag("V", "MTE3", 0)
                    T.wait_flag("V", "MTE3", 0)
                    T.copy(c_ub, C[r * M + vid * h, 0])
                    T.set_flag("MTE3", "MTE2", 0)
                    T.wait_flag("MTE3", "MTE2", 0)

    return to_workspace(cv.ir, "W")


def to_workspace(kernel: Kernel, name: str) -> Kernel:
    """Make buffer `name` a per-block workspace (the DSL has no alloc_workspace)."""
    def rw(node):
        if isinstance(node, Buffer) and node.name == name:
            return replace(node, scope="workspace")
        return node
    return transform(kernel, rw)


def without(kernel: Kernel, lines) -> Kernel:
    """The kernel with the statements on the given source lines removed."""
    lines = set(lines)

    def body(stmts):
        out = []
        for s in stmts:
            if s.loc.line in lines:
                continue
            if isinstance(s, (For, Scope)):
                s = replace(s, body=body(s.body))
            elif isinstance(s, If):
                s = replace(s, then_body=body(s.then_body), else_body=body(s.else_body))
            out.append(s)
        return tuple(out)

    return replace(kernel, body=body(kernel.body))


def gemm_args(M, N, K, rounds=1):
    a = RNG.uniform(-1, 1, (rounds * M, K)).astype(np.float16)
    b = RNG.uniform(-1, 1, (K, N)).astype(np.float16)
    return [a, b, np.zeros((rounds * M, N), np.float32)]


def ref_gemm(a, b):
    return a.astype(np.float64) @ b.astype(np.float64)


def _loc(marker):
    return f"test_simulator.py:{line_of(marker)}:"


# --------------------------------------------------------------------------------- tests


def test_gemm_clean_and_correct():
    k = cube_gemm(128, 128, 128)
    args = gemm_args(128, 128, 128)
    rep = simulate_kernel(k, args, CHIP)
    np.testing.assert_allclose(args[2], ref_gemm(args[0], args[1]), rtol=1e-3, atol=1e-3)
    assert rep.cycles > 0 and set(rep.block_cycles) == {0, 1, 2, 3}
    assert rep.pipe_busy["MTE2"] > 0 and rep.pipe_busy["M"] > 0 and rep.pipe_busy["V"] == 0
    assert rep.core_pipe_busy["C.FIX"] > 0
    assert rep.instructions == 4 * (3 + 4 * 13 + 5)
    core, pipe, start, end, label, loc = rep.events[0]
    assert core.endswith("C") and end >= start and "test_simulator.py" in loc
    assert any(e.label.startswith("gemm(") and e.pipe == "M" for e in rep.events)
    # a subset of blocks: the others counted at the mean
    sub = simulate_kernel(k, gemm_args(128, 128, 128), CHIP, blocks=[0])
    assert sub.estimated and sub.blocks == (0,) and sub.cycles == sub.block_cycles[0]


# (set, wait, the lines the error names). Without MTE1 -> M the M pipe runs ahead of MTE1: its
# MMAD reads L0A while MTE1 writes it (its second set_flag(M, MTE1) also lands on a flag not yet
# consumed; the simulator reports the race, the cause, before that symptom). Without M -> FIX
# the FIX copy reads C_L0 right after the fill, before any gemm finished.
PAIRS = [("SET_L1_FULL", "WAIT_L1_FULL", RaceError, ("L1_WRITE", "L1_READ")),
         ("SET_L1_FREE", "WAIT_L1_FREE", RaceError, ("L1_READ", "L1_WRITE")),
         ("SET_L0_FULL", "WAIT_L0_FULL", RaceError, ("L1_READ", "MMAD")),
         ("SET_L0_FREE", "WAIT_L0_FREE", RaceError, ("MMAD", "L1_READ")),
         ("SET_C_FULL", "WAIT_C_FULL", RaceError, ("FIX_OUT",))]


@pytest.mark.parametrize("set_m, wait_m, error, lines", PAIRS)
def test_gemm_missing_pair(set_m, wait_m, error, lines):
    k = without(cube_gemm(128, 128, 128), [line_of(set_m), line_of(wait_m)])
    with pytest.raises(error) as e:
        simulate_kernel(k, gemm_args(128, 128, 128), CHIP)
    msg = str(e.value)
    for r in lines:
        assert _loc(r) in msg, msg
    assert "block 0" in msg and "C.M" in msg
    assert e.value.loc.line == line_of(lines[0]) or e.value.loc.line == line_of(lines[-1])


@pytest.mark.parametrize("marker, error", [
    ("PRESET_L1", DeadlockError), ("PRESET_L0", DeadlockError),
    ("SET_L1_FULL", DeadlockError), ("SET_C_FULL", DeadlockError),
    ("DRAIN_L1", SyncError), ("DRAIN_L0", SyncError),
    ("WAIT_L1_FREE", (SyncError, RaceError)), ("WAIT_L0_FULL", (SyncError, RaceError)),
])
def test_gemm_missing_one(marker, error):
    k = without(cube_gemm(128, 128, 128), [line_of(marker)])
    with pytest.raises(error) as e:
        simulate_kernel(k, gemm_args(128, 128, 128), CHIP)
    assert "test_simulator.py:" in str(e.value)


def test_deadlock_names_the_wait():
    k = without(cube_gemm(64, 64, 64), [line_of("SET_L1_FULL")])
    with pytest.raises(DeadlockError) as e:
        simulate_kernel(k, gemm_args(64, 64, 64), CHIP)
    assert _loc("WAIT_L1_FULL") in str(e.value) and "C.MTE1" in str(e.value)
    assert e.value.loc.line == line_of("WAIT_L1_FULL")


def test_flag_left_set_and_double_set():
    k = without(cube_gemm(64, 64, 64), [line_of("DRAIN_L0")])
    with pytest.raises(SyncError, match="still set") as e:
        simulate_kernel(k, gemm_args(64, 64, 64), CHIP)
    assert e.value.loc.line in (line_of("SET_L0_FREE"), line_of("PRESET_L0"))
    k = without(cube_gemm(64, 64, 64), [line_of("WAIT_L0_FREE")])
    with pytest.raises(SyncError, match="still set") as e:
        simulate_kernel(k, gemm_args(64, 64, 64), CHIP, check=False)
    assert e.value.loc.line == line_of("SET_L0_FREE")


def test_double_buffering_is_faster():
    M, N, K = 64, 64, 512
    a1, a2 = gemm_args(M, N, K), gemm_args(M, N, K)
    a2[0][...], a2[1][...] = a1[0], a1[1]
    r1 = simulate_kernel(cube_gemm(M, N, K), a1, CHIP)
    r2 = simulate_kernel(cube_gemm_db(M, N, K), a2, CHIP)
    np.testing.assert_array_equal(a1[2], a2[2])
    np.testing.assert_allclose(a2[2], ref_gemm(a2[0], a2[1]), rtol=1e-3, atol=1e-3)
    # single-buffered: MTE2 waits for MTE1 every step; double-buffered: MTE2-bound
    assert r2.cycles < 0.9 * r1.cycles, (r1.cycles, r2.cycles)
    assert r2.cycles < 1.1 * r2.pipe_busy["MTE2"] < r1.cycles


def test_vector_barrier():
    R, W = 32, 64
    x = RNG.uniform(-1, 1, (R, W)).astype(np.float32)
    y = np.zeros_like(x)
    rep = simulate_kernel(vector_kernel(R, W, True), [x, y], CHIP)
    np.testing.assert_allclose(y, x * 2 + 1, rtol=1e-6)
    assert rep.pipe_busy["V"] > 0 and rep.pipe_busy["M"] == 0
    assert rep.core_pipe_busy["V1.V"] > 0
    with pytest.raises(RaceError) as e:
        simulate_kernel(vector_kernel(R, W, False), [x, np.zeros_like(x)], CHIP)
    msg = str(e.value)
    assert _loc("VEC_1") in msg and _loc("VEC_2") in msg and "V0.V" in msg
    assert "UB buffer" in msg
    # both AIVs write the same rows of Y with different values: a race between the cores on GM
    with pytest.raises(RaceError) as e:
        simulate_kernel(vector_kernel(R, W, True, split=0, differ=True), [x, np.zeros_like(x)],
                        CHIP)
    msg = str(e.value)
    assert "V0.MTE3" in msg and "V1.MTE3" in msg and "global buffer Y" in msg
    assert msg.count(_loc("Y_OUT")) >= 2
    # the same values: either order leaves the same bytes, not a race
    y0 = np.zeros_like(x)
    simulate_kernel(vector_kernel(R, W, True, split=0), [x, y0], CHIP)
    half = (np.arange(R) // 8) % 2 == 0
    np.testing.assert_allclose(y0[half], x[half] * 2 + 1, rtol=1e-6)


def test_cube_vector_workspace():
    M, N, K = 32, 32, 32
    args = gemm_args(M, N, K, rounds=2)
    rep = simulate_kernel(cube_vector(M, N, K), args, CHIP)
    np.testing.assert_allclose(args[2], np.maximum(ref_gemm(args[0], args[1]), 0), rtol=1e-3,
                               atol=1e-3)
    assert rep.block_cycles[0] > 2 * CHIP.costs.cross_flag_latency
    args2 = gemm_args(M, N, K, rounds=2)
    simulate_kernel(cube_vector(M, N, K, s_wait=True), args2, CHIP)
    np.testing.assert_allclose(args2[2], np.maximum(ref_gemm(args2[0], args2[1]), 0),
                               rtol=1e-3, atol=1e-3)
    # no cube -> vector flag: the AIVs read W while the FIX pipe writes it
    with pytest.raises(RaceError) as e:
        simulate_kernel(cube_vector(M, N, K, cross=False), gemm_args(M, N, K, 2), CHIP)
    msg = str(e.value)
    assert "workspace" in msg and _loc("W_WRITE") in msg and _loc("W_READ") in msg
    # no vector -> cube hand-back: the second round overwrites W under the AIVs' reads
    with pytest.raises(RaceError) as e:
        simulate_kernel(cube_vector(M, N, K, back=False), gemm_args(M, N, K, 2), CHIP)
    assert _loc("W_WRITE") in str(e.value) and _loc("W_READ") in str(e.value)


def test_clock_components_are_the_threads_that_run():
    """The vector clocks have one component per (core, pipe) thread that can run an
    instruction of the kernel (its walk's items, every branch) and each core's scalar unit:
    here exactly the pipes the events show, and S."""
    from tilelang_mini.ir.nodes import PIPES
    from tilelang_mini.sim.facts import KernelFacts
    for k, args in ((cube_vector(32, 32, 32), gemm_args(32, 32, 32, rounds=2)),
                    (cube_gemm(128, 128, 128), gemm_args(128, 128, 128))):
        ran = {(e.core.split(".")[-1], e.pipe) for e in simulate_kernel(k, args, CHIP).events}
        threads = {(("C", "V0", "V1")[t // len(PIPES)], PIPES[t % len(PIPES)])
                   for t in KernelFacts(k).clock_threads}
        assert threads == ran | {("C", "S"), ("V0", "S"), ("V1", "S")}


def test_cross_flag_deadlock_and_limits():
    M, N, K = 32, 32, 32
    k = without(cube_vector(M, N, K), [line_of("SET_W_FULL")])
    with pytest.raises(DeadlockError) as e:
        simulate_kernel(k, gemm_args(M, N, K, 2), CHIP)
    assert _loc("WAIT_W_FULL") in str(e.value)
    with pytest.raises(DeadlockError):
        run_ordered(k, gemm_args(M, N, K, 2))
    small = replace(CHIP, cross_flags=1)
    with pytest.raises(SyncError, match="cross-core flag id 1"):
        simulate_kernel(cube_vector(M, N, K), gemm_args(M, N, K, 2), small)
    # the AIC sets a cross flag n times before the AIVs can consume one: 15 fit, 16 do not
    simulate_kernel(burst(15), [np.zeros(4, np.float32)], CHIP)
    run_ordered(burst(16), [np.zeros(4, np.float32)])
    with pytest.raises(SyncError, match="more than 15 pending") as e:
        simulate_kernel(burst(16), [np.zeros(4, np.float32)], CHIP)
    assert e.value.loc.line == line_of("BURST_SET")


def burst(n):
    @T.prim_func
    def sets(X: T.Tensor((4,), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            with T.Scope("C"):
                for i in T.serial(n):
                    T.set_cross_flag("FIX", 3)  # BURST_SET
            with T.Scope("V"):
                for i in T.serial(n):
                    T.wait_cross_flag("S", 3)
    return sets.ir


def test_event_id_range():
    M = N = K = 64
    k = cube_gemm(M, N, K)

    def bump(node):
        if isinstance(node, (SetFlag, WaitFlag)) and node.src == "M" and node.dst == "FIX":
            return replace(node, event=8)
        return node

    with pytest.raises(SyncError, match="event id 8") as e:
        simulate_kernel(transform(k, bump), gemm_args(M, N, K), CHIP)
    assert e.value.loc.line == line_of("SET_C_FULL")


def test_ordered_matches_simulation():
    cases = [(cube_gemm(128, 128, 128), gemm_args(128, 128, 128)),
             (cube_gemm_db(64, 64, 256), gemm_args(64, 64, 256)),
             (cube_vector(32, 32, 32), gemm_args(32, 32, 32, 2))]
    for k, args in cases:
        a_sim = [a.copy() for a in args]
        simulate_kernel(k, a_sim, CHIP)
        run_ordered(k, args)
        np.testing.assert_array_equal(args[-1], a_sim[-1])
    x = RNG.uniform(-1, 1, (32, 64)).astype(np.float32)
    y1, y2 = np.zeros_like(x), np.zeros_like(x)
    simulate_kernel(vector_kernel(32, 64, True), [x, y1], CHIP)
    run_ordered(vector_kernel(32, 64, True), [x, y2])
    np.testing.assert_array_equal(y1, y2)


def test_buffers_sharing_bytes_race_through_either_name():
    """plan_memory may place two buffers on the same bytes: an access to either counts."""
    import tilelang_mini
    src = "\n".join([
        '@prim_func(source="alias.py")',
        'def main(X: Tensor((8, 16), "float32"), Y: Tensor((8, 16), "float32")):',
        '    with Kernel(1, is_npu=True) as (cid, vid):',
        '        a = alloc_ub((8, 16), "float32", offset=0)',
        '        b = alloc_ub((8, 16), "float32", offset=0)',
        '        with Scope("V"):',
        '            copy(X, a)',
        '            set_flag(MTE2, V, 0)',
        '            wait_flag(MTE2, V, 0)',
        '            for i, j in Parallel(8, 16):  # 10:1',
        '                a[i, j] = a[i, j] * 2.0',
        '            copy(X, b)  # 12:1',
        '            set_flag(MTE2, V, 1)',
        '            wait_flag(MTE2, V, 1)',
        '            pipe_barrier(V)',
        '            for i, j in Parallel(8, 16):',
        '                b[i, j] = b[i, j] + a[i, j]',
        '            set_flag(V, MTE3, 0)',
        '            wait_flag(V, MTE3, 0)',
        '            copy(b, Y)', ""])
    with pytest.raises(tilelang_mini.CompileError) as err:  # rejected at compile time ...
        tilelang_mini.compile_ir(src, out_idx=[-1])
    msg = str(err.value)
    assert "alias.py:10:1" in msg and "alias.py:12:1" in msg and "common bytes" in msg
    from irbuild import compile_unchecked
    kernel = compile_unchecked(src, [-1])  # ... and by the simulator
    with pytest.raises(RaceError) as err:
        kernel.simulate(np.ones((8, 16), np.float32))
    msg = str(err.value)
    assert "alias.py:10:1" in msg and "alias.py:12:1" in msg and "same bytes" not in msg
    assert "plan_memory placed a on bytes of b" in msg


def _outcome(kernel, args, chip=CHIP):
    """What simulate(data=False) gives: the report's figures and events, or the error."""
    try:
        r = simulate_kernel(kernel, args, chip, data=False)
    except Exception as e:  # noqa: BLE001 -- compared as type and message
        return type(e), str(e), getattr(e, "loc", None)
    return (r.cycles, r.block_cycles, list(r.core_pipe_busy.items()),
            list(r.pipe_busy.items()), r.events, r.instructions)


MUTANTS = ["PRESET_L1", "PRESET_L0", "SET_L1_FULL", "SET_C_FULL", "DRAIN_L1", "DRAIN_L0",
           "WAIT_L1_FREE", "WAIT_L0_FULL", "WAIT_L0_FREE", "SET_L0_FREE"]


@pytest.mark.parametrize("case", MUTANTS + ["clean", "ragged", "double", "cube_vector",
                                            "cross_deadlock", "burst16", "event8"])
def test_data_free_simulation_is_the_machines(case, monkeypatch):
    """simulate(data=False) runs its blocks on the estimate's engine (sim/timing.py): the same
    cycles, busy cycles (in the same order), events and count as the simulator's own machine,
    and the same errors at the same places, on clean kernels and on mutants whose sync is
    broken (deadlocks, flags left set or set twice, cross-flag limits, event ids)."""
    from tilelang_mini.sim import simulator
    args = gemm_args(128, 128, 128)
    if case in MUTANTS:
        k = without(cube_gemm(128, 128, 128), [line_of(case)])
    elif case == "clean":
        k = cube_gemm(128, 128, 128)
    elif case == "ragged":
        k = cube_gemm(128, 128, 128, ragged=True)
    elif case == "double":
        k, args = cube_gemm_db(64, 64, 256), gemm_args(64, 64, 256)
    elif case == "cube_vector":
        k, args = cube_vector(32, 32, 32), gemm_args(32, 32, 32, 2)
    elif case == "cross_deadlock":
        k = without(cube_vector(32, 32, 32), [line_of("SET_W_FULL")])
        args = gemm_args(32, 32, 32, 2)
    elif case == "burst16":
        k, args = burst(16), [np.zeros(4, np.float32)]
    else:
        def bump(node):
            if isinstance(node, (SetFlag, WaitFlag)) and node.src == "M" and node.dst == "FIX":
                return replace(node, event=8)
            return node
        k = transform(cube_gemm(128, 128, 128), bump)
    engine = simulator._timed_block
    used = []
    monkeypatch.setattr(simulator, "_timed_block",
                        lambda m, b, seen: used.append(b) or engine(m, b, seen))
    fast = _outcome(k, args)
    monkeypatch.setattr(simulator, "_timed_block", lambda m, b, seen: None)
    assert fast == _outcome(k, args)
    assert used, "the engine was not asked"


def test_scalar_store_to_gm_keeps_the_machine(monkeypatch):
    """A scalar-unit store to GM could steer another core's control flow mid-block: such a
    kernel's data-free blocks run on the simulator's machine, not the engine's streams."""
    from tilelang_mini.sim import simulator

    @T.prim_func
    def flagged(X: T.Tensor((4,), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            with T.Scope("C"):
                X[0] = 1.0
    monkeypatch.setattr(simulator, "_timed_block", lambda m, b, seen: pytest.fail("engine"))
    x = np.zeros(4, np.float32)
    r = simulate_kernel(flagged.ir, [x], CHIP, data=False)
    assert r.instructions == 1 and x[0] == 1.0
