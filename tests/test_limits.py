"""What exceeds the chip or the compiler is a located CompileError at compile time: flag ids and
buffer bytes of the chip compiled for, Parallel loops larger than any tile, expressions and
macro expansions nested too deeply, loop extents that are not integers (in IR text too)."""
# No `from __future__ import annotations`: kernels need their T.Tensor annotations as objects.
from pathlib import Path

import numpy as np
import pytest

from markers import Marked
import tilelang_mini
import tilelang_mini.language as T
from tilelang_mini import CompileError
from tilelang_mini.arch import CHIPS

MARKED = Marked(__file__)
line_of, located = MARKED.line_of, MARKED.located


def flagged_copy(event=0, cross_flag=None):
    """A vector copy X -> Y ordered by flag `event`; with `cross_flag`, it then signals the cube
    core through that cross-core flag."""
    cross = cross_flag is not None

    @T.prim_func
    def k(X: T.Tensor((16, 16), "float32"), Y: T.Tensor((16, 16), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            with T.Scope("V"):
                x = T.alloc_ub((8, 16), "float32")
                T.copy(X[vid * 8, 0], x)
                T.set_flag("MTE2", "MTE3", event)  # AT:event
                T.wait_flag("MTE2", "MTE3", event)
                T.copy(x, Y[vid * 8, 0])
                if cross:
                    T.set_cross_flag("MTE3", cross_flag)  # AT:cross
            if cross:
                with T.Scope("C"):
                    T.wait_cross_flag("MTE3", cross_flag)
    return k


@pytest.mark.parametrize("chip", sorted(CHIPS))
def test_cross_flag_ids_follow_the_chip(chip, target):
    limit = CHIPS[chip].cross_flags
    x = np.arange(256, dtype=np.float32).reshape(16, 16)
    ok = tilelang_mini.compile(flagged_copy(cross_flag=limit - 1), out_idx=[-1], target=target,
                               chip=chip)
    np.testing.assert_array_equal(ok(x), x)
    with pytest.raises(CompileError) as info:
        tilelang_mini.compile(flagged_copy(cross_flag=limit), out_idx=[-1], target=target,
                              chip=chip)
    located(info.value, "cross")
    assert f"cross-core flag id {limit} is out of range on {chip}" in info.value.message
    assert f"0-{limit - 1}" in info.value.message


def test_910b_has_eleven_cross_flags():
    assert CHIPS["ascend910b"].cross_flags == 11  # design section 5: ids 0-10
    with pytest.raises(CompileError) as info:
        tilelang_mini.compile(flagged_copy(cross_flag=13), out_idx=[-1], chip="ascend910b")
    located(info.value, "cross")


def test_event_ids_follow_the_chip():
    for chip in CHIPS.values():
        tilelang_mini.compile(flagged_copy(chip.event_ids - 1), out_idx=[-1], chip=chip.name)
        with pytest.raises(CompileError) as info:
            tilelang_mini.compile(flagged_copy(chip.event_ids), out_idx=[-1], chip=chip.name)
        located(info.value, "event")
        assert f"0-{chip.event_ids - 1}" in info.value.message


def test_a_buffer_larger_than_its_scope_is_located_at_check():
    @T.prim_func
    def k(X: T.Tensor((16, 16), "float32"), Y: T.Tensor((16, 16), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            with T.Scope("V"):
                x = T.alloc_ub((256, 256), "float32")  # AT:ub
                T.copy(X[vid * 8, 0], x[0:8, 0:16])
                T.set_flag("MTE2", "MTE3", 0)
                T.wait_flag("MTE2", "MTE3", 0)
                T.copy(x[0:8, 0:16], Y[vid * 8, 0])
    for chip in CHIPS.values():
        with pytest.raises(CompileError) as info:
            from tilelang_mini.transform.check import check
            check(k.ir, chip)
        located(info.value, "ub")
        assert f"UB holds {chip.capacity_of('UB')}" in info.value.message


def test_a_huge_parallel_extent_is_a_compile_error(target):
    N = 2 ** 31

    @T.prim_func
    def k(X: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "float32")):
        with T.Kernel(1) as bx:
            t = T.alloc_fragment((8,), "float32")
            T.copy(X, t)
            for i in T.Parallel(N):  # AT:huge
                Y[i % 8] = t[i % 8]
    with pytest.raises(CompileError) as info:
        tilelang_mini.compile(k, out_idx=[-1], target=target)
    located(info.value, "huge")
    assert "2147483648" in info.value.message and "tile" in info.value.message


def test_a_huge_tile_is_a_compile_error():
    N = 2 ** 31

    @T.prim_func
    def k(X: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "float32")):
        with T.Kernel(1) as bx:
            t = T.alloc_fragment((N,), "float32")  # AT:hugetile
            T.copy(X, t[0:8])
            T.copy(t[0:8], Y)
    for chip in CHIPS.values():
        with pytest.raises(CompileError) as info:
            tilelang_mini.compile(k, out_idx=[-1], chip=chip.name)
        located(info.value, "hugetile")


# ----------------------------------------------------------------------- deep and recursive


DEEP_SOURCE = """
import tilelang_mini.language as T


@T.prim_func
def k(X: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "float32")):
    with T.Kernel(1) as bx:
        t = T.alloc_fragment((8,), "float32")
        T.copy(X, t)
        for i in T.Parallel(8):
            t[i] = t[i]EXPR
        T.copy(t, Y)
"""


def deep_kernel(tmp_path, depth):
    """A kernel file whose line 11 holds an expression `depth` additions deep."""
    import importlib.util
    path = tmp_path / f"deep_{depth}.py"
    path.write_text(DEEP_SOURCE.replace("EXPR", " + 0.5" * depth))
    spec = importlib.util.spec_from_file_location(f"deep_{depth}", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except CompileError as err:  # T.prim_func reads the kernel when the module runs
        return path, err
    return path, module.k


@pytest.mark.parametrize("depth", [200, 900])
def test_a_deep_expression_is_a_located_error(tmp_path, depth, target):
    path, k = deep_kernel(tmp_path, depth)
    if not isinstance(k, CompileError):
        with pytest.raises(CompileError) as info:
            tilelang_mini.compile(k, out_idx=[-1], target=target)
        k = info.value
    assert (Path(k.loc.file), k.loc.line) == (path, 11), str(k)
    assert "deep" in k.message and "Traceback" not in str(k)


def test_a_moderately_deep_expression_compiles(tmp_path, target):
    _, k = deep_kernel(tmp_path, 60)
    x = np.arange(8, dtype=np.float32)
    y = tilelang_mini.compile(k, out_idx=[-1], target=target)(x)
    np.testing.assert_allclose(y, x.astype(np.float64) + 30.0, rtol=1e-6)


@T.macro
def forever(t):
    forever(t)  # AT:recmacro


@T.macro
def countdown(t, n):
    if n > 0:
        countdown(t, n - 1)
    else:
        T.fill(t, 3.0)


def filled_by(fill):
    """k(X, Y): Y (8,) = the fragment t as the macro call fill(t) leaves it."""
    @T.prim_func
    def k(X: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "float32")):
        with T.Kernel(1) as bx:
            t = T.alloc_fragment((8,), "float32")
            fill(t)
            T.copy(t, Y)
    return k


def test_a_recursive_macro_is_a_located_error():
    with pytest.raises(CompileError) as info:
        filled_by(forever)
    located(info.value, "recmacro")
    assert "forever" in info.value.message and "recursion" in info.value.message


def test_a_macro_recursion_with_an_end_compiles(target):
    @T.macro
    def ten_levels(t):
        countdown(t, 10)

    k = filled_by(ten_levels)
    y = tilelang_mini.compile(k, out_idx=[-1], target=target)(np.zeros(8, np.float32))
    np.testing.assert_array_equal(y, np.full(8, 3.0, np.float32))


IR_TEXT = '''@prim_func(source="k.py")
def k(X: Tensor((8,), "float32"), Y: Tensor((8,), "float32")):
    with Kernel(1) as (bx):
        t = alloc_fragment((8,), "float32")
        copy(X, t)
        for i in serial(EXTENT):
            t[i] = EXPR
        copy(t, Y)
'''


@pytest.mark.parametrize("extent", ["inf", "nan", "-inf", "1e400", "4.5"])
def test_a_non_integer_loop_extent_in_ir_text_is_located(extent):
    text = IR_TEXT.replace("EXTENT", extent).replace("EXPR", "t[i] + 1.0")
    with pytest.raises(CompileError) as info:
        tilelang_mini.compile_ir(text, out_idx=[-1], filename="edited.ir")
    err = info.value
    assert (err.loc.file, err.loc.line) == ("edited.ir", 6), str(err)
    assert "loop extent must be a non-negative integer" in err.message


def test_a_deep_expression_in_ir_text_is_located():
    text = IR_TEXT.replace("EXTENT", "4").replace("EXPR", "t[i]" + " + 0.5" * 3000)
    with pytest.raises(CompileError) as info:
        tilelang_mini.compile_ir(text, out_idx=[-1], filename="edited.ir")
    assert (info.value.loc.file, info.value.loc.line) == ("edited.ir", 7)


@pytest.mark.parametrize("start", ["nan", "1.5", "inf"])
def test_a_non_integer_region_start_in_ir_text_is_located(start):
    text = IR_TEXT.replace("EXTENT", "4").replace("EXPR", "t[i] + 1.0").replace(
        "copy(X, t)", f"copy(X[{start} +: 8], t)  # 5:9")
    with pytest.raises(CompileError) as info:
        tilelang_mini.compile_ir(text, out_idx=[-1], filename="edited.ir")
    assert info.value.loc.line == 5 and "must be an integer" in info.value.message


def test_a_zero_sized_shape_in_ir_text_is_a_compile_error():
    text = IR_TEXT.replace("EXTENT", "4").replace("EXPR", "t[i] + 1.0").replace(
        't = alloc_fragment((8,), "float32")', 't = alloc_fragment((0,), "float32")  # 4:9')
    with pytest.raises(CompileError) as info:
        tilelang_mini.compile_ir(text, out_idx=[-1], filename="edited.ir")
    assert "expected positive ints" in info.value.message


@pytest.mark.parametrize("grid", [(2 ** 40,), (65536, 65536)])
def test_a_grid_of_more_than_2_31_blocks_is_a_compile_error(grid, target):
    """Block ids are 32-bit: a larger launch is a located CompileError (the numpy target ran
    out of memory building the block ids: an internal error), in a kernel and in IR text."""
    @T.prim_func
    def k1(X: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "float32")):  # AT:grid1
        with T.Kernel(grid[0]) as bx:
            t = T.alloc_fragment((8,), "float32")
            T.copy(X, t)
            T.copy(t, Y)

    @T.prim_func
    def k2(X: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "float32")):  # AT:grid2
        with T.Kernel(grid[0], grid[-1]) as (bx, by):
            t = T.alloc_fragment((8,), "float32")
            T.copy(X, t)
            T.copy(t, Y)
    with pytest.raises(CompileError) as info:
        tilelang_mini.compile(k1 if len(grid) == 1 else k2, out_idx=[-1], target=target)
    assert "blocks; at most 2147483647" in info.value.message
    assert info.value.loc.line == line_of(f"grid{len(grid)}")
    names = ("bx", "by")[:len(grid)]
    text = IR_TEXT.replace("EXTENT", "4").replace("EXPR", "t[i] + 1.0").replace(
        "Kernel(1) as (bx)", f"Kernel({', '.join(map(str, grid))}) as ({', '.join(names)})")
    with pytest.raises(CompileError, match="blocks; at most 2147483647"):
        tilelang_mini.compile_ir(text, out_idx=[-1], target=target, filename="edited.ir")


def test_deeply_nested_loops_and_huge_integers_in_ir_text_are_located():
    """Loops nested hundreds deep and a 5000-digit integer in edited IR text are CompileErrors
    at their line (they were a raw RecursionError and a raw ValueError from the parser)."""
    head = '@prim_func(source="k.py")\ndef k(A: Tensor((4,), "float32")):\n    with Kernel(1) as (bx):\n'
    body = "".join("    " * (2 + i) + f"for i{i} in serial(1):\n" for i in range(300))
    deep = head + "        t = alloc_fragment((4,), \"float32\")\n" + body + "    " * 302 + \
        "fill(t, 1.0)\n"
    with pytest.raises(CompileError, match="nests too deeply") as info:
        tilelang_mini.compile_ir(deep, out_idx=[0], filename="edited.ir")
    assert info.value.loc.file == "edited.ir" and info.value.loc.line > 4
    huge = head + "        t = alloc_fragment((4,), \"float32\")\n        fill(t, " + "9" * 5000 + ")\n"
    with pytest.raises(CompileError, match="cannot read this") as info:
        tilelang_mini.compile_ir(huge, out_idx=[0], filename="edited.ir")
    assert (info.value.loc.file, info.value.loc.line) == ("edited.ir", 5)


def many_blocks(n):
    @T.prim_func
    def k(X: T.Tensor((n, 4), "float32"), Y: T.Tensor((n, 4), "float32")):
        with T.Kernel(n) as bx:
            x = T.alloc_fragment((1, 4), "float32")
            T.copy(X[bx, 0], x)
            for i, j in T.Parallel(1, 4):
                x[i, j] = x[i, j] * 2.0 + 1.0
            T.copy(x, Y[bx, 0])
    return k


def test_simulate_of_a_launch_too_large_to_run_block_by_block_says_so():
    # simulate runs each block in turn (a 500000-block grid from a mutated IR ran for hours);
    # past the limit it asks which blocks, and runs those
    from tilelang_mini.runtime.kernel import SIMULATE_MAX_BLOCKS
    n = SIMULATE_MAX_BLOCKS + 1
    x = np.random.default_rng(3).standard_normal((n, 4)).astype(np.float32)
    want = x.astype(np.float64) * 2 + 1
    kern = tilelang_mini.compile(many_blocks(n), out_idx=[-1])
    np.testing.assert_allclose(kern(x), want, rtol=1e-6)
    with pytest.raises(CompileError, match=f"this launch has {n} blocks .*pass blocks="):
        kern.simulate(x)
    out, report = kern.simulate(x, blocks=[0, n - 1])
    assert report.estimated and report.blocks == (0, n - 1)
    np.testing.assert_allclose(out[[0, n - 1]], want[[0, n - 1]], rtol=1e-6)


@pytest.mark.parametrize("blocks", ["abc", 3, [1.5], [True], ["1"], {1: 2}, [-1], [8]])
def test_simulate_blocks_that_are_not_block_ids_are_compile_errors(blocks):
    # a string or a number was an internal error in the simulator, 1.5 simulated block 1
    kern = tilelang_mini.compile(many_blocks(8), out_idx=[-1])
    with pytest.raises(CompileError, match="blocks= takes|outside the grid of 8 blocks"):
        kern.simulate(np.ones((8, 4), np.float32), blocks=blocks)


@pytest.mark.parametrize("out_idx", [[0, 0], [1, -1], [True]])
def test_out_idx_naming_a_parameter_twice_is_a_compile_error(out_idx):
    # [1, -1] returned two arrays, the second never written
    with pytest.raises(CompileError, match="names parameter 1 twice|names parameter 0 twice"
                                           "|not a parameter index"):
        tilelang_mini.compile(many_blocks(8), out_idx=out_idx)
