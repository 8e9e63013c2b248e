"""Plain Python helpers called from a kernel body with kernel values (`_mask(i, j, block)`).

TileLang runs such a helper as Python on its IR objects, whose operators (`==` included) build
expressions. tilecore's expressions compare structurally under `==` (they are dataclasses), so
running the helper as Python could turn `i == j` into a build-time `False`: a wrong kernel. A
helper that receives a kernel scalar is therefore *parsed* like the kernel itself and inlined:
its statements emit into the kernel and its `return` value is the call's value. `return` must be
decided at build time (at the end of the body, or in an `if` on Python values).
"""

from __future__ import annotations

import ast

from ..errors import TileSyntaxError
from .parser import Parser, _Scope


class _Return(Exception):
    """Unwinds a helper's body at its (build-time) `return`."""

    def __init__(self, value):
        super().__init__()
        self.value = value


class HelperParser(Parser):
    """Parses one helper function's body into the calling kernel; see the module docstring."""

    def inline(self, args, kwargs, node):
        """The helper's return value (None without `return`), its statements emitted."""
        import inspect

        fdef = self.tree.body[0]
        try:
            sig = inspect.signature(self.fn).bind(*args, **kwargs)
        except TypeError as e:
            raise TileSyntaxError(f"bad arguments to {self.fn.__name__}: {e}",
                                  hint=f"call {self.fn.__name__} with the parameters it declares") from e
        sig.apply_defaults()
        self.scopes = [_Scope("helper")]
        self.scopes[0].vars.update(sig.arguments)
        try:
            for s in fdef.body:
                self.stmt(s)
        except _Return as r:
            return r.value
        return None

    def _stmt(self, node):
        if isinstance(node, ast.Return):
            if any(s.kind in ("if", "loop") for s in self.scopes):
                raise TileSyntaxError("`return` inside a loop or a branch on a kernel value is not "
                                      "supported in a helper called from a kernel", self.loc(node),
                                      hint="compute the value with T.if_then_else and return it "
                                           "at the end")
            raise _Return(None if node.value is None else self.ev(node.value))
        return super()._stmt(node)


def is_user_helper(fn) -> bool:
    """A plain function of the user's (not tilecore's, not a library's) with readable source."""
    import inspect

    if not inspect.isfunction(fn) or fn.__name__ == "<lambda>":
        return False
    mod = getattr(fn, "__module__", "") or ""
    if mod.split(".")[0] in ("tilecore", "torch", "numpy", "functools", "math", "operator"):
        return False
    try:
        inspect.getsource(fn)
    except (OSError, TypeError):
        return False
    return True


__all__ = ["HelperParser", "is_user_helper"]
