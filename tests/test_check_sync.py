"""Static verification of expert kernels at compile time (check_sync): scope/pipe legality and the
happens-before analysis insert_sync uses, run on the kernel's own flags. A kernel the hardware
would run wrongly does not compile; every correct expert kernel does (no false alarms)."""
# No `from __future__ import annotations`: kernels need their T.Tensor annotations as objects.
from pathlib import Path

import numpy as np
import pytest

import kernels
from markers import Marked
import tilelang_mini
import tilelang_mini.language as T
from tilelang_mini import CompileError, DeadlockError, RaceError, SyncError
from tilelang_mini.ir.printer import print_ir
from kernels import load_for

MARKED = Marked(__file__)
THIS = MARKED.path
line_of = MARKED.line_of
CHIPS = ["ascend910b", "ascend950"]


def rejected(prim, *tags, chip="ascend910b", target="numpy", either=False) -> CompileError:
    """The CompileError of compiling `prim`: located at the first tag's line, naming the lines
    of the others, without compiler frames."""
    with pytest.raises(CompileError) as info:
        tilelang_mini.compile(prim, out_idx=[-1], chip=chip, target=target)
    err = info.value
    text = str(err)
    assert Path(err.loc.file).resolve() == THIS, text
    if either:  # two unordered instructions: the message is located at one, names the other
        assert err.loc.line in [line_of(t) for t in tags], text
    else:
        assert err.loc.line == line_of(tags[0]), text
    assert text.splitlines()[2].strip() == "^", text
    for tag in tags:
        assert f"{THIS}:{line_of(tag)}:" in text or f":{line_of(tag)}:" in text, (tag, text)
    assert "Traceback" not in text and "tilelang_mini/" not in text
    return err


def simulate_unchecked(prim, args, chip="ascend910b"):
    from tilelang_mini.runtime.kernel import JITKernel
    from tilelang_mini.transform.pipeline import Options, run_pipeline
    options = Options(chip=chip, target="numpy")
    compilation = run_pipeline(prim.ir, options, stop_after="plan_memory")
    kernel = JITKernel(prim, prim.ir, (len(prim.ir.params) - 1,), options,
                       compilation=compilation)
    return kernel.simulate(*args)


def one_block(body, cols=16, dtype="float32"):
    """The frame of the one-block expert kernels X -> Y (both (16, cols) `dtype`): the T.macro
    `body(X, Y, vid)` is the block's work (its flags and scopes)."""
    @T.prim_func
    def k(X: T.Tensor((16, cols), dtype), Y: T.Tensor((16, cols), dtype)):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            body(X, Y, vid)
    return k


# ---------------------------------------------------------------------- correct kernels compile


@pytest.mark.parametrize("chip", CHIPS)
def test_expert_gemm_compiles_and_is_correct(chip, target):
    M, N, K = 128, 128, 256
    rng = np.random.default_rng(0)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    prim = kernels.gemm_expert(M, N, K)
    c = tilelang_mini.compile(prim, out_idx=[-1], chip=chip, target=target)(a, b)
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c, want, rtol=2e-3, atol=2e-3 * np.sqrt(K))


@pytest.mark.parametrize("chip", CHIPS)
@pytest.mark.parametrize("name", ["gemm", "matmul_add", "prenorm", "rmsnorm", "softmax",
                                  "flash_attention"])
def test_the_compilers_own_sync_passes_the_check(name, chip):
    """The lowered IR of every example kernel (insert_sync's flags) is a hand-synchronised kernel
    the check accepts: recompiling its text runs check_sync on it."""
    shapes = {"gemm": (64, 64, 64), "matmul_add": (64, 64, 64), "prenorm": (64, 64, 64),
              "rmsnorm": (64, 64), "softmax": (64, 64), "flash_attention": (1, 128, 64)}
    shapes["prenorm"] = (64, 32, 64)
    prim = getattr(kernels, name)(*shapes[name])
    lowered = tilelang_mini.compile(prim, out_idx=[-1], chip=chip)
    text = print_ir(lowered.ir)
    tilelang_mini.compile_ir(text, out_idx=[-1], chip=chip)  # no CompileError


# ------------------------------------------------------------------------------------- legality


def gemm_from(l1: bool):
    """A cube gemm on L1 tiles loaded behind the user's MTE2 -> M flags, or on UB tiles."""
    @T.prim_func
    def k(A: T.Tensor((16, 16), "float16"), B: T.Tensor((16, 16), "float16"),
          C: T.Tensor((16, 16), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            if l1:
                a = T.alloc_L1((16, 16), "float16")
                b = T.alloc_L1((16, 16), "float16")
            else:
                a = T.alloc_ub((16, 16), "float16")
                b = T.alloc_ub((16, 16), "float16")
            c = T.alloc_L0C((16, 16), "float32")
            with T.Scope("C"):
                if l1:
                    T.copy(A, a)  # AT:l1_load
                    load_for("M", B, b)
                T.gemm(a, b, c)  # AT:gemm
                T.set_flag("M", "FIX", 0)
                T.wait_flag("M", "FIX", 0)
                T.copy(c, C)
    return k


def test_a_gemm_on_l1_loads_l0_behind_the_users_flags():
    """T.gemm on L1 tiles in a cube scope loads L0A/L0B itself (MTE1): flags ordering the L1
    loads before the gemm (MTE2 -> M) no longer order them before those L0 loads."""
    err = rejected(gemm_from(l1=True), "gemm", "l1_load", either=True)
    assert "race on a" in err.message and "MTE1" in err.message and "MTE2" in err.message


def test_a_cube_gemm_must_read_l0a_l0b():
    err = rejected(gemm_from(l1=False), "gemm")
    assert "L0A" in err.message and "L0B" in err.message and "'a' in UB" in err.message


def bad_copy(kind):
    @T.macro
    def body(A, C, vid):
        l1 = T.alloc_L1((16, 16), "float16")
        l0a = T.alloc_L0A((16, 16), "float16")
        ub = T.alloc_ub((16, 16), "float16")
        with T.Scope("C"):
            if kind == "gm_l0a":
                T.copy(A, l0a)  # AT:gm_l0a
            if kind == "l1_gm":
                load_for("MTE3", A, l1)
                T.copy(l1, C)  # AT:l1_gm
            if kind == "ub_in_cube":
                T.copy(A, ub)  # AT:ub_in_cube
        with T.Scope("V"):
            if kind == "l1_in_vector":
                T.copy(A, l1)  # AT:l1_in_vector
    return one_block(body, dtype="float16")


@pytest.mark.parametrize("kind,fragment", [
    ("gm_l0a", "no copy path GM -> L0A"), ("l1_gm", "no copy path L1 -> GM"),
    ("ub_in_cube", "T.Scope(\"C\")"), ("l1_in_vector", "T.Scope(\"V\")"),
])
def test_impossible_copies_and_tiles_of_the_other_core(kind, fragment):
    err = rejected(bad_copy(kind), kind)
    assert fragment in err.message, err.message


def l0c_to_ub():
    """An L0C tile copied straight into UB (no GM in between: the kernel reads no tensor)."""
    @T.prim_func
    def k(C: T.Tensor((16, 16), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            c = T.alloc_L0C((16, 16), "float32")
            u = T.alloc_ub((16, 16), "float32")
            with T.Scope("C"):
                T.fill(c, 1.0)
                T.set_flag("M", "FIX", 0)
                T.wait_flag("M", "FIX", 0)
                T.copy(c, u)  # AT:l0c_ub
    return k


def test_l0c_to_ub_exists_only_where_the_chip_has_it():
    err = rejected(l0c_to_ub(), "l0c_ub", chip="ascend910b")
    assert "no direct L0C -> UB" in err.message


# ------------------------------------------------------------------------------ synchronisation


def copy_through_ub(sync: str):
    """GM -> UB -> GM on one vector core with the flag between MTE2 and MTE3 spelled by `sync`."""
    @T.macro
    def body(X, Y, vid):
        with T.Scope("V"):
            x = T.alloc_ub((8, 16), "float32")
            if sync == "none":
                T.pipe_barrier("V")  # the kernel places its own sync (none that helps)
            T.copy(X[vid * 8, 0], x)  # AT:load
            if sync == "ok" or sync == "twice" or sync == "left_set":
                T.set_flag("MTE2", "MTE3", 0)  # AT:set
            if sync == "twice":
                T.set_flag("MTE2", "MTE3", 0)  # AT:set2
            if sync == "ok" or sync == "twice" or sync == "wait_only" or sync == "left_set":
                T.wait_flag("MTE2", "MTE3", 0)  # AT:wait
            T.copy(x, Y[vid * 8, 0])  # AT:store
            if sync == "left_set":
                T.set_flag("MTE3", "MTE2", 1)  # AT:leftover
    return one_block(body)


def test_a_correct_flag_compiles(target):
    x = np.arange(256, dtype=np.float32).reshape(16, 16)
    y = tilelang_mini.compile(copy_through_ub("ok"), out_idx=[-1], target=target)(x)
    np.testing.assert_array_equal(y, x)


def test_a_missing_flag_is_a_race_naming_both_instructions():
    err = rejected(copy_through_ub("none"), "store", "load")
    assert "race on x" in err.message and "MTE2" in err.message and "MTE3" in err.message
    x = np.zeros((16, 16), np.float32)
    with pytest.raises(RaceError):  # the simulator agrees
        simulate_unchecked(copy_through_ub("none"), (x,))


def test_a_scoped_kernel_without_any_flag_gets_them_from_insert_sync(target):
    """Lowered IR printed before insert_sync (scopes, no flags) is completed, not rejected."""
    prim = copy_through_ub("bare")
    x = np.arange(256, dtype=np.float32).reshape(16, 16)
    kernel = tilelang_mini.compile(prim, out_idx=[-1], target=target)
    np.testing.assert_array_equal(kernel(x), x)
    assert "set_flag(MTE2, MTE3" in kernel.get_ir("insert_sync")
    y, _ = tilelang_mini.compile(prim, out_idx=[-1]).simulate(x)
    np.testing.assert_array_equal(y, x)


def test_a_flag_set_twice_before_its_wait():
    err = rejected(copy_through_ub("twice"), "set2", "set")
    assert "still set" in err.message
    with pytest.raises(SyncError):
        simulate_unchecked(copy_through_ub("twice"), (np.zeros((16, 16), np.float32),))


def test_a_wait_without_a_set():
    err = rejected(copy_through_ub("wait_only"), "wait")
    assert "never satisfied" in err.message
    with pytest.raises(DeadlockError):
        simulate_unchecked(copy_through_ub("wait_only"), (np.zeros((16, 16), np.float32),))


def test_a_flag_left_set_at_the_end():
    err = rejected(copy_through_ub("left_set"), "leftover")
    assert "still set when the kernel ends" in err.message
    with pytest.raises((SyncError, RaceError)):
        simulate_unchecked(copy_through_ub("left_set"), (np.zeros((16, 16), np.float32),))


def cross_deadlock():
    @T.macro
    def body(X, Y, vid):
        with T.Scope("C"):
            T.wait_cross_flag("FIX", 1)  # AT:cwait
            T.set_cross_flag("FIX", 0)  # (in order behind the wait on FIX)
        with T.Scope("V"):
            x = T.alloc_ub((8, 16), "float32")
            T.wait_cross_flag("MTE2", 0)  # AT:vwait
            kernels.ub_round_trip(X, Y, x, vid * 8)
            T.set_cross_flag("MTE3", 1)
    return one_block(body)


def test_a_cross_core_deadlock_names_both_waits():
    err = rejected(cross_deadlock(), "cwait", "vwait", either=True)
    assert "deadlock" in err.message
    with pytest.raises(DeadlockError):
        simulate_unchecked(cross_deadlock(), (np.zeros((16, 16), np.float32),))


def cube_to_vector(with_flag: bool):
    """The cube writes a GM workspace row block that the vector cores read back."""
    @T.prim_func
    def k(A: T.Tensor((16, 16), "float16"), B: T.Tensor((16, 16), "float16"),
          W: T.Tensor((16, 16), "float32"), Y: T.Tensor((16, 16), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a1, b1, c0 = kernels.cube_tiles(16, 16, 16)
            a0 = T.alloc_L0A((16, 16), "float16")
            b0 = T.alloc_L0B((16, 16), "float16")
            with T.Scope("C"):
                T.copy(A, a1)
                T.copy(B, b1)
                kernels.l1_to_l0(a1, b1, a0, b0)
                T.gemm(a0, b0, c0, clear_accum=True)
                T.set_flag("M", "FIX", 0)
                T.wait_flag("M", "FIX", 0)
                T.copy(c0, W)  # AT:fixout
                if with_flag:
                    T.set_cross_flag("FIX", 2)
            with T.Scope("V"):
                u = T.alloc_ub((8, 16), "float32")
                if with_flag:
                    T.wait_cross_flag("MTE2", 2)
                T.copy(W[vid * 8, 0], u)  # AT:vread
                T.set_flag("MTE2", "MTE3", 0)
                T.wait_flag("MTE2", "MTE3", 0)
                T.copy(u, Y[vid * 8, 0])
    return k


def test_a_cross_core_handoff_needs_its_flag(target):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((16, 16)).astype(np.float16)
    b = rng.standard_normal((16, 16)).astype(np.float16)
    want = a.astype(np.float64) @ b.astype(np.float64)
    k = tilelang_mini.compile(cube_to_vector(True), out_idx=[-1], target=target)
    w = np.zeros((16, 16), np.float32)
    np.testing.assert_allclose(k(a, b, w), want, rtol=1e-3, atol=1e-3)
    err = rejected(cube_to_vector(False), "vread", "fixout", either=True)
    assert "race on W" in err.message and "set_cross_flag/wait_cross_flag" in err.message


def _column_sums():
    @T.prim_func
    def k(X: T.Tensor((16, 96), "float32"), O: T.Tensor((6, 1, 32), "float32")):
        with T.Kernel(3, 2) as (bx, by):
            x = T.alloc_fragment((8, 32), "float32")
            r = T.alloc_fragment((1, 32), "float32")
            T.copy(X[by * 8, bx * 32], x)
            T.reduce_sum(x, r, dim=0, clear=True)
            T.copy(r, O[by * 3 + bx, 0, 0])
    return k


@pytest.mark.parametrize("chip", CHIPS)
def test_a_lowered_vector_reduce_recompiles_and_runs(chip):
    """The fuzzer's lowered-check-sync (findings/transform.md): insert_sync's output of a plain
    vector reduce is accepted by check_sync when compiled back, and computes the same sums."""
    x = np.random.default_rng(3).standard_normal((16, 96)).astype(np.float32)
    want = np.zeros((6, 1, 32))
    for by in range(2):
        for bx in range(3):
            want[by * 3 + bx, 0] = x[by * 8:by * 8 + 8, bx * 32:bx * 32 + 32].astype(np.float64).sum(0)
    lowered = tilelang_mini.compile(_column_sums(), out_idx=[-1], chip=chip)
    back = tilelang_mini.compile_ir(print_ir(lowered.ir), out_idx=[-1], chip=chip)
    for out in (back(x), back.simulate(x)[0]):
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def _flag_outside_scope():
    @T.macro
    def body(X, Y, vid):
        x = T.alloc_ub((8, 16), "float32")
        with T.Scope("V"):
            T.copy(X[vid * 8, 0], x)
        T.set_flag("MTE2", "MTE3", 0)  # AT:outside
        with T.Scope("V"):
            T.wait_flag("MTE2", "MTE3", 0)
            T.copy(x, Y[vid * 8, 0])
    return one_block(body)


def test_a_flag_outside_every_scope_is_located():
    """The fuzzer's mutation:11-319 (a flag line of lowered IR text lost its indentation): a
    located CompileError, not an internal error about an instruction without a core."""
    err = rejected(_flag_outside_scope(), "outside")
    assert "set_flag outside a T.Scope" in err.message, err.message


# ------------------------------------------------------------- the two vector cores on GM


def aiv_exchange(mode: str):
    """Each AIV stores its half of X to the workspace W, reads the other AIV's half back and
    writes it to Y (halves swapped). `synced`: the AIVs meet through the cube's cross flags;
    `unsynced`: nothing orders one AIV's store before the other's read; `same_rows`: both AIVs
    store to the same rows of W."""
    @T.prim_func
    def k(X: T.Tensor((16, 16), "float32"), W: T.Tensor((16, 16), "float32"),
          Y: T.Tensor((16, 16), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_ub((8, 16), "float32")
            u = T.alloc_ub((8, 16), "float32")
            with T.Scope("V"):
                load_for("MTE3", X[vid * 8, 0], x)
                if mode == "same_rows":
                    T.copy(x, W[0, 0])  # AT:same
                else:
                    T.copy(x, W[vid * 8, 0])  # AT:halfstore
                T.set_flag("MTE3", "MTE2", 2)  # u may take the bytes of x
                T.wait_flag("MTE3", "MTE2", 2)
                if mode == "synced":
                    T.set_cross_flag("MTE3", 3)
            with T.Scope("C"):
                if mode == "synced":
                    T.wait_cross_flag("MTE2", 3)
                    T.set_cross_flag("MTE2", 4)
            with T.Scope("V"):
                if mode == "synced":
                    T.wait_cross_flag("MTE2", 4)
                T.copy(W[(1 - vid) * 8, 0], u)  # AT:read
                T.set_flag("MTE2", "MTE3", 1)
                T.wait_flag("MTE2", "MTE3", 1)
                T.copy(u, Y[vid * 8, 0])
    return k


def test_the_two_aivs_exchanging_halves_through_the_cube_compile(target):
    x = np.arange(256, dtype=np.float32).reshape(16, 16)
    k = tilelang_mini.compile(aiv_exchange("synced"), out_idx=[-1], target=target)
    np.testing.assert_array_equal(k(x, np.zeros_like(x)), np.concatenate([x[8:], x[:8]]))
    y, _ = k.simulate(x, np.zeros_like(x))
    np.testing.assert_array_equal(y, np.concatenate([x[8:], x[:8]]))


def test_an_aiv_reading_what_the_other_writes_without_sync_is_a_race():
    """Before, check_sync walked one vector core (vid 0) and left this to simulate."""
    err = rejected(aiv_exchange("unsynced"), "read", "halfstore", either=True)
    assert "race on W" in err.message and "V0." in err.message and "V1." in err.message
    assert "vid 0, vid 1" in err.message
    # the simulator agrees (on data where the order matters: it does not report unordered
    # accesses of bytes whose values cannot differ, e.g. zeros stored over zeros)
    x = np.arange(256, dtype=np.float32).reshape(16, 16)
    with pytest.raises(RaceError):
        simulate_unchecked(aiv_exchange("unsynced"), (x, np.zeros_like(x)))


def test_the_two_aivs_storing_the_same_rows_is_a_race():
    err = rejected(aiv_exchange("same_rows"), "same")
    assert "race on W" in err.message and "V0.MTE3" in err.message and "V1.MTE3" in err.message
    x = np.arange(256, dtype=np.float32).reshape(16, 16)  # the AIVs store different rows of X
    with pytest.raises(RaceError):
        simulate_unchecked(aiv_exchange("same_rows"), (x, np.zeros_like(x)))


def _column_max_in_k_steps():
    """The fuzzer's mutation:v2a-285 base: a K loop of GM loads into one AIV (`if vid == 0` after
    split_cores: the other AIV only waits and sets the loop's flags)."""
    @T.prim_func
    def k(X: T.Tensor((107, 17), "float16"), O: T.Tensor((4, 8), "float32")):
        with T.Kernel(1, 4) as (bx, by):
            x = T.alloc_fragment((32, 8), "float32")
            r = T.alloc_fragment((8,), "float32")
            T.fill(r, -1e+30)
            for k in range(T.ceildiv(17, 8)):
                T.copy(X[by * 32, k * 8], x)
                T.reduce_max(x, r, dim=0, clear=False)
            T.copy(r, O[by * 1 + bx, 0])
    return k


@pytest.mark.parametrize("chip", CHIPS)
def test_a_set_on_v_follows_the_wait_before_it_on_v(chip):
    """On the AIV that runs none of the loop's vector work, `wait_flag(MTE2, V)` and then
    `set_flag(V, MTE2)` are all its V pipe does: the set is issued after the wait, so the next
    iteration's `set_flag(MTE2, V)` follows the wait (was: "may run before ... has consumed the
    previous set" once the two AIVs were walked separately)."""
    x = np.random.default_rng(5).standard_normal((107, 17)).astype(np.float16)
    want = np.zeros((4, 8))
    for by in range(4):
        r = np.full(8, -1e30)
        for kk in range(3):
            tile = np.zeros((32, 8))
            part = x[by * 32:by * 32 + 32, kk * 8:kk * 8 + 8].astype(np.float64)
            tile[:part.shape[0], :part.shape[1]] = part
            r = np.maximum(r, tile.max(0))
        want[by] = r
    lowered = tilelang_mini.compile(_column_max_in_k_steps(), out_idx=[-1], chip=chip)
    back = tilelang_mini.compile_ir(print_ir(lowered.ir), out_idx=[-1], chip=chip)
    for out in (back(x), back.simulate(x)[0]):
        np.testing.assert_array_equal(out, want)


def chained_tile_ops():
    """tilelang-ascend's expert style: dependent T.tile operations with no pipe_barrier(V)
    (the Ascend C compiler adds PIPE_V barriers for them; docs/machine_model.md)."""
    @T.macro
    def body(X, Y, vid):
        a = T.alloc_ub((8, 32), "float32")
        b = T.alloc_ub((8, 32), "float32")
        with T.Scope("V"):
            load_for("V", X[vid * 8, 0], a)
            T.copy(a, b)
            T.tile.add(b, b, 1.0)
            T.tile.mul(a, b, b)
            T.set_flag("V", "MTE3", 0)
            T.wait_flag("V", "MTE3", 0)
            T.copy(a, Y[vid * 8, 0])
    return one_block(body, cols=32)


def test_an_expert_kernel_gets_the_v_barriers_it_leaves_out(target):
    x = np.random.default_rng(5).standard_normal((16, 32)).astype(np.float32)
    want = (x.astype(np.float64) + 1.0) ** 2
    kernel = tilelang_mini.compile(chained_tile_ops(), out_idx=[-1], target=target)
    np.testing.assert_allclose(kernel(x), want, rtol=1e-6, atol=1e-6)
    assert kernel.get_ir("insert_sync").count("pipe_barrier(V)") == 2  # copy->add, add->mul
    if target == "numpy":
        got, _ = kernel.simulate(x)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
        # without them (the lowering before insert_sync) the hardware would race
        with pytest.raises(RaceError):
            simulate_unchecked(chained_tile_ops(), [x])
