"""The disk cache looked up before a kernel factory is traced (runtime/trace_key.py, runtime/
kernel.py `compile_call`): a hit runs neither the factory nor any pass, and whatever the traced
kernel depends on (closure values, arguments, globals and helpers the factory names, options,
the compiler's source) is in the key, so that changing it misses. On both targets, every result
compared against a float64 NumPy reference."""
import os
import sys

import numpy as np
import pytest

import tilelang_mini
import tilelang_mini.language
from tilelang_mini.runtime import cache
from kernels import scale_rows
from test_cache import fresh_runs

TARGETS = ("numpy", "llvm")
CALLS = []  # one entry per kernel traced (a hit before tracing traces none)
GAIN = 1.0  # a module global the factory reads


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("TILELANG_MINI_CACHE_DIR", str(d))
    monkeypatch.setenv("TILELANG_MINI_CACHE", "1")
    CALLS.clear()
    parse = tilelang_mini.language.parse_prim_func
    monkeypatch.setattr(tilelang_mini.language, "parse_prim_func", lambda fn: CALLS.append(fn) or parse(fn))
    return d


def bias(i):
    return i * 0.5


def affine(n, factor):
    """The kernel reads a global and a helper's result through the factory's value."""
    return scale_rows(n, factor * GAIN + bias(2))


def run_affine(target, n=16, factor=3.0, chip=None, out_idx=(-1,)):
    k = tilelang_mini.jit(out_idx=list(out_idx), target=target, chip=chip)(affine)(n, factor)
    x = np.random.default_rng(n).standard_normal((n, 32)).astype(np.float32)
    want = x.astype(np.float64) * (factor * GAIN + bias(2))
    np.testing.assert_allclose(k(x), want, rtol=1e-6, atol=1e-5)
    return k


def calls_entries(d, target):
    return sorted((d / f"{target}-calls").glob("*.bin"))


@pytest.mark.parametrize("target", TARGETS)
def test_a_hit_traces_nothing_and_runs_no_pass(target, cache_dir):
    cold = run_affine(target)
    assert not cold.from_cache and len(CALLS) == 1 and len(calls_entries(cache_dir, target)) == 1
    warm = run_affine(target)
    assert warm.from_cache and len(CALLS) == 1       # the factory did not run
    assert warm._compilation is None                 # nor did any pass
    if target == "numpy":  # the batched run, rebuilt at the first call, ran as it did cold
        assert warm.artifact.last_run[0] == cold.artifact.last_run[0] == "batched"
        assert warm.artifact.body._build is not None  # no block ran plain: never built
    assert warm.get_ir("frontend") == cold.get_ir("frontend")
    assert warm.get_ir(list(cold.compilation.stages)[-1]) == \
        cold.get_ir(list(cold.compilation.stages)[-1])   # recomputed when asked for
    assert warm.prim_func.script() == cold.prim_func.script()  # traced when asked for
    assert len(CALLS) == 2


@pytest.mark.parametrize("target", TARGETS)
def test_argument_option_and_out_idx_changes_miss(target, cache_dir):
    run_affine(target)
    assert not run_affine(target, factor=5.0).from_cache       # an argument
    assert not run_affine(target, n=24).from_cache
    assert not run_affine(target, chip="ascend950").from_cache  # an option
    other = "llvm" if target == "numpy" else "numpy"
    assert run_affine(target).from_cache and not run_affine(other).from_cache
    k = run_affine(target, out_idx=(1,))                       # same kernel, other out_idx
    assert k.out_idx == (1,)
    assert len(calls_entries(cache_dir, target)) == 5


@pytest.mark.parametrize("target", TARGETS)
def test_global_and_helper_changes_miss(target, cache_dir, monkeypatch):
    run_affine(target)
    monkeypatch.setattr(sys.modules[__name__], "GAIN", 2.0)
    k = run_affine(target)                   # the reference reads the new value too
    assert not k.from_cache
    monkeypatch.setattr(sys.modules[__name__], "bias", lambda i: i * 0.25)
    assert not run_affine(target).from_cache  # a helper the factory calls: other code
    assert run_affine(target).from_cache


def test_closure_values_are_in_the_key(cache_dir):
    def make(factor):
        return tilelang_mini.jit(out_idx=[-1], target="llvm")(lambda n: affine(n, factor))

    x = np.random.default_rng(1).standard_normal((8, 32)).astype(np.float32)
    for factor, hit in ((2.0, False), (3.0, False), (2.0, True)):
        k = make(factor)(8)
        assert k.from_cache == hit
        np.testing.assert_allclose(k(x), x.astype(np.float64) * (factor * GAIN + bias(2)),
                                   rtol=1e-6)


def test_a_changed_compiler_misses(cache_dir, monkeypatch):
    run_affine("llvm")
    monkeypatch.setattr(cache, "_FINGERPRINT", {})
    monkeypatch.setattr(tilelang_mini, "__version__", tilelang_mini.__version__ + "+changed")
    k = run_affine("llvm")
    assert not k.from_cache and len(CALLS) == 2


class Opaque:  # a user object: its effect on the kernel cannot be keyed before tracing
    factor = 4.0


def test_an_unkeyable_call_is_traced_and_keyed_on_its_ir(cache_dir):
    def factory(n, cfg):
        return affine(n, cfg.factor)

    x = np.random.default_rng(2).standard_normal((8, 32)).astype(np.float32)
    cfg = Opaque()
    for factor in (4.0, 6.0, 6.0):
        cfg.factor = factor
        k = tilelang_mini.jit(out_idx=[-1], target="llvm")(factory)(8, cfg)
        np.testing.assert_allclose(k(x), x.astype(np.float64) * (factor * GAIN + bias(2)),
                                   rtol=1e-6)
    assert len(CALLS) == 3 and k.from_cache     # traced each time; the IR key hit at last
    assert not calls_entries(cache_dir, "llvm")


@pytest.mark.parametrize("target", TARGETS)
def test_a_spoiled_call_entry_is_recompiled(target, cache_dir):
    run_affine(target)
    (entry,) = calls_entries(cache_dir, target)
    meta, _ = cache.read_entry(entry, entry.stem)
    cache.write_entry(entry, entry.stem, meta, [b"\x80\x05cos\nsystem\n."])  # not IR
    run_affine(target)
    assert len(CALLS) == 2                       # traced again (the IR key may still hit)
    assert run_affine(target).from_cache


def test_load_ir_builds_nothing_but_ir():
    import pickle
    assert cache.load_ir(pickle.dumps(os.getcwd)) is None
    assert cache.load_ir(b"garbage") is None


@pytest.mark.parametrize("target", TARGETS)
def test_hit_before_tracing_in_a_fresh_process(target, cache_dir, tmp_path):
    outs = fresh_runs(tmp_path, "import test_cache_calls as t", "import tilelang_mini.language as T",
                      "parse = T.parse_prim_func",
                      "T.parse_prim_func = lambda fn: t.CALLS.append(fn) or parse(fn)",
                      f"k = t.run_affine({target!r})",
                      "print('from_cache', k.from_cache, 'traced', len(t.CALLS))")
    assert "from_cache False traced 1" in outs[0]
    assert "from_cache True traced 0" in outs[1]
