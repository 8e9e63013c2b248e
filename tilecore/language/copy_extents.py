"""TileLang's rule for a `T.copy` whose two regions have different extents.

TileLang iterates a copy over the region of the more local buffer (fragment/local over shared
over global; the source on a tie), matching the two sides' non-unit dimensions in order and
refusing only when that base is smaller than the source. A decoding kernel relies on it when it
copies `K[b, lo:lo + valid, h, :]` into a `(block_N, dim)` tile with `valid < block_N` and masks
the extra rows. tilecore follows it with one restriction, and says so once per line with a
TileConfigWarning (the copy then touches elements outside the region written in the source):

- base = destination (more local): the source region grows to the destination's extents,
  never shrinks (TileLang's own check); global rows past the tensor's edge read as zero, as
  every tilecore copy is predicated at tensor edges;
- base = source: the destination region takes the source's extents: a partial fill when it is
  larger, a write past the named region when it is smaller (TileLang's behaviour; writes past
  a global tensor's edge are dropped, and `interp` reports two blocks writing one element).

Anything else (different numbers of non-unit dimensions) stays a TileShapeError.
"""

from __future__ import annotations

import warnings

from ..errors import TileConfigWarning, TileShapeError
from ..ir.buffer import Region

_LEVEL = {"global": 0, "shared": 1, "fragment": 2, "local": 2}
_told: set = set()


def _resized(r: Region, base_sq: tuple) -> Region:
    """`r` with its non-unit extents replaced, in order, by `base_sq`."""
    it = iter(base_sq)
    ext = tuple(next(it) if e != 1 else 1 for e in r.extents)
    return Region(r.buffer, r.starts, ext)


def match_extents(sr: Region, dr: Region, loc) -> tuple[Region, Region]:
    """(source, destination) regions with equal squeezed extents under TileLang's rule (see the
    module docstring), or a TileShapeError naming both regions and the fix."""
    s_sq, d_sq = sr.squeezed_shape, dr.squeezed_shape
    if s_sq == d_sq:
        return sr, dr
    base_is_src = _LEVEL[sr.buffer.scope] >= _LEVEL[dr.buffer.scope]
    fits = len(s_sq) == len(d_sq) and (base_is_src or all(s <= d for s, d in zip(s_sq, d_sq)))
    if not fits:
        raise TileShapeError(
            f"T.copy extents do not match: source {sr.buffer.name} region {sr.extents} vs "
            f"destination {dr.buffer.name} region {dr.extents}",
            hint="give both sides the same extents (TileLang's rule, which tilecore follows, "
                 "iterates over the more local side's region and needs it at least as large as "
                 "the source in every non-unit dimension)")
    if base_is_src:
        dr = _resized(dr, s_sq)
        what = (f"T.copy {sr.buffer.name}{sr.extents} -> {dr.buffer.name}: the destination region "
                f"has other extents; {s_sq} elements are written from its start (TileLang's rule)")
    else:
        sr = _resized(sr, d_sq)
        what = (f"T.copy -> {dr.buffer.name}{dr.extents}: the source region of {sr.buffer.name} "
                f"is smaller; {d_sq} elements are read from its start, past the region "
                f"(TileLang's rule; rows past the tensor's edge read as zero)")
    key = (loc, what)
    if key not in _told:
        _told.add(key)
        file, line = (loc.file, loc.line) if loc is not None else ("<tilecore>", 0)
        warnings.warn_explicit(what, TileConfigWarning, file, line)
    return sr, dr
