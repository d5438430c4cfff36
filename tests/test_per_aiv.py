"""tilelang-ascend developer mode with the vector-core index spelled out:
`with T.Kernel(n, is_npu=True) as (cid, vid):` and no T.Scope. `cid` is the block, `vid` the
vector core (0, 1) of that block: the block's cube work runs once, and each vector instruction
runs on both AIVs with its own vid (split_cores' per-AIV mode), as on the hardware.

The kernels here have the cube write a per-block GM workspace inside a loop and each vid read
its half (and, in the other direction, each vid write its half and the cube read the whole): a
compiler that ran the two vid halves as blocks of their own would have two blocks overwrite one
workspace at different loop iterations, a nondeterministic wrong result on the llvm target's
threads that the in-order targets hide."""
import numpy as np
import pytest

import tilelang_mini
import tilelang_mini.language as T
from kernels import cube_tiles

CHIPS = ["ascend910b", "ascend950"]
f64 = np.float64


def block_exchange(blocks, steps, x_dtype, ws_shape, ws_dtype, body, bm=32, bn=32, bk=32):
    """The frame of the kernels whose cube and vector cores exchange a per-block GM workspace:
    X (blocks * bm, steps * bk) `x_dtype` and V (steps * bk, bn) float16 in, Out (blocks * bm, bn)
    float32, the workspace W (blocks, *ws_shape) `ws_dtype`; the T.macro `body(X, V, Out, W,
    cid, vid)` is the block's work."""
    @T.prim_func
    def main(X: T.Tensor((blocks * bm, steps * bk), x_dtype),
             V: T.Tensor((steps * bk, bn), "float16"),
             Out: T.Tensor((blocks * bm, bn), "float32"),
             W: T.Tensor((blocks, *ws_shape), ws_dtype)):
        with T.Kernel(blocks, is_npu=True) as (cid, vid):
            body(X, V, Out, W, cid, vid)
    return main


def cube_to_vector(blocks, steps, bm=32, bn=32, bk=32):
    """Out[c*bm + r] = sum_t 0.5**(steps-1-t) * (A[c, t] @ B[t])[r]: per step the cube writes
    the block's whole bm x bn product to W[c]; each vid folds its bm/2 rows into its own UB."""
    h = bm // 2

    @T.macro
    def body(A, B, Out, W, cid, vid):
        a_l1, b_l1, c_l0 = cube_tiles(bm, bn, bk)
        part = T.alloc_ub((h, bn), "float32")
        acc = T.alloc_ub((h, bn), "float32")
        T.tile.fill(acc, 0.0)
        for t in T.serial(steps):
            T.copy(A[cid * bm, t * bk], a_l1)
            T.copy(B[t * bk, 0], b_l1)
            T.gemm_v0(a_l1, b_l1, c_l0, init=True)
            T.copy(c_l0, W[cid, 0:bm, 0:bn])
            T.copy(W[cid, vid * h:vid * h + h, 0:bn], part)
            for i, j in T.Parallel(h, bn):
                acc[i, j] = acc[i, j] * 0.5 + part[i, j]
        T.copy(acc, Out[cid * bm + vid * h, 0])
    return block_exchange(blocks, steps, "float16", (bm, bn), "float32", body, bm, bn, bk)


def cube_to_vector_ref(a, b, blocks, steps, bm=32, bk=32):
    a, b = a.astype(f64), b.astype(f64)
    out = np.zeros((blocks * bm, b.shape[1]))
    for t in range(steps):
        out = out * 0.5 + a[:, t * bk:(t + 1) * bk] @ b[t * bk:(t + 1) * bk]
    return out


def vector_to_cube(blocks, steps, bm=32, bn=32, bk=32):
    """Out[c] = sum_t exp(X[c, t]) @ V[t]: per step each vid writes exp of its bm/2 rows to its
    half of P[c]; the cube reads the whole P[c] and accumulates the product in L0C."""
    h = bm // 2

    @T.macro
    def body(X, V, Out, P, cid, vid):
        x_ub = T.alloc_ub((h, bk), "float32")
        p_ub = T.alloc_ub((h, bk), "float16")
        p_l1, v_l1, o_l0 = cube_tiles(bm, bn, bk)
        for t in T.serial(steps):
            T.copy(X[cid * bm + vid * h, t * bk], x_ub)
            T.tile.exp(x_ub, x_ub)
            T.copy(x_ub, p_ub)
            T.copy(p_ub, P[cid, vid * h:vid * h + h, 0:bk])
            T.copy(P[cid, 0:bm, 0:bk], p_l1)
            T.copy(V[t * bk, 0], v_l1)
            T.gemm_v0(p_l1, v_l1, o_l0, init=(t == 0))
        T.copy(o_l0, Out[cid * bm, 0])
    return block_exchange(blocks, steps, "float32", (bm, bk), "float16", body, bm, bn, bk)


def vector_to_cube_ref(x, v, steps, bk=32):
    p = np.exp(x.astype(f64)).astype(np.float16).astype(f64)
    return sum(p[:, t * bk:(t + 1) * bk] @ v[t * bk:(t + 1) * bk].astype(f64)
               for t in range(steps))


def shared_operand(blocks, steps, bm=32, bn=32, bk=32):
    """Out[c] = sum_t (X[c, t] * 2) @ V[t], both operands staged by the vector cores: each vid
    writes its half of P[c], and both write the whole V[t] to Q[c] (the same values, as
    tilelang-ascend's sparse attention stages its gathered KV); the cube reads both whole."""
    h = bm // 2
    @T.prim_func
    def main(X: T.Tensor((blocks * bm, steps * bk), "float16"),
             V: T.Tensor((steps * bk, bn), "float16"),
             Out: T.Tensor((blocks * bm, bn), "float32"),
             P: T.Tensor((blocks, bm, bk), "float16"),
             Q: T.Tensor((blocks, bk, bn), "float16")):
        with T.Kernel(blocks, is_npu=True) as (cid, vid):
            x_ub = T.alloc_ub((h, bk), "float16")
            v_ub = T.alloc_ub((bk, bn), "float16")
            p_l1, v_l1, o_l0 = cube_tiles(bm, bn, bk)
            for t in T.serial(steps):
                T.copy(X[cid * bm + vid * h, t * bk], x_ub)
                T.tile.mul(x_ub, x_ub, 2.0)
                T.copy(x_ub, P[cid, vid * h:vid * h + h, 0:bk])
                T.copy(V[t * bk, 0], v_ub)
                T.copy(v_ub, Q[cid, 0:bk, 0:bn])
                T.copy(P[cid, 0:bm, 0:bk], p_l1)
                T.copy(Q[cid, 0:bk, 0:bn], v_l1)
                T.gemm_v0(p_l1, v_l1, o_l0, init=(t == 0))
            T.copy(o_l0, Out[cid * bm, 0])
    return main


def shared_operand_ref(x, v, steps, bk=32):
    return sum(2 * x[:, t * bk:(t + 1) * bk].astype(f64) @ v[t * bk:(t + 1) * bk].astype(f64)
               for t in range(steps))


def _cube_to_vector_case(rng, blocks=4, steps=3):
    a = rng.standard_normal((blocks * 32, steps * 32)).astype(np.float16)
    b = rng.standard_normal((steps * 32, 32)).astype(np.float16)
    return (cube_to_vector(blocks, steps), [a, b],
            cube_to_vector_ref(a, b, blocks, steps), (blocks, 32, 32))


def _vector_to_cube_case(rng, blocks=4, steps=3):
    x = (0.5 * rng.standard_normal((blocks * 32, steps * 32))).astype(np.float32)
    v = rng.standard_normal((steps * 32, 32)).astype(np.float16)
    return vector_to_cube(blocks, steps), [x, v], vector_to_cube_ref(x, v, steps), (blocks, 32, 32)


def _shared_operand_case(rng, blocks=3, steps=4):
    x = rng.standard_normal((blocks * 32, steps * 32)).astype(np.float16)
    v = rng.standard_normal((steps * 32, 32)).astype(np.float16)
    return (shared_operand(blocks, steps), [x, v], shared_operand_ref(x, v, steps),
            [((blocks, 32, 32), "float16"), ((blocks, 32, 32), "float16")])


CASES = {"cube_to_vector": _cube_to_vector_case, "vector_to_cube": _vector_to_cube_case,
         "shared_operand": _shared_operand_case}


def _workspaces(case, ws):
    if case == "shared_operand":
        return [np.zeros(shape, dtype) for shape, dtype in ws]
    return [np.zeros(ws, "float32" if case == "cube_to_vector" else "float16")]


@pytest.mark.parametrize("case", sorted(CASES))
def test_per_aiv_kernel_matches_numpy(case, target, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_NUM_THREADS", "2")
    prim, args, want, ws = CASES[case](np.random.default_rng(8))
    kernel = tilelang_mini.compile(prim, out_idx=[2], target=target)
    for _ in range(6 if target == "llvm" else 1):  # threads: a race shows on some runs
        got = kernel(*args, *_workspaces(case, ws))
        np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("chip", CHIPS)
def test_per_aiv_kernel_simulates_clean(case, chip):
    prim, args, want, ws = CASES[case](np.random.default_rng(9))
    kernel = tilelang_mini.compile(prim, out_idx=[2], chip=chip)
    got, _ = kernel.simulate(*args, *_workspaces(case, ws))
    np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-3)


def test_one_block_per_cluster_cube_once_vector_twice():
    """The lowered kernel keeps one block per cid (not 2 * n), its cube work in Scope("C") and
    the vid-indexed accesses in Scope("V") with the AIV's own vid."""
    from tilelang_mini.ir.nodes import Scope, Var, walk, walk_statements
    kernel = tilelang_mini.compile(cube_to_vector(4, 2), out_idx=[2])
    ir = kernel.ir
    assert ir.grid == (4,) and ir.is_npu
    scopes = [s for s in walk_statements(ir.body) if isinstance(s, Scope)]
    assert {s.core for s in scopes} == {"C", "V"}
    vid = ir.grid_vars[1]
    cube_vid = [n for s in scopes if s.core == "C" for st in s.body for n in walk(st)
                if isinstance(n, Var) and n.name == vid]
    vec_vid = [n for s in scopes if s.core == "V" for st in s.body for n in walk(st)
               if isinstance(n, Var) and n.name == vid]
    assert not cube_vid and vec_vid


def guarded_vector(blocks, n=32):
    """Y[c*n + r] = 2 * X[c*n + r] by each vid's half; vid 0 alone also writes S[c] = X[c*n]."""
    h = n // 2

    @T.prim_func
    def main(X: T.Tensor((blocks * n, 8), "float32"), Y: T.Tensor((blocks * n, 8), "float32"),
             S: T.Tensor((blocks, 8), "float32")):
        with T.Kernel(blocks, is_npu=True) as (cid, vid):
            x = T.alloc_ub((h, 8), "float32")
            T.copy(X[cid * n + vid * h, 0], x)
            if vid == 0:
                T.copy(x[0:1, :], S[cid:cid + 1, :])
            T.tile.mul(x, x, 2.0)
            T.copy(x, Y[cid * n + vid * h, 0])
    return main


def test_if_on_vid_around_vector_work(target):
    x = np.random.default_rng(3).standard_normal((3 * 32, 8)).astype(np.float32)
    kernel = tilelang_mini.compile(guarded_vector(3), out_idx=[1, 2], target=target)
    y, s = kernel(x)
    np.testing.assert_allclose(y, 2 * x.astype(f64), rtol=1e-6)
    np.testing.assert_array_equal(s, x[::32])
    for chip in CHIPS:
        (y, s), _ = tilelang_mini.compile(guarded_vector(3), out_idx=[1, 2], chip=chip).simulate(x)
        np.testing.assert_allclose(y, 2 * x.astype(f64), rtol=1e-6)
        np.testing.assert_array_equal(s, x[::32])


def test_if_on_vid_around_cube_work_is_a_located_error():
    import inspect
    main_line = inspect.currentframe().f_lineno + 1

    @T.prim_func
    def main(A: T.Tensor((32, 32), "float16"), C: T.Tensor((32, 32), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a_l1, b_l1, acc = cube_tiles(32, 32, 32)
            c_ub = T.alloc_ub((16, 32), "float32")
            T.copy(A[0, 0], a_l1)
            T.copy(A[0, 0], b_l1)
            if vid == 0:
                T.gemm_v0(a_l1, b_l1, acc, init=True)
            T.copy(acc[vid * 16:vid * 16 + 16, :], c_ub)
            T.copy(c_ub, C[vid * 16, 0])
    with pytest.raises(tilelang_mini.CompileError) as err:
        tilelang_mini.compile(main, out_idx=[-1])
    assert "has no vid" in str(err.value)
    assert err.value.loc.line == main_line + 8  # the `if vid == 0:`


def read_back(blocks=2):
    """Both AIVs stage the block's whole X tile to W[c] (the same values: the statement reads
    no vid) and each reads its own half back: each AIV keeps its own write (split_cores does
    not reduce it to AIV 0's, which AIV 1 could not wait for)."""
    @T.prim_func
    def main(X: T.Tensor((blocks * 32, 8), "float32"), Y: T.Tensor((blocks * 32, 8), "float32"),
             W: T.Tensor((blocks, 32, 8), "float32")):
        with T.Kernel(blocks, is_npu=True) as (cid, vid):
            a = T.alloc_ub((32, 8), "float32")
            b = T.alloc_ub((16, 8), "float32")
            T.copy(X[cid * 32, 0], a)
            T.copy(a, W[cid, 0:32, 0:8])
            T.copy(W[cid, vid * 16:vid * 16 + 16, 0:8], b)
            T.tile.mul(b, b, 3.0)
            T.copy(b, Y[cid * 32 + vid * 16, 0])
    return main


def test_vector_read_back_of_a_same_value_write(target, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_NUM_THREADS", "2")
    x = np.random.default_rng(10).standard_normal((64, 8)).astype(np.float32)
    kernel = tilelang_mini.compile(read_back(), out_idx=[1], target=target)
    for _ in range(3):
        np.testing.assert_allclose(kernel(x, np.zeros((2, 32, 8), np.float32)),
                                   3 * x.astype(f64), rtol=1e-6)


def test_vector_read_back_of_a_same_value_write_simulates():
    """Both AIVs write the same bytes to W unordered (benign on the hardware: either order
    leaves the same bytes) and each reads back after its own write: no race reported."""
    x = np.random.default_rng(10).standard_normal((64, 8)).astype(np.float32)
    y, _ = tilelang_mini.compile(read_back(), out_idx=[1]).simulate(
        x, np.zeros((2, 32, 8), np.float32))
    np.testing.assert_allclose(y, 3 * x.astype(f64), rtol=1e-6)


def aiv_gemm(M, a_dtype, load_a, form="rows"):
    """C (M, 32) = A' @ B (B (32, 32) float16) on one block in developer mode: the T.macro
    `load_a(A, a_l1, vid)` puts the operand A' (from A (M, 32) `a_dtype`) into L1, the cube
    multiplies, and each AIV copies its own part of the accumulator out of L0C: consecutive row
    halves (`rows`: FixPipe's dual destination), the halves `swapped`, or column halves
    (`columns`: through a workspace on every chip)."""
    h = M // 2

    @T.prim_func
    def main(A: T.Tensor((M, 32), a_dtype), B: T.Tensor((32, 32), "float16"),
             C: T.Tensor((M, 32), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a_l1, b_l1, acc = cube_tiles(M, 32, 32)
            load_a(A, a_l1, vid)
            T.copy(B[0, 0], b_l1)
            T.gemm(a_l1, b_l1, acc, clear_accum=True)
            if form == "rows":
                c_ub = T.alloc_ub((h, 32), "float32")
                T.copy(acc[vid * h:vid * h + h, :], c_ub)
                T.copy(c_ub, C[vid * h, 0])
            elif form == "swapped":
                c_ub = T.alloc_ub((h, 32), "float32")
                T.copy(acc[(1 - vid) * h:(1 - vid) * h + h, :], c_ub)
                T.copy(c_ub, C[(1 - vid) * h, 0])
            else:
                c_ub = T.alloc_ub((M, 16), "float32")
                T.copy(acc[:, vid * 16:vid * 16 + 16], c_ub)
                T.copy(c_ub, C[0, vid * 16])
    return main


@T.macro
def load_whole(A, a_l1, vid):
    T.copy(A[0, 0], a_l1)


def aiv_accumulator_parts(form):
    """Each AIV copies its own part of the block's (64, 32) accumulator out of L0C, A loaded
    into L1 whole."""
    return aiv_gemm(64, "float16", load_whole, form)


@pytest.mark.parametrize("form", ["rows", "swapped", "columns"])
def test_each_aiv_copies_its_own_part_of_the_accumulator(target, form):
    """On ascend950 (FixPipe L0C -> UB) the two per-vid copies each went to both AIVs, so the
    second overwrote AIV 0's rows: simulate returned AIV 1's part in AIV 0's rows."""
    rng = np.random.default_rng(12)
    a = rng.standard_normal((64, 32)).astype(np.float16)
    b = rng.standard_normal((32, 32)).astype(np.float16)
    ref = a.astype(f64) @ b.astype(f64)
    prim = aiv_accumulator_parts(form)
    out = tilelang_mini.compile(prim, out_idx=[-1], target=target)(a, b)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
    for chip in ("ascend910b", "ascend950"):
        simulated, _ = tilelang_mini.compile(prim, out_idx=[-1], chip=chip).simulate(a, b)
        np.testing.assert_allclose(simulated, ref, rtol=1e-4, atol=1e-4)


def different_value_write(blocks=2):
    """Each AIV writes ITS half of X to the same bytes W[c, 0:16] and reads them back: the
    bytes read depend on which write lands last, a real race."""
    @T.prim_func
    def main(X: T.Tensor((blocks * 32, 8), "float32"), Y: T.Tensor((blocks * 32, 8), "float32"),
             W: T.Tensor((blocks, 16, 8), "float32")):
        with T.Kernel(blocks, is_npu=True) as (cid, vid):
            a = T.alloc_ub((16, 8), "float32")
            T.copy(X[cid * 32 + vid * 16, 0], a)
            T.copy(a, W[cid, 0:16, 0:8])
            T.copy(W[cid, 0:16, 0:8], a)
            T.copy(a, Y[cid * 32 + vid * 16, 0])
    return main


def test_vector_read_back_of_a_different_value_write_is_a_race():
    """Still reported with the values compared: the two writes' bytes differ."""
    x = np.random.default_rng(11).standard_normal((64, 8)).astype(np.float32)
    for chip in CHIPS:
        with pytest.raises(tilelang_mini.RaceError) as err:
            tilelang_mini.compile(different_value_write(), out_idx=[1], chip=chip).simulate(
                x, np.zeros((2, 16, 8), np.float32))
        assert "buffer W" in str(err.value)


@T.macro
def scaled_halves(A, a_l1, vid):
    a_ub = T.alloc_ub((16, 32), "float32")
    h_ub = T.alloc_ub((16, 32), "float16")
    T.copy(A[vid * 16, 0], a_ub)
    T.tile.muls(a_ub, a_ub, 2.0)
    T.tile.cast(h_ub, a_ub, "CAST_RINT", 512)
    T.copy(h_ub, a_l1[vid * 16:vid * 16 + 16, :])


def aiv_operand_halves():
    """Each AIV prepares its half of the rows of the GEMM's A operand (scale, cast) and copies
    it into its rows of one L1 tile; the cube multiplies the whole tile and each AIV copies out
    its row half."""
    return aiv_gemm(32, "float32", scaled_halves)


def test_each_aiv_writes_its_rows_of_an_l1_operand(target):
    """On ascend910b (no UB -> L1 path) both AIVs staged their halves through ONE workspace
    and the cube copied it into both halves of the L1 tile: wrong numbers on numpy and llvm,
    a race in simulate. Each AIV now stages through its own copy of the workspace."""
    rng = np.random.default_rng(13)
    a = rng.standard_normal((32, 32)).astype(np.float32)
    b = rng.standard_normal((32, 32)).astype(np.float16)
    ref = (a.astype(f64) * 2).astype(np.float16).astype(f64) @ b.astype(f64)
    prim = aiv_operand_halves()
    out = tilelang_mini.compile(prim, out_idx=[-1], target=target)(a, b)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
    for chip in CHIPS:
        simulated, _ = tilelang_mini.compile(prim, out_idx=[-1], chip=chip).simulate(a, b)
        np.testing.assert_allclose(simulated, ref, rtol=1e-4, atol=1e-4)
