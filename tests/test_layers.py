"""The layering of the compiler, read from its import statements and its run-time module look-ups
(import_module, __import__, sys.modules with a constant name): nothing under tilelang_mini/
imports or looks up a backend (runtime/ finds them through entry points); ir/ imports nothing
above it; transform/ receives its options instead of reading the environment; only
runtime/config.py reads TILELANG_MINI_* variables."""
import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "tilelang_mini"


def _modules():
    for path in sorted(PKG.rglob("*.py")):
        yield path.relative_to(ROOT), ast.parse(path.read_text(), str(path))


def _imports(rel: Path, tree) -> set[str]:
    """Absolute names of the modules `tree` imports (relative imports resolved)."""
    package = list(rel.with_suffix("").parts[:-1]) if rel.name != "__init__.py" \
        else list(rel.parent.parts)
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            mod = ".".join(base + ([node.module] if node.module else []))
            out.add(mod)
            out |= {f"{mod}.{a.name}" for a in node.names}
    return out


MODULES = list(_modules())


def _where(rel: Path) -> str:
    return rel.parts[1] if len(rel.parts) > 2 else rel.stem


def _looked_up(tree) -> set[str]:
    """Modules named by a constant string where a module is looked up at run time:
    importlib.import_module("..."), __import__("..."), sys.modules["..."]."""
    out = set()
    for node in ast.walk(tree):
        arg = None
        if isinstance(node, ast.Call) and ast.unparse(node.func) in (
                "importlib.import_module", "import_module", "__import__") and node.args:
            arg = node.args[0]
        elif isinstance(node, ast.Subscript) and ast.unparse(node.value) == "sys.modules":
            arg = node.slice
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            out.add(arg.value)
    return out


def violations(rel: Path, tree) -> list[str]:
    """What module `rel` (parsed as `tree`) breaks of the layering rules."""
    imports = _imports(rel, tree) | _looked_up(tree)
    folder = _where(rel)
    out = []
    # no edge into backends/, runtime/ included: it finds targets by their entry points
    out += [f"uses {m}" for m in sorted(imports) if m == "backends" or m.startswith("backends.")]
    if folder == "ir":
        out += [f"ir/ uses {m}" for m in sorted(imports)
                if m.startswith("tilelang_mini.")
                and not m.startswith(("tilelang_mini.ir", "tilelang_mini.errors"))]
    if folder in ("transform", "ir", "sim", "semantics", "report", "arch", "frontend"):
        out += [f"{folder}/ uses {m}" for m in sorted(imports)
                if m.startswith("tilelang_mini.runtime.config")]
    return out


@pytest.mark.parametrize("rel, tree", MODULES, ids=[str(m[0]) for m in MODULES])
def test_layering(rel, tree):
    assert violations(rel, tree) == [], rel


@pytest.mark.parametrize("rel, source", [
    ("tilelang_mini/sim/x.py", "from backends.numpy import interpreter"),
    ("tilelang_mini/runtime/x.py", "import backends.llvm"),
    ("tilelang_mini/sim/x.py", "def f():\n    from backends import numpy"),
    ("tilelang_mini/runtime/x.py", "import importlib\nimportlib.import_module('backends.numpy')"),
    ("tilelang_mini/runtime/x.py", "import sys\nsys.modules['backends.numpy'].X = 1"),
    ("tilelang_mini/ir/x.py", "from ..sim import pipes"),
    ("tilelang_mini/ir/sub/x.py", "from ...transform import util"),
    ("tilelang_mini/ir/x.py", "from .. import arch"),
    ("tilelang_mini/ir/x.py", "def f():\n    from tilelang_mini.runtime import kernel"),
    ("tilelang_mini/transform/x.py", "from ..runtime import config"),
])
def test_the_layering_check_finds_what_it_forbids(rel, source):
    """The rules above can fail: each planted edge is one they name."""
    assert violations(Path(rel), ast.parse(source)) != []


@pytest.mark.parametrize("rel, source", [
    ("tilelang_mini/ir/x.py", "from . import nodes\nfrom ..errors import CompileError"),
    ("tilelang_mini/runtime/x.py", "from .backends import get_backend"),  # the registry
    ("tilelang_mini/sim/x.py", "from ..ir import analysis"),
])
def test_the_layering_check_passes_what_it_allows(rel, source):
    assert violations(Path(rel), ast.parse(source)) == []


def _reads_environment(tree) -> bool:
    """`os.environ[...]` read, `os.environ.get(...)` or `os.getenv(...)` (setting variables for a
    child process, or copying the environment to pass it on, is not reading one)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) \
                and ast.unparse(node.value) == "os.environ":
            return True
        if isinstance(node, ast.Call) and ast.unparse(node.func) in ("os.environ.get", "os.getenv"):
            return True
    return False


def test_only_the_config_module_reads_the_environment():
    readers = [str(rel) for rel, tree in MODULES if _reads_environment(tree)]
    assert readers == ["tilelang_mini/runtime/config.py"], readers


def test_the_driver_passes_the_pipeline_its_choices(monkeypatch, capsys):
    import kernels
    import tilelang_mini
    from tilelang_mini.transform.pipeline import Options, run_pipeline

    monkeypatch.setenv("TILELANG_MINI_PRINT_AFTER", "legalize")
    prim = kernels.softmax(16, 16)
    run_pipeline(prim.ir, Options())  # the pass list reads no environment variable
    assert "IR after" not in capsys.readouterr().err
    run_pipeline(prim.ir, Options(), print_after=("check",))
    assert "# ---- IR after check ----" in capsys.readouterr().err
    tilelang_mini.compile(prim, out_idx=[-1], target="numpy")  # runtime reads it, passes it in
    err = capsys.readouterr().err
    assert "# ---- IR after legalize ----" in err and "IR after check" not in err
