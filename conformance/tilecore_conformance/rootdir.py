"""A pytest plugin for tilecore's own repository (loaded by its pyproject: `-p
tilecore_conformance.rootdir`): the repository root is collected as a plain folder.

The root has an `__init__.py` (so that a clone named `tilecore/` beside a user's script does
not shadow the installed package; see that file). pytest would collect such a root as a
`Package`, and a Package imports its `__init__.py` before its first test with the folder
*above* the root prepended to `sys.path`: every folder beside the clone then shadowed the
modules the tests import by name (a folder `gemm/` next to the clone for examples/gemm.py).
The root holds no test setup, so nothing is lost by not importing it.
"""

from __future__ import annotations

import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_collect_directory(path, parent):
    """The rootdir as a `pytest.Dir` even when it holds an `__init__.py` (never a Package, so
    its parent folder never lands on sys.path); every other folder as pytest decides."""
    if path == parent.config.rootpath and (path / "__init__.py").is_file():
        return pytest.Dir.from_parent(parent, path=path)
    return None
