"""The DeepSeek kernel library: DeepGEMM's API (`deep_gemm`), FlashMLA decode (`flash_mla`),
mHC pre/post (`mhc`) and `topk`, each a tile kernel written in the DSL.

Every public function takes NumPy arrays (or torch CPU tensors), writes its outputs in place as
the original does, runs on the llvm target by default (`target="numpy"` on request, `chip=` for
the preset) and offers `f.kernels(*args)` (the compiled JITKernels, for get_ir / simulate) and
`f.estimate(*args, chip=...)` (the performance model's estimate of the whole call).
"""
from . import deep_gemm, flash_mla, mhc  # noqa: F401
from .topk import topk  # noqa: F401
