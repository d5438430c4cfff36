"""The modules of each backend package form an acyclic import graph (function-local imports
count: a cycle held together by imports inside functions is still a cycle), and no module uses
another module's private names (`from .x import _y`, `x._y` of a sibling module, or `_y` of an
object other than `self` that the module does not define itself): what one module offers another
is public. Read from the source with `ast`."""
import ast
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = sorted(p for p in (ROOT / "backends").iterdir() if (p / "__init__.py").exists())


def _trees(pkg: Path) -> dict:
    return {p.stem: ast.parse(p.read_text(), str(p)) for p in sorted(pkg.glob("*.py"))}


def _sibling_imports(tree, names) -> list:
    """(module imported, names taken from it, line) for every import of a sibling module,
    wherever the import statement is (module level or inside a function)."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module is None:          # from . import a, b as c
                for a in node.names:
                    if a.name in names:
                        out.append((a.name, (), node.lineno))
            elif node.module in names:      # from .a import x, y
                out.append((node.module, tuple(a.name for a in node.names), node.lineno))
    return out


def _defined_here(tree) -> set:
    """The names this module defines: functions, methods, classes and `self.x = ...` fields
    (a private name of one of its own objects is its own business)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            out.add(node.attr)
    return out


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


@pytest.mark.parametrize("pkg", PACKAGES, ids=[p.name for p in PACKAGES])
def test_no_import_cycle(pkg):
    trees = _trees(pkg)
    graph = nx.DiGraph()
    graph.add_nodes_from(trees)
    for name, tree in trees.items():
        for mod, _, _ in _sibling_imports(tree, trees):
            if mod != name:
                graph.add_edge(name, mod)
    cycles = list(nx.simple_cycles(graph))
    assert not cycles, f"import cycles in {pkg.name}: {cycles}"


@pytest.mark.parametrize("pkg", PACKAGES, ids=[p.name for p in PACKAGES])
def test_no_private_name_across_modules(pkg):
    trees = _trees(pkg)
    bad = []
    for name, tree in trees.items():
        aliases = set()   # names bound to sibling modules in this module
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module is None:
                aliases |= {a.asname or a.name for a in node.names if a.name in trees}
        for mod, taken, line in _sibling_imports(tree, trees):
            bad += [f"{name}.py:{line} imports {mod}.{n}" for n in taken if _is_private(n)]
        own = _defined_here(tree)
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and _is_private(node.attr)):
                continue
            owner = node.value
            if isinstance(owner, ast.Name) and owner.id in ("self", "cls") or (
                    node.attr in own and not (isinstance(owner, ast.Name) and owner.id in aliases)):
                continue
            what = f"{owner.id}." if isinstance(owner, ast.Name) else "."
            if isinstance(owner, ast.Name) and owner.id in aliases:
                what = f"module {owner.id}."
            bad.append(f"{name}.py:{node.lineno} uses {what}{node.attr}")
    assert not bad, "private names used across modules:\n" + "\n".join(bad)


def test_the_checks_see_what_they_look_for():
    """The helpers find a function-local import and a private attribute of another module."""
    tree = ast.parse("def f():\n    from .b import _x\n    return c._y\n")
    assert _sibling_imports(tree, {"b"}) == [("b", ("_x",), 2)]
    assert [n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)] == ["_y"]
    assert "_y" not in _defined_here(tree)
    assert "_y" in _defined_here(ast.parse("class C:\n    def _y(self):\n        pass\n"))
