"""Options: what a compile is for (its own module, so the runtime can build a cache key from it
without loading every pass)."""
from __future__ import annotations

from dataclasses import dataclass

from ..runtime import config


@dataclass(frozen=True)
class Options:
    """What a compile is for: the chip preset and the target backend."""

    chip: str = config.DEFAULT_CHIP
    target: str = config.DEFAULT_TARGET
    expert: bool = False  # the kernel places its own scopes and flags (set by run_pipeline)
