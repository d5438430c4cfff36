"""Hand-set flags in a loop whose trip count is read at run time (tilelang-ascend's fused
sigmoid-gating delta rule: `for t in T.serial(seq_len)` with `seq_len` from cu_seqlens, the
next token prefetched under `if t + 1 < seq_len` with its own set_flag). check_sync walks such
a loop as two trips, the second the last, and decides conditions on the trip count the same
way (before: each branch choice applied to both trips, so one choice left a set never waited
for and the other a wait never set: a false deadlock). Both targets and the simulator,
against float64 NumPy sums."""
import numpy as np
import pytest

import tilelang_mini as tilelang
import tilelang_mini.language as T

from util import close, f64, rand

TMAX, W = 6, 64


def prefetch_sum(guarded=False):
    """guarded: causal_conv1d's form, the first load and its set under `if n > 0`, the loop
    over `(n + 3) // 4` trips waiting for it (each branch choice of the if is a scenario of the
    walk; the one where it is false leaves the loop no trip, outside the walk's premise that a
    run-time loop runs: before, that scenario walked two trips and reported a wait never set)."""
    @T.prim_func
    def main(X: T.Tensor((2, TMAX, W), "float32"), N: T.Tensor((1,), "int32"),
             Y: T.Tensor((2, W), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            buf = T.alloc_ub([W], "float32")
            acc = T.alloc_ub([W], "float32")
            with T.Scope("V"):
                n = N[0]
                trips = (n + 3) // 4 if guarded else n
                T.tile.fill(acc, 0.0)
                if not guarded or n > 0:  # trace-time True unless guarded (short circuit)
                    T.copy(X[vid, 0, :], buf)
                    T.set_flag("mte2", "v", 0)
                for t in T.serial(trips):
                    T.wait_flag("mte2", "v", 0)
                    T.tile.add(acc, acc, buf)
                    T.set_flag("v", "mte2", 1)
                    if t + 1 < trips:
                        T.wait_flag("v", "mte2", 1)
                        T.copy(X[vid, t + 1, :], buf)
                        T.set_flag("mte2", "v", 0)
                T.wait_flag("v", "mte2", 1)
                T.set_flag("v", "mte3", 2)
                T.wait_flag("v", "mte3", 2)
                T.copy(acc, Y[vid, :])
    return main


@pytest.mark.parametrize("target", ["numpy", "llvm"])
@pytest.mark.parametrize("n", [1, 2, 5])
def test_prefetch_under_trip_count_condition(target, n):
    x = rand((2, TMAX, W), seed=n)
    want = f64(x)[:, :n].sum(1)
    kernel = tilelang.compile(prefetch_sum(), out_idx=[2], target=target)
    close(np.asarray(kernel(x, np.array([n], np.int32))), want, reduce_len=n)
    if target == "numpy":
        got, _ = kernel.simulate(x, np.array([n], np.int32))
        close(np.asarray(got), want, reduce_len=n)


@pytest.mark.parametrize("target", ["numpy", "llvm"])
@pytest.mark.parametrize("m", [1, 4, 5, 21])
def test_first_load_under_count_condition(target, m):
    x = rand((2, TMAX, W), seed=m)
    rows = (m + 3) // 4
    want = f64(x)[:, :rows].sum(1)
    kernel = tilelang.compile(prefetch_sum(guarded=True), out_idx=[2], target=target)
    close(np.asarray(kernel(x, np.array([m], np.int32))), want, reduce_len=rows)
    if target == "numpy":
        got, _ = kernel.simulate(x, np.array([m], np.int32))
        close(np.asarray(got), want, reduce_len=rows)


def test_guarded_first_load_still_checks_the_loop(tmp_path):
    """The facts only drop scenarios the walk's premise excludes: a race inside the loop
    (the add reads buf before the wait) is still reported."""
    import importlib.util
    import inspect
    import textwrap
    code = textwrap.dedent(inspect.getsource(prefetch_sum)).replace(
        '                    T.wait_flag("mte2", "v", 0)\n                    T.tile.add(acc, acc, buf)',
        '                    T.tile.add(acc, acc, buf)\n                    T.wait_flag("mte2", "v", 0)')
    path = tmp_path / "guarded.py"
    path.write_text("import tilelang_mini.language as T\nTMAX, W = 6, 64\n\n" + code)
    spec = importlib.util.spec_from_file_location("guarded", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with pytest.raises(tilelang.CompileError, match="race on buf"):
        tilelang.compile(mod.prefetch_sum(guarded=True), out_idx=[2], target="numpy")
