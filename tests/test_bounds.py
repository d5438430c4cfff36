"""Indices of on-chip tiles out of bounds (transform/check_bounds.py): where the grid and loop
extents prove an element index or a region start leaves its tile, a CompileError at the
offending line of this file (marked `# OOB:<tag>`) says which values it takes and which it
should; where it depends on data, a KernelRuntimeError at the same line names the tile. Kernels
the bounds do not condemn (guarded by `if`, in a select) run and match NumPy references. (The
naive gemv with fewer rows than threads: tests/compat/test_simt.py.)"""
import numpy as np
import pytest

from markers import Marked
import tilelang_mini
import tilelang_mini.language as T
from tilelang_mini import CompileError
from tilelang_mini.errors import KernelRuntimeError

MARKED = Marked(__file__, prefix="OOB:")
f32, i32 = "float32", "int32"


def compile_error(prim, target) -> CompileError:
    with pytest.raises(CompileError) as info:
        tilelang_mini.compile(prim, target=target)
    assert "internal" not in str(info.value)
    return info.value


def located(err, tag, *fragments):
    MARKED.located(err, tag)
    for f in fragments:
        assert f in str(err), f"{f!r} not in:\n{err}"


# ------------------------------------------------------------------ proved at compile time


def _serial_store():
    @T.prim_func
    def k(X: T.Tensor((64,), f32), Y: T.Tensor((64,), f32)):
        with T.Kernel(1) as bx:
            s = T.alloc_shared((32,), f32)
            for i in T.serial(64):
                s[i] = X[i]  # OOB:serial_store
            T.copy(s, Y[0:32])
    return k


def _serial_load():
    @T.prim_func
    def k(X: T.Tensor((64,), f32), Y: T.Tensor((64,), f32)):
        with T.Kernel(1) as bx:
            s = T.alloc_fragment((32,), f32)
            T.copy(X[0:32], s)
            for i in T.serial(32):
                Y[i] = s[i + 1] * 2.0  # OOB:serial_load
    return k


def _parallel_store():
    @T.prim_func
    def k(X: T.Tensor((64, 64), f32), Y: T.Tensor((64, 64), f32)):
        with T.Kernel(1) as bx:
            s = T.alloc_fragment((32, 64), f32)
            for i, j in T.Parallel(64, 64):
                s[i, j] = X[i, j]  # OOB:parallel_store
            T.copy(s, Y[0:32, :])
    return k


def _parallel_load():
    @T.prim_func
    def k(X: T.Tensor((64,), f32), Y: T.Tensor((64,), f32)):
        with T.Kernel(2) as bx:
            s = T.alloc_fragment((32,), f32)
            T.copy(X[0:32], s)
            for i in T.Parallel(32):
                Y[bx * 32 + i] = s[bx * 16 + i]  # OOB:parallel_load
    return k


def _block_index():
    @T.prim_func
    def k(X: T.Tensor((64,), f32), Y: T.Tensor((64,), f32)):
        with T.Kernel(4) as bx:
            s = T.alloc_fragment((2,), f32)
            T.clear(s)
            s[bx] = 1.0  # OOB:block_index
            T.copy(s, Y[bx * 2:bx * 2 + 2])
    return k


def _slice_copy():
    @T.prim_func
    def k(X: T.Tensor((64,), f32), Y: T.Tensor((64,), f32)):
        with T.Kernel(1) as bx:
            s = T.alloc_shared((64,), f32)
            for j in T.serial(3):
                T.copy(X[j * 16:j * 16 + 32], s[j * 32:j * 32 + 32])  # OOB:slice_copy
            T.copy(s, Y)
    return k


def _slice_fill():
    @T.prim_func
    def k(X: T.Tensor((64,), f32), Y: T.Tensor((64,), f32)):
        with T.Kernel(1) as bx:
            s = T.alloc_fragment((64,), f32)
            for j in T.serial(3):
                T.fill(s[j * 32:j * 32 + 32], 1.0)  # OOB:slice_fill
            T.copy(s, Y)
    return k


def _thread_store():
    @T.prim_func
    def k(X: T.Tensor((128,), f32), Y: T.Tensor((128,), f32)):
        with T.Kernel(1) as bx:  # TileLang's default block: 128 threads
            tx = T.get_thread_binding(0)
            s = T.alloc_shared((64,), f32)
            s[tx] = X[tx]  # OOB:thread_store
            if tx < 64:
                Y[tx] = s[tx]
    return k


def _thread_guard_too_wide():
    @T.prim_func
    def k(X: T.Tensor((128,), f32), Y: T.Tensor((128,), f32)):
        with T.Kernel(1, threads=128) as bx:
            tx = T.get_thread_binding(0)
            s = T.alloc_shared((64,), f32)
            if tx < 100:
                s[tx] = X[tx]  # OOB:thread_guard
            if tx < 64:
                Y[tx] = s[tx]
    return k


def _thread_else():
    @T.prim_func
    def k(X: T.Tensor((128,), f32), Y: T.Tensor((128,), f32)):
        with T.Kernel(1, threads=128) as bx:
            tx = T.get_thread_binding(0)
            s = T.alloc_shared((64,), f32)
            if tx < 64:
                s[tx] = X[tx]
            else:
                s[tx] = -X[tx]  # OOB:thread_else
            if tx < 64:
                Y[tx] = s[tx]
    return k


CASES = [
    (_serial_store, "serial_store",
     "index i in dim 0 of 's' takes values 0..63 (i in 0..63); 's' has shape (32,), so "
     "expected 0..31"),
    (_serial_load, "serial_load",
     "index i + 1 in dim 0 of 's' takes values 1..32 (i in 0..31); 's' has shape (32,), so "
     "expected 0..31"),
    (_parallel_store, "parallel_store",
     "index i in dim 0 of 's' takes values 0..63 (i in 0..63); 's' has shape (32, 64), so "
     "expected 0..31"),
    (_parallel_load, "parallel_load",
     "index bx * 16 + i in dim 0 of 's' takes values 0..47 (bx in 0..1, i in 0..31); 's' has "
     "shape (32,), so expected 0..31"),
    (_block_index, "block_index",
     "index bx in dim 0 of 's' takes values 0..3 (bx in 0..3); 's' has shape (2,), so "
     "expected 0..1"),
    (_slice_copy, "slice_copy",
     "region j * 32 +: 32 in dim 0 of 's' covers [0, 96) (j in 0..2); 's' has shape (64,), "
     "so expected starts in 0..32"),
    (_slice_fill, "slice_fill",
     "region j * 32 +: 32 in dim 0 of 's' covers [0, 96) (j in 0..2); 's' has shape (64,), "
     "so expected starts in 0..32"),
    (_thread_store, "thread_store", "in dim 0 of 's' takes values 0..127",
     "'s' has shape (64,), so expected 0..63"),
    (_thread_guard_too_wide, "thread_guard", "in dim 0 of 's' takes values 0..99",
     "'s' has shape (64,), so expected 0..63"),
    (_thread_else, "thread_else", "in dim 0 of 's' takes values 64..127",
     "'s' has shape (64,), so expected 0..63"),
]


@pytest.mark.parametrize("make,tag,fragments", [(c[0], c[1], c[2:]) for c in CASES],
                         ids=[c[1] for c in CASES])
def test_proved_out_of_bounds_is_a_located_compile_error(make, tag, fragments, target):
    located(compile_error(make(), target), tag, *fragments)


# ----------------------------------------------------------- in bounds: they run as written


def _guarded():
    @T.prim_func
    def k(X: T.Tensor((128,), f32), Y: T.Tensor((64,), f32)):
        with T.Kernel(1, threads=128) as bx:
            tx = T.get_thread_binding(0)
            s = T.alloc_shared((64,), f32)
            t = T.alloc_fragment((32,), f32)
            if tx < 64:
                s[tx] = X[tx]
            else:
                s[tx - 64] = s[tx - 64] + X[tx]
            for i in T.serial(64):
                if i < 32:
                    t[i] = s[i] * 2.0
            for i in T.Parallel(64):
                Y[i] = T.if_then_else(i < 32, t[i], s[i])
    return k


def test_guarded_accesses_run(target):
    x = np.random.default_rng(3).standard_normal(128).astype(np.float32)
    s = x[:64] + x[64:]
    want = np.concatenate([2 * s[:32], s[32:]]).astype(np.float64)
    k = tilelang_mini.compile(_guarded(), out_idx=[-1], target=target)
    np.testing.assert_allclose(k(x).astype(np.float64), want, rtol=1e-6, atol=1e-6)
    out, _ = k.simulate(x) if target == "numpy" else (k(x), None)
    np.testing.assert_allclose(np.asarray(out).astype(np.float64), want, rtol=1e-6, atol=1e-6)


# ---------------------------------------------------------------- data-dependent: at run time


def _data_index(kind):
    @T.prim_func
    def k(X: T.Tensor((64,), f32), I: T.Tensor((1,), i32), Y: T.Tensor((64,), f32)):
        with T.Kernel(1) as bx:
            s = T.alloc_shared((32,), f32)
            T.clear(s)
            if kind == "element":
                s[I[0]] = 1.0  # OOB:data_element
            elif kind == "copy_in":
                T.copy(X[0:16], s[I[0]:I[0] + 16])  # OOB:data_copy_in
            else:
                T.copy(s[I[0]:I[0] + 16], Y[32:48])  # OOB:data_copy_out
            T.copy(s, Y[0:32])
    return k


@pytest.mark.parametrize("kind", ["element", "copy_in", "copy_out"])
def test_data_dependent_index_is_a_located_run_time_error(kind, target):
    """An index read from a tensor: checked when it runs, at the line, naming the tile (a copy
    region used to be clipped silently, as only a GM tensor's is)."""
    k = tilelang_mini.compile(_data_index(kind), out_idx=[-1], target=target)
    x = np.arange(64, dtype=np.float32)
    with pytest.raises(KernelRuntimeError) as info:
        k(x, np.array([24], np.int32) if kind != "element" else np.array([40], np.int32))
    MARKED.located(info.value, f"data_{kind}")
    assert "out of bounds for dimension 0 of s[32]" in str(info.value), str(info.value)
    if target == "numpy":  # the simulator runs the same semantics
        with pytest.raises(KernelRuntimeError) as info:
            k.simulate(x, np.array([24 if kind != "element" else 40], np.int32))
        MARKED.located(info.value, f"data_{kind}")
    y = k(x, np.array([16], np.int32))  # in bounds: as written
    want = np.zeros(64)
    if kind == "element":
        want[16] = 1.0
    elif kind == "copy_in":
        want[16:32] = x[:16]
    np.testing.assert_array_equal(y.astype(np.float64), want)
