"""`tvm.testing`'s test markers that TileLang examples put on their functions
(`@tvm.testing.requires_package("bitblas")` above a kernel factory): tilelang_mini.testing's,
which skip under pytest when the package is missing and otherwise leave the function as it is."""
from ..testing import requires_cuda, requires_package  # noqa: F401

__all__ = ["requires_cuda", "requires_package"]
