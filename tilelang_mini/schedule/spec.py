"""The IR's executable semantics (the NumPy backend), looked up by name in the backend registry:
the simulator executes each instruction's data effect with it, so simulation and interpretation
cannot disagree."""
from ..runtime.backends import get_backend

semantics = get_backend("numpy").semantics
