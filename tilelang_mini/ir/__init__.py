"""Tile IR: nodes, dtypes, printer, parser (`ir.parser.parse_ir`), verifier, dependency graph.

The nodes load with the package; the printer and the parser (its lark grammar) when first used."""
from .nodes import *  # noqa: F401,F403

_LAZY = {"print_expr": ".printer", "print_ir": ".printer", "print_region": ".printer",
         "parse_ir": ".parser"}


def __getattr__(name):
    from .lazy import load_lazy
    return load_lazy(__name__, globals(), _LAZY, name)
