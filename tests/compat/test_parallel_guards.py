"""A guarded element assignment inside T.Parallel (`if row < valid: C[...] = ...`, TileLang's
grouped GEMM epilogue) is a masked store: only the iterations whose guard holds read or write
memory. At the tensor edge nothing past the tensor is touched (outputs are views at the front of
a larger array whose other elements are checked), reads past the tensor under the guard do not
fault, on every target (1 and 2 threads) and on the simulator, against float64 references."""
import ml_dtypes
import numpy as np
import pytest

import tilelang_mini as tilelang
import tilelang_mini.language as T
from tilelang_mini.errors import CompileError

from util import close, f64

CANARY = 7.0
NP = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_CACHE_DIR", str(tmp_path / "cache"))


def edge_rows(M, N, bm, dtype):
    """Y[r] = 2 X[r] + 1 for rows r < n[0], by blocks of bm rows; the last block is clipped, so
    its guard is what keeps the stores (and the loads of X) inside the tensors."""
    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), n: T.Tensor((1,), "int32"),
             Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            valid = T.min(bm, n[0] - bx * bm)
            for i, j in T.Parallel(bm, N):
                if i < valid:
                    Y[bx * bm + i, j] = X[bx * bm + i, j] * 2.0 + 1.0
    return main


def run_in_canary(kernel, args, shape, dtype):
    """Call with the output a view at the front of a canary-filled larger array."""
    big = np.full(int(np.prod(shape)) + 40, CANARY, NP[dtype])
    out = big[:out_size(shape)].reshape(shape)
    kernel(*args, out)
    return out, big[out_size(shape):]


def out_size(shape):
    return int(np.prod(shape))


@pytest.mark.parametrize("threads", ["1", "2"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("M, N, bm", [(37, 24, 16), (5, 17, 4), (33, 1, 8)])
def test_guarded_store_at_the_tensor_edge(target, M, N, bm, dtype, threads, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_NUM_THREADS", threads)
    kernel = tilelang.compile(edge_rows(M, N, bm, dtype), target=target)
    x = (np.random.default_rng(M * N).standard_normal((M, N))).astype(NP[dtype])
    for n in (M, M - 1, 1, 0):
        out, tail = run_in_canary(kernel, (x, np.array([n], np.int32)), (M, N), dtype)
        want = np.full((M, N), CANARY)
        want[:n] = f64(x[:n]) * 2 + 1
        close(out, want, dtype)
        assert (f64(tail) == CANARY).all(), "a store past the output tensor"
    if threads == "1":
        n = np.array([M - 1], np.int32)
        y = np.full((M, N), CANARY, NP[dtype])
        kernel.simulate(x, n, y)     # writes y in place (no out_idx)
        want = np.full((M, N), CANARY)
        want[:M - 1] = f64(x[:M - 1]) * 2 + 1
        close(y, want, dtype)


def grouped_rows(G, sizes_pad, N, bm, dtype="float16"):
    """A grouped-GEMM style epilogue: block b covers padded rows [b*bm, (b+1)*bm) of group
    `grp[b]`; only the group's real rows are written, at its unpadded offset."""
    total = sum(sizes_pad)

    @T.prim_func
    def main(P: T.Tensor((total, N), "float32"), grp: T.Tensor((total // bm,), "int32"),
             offs: T.Tensor((G,), "int32"), pads: T.Tensor((G,), "int32"),
             sizes: T.Tensor((G,), "int32"), C: T.Tensor((total - 3, N), dtype)):
        with T.Kernel(total // bm) as bx:
            acc = T.alloc_fragment((bm, N), "float32")
            T.copy(P[bx * bm, 0], acc)
            g = grp[bx]
            start = bx * bm - pads[g] + offs[g]
            rows = T.max(0, T.min(bm, sizes[g] + pads[g] - bx * bm))
            for i, j in T.Parallel(bm, N):
                if i < rows:
                    C[start + i, j] = acc[i, j]
                else:
                    acc[i, j] = 0.0
    return main


def test_grouped_epilogue_writes_only_real_rows(target):
    sizes, bm, N = [5, 8, 4], 4, 16          # padded to 8, 8, 4 -> 20 rows; 17 real rows
    pad = [-(-s // bm) * bm for s in sizes]
    pads = np.concatenate([[0], np.cumsum(pad)[:-1]]).astype(np.int32)
    offs = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int32)
    grp = np.repeat(np.arange(3), np.array(pad) // bm).astype(np.int32)
    p = np.random.default_rng(3).standard_normal((sum(pad), N)).astype(np.float32)
    want = np.concatenate([p[pads[g]:pads[g] + sizes[g]] for g in range(3)]).astype(np.float64)
    kernel = tilelang.compile(grouped_rows(3, pad, N, bm), target=target)
    args = (p, grp, offs, pads, np.array(sizes, np.int32))
    out, tail = run_in_canary(kernel, args, (sum(sizes), N), "float16")
    close(out, want, "float16")
    assert (f64(tail) == CANARY).all()
    c = np.full((sum(sizes), N), CANARY, np.float16)
    kernel.simulate(*args, c)
    close(c, want, "float16")


def masks_and_branches(M, N):
    """Guards of every shape: an else branch, a nested if, a guard read from a mask tensor, a
    uniform-index store under a per-lane guard, a store that reads its own target elsewhere."""
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), K: T.Tensor((M, N), "int32"),
             Y: T.Tensor((M, N), "float32"), Z: T.Tensor((M, 1), "float32")):
        with T.Kernel(1) as bx:
            y = T.alloc_fragment((M, N), "float32")
            T.copy(X, y)
            for i, j in T.Parallel(M, N):
                if K[i, j] > 0:
                    if j < N - 1:
                        y[i, j] = y[i, j + 1] * 3.0
                    else:
                        Z[i, 0] = 5.0
                else:
                    y[i, j] = -1.0
            T.copy(y, Y)
    return main


def test_else_nested_mask_tensor_uniform_and_hazard(target):
    M, N = 6, 19
    rng = np.random.default_rng(9)
    x = rng.standard_normal((M, N)).astype(np.float32)
    k = (rng.random((M, N)) > 0.4).astype(np.int32)
    k[2] = 0                      # a row whose guard holds nowhere: Z[2] stays
    k[3, N - 1] = 1
    kernel = tilelang.compile(masks_and_branches(M, N), target=target)
    y, z = np.zeros((M, N), np.float32), np.full((M, 1), CANARY, np.float32)
    kernel(x, k, y, z)
    want = f64(x).copy()
    for i in range(M):
        for j in range(N):
            if k[i, j] > 0:
                if j < N - 1:
                    want[i, j] = f64(x)[i, j + 1] * 3   # reads the old row (whole-map reads)
            else:
                want[i, j] = -1
    want_z = np.where(k[:, N - 1:] > 0, 5.0, CANARY)
    close(y, want)
    close(z, want_z)
    y2, z2 = np.zeros((M, N), np.float32), np.full((M, 1), CANARY, np.float32)
    kernel.simulate(x, k, y2, z2)
    close(y2, want)
    close(z2, want_z)


def test_a_guard_that_reads_what_it_guards_on_every_target():
    """The guard reads other elements of what it guards: every element's guard sees the tile
    as the map found it (llvm evaluates the guards into a bool tile first; it rejected this
    kernel before)."""
    @T.prim_func
    def main(X: T.Tensor((8, 8), "float32"), Y: T.Tensor((8, 8), "float32")):
        with T.Kernel(1) as bx:
            y = T.alloc_fragment((8, 8), "float32")
            T.copy(X, y)
            for i, j in T.Parallel(8, 8):
                if y[7 - i, j] > 0:  # GUARD
                    y[i, j] = 0.0
            T.copy(y, Y)
    x = np.random.default_rng(4).standard_normal((8, 8)).astype(np.float32)
    want = np.where(f64(x)[::-1] > 0, 0.0, f64(x))
    close(_run(main, "numpy", x), want)   # the interpreter evaluates the guard once
    close(_run(main, "llvm", x), want)
    close(tilelang.compile(main, out_idx=[-1]).simulate(x)[0], want)


def _run(prim, target, x):
    y = np.zeros_like(x)
    tilelang.compile(prim, target=target)(x, y)
    return y


def cond_reads_what_it_writes(M, N, bm, bn):
    """An `if` in T.Parallel whose condition reads the element its branches write (and a nested
    one doing the same): each element takes the branch its value chose before the branch ran."""
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            x = T.alloc_fragment((bm, bn), "float32")
            a = T.alloc_fragment((bm, bn), "float32")
            T.copy(X[by * bm, bx * bn], x)
            for i, j in T.Parallel(bm, bn):
                a[i, j] = x[i, j] * 2.0
                if a[i, j] > 0.5:
                    a[i, j] = a[i, j] - 1.0
                else:
                    a[i, j] = a[i, j] + x[i, j]
                    if a[i, j] < -1.0:
                        a[i, j] = -1.0 - a[i, j] * 0.5
                x[i, j] = a[i, j] + 1.0
            T.copy(x, Y[by * bm, bx * bn])
    return main


@pytest.mark.parametrize("threads", ["1", "2"])
def test_if_condition_reading_what_its_branch_writes(target, threads, monkeypatch):
    """The llvm target rejected this valid map ("the condition of an `if` inside T.Parallel
    reads a, which the `if` writes") while numpy and the simulator ran it."""
    monkeypatch.setenv("TILELANG_MINI_NUM_THREADS", threads)
    M, N = 37, 19
    x = np.random.default_rng(5).standard_normal((M, N)).astype(np.float32)
    a = f64(x) * 2.0
    b = a + f64(x)
    want = np.where(a > 0.5, a - 1.0, np.where(b < -1.0, -1.0 - b * 0.5, b)) + 1.0
    prim = cond_reads_what_it_writes(M, N, 8, 16)
    close(tilelang.compile(prim, out_idx=[-1], target=target)(x), want)
    for chip in ("ascend910b", "ascend950"):
        close(tilelang.compile(prim, out_idx=[-1], chip=chip).simulate(x)[0], want)
