"""The disk cache of compiled kernels (tilelang_mini/runtime/cache.py): looked up before any pass
runs, keyed on what determines the result, and never loading what is not this key's entry."""
import os
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tilelang_mini
from backends.llvm import STATS
from tilelang_mini.runtime import cache
from kernels import scale_rows as scale

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("TILELANG_MINI_CACHE_DIR", str(d))
    monkeypatch.setenv("TILELANG_MINI_CACHE", "1")
    return d


def compile_scale(n=16, factor=3.0, **kw):
    return tilelang_mini.compile(scale(n, factor), out_idx=[-1], target="llvm", **kw)


def check_scale(k, n=16, factor=3.0):
    x = np.arange(n * 32, dtype=np.float64).reshape(n, 32)
    np.testing.assert_array_equal(k(x.astype(np.float32)), (x * factor).astype(np.float32))


def entries(d):
    return sorted((d / "llvm").glob("*.bin"))


def test_hit_skips_every_pass_and_stages_are_recomputed_when_asked(cache_dir):
    cold = compile_scale()
    assert not cold.from_cache and len(entries(cache_dir)) == 1
    hits = STATS["cache_hits"]
    warm = compile_scale()
    assert warm.from_cache and STATS["cache_hits"] == hits + 1
    assert warm._compilation is None            # no pass ran
    check_scale(warm)
    assert warm.get_kernel_source() == cold.get_kernel_source()
    assert warm.get_ir("insert_sync") == cold.get_ir("insert_sync")  # recomputed lazily
    x = np.ones((16, 32), np.float32)
    out, _ = warm.simulate(x)
    np.testing.assert_array_equal(out, x * 3)


def test_key_holds_closure_values_and_chip(cache_dir):
    check_scale(compile_scale(factor=3.0), factor=3.0)
    k = compile_scale(factor=5.0)            # same source text, another closure value
    assert not k.from_cache
    check_scale(k, factor=5.0)
    assert not compile_scale(chip="ascend950").from_cache
    assert len(entries(cache_dir)) == 3


def test_cache_can_be_disabled(cache_dir, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_CACHE", "0")
    compile_scale()
    assert not compile_scale().from_cache
    assert not cache_dir.exists()


def _swap(a: Path, b: Path):
    da, db = a.read_bytes(), b.read_bytes()
    a.write_bytes(db)
    b.write_bytes(da)


def _truncate(p: Path):
    p.write_bytes(p.read_bytes()[:-100])


def _garbage(p: Path):
    p.write_bytes(os.urandom(4096))


def _flip_checksummed_byte(p: Path):
    data = bytearray(p.read_bytes())
    data[len(data) // 2] ^= 0xFF
    p.write_bytes(bytes(data))


def _fifo(p: Path):
    p.unlink()
    os.mkfifo(p)


def _symlink_to_dev_zero(p: Path):
    p.unlink()
    p.symlink_to("/dev/zero")


def _directory(p: Path):
    p.unlink()
    p.mkdir()


def _empty(p: Path):
    p.write_bytes(b"")


@pytest.mark.parametrize("spoil", [_truncate, _garbage, _flip_checksummed_byte, _fifo,
                                   _symlink_to_dev_zero, _directory, _empty])
def test_a_spoiled_entry_is_ignored_and_recompiled(spoil, cache_dir):
    if spoil is _fifo and not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs on this platform")
    compile_scale()
    (entry,) = entries(cache_dir)
    spoil(entry)
    k = compile_scale()                      # must neither hang nor crash nor load it
    assert not k.from_cache
    check_scale(k)
    if spoil is not _directory:              # replaced by a good entry
        assert stat.S_ISREG(os.lstat(entry).st_mode)
        assert compile_scale().from_cache


def test_entries_swapped_between_keys_are_not_loaded(cache_dir):
    compile_scale(n=16)
    (a,) = entries(cache_dir)
    compile_scale(n=24)
    (b,) = [p for p in entries(cache_dir) if p != a]
    _swap(a, b)                              # each is well formed, but another key's entry
    for n in (16, 24):
        k = compile_scale(n=n)
        assert not k.from_cache
        check_scale(k, n=n)


def test_a_device_entry_is_not_read(cache_dir):
    compile_scale()
    (entry,) = entries(cache_dir)
    entry.unlink()
    try:
        os.mknod(entry, 0o600 | stat.S_IFCHR, os.makedev(1, 5))  # /dev/zero's numbers
    except (OSError, AttributeError):
        pytest.skip("cannot create a device node here")
    k = compile_scale()
    assert not k.from_cache
    check_scale(k)


def test_missing_unwritable_or_impossible_cache_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_CACHE_DIR", str(tmp_path / "a" / "b"))  # created
    check_scale(compile_scale())
    assert compile_scale().from_cache
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    monkeypatch.setenv("TILELANG_MINI_CACHE_DIR", str(ro))
    try:
        check_scale(compile_scale())
        check_scale(compile_scale())
    finally:
        ro.chmod(0o755)
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("TILELANG_MINI_CACHE_DIR", str(blocker))
    check_scale(compile_scale())
    assert not compile_scale().from_cache


def test_read_entry_checks_its_own_key(tmp_path):
    path = tmp_path / "k.bin"
    cache.write_entry(path, "key-a", {"x": 1}, [b"payload"])
    assert cache.read_entry(path, "key-a") == ({"x": 1, "key": "key-a"}, [b"payload"])
    assert cache.read_entry(path, "key-b") is None
    assert cache.read_entry(tmp_path / "missing.bin", "key-a") is None


def fresh_runs(tmp_path, *lines: str, runs: int = 2) -> list[str]:
    """stdout of `runs` fresh Python processes, one after the other, each running `lines`
    with the tests folder and the repository importable (a missing entry, then hits)."""
    script = tmp_path / "fresh.py"
    script.write_text("\n".join([f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r})",
                                  *lines, ""]))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    outs = []
    for _ in range(runs):
        r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                           timeout=120, env=env)
        assert r.returncode == 0, r.stderr
        outs.append(r.stdout)
    return outs


def test_hit_in_a_fresh_process(cache_dir, tmp_path):
    outs = fresh_runs(tmp_path, "from test_cache import compile_scale, check_scale",
                      "k = compile_scale()", "check_scale(k)", "print('from_cache', k.from_cache)")
    assert "from_cache False" in outs[0] and "from_cache True" in outs[1]
