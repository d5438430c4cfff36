"""`tilelang.math`: the host-side integer helpers TileLang kernels' factories call."""
from __future__ import annotations


def next_power_of_2(x: int) -> int:
    """The smallest power of two >= x (1 for x <= 1)."""
    x = int(x)
    return 1 if x <= 1 else 1 << (x - 1).bit_length()


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


__all__ = ["next_power_of_2", "cdiv"]
