"""The simulator checks the bytes each access touches: buffers plan_memory placed on common bytes
race only where the accesses really share bytes (no false alarm for disjoint parts), and still
race where they do."""
# No `from __future__ import annotations`: kernels need their T.Tensor annotations as objects.
import numpy as np
import pytest

import tilelang_mini
import tilelang_mini.language as T
from irbuild import compile_unchecked
from tilelang_mini import RaceError
from tilelang_mini.ir.nodes import Buffer
from tilelang_mini.sim.aliasing import alias_boxes, byte_ranges
from kernels import gemm_tiles


def test_byte_ranges_by_rows():
    b = Buffer("b", (4, 24), "float32", "UB")
    assert byte_ranges(b, 0, (0, 1, 0, 24)) == [(0, 96)]
    assert byte_ranges(b, 0, (2, 3, 0, 1)) == [(192, 196)]
    assert byte_ranges(b, 64, (0, 4, 0, 24)) == [(64, 64 + 384)]        # whole rows: one range
    assert byte_ranges(b, 0, (1, 3, 4, 8)) == [(112, 128), (208, 224)]  # one per row
    v = Buffer("v", (96,), "float32", "UB")
    assert byte_ranges(v, 32, (10, 20)) == [(72, 112)]


def test_alias_boxes_are_exact_for_rows():
    y = Buffer("y", (96,), "float32", "UB")
    assert alias_boxes([(0, 96)], y, 0) == [(0, 24)]
    assert alias_boxes([(192, 196)], y, 0) == [(48, 49)]
    assert alias_boxes([(400, 500)], y, 0) == []                         # past its bytes
    m = Buffer("m", (4, 8), "float32", "UB")                             # rows of 32 bytes
    assert alias_boxes([(16, 100)], m, 0) == [(0, 1, 4, 8), (3, 4, 0, 1), (1, 3, 0, 8)]
    assert alias_boxes([(32, 64)], m, 0) == [(1, 2, 0, 8)]


ALIAS = """@prim_func(source="alias.py")
def main(X: Tensor((96,), "float32"), Y: Tensor((96,), "float32"), Z: Tensor((4, 24), "float32"), W: Tensor((2,), "float32")):
    with Kernel(1, is_npu=True) as (cid, vid):
        big = alloc_ub((96,), "float32", offset=0)
        mix = alloc_ub((4, 24), "float32", offset=0)
        sq = alloc_ub((1,), "float32", offset=OFFSET)
        with Scope("V"):
            copy(X, big)
            set_flag(MTE2, V, 0)
            wait_flag(MTE2, V, 0)
            for i in Parallel(96):
                big[i] = big[i] * 2.0
            set_flag(V, MTE3, 0)
            wait_flag(V, MTE3, 0)
            copy(big[vid * 48 +: 48], Y[vid * 48 +: 48])
            set_flag(MTE3, V, 0)
            wait_flag(MTE3, V, 0)
            fill(mix[0 +: 1, 0 +: 24], 1.0)  # 20:1
            fill(sq, 3.0)  # 21:1
            set_flag(V, MTE3, 1)
            wait_flag(V, MTE3, 1)
            copy(mix[vid * 2 +: 2, 0 +: 24], Z[vid * 2 +: 2, 0 +: 24])
            copy(sq, W[vid +: 1])
"""


def run_alias(offset, check=True):
    text = ALIAS.replace("OFFSET", str(offset))
    kernel = compile_unchecked(text, [1, 2, 3])
    x = np.arange(96, dtype=np.float32)
    return text, x, kernel.simulate(x)


def test_disjoint_bytes_through_a_third_buffer_do_not_race():
    """fill(mix) on bytes [0, 96) and fill(sq) on [192, 196): `big` (dead by then) spans both,
    yet the two fills share no byte (the false alarm of the whole-alias accounting)."""
    text, x, ((y, z, w), report) = run_alias(192)
    np.testing.assert_array_equal(y, x * 2)
    want = np.zeros((4, 24), np.float32)
    want[0] = 1.0
    np.testing.assert_array_equal(z, want)
    np.testing.assert_array_equal(w, [3.0, 3.0])
    tilelang_mini.compile_ir(text, out_idx=[1, 2, 3])  # and check_sync accepts it


def test_shared_bytes_through_a_third_buffer_still_race():
    with pytest.raises(RaceError) as err:  # sq inside the row of mix that is filled
        run_alias(64)
    msg = str(err.value)
    assert "alias.py:20:1" in msg and "alias.py:21:1" in msg


def test_byte_ranges_and_alias_boxes_of_any_rank():
    b = Buffer("b", (2, 3, 4), "float32", "UB")                          # slices of 48 bytes
    assert byte_ranges(b, 0, (0, 2, 1, 2, 0, 4)) == [(16, 32), (64, 80)]
    assert byte_ranges(b, 0, (0, 2, 0, 3, 0, 4)) == [(0, 96)]           # whole: one range
    assert byte_ranges(b, 0, (1, 2, 0, 3, 1, 2)) == [(52, 56), (68, 72), (84, 88)]
    assert byte_ranges(b, 0, (0, 2, 0, 3, 1, 2), most=2) == [(4, 40), (52, 88)]  # hull per slice
    y = Buffer("y", (2, 3, 4), "float32", "UB")
    assert alias_boxes([(16, 32), (64, 80)], y, 0) == [(0, 1, 1, 2, 0, 4), (1, 2, 1, 2, 0, 4)]
    assert alias_boxes([(20, 60)], y, 0) == [             # elements [5, 15): a partial row,
        (0, 1, 1, 2, 1, 4), (0, 1, 2, 3, 0, 4), (1, 2, 0, 1, 0, 3)]   # a row, a partial row
    q = Buffer("q", (2, 2, 2, 3), "float32", "UB")
    assert alias_boxes([(0, 96)], q, 0) == [(0, 2, 0, 2, 0, 2, 0, 3)]


ALIAS_ND = """@prim_func(source="alias_nd.py")
def main(X: Tensor(BIG, "float32"), Y: Tensor(BIG, "float32"), Z: Tensor(MIX, "float32"), W: Tensor((2,), "float32")):
    with Kernel(1, is_npu=True) as (cid, vid):
        big = alloc_ub(BIG, "float32", offset=0)
        mix = alloc_ub(MIX, "float32", offset=0)
        sq = alloc_ub((1,), "float32", offset=OFFSET)
        with Scope("V"):
            copy(X, big)
            set_flag(MTE2, V, 0)
            wait_flag(MTE2, V, 0)
            fill(big, 2.0)
            set_flag(V, MTE3, 0)
            wait_flag(V, MTE3, 0)
            copy(big[HALF_BIG], Y[HALF_BIG])
            set_flag(MTE3, V, 0)
            wait_flag(MTE3, V, 0)
            fill(mix[FILL], 1.0)  # 17:1
            fill(sq, 3.0)  # 18:1
            set_flag(V, MTE3, 1)
            wait_flag(V, MTE3, 1)
            copy(mix[HALF_MIX], Z[HALF_MIX])
            copy(sq, W[vid +: 1])
"""
# mix: the filled part covers bytes [0, 96) and [192, 288) (two slices 96 bytes apart); its
# hull [0, 288) holds [96, 100), where sq sits. big spans all of it.
ND_SHAPES = [("(4, 4, 6)", "(2, 2, 24)", "0 +: 2, 0 +: 1, 0 +: 24"),
             ("(2, 3, 4, 4)", "(2, 2, 2, 12)", "0 +: 2, 0 +: 1, 0 +: 2, 0 +: 12"),
             ("(96,)", "(2, 2, 24)", "0 +: 2, 0 +: 1, 0 +: 24")]


@pytest.mark.parametrize("big,mix,fill", ND_SHAPES)
def test_disjoint_bytes_of_3d_and_4d_tiles_do_not_race(big, mix, fill):
    """Before: a >= 3-D access counted as its hull (or the whole of a >= 3-D alias), so the two
    fills raced through `big` although they share no byte."""
    def half(shape):  # each vector core stores its half of the leading dimension
        dims = eval(shape)
        return ", ".join([f"vid * {dims[0] // 2} +: {dims[0] // 2}"]
                         + [f"0 +: {n}" for n in dims[1:]])

    text = (ALIAS_ND.replace("HALF_BIG", half(big)).replace("HALF_MIX", half(mix))
            .replace("BIG", big).replace("MIX", mix).replace("FILL", fill))
    x = np.arange(96, dtype=np.float32).reshape(eval(big))
    (y, z, w), report = compile_unchecked(text.replace("OFFSET", "96"), [1, 2, 3]).simulate(x)
    np.testing.assert_array_equal(y, np.full(eval(big), 2.0))
    flat = np.asarray(z).reshape(-1)  # the filled part: elements [0, 24) and [48, 72)
    assert (flat[:24] == 1.0).all() and (flat[48:72] == 1.0).all() and (flat == 1.0).sum() == 48
    np.testing.assert_array_equal(w, [3.0, 3.0])
    tilelang_mini.compile_ir(text.replace("OFFSET", "96"), out_idx=[1, 2, 3])  # check_sync too
    with pytest.raises(RaceError) as err:  # sq inside the filled part: a real race
        compile_unchecked(text.replace("OFFSET", "192"), [1, 2, 3]).simulate(x)
    msg = str(err.value)
    assert "alias_nd.py:17:1" in msg and "alias_nd.py:18:1" in msg


def vector_to_cube(stages):
    @T.prim_func
    def main(X: T.Tensor((64, 128), "float32"), B: T.Tensor((128, 64), "float16"),
             C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((64, 64), "float32")
            A_s, B_s, C_f = gemm_tiles(64, 64, 64)
            T.clear(C_f)
            for k in T.Pipelined(2, num_stages=stages):
                T.copy(X[0, k * 64], x)
                for i, j in T.Parallel(64, 64):
                    A_s[i, j] = x[i, j] * 0.5
                T.copy(B[k * 64, 0], B_s)
                T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C)
    return main


@pytest.mark.parametrize("chip", ["ascend910b", "ascend950"])
@pytest.mark.parametrize("stages", [1, 2])
def test_the_two_aivs_writing_halves_of_a_reused_l1_tile(chip, stages):
    """The fuzzer's reproduction (sim-alias-race): on ascend950 the AIVs write the halves of an
    L1 tile whose bytes plan_memory reuses for B_s; their halves are disjoint."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((64, 128)).astype(np.float32)
    b = rng.standard_normal((128, 64)).astype(np.float16)
    kernel = tilelang_mini.compile(vector_to_cube(stages), out_idx=[-1], chip=chip)
    out, report = kernel.simulate(x, b)
    a16 = (x.astype(np.float64) * 0.5).astype(np.float16).astype(np.float64)
    np.testing.assert_allclose(out, a16 @ b.astype(np.float64), rtol=1e-4, atol=1e-3)
    assert report.cycles > 0
