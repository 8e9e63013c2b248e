"""The generated suite for one target: Hypothesis drives `cases()` and `check_case`, shrinks
any failure and reports it as a file; statistics are kept for the pytest summary."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from . import loader
from .case import Case, Param
from .generate import DEFAULT_DTYPES, cases
from .profile import CI_EXAMPLES
from .reduce import minimize
from .report import ConformanceFailure, failure
from .runner import check_case, unsupported


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

    def record(self, case: Case) -> None:
        """Count a program that ran and passed."""
        self.ran += 1
        self.exact += case.exact
        self.features.update(case.features)
        if case.lines > self.longest:
            self.longest, self.longest_source = case.lines, case.source

    def summary(self) -> str:
        lines = [f"{self.target}: {self.ran} generated programs ran ({self.exact} compared exactly), "
                 f"{sum(self.skipped.values())} skipped; longest program {self.longest} kernel lines"]
        if self.longest_source:
            safe = "".join(c if c.isalnum() else "_" for c in self.target)
            path = loader.work_dir() / f"longest_{safe}.py"
            path.write_text(self.longest_source)
            lines[0] += f" ({path})"
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


_HEALTH = [HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large,
           HealthCheck.large_base_example]
# Families of simple programs searched when the shrunk failure is still long.
SIMPLE_FAMILIES = ({"min_stages": 1, "max_stages": 1, "producers": ("load",)},
                   {"max_stages": 1, "producers": ("gemm",)})
SIMPLE_EXAMPLES = 100
SHORT = 15  # kernel lines: a failing program this short needs no further search
SHRINK_BUDGET_S = 60.0


def _search(target: str, strategy, n: int, derandomize: bool, shrink: bool, stats: Stats | None,
            seed: int | None = None):
    """Run `n` cases from `strategy` (drawn from Hypothesis seed `seed` when given); the
    ConformanceFailure of the first failure, shrunk for at most SHRINK_BUDGET_S seconds when
    `shrink`, or None when every case passes."""
    phases = tuple(Phase) if shrink else tuple(p for p in Phase if p != Phase.shrink)
    failing: dict = {}
    first: list = []

    @settings(max_examples=n, derandomize=derandomize, deadline=None, database=None, phases=phases,
              print_blob=False, report_multiple_bugs=False, suppress_health_check=_HEALTH)
    @given(case=strategy, seed=st.integers(0, 2**32 - 1))
    def run(case: Case, seed: int) -> None:
        key = (case.key, case.params, seed)
        if key in failing:
            raise failing[key]
        if first and time.monotonic() - first[0] > SHRINK_BUDGET_S:
            return  # shrinking is over budget: only known failures still fail
        out = check_case(case, target, seed)
        if out.status == "skip":
            if stats is not None:
                stats.skipped[out.detail] += 1
            assume(False)
        if not out.ok:
            failing[key] = failure(case, target, seed, out.status, out.detail)
            first.append(time.monotonic())
            raise failing[key]
        if stats is not None and not first:
            stats.record(case)

    if seed is not None:
        run = hypothesis_seed(seed)(run)
    try:
        run()
    except ConformanceFailure as f:
        return f
    return None


def check_target(target: str, max_examples: int = CI_EXAMPLES, derandomize: bool = True,
                 dtypes=DEFAULT_DTYPES, shrink: bool = True, seed: int | None = None) -> Stats:
    """Run `max_examples` generated programs on `target` against interp; raises a
    ConformanceFailure naming the (shrunk) failing case's file on the first disagreement.
    `seed` (a Hypothesis seed, which turns `derandomize` off) picks which programs are drawn.

    The failure is shrunk by Hypothesis (within a time budget); when the result is still long,
    families of simple programs are searched for a shorter one failing the same way (it may
    show a different bug: fix it and rerun to see the next). Finally every buffer the program
    does not need is dropped."""
    stats = RESULTS.setdefault(target, Stats(target))
    ok_dtypes, stats.dtype_skips = supported_dtypes(target, dtypes)
    if not ok_dtypes:
        return stats
    if seed is not None:
        derandomize = False
    f = _search(target, cases(ok_dtypes), max_examples, derandomize, shrink, stats, seed)
    if f is None:
        return stats
    if not shrink:
        raise f
    for family in SIMPLE_FAMILIES:
        if f.case.lines <= SHORT:
            break
        g = _search(target, cases(ok_dtypes, **family), SIMPLE_EXAMPLES, True, True, None)
        if g is not None and g.status == f.status and g.case.lines < f.case.lines:
            f = g
    small = minimize(f.case, target, f.seed, f.status)
    if small is not f.case:
        f = failure(small, target, f.seed, f.status, check_case(small, target, f.seed).detail)
    raise f


def check_shard(target: str, profile, shard: int, programs: int | None = None) -> tuple[Stats, int]:
    """Shard `shard` of `profile` (tilecore_conformance.profile.Profile) on `target`: its share
    of `programs` (default: the profile's) drawn from the shard's seed. Returns the target's
    running Stats and how many programs this shard ran (Stats accumulate over a process's
    shards)."""
    before = RESULTS[target].ran if target in RESULTS else 0
    n = profile.share(shard, programs)
    if n == 0:
        return RESULTS.setdefault(target, Stats(target)), 0
    stats = check_target(target, max_examples=n, seed=profile.shard_seed(shard))
    return stats, stats.ran - before
