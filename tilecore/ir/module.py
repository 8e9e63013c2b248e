"""Functions and modules: the unit every pass maps to a new one."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..errors import SourceLoc
from .buffer import Buffer
from .expr import Var
from .stmt import Stmt


@dataclass(frozen=True, eq=False)
class PrimFunc:
    """A kernel: global tensor parameters and a body holding one `KernelLaunch`.

    `dyn_vars` are the symbolic dimensions appearing in parameter shapes and the scalar
    parameters (attr "scalar_params": integer Vars), bound at call time. Attr "signature" (set
    only when there are scalar parameters) is the user's parameter order: Buffers and Vars.
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
        """The call-time integers: scalar parameters (attr "scalar_params", `n: T.int32` in
        the signature), then the symbolic dimensions of the parameters' shapes."""
        seen: list[Var] = list(self.attr("scalar_params", ()))
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
class ModuleAttrs:
    """What a module carries besides its function, as named fields (values only, no functions):

    - `target`: the compile target (a `tilecore.target.Target`) or None for a hand-built module;
    - `options`: the compile `tilecore.options.Options` (None for a hand-built module), for
      backends' `tile_build`; passes read them from the TargetDesc;
    - `diagnostics`: notes passes made for the user (`tilecore.contract.Diagnostic`), e.g. why a
      gemm runs without tensor cores; shown by `Kernel.get_ir` and warned once by compile.
    """

    target: object = None
    options: object = None
    diagnostics: tuple = ()


@dataclass(frozen=True)
class Module:
    """What passes transform: the kernel function plus its typed attributes."""

    func: PrimFunc
    attrs: ModuleAttrs = field(default_factory=ModuleAttrs)

    def __post_init__(self):
        if not isinstance(self.attrs, ModuleAttrs):
            raise TypeError(f"Module.attrs must be a ModuleAttrs, got {type(self.attrs).__name__}")

    def with_attrs(self, **changes) -> Module:
        """This module with some attribute fields replaced."""
        return Module(self.func, replace(self.attrs, **changes))

    def with_func(self, func: PrimFunc) -> Module:
        """This module with another function (same attributes)."""
        return Module(func, self.attrs)
