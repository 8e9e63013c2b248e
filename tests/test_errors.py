"""User mistakes raise TileError subclasses that name this file and the offending line."""

import inspect

import numpy as np
import pytest

import tilecore
import tilecore.language as T
from tilecore.errors import (
    TileBindingError,
    TileCallError,
    TileError,
    TileNameError,
    TileRuntimeError,
    TileShapeError,
    TileSyntaxError,
    TileTargetError,
    TileTypeError,
)

THIS = __file__


def marked_line(fn, marker="# <- here"):
    """The file line number of the line in `fn` carrying `marker`."""
    lines, start = inspect.getsourcelines(fn)
    for i, line in enumerate(lines):
        if marker in line:
            return start + i
    raise AssertionError("marker missing")


def check(excinfo, fn, cls):
    err = excinfo.value
    assert isinstance(err, cls), type(err)
    assert err.loc is not None, str(err)
    assert err.loc.file == THIS
    assert err.loc.line == marked_line(fn), str(err)
    text = str(err)
    assert f"test_errors.py:{marked_line(fn)}" in text


def test_copy_extent_mismatch():
    def build():
        @T.prim_func
        def k(A: T.Tensor((64, 64), "float32")):
            with T.Kernel(1, threads=128) as bx:
                s = T.alloc_shared((32, 32), "float32")
                f = T.alloc_fragment((16, 32), "float32")
                T.copy(A[0, 0], s)
                T.copy(s, f)  # <- here
        return k

    with pytest.raises(TileShapeError) as e:
        build()
    check(e, build, TileShapeError)
    assert "extents do not match" in str(e.value)


def test_gemm_k_mismatch():
    def build():
        @T.prim_func
        def k(A: T.Tensor((64, 64), "float16")):
            with T.Kernel(1, threads=128) as bx:
                a = T.alloc_shared((64, 32), "float16")
                b = T.alloc_shared((16, 64), "float16")
                c = T.alloc_fragment((64, 64), "float32")
                T.gemm(a, b, c)  # <- here
        return k

    with pytest.raises(TileShapeError) as e:
        build()
    check(e, build, TileShapeError)
    assert "K mismatch" in str(e.value)


def test_gemm_dtype_mismatch():
    def build():
        @T.prim_func
        def k(A: T.Tensor((64, 64), "float16")):
            with T.Kernel(1, threads=128) as bx:
                a = T.alloc_shared((64, 32), "float16")
                b = T.alloc_shared((32, 64), "bfloat16")
                c = T.alloc_fragment((64, 64), "float32")
                T.gemm(a, b, c)  # <- here
        return k

    with pytest.raises(TileTypeError) as e:
        build()
    check(e, build, TileTypeError)


def test_gemm_accumulator_dtype():
    def build():
        @T.prim_func
        def k(A: T.Tensor((64, 64), "int8")):
            with T.Kernel(1, threads=128) as bx:
                a = T.alloc_shared((64, 32), "int8")
                b = T.alloc_shared((32, 64), "int8")
                c = T.alloc_fragment((64, 64), "float16")
                T.gemm(a, b, c)  # <- here
        return k

    with pytest.raises(TileTypeError) as e:
        build()
    check(e, build, TileTypeError)


def test_non_constant_tile_shape():
    n = T.dynamic("n")

    def build():
        @T.prim_func
        def k(A: T.Tensor((n,), "float32")):
            with T.Kernel(1, threads=128) as bx:
                s = T.alloc_shared((n,), "float32")  # <- here
        return k

    with pytest.raises(TileShapeError) as e:
        build()
    check(e, build, TileShapeError)
    assert "compile-time constant" in str(e.value)


def test_unknown_dtype():
    def build():
        @T.prim_func
        def k(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=128) as bx:
                s = T.alloc_shared((64,), "float17")  # <- here
        return k

    with pytest.raises(TileNameError) as e:
        build()
    check(e, build, TileNameError)
    assert "float16" in str(e.value)  # the hint lists valid names


def test_unknown_T_name():
    def build():
        @T.prim_func
        def k(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=128) as bx:
                s = T.alloc_shraed((64,), "float32")  # <- here
        return k

    with pytest.raises(TileNameError) as e:
        build()
    check(e, build, TileNameError)
    assert "alloc_shared" in str(e.value)


def test_kernel_binding_count():
    def build():
        @T.prim_func
        def k(A: T.Tensor((64,), "float32")):
            with T.Kernel(2, 2, threads=128) as (bx, by, bz):  # <- here
                A[0] = 1.0
        return k

    with pytest.raises(TileBindingError) as e:
        build()
    check(e, build, TileBindingError)


def test_while_unsupported():
    def build():
        @T.prim_func
        def k(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=128) as bx:
                while True:  # <- here
                    A[0] = 1.0
        return k

    with pytest.raises(TileSyntaxError) as e:
        build()
    check(e, build, TileSyntaxError)


def helper(x):
    return x + 1


def failing_helper(n):
    raise ValueError(f"no tile size for {n}")


def test_python_helper_calls():
    # a helper runs at build time (TileLang's semantics); one that fails names the kernel line
    @T.prim_func
    def ok(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(64):
                A[i] = helper(A[i])

    assert ok.name == "ok"

    def build():
        @T.prim_func
        def k(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=128) as bx:
                for i in T.Parallel(failing_helper(64)):  # <- here
                    A[i] = 0.0
        return k

    with pytest.raises(TileSyntaxError) as e:
        build()
    check(e, build, TileSyntaxError)
    assert "failing_helper" in str(e.value) and "no tile size for 64" in str(e.value)
    assert "T.macro" in str(e.value)


def test_tile_op_inside_parallel():
    def build():
        @T.prim_func
        def k(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=128) as bx:
                s = T.alloc_shared((64,), "float32")
                for i in T.Parallel(64):
                    T.copy(A[0], s)  # <- here
        return k

    with pytest.raises(TileSyntaxError) as e:
        build()
    check(e, build, TileSyntaxError)


def test_reassigning_immutable_name_in_loop():
    def build():
        @T.prim_func
        def k(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=128) as bx:
                acc = A[0] * 2.0
                for i in T.serial(64):
                    acc = acc + A[i]  # <- here
                A[0] = acc
        return k

    with pytest.raises(TileBindingError) as e:
        build()
    check(e, build, TileBindingError)
    assert "alloc_var" in str(e.value)


def _add_kernel():
    @T.prim_func
    def add(A: T.Tensor((16,), "float32"), B: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(16):
                B[i] = A[i] + 1.0

    return tilecore.jit(add, out_idx=[-1], target="toy:w4")


def test_call_wrong_argument_count():
    k = _add_kernel()
    with pytest.raises(TileCallError) as e:
        k(np.zeros(16, np.float32), np.zeros(16, np.float32))  # <- here
    assert e.value.loc.file == THIS
    assert e.value.loc.line == marked_line(test_call_wrong_argument_count)
    assert "takes 1 input" in str(e.value)


def test_call_wrong_shape():
    k = _add_kernel()
    with pytest.raises(TileCallError) as e:
        k(np.zeros(17, np.float32))  # <- here
    assert e.value.loc.line == marked_line(test_call_wrong_shape)
    assert "(17,)" in str(e.value)


def test_call_wrong_dtype():
    k = _add_kernel()
    with pytest.raises(TileCallError) as e:
        k(np.zeros(16, np.float64))  # <- here
    assert e.value.loc.line == marked_line(test_call_wrong_dtype)
    assert "float64" in str(e.value) and "float32" in str(e.value)


def test_out_idx_out_of_range():
    @T.prim_func
    def add(A: T.Tensor((16,), "float32"), B: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(16):
                B[i] = A[i]

    with pytest.raises(TileCallError) as e:
        tilecore.jit(add, out_idx=[2], target="toy:w4")  # <- here
    assert e.value.loc.line == marked_line(test_out_idx_out_of_range)


def test_unknown_target_lists_installed():
    @T.prim_func
    def add(A: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            A[0] = 1.0

    with pytest.raises(TileTargetError) as e:
        tilecore.jit(add, target="tpu")
    assert "toy" in str(e.value) and "tpu" in str(e.value)


def test_out_of_bounds_global_access_at_runtime():
    n = T.dynamic("n")  # a symbolic size: not provable at compile time

    def build():
        @T.prim_func
        def k(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                for i in T.Parallel(16):
                    B[i] = A[i]  # <- here
        return k

    kernel = tilecore.jit(build(), out_idx=[-1], target="toy:w4",
                          pass_configs={"tl.disable_safe_memory_legalize": True})  # reported, not guarded
    with pytest.raises(TileRuntimeError) as e:
        kernel(np.zeros(10, np.float32))
    check(e, build, TileRuntimeError)
    assert "out-of-bounds" in str(e.value)


def test_missing_annotation():
    def build():
        @T.prim_func
        def k(A):  # <- here
            with T.Kernel(1, threads=32) as bx:
                A[0] = 1.0
        return k

    with pytest.raises(TileTypeError) as e:
        build()
    check(e, build, TileTypeError)


def test_every_error_is_a_tile_error():
    for cls in (TileShapeError, TileTypeError, TileNameError, TileSyntaxError, TileBindingError,
                TileCallError, TileRuntimeError, TileTargetError):
        assert issubclass(cls, TileError)


# --------------------------------------------------------------------------------------------
# The generated malformed-kernel suite: every mistake of tests/malformed/ on every installed
# CPU-runnable target and on cuda source generation. Each must raise its TileError subclass at
# the marked line of the generated file, with a hint (a fix); a case that raises nothing is a
# silent acceptance, one that raises anything else a crash.

import importlib.util  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import textwrap  # noqa: E402
import traceback  # noqa: E402

from malformed import PREAMBLE, catalogue  # noqa: E402

import tilecore.errors as tile_errors  # noqa: E402
from tilecore import plugins  # noqa: E402

MISTAKES = catalogue()
_RUNNABLE = ("interp", "cpu", "emu", "metal-cpu", "tvm")


def _suite_targets() -> list[str]:
    """The installed CPU-runnable targets, plus cuda (source generation: no GPU is needed to
    compile, and every call check runs before the launch); toy:w4 when none is installed."""
    infos = plugins.target_infos()
    out = [t for t in _RUNNABLE if t in infos and infos[t].runnable()[0]]
    if "cuda" in infos:
        out.append("cuda")
    return out or ["toy:w4"]


TARGETS = _suite_targets()
PAIRS = [(m, t) for m in MISTAKES for t in TARGETS
         if (m.targets is None or t in m.targets) and t not in m.excludes]


class _Generated:
    """The module holding one `case_<name>(target)` function per mistake."""

    def __init__(self):
        parts = [PREAMBLE]
        for m in MISTAKES:
            parts.append(f"\n\ndef case_{m.name}(target):\n" + textwrap.indent(m.body, "    "))
        text = "".join(parts)
        self.dir = tempfile.mkdtemp(prefix="tilecore-malformed-")
        self.file = f"{self.dir}/tile_malformed_cases.py"
        with open(self.file, "w") as f:
            f.write(text)
        lines = text.splitlines()
        self.marker: dict[str, int] = {}
        current = None
        for no, line in enumerate(lines, start=1):
            if line.startswith("def case_"):
                current = line[len("def case_"):line.index("(")]
            if "# <- here" in line and current is not None:
                self.marker.setdefault(current, no)
        spec = importlib.util.spec_from_file_location("tile_malformed_cases", self.file)
        self.module = importlib.util.module_from_spec(spec)
        sys.modules["tile_malformed_cases"] = self.module
        spec.loader.exec_module(self.module)
        self.parsed: dict[str, BaseException | None] = {}


_GEN: list = []


def _generated() -> _Generated:
    if not _GEN:
        _GEN.append(_Generated())
    return _GEN[0]


def _outcome(gen: _Generated, m, target: str):
    """The exception the case raises on `target` (None: none). A parse mistake is target-
    independent: it is built once and that outcome stands for every target."""
    if m.kind == "parse" and m.name in gen.parsed:
        return gen.parsed[m.name]
    try:
        getattr(gen.module, f"case_{m.name}")(target)
        err = None
    except Exception as e:  # noqa: BLE001 - a crash is what this suite looks for
        err = e
    if m.kind == "parse":
        gen.parsed[m.name] = err
    return err


@pytest.mark.parametrize("mistake,target", PAIRS, ids=[f"{m.name}-{t}" for m, t in PAIRS])
def test_malformed(mistake, target):
    gen = _generated()
    err = _outcome(gen, mistake, target)
    assert err is not None, f"silent acceptance: {mistake.name} on {target} raised nothing"
    trace = "".join(traceback.format_exception(err))
    assert isinstance(err, TileError), f"crash: {mistake.name} on {target}:\n{trace}"
    want = getattr(tile_errors, mistake.error)
    assert isinstance(err, want), f"{mistake.name} on {target}: {type(err).__name__}, not " \
                                  f"{mistake.error}:\n{err}"
    assert err.loc is not None, f"{mistake.name} on {target}: no location:\n{err}"
    assert (err.loc.file, err.loc.line) == (gen.file, gen.marker[mistake.name]), \
        f"{mistake.name} on {target}: located at {err.loc}, not line {gen.marker[mistake.name]}:\n{err}"
    text = str(err)
    assert mistake.match.lower() in text.lower(), f"{mistake.name}: {mistake.match!r} not in:\n{text}"
    assert err.hint and "hint:" in text, f"{mistake.name} on {target}: no fix in:\n{text}"


def test_malformed_suite_size():
    """>= 100 kinds of mistake, each on every target that can detect it."""
    assert len(MISTAKES) >= 100, len(MISTAKES)
    assert len(PAIRS) >= len(MISTAKES)


def test_copy_eviction_policy_unknown():
    def build():
        @T.prim_func
        def k(A: T.Tensor((64, 64), "float16")):
            with T.Kernel(1, threads=128) as bx:
                s = T.alloc_shared((32, 32), "float16")
                T.copy(A[0, 0], s, eviction_policy="evict_sometimes")  # <- here
        return k

    with pytest.raises(TileTypeError) as e:
        build()
    check(e, build, TileTypeError)
    assert "evict_first" in str(e.value)


def test_copy_eviction_policy_recorded_and_printed():
    @T.prim_func
    def k(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, threads=128) as bx:
            s = T.alloc_shared((32, 32), "float16")
            T.copy(A[0, 0], s, eviction_policy="evict_first")
            T.copy(s, B[0, 0], eviction_policy="evict_normal")  # the default: nothing recorded

    script = k.script()
    assert script.count("eviction_policy='evict_first'") == 1 and "evict_normal" not in script
