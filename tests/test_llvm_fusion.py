"""Row interleaving of row-local vector-core tile ops (the llvm target's fuse_rows pass,
transform/cpu_rows.py, and the row pairs of backends/llvm/rowpass.py): which runs are fused, and that fused kernels compute what the NumPy interpreter computes."""
# No `from __future__ import annotations`: the frontend reads T.Tensor annotations as objects.
import sys
from pathlib import Path

import numpy as np
import pytest

import tilelang_mini
from backends.llvm import BACKEND
from backends.numpy import BACKEND as NUMPY
from irbuild import add, c, full, mul, reg, v
from tilelang_mini.runtime.kernel import pass_options
from tilelang_mini.transform.pipeline import Options, run_target_passes
from tilelang_mini.ir.nodes import (
    Alloc, BinOp, Buffer, Call, Copy, Fill, For, Kernel, Load, PipeBarrier, Reduce, Scope, SetFlag,
    Store, WaitFlag,
)



RNG = np.random.default_rng(7)


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture
def runs(monkeypatch):
    """The working-statement counts of the row loops fuse_rows makes (one list per compile)."""
    from tilelang_mini.transform import cpu_rows
    seen: list = []
    loop = cpu_rows._Rows.loop

    def spy(self, run, accs):
        out = loop(self, run, accs)
        if len(out) == 1 and out[0] is not run[0]:
            away = {id(r) for r in self.fused.values()}
            seen.append(len([s for s in run if id(s) not in away]))
        return out

    monkeypatch.setattr(cpu_rows._Rows, "loop", spy)
    return seen


def llvm_passes(k):
    """Lowered IR `k` after the llvm target's own passes (what its backend receives)."""
    return run_target_passes(k, pass_options(Options(target="llvm")), verify=True)


def npu_kernel(params, body, blocks):
    return Kernel("k", tuple(params), (blocks,), ("cid", "vid"), tuple(body), True)


def check(k, *args):
    """Run on llvm and on the interpreter; llvm's outputs must match (float32 sums of rows
    summed in another order differ by a few ulps of the largest value, hence the scaled atol)."""
    ref = [a.copy() for a in args]
    NUMPY.run(NUMPY.lower(k, {}), ref)
    BACKEND.run(BACKEND.lower(llvm_passes(k), {}), list(args))
    for got, want in zip(args, ref):
        scale = max(1.0, float(np.abs(want).max(initial=0.0)))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6 * scale)


R, N = 4, 40   # rows per vector core, columns (not a multiple of the vector length)


def _tiles(dtype="float32"):
    return (Buffer("x", (R, N), dtype, "UB"), Buffer("e", (R, N), "float32", "UB"),
            Buffer("s", (R,), "float32", "UB"), Buffer("t", (R, 1), "float32", "UB"))


def _rows(M):
    return add(mul(v("cid"), c(2 * R)), mul(v("vid"), c(R)))


def test_softmax_like_run_is_fused_and_matches_numpy(runs):
    M = 3 * 2 * R - 3   # the last block's rows are clipped at the tensor's end
    X, Y = Buffer("X", (M, N), "float32"), Buffer("Y", (M, N), "float32")
    S = Buffer("S", (M,), "float32")
    x, e, s, t = _tiles()
    i, j = v("i"), v("j")
    body = [Alloc(x), Alloc(e), Alloc(s), Alloc(t), Scope("V", (
        Copy(reg(X, (_rows(M), 0), (R, N)), full(x)),
        SetFlag("MTE2", "V", 0), WaitFlag("MTE2", "V", 0),
        Reduce("max", full(x), full(s), 1),
        PipeBarrier("V"),
        For(("i", "j"), (c(R), c(N)), "parallel", (
            Store(e, (i, j), Call("exp", (BinOp("-", Load(x, (i, j)), Load(s, (i,))),))),)),
        Fill(full(t), c(0.5)),
        Reduce("sum", full(e), full(t), -1, clear=False),
        For(("i",), (c(R),), "parallel", (
            Store(s, (i,), BinOp("/", c(1.0), Load(t, (i, c(0))))),
            Store(t, (i, c(0)), mul(Load(s, (i,)), c(2.0))))),
        For(("i", "j"), (c(R), c(N)), "parallel", (
            Store(e, (i, j), mul(Load(e, (i, BinOp("-", c(N - 1), j))), Load(s, (i,)))),)),
        Copy(full(e), reg(Y, (_rows(M), 0), (R, N))),
        Copy(reg(t, (0, 0), (R, 1)), reg(S, (_rows(M),), (R,))),
    ))]
    k = npu_kernel((X, Y, S), body, 3)
    check(k, RNG.standard_normal((M, N)).astype(np.float32), np.zeros((M, N), np.float32),
          np.zeros(M, np.float32))
    assert runs == [8]   # everything after the copy-in (which stays a whole-tile copy)


def test_cross_row_reads_split_the_run(runs):
    X, Y = Buffer("X", (2 * R, N), "float32"), Buffer("Y", (2 * R, N), "float32")
    x, e, s, _ = _tiles()
    i, j = v("i"), v("j")
    nxt = BinOp("%", add(i, c(1)), c(R))
    body = [Alloc(x), Alloc(e), Alloc(s), Scope("V", (
        Copy(reg(X, (_rows(0), 0), (R, N)), full(x)),
        For(("i", "j"), (c(R), c(N)), "parallel", (Store(e, (i, j), mul(Load(x, (i, j)), c(3.0))),)),
        Reduce("sum", full(e), full(s), 1),
        # reads row i + 1 of e, which the run writes: a new run starts here
        For(("i", "j"), (c(R), c(N)), "parallel", (
            Store(x, (i, j), add(Load(e, (nxt, j)), Load(s, (i,)))),)),
        Copy(full(x), reg(Y, (_rows(0), 0), (R, N))),
    ))]
    k = npu_kernel((X, Y), body, 1)
    check(k, RNG.standard_normal((2 * R, N)).astype(np.float32), np.zeros((2 * R, N), np.float32))
    assert runs == [2, 2]


def test_overlapping_writes_of_one_tensor_are_not_interleaved(runs):
    M = 2 * R + 1
    X, Y = Buffer("X", (M, N), "float32"), Buffer("Y", (M, N), "float32")
    x, e, _, _ = _tiles()
    i, j = v("i"), v("j")
    body = [Alloc(x), Alloc(e), Scope("V", (
        Copy(reg(X, (_rows(M), 0), (R, N)), full(x)),
        For(("i", "j"), (c(R), c(N)), "parallel", (Store(e, (i, j), add(Load(x, (i, j)), c(1.0))),)),
        Copy(full(x), reg(Y, (_rows(M), 0), (R, N))),
        Copy(full(e), reg(Y, (add(_rows(M), c(1)), 0), (R, N))),   # overlaps rows of the first
    ))]
    k = npu_kernel((X, Y), body, 1)
    check(k, RNG.standard_normal((M, N)).astype(np.float32), np.zeros((M, N), np.float32))
    assert runs == [2]   # the map and the first copy-out; the second copy-out after them


def test_rows_of_other_tiles_and_gm_reads_are_not_row_local(runs):
    X, Y = Buffer("X", (2 * R, N), "float32"), Buffer("Y", (2 * R, N), "float32")
    big = Buffer("big", (2 * R, N), "float32", "UB")
    x, _, s, _ = _tiles()
    i, j = v("i"), v("j")
    body = [Alloc(x), Alloc(big), Alloc(s), Scope("V", (
        Copy(reg(X, (_rows(0), 0), (R, N)), full(x)),
        Fill(full(big), c(2.0)),
        # a map over R rows of a tile of 2R rows and one reading GM: "any" accesses
        For(("i", "j"), (c(R), c(N)), "parallel", (
            Store(big, (add(i, c(R)), j), add(Load(x, (i, j)), Load(X, (i, j)))),)),
        Reduce("sum", full(x), full(s), 1),
        Copy(reg(big, (R, 0), (R, N)), reg(Y, (_rows(0), 0), (R, N))),
    ))]
    k = npu_kernel((X, Y), body, 1)
    check(k, RNG.standard_normal((2 * R, N)).astype(np.float32), np.zeros((2 * R, N), np.float32))
    assert runs == [2]   # only the reduce and the copy-out (which reads big, not written there)


@pytest.mark.parametrize("example, shape", [("rmsnorm", (37, 300)), ("softmax", (37, 300))])
def test_lowered_examples_are_fused_and_match_numpy(runs, example, shape):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
    mod = __import__(example)
    factory = getattr(mod, {"rmsnorm": "rms_norm", "softmax": "softmax"}[example]).factory
    x = RNG.standard_normal(shape).astype(np.float32)
    outs = []
    for target in ("llvm", "numpy"):
        kern = tilelang_mini.compile(factory(*shape, blk_m=8), out_idx=[-1], target=target)
        outs.append(kern(x))
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-5, atol=1e-6)
    assert len(runs) == 1 and runs[0] >= 4


# ------------------------------------------------------- one pass per pair (rowpass.py)


@pytest.fixture
def pairs(monkeypatch):
    """The pairs emitted as one pass over a row: "in" (copy-in + map + reduce), "out"."""
    from backends.llvm import rowpass
    seen: list = []
    cin, cout = rowpass.copy_in_map_reduce, rowpass.map_copy_out

    def spy_in(*a):
        seen.append("in")
        return cin(*a)

    def spy_out(*a):
        seen.append("out")
        return cout(*a)

    monkeypatch.setattr(rowpass, "copy_in_map_reduce", spy_in)
    monkeypatch.setattr(rowpass, "map_copy_out", spy_out)
    return seen


def _rms_body(M, X, Y, x, e, s, tail=(), own=True):
    """copy-in, square (fused with its row sum), rsqrt, scale, copy-out."""
    i, j = v("i"), v("j")
    xij = Load(x, (i, j)) if own else Load(x, (i, BinOp("-", c(N - 1), j)))
    return [Alloc(x), Alloc(e), Alloc(s), Scope("V", (
        Copy(reg(X, (_rows(M), 0), (R, N)), full(x)),
        SetFlag("MTE2", "V", 0), WaitFlag("MTE2", "V", 0),
        For(("i", "j"), (c(R), c(N)), "parallel", (Store(e, (i, j), mul(xij, xij)),)),
        Reduce("sum", full(e), full(s), 1),
        For(("i",), (c(R),), "parallel", (
            Store(s, (i,), Call("rsqrt", (add(BinOp("/", Load(s, (i,)), c(float(N))),
                                              c(1e-6)),))),)),
        For(("i", "j"), (c(R), c(N)), "parallel", (
            Store(x, (i, j), mul(Load(x, (i, j)), Load(s, (i,)))),)),
        PipeBarrier("V"),
        Copy(full(x), reg(Y, (_rows(M), 0), (R, N))),
    ) + tuple(tail))]


@pytest.mark.parametrize("M", [3 * 2 * R, 3 * 2 * R - 3])   # rows clipped at the end, or not
def test_copy_in_and_copy_out_pairs_are_one_pass(runs, pairs, M):
    X, Y = Buffer("X", (M, N), "float32"), Buffer("Y", (M, N), "float32")
    x, e, s, _ = _tiles()
    k = npu_kernel((X, Y), _rms_body(M, X, Y, x, e, s), 3)
    check(k, RNG.standard_normal((M, N)).astype(np.float32), np.zeros((M, N), np.float32))
    assert runs == [5] and sorted(set(pairs)) == ["in", "out"]   # the copy-in joins the run


def test_clipped_rows_copy_through_the_general_copy_only(pairs, monkeypatch):
    """A paired row that clips (rows past the tensor's end) takes the unfused path, whose
    copies would test again whether the row is inside: that test is the fused pair's own,
    known false there, so they go straight to the general (masked) copy, without a second
    unmasked copy of the row that could never run; the results still match."""
    from backends.llvm import codegen_ops
    fast: list = []
    orig = codegen_ops._copy_fast

    def spy(g, s, *a):
        fast.append(s)
        return orig(g, s, *a)

    monkeypatch.setattr(codegen_ops, "_copy_fast", spy)
    M = 3 * 2 * R - 3
    X, Y = Buffer("X", (M, N), "float32"), Buffer("Y", (M, N), "float32")
    x, e, s, _ = _tiles()
    k = npu_kernel((X, Y), _rms_body(M, X, Y, x, e, s), 3)
    check(k, RNG.standard_normal((M, N)).astype(np.float32), np.zeros((M, N), np.float32))
    assert sorted(set(pairs)) == ["in", "out"]
    assert not [t for t in fast if {t.src.buffer.name, t.dst.buffer.name} & {"X", "Y"}]


def test_float16_tensors_pair_with_conversions(pairs):
    M = 2 * 2 * R - 1
    X, Y = Buffer("X", (M, N), "float16"), Buffer("Y", (M, N), "float16")
    x, e, s, _ = _tiles()
    k = npu_kernel((X, Y), _rms_body(M, X, Y, x, e, s), 2)
    ref = [RNG.standard_normal((M, N)).astype(np.float16), np.zeros((M, N), np.float16)]
    got = [a.copy() for a in ref]
    NUMPY.run(NUMPY.lower(k, {}), ref)
    BACKEND.run(BACKEND.lower(llvm_passes(k), {}), got)
    np.testing.assert_array_equal(got[1], ref[1])
    assert sorted(set(pairs)) == ["in", "out"]


def test_tile_read_after_the_copy_out_keeps_the_two_passes(pairs):
    M = 2 * R
    X, Y, Z = (Buffer(n, (M, N), "float32") for n in ("X", "Y", "Z"))
    x, e, s, _ = _tiles()
    # the scaled tile is copied out a second time: the map must still write it
    k = npu_kernel((X, Y, Z), _rms_body(M, X, Y, x, e, s, tail=(
        Copy(full(x), reg(Z, (add(mul(v("cid"), c(2 * R)), mul(v("vid"), c(R))), 0), (R, N))),
    )), 1)
    check(k, RNG.standard_normal((M, N)).astype(np.float32), np.zeros((M, N), np.float32),
          np.zeros((M, N), np.float32))
    assert pairs and set(pairs) == {"in"}


def test_map_reading_other_columns_of_the_copied_tile_is_not_paired(pairs):
    M = 2 * R
    X, Y = Buffer("X", (M, N), "float32"), Buffer("Y", (M, N), "float32")
    x, e, s, _ = _tiles()
    k = npu_kernel((X, Y), _rms_body(M, X, Y, x, e, s, own=False), 1)
    check(k, RNG.standard_normal((M, N)).astype(np.float32), np.zeros((M, N), np.float32))
    assert pairs and set(pairs) == {"out"}


def test_copied_tile_in_a_loop_is_not_dead_after_the_copy_out(pairs):
    M = 2 * R
    X, Y = Buffer("X", (M, N), "float32"), Buffer("Y", (M, N), "float32")
    x, e, s, _ = _tiles()
    body = _rms_body(M, X, Y, x, e, s)
    scope = body[-1]
    # the whole V body twice in a serial loop: the second pass reads what the first left
    body[-1] = Scope("V", (For(("it",), (c(2),), "serial", scope.body[:1] + scope.body[3:]),))
    k = npu_kernel((X, Y), body, 1)
    check(k, RNG.standard_normal((M, N)).astype(np.float32), np.zeros((M, N), np.float32))
    assert "out" not in pairs


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("tile_read_later,clipped", [(False, False), (False, True),
                                                     (True, False)])
def test_copy_in_squares_and_copy_on_are_one_pass(dtype, tile_read_later, clipped):
    """A row's copy-in (casting), the reduction of its squares and the copy of the row on to
    GM past a wait for the cube: one fused pass per row (fuse_rows puts the wait before the row
    loop, fuse_row_copies takes the copy on; the tile is skipped when nothing else reads it and
    the GM rows always exist); against float64 and the interpreter, with rows clipped at the
    tensor's end or not."""
    from tilelang_mini.ir import dtypes
    from tilelang_mini.ir.nodes import Fused, SetCrossFlag, WaitCrossFlag, walk_statements
    M = 2 * 2 * R - (3 if clipped else 0)
    staged = tile_read_later or clipped
    X = Buffer("X", (M, N), dtype)
    Y, S = Buffer("Y", (M, N), "float32"), Buffer("S", (M,), "float32")
    Z = Buffer("Z", (M, N), "float32")
    x, e, s, _ = _tiles()
    i, j = v("i"), v("j")
    body = [Alloc(x), Alloc(e), Alloc(s),
            Scope("C", (SetCrossFlag("MTE2", 1),)),
            Scope("V", (
                Copy(reg(X, (_rows(M), 0), (R, N)), full(x)),
                SetFlag("MTE2", "V", 0), WaitFlag("MTE2", "V", 0),
                For(("i", "j"), (c(R), c(N)), "parallel", (
                    Store(e, (i, j), mul(Load(x, (i, j)), Load(x, (i, j)))),)),
                Reduce("sum", full(e), full(s), 1),
                WaitCrossFlag("MTE3", 1),
                Copy(full(x), reg(Y, (_rows(M), 0), (R, N))),
                Copy(full(s), reg(S, (_rows(M),), (R,))),
            ) + ((Copy(full(x), reg(Z, (_rows(M), 0), (R, N))),) if tile_read_later else ()))]
    k = npu_kernel((X, Y, S, Z), body, 2)
    out = llvm_passes(k)
    (f,) = [t for t in walk_statements(out.body) if isinstance(t, Fused)]
    parts = [t for t in f.body if not isinstance(t, (SetFlag, WaitFlag))]
    assert f.kind == "copy_map_reduce" and [type(t).__name__ for t in parts] == \
        ["Copy", "For", "Reduce", "Copy"][:4 if staged else 3]
    assert (parts[0].dst.buffer.name == "x") == staged  # else straight into Y
    v_body = next(t for t in out.body if isinstance(t, Scope) and t.core == "V").body
    waits = [q for q, t in enumerate(v_body) if isinstance(t, WaitCrossFlag)]
    loops = [q for q, t in enumerate(v_body) if isinstance(t, For)]
    assert waits and loops and waits[0] < loops[0]      # the wait precedes the fused rows
    a = RNG.standard_normal((M, N)).astype(dtypes.to_numpy(dtype))
    y, ss, z = np.zeros((M, N), np.float32), np.zeros(M, np.float32), np.zeros((M, N), np.float32)
    check(k, a, y, ss, z)
    again = [a, np.zeros_like(y), np.zeros_like(ss), np.zeros_like(z)]
    NUMPY.run(NUMPY.lower(out, {}), again)   # the rewritten IR means the same on the interpreter
    np.testing.assert_allclose(again[1], y, rtol=1e-7)
    np.testing.assert_allclose(again[2], ss, rtol=1e-5)
    a64 = a.astype(np.float64)
    np.testing.assert_allclose(y, a64, rtol=1e-7)
    np.testing.assert_allclose(z, a64 if tile_read_later else 0.0, rtol=1e-7)
    np.testing.assert_allclose(ss, (a64 * a64).sum(1), rtol=1e-5)


@pytest.mark.parametrize("kind", ["sum", "absmax"])
@pytest.mark.parametrize("bm", [4, 16, 37, 80])
def test_row_loops_finish_their_results_in_groups(monkeypatch, kind, bm):
    """A fused copy-in + map + reduce per row accumulating (clear=False) over K blocks into
    its own element of a 1-d tile (a pipeline's two stages: two such reduces per row): row
    loops of 8 rows or more finish 16 rows at a time (backends/llvm/reduce.py row_groups), a
    last group of fewer rows masked; the results against float64."""
    import tilelang_mini.language as T
    from backends.llvm import reduce as red_mod
    grouped = []
    real = red_mod._grouped_reduce

    def spy(g, s):
        out = real(g, s)
        grouped.append(out is not None)
        return out

    monkeypatch.setattr(red_mod, "_grouped_reduce", spy)
    # (dtypes as names: pyflakes reads the strings of annotations as names)
    M, K, bk, f16, f32 = 2 * bm + 3, 3 * 64 - 5, 64, "float16", "float32"
    init = 0.0 if kind == "sum" else -1.0

    @T.prim_func
    def rowred(A: T.Tensor((M, K), f16), S: T.Tensor((M,), f32)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            s = T.alloc_fragment((bm,), "float32")
            T.fill(s, init)
            a = T.alloc_shared((bm, bk), "float32")
            sq = T.alloc_fragment((bm, bk), "float32")
            for kk in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                T.copy(A[bx * bm, kk * bk], a)
                for i, j in T.Parallel(bm, bk):
                    sq[i, j] = a[i, j] * a[i, j] * 3.0  # zero where K is padded
                if kind == "sum":
                    T.reduce_sum(sq, s, dim=1, clear=False)
                else:
                    T.reduce_absmax(sq, s, dim=1, clear=False)
            T.copy(s, S[bx * bm])

    k = tilelang_mini.compile(rowred, out_idx=[-1], target="llvm")
    a = RNG.standard_normal((M, K)).astype(np.float16)
    got = k(a)
    a64 = a.astype(np.float64)
    sq = a64 * a64 * 3.0
    want = sq.sum(1) if kind == "sum" else np.maximum(np.abs(sq).max(1), -1.0)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    if bm % 2 == 0:  # rows split between the vector cores, a row loop of bm / 2 on each
        assert any(grouped) == (bm // 2 >= 8)


@pytest.mark.parametrize("M, N, K", [(300, 24, 1000), (129, 8, 777)])
def test_fused_copy_in_rows_are_prefetched_by_the_next_gemm(monkeypatch, M, N, K):
    """prenorm's A rows of the next K block (a fused copy-in, one row per trip of the row
    loop) reach the gemm as one descriptor per row loop (rowpass.hand_row_prefetch) with A's
    row stride, instead of a burst of prefetches inside the row pass; results unchanged."""
    from backends.llvm import microkernel, packing
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
    from prenorm import hc_prenorm, reference
    seen: list = []
    for mod in (microkernel, packing):
        real = mod.prefetch_rows

        def spy(g, desc, first, last, real=real):
            seen.append(desc[1:])
            return real(g, desc, first, last)
        monkeypatch.setattr(mod, "prefetch_rows", spy)
    a = RNG.standard_normal((M, K)).astype(tilelang_mini.ir.dtypes.to_numpy("bfloat16"))
    b = RNG.standard_normal((N, K)).astype(np.float32)
    kern = tilelang_mini.compile(hc_prenorm.factory(M, N, K), out_idx=[-2, -1], target="llvm")
    d, ss = kern(a, b)
    want_d, want_s = reference(a, b)
    np.testing.assert_allclose(d, want_d, rtol=1e-5, atol=1e-4 * np.abs(want_d).max())
    np.testing.assert_allclose(ss, want_s, rtol=1e-5)
    assert any(stride == 2 * K and lines == 5 for _rows, stride, lines in seen)


@pytest.fixture
def write_prefetch(monkeypatch):
    """Per map_copy pass: the bytes of the next row of each of its row loop's copy-ins, when
    the pass prefetches them (rowpass.write_pass_prefetch), else None."""
    from backends.llvm import rowpass
    seen: list = []
    real = rowpass.write_pass_prefetch

    def spy(g, n):
        chunk = real(g, n)
        seen.append(None if chunk is None else
                    (n, [cp.src.extent[-1] * g.info(cp.src.buffer).esize for cp in g.row_reads]))
        return chunk
    monkeypatch.setattr(rowpass, "write_pass_prefetch", spy)
    return seen


@pytest.mark.parametrize("row_bytes, n", [(8192, 2048), (600, 300), (258, 129), (4096, 16),
                                          (64, 1000), (1, 1), (40000, 33)])
def test_write_pass_prefetch_covers_the_row_in_whole_lines(row_bytes, n):
    from backends.llvm.irutil import VL
    from backends.llvm.rowpass import prefetch_step
    step, vectors = prefetch_step(row_bytes, n), -(-n // VL)
    assert step % 64 == 0 and step * vectors >= row_bytes
    assert step - 64 < row_bytes / vectors   # at most one line beyond each vector's share


@pytest.mark.parametrize("M, N, blk_m, dtype", [(1000, 300, 8, "float32"),
                                                (64, 2048, 8, "bfloat16"),
                                                (37, 129, 4, "float16"),
                                                (512, 1024, 32, "float32")])
def test_write_pass_prefetches_the_next_row(write_prefetch, M, N, blk_m, dtype):
    """RMSNorm's row loop (rows copied in and squared in one pass, scaled and copied out in
    another): the write pass prefetches the next row of the copy-in's GM tensor, spread over its
    vectors and covering the whole row; results against a float64 reference, rows clipped at
    the tensor's end or not, N not a multiple of the vector length."""
    from tilelang_mini.ir import dtypes
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
    from rmsnorm import rms_norm, reference
    x = RNG.standard_normal((M, N)).astype(dtypes.to_numpy(dtype))
    k = tilelang_mini.compile(rms_norm.factory(M, N, blk_m=blk_m, dtype=dtype), out_idx=[-1],
                              target="llvm")
    got = k(x).astype(np.float64)
    tol = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1.6e-2}[dtype]
    np.testing.assert_allclose(got, reference(x), rtol=tol, atol=tol)
    plans = [p for p in write_prefetch if p is not None]
    assert plans and all(rows == [N * x.itemsize] and n == N for n, rows in plans)


def test_write_pass_without_a_copy_in_prefetches_nothing(write_prefetch):
    """A copy-out pass whose row loop has no fused copy-in (its map reads other columns of the
    tile, so the copy-in is not paired) has no next row to prefetch."""
    M = 2 * R
    X, Y = Buffer("X", (M, N), "float32"), Buffer("Y", (M, N), "float32")
    x, e, s, _ = _tiles()
    k = npu_kernel((X, Y), _rms_body(M, X, Y, x, e, s, own=False), 1)
    check(k, RNG.standard_normal((M, N)).astype(np.float32), np.zeros((M, N), np.float32))
    assert write_prefetch and all(p is None for p in write_prefetch)
