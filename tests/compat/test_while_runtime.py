"""`while` on a run-time condition (TileLang's stream-K GEMM, `while start_iter[0] < last_iter:`,
and the AMD flash attention's `while bx < num_q_blocks:`): an IR `while` loop whose condition is
read before every trip, with tile ops, cube and vector work and flags inside. Both targets and
the simulator, against float64 NumPy references written as the Python loops they mean."""
import numpy as np
import pytest

import tilelang_mini
import tilelang_mini.language as T
from tilelang_mini import CompileError, parse_ir

from util import close, f64, rand


@tilelang_mini.jit
def halvings(X, limit: float):
    """Per element: how many halvings bring X[r] to at most `limit` (a data-dependent count)."""
    M = T.const("M")
    X: T.Tensor((M,), T.float32)
    C = T.empty((M,), T.int32)
    with T.Kernel(1) as _:
        v = T.alloc_var(T.float32)
        n = T.alloc_var(T.int32)
        for r in T.serial(M):
            v = X[r]
            n = 0
            while v > limit:
                v = v * 0.5
                n = n + 1
            C[r] = n
    return C


def halvings_ref(x, limit):
    out = []
    for v in x.astype(np.float64):
        n = 0
        while v > limit:
            v, n = v * 0.5, n + 1
        out.append(n)
    return np.array(out)


def test_data_dependent_count(target, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    x = np.abs(rand((16,), seed=3)) * 4
    want = halvings_ref(x, 1.0)
    assert want.min() == 0 and want.max() >= 4  # some rows loop, some do not
    assert halvings(x, 1.0).tolist() == want.tolist()
    kern, args = halvings.kernel_for(x, 1.0)
    got, report = kern.simulate(*args)
    assert got.tolist() == want.tolist()


def ragged_gemm(M, N, K, bm=16, bn=32, bk=32):
    """Stream-K's shape: each block walks its K range [Lo[bx], Hi[bx]) in chunks of bk with a
    `while` over a variable (a tile GEMM per trip, then a vector epilogue per trip), so the trip
    count is read from data and cube and vector work both sit inside the loop."""
    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
             Lo: T.Tensor((M // bm,), T.int32), Hi: T.Tensor((M // bm,), T.int32),
             C: T.Tensor((M, N), T.float32)):
        with T.Kernel(M // bm) as bx:
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            C_f = T.alloc_fragment((bm, bn), "float32")
            acc = T.alloc_fragment((bm, bn), "float32")
            k = T.alloc_var(T.int32)
            for j in T.serial(N // bn):
                T.clear(acc)
                k = Lo[bx]
                while k < Hi[bx]:
                    T.copy(A[bx * bm, k], A_s)
                    T.copy(B[k, j * bn], B_s)
                    T.gemm(A_s, B_s, C_f, clear_accum=True)
                    for i, c in T.Parallel(bm, bn):
                        acc[i, c] += C_f[i, c] * 0.5
                    k = k + bk
                T.copy(acc, C[bx * bm, j * bn])
    return main


def ragged_ref(a, b, lo, hi, bm):
    c = np.zeros((a.shape[0], b.shape[1]))
    for r, (l, h) in enumerate(zip(lo, hi)):
        k = l
        while k < h:
            c[r * bm:(r + 1) * bm] += 0.5 * f64(a[r * bm:(r + 1) * bm, k:k + 32]) @ f64(b[k:k + 32])
            k += 32
    return c


def test_tile_ops_in_the_loop(target):
    M, N, K = 64, 64, 192
    a, b = rand((M, K), "float16", seed=1), rand((K, N), "float16", seed=2)
    lo = np.array([0, 32, 64, 160], np.int32)
    hi = np.array([96, 32, 192, 192], np.int32)   # 3, 0, 4 and 1 trips
    kern = tilelang_mini.compile(ragged_gemm(M, N, K), out_idx=[-1], target=target)
    want = ragged_ref(a, b, lo, hi, 16)
    close(kern(a, b, lo, hi), want, reduce_len=K)
    if target == "numpy":
        got, report = kern.simulate(a, b, lo, hi)
        close(got, want, reduce_len=K)
        assert kern.estimate(args=[a, b, lo, hi, np.zeros((M, N), np.float32)]).time_us > 0


@tilelang_mini.jit
def first_above(X, t: float):
    """Index of the first X[i] above t (N when none): `while True` left by a run-time break."""
    N = T.const("N")
    X: T.Tensor((N,), T.float32)
    Y = T.empty((1,), T.int32)
    with T.Kernel(1) as _:
        i = T.alloc_var(T.int32)
        i = 0
        while True:
            if i >= N:
                break
            if X[i] > t:
                break
            i = i + 1
        Y[0] = i
    return Y


@pytest.mark.parametrize("t", [2.0, 0.5, 100.0])
def test_while_true_with_break(target, monkeypatch, t):
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    x = rand((32,), seed=5)
    above = np.nonzero(x.astype(np.float64) > t)[0]
    want = int(above[0]) if len(above) else 32
    assert int(first_above(x, t)[0]) == want
    kern, args = first_above.kernel_for(x, t)
    got, _ = kern.simulate(*args)
    assert int(got[0]) == want


def shrink(R, C, limit):
    """Vector tile work in a loop whose condition reads a reduced tile (a value the vector
    pipe computes, read by the scalar unit before every trip): halve a block's rows until row
    0's largest magnitude is at most `limit`, counting the trips."""
    @T.prim_func
    def main(X: T.Tensor((4 * R, C), T.float32), Y: T.Tensor((4 * R, C), T.float32),
             Trips: T.Tensor((4,), T.int32)):
        with T.Kernel(4) as bx:
            x = T.alloc_fragment((R, C), "float32")
            m = T.alloc_fragment((R,), "float32")
            n = T.alloc_var(T.int32)
            T.copy(X[bx * R, 0], x)
            T.reduce_absmax(x, m, dim=1)
            n = 0
            while m[0] > limit:
                for i, j in T.Parallel(R, C):
                    x[i, j] = x[i, j] * 0.5
                T.reduce_absmax(x, m, dim=1)
                n = n + 1
            T.copy(x, Y[bx * R, 0])
            Trips[bx] = n
    return main


def shrink_ref(x, R, limit):
    y, trips = x.astype(np.float64).copy(), []
    for b in range(4):
        rows, n = y[b * R:(b + 1) * R], 0
        while np.abs(rows[0]).max() > limit:
            rows *= 0.5
            n += 1
        trips.append(n)
    return y, np.array(trips)


def test_condition_on_a_vector_tile(target):
    R, C = 16, 32
    x = rand((4 * R, C), seed=7) * 8
    x[2 * R] *= 0.01   # block 2 needs no trip
    want_y, want_n = shrink_ref(x, R, 1.0)
    assert want_n[2] == 0 and want_n.max() >= 3
    kern = tilelang_mini.compile(shrink(R, C, 1.0), out_idx=[1, 2], target=target)
    y, n = kern(x)
    close(y, want_y)
    assert n.tolist() == want_n.tolist()
    if target == "numpy":
        (y, n), _ = kern.simulate(x)
        close(y, want_y)
        assert n.tolist() == want_n.tolist()


def test_ir_text_round_trip():
    kern = tilelang_mini.compile(ragged_gemm(64, 64, 192), out_idx=[-1], target="numpy")
    assert "while k[0] < Hi[bx]:" in kern.get_ir("frontend")
    for stage in kern.compilation.stages.values():
        assert parse_ir(str(stage)) == stage
    lowered = list(kern.compilation.stages.values())[-1]
    assert "while k[0] < Hi[cid]:" in str(lowered)


def check_error(fn, args: tuple, line: str, *phrases) -> None:
    """Calling kernel `fn` on `args` is a CompileError at the source line `line` of this file,
    its message holding `phrases` and no compiler file."""
    with pytest.raises(CompileError) as info:
        tilelang_mini.jit(fn)(*args)
    err = info.value
    assert err.loc.file == __file__ and "tilelang_mini" not in str(err)
    assert str(err).split("\n")[1].strip() == line
    for p in phrases:
        assert p in err.message


def test_a_trace_time_value_carried_across_trips_is_a_located_error():
    def kernel(N):
        N: T.Tensor((1,), T.int32)
        Y = T.empty((1,), T.int32)
        with T.Kernel(1) as _:
            i = 0
            while i < N[0]:
                i = i + 1
            Y[0] = i
        return Y
    check_error(kernel, (np.array([3], np.int32),), "while i < N[0]:",
                "body binds `i` anew", "T.alloc_var")


def test_while_in_parallel_is_a_located_error():
    def kernel(X):
        X: T.Tensor((16,), T.float32)
        Y = T.empty((16,), T.float32)
        with T.Kernel(1) as _:
            y = T.alloc_fragment((16,), T.float32)
            T.copy(X, y)
            for i in T.Parallel(16):
                while y[i] > 1.0:
                    y[i] = y[i] * 0.5
            T.copy(y, Y)
        return Y
    check_error(kernel, (np.ones(16, np.float32),), "while y[i] > 1.0:",
                "T.Parallel")


def test_trace_time_while_still_unrolls():
    @tilelang_mini.jit
    def powers(X):
        X: T.Tensor((8,), T.float32)
        Y = T.empty((8,), T.float32)
        with T.Kernel(1) as _:
            y = T.alloc_fragment((8,), T.float32)
            T.copy(X, y)
            k = 1
            while k < 8:          # a Python loop: three copies of its body
                for i in T.Parallel(8):
                    y[i] = y[i] * 2.0
                k *= 2
            T.copy(y, Y)
        return Y
    x = rand((8,), seed=9)
    close(powers(x), f64(x) * 8)
    ir = powers.kernel_for(x)[0].get_ir("frontend")
    assert not any(line.strip().startswith("while") for line in ir.splitlines())


TMAX, W = 6, 64


def prefetch_while():
    """Expert mode, hand-set flags in a `while` loop (the stream-K walk with a prefetch of
    the next row under `if t + 1 < n`): check_sync walks it as a loop of unknown trip count."""
    @T.prim_func
    def main(X: T.Tensor((2, TMAX, W), T.float32), N: T.Tensor((1,), T.int32),
             Y: T.Tensor((2, W), T.float32)):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            buf = T.alloc_ub([W], "float32")
            acc = T.alloc_ub([W], "float32")
            t = T.alloc_var("int32")
            with T.Scope("V"):
                T.tile.fill(acc, 0.0)
                T.copy(X[vid, 0, :], buf)
                T.set_flag("mte2", "v", 0)
                t = 0
                while t < N[0]:
                    T.wait_flag("mte2", "v", 0)
                    T.tile.add(acc, acc, buf)
                    T.set_flag("v", "mte2", 1)
                    T.wait_flag("v", "mte2", 1)
                    T.copy(X[vid, T.min(t + 1, TMAX - 1), :], buf)
                    T.set_flag("mte2", "v", 0)
                    t = t + 1
                T.wait_flag("mte2", "v", 0)
                T.set_flag("v", "mte3", 2)
                T.wait_flag("v", "mte3", 2)
                T.copy(acc, Y[vid, :])
    return main


@pytest.mark.parametrize("n", [0, 1, 5])
def test_hand_set_flags_in_the_loop(target, n):
    x = rand((2, TMAX, W), seed=n)
    want = f64(x)[:, :n].sum(1)
    kernel = tilelang_mini.compile(prefetch_while(), out_idx=[2], target=target)
    close(np.asarray(kernel(x, np.array([n], np.int32))), want, reduce_len=max(n, 1))
    if target == "numpy":
        got, _ = kernel.simulate(x, np.array([n], np.int32))
        close(np.asarray(got), want, reduce_len=max(n, 1))


def test_hand_set_flags_in_the_loop_are_still_checked(tmp_path):
    """A race inside the while loop (the add reads buf before the wait) is reported."""
    import importlib.util
    import inspect
    import textwrap
    code = textwrap.dedent(inspect.getsource(prefetch_while))
    swapped = code.replace(
        '                    T.wait_flag("mte2", "v", 0)\n                    T.tile.add(acc, acc, buf)',
        '                    T.tile.add(acc, acc, buf)\n                    T.wait_flag("mte2", "v", 0)')
    assert swapped != code
    path = tmp_path / "racy.py"
    path.write_text("import tilelang_mini.language as T\nTMAX, W = 6, 64\n\n" + swapped)
    spec = importlib.util.spec_from_file_location("racy", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with pytest.raises(CompileError, match="race on buf"):
        tilelang_mini.compile(mod.prefetch_while(), out_idx=[2], target="numpy")


@tilelang_mini.jit
def strided_rows(X, N):
    """Per-thread (SIMT) code in a block-uniform `while`: each trip the 32 threads double one
    row of 32 elements."""
    X: T.Tensor((128,), T.float32)
    N: T.Tensor((1,), T.int32)
    Y = T.empty((128,), T.float32)
    with T.Kernel(1, threads=32) as _:
        tx = T.get_thread_binding()
        s = T.alloc_var(T.int32)
        s = 0
        while s < N[0]:
            Y[s * 32 + tx] = X[s * 32 + tx] * 2.0
            s = s + 1
    return Y


def test_per_thread_code_in_the_loop(target, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    x = rand((128,), seed=11)
    want = np.zeros(128)
    want[:96] = 2 * f64(x)[:96]
    close(strided_rows(x, np.array([3], np.int32)), want)


def test_per_thread_condition_is_a_located_error():
    def kernel(X):
        X: T.Tensor((128,), T.float32)
        Y = T.empty((128,), T.float32)
        with T.Kernel(1, threads=32) as _:
            tx = T.get_thread_binding()
            s = T.alloc_var(T.int32)
            s = tx + 0
            while s < 128:
                Y[s] = X[s]
                s = s + 32
        return Y
    check_error(kernel, (np.zeros(128, np.float32),), "while s < 128:",
                "trip count depends on the thread index")


def test_a_name_for_data_the_body_writes_is_a_located_error():
    def kernel(X):
        X: T.Tensor((8,), T.float32)
        Y = T.empty((8,), T.float32)
        with T.Kernel(1) as _:
            x = T.alloc_fragment((8,), T.float32)
            T.copy(X, x)
            v = x[0]
            while v > 1.0:
                x[0] = x[0] * 0.5
            T.copy(x, Y)
        return Y
    check_error(kernel, (np.zeros(8, np.float32),), "while v > 1.0:",
                "a name is not a copy of the value")


def test_cube_work_under_a_vector_tile_condition_is_a_located_error():
    """The cube core runs the loop too, and cannot read a tile the vector core computes."""
    def kernel(A, B):
        A: T.Tensor((16, 32), T.float16)
        B: T.Tensor((32, 32), T.float16)
        C = T.empty((16, 32), T.float32)
        with T.Kernel(1) as _:
            A_s = T.alloc_shared((16, 32), T.float16)
            B_s = T.alloc_shared((32, 32), T.float16)
            C_f = T.alloc_fragment((16, 32), T.float32)
            m = T.alloc_fragment((16,), T.float32)
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.fill(m, 2.0)
            while m[0] > 1.0:
                T.gemm(A_s, B_s, C_f, clear_accum=True)
                T.reduce_absmax(C_f, m, dim=1)
            T.copy(C_f, C)
        return C
    check_error(kernel, (np.zeros((16, 32), np.float16), np.zeros((32, 32), np.float16)),
                "while m[0] > 1.0:", "its condition reads 'm', a vector-core tile")


def test_estimate_counts_the_trips():
    """The estimate runs the loop on the scalars it tracks (the arguments, `alloc_var`
    counters): more trips, more cycles; zero-filled arguments, no trip."""
    M, N, K = 64, 64, 192
    kern = tilelang_mini.compile(ragged_gemm(M, N, K), out_idx=[-1], target="numpy")
    a, b = np.zeros((M, K), np.float16), np.zeros((K, N), np.float16)
    c, lo = np.zeros((M, N), np.float32), np.zeros(4, np.int32)
    cycles = [kern.estimate(args=[a, b, lo, np.full(4, hi, np.int32), c]).cycles
              for hi in (0, 32, 96, 192)]
    assert cycles == sorted(set(cycles))   # strictly more with every trip added
    assert kern.estimate().cycles == cycles[0]


@T.prim_func
def grow(X: T.Tensor((64, 32), T.float32), Y: T.Tensor((64, 32), T.float32)):
    """Double a block's 16 rows until row 0's largest magnitude reaches 1: the tiles would
    split by rows between the two vector cores, but the loop's condition reads one row, so the
    work stays whole on AIV 0 and so does the loop (AIV 1 has no such row)."""
    with T.Kernel(4) as bx:
        x = T.alloc_fragment((16, 32), T.float32)
        m = T.alloc_fragment((16,), T.float32)
        T.copy(X[bx * 16, 0], x)
        T.reduce_absmax(x, m, dim=1)
        while m[0] < 1.0:
            for i, j in T.Parallel(16, 32):
                x[i, j] = x[i, j] * 2.0
            T.reduce_absmax(x, m, dim=1)
        T.copy(x, Y[bx * 16, 0])


def grow_ref(x):
    want = f64(x).copy()
    for blk in range(4):
        while np.abs(want[blk * 16]).max() < 1.0:
            want[blk * 16:(blk + 1) * 16] *= 2
    return want


def test_condition_on_a_row_of_a_tile(target):
    x = rand((64, 32), seed=4) * 0.01
    x[16] *= 100   # block 1 needs no trip
    kern = tilelang_mini.compile(grow, out_idx=[1], target=target)
    close(kern(x), grow_ref(x))
    if target == "numpy":
        got, _ = kern.simulate(x)
        close(got, grow_ref(x))


def test_if_on_a_row_of_a_tile(target):
    """The same for an `if` (before: the tiles were split by rows and each vector core
    decided on its own half's row 0, a silently wrong result)."""
    @T.prim_func
    def once(X: T.Tensor((64, 32), T.float32), Y: T.Tensor((64, 32), T.float32)):
        with T.Kernel(4) as bx:
            x = T.alloc_fragment((16, 32), T.float32)
            m = T.alloc_fragment((16,), T.float32)
            T.copy(X[bx * 16, 0], x)
            T.reduce_absmax(x, m, dim=1)
            if m[0] < 1.0:
                for i, j in T.Parallel(16, 32):
                    x[i, j] = x[i, j] * 2.0
            T.copy(x, Y[bx * 16, 0])

    x = rand((64, 32), seed=6)
    x[16] *= 0.01
    want = f64(x).copy()
    for blk in range(4):
        if np.abs(want[blk * 16]).max() < 1.0:
            want[blk * 16:(blk + 1) * 16] *= 2
    assert not np.allclose(want, f64(x))
    close(tilelang_mini.compile(once, out_idx=[1], target=target)(x), want)


def test_estimate_of_a_condition_on_computed_data_is_a_located_error():
    """A condition that reads what the vector unit computes never changes in the data-free
    estimate: after MAX_WHILE_TRIPS trips it is a located error, not a hang."""
    from tilelang_mini.sim.timing import MAX_WHILE_TRIPS
    kern = tilelang_mini.compile(grow, out_idx=[1], target="numpy")
    with pytest.raises(CompileError) as info:
        kern.estimate()
    err = info.value
    assert err.loc.file == __file__ and str(err).split("\n")[1].strip() == "while m[0] < 1.0:"
    assert f"ran {MAX_WHILE_TRIPS} trips in the estimate" in err.message


def test_a_trace_time_break_counter_is_a_located_error():
    """`while True:` left by a `break` on a Python counter: the counter is bound anew under
    the break's guard (before: the run-time loop ran its first trip's body for ever)."""
    def kernel(X):
        X: T.Tensor((8,), T.float32)
        Y = T.empty((8,), T.float32)
        with T.Kernel(1) as _:
            y = T.alloc_fragment((8,), T.float32)
            T.copy(X, y)
            i = 0
            while True:
                if i == 3:
                    break
                for j in T.Parallel(8):
                    y[j] = y[j] * 2.0
                i = i + 1
            T.copy(y, Y)
        return Y
    check_error(kernel, (np.ones(8, np.float32),), "while True:", "body binds `i` anew",
                "i = T.alloc_var(T.int32)")
