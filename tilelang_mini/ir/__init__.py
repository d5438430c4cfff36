"""Tile IR: nodes, dtypes, printer, parser (`ir.parser.parse_ir`), verifier, dependency graph."""
from .nodes import *  # noqa: F401,F403
from .printer import print_expr, print_ir, print_region  # noqa: F401
from .parser import parse_ir  # noqa: F401
