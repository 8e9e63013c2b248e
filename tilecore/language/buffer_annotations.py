"""TileLang's buffer annotations for `@T.macro` parameters: `T.SharedBuffer(shape, dtype)`,
`T.FragmentBuffer(shape, dtype)`, `T.LocalBuffer(shape, dtype)`. Python evaluates them when the
`def` runs; when a kernel inlines the macro (`Parser.inline_macro`), each annotated argument is
checked: a buffer of that memory scope, shape and dtype, else a TileTypeError at the call
naming the parameter and the difference.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import dtypes as dt
from ..errors import TileTypeError
from ..ir.buffer import Buffer
from .views import BufferView


@dataclass(frozen=True)
class BufferAnnotation:
    """A macro parameter's expected buffer: its scope, shape and dtype."""

    scope: str
    shape: tuple
    dtype: dt.DType

    def check(self, name: str, arg, loc) -> None:
        """Raise a TileTypeError at `loc` when `arg` is not such a buffer."""
        what = {"shared": "T.SharedBuffer", "fragment": "T.FragmentBuffer",
                "local": "T.LocalBuffer"}[self.scope]
        buf = arg.base if isinstance(arg, BufferView) else arg
        shape = tuple(arg.shape) if isinstance(arg, (Buffer, BufferView)) else None
        if not isinstance(buf, Buffer):
            problem = f"got {type(arg).__name__}"
        elif buf.scope != self.scope:
            problem = f"{buf.name} is a {buf.scope} buffer"
        elif buf.dtype != self.dtype:
            problem = f"{buf.name} is {buf.dtype}"
        elif not _same_shape(shape, self.shape):
            problem = f"{buf.name} has shape {shape}"
        else:
            return
        raise TileTypeError(f"macro parameter {name!r} is annotated {what}({list(self.shape)}, "
                            f"{self.dtype}): {problem}", loc,
                            hint="pass a buffer of that scope, shape and dtype, or change the "
                                 "annotation")


def _same_shape(got, want) -> bool:
    """Shapes agree where both are ints (a symbolic dimension matches anything)."""
    if got is None or len(got) != len(want):
        return False
    return all(not (isinstance(g, int) and isinstance(w, int)) or g == w for g, w in zip(got, want))


def _maker(scope: str, name: str):
    def make(shape, dtype="float32") -> BufferAnnotation:
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        return BufferAnnotation(scope, shape, dt.as_dtype(dtype))

    make.__name__ = name.removeprefix("T.")
    make.__doc__ = f"`{name}(shape, dtype)`: a macro parameter annotation (see module docstring)."
    return make


SharedBuffer = _maker("shared", "T.SharedBuffer")
FragmentBuffer = _maker("fragment", "T.FragmentBuffer")
LocalBuffer = _maker("local", "T.LocalBuffer")


def check_macro_args(fn, arguments: dict, loc) -> None:
    """Check the macro `fn`'s annotated parameters against the bound `arguments`."""
    for name, ann in getattr(fn, "__annotations__", {}).items():
        if isinstance(ann, BufferAnnotation) and name in arguments:
            ann.check(name, arguments[name], loc)


__all__ = ["BufferAnnotation", "FragmentBuffer", "LocalBuffer", "SharedBuffer", "check_macro_args"]
