"""Start-up: `import tilelang_mini` (and the DSL, and `jit`) load no heavy dependency until it is
needed: LLVM when the llvm target is first used, networkx for graphs, matplotlib for plots, the
lark grammar for IR text (times are measured in benchmarks/cache_hit.py, not here)."""
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("llvmlite", "networkx", "matplotlib", "lark")


def loaded_after(code: str) -> set:
    probe = (f"{code}\nimport sys\nprint(' '.join(sorted({{m.split('.')[0] for m in sys.modules}} "
             f"& set({HEAVY!r}))))")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                       env=env)
    assert r.returncode == 0, r.stderr
    return set(r.stdout.split())


def test_importing_the_package_and_the_language_loads_nothing_heavy():
    assert loaded_after("import tilelang_mini") == set()
    assert loaded_after("import tilelang_mini\nimport tilelang_mini.language as T\n"
                        "tilelang_mini.jit, tilelang_mini.compile") == set()


def test_the_llvm_target_loads_llvm_when_used():
    assert "llvmlite" in loaded_after(
        "from tilelang_mini.runtime.backends import get_backend\nget_backend('llvm')")


IR_TEXT = '''@prim_func(source="add_one.py")
def add_one(X: Tensor((4, 8), "float32"), Y: Tensor((4, 8), "float32")):
    with Kernel(1) as (bx):
        x = alloc_fragment((4, 8), "float32")
        copy(X, x)
        for i, j in Parallel(4, 8):
            x[i, j] = x[i, j] + 1.0
        copy(x, Y)
'''


def test_compile_ir_and_the_frontend_work_without_importing_the_language_first():
    # `import tilelang_mini` then `compile_ir` (or `import tilelang_mini.frontend`) in a fresh
    # process was an ImportError: the frontend loaded the language, which imported the
    # half-loaded frontend back
    run = (f"import numpy as np, tilelang_mini\n"
           f"k = tilelang_mini.compile_ir({IR_TEXT!r}, out_idx=[-1])\n"
           f"x = np.arange(32, dtype=np.float32).reshape(4, 8)\n"
           f"assert (k(x) == x + 1).all()\n")
    loaded_after(run)
    loaded_after("import tilelang_mini.frontend\nimport tilelang_mini.language as T\n"
                 "assert callable(T.parse_prim_func)")


def test_compiling_a_kernel_loads_no_graph_or_plot_library():
    # the sync checker printed its statements through ir.graph, whose networkx import was a
    # tenth of a second of every process's first compile
    run = (f"import sys\nsys.path.insert(0, {str(ROOT / 'examples')!r})\n"
           "import numpy as np, tilelang_mini\nfrom gemm import matmul\n"
           "a = np.ones((64, 32), np.float32)\nb = np.ones((32, 48), np.float32)\n"
           "for target in ('numpy', 'llvm'):\n"
           "    k = tilelang_mini.compile(matmul.factory(64, 48, 32, dtype='float32'), "
           "out_idx=[-1], target=target)\n"
           "    assert (k(a, b) == 32).all()\n")
    assert loaded_after(run) - {"llvmlite"} == set()
