"""Options: what a compile is for, as the passes receive it (its own module, so the runtime can
build a cache key from it without loading every pass)."""
from __future__ import annotations

from dataclasses import dataclass

from ..arch.presets import DEFAULT_CHIP

DEFAULT_TARGET = "numpy"  # a compile that names no target (TILELANG_MINI_TARGET overrides)


@dataclass(frozen=True)
class Options:
    """What a compile is for: the chip preset and the target backend."""

    chip: str = DEFAULT_CHIP
    target: str = DEFAULT_TARGET
    expert: bool = False  # the kernel places its own scopes and flags (set by run_pipeline)
