"""`tilecore.math`: host-side integer helpers kernels use for tile sizes (TileLang's names)."""

from __future__ import annotations


def cdiv(a: int, b: int) -> int:
    """Ceiling division of Python ints (`T.ceildiv` is the in-kernel one)."""
    return -(-a // b)


def next_power_of_2(x: int) -> int:
    """The smallest power of two >= x (1 for x <= 1)."""
    return 1 if x <= 1 else 1 << (int(x) - 1).bit_length()


def prev_power_of_2(x: int) -> int:
    """The largest power of two <= x (x >= 1)."""
    if x < 1:
        raise ValueError(f"prev_power_of_2 needs x >= 1, got {x}")
    return 1 << (int(x).bit_length() - 1)


def is_power_of_2(x: int) -> bool:
    """Whether x is a positive power of two."""
    return x > 0 and x & (x - 1) == 0


__all__ = ["cdiv", "next_power_of_2", "prev_power_of_2", "is_power_of_2"]
