"""NumPy interpreter backend: the executable specification of the tile IR semantics."""
from . import semantics
from .interpreter import BACKEND, NumpyArtifact, NumpyBackend  # noqa: F401
from .ops import Env, execute, lower_instruction  # noqa: F401

NumpyBackend.semantics = semantics
