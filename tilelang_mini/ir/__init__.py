"""Tile IR: nodes, dtypes, printer, parser, verifier and dependency graph."""
from .nodes import *  # noqa: F401,F403
from .printer import print_ir, print_expr, print_region  # noqa: F401
