"""The llvm runtime with processes and threads: a child forked after the parent ran a kernel (and
a fork-started multiprocessing pool) runs it correctly; changing TILELANG_MINI_NUM_THREADS while
other threads call a kernel is safe. Each case runs in its own interpreter with a timeout, so a
hang fails the test instead of stopping the suite."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

KERNEL = '''
import os, sys, threading
import numpy as np
import tilelang_mini
import tilelang_mini.language as T


@T.prim_func
def add_one(A: T.Tensor((64, 32), "float32"), B: T.Tensor((64, 32), "float32")):
    with T.Kernel(8) as bx:
        a = T.alloc_fragment((8, 32), "float32")
        T.copy(A[bx * 8, 0], a)
        for i, j in T.Parallel(8, 32):
            a[i, j] = a[i, j] + 1.0
        T.copy(a, B[bx * 8, 0])


k = tilelang_mini.compile(add_one, out_idx=[-1], target="llvm")
x = np.arange(64 * 32, dtype=np.float64).reshape(64, 32)
ref = x + 1.0                      # independent float64 reference
x = x.astype(np.float32)


def ok(shift=0.0):
    return bool((k(x + np.float32(shift)).astype(np.float64) == ref + shift).all())


assert ok(), "parent"
'''


def run_script(tmp_path, body: str, threads: str = "2"):
    script = tmp_path / "case.py"
    script.write_text(KERNEL + textwrap.dedent(body))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
               TILELANG_MINI_NUM_THREADS=threads,
               TILELANG_MINI_CACHE_DIR=str(tmp_path / "cache"))
    try:
        r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                           timeout=90, env=env, cwd=tmp_path)
    except subprocess.TimeoutExpired:
        pytest.fail("the process hung (killed after 90 s)")
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_forked_child_runs_a_kernel_the_parent_used(tmp_path):
    out = run_script(tmp_path, '''
        pid = os.fork()
        if pid == 0:
            os._exit(0 if ok(1.0) and ok(2.0) else 3)
        _, status = os.waitpid(pid, 0)
        print("child exit", os.waitstatus_to_exitcode(status))
        assert ok(3.0)
    ''')
    assert "child exit 0" in out


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_fork_started_multiprocessing_pool(tmp_path):
    out = run_script(tmp_path, '''
        import multiprocessing as mp
        with mp.get_context("fork").Pool(2) as pool:
            results = pool.map(ok, [0.0, 1.0, 2.0, 3.0])
        print("pool", results)
        assert all(results) and ok(4.0)
    ''')
    assert "pool [True, True, True, True]" in out


def test_changing_the_thread_count_while_threads_call_a_kernel(tmp_path):
    out = run_script(tmp_path, '''
        errors, stop = [], threading.Event()

        def caller():
            try:
                while not stop.is_set():
                    if not ok():
                        errors.append("wrong result")
            except Exception as err:
                errors.append(repr(err))

        callers = [threading.Thread(target=caller) for _ in range(3)]
        for t in callers:
            t.start()
        for n in range(300):
            os.environ["TILELANG_MINI_NUM_THREADS"] = str(1 + n % 4)
            ok()
        stop.set()
        for t in callers:
            t.join()
        print("errors", len(errors), errors[:3])
    ''')
    assert "errors 0 []" in out
