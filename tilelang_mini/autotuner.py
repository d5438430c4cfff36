"""TileLang's `tilelang.autotuner` import path: `autotune` (tilelang_mini/autotune.py)."""
from .autotune import AutoTuned as AutoTuner, AutotuneResult, autotune  # noqa: F401
