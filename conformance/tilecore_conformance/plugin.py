"""The pytest plugin (entry point group `pytest11`): `--tile-target`, `--tile-examples`.

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
                    help="generated programs per target (default: the CI profile's fixed 300, "
                    "derandomized); a larger N also draws new programs on every run")
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


def selected_targets(config) -> list[str]:
    """The targets named with --tile-target, else every installed runnable target."""
    names = config.getoption("tile_target", None) or []
    if names:
        return list(dict.fromkeys(names))
    from tilecore import plugins

    return plugins.targets(runnable_only=True)


def pytest_generate_tests(metafunc) -> None:
    """Parametrize `tile_target` over the selected targets and `tile_example` over the corpus."""
    if "tile_target" in metafunc.fixturenames:
        targets = selected_targets(metafunc.config)
        metafunc.parametrize("tile_target", targets, ids=targets)
    if "tile_example" in metafunc.fixturenames:
        from .corpus import example_files, load

        params, ids = [], []
        for path in example_files():
            for n, sizes in enumerate(load(path).TEST_SIZES):
                params.append((path, sizes))
                ids.append(f"{path.stem}-{n}")
        metafunc.parametrize("tile_example", params, ids=ids)


@pytest.fixture
def tile_examples(request) -> tuple[int, bool]:
    """(programs per target, derandomize): the CI profile unless --tile-examples is given."""
    from .suite import CI_EXAMPLES

    n = request.config.getoption("tile_examples", None)
    return (CI_EXAMPLES, True) if n is None else (n, n <= CI_EXAMPLES)


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


# Summary lines reported by pytest-xdist workers (their RESULTS live in other processes).
_WORKER_SUMMARIES: list[str] = []


def pytest_sessionfinish(session) -> None:
    """In a pytest-xdist worker, hand this process's per-target results to the controller."""
    from .suite import RESULTS

    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["tilecore_conformance"] = [s.summary() for s in RESULTS.values()]


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    """Collect a finished xdist worker's summary lines (the hook exists only under xdist)."""
    _WORKER_SUMMARIES.extend(getattr(node, "workeroutput", {}).get("tilecore_conformance", []))


def pytest_terminal_summary(terminalreporter) -> None:
    """Print how many programs ran per target and the longest one."""
    from .suite import RESULTS

    lines = [s.summary() for s in RESULTS.values()] + sorted(_WORKER_SUMMARIES)
    if not lines:
        return
    terminalreporter.section("tilecore conformance")
    for line in lines:
        terminalreporter.write_line(line)
