"""LLVM-JIT CPU backend (target="llvm"): tile IR compiled to vectorised native code."""
from .runtime import BACKEND, STATS, LLVMArtifact, LLVMBackend, host_target  # noqa: F401
