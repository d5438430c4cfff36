"""More upstream spellings: tilelang-ascend's `with T.If(c): with T.Then(): ... with T.Else():`,
a (1,)-shaped tile as the scalar operand of T.tile ops and T.tile.fill (group_norm), a GM vector
copied into a longer vector tile with pad_value, `T.Tensor[(n), dtype]`, T.Layout / T.Fragment
as plain values for T.annotate_layout, and the located errors of GPU-only name families; on every
target, simulated, against float64 NumPy references."""
import numpy as np
import pytest

import tilelang_mini as tilelang
import tilelang_mini.language as T
from tilelang_mini import CompileError

from markers import kernel_error
from util import close, f64, rand
from kernels import cube_tiles

TARGETS = ("numpy", "llvm")


def run(kernel, target, *args):
    k = tilelang.compile(kernel, target=target)
    got = [a.copy() for a in args]
    k(*got)
    outs = [got]
    if target == "numpy":
        sim = [a.copy() for a in args]
        k.simulate(*sim)
        outs.append(sim)
    return outs


def if_then_else(rows=4, n=32):
    @T.prim_func
    def main(X: T.Tensor((rows * 2, n), "float32"), Y: T.Tensor((rows * 2, n), "float32")):
        with T.Kernel(2, is_npu=True) as (cid, vid):
            x = T.alloc_ub((rows, n), "float32")
            y = T.alloc_ub((rows, n), "float32")
            T.copy(X[cid * rows, 0], x)
            with T.If(cid > 0):
                with T.Then():
                    T.tile.mul(y, x, 2.0)
                with T.Else():
                    T.tile.add(y, x, 1.0)
            with T.If(cid == 0):
                with T.Then():
                    T.tile.max(y, y, 0.0)
            T.copy(y, Y[cid * rows, 0])
    return main


@pytest.mark.parametrize("target", TARGETS)
def test_with_if_then_else(target):
    x = rand((8, 32), seed=2)
    want = f64(x).copy()
    want[:4] = np.maximum(want[:4] + 1.0, 0.0)
    want[4:] = want[4:] * 2.0
    for out in run(if_then_else(), target, x, np.zeros_like(x)):
        close(out[1], want)


def test_if_without_then_is_located():
    @kernel_error
    def err(X: T.Tensor((8,), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_ub((8,), "float32")
            with T.If(cid > 0):
                T.tile.fill(x, 1.0)  # NO_THEN
    assert "NO_THEN" in str(err) and "T.Then()" in str(err)


G, CPG, CPG_PAD, S = 2, 6, 8, 16


def group_stats():
    """Per group: y = (x - mean) / total_std * gamma, with the group's sums in (1,) tiles used as
    scalars (T.tile.div/T.tile.fill from a (1,) tile) and gamma copied into a padded column."""

    @T.prim_func
    def main(X: T.Tensor((G, CPG, S), "float32"), Gamma: T.Tensor((G, CPG), "float32"),
             Y: T.Tensor((G, CPG, S), "float32")):
        with T.Kernel(G, is_npu=True) as (cid, vid):
            x = T.alloc_ub((CPG, S), "float32")
            row = T.alloc_ub((CPG,), "float32")
            total = T.alloc_ub((1,), "float32")
            mean = T.alloc_ub((CPG, S), "float32")
            gamma = T.alloc_ub((CPG_PAD, 1), "float32")
            gb = T.alloc_ub((CPG_PAD, S), "float32")
            T.copy(X[cid, 0:CPG, 0:S], x)
            T.copy(Gamma[cid, 0:CPG], gamma, pad_value=0.0)
            T.reduce_sum(x, row, dim=-1)
            T.reduce_sum(row, total, dim=-1)
            T.tile.div(total, total, CPG * S)
            T.tile.fill(mean, total)
            T.tile.sub(x, x, mean)
            T.tile.mul(x, x, total)
            T.tile.broadcast(gb, gamma)
            T.tile.mul(x, x, gb[0:CPG, :])
            T.copy(x, Y[cid, 0:CPG, 0:S])
    return main


@pytest.mark.parametrize("target", TARGETS)
def test_unit_tile_scalar_and_padded_column(target):
    x, g = rand((G, CPG, S), seed=4), rand((G, CPG), seed=5)
    xf = f64(x)
    mu = xf.mean(axis=(1, 2), keepdims=True)
    want = (xf - mu) * mu * f64(g)[:, :, None]
    for out in run(group_stats(), target, x, g, np.zeros_like(x)):
        close(out[2], want, reduce_len=CPG * S)


def test_tensor_subscript_of_a_parenthesised_extent():
    t = T.Tensor[(8), T.int32]
    assert t.shape == (8,) and t.dtype == "int32"


def test_layout_values_for_annotate_layout():
    lay = T.Layout((4, 4), lambda i, j: [j, i])
    assert isinstance(T.Fragment((4,), lambda i: i), T.Layout)

    @T.prim_func
    def main(X: T.Tensor((4, 4), "float32"), Y: T.Tensor((4, 4), "float32")):
        with T.Kernel(1) as bx:
            s = T.alloc_shared((4, 4), "float32")
            T.annotate_layout({s: lay})
            T.copy(X, s)
            T.copy(s, Y)
    x = rand((4, 4))
    y = np.zeros_like(x)
    tilelang.compile(main, target="numpy")(x, y)
    np.testing.assert_array_equal(y, x)


@pytest.mark.parametrize("name, advice", [
    ("tcgen05_mma_ss", "T.gemm"), ("WSSync", "T.Scope"), ("wgmma_fence", "T.gemm"),
    ("tma_load", "T.copy"), ("mbarrier_init", "flags")])
def test_gpu_only_families_are_located(name, advice):
    src = (f"def main(X: T.Tensor((4,), 'float32')):\n"
           f"    with T.Kernel(1) as bx:\n"
           f"        T.{name}(X)  # GPU_NAME\n")
    ns = {"T": T}
    import linecache
    fname = f"<gpu-{name}>"
    linecache.cache[fname] = (len(src), None, src.splitlines(True), fname)
    exec(compile(src, fname, "exec"), ns)
    with pytest.raises(CompileError) as err:
        T.prim_func(ns["main"])
    msg = str(err.value)
    assert "GPU-only" in msg and advice in msg and "GPU_NAME" in msg


def per_element_accumulation(hc=4, hb=32):
    """TileLang's mhc_post body: a serial loop inside a T.Parallel body."""

    @T.prim_func
    def main(A: T.Tensor((hc, hc), "float32"), B: T.Tensor((hc, hb), "float32"),
             C: T.Tensor((hc,), "float32"), Y: T.Tensor((hc, hb), "float32")):
        with T.Kernel(1, threads=128) as bx:
            a = T.alloc_fragment((hc, hc), "float32")
            b = T.alloc_fragment((hc, hb), "float32")
            c = T.alloc_fragment((hc,), "float32")
            y = T.alloc_fragment((hc, hb), "float32")
            T.copy(A, a)
            T.copy(B, b)
            T.copy(C, c)
            for i, j in T.Parallel(hc, hb):
                y[i, j] = c[i]
                for k in T.serial(hc):
                    y[i, j] += a[k, i] * b[k, j]
                y[i, j] = y[i, j] * 2.0
            T.copy(y, Y)
    return main


@pytest.mark.parametrize("target", TARGETS)
def test_serial_loop_in_parallel_body(target):
    a, b, c = rand((4, 4), seed=6), rand((4, 32), seed=7), rand((4,), seed=8)
    want = 2.0 * (f64(c)[:, None] + f64(a).T @ f64(b))
    for out in run(per_element_accumulation(), target, a, b, c, np.zeros((4, 32), np.float32)):
        close(out[3], want, reduce_len=4)


def test_parallel_dependent_loop_extent_is_located():
    @kernel_error
    def err(X: T.Tensor((4, 4), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((4, 4), "float32")
            for i, j in T.Parallel(4, 4):  # TRIANGLE
                x[i, j] = 0.0
                for k in T.serial(i):
                    x[i, j] += 1.0
    assert "TRIANGLE" in str(err) and "serial" in str(err)


def vector_flags_no_scope(n=4, w=64):
    """tilelang-ascend's vector-only expert kernels (causal_conv1d): their own flags, no T.Scope."""

    @T.prim_func
    def main(X: T.Tensor((n, w), "float32"), Y: T.Tensor((n, w), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_ub((w,), "float32")
            y = T.alloc_ub((w,), "float32")
            T.set_flag("mte3", "mte2", 0)
            for r in T.serial(n // 2):
                T.wait_flag("mte3", "mte2", 0)
                T.copy(X[r * 2 + vid, 0], x)
                T.set_flag("mte2", "v", 0)
                T.wait_flag("mte2", "v", 0)
                T.tile.mul(y, x, 3.0)
                T.set_flag("v", "mte3", 0)
                T.wait_flag("v", "mte3", 0)
                T.copy(y, Y[r * 2 + vid, 0])
                T.set_flag("mte3", "mte2", 0)
                T.set_flag("mte3", "v", 1)
                T.wait_flag("mte3", "v", 1)
            T.wait_flag("mte3", "mte2", 0)
    return main


@pytest.mark.parametrize("target", TARGETS)
def test_vector_kernel_with_flags_and_no_scope(target):
    x = rand((4, 64), seed=11)
    for out in run(vector_flags_no_scope(), target, x, np.zeros_like(x)):
        close(out[1], 3.0 * f64(x))
    assert 'with Scope("V")' in vector_flags_no_scope().script()


def test_tilelang_math_helpers():
    assert [tilelang.math.next_power_of_2(n) for n in (0, 1, 2, 3, 16, 17, 576)] == \
        [1, 1, 2, 4, 16, 32, 1024]
    assert tilelang.math.cdiv(17, 4) == 5


def test_set_autotune_inputs_is_accepted():
    from tilelang_mini.autotuner import autotune, set_autotune_inputs
    x = np.zeros(4, np.float32)
    with set_autotune_inputs(x, x) as given:
        assert given == (x, x)
    assert callable(autotune)


def cross_flag_wait_with_pipe_last():
    """`T.wait_cross_flag(flag, "MTE2")` (HISA's spelling: the id first, the waiting pipe second)."""

    @T.prim_func
    def main(A: T.Tensor((16, 16), "float16"), B: T.Tensor((16, 16), "float16"),
             C: T.Tensor((16, 16), "float32"), D: T.Tensor((16, 16), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a_l1, b_l1, c_l0 = cube_tiles(16, 16, 16)
            c_ub = T.alloc_ub((8, 16), "float32")
            with T.Scope("C"):
                T.copy(A, a_l1)
                T.copy(B, b_l1)
                T.barrier_all()
                T.gemm_v0(a_l1, b_l1, c_l0, init=True)
                T.barrier_all()
                T.copy(c_l0, C)
                T.set_cross_flag("FIX", 3)
            with T.Scope("V"):
                T.wait_cross_flag(3, "MTE2")
                T.copy(C[vid * 8, 0], c_ub)
                T.barrier_all()
                T.tile.mul(c_ub, c_ub, 2.0)
                T.barrier_all()
                T.copy(c_ub, D[vid * 8, 0])
    return main


@pytest.mark.parametrize("target", TARGETS)
def test_wait_cross_flag_with_the_pipe_last(target):
    a, b = rand((16, 16), "float16", seed=12), rand((16, 16), "float16", seed=13)
    want = f64(a) @ f64(b)
    for out in run(cross_flag_wait_with_pipe_last(), target, a, b, np.zeros((16, 16), np.float32),
                   np.zeros((16, 16), np.float32)):
        close(out[3], 2 * want, "float16", 16)


def test_layout_module_and_transform_pass_config_key():
    from tilelang_mini.layout import make_swizzled_layout
    from tilelang_mini.transform import PassConfigKey
    assert PassConfigKey is tilelang.PassConfigKey
    lay = tilelang.layout.make_swizzled_layout("A_shared")
    assert isinstance(lay, T.Layout) and isinstance(make_swizzled_layout("B"), T.Layout)

    @T.prim_func
    def main(X: T.Tensor((8, 8), "float16"), Y: T.Tensor((8, 8), "float16")):
        with T.Kernel(1) as bx:
            s = T.alloc_shared((8, 8), "float16")
            T.annotate_layout({s: tilelang.layout.make_swizzled_layout(s)})
            T.copy(X, s)
            T.copy(s, Y)
    x = rand((8, 8), "float16")
    y = np.zeros_like(x)
    tilelang.compile(main, target="numpy")(x, y)
    np.testing.assert_array_equal(y, x)
