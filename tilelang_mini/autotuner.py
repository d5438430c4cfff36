"""TileLang's `tilelang.autotuner` import path: `autotune` (tilelang_mini/autotune.py) and
`set_autotune_inputs`."""
from __future__ import annotations

import contextlib

import sys

from .autotune import AutoTuned, AutoTuner, AutotuneResult, autotune  # noqa: F401

# importing the submodule `autotune` set the package attribute `tilelang_mini.autotune` to the
# module; the package's public `autotune` is the decorator (as its lazy attribute gives it)
sys.modules[__package__].autotune = autotune


@contextlib.contextmanager
def set_autotune_inputs(*tensors):
    """`with set_autotune_inputs(q, k, v): kernel(...)`: TileLang profiles the configurations on
    these tensors. Here tuning ranks configurations by the estimate (no inputs needed) or measures
    on generated inputs of the kernel's shapes, so the tensors are accepted and not used."""
    yield tensors


__all__ = ["AutoTuner", "AutotuneResult", "autotune", "set_autotune_inputs"]
