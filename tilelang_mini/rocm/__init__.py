"""TileLang's `tilelang.rocm` package (ROCm intrinsics: the matrix-core MFMA emitters of
`rocm.intrinsics.mfma_macro_generator`, ...): its modules import and every name in them is a
stub whose use is a CompileError at the user's line, as `tilelang_mini.cuda`'s (that module's
import finder serves both)."""
from ..cuda import CudaOnly


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return CudaOnly(f"tilelang.rocm.{name}")
