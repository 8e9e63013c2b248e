"""Integer helpers the generated kernels call for `T.floordiv`, `T.floormod` and shifts whose
count is not proven in range: the semantics of `tilecore.semantics` (floor division, shift
counts in [0, compute width)), with a zero divisor or a bad count recorded as a fault in `err`
(the host raises a located TileRuntimeError, as interp does) instead of numba's silent answer.

Operands arrive as int64 already wrapped to their C compute width (`exprs.ExprGen.observed`),
so unsigned 32-bit values are non-negative and `>>` on them is logical, as C's is. Like
`runtime`, every function is `njit(cache=True)`; `cache.runtime_tag` hashes this file too.
"""

from __future__ import annotations

from numba import njit

from .runtime import _JIT


@njit(**_JIT)
def cfloordiv(a, b, err, code):
    """`a // b` rounded toward negative infinity; division by zero reports fault `code`."""
    if b == 0:
        if err[0] == 0:
            err[0] = code
        return a - a
    if b == -1:  # int64's MIN // -1 overflows (a hardware trap); the wrapped answer is -a
        return -a
    return a // b  # numba's int floor division is Python's


@njit(**_JIT)
def cfloormod(a, b, err, code):
    """The remainder of `cfloordiv`, with the divisor's sign; a zero divisor reports `code`."""
    if b == 0:
        if err[0] == 0:
            err[0] = code
        return a - a
    if b == -1:
        return a - a
    return a % b  # Python's remainder: the divisor's sign


@njit(**_JIT)
def cshl(a, s, width, err, code):
    """`a << s` at a compute width of `width` bits (the caller wraps the value); a count outside
    [0, width) reports fault `code` with the count in err[1]."""
    if s < 0 or s >= width:
        if err[0] == 0:
            err[0] = code
            err[1] = s
        return a - a
    return a << s


@njit(**_JIT)
def cshr(a, s, width, err, code):
    """`a >> s` (arithmetic on signed values, logical on non-negative unsigned ones); a count
    outside [0, width) reports fault `code` with the count in err[1]."""
    if s < 0 or s >= width:
        if err[0] == 0:
            err[0] = code
            err[1] = s
        return a - a
    return a >> s
