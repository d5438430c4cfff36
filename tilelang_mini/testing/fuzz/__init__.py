"""Differential fuzzer: generated kernels (valid and mistaken) and mutated IR text, run on the
numpy and llvm targets and the simulator on both chips in worker processes, against independent
float64 NumPy references. `python -m tilelang_mini.testing.fuzz --minutes N` (docs/testing.md)."""
from .case import Case  # noqa: F401
from .families import FAMILIES, make_case  # noqa: F401
from .runner import run_cases, summarize  # noqa: F401
