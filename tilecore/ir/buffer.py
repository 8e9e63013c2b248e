"""Buffers and regions of buffers."""

from __future__ import annotations

from dataclasses import dataclass

from ..dtypes import DType
from .expr import Const, Expr, Var, const_int

SCOPES = ("global", "shared", "fragment", "local")


@dataclass(frozen=True, eq=False)
class Buffer:
    """A multi-dimensional array in one memory scope; compares by identity.

    `shape` entries are ints, or `Var`s for symbolic (`T.dynamic`) dimensions of global tensors.
    `is_var` marks a one-element local made by `T.alloc_var`, read and written by plain name.
    `layout` (thread-level flat shared buffers only): the `tilecore.ir.smem_layout.SharedLayout`
    placing the user's tile in it; None means plain row-major.
    """

    name: str
    shape: tuple
    dtype: DType
    scope: str
    is_var: bool = False
    layout: object = None

    def __post_init__(self):
        if self.scope not in SCOPES:
            raise TypeError(f"unknown buffer scope {self.scope}")
        if not isinstance(self.dtype, DType):
            raise TypeError("Buffer.dtype must be a DType")
        for s in self.shape:
            if not (isinstance(s, int) or isinstance(s, Var)):
                raise TypeError(f"buffer dimension must be int or Var, got {s!r}")

    @property
    def static_shape(self) -> tuple[int, ...] | None:
        """The shape as ints, or None when a dimension is symbolic."""
        if all(isinstance(s, int) for s in self.shape):
            return tuple(self.shape)
        return None

    @property
    def numel(self) -> int | None:
        shape = self.static_shape
        if shape is None:
            return None
        n = 1
        for s in shape:
            n *= s
        return n

    def __repr__(self) -> str:
        return f"Buffer({self.name}, {self.shape}, {self.dtype}, {self.scope})"

    @property
    def data(self) -> BufferData:
        """TileLang's `buf.data`: the storage of the buffer, for another view of it
        (`T.Tensor(shape, dtype, buf.data)`, `tilecore.language.global_views`)."""
        return BufferData(self)


@dataclass(frozen=True, eq=False)
class BufferData:
    """The storage handle of `buffer` (`buf.data`): only `T.Tensor(shape, dtype, data)` takes it."""

    buffer: Buffer


@dataclass(frozen=True)
class Region:
    """A rectangular part of a buffer: start per dimension (expressions) and constant extents."""

    buffer: Buffer
    starts: tuple
    extents: tuple[int, ...]

    def __post_init__(self):
        if len(self.starts) != len(self.buffer.shape) or len(self.extents) != len(self.buffer.shape):
            raise TypeError(f"region of {self.buffer.name} has the wrong rank")
        for s in self.starts:
            if not isinstance(s, Expr):
                raise TypeError("region starts must be Exprs")
        for e in self.extents:
            if not isinstance(e, int) or e < 1:
                raise TypeError("region extents must be positive ints")

    @staticmethod
    def full(buffer: Buffer) -> Region:
        """The whole of a buffer with a static shape."""
        shape = buffer.static_shape
        if shape is None:
            raise TypeError(f"{buffer.name} has a symbolic shape")
        return Region(buffer, tuple(Const(0, _i32()) for _ in shape), shape)

    @property
    def is_full(self) -> bool:
        """True when the region covers the whole (static) buffer."""
        return self.buffer.static_shape == self.extents and all(const_int(s) == 0 for s in self.starts)

    @property
    def squeezed_shape(self) -> tuple[int, ...]:
        """Extents with the size-1 dimensions removed: how copies match regions of other ranks."""
        return tuple(e for e in self.extents if e != 1)


def _i32():
    from .. import dtypes

    return dtypes.int32
