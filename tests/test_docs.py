"""The documentation keeps up with the code: the language reference lists every `T.*` name,
the backend skeleton of docs/write-a-backend.md works, and no doc links outside the repository."""

import importlib.util
import pathlib
import re
import sys

import numpy as np

import tilecore
import tilecore.language as T
from tilecore import plugins

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_language_reference_lists_every_public_name():
    text = (ROOT / "docs" / "language.md").read_text()
    listed = set(re.findall(r"^\| `([A-Za-z_0-9]+)` \|", text, flags=re.M))
    missing = sorted(set(T.__all__) - listed)
    assert not missing, f"docs/language.md lacks {missing}: run python tools/language_ref.py"


def test_backend_skeleton_runs_a_kernel():
    path = ROOT / "docs" / "backend-skeleton" / "tilecore_mydev" / "plugin.py"
    spec = importlib.util.spec_from_file_location("tilecore_mydev_plugin", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    plugins.register(mod, name="mydev-skeleton")
    try:
        @T.prim_func
        def add(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
            with T.Kernel(2, threads=32) as bx:
                for i in T.Parallel(32):
                    B[bx * 32 + i] = A[bx * 32 + i] + 1.0

        a = np.arange(64, dtype=np.float32)
        np.testing.assert_array_equal(tilecore.jit(add, out_idx=[-1], target="mydev")(a), a + 1)
    finally:
        plugins.unregister("mydev-skeleton")


def test_docs_link_nothing_outside_the_repository():
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
            *sorted((ROOT / "backends").glob("*/README.md"))]
    bad = [(d.name, m) for d in docs for m in re.findall(r"\]\((\.\./[^)]*)\)|`(\.\./shared[^`]*)`",
                                                          d.read_text()) if any(m)]
    assert not bad, bad


def test_a_license_is_shipped():
    assert (ROOT / "LICENSE").read_text().strip()


def test_readme_lists_every_environment_variable():
    """The README's table names every `TILECORE_*` variable the code names as a string (how the
    package, the backends and conformance read their settings; issue 16 item 18: one table of
    every environment variable)."""
    literal = re.compile(r"""["'](TILECORE_[A-Z_]+)["']""")
    sources = [*ROOT.glob("tilecore/**/*.py"), *ROOT.glob("backends/*/tilecore_*/**/*.py"),
               *ROOT.glob("conformance/tilecore_conformance/**/*.py")]
    named = {v for path in sources for v in literal.findall(path.read_text())}
    assert "TILECORE_CACHE_DIR" in named, "the scan found none of the known variables: it is broken"
    readme = (ROOT / "README.md").read_text()
    missing = sorted(v for v in named if f"`{v}`" not in readme)
    assert not missing, f"README's environment-variable table lacks {missing}"


def test_readme_first_hour_says_what_issue_16_asks():
    """Issue 16 item 18: the README says to use a venv and what the install weighs, how to get
    torch's CPU build, the fast test loop, and names the language reference, the differences
    from TileLang and the backend walkthrough (which exist, as does the oracle's README);
    item 15: that a cache directory must be trusted like code."""
    readme = (ROOT / "README.md").read_text()
    for needle in ("python -m venv", "1.4 GB", "torch==2.13.0",
                   "--index-url https://download.pytorch.org/whl/cpu", "python -m pytest -q tests",
                   "--tile-target=interp"):
        assert needle in readme, needle
    for doc in ("docs/language.md", "docs/tilelang-differences.md", "docs/write-a-backend.md"):
        assert doc in readme and (ROOT / doc).read_text().strip(), doc
    assert "docs/backend-skeleton/" in (ROOT / "docs" / "write-a-backend.md").read_text()
    assert (ROOT / "backends" / "interp" / "README.md").read_text().strip()
    row = next(ln for ln in readme.splitlines() if ln.startswith("| `TILECORE_CACHE_DIR`"))
    assert "0700" in row and "trust" in row and "like code" in row, row
