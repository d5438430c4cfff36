"""Chip presets (frozen data): buffers, alignment, pipes, copy paths, sync limits, costs."""
from .presets import CHIPS, DEFAULT_CHIP, Chip, get_chip  # noqa: F401
