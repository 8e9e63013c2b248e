"""What a C-style renderer hands to its backend's launcher: source, entry point, launch shape.

Target-neutral, so the CUDA, HIP and Metal launchers share one description of a rendered kernel
and one host-side evaluator for launch extents that depend on symbolic shapes.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import semantics as S
from ..dtypes import DType
from ..errors import TileInternalError
from ..ir.expr import BinOp, Cast, Const, Expr, Select, Unary, Var, binop, cast, unary


@dataclass(frozen=True)
class KernelParam:
    """One kernel parameter in order: a global tensor (pointer) or a symbolic dimension (value)."""

    name: str
    dtype: DType
    is_pointer: bool


@dataclass(frozen=True)
class RenderedKernel:
    """A rendered kernel: `source` defines `entry`; launch it on `grid` blocks (expressions over
    the symbolic dimensions) of `block` threads with `smem_bytes` of dynamic shared memory."""

    source: str
    entry: str
    grid: tuple
    block: tuple[int, int, int]
    smem_bytes: int
    params: tuple[KernelParam, ...]

    def __post_init__(self):
        if len(self.block) != 3 or len(self.grid) != 3:
            raise TypeError("grid and block are 3-D")


def fast_math_requested(module) -> bool:
    """Whether the module's compile options allow approximate float32 division (TileLang's
    `tl.enable_fast_math`, default False as in TileLang): `module.attrs.options.fast_math`,
    False when the module carries no options or its options have no such field. See
    docs/architecture.md, "Code generation", for what renderers do with it."""
    options = getattr(module.attrs, "options", None)
    return bool(getattr(options, "fast_math", False))


def host_int(e, env: dict[str, int]) -> int:
    """Evaluate an integer expression over symbolic dimensions (`env`: name -> value) on the host.

    The expression is rebuilt through the IR's own constructors, which fold integer constants
    with the kernel's C semantics, so host and device agree on e.g. `ceildiv` of a dynamic size.
    """
    r = _fold(e, env)
    if isinstance(r, Const) and r.dtype.is_int:
        return int(r.value)
    if isinstance(r, Const) and r.dtype.is_bool:
        return int(bool(r.value))
    raise TileInternalError(f"launch extent {e!r} does not fold to an integer")


def _fold(e, env: dict[str, int]) -> Expr:
    if isinstance(e, int):
        return Const(e, _int32())
    if isinstance(e, Const):
        return e
    if isinstance(e, Var):
        if e.name not in env:
            raise TileInternalError(f"launch extent uses {e.name}, which is not a symbolic dimension")
        return Const(env[e.name], e.dtype)
    if isinstance(e, BinOp):
        a, b = _fold(e.a, env), _fold(e.b, env)
        if e.op in ("lt", "le", "gt", "ge", "eq", "ne") and isinstance(a, Const) and isinstance(b, Const):
            return Const(bool(S.COMPARE[e.op](a.value, b.value)), e.dtype)
        return binop(e.op, a, b)
    if isinstance(e, Cast):
        return cast(_fold(e.value, env), e.dtype)
    if isinstance(e, Select):
        c = _fold(e.cond, env)
        if isinstance(c, Const):
            return _fold(e.true_value if c.value else e.false_value, env)
    if isinstance(e, Unary) and e.op == "neg":
        a = _fold(e.a, env)
        if isinstance(a, Const) and a.dtype.is_int:
            return unary("neg", a)
    raise TileInternalError(f"cannot evaluate launch extent {e!r} on the host")


def _int32() -> DType:
    from .. import dtypes

    return dtypes.int32
