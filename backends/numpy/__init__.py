"""NumPy interpreter backend: a thin adapter that runs lowered IR through the executable semantics
in the core (`tilelang_mini.semantics`)."""
from tilelang_mini.semantics.ops import Env, execute, lower_instruction  # noqa: F401
from .backend import BACKEND, NumpyArtifact, NumpyBackend  # noqa: F401
