"""What a pass is: a named pure `(Module, TargetDesc) -> Module` function with a documented
invariant. A pass reads everything it knows about the target from the description (facts,
tensorization answers, options) and never calls the plugin manager."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..ir.module import Module
from ..target import TargetDesc


@dataclass(frozen=True)
class Pass:
    """A pipeline step. `when(desc)` says whether it applies to a target (default: always)."""

    name: str
    fn: Callable[[Module, TargetDesc], Module]
    when: Callable[[TargetDesc], bool] | None = None

    def applies(self, desc: TargetDesc) -> bool:
        """Whether this pass runs for `desc`."""
        return self.when is None or bool(self.when(desc))

    def __call__(self, module: Module, desc: TargetDesc) -> Module:
        return self.fn(module, desc)

    @property
    def doc(self) -> str:
        """The pass's docstring: the invariant it establishes."""
        return (self.fn.__doc__ or "").strip()


def tile_pass(name: str, when=None):
    """Decorator: turn `fn(module, desc) -> module` into a Pass named `name`."""

    def deco(fn):
        return Pass(name, fn, when)

    return deco
