"""Unique naming, shared by the frontend, the printers and lowering."""

from __future__ import annotations


def fresh_name(base: str, used: set) -> str:
    """`base`, or `base_1`, `base_2`, ... : the first not in `used`, which is then recorded."""
    name, k = base, 1
    while name in used:
        name = f"{base}_{k}"
        k += 1
    used.add(name)
    return name
