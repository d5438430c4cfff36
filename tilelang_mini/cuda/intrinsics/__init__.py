"""`tilelang.cuda.intrinsics`: stubs (see tilelang_mini/cuda/__init__.py) except the 2:4 sparsity
layout contract `sparse_layout`, which is host-side metadata arithmetic."""
from .. import CudaOnly


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return CudaOnly(f"tilelang.cuda.intrinsics.{name}")
