"""The runner's judgements: program bugs are told apart from backend bugs, targets skip what
they declare unsupported (with the reason), and backends can set their own tolerances."""

import re
import subprocess
import sys
import textwrap

import pytest
from broken_backends import InterpWithABug
from tilecore_conformance.case import Case, Param
from tilecore_conformance.compare import tolerance
from tilecore_conformance.runner import check_case
from tilecore_conformance.suite import RESULTS, check_target
from tilecore_conformance.values import INEXACT_FRAC

from tilecore import dtypes as dt
from tilecore import plugins
from tilecore.hookspec import hookimpl
from tilecore.ir.expr import BinOp, Const, Unary


def _case(body: str, params) -> Case:
    sig = ", ".join(f"{p.name}: T.Tensor({p.shape!r}, {p.dtype!r})" for p in params)
    src = f"import tilecore.language as T\n\n\n@T.prim_func\ndef main({sig}):\n" + textwrap.indent(
        textwrap.dedent(body), "    ")
    return Case(src, tuple(params))


def test_block_order_dependence_is_a_program_bug():
    case = _case("""
        with T.Kernel(4, threads=32) as bx:
            for i in T.Parallel(1):
                Out[i] = bx
        """, [Param("Out", (1,), "int32", 1, 0, is_output=True)])
    out = check_case(case, "interp", 0)
    assert out.status == "program_bug" and "block order" in out.detail


def test_reading_uninitialized_memory_is_a_program_bug():
    case = _case("""
        with T.Kernel(1, threads=32) as bx:
            s = T.alloc_shared((4,), "float32")
            for i in T.Parallel(4):
                if i < 2:
                    s[i] = 1.0
            T.copy(s, Out[0])
        """, [Param("Out", (4,), "float32", 1, 0, is_output=True)])
    out = check_case(case, "interp", 0)
    assert out.status == "program_bug" and "uninitialized" in out.detail


class Picky(InterpWithABug):
    """Correct, but declines int8 and anything using cumsum."""

    kind = "picky"

    def bug(self, node):
        return None

    @hookimpl
    def tile_unsupported(self, target, func):
        if target.kind != self.kind:
            return None
        src = func.script()
        if re.search(r"(?<!u)int8", src):  # uint8 is another dtype
            return "picky has no int8"
        if "T.cumsum" in src:
            return "picky has no cumsum"
        return None


@pytest.fixture
def picky():
    plugins.register(Picky(), "picky")
    yield "picky"
    plugins.unregister("picky")


def test_unsupported_programs_are_skipped_with_their_reason(picky):
    stats = check_target(picky, max_examples=60)
    assert stats.ran >= 60
    assert stats.dtype_skips == {"int8": "picky has no int8"}
    assert set(stats.skipped) <= {"picky has no cumsum"}
    assert "int8 not generated: picky has no int8" in stats.summary()
    RESULTS.pop(picky)


class SloppyExp(InterpWithABug):
    """exp off by a relative 2**-11 in float32, and says so through tile_tolerance."""

    kind = "sloppy_exp"
    promise = None

    def bug(self, node):
        if isinstance(node, Unary) and node.op == "exp":
            return BinOp("mul", node, Const(1.0 + 2.0**-11, node.dtype), node.dtype)
        return None

    @hookimpl
    def tile_tolerance(self, target, dtype):
        return self.promise if target.kind == self.kind else None


def test_tolerances_come_from_the_backend():
    backend = SloppyExp()
    plugins.register(backend, backend.kind)
    try:
        case = _case("""
            with T.Kernel(1, threads=32) as bx:
                for i in T.Parallel(8):
                    Out[i] = T.exp(X[i])
            """, [Param("X", (8,), "float32", 2.0, INEXACT_FRAC),
                  Param("Out", (8,), "float32", 1, 0, is_output=True, exact=False, scale=8.0)])
        assert check_case(case, "interp", 3).status == "pass"
        out = check_case(case, backend.kind, 3)
        assert out.status == "mismatch" and "rtol=0.0002" in out.detail
        backend.promise = (1e-3, 1e-3)
        assert tolerance(plugins.resolve(backend.kind), dt.float32) == (1e-3, 1e-3)
        assert check_case(case, backend.kind, 3).status == "pass"
    finally:
        plugins.unregister(backend.kind)


def test_plugin_runs_the_suite_from_any_directory(tmp_path):
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--tile-target=interp",
           "--tile-examples=5", "-k", "generated"]
    r = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "interp: 5 generated programs ran" in r.stdout
