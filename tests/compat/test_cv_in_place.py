"""AUTO_CV_COMBINE (developer-mode is_npu kernels run as two concurrent programs): a tile the
cube hands to the vector core (L0C -> UB) that the vector code then updates in place
(`copy(c_l0, c_ub); c_ub *= s`) is still a hand-off through a compiler-made workspace, loaded
where the vector loop body first touches it. Before, the in-place write kept the tile out of
the hand-offs, so the vector program waited for the cube's result at the copy, ahead of the
gather the cube was waiting for: a deadlock on ascend910b (the GM workspace of legalize) and
an internal exception on ascend950 (the direct L0C -> UB copy on both cores' buffers).
Both targets and the simulator on both chips, against float64 references."""
import numpy as np
import pytest

import tilelang_mini as tilelang
import tilelang_mini.language as T
from tilelang_mini.errors import CompileError

from kernels import cube_tiles
from util import close, f64, rand

M, N, ITERS, SCALE = 32, 32, 3, 0.375


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_CACHE_DIR", str(tmp_path / "cache"))


def hand_off_loop(form, cid, A, B, D, Y, Z):
    """Per iteration k: the cube's gemm reads b_l1, which the vector core fills from B[k] later
    in the loop body (each iteration's gemm waits for it); the vector core scales the cube's
    product in place (`form`), adds it up, and copies the scaled tile of iteration k out.
    Y = SCALE * A @ sum_k B[k]; Z[k] = SCALE * A @ B[k] (+ D for the "tile_with" form).
    A plain Python helper: inlined into the kernel that calls it."""
    acc = T.alloc_ub((M, N), "float32")
    d_ub = T.alloc_ub((M, N), "float32")
    c_ub = T.alloc_ub((M, N), "float32")
    b_ub = T.alloc_ub((N, N), "float16")
    a_l1, b_l1, c_l0 = cube_tiles(M, N, N)
    T.copy(A[cid * M, 0], a_l1)
    T.copy(D[0, 0], d_ub)
    T.tile.fill(acc, 0.0)
    for k in T.serial(ITERS):
        T.gemm_v0(a_l1, b_l1, c_l0, init=True)
        T.copy(c_l0, c_ub)
        T.copy(B[k, 0, 0], b_ub)
        T.copy(b_ub, b_l1)
        if form == "map":
            for i, j in T.Parallel(M, N):
                c_ub[i, j] = c_ub[i, j] * SCALE
        elif form == "tile":
            T.tile.mul(c_ub, c_ub, SCALE)
        else:  # "tile_with": then adds another tile, in place too
            T.tile.mul(c_ub, c_ub, SCALE)
            T.tile.add(c_ub, c_ub, d_ub)
        T.tile.add(acc, acc, c_ub)
        T.copy(c_ub, Z[k, 0, 0])
    T.copy(acc, Y[0, 0])


def scaled_hand_off(form, rows_per_aiv):
    """hand_off_loop under `as (cid)` with threads=2 (`rows_per_aiv`: the compiler halves the
    vector tiles' rows over the two AIVs) or `as (cid, vid)` (vid unused: AIV 0's work)."""
    @T.prim_func
    def by_cid(A: T.Tensor((M, N), T.float16), B: T.Tensor((ITERS, N, N), T.float16),
               D: T.Tensor((M, N), T.float32), Y: T.Tensor((M, N), T.float32),
               Z: T.Tensor((ITERS, M, N), T.float32)):
        with T.Kernel(1, is_npu=True, threads=2) as (cid):
            hand_off_loop(form, cid, A, B, D, Y, Z)

    @T.prim_func
    def by_cid_vid(A: T.Tensor((M, N), T.float16), B: T.Tensor((ITERS, N, N), T.float16),
                   D: T.Tensor((M, N), T.float32), Y: T.Tensor((M, N), T.float32),
                   Z: T.Tensor((ITERS, M, N), T.float32)):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            hand_off_loop(form, cid, A, B, D, Y, Z)

    return by_cid if rows_per_aiv else by_cid_vid


def reference(a, b, d, form):
    z = np.stack([SCALE * (f64(a) @ f64(b[k])) for k in range(ITERS)])
    if form == "tile_with":
        z = z + f64(d)
    return z.sum(0), z


@pytest.mark.parametrize("rows_per_aiv", [True, False])
@pytest.mark.parametrize("form", ["map", "tile", "tile_with"])
def test_in_place_update_of_a_hand_off_tile(target, form, rows_per_aiv):
    a, b = rand((M, N), "float16", 1, 0.3), rand((ITERS, N, N), "float16", 2, 0.3)
    d = rand((M, N), "float32", 3)
    want_y, want_z = reference(a, b, d, form)
    prim = scaled_hand_off(form, rows_per_aiv)
    y, z = tilelang.compile(prim, out_idx=[3, 4], target=target)(a, b, d)
    close(y, want_y, "float32", ITERS * N)
    close(z, want_z, "float32", N)
    if target == "numpy":
        for chip in ("ascend910b", "ascend950"):
            (y, z), _ = tilelang.compile(prim, out_idx=[3, 4], chip=chip).simulate(a, b, d)
            close(y, want_y, "float32", ITERS * N)
            close(z, want_z, "float32", N)


def hand_off_before_the_loop(scalar_store):
    """The cube's first product reaches the vector core (L0C -> UB) before the loop whose gemm
    reads the tile the vector core fills later in its body: Y = A @ A + A @ (B[0] + B[1]).
    On ascend950 that first copy has a direct path, which no one program can run (before: an
    internal exception); it goes through a workspace as on ascend910b. `scalar_store`: a
    store to global memory that neither program owns (a located error; before: internal)."""
    @T.prim_func
    def main(A: T.Tensor((M, N), T.float16), B: T.Tensor((2, N, N), T.float16),
             Y: T.Tensor((M, N), T.float32), F: T.Tensor((1,), T.float32)):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a_l1, b_l1, c_l0 = cube_tiles(M, N, N)
            b_ub = T.alloc_ub((N, N), "float16")
            c_ub = T.alloc_ub((M, N), "float32")
            acc = T.alloc_ub((M, N), "float32")
            T.copy(A[0, 0], a_l1)
            T.gemm_v0(a_l1, a_l1, c_l0, init=True)
            T.copy(c_l0, acc)
            if scalar_store:
                F[0] = 1.0
            for it in T.serial(2):
                T.gemm_v0(a_l1, b_l1, c_l0, init=True)
                T.copy(c_l0, c_ub)
                T.copy(B[it, 0, 0], b_ub)
                T.copy(b_ub, b_l1)
                for i, j in T.Parallel(M, N):
                    acc[i, j] += c_ub[i, j]
            T.copy(acc, Y[0, 0])

    return main


def test_direct_path_hand_off_outside_the_loop(target):
    a, b = rand((M, N), "float16", 4, 0.3), rand((2, N, N), "float16", 5, 0.3)
    want = f64(a) @ f64(a) + f64(a) @ (f64(b[0]) + f64(b[1]))
    for chip in ("ascend910b", "ascend950"):
        kernel = tilelang.compile(hand_off_before_the_loop(False), out_idx=[2, 3], target=target,
                                  chip=chip)
        close(kernel(a, b)[0], want, "float32", 3 * N)
        if target == "numpy":
            close(kernel.simulate(a, b)[0][0], want, "float32", 3 * N)


@pytest.mark.parametrize("chip", ["ascend910b", "ascend950"])
def test_what_no_program_owns_is_located(chip):
    with pytest.raises(CompileError) as e:
        tilelang.compile(hand_off_before_the_loop(True), out_idx=[2], chip=chip)
    msg = str(e.value)
    assert "cannot be made two such programs: a scalar store to global memory" in msg, msg
    assert "F[0] = 1.0" in open(__file__).read().splitlines()[e.value.loc.line - 1]


def per_aiv_rows(in_place):
    """Each AIV takes its half of the cube's rows (`copy(c_l0[vid * H:...], c_ub)`) and stages
    its half of B's rows for the cube, after the gemm that reads them (two concurrent
    programs): Y = SCALE * A @ sum_k B[k]. The cube's copy of vid's rows runs once per AIV
    into a workspace per AIV (before: once, with AIV 1 handed AIV 0's rows)."""
    h = M // 2

    @T.prim_func
    def main(A: T.Tensor((M, N), T.float16), B: T.Tensor((ITERS, N, N), T.float16),
             Y: T.Tensor((M, N), T.float32)):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a_l1, b_l1, c_l0 = cube_tiles(M, N, N)
            b_ub = T.alloc_ub((N // 2, N), T.float16)
            c_ub = T.alloc_ub((h, N), T.float32)
            t_ub = T.alloc_ub((h, N), T.float32)
            acc = T.alloc_ub((h, N), T.float32)
            T.copy(A[cid * M, 0], a_l1)
            T.tile.fill(acc, 0.0)
            for k in T.serial(ITERS):
                T.gemm_v0(a_l1, b_l1, c_l0, init=True)
                T.copy(c_l0[vid * h:vid * h + h, :], c_ub)
                T.copy(B[k, vid * (N // 2), 0], b_ub)
                T.copy(b_ub, b_l1[vid * (N // 2):vid * (N // 2) + N // 2, :])
                if in_place:
                    T.tile.muls(c_ub, c_ub, SCALE)
                    T.tile.add(acc, acc, c_ub)
                else:
                    T.tile.muls(t_ub, c_ub, SCALE)
                    T.tile.add(acc, acc, t_ub)
            T.copy(acc, Y[cid * M + vid * h, 0])

    return main


@pytest.mark.parametrize("in_place", [True, False])
def test_each_aiv_receives_its_own_rows(target, in_place):
    a, b = rand((M, N), "float16", 6, 0.3), rand((ITERS, N, N), "float16", 7, 0.3)
    want = SCALE * (f64(a) @ f64(b).sum(0))
    prim = per_aiv_rows(in_place)
    close(tilelang.compile(prim, out_idx=[2], target=target)(a, b), want, "float32", ITERS * N)
    if target == "numpy":
        for chip in ("ascend910b", "ascend950"):
            got, _ = tilelang.compile(prim, out_idx=[2], chip=chip).simulate(a, b)
            close(got, want, "float32", ITERS * N)
