"""The examples run as scripts on small shapes and verify; the CLI prints their IR."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"

# Small, awkward shapes (not multiples of the tiles) so the whole set stays fast.
SMALL = {
    "gemm": ["--shape", "70", "45", "33"],
    "prenorm": ["--shape", "70", "24", "100"],
    "rmsnorm": ["--shape", "37", "50"],
    "softmax": ["--shape", "37", "45"],
}


def example_names():
    return sorted(p.stem for p in EXAMPLES.glob("*.py") if not p.name.startswith("_"))


def _run(cmd, **kw):
    env = dict(os.environ, TILELANG_MINI_VERIFY="1")
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env, **kw)


@pytest.mark.parametrize("name", example_names())
def test_example_verifies(name, target):
    r = _run([sys.executable, str(EXAMPLES / f"{name}.py"), *SMALL.get(name, []),
              "--target", target], cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "verified" in r.stdout and "FAILED" not in r.stdout, r.stdout


def _cli():
    exe = shutil.which("tilelang-mini", path=str(Path(sys.executable).parent))
    return [exe] if exe else [sys.executable, "-m", "tilelang_mini.cli"]


def test_cli_ir_all_stages():
    r = _run([*_cli(), "ir", "examples/gemm.py", "--after", "all"], cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert "# ---- IR after frontend ----" in r.stdout
    assert r.stdout.count("@prim_func") >= 2
    assert "gemm(A_s, B_s, C_f)" in r.stdout


def test_cli_ir_dot_and_errors():
    r = _run([*_cli(), "ir", "examples/prenorm.py", "--format", "dot", "--after", "frontend"],
             cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("digraph") and "RAW" in r.stdout
    r = _run([*_cli(), "ir", "examples/gemm.py", "--chip", "no_such_chip"], cwd=ROOT)
    assert r.returncode == 1
    assert "unknown chip 'no_such_chip'" in r.stderr and "Traceback" not in r.stderr


def test_cli_run_forwards_args_and_status():
    r = _run([*_cli(), "run", "examples/softmax.py", "--shape", "5", "7", "--show-ir", "none"],
             cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "verified" in r.stdout and "total wall time" in r.stdout


def test_cli_status_and_compile_errors(tmp_path):
    failing = tmp_path / "failing.py"
    failing.write_text("print('not verified')\nraise SystemExit(3)\n")
    r = _run([*_cli(), "run", str(failing)])
    assert r.returncode == 3 and "FAILED (exit status 3)" in r.stdout
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import tilelang_mini.language as T\n"
        "\n"
        "@T.prim_func\n"
        "def k(X: T.Tensor((8,), 'float32'), Y: T.Tensor((8,), 'float32')):\n"
        "    with T.Kernel(1) as bx:\n"
        "        T.copy(X, Z)\n")
    r = _run([*_cli(), "ir", str(bad)])
    assert r.returncode == 1
    assert f"{bad}:6:" in r.stderr and "name 'Z' is not defined" in r.stderr
    assert "Traceback" not in r.stderr and "^" in r.stderr
