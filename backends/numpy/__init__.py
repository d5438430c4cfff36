"""NumPy interpreter backend: runs lowered IR through the executable semantics in the core."""
from tilelang_mini.semantics.ops import Env, execute, lower_instruction  # noqa: F401
from tilelang_mini.semantics.run import BACKEND, NumpyArtifact, NumpyBackend  # noqa: F401
