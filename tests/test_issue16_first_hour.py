"""Regression tests of issue 16's items 12 (NumPy-integer sizes) and 18 (a clone named
`tilecore/` next to a user's script must not shadow the installed package)."""

import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest
from optional_backends import needs_interp

import tilecore
import tilecore.language as T
from tilecore.errors import TileTypeError

ROOT = pathlib.Path(__file__).resolve().parents[1]


# ----------------------------------------------------------------------------- item 12
def _numpy_sized():
    """Every size a NumPy integer: a tensor dimension (one alone, too), the grid, threads,
    a tile shape, T.Parallel extents and a T.serial bound (what `a.shape[0]` gives)."""
    N, M = np.int64(16), np.int32(8)

    @T.prim_func
    def k(A: T.Tensor((N, M), "float32"), B: T.Tensor(np.int64(16), "float32")):
        with T.Kernel(np.int64(2), threads=np.int64(32)) as bx:
            s = T.alloc_shared((N // 2, M), "float32")
            f = T.alloc_fragment((np.int64(8), M), "float32")
            T.copy(A[bx * 8, 0], s)
            for i, j in T.Parallel(np.int64(8), M):
                f[i, j] = s[i, j] * 2.0
            T.copy(f, A[bx * 8, 0])
            for i in T.serial(np.int32(8)):
                B[bx * 8 + i] = f[i, 0]

    return k


@pytest.mark.parametrize("target", [pytest.param("interp", marks=needs_interp), "toy"])
def test_numpy_integer_sizes_are_sizes(target):
    kern = tilecore.compile(_numpy_sized(), target=target)
    a = np.arange(128, dtype=np.float32).reshape(16, 8)
    b = np.zeros(16, np.float32)
    ref = a * 2
    kern(a, b)
    np.testing.assert_array_equal(a, ref)
    np.testing.assert_array_equal(b, ref[:, 0])
    src = kern.get_kernel_source() if hasattr(kern, "get_kernel_source") else ""
    assert "int64(2)" not in src  # the grid is the plain constant 2, not a typed NumPy value


def test_a_numpy_scalar_in_kernel_arithmetic_is_located_with_the_fix():
    with pytest.raises(TileTypeError) as e:
        @T.prim_func
        def k(A: T.Tensor((16,), "float32")):
            with T.Kernel(2, threads=32) as bx:
                A[bx * np.int64(8)] = 1.0  # <- here

    msg = str(e.value)
    assert __file__ in msg and "# <- here" in msg, msg
    assert "int(...)" in msg and "T.int64" in msg, msg


# ----------------------------------------------------------------------------- item 18
def _clone(where: pathlib.Path, mark: str) -> pathlib.Path:
    """A folder `tilecore/` like `git clone` makes: the repository root's `__init__.py` and
    a package `tilecore/tilecore` (here a stand-in that says it is the clone's)."""
    clone = where / "tilecore"
    (clone / "tilecore").mkdir(parents=True)
    shutil.copy(ROOT / "__init__.py", clone / "__init__.py")
    (clone / "tilecore" / "__init__.py").write_text(f"MARK = {mark!r}\n")
    return clone


def _run(cwd: pathlib.Path, code: str, env: dict, *flags: str) -> str:
    script = cwd / "user.py"
    script.write_text(code)
    out = subprocess.run([sys.executable, *flags, str(script)], cwd=cwd, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_a_clone_named_tilecore_beside_a_script_imports_the_installed_package(tmp_path):
    _clone(tmp_path, "clone")
    # the child sees what this process sees (its PYTHONPATH, the editable install's finder)
    got = _run(tmp_path, "import tilecore\nprint(tilecore.__file__, hasattr(tilecore, 'jit'),"
               " hasattr(tilecore, 'MARK'))\n", dict(os.environ))
    assert got == f"{tilecore.__file__} True False", got


def test_a_clone_named_tilecore_imports_its_own_package_when_none_is_installed(tmp_path):
    clone = _clone(tmp_path, "clone")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    # -S: no site-packages, so no installed tilecore (nor its editable finder) exists
    got = _run(tmp_path, "import tilecore\nprint(tilecore.__file__, tilecore.MARK)\n", env, "-S")
    assert got == f"{clone / 'tilecore' / '__init__.py'} clone", got


def test_the_root_marker_is_inert_under_any_other_name(tmp_path):
    clone = _clone(tmp_path, "clone")
    clone.rename(tmp_path / "tilecore-src")
    got = _run(tmp_path, "import importlib\nm = importlib.import_module('tilecore-src')\n"
               "print(sorted(k for k in vars(m) if not k.startswith('__')))\n",
               dict(os.environ))
    assert got == "['_hand_over', 'importlib', 'os', 'sys']", got


_PROBE = '''import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))  # as tests/ do


def test_probe():
    import gemm

    parent = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert parent not in [os.path.abspath(p or os.curdir) for p in sys.path], "parent on sys.path"
    assert not hasattr(gemm, "DECOY"), "the decoy folder beside the clone was imported"
'''


def test_pytest_keeps_the_clones_parent_off_sys_path(tmp_path):
    """The root `__init__.py` makes the clone a package, and pytest imports a package's
    `__init__.py` with its parent prepended to sys.path: a folder beside the clone named like
    an example (`gemm/`) then shadowed examples/gemm.py in the tests. The repository's pytest
    configuration (pyproject's `-p tilecore_conformance.rootdir`) collects the root as a plain
    folder instead; a stand-in clone with the same configuration must see its own gemm."""
    (tmp_path / "gemm").mkdir()
    (tmp_path / "gemm" / "__init__.py").write_text("DECOY = True\n")
    clone = tmp_path / "tilecore"
    (clone / "examples").mkdir(parents=True)
    (clone / "tests").mkdir()
    shutil.copy(ROOT / "__init__.py", clone / "__init__.py")
    shutil.copy(ROOT / "pyproject.toml", clone / "pyproject.toml")
    (clone / "examples" / "gemm.py").write_text("REAL = True\n")
    (clone / "tests" / "test_probe.py").write_text(_PROBE)
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "tests/test_probe.py"], cwd=clone, env=dict(os.environ),
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and "1 passed" in out.stdout, out.stdout + out.stderr
