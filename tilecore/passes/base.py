"""What a pass is: a named pure `Module -> Module` function with a documented invariant."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..ir.module import Module
from ..target import TargetFacts


@dataclass(frozen=True)
class Pass:
    """A pipeline step. `when(facts)` says whether it applies to a target (default: always)."""

    name: str
    fn: Callable[[Module, TargetFacts], Module]
    when: Callable[[TargetFacts], bool] | None = None

    def applies(self, facts: TargetFacts) -> bool:
        return self.when is None or bool(self.when(facts))

    def __call__(self, module: Module, facts: TargetFacts) -> Module:
        return self.fn(module, facts)

    @property
    def doc(self) -> str:
        return (self.fn.__doc__ or "").strip()


def tile_pass(name: str, when=None):
    """Decorator: turn `fn(module, facts) -> module` into a Pass named `name`."""

    def deco(fn):
        return Pass(name, fn, when)

    return deco
