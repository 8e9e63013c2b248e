"""The pytest plugin (entry point group `pytest11`): `--tile-target`, `--tile-examples`,
`--tile-long`, `--tile-shards`, `--tile-seed` (the profiles: `tilecore_conformance.profile`).

`pytest --tile-target=cpu` runs the conformance suite against that target from any tree:
when the suite's own test module was not collected, the plugin adds it. Without the option,
tests asking for the `tile_target` fixture run on every installed target that can run here.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def pytest_addoption(parser) -> None:
    """Register the conformance options."""
    group = parser.getgroup("tilecore-conformance")
    group.addoption("--tile-target", action="append", default=[], metavar="NAME",
                    help="a tilecore target to check against interp (repeatable; default: every "
                    "installed target that can run here)")
    group.addoption("--tile-examples", type=int, default=None, metavar="N",
                    help="generated programs per target (default: the CI profile's fixed 300 in "
                    "6 shards); a larger N also draws new programs on every run")
    group.addoption("--tile-long", action="store_true", default=False,
                    help="the long profile: 10,000 generated programs per target in 100 shards "
                    "(spread over cores with -n N), drawn from a random seed")
    group.addoption("--tile-shards", type=int, default=None, metavar="K",
                    help="split each target's generated programs into K test items")
    group.addoption("--tile-seed", type=int, default=None, metavar="S",
                    help="Hypothesis seed of shard 0 (shard i uses S + i): repeats a random run")
    group.addoption("--tile-failures-dir", default=None, metavar="DIR",
                    help="where failing cases are written as runnable files")
    group.addoption("--tile-corpus", default=None, metavar="DIR",
                    help="the examples folder of the fixed corpus (default: tilecore's examples/)")


def pytest_configure(config) -> None:
    """Point failure reports at --tile-failures-dir and the corpus at --tile-corpus."""
    d = config.getoption("tile_failures_dir", None)
    if d:
        os.environ["TILECORE_CONFORMANCE_FAILURES"] = str(Path(d).resolve())
    corpus = config.getoption("tile_corpus", None)
    if corpus:
        os.environ["TILECORE_EXAMPLES"] = str(Path(corpus).resolve())
    # a generated program must never read memory it did not write (interp and emu report it)
    os.environ.setdefault("TILECORE_CHECK_UNINIT", "1")
    # a random base seed is drawn once, in the controller, and handed to pytest-xdist's workers
    # (pytest_configure_node), so every shard of the run shares one base
    given = getattr(config, "workerinput", {}).get("tilecore_seed")
    config.option.tile_seed = given if given is not None else profile(config).seed


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """Give a pytest-xdist worker the controller's base seed (the hook exists only under xdist)."""
    node.workerinput["tilecore_seed"] = node.config.option.tile_seed


def profile(config):
    """The run's generated-program profile (tilecore_conformance.profile)."""
    from .profile import from_options

    return from_options(config.getoption("tile_examples", None),
                        config.getoption("tile_long", False),
                        config.getoption("tile_shards", None),
                        config.getoption("tile_seed", None))


def selected_targets(config) -> list[str]:
    """The targets named with --tile-target, else every installed runnable target."""
    names = config.getoption("tile_target", None) or []
    if names:
        return list(dict.fromkeys(names))
    from tilecore import plugins

    return plugins.targets(runnable_only=True)


def pytest_generate_tests(metafunc) -> None:
    """Parametrize `tile_target` over the selected targets, `tile_shard` over the profile's
    shards and `tile_example` over the corpus."""
    if "tile_target" in metafunc.fixturenames:
        targets = selected_targets(metafunc.config)
        metafunc.parametrize("tile_target", targets, ids=targets)
    if "tile_shard" in metafunc.fixturenames:
        shards = range(profile(metafunc.config).shards)
        metafunc.parametrize("tile_shard", shards, ids=[f"s{i}" for i in shards])
    if "tile_example" in metafunc.fixturenames:
        from .corpus import example_files, load

        params, ids = [], []
        for path in example_files():
            for n, sizes in enumerate(load(path).TEST_SIZES):
                params.append((path, sizes))
                ids.append(f"{path.stem}-{n}")
        metafunc.parametrize("tile_example", params, ids=ids)


@pytest.fixture
def tile_profile(request):
    """The run's Profile: programs per target, shards and seeds."""
    return profile(request.config)


def pytest_collection_modifyitems(session, config, items) -> None:
    """With --tile-target, make sure the suite runs even from a tree that does not contain it."""
    if not config.getoption("tile_target", None):
        return
    from . import test_suite

    suite_path = Path(test_suite.__file__).resolve()
    if any(Path(str(it.path)).resolve() == suite_path for it in items):
        return
    module = pytest.Module.from_parent(session, path=suite_path)
    items.extend(session.genitems(module))


# Summary lines and (target, ran, exact, skipped) counts reported by pytest-xdist workers
# (their RESULTS live in other processes).
_WORKER_SUMMARIES: list[str] = []
_WORKER_COUNTS: list[tuple] = []


def _counts(results) -> list[tuple]:
    return [(s.target, s.ran, s.exact, sum(s.skipped.values())) for s in results.values()]


def pytest_sessionfinish(session) -> None:
    """In a pytest-xdist worker, hand this process's per-target results to the controller."""
    from .suite import RESULTS

    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["tilecore_conformance"] = [s.summary() for s in RESULTS.values()]
        workeroutput["tilecore_counts"] = _counts(RESULTS)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    """Collect a finished xdist worker's summary lines (the hook exists only under xdist)."""
    out = getattr(node, "workeroutput", {})
    _WORKER_SUMMARIES.extend(out.get("tilecore_conformance", []))
    _WORKER_COUNTS.extend(tuple(c) for c in out.get("tilecore_counts", []))


def pytest_terminal_summary(terminalreporter) -> None:
    """Print how many programs ran per target (per process and in all) and the longest one."""
    from .suite import RESULTS

    lines = [s.summary() for s in RESULTS.values()] + sorted(_WORKER_SUMMARIES)
    if not lines:
        return
    terminalreporter.section("tilecore conformance")
    p = profile(terminalreporter.config)
    terminalreporter.write_line(f"profile: {p.programs} programs per target in {p.shards} shards, "
                                f"seeds {p.seed}..{p.seed + p.shards - 1}")
    for line in lines:
        terminalreporter.write_line(line)
    totals: dict[str, list[int]] = {}
    for target, ran, exact, skipped in _counts(RESULTS) + _WORKER_COUNTS:
        t = totals.setdefault(target, [0, 0, 0])
        t[0], t[1], t[2] = t[0] + ran, t[1] + exact, t[2] + skipped
    for target, (ran, exact, skipped) in sorted(totals.items()):
        terminalreporter.write_line(f"TOTAL {target}: {ran} generated programs passed "
                                    f"({exact} compared exactly), {skipped} skipped")
