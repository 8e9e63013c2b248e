"""The generated suite for one target: Hypothesis drives `cases()` and `check_case`, shrinks
any failure and reports it as a file; statistics are kept for the pytest summary."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st

from .case import Case, Param
from .generate import DEFAULT_DTYPES, cases
from .report import failure
from .runner import check_case, unsupported

CI_EXAMPLES = 300


@dataclass
class Stats:
    """What one target's run did: programs run, skipped (by reason), the longest one."""

    target: str
    ran: int = 0
    skipped: Counter = field(default_factory=Counter)
    exact: int = 0
    longest: int = 0
    longest_source: str = ""
    features: Counter = field(default_factory=Counter)
    dtype_skips: dict = field(default_factory=dict)

    def summary(self) -> str:
        lines = [f"{self.target}: {self.ran} generated programs ran ({self.exact} compared exactly), "
                 f"{sum(self.skipped.values())} skipped; longest program {self.longest} kernel lines"]
        for d, why in self.dtype_skips.items():
            lines.append(f"    {d} not generated: {why}")
        for why, n in self.skipped.most_common(5):
            lines.append(f"    skipped {n}x: {why}")
        return "\n".join(lines)


RESULTS: dict[str, Stats] = {}


def _probe(dtype: str) -> Case:
    src = ('import tilecore.language as T\n\n\n@T.prim_func\n'
           f'def main(X: T.Tensor((4, 4), {dtype!r}), Out: T.Tensor((4, 4), {dtype!r})):\n'
           '    with T.Kernel(1, threads=128) as bx:\n'
           f'        x = T.alloc_shared((4, 4), {dtype!r})\n'
           '        T.copy(X[0, 0], x)\n        T.copy(x, Out[0, 0])\n')
    return Case(src, (Param("X", (4, 4), dtype, 1.0, 0), Param("Out", (4, 4), dtype, 1.0, 0, True)))


def supported_dtypes(target: str, dtypes=DEFAULT_DTYPES) -> tuple[tuple, dict]:
    """The dtypes `target` accepts (asked through `tile_unsupported` on a copy program) and
    the reasons it gives for the others."""
    ok, why = [], {}
    for d in dtypes:
        reason = unsupported(_probe(d), target)
        if reason:
            why[d] = str(reason)
        else:
            ok.append(d)
    return tuple(ok), why


def check_target(target: str, max_examples: int = CI_EXAMPLES, derandomize: bool = True,
                 dtypes=DEFAULT_DTYPES, shrink: bool = True) -> Stats:
    """Run `max_examples` generated programs on `target` against interp; raises a
    ConformanceFailure naming the (shrunk) failing case's file on the first disagreement."""
    stats = RESULTS.setdefault(target, Stats(target))
    ok_dtypes, stats.dtype_skips = supported_dtypes(target, dtypes)
    if not ok_dtypes:
        return stats
    phases = tuple(Phase) if shrink else tuple(p for p in Phase if p != Phase.shrink)

    @settings(max_examples=max_examples, derandomize=derandomize, deadline=None, database=None,
              phases=phases, print_blob=False,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                     HealthCheck.data_too_large, HealthCheck.large_base_example])
    @given(case=cases(ok_dtypes), seed=st.integers(0, 2**32 - 1))
    def run(case: Case, seed: int) -> None:
        out = check_case(case, target, seed)
        if out.status == "skip":
            stats.skipped[out.detail] += 1
            assume(False)
        if not out.ok:
            raise failure(case, target, seed, out.status, out.detail)
        stats.ran += 1
        stats.exact += case.exact
        stats.features.update(case.features)
        if case.lines > stats.longest:
            stats.longest, stats.longest_source = case.lines, case.source

    run()
    return stats
