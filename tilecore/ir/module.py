"""Functions and modules: the unit every pass maps to a new one."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import SourceLoc
from .buffer import Buffer
from .expr import Var
from .stmt import Stmt


@dataclass(frozen=True, eq=False)
class PrimFunc:
    """A kernel: global tensor parameters and a body holding one `KernelLaunch`.

    `dyn_vars` are the symbolic dimensions appearing in parameter shapes, bound at call time.
    """

    name: str
    params: tuple
    body: Stmt
    loc: SourceLoc | None = None
    attrs: tuple = field(default=())

    def __post_init__(self):
        for p in self.params:
            if not isinstance(p, Buffer) or p.scope != "global":
                raise TypeError("PrimFunc parameters must be global buffers")

    @property
    def dyn_vars(self) -> tuple[Var, ...]:
        seen: list[Var] = []
        for p in self.params:
            for s in p.shape:
                if isinstance(s, Var) and all(s is not v for v in seen):
                    seen.append(s)
        return tuple(seen)

    def attr(self, key: str, default=None):
        for k, v in self.attrs:
            if k == key:
                return v
        return default

    def with_body(self, body: Stmt) -> PrimFunc:
        return PrimFunc(self.name, self.params, body, self.loc, self.attrs)

    def with_attr(self, key: str, value) -> PrimFunc:
        attrs = tuple((k, v) for k, v in self.attrs if k != key) + ((key, value),)
        return PrimFunc(self.name, self.params, self.body, self.loc, attrs)

    def script(self) -> str:
        """This function printed as tilecore source."""
        from .printer import print_func

        return print_func(self)

    def __repr__(self) -> str:
        return f"PrimFunc({self.name})"


@dataclass(frozen=True)
class Module:
    """What passes transform: the kernel function plus module-level facts (target, stage)."""

    func: PrimFunc
    attrs: tuple = ()

    def attr(self, key: str, default=None):
        for k, v in self.attrs:
            if k == key:
                return v
        return default

    def with_attr(self, key: str, value) -> Module:
        attrs = tuple((k, v) for k, v in self.attrs if k != key) + ((key, value),)
        return Module(self.func, attrs)

    def with_func(self, func: PrimFunc) -> Module:
        return Module(func, self.attrs)
