"""Running one case on one target and on the oracle, and judging the difference.

The oracle is `interp`. Each case also runs on interp a second time with the blocks in a
shuffled order and uninitialized shared/fragment memory filled with finite garbage instead
of NaN: if that changes the result, the *program* depends on block order or on memory it
never wrote, and is reported as a program bug rather than blamed on any backend.
"""

from __future__ import annotations

import re
import traceback
from dataclasses import dataclass

from tilecore import plugins
from tilecore.errors import TileError

from . import loader
from .case import Case
from .compare import compare
from .inputs import make_args

ORACLE = "interp"


@dataclass(frozen=True)
class Outcome:
    """How a case fared: `status` is pass, skip, mismatch, error or program_bug."""

    status: str
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.status in ("pass", "skip")


def unsupported(case: Case, target: str, func=None) -> str | None:
    """The reason `target` declares for not compiling this case, or None."""
    func = func if func is not None else loader.prim_func(case)
    return plugins.unsupported(plugins.resolve(target), func)  # also asks the lowering target


def execute(case: Case, target: str, seed: int, *, shuffle: int | None = None, func=None) -> list:
    """All argument arrays after running the case on `target` with inputs from `seed`.

    `shuffle` (interp only) runs blocks in an order drawn from that seed, with uninitialized
    memory poisoned by finite values instead of NaN."""
    if func is None:
        k = loader.kernel(case, target)
    else:
        import tilecore

        k = tilecore.compile(func, out_idx=None, target=target)
    args = make_args(case, seed)
    if shuffle is None:
        k(*args)
    else:
        from tilecore_interp.runner import options

        with options(seed=shuffle, poison="value"):
            k(*args)
    return args


def _short_trace(e: BaseException, limit: int = 2000) -> str:
    """The error's last frames and message, without terminal colors, at most `limit` characters."""
    if isinstance(e, TileError):
        text = f"{type(e).__name__}: {e}"
    else:
        text = "".join(traceback.format_exception(type(e), e, e.__traceback__)[-4:]).rstrip()
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)
    return text if len(text) <= limit else text[:limit // 2] + "\n  [...]\n" + text[-limit // 2:]


_ORACLE_CACHE: dict = {}


def _oracle(case: Case, seed: int, func=None):
    """interp's outputs for (case, seed), checked against the adversarial run; an Outcome when
    the oracle fails or the program is ill-formed. Cached: every target compares to the same."""
    key = (case.key, case.params, seed)
    if func is None and key in _ORACLE_CACHE:
        return _ORACLE_CACHE[key]
    try:
        want = execute(case, ORACLE, seed, func=func)
        shuffled = execute(case, ORACLE, seed, shuffle=seed + 1, func=func)
    except Exception as e:  # the oracle failing on a generated program is a generator or interp bug
        if isinstance(e, TileError) and "read of uninitialized" in str(e):
            # TILECORE_CHECK_UNINIT: interp names the read itself; the program is ill-formed
            return Outcome("program_bug", f"the program reads uninitialized memory: {_short_trace(e)}")
        return Outcome("error", f"the oracle (interp) failed: {_short_trace(e)}")
    bug = compare(case, want, shuffled, plugins.resolve(ORACLE))
    if bug is not None:
        want = Outcome("program_bug", "the result depends on block order or uninitialized memory "
                       f"(interp, shuffled blocks and poisoned memory vs plain): {bug}")
    if func is None:
        if len(_ORACLE_CACHE) > 4096:
            _ORACLE_CACHE.clear()
        _ORACLE_CACHE[key] = want
    return want


def check_case(case: Case, target: str, seed: int, func=None) -> Outcome:
    """Run `case` on `target` and on the oracle (plain and adversarial) and compare."""
    try:
        reason = unsupported(case, target, func)
    except TileError as e:
        return Outcome("error", f"the frontend rejected a generated program: {_short_trace(e)}")
    if reason:
        return Outcome("skip", str(reason))
    want = _oracle(case, seed, func)
    if isinstance(want, Outcome):
        return want
    if plugins.resolve(target).kind == ORACLE:
        return Outcome("pass")
    try:
        got = execute(case, target, seed, func=func)
    except Exception as e:
        return Outcome("error", f"target {target} failed: {_short_trace(e)}")
    m = compare(case, want, got, plugins.resolve(target))
    if m is not None:
        return Outcome("mismatch", str(m))
    return Outcome("pass")
