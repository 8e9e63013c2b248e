"""`T.Layout` and `T.Fragment`: TileLang's explicit index maps, as data.

`T.Layout(shape, lambda i, j: [...])` maps a logical index of a buffer to a storage index;
`T.Fragment(shape, forward_thread_fn=..., forward_index_fn=...)` maps it to (thread, register).
Both evaluate their maps (`forward`, `thread`) on ints or expressions. `T.annotate_layout`
honours a `T.Layout` of a shared buffer (its physical layout, tilecore.ir.index_layout) and a
`T.Fragment` of a fragment buffer (its register layout, unless a gemm accumulator needs another:
a located error); any other pairing warns once that it is not honoured. A layout never changes
a value, only where it is stored, so results are the same either way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..errors import TileTypeError


def _shape(shape) -> tuple:
    try:
        return tuple(shape)
    except TypeError:
        raise TileTypeError(f"a layout's shape is a tuple of sizes, got {shape!r}",
                            hint="pass the shape as a tuple, e.g. (32, 32)") from None


@dataclass(frozen=True, eq=False)
class Layout:
    """An index map of a buffer of `shape`: `forward(*index)` is the storage index (a list)."""

    shape: tuple
    forward_fn: Callable

    def __init__(self, shape, forward_fn: Callable):
        if not callable(forward_fn):
            raise TileTypeError("T.Layout(shape, fn): fn must be callable, e.g. lambda i, j: [i, j]",
                                hint="pass a function of the logical indices as the second argument")
        object.__setattr__(self, "shape", _shape(shape))
        object.__setattr__(self, "forward_fn", forward_fn)

    def forward(self, *index) -> list:
        """The storage index of logical `index`."""
        out = self.forward_fn(*index)
        return list(out) if isinstance(out, (tuple, list)) else [out]

    def get_output_shape(self) -> list:
        """The storage extent of each output dimension: the map's maximum + 1, evaluated on
        every index of the logical shape (exact for maps that are not monotonic, e.g. XOR)."""
        from ..ir.index_layout import IndexMapError, build_map, tabulate

        shape = tuple(int(s) for s in self.shape)
        try:
            outs = tabulate(shape, *build_map(shape, self.forward_fn))
        except IndexMapError as e:
            raise TileTypeError(f"T.Layout.get_output_shape: {e}",
                                hint="write the map with integer arithmetic of its indices") from None
        return [int(o.max()) + 1 for o in outs]


@dataclass(frozen=True, eq=False)
class Fragment:
    """A register layout of a buffer of `shape`: `thread(*index)` and `index(*index)`."""

    shape: tuple
    forward_thread_fn: Callable | None
    forward_index_fn: Callable | None
    replicate: int

    def __init__(self, shape, forward_fn=None, forward_thread_fn=None, forward_index_fn=None,
                 replicate: int = 1):
        if forward_fn is not None:  # one map returning (thread, register)
            # with replicate > 1 it takes a last `rep` argument (TileLang); the register may not
            # depend on it, so the register map passes replica 0
            forward_thread_fn = lambda *i: forward_fn(*i)[0]  # noqa: E731
            if replicate > 1:
                forward_index_fn = lambda *i: forward_fn(*i, 0)[1]  # noqa: E731
            else:
                forward_index_fn = lambda *i: forward_fn(*i)[1]  # noqa: E731
        object.__setattr__(self, "shape", _shape(shape))
        object.__setattr__(self, "forward_thread_fn", forward_thread_fn)
        object.__setattr__(self, "forward_index_fn", forward_index_fn)
        object.__setattr__(self, "replicate", replicate)

    def thread(self, *index):
        """The thread holding logical `index`."""
        if self.forward_thread_fn is None:
            raise TileTypeError("this T.Fragment has no thread map",
                                hint="build the T.Fragment with forward_thread_fn=...")
        return self.forward_thread_fn(*index)

    def index(self, *index):
        """The register of logical `index` in its thread."""
        if self.forward_index_fn is None:
            raise TileTypeError("this T.Fragment has no register map",
                                hint="build the T.Fragment with forward_index_fn=...")
        return self.forward_index_fn(*index)


__all__ = ["Layout", "Fragment"]
