"""Python AST -> Tile IR."""
from .parser import KernelBuilder, PrimFunc, parse_prim_func  # noqa: F401
