"""Per-thread (SIMT) TileLang kernels: `T.get_thread_binding()` used as a value runs the block's
threads in lockstep, each statement a map over the threads (frontend/simt.py). Kernels in
TileLang's dialect, on both targets and simulated, against float64 NumPy references; and the
located errors for what has no lockstep meaning."""
import numpy as np
import pytest

import tilelang_mini
import tilelang_mini.language as T
from tilelang_mini import CompileError

from markers import Marked
from util import close, f64, rand

MARKED = Marked(__file__)


def run_and_simulate(f, args, want, reduce_len=1):
    """`f(*args)` (one output) on the target under test, then simulated: both match `want`."""
    close(f(*args), want, reduce_len=reduce_len)
    kern, kargs = f.kernel_for(*args)
    out, _ = kern.simulate(*kargs)
    close(out, want, reduce_len=reduce_len)


@tilelang_mini.jit
def row_dots(A, B, BLOCK_N: int, BLOCK_K: int):
    """One thread per row of the block's BLOCK_N rows (TileLang's default 128 threads), a
    per-thread accumulator, the shared vector loaded by every thread."""
    N, K = T.const("N, K")
    A: T.Tensor((K,), T.float16)
    B: T.Tensor((N, K), T.float16)
    C = T.empty((N,), T.float32)
    with T.Kernel(T.ceildiv(N, BLOCK_N)) as bn:
        tn = T.get_thread_binding(0)
        a_s = T.alloc_shared((BLOCK_K,), T.float16)
        b_s = T.alloc_shared((BLOCK_N, BLOCK_K), T.float16)
        acc = T.alloc_local((1,), T.float32)
        T.clear(acc)
        for bk in T.serial(K // BLOCK_K):
            for tk in T.serial(BLOCK_K):
                a_s[tk] = A[bk * BLOCK_K + tk]
                b_s[tn, tk] = B[bn * BLOCK_N + tn, bk * BLOCK_K + tk]  # AT:row_tile
            for tk in T.serial(BLOCK_K):
                acc[0] += a_s[tk].astype(T.float32) * b_s[tn, tk].astype(T.float32)
        C[bn * BLOCK_N + tn] = acc[0]
    return C


def test_one_thread_per_row(target, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    a, b = rand((64,), "float16", seed=1), rand((256, 64), "float16", seed=2)
    want = f64(b) @ f64(a)
    run_and_simulate(row_dots, [a, b, 128, 16], want, 64)


def test_fewer_rows_than_threads_is_located(target, monkeypatch):
    """TileLang's naive gemv with BLOCK_N=64 under its default 128 threads: thread tn writes
    row tn of a 64-row tile (a run-time fault before, which the upstream sweep counted as
    internal); a CompileError at the tile's store (transform/check_bounds.py)."""
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    a, b = rand((64,), "float16", seed=1), rand((256, 64), "float16", seed=2)
    with pytest.raises(CompileError) as info:
        row_dots(a, b, 64, 16)
    MARKED.located(info.value, "row_tile")
    text = str(info.value)
    assert "of 'b_s' takes values 0..127" in text and "internal" not in text, text
    assert "'b_s' has shape (64, 16), so expected 0..63" in text, text


@tilelang_mini.jit
def split_sums(X, BN: int, BK: int):
    """2-D threads (BN, BK): each (tn, tk) sums a strided part of row tn, the parts meet in a
    shared tile through T.atomic_add; `if tk == 0` zeroes it, `if tn < 2` writes a flag."""
    N, K = T.const("N, K")
    X: T.Tensor((N, K), T.float32)
    S = T.empty((N,), T.float32)
    F = T.empty((N,), T.int32)
    with T.Kernel(N // BN, threads=(BN, BK)) as bn:
        tn = T.get_thread_binding(0)
        tk = T.get_thread_binding(1)
        part = T.alloc_local((1,), T.float32)
        s = T.alloc_shared((BN,), T.float32)
        count = T.alloc_shared((1,), T.int32)
        if tk == 0:
            s[tn] = 0
        count[0] = 0
        T.sync_threads()
        T.clear(part)
        for k in T.serial(K // BK):
            part[0] += X[bn * BN + tn, k * BK + tk]
        T.atomic_add(s[tn], part[0])
        T.atomic_add(count[0], 1)
        T.sync_threads()
        S[bn * BN + tn] = s[tn]
        if tn < 2:
            F[bn * BN + tn] = count[0]
        else:
            F[bn * BN + tn] = -tn
    return S, F


def test_two_dimensional_threads_with_atomics(target, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    x = rand((16, 32), seed=3)
    want_f = np.array([8 * 4 if i % 8 < 2 else -(i % 8) for i in range(16)])
    s, f = split_sums(x, 8, 4)
    close(s, f64(x).sum(1), reduce_len=32)
    assert f.tolist() == want_f.tolist()
    kern, args = split_sums.kernel_for(x, 8, 4)
    (ss, fs), _ = kern.simulate(*args)
    close(ss, f64(x).sum(1), reduce_len=32)
    assert fs.tolist() == want_f.tolist()


@T.macro
def butterfly(vals, other, rounds):
    tx = T.get_thread_binding(0)
    for r in T.serial(rounds):
        partner = tx ^ (1 << r)
        for j in T.serial(2):
            other[j] = T.tvm_warp_shuffle(0xFFFFFFFF, vals[j], partner, 8, 8)
            vals[j] = T.if_then_else((tx >> r) & 1 == 0, vals[j] + other[j], other[j] - vals[j])


@tilelang_mini.jit
def walsh_rows(X):
    """A Walsh-Hadamard transform of each 16-wide row: 8 threads hold 2 elements each, the
    in-thread pair first, then butterflies across the threads through warp shuffles."""
    M = T.const("M")
    X: T.Tensor((M, 16), T.float32)
    Y = T.empty((M, 16), T.float32)
    with T.Kernel(M, threads=8) as bx:
        tx = T.get_thread_binding()
        vals = T.alloc_local((2,), T.float32)
        other = T.alloc_local((2,), T.float32)
        for i in T.vectorized(2):
            vals[i] = X[bx, tx * 2 + i]
        vals[0] = vals[0] + vals[1]
        vals[1] = vals[0] - 2 * vals[1]
        butterfly(vals, other, 3)
        for i in T.vectorized(2):
            Y[bx, tx * 2 + i] = vals[i]
    return Y


def test_warp_shuffle_butterflies(target, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    h = np.array([[1.0]])
    while h.shape[0] < 16:
        h = np.block([[h, h], [h, -h]])
    x = rand((3, 16), seed=4)
    want = f64(x) @ h
    run_and_simulate(walsh_rows, [x], want, 16)


@tilelang_mini.jit
def scaled_rows(X):
    """TileLang's `T.thread_binding(0, n, thread="threadIdx.y")` as a value: a thread index."""
    M = T.const("M")
    X: T.Tensor((M, 8), T.float32)
    Y = T.empty((M, 8), T.float32)
    with T.Kernel(M // 4, threads=(8, 4)) as bx:
        c = T.thread_binding(0, 8, thread="threadIdx.x")
        r = T.thread_binding(0, 4, thread="threadIdx.y")
        Y[bx * 4 + r, c] = X[bx * 4 + r, c] * T.cast(r + 1, T.float32)
    return Y


def test_thread_binding_values(target, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    x = rand((8, 8), seed=5)
    want = f64(x) * (np.arange(8) % 4 + 1)[:, None]
    run_and_simulate(scaled_rows, [x], want)


ERROR_KERNEL = """
import tilelang_mini.language as T
def kernel(X):
    N = T.const("N")
    X: T.Tensor((N, 8), T.float32)
    Y = T.empty((N, 8), T.float32)
    with T.Kernel(1, threads={threads}) as _:
        tx = T.get_thread_binding()
{body}
    return Y
"""

# (name, threads=, kernel body lines, the line the error points at, what the message says)
ERRORS = [
    ("wrong_extent", "(N, 2)", ['r = T.thread_binding(0, 4, thread="threadIdx.y")',
                                "Y[r, 0] = X[r + 1, 0]"],
     'T.thread_binding(0, 4, thread="threadIdx.y")', "threadIdx.y has extent 2"),
    ("region", "N", ["t = T.alloc_fragment((8,), T.float32)", "T.copy(X[tx, :], t)",
                     "T.copy(t, Y[0, :])"], "T.copy(X[tx, :], t)", "region depends on the thread"),
    ("trip_count", "N", ["for i in T.serial(tx + 1):", "    Y[tx, i] = X[tx, i]"],
     "T.serial(tx + 1)", "trip count depends on the thread"),
    ("tile_op_under_condition", "N", ["t = T.alloc_fragment((8,), T.float32)", "if tx < 3:",
                                      "    T.fill(t, 1.0)", "Y[tx, 0] = t[0]"],
     "if tx < 3", "tile operation under a per-thread"),
]


@pytest.mark.parametrize("name, threads, body, where, what", ERRORS, ids=[e[0] for e in ERRORS])
def test_no_lockstep_meaning_is_a_located_error(name, threads, body, where, what):
    import linecache
    src = ERROR_KERNEL.format(threads=threads, body="\n".join(" " * 8 + ln for ln in body))
    fname = f"<simt-{name}>"
    linecache.cache[fname] = (len(src), None, src.splitlines(True), fname)
    ns = {}
    exec(compile(src, fname, "exec"), ns)
    with pytest.raises(CompileError) as info:
        tilelang_mini.jit(ns["kernel"])(np.zeros((16, 8), np.float32))
    err = info.value
    assert err.loc.file == fname, str(err)
    assert where in str(err).split("\n")[1], str(err)
    assert what in err.message, err.message


@tilelang_mini.jit
def swap_pairs(X):
    """A name bound to a per-thread value and read after a write to what it read (TileLang's
    let): each thread keeps its own value (a hidden per-thread tile)."""
    N = T.const("N")
    X: T.Tensor((N,), T.float32)
    Y = T.empty((N,), T.float32)
    with T.Kernel(1, threads=N // 2) as _:
        tx = T.get_thread_binding()
        s = T.alloc_shared((N,), T.float32)
        for i in T.serial(2):
            s[tx * 2 + i] = X[tx * 2 + i]
        v = s[tx * 2]
        s[tx * 2] = s[tx * 2 + 1]
        s[tx * 2 + 1] = v
        for i in T.serial(2):
            Y[tx * 2 + i] = s[tx * 2 + i]
    return Y


def test_per_thread_let(target, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    x = rand((16,), seed=6)
    want = f64(x).reshape(8, 2)[:, ::-1].reshape(16)
    run_and_simulate(swap_pairs, [x], want)


@tilelang_mini.jit
def per_thread_vars(X):
    """T.alloc_var scalars: `total` keeps a value all threads share (one scalar of the block),
    `acc` and `k` are written per thread (one per thread), `T.clear`/`+=`/`x[0] =` forms."""
    N = T.const("N")
    X: T.Tensor((N, 4), T.float32)
    Y = T.empty((N,), T.float32)
    with T.Kernel(1, threads=N) as _:
        tx = T.get_thread_binding()
        total = T.alloc_var(T.float32)
        acc = T.alloc_var(T.float32)
        k = T.alloc_var(T.int32, init=0)
        total = X[0, 0]
        T.clear(acc)
        for j in T.serial(4):
            acc += X[tx, j]
        k[0] = tx % 2
        if k == 1:
            acc = acc * 2.0
        Y[tx] = acc + total
    return Y


def test_per_thread_alloc_var(target, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    x = rand((8, 4), seed=7)
    want = f64(x).sum(1) * np.where(np.arange(8) % 2 == 1, 2.0, 1.0) + f64(x)[0, 0]
    run_and_simulate(per_thread_vars, [x], want, 4)


@tilelang_mini.jit
def compact_positive(X):
    """Stream compaction with per-thread `return_prev` atomics (each thread gets its own slot),
    a per-thread `break`, and one element several threads may write (`last = tx`)."""
    N = T.const("N")
    X: T.Tensor((N,), T.float32)
    Y = T.empty((N,), T.float32)
    C = T.empty((2,), T.int32)
    with T.Kernel(1, threads=N) as _:
        tx = T.get_thread_binding()
        count = T.alloc_shared((1,), T.int32)
        last = T.alloc_shared((1,), T.int32)
        pos = T.alloc_var(T.int32)
        count[0] = 0
        last[0] = -1
        Y[tx] = 0.0
        for r in T.serial(4):
            if r > 0:
                break
            if X[tx] > 0:
                pos = T.atomic_add(count[0], 1, return_prev=True)
                Y[pos] = X[tx]
                last[0] = tx
        C[0] = count[0]
        C[1] = last[0]
    return Y, C


def test_per_thread_atomic_values(target, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    x = rand((16,), seed=9)
    pos = x[x > 0]
    k = len(pos)
    y, c = compact_positive(x)
    assert c.tolist() == [k, int(np.nonzero(x > 0)[0].max())]
    close(np.sort(y[:k]), np.sort(f64(pos)))  # the slots' order is the threads' race
    assert not y[k:].any()
    kern, args = compact_positive.kernel_for(x)
    (ys, cs), _ = kern.simulate(*args)
    assert cs.tolist() == c.tolist()
    close(np.sort(ys[:k]), np.sort(f64(pos)))


@tilelang_mini.jit
def thread_index_stored(X):
    """The thread index stored before any other per-thread use: into an alloc_var (`s = tx`)
    and into a local tile (`t[0] = tx`); both make the code per-thread (a Python TypeError in
    the first trace before)."""
    N = T.const("N")
    X: T.Tensor((N,), T.float32)
    Y = T.empty((N,), T.float32)
    with T.Kernel(1, threads=N) as _:
        tx = T.get_thread_binding(0)
        s = T.alloc_var(T.int32)
        t = T.alloc_local((1,), T.int32)
        s = tx
        t[0] = tx
        Y[s] = X[t[0]] * 2.0 + t[0]
    return Y


def test_thread_index_stored_in_a_scalar(target, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    x = rand((32,), seed=11)
    run_and_simulate(thread_index_stored, [x], f64(x) * 2.0 + np.arange(32))


@tilelang_mini.jit
def reset_positive(X):
    """A per-thread condition that reads what its branch writes: each thread evaluates it once,
    before the branch (as a GPU thread does), so the second statement of the branch still runs
    where the first cleared s[tx] (it was a located error before)."""
    N = T.const("N")
    X: T.Tensor((N, 8), T.float32)
    Y = T.empty((N, 8), T.float32)
    with T.Kernel(1, threads=N) as _:
        tx = T.get_thread_binding()
        s = T.alloc_shared((N,), T.float32)
        s[tx] = X[tx, 0]
        Y[tx, 1] = 0.0
        if s[tx] > 0:
            s[tx] = 0.0
            Y[tx, 1] = 1.0 + s[tx]
        Y[tx, 0] = s[tx]
    return Y


def test_condition_reading_its_branch_writes(target, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    x = rand((16, 8), seed=12)
    pos = f64(x)[:, 0] > 0
    want = np.zeros((16, 8))
    want[:, 0] = np.where(pos, 0.0, f64(x)[:, 0])
    want[:, 1] = np.where(pos, 1.0, 0.0)
    y = np.asarray(reset_positive(x))
    close(y[:, :2], want[:, :2])
    kern, args = reset_positive.kernel_for(x)
    close(np.asarray(kern.simulate(*args)[0])[:, :2], want[:, :2])


@tilelang_mini.jit
def sum_until_over(X, lim: float):
    """A per-thread `break` (each row's own element over `lim` ends its loop): the hidden
    break flag is per thread and its guard reads it before the branch that sets it (fuzz
    family simt: a located error about 'break_flag' before)."""
    N, C = T.const("N, C")
    X: T.Tensor((N, C), T.float32)
    Y = T.empty((N,), T.float32)
    with T.Kernel(1, threads=N) as _:
        tx = T.get_thread_binding()
        acc = T.alloc_local((1,), T.float32)
        T.clear(acc)
        for k in T.serial(C):
            if X[tx, k] > lim:
                break
            acc[0] += X[tx, k]
        Y[tx] = acc[0]
    return Y


def test_per_thread_break(target, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    x = f64(rand((16, 9), seed=13))
    want = np.array([sum(row[:np.argmax(np.append(row > 0.5, True))]) for row in x])
    x = x.astype(np.float32)
    run_and_simulate(sum_until_over, [x, 0.5], want, 9)


@tilelang_mini.jit
def keyed_sums(K, X, NB: int):
    """Per-thread atomics into GM (TileLang's per-thread atomicAdd of a global element): a
    histogram of the keys and, under a per-thread `if`, a sum per key, the key read from GM
    (fuzz family simt: a located 'region depends on the thread index' error before)."""
    N = T.const("N")
    K: T.Tensor((N,), T.int32)
    X: T.Tensor((N,), T.float32)
    H = T.empty((NB,), T.int32)
    S = T.empty((NB,), T.float32)
    with T.Kernel(T.ceildiv(N, 8), threads=8) as bx:
        tx = T.get_thread_binding()
        row = bx * 8 + tx
        if row < N:
            T.atomic_add(H[K[row]], 1)
            if X[row] > 0:
                T.atomic_add(S[K[row]], X[row] * 2.0)
    return H, S


def test_per_thread_atomics_into_gm(target, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    rng = np.random.default_rng(14)
    k = rng.integers(0, 5, 21).astype(np.int32)
    x = rand((21,), seed=15)
    want_h = np.bincount(k, minlength=5)
    want_s = np.zeros(5)
    np.add.at(want_s, k[x > 0], 2.0 * f64(x)[x > 0])
    h, s = keyed_sums(k, x, 5)
    assert h.tolist() == want_h.tolist()
    close(s, want_s, reduce_len=21)
    kern, args = keyed_sums.kernel_for(k, x, 5)
    (h, s), _ = kern.simulate(*args)
    assert h.tolist() == want_h.tolist()
    close(s, want_s, reduce_len=21)
