"""The pytest plugin (entry point group `pytest11`): `--tile-target` and `--tile-examples`."""

from __future__ import annotations


def pytest_addoption(parser) -> None:
    """Register the conformance options."""
    group = parser.getgroup("tilecore-conformance")
    group.addoption("--tile-target", action="append", default=[], metavar="NAME",
                    help="a tilecore target to check against interp (repeatable; default: every "
                    "installed target that can run here)")
    group.addoption("--tile-examples", type=int, default=None, metavar="N",
                    help="generated programs per target (default: the CI profile's fixed count)")
