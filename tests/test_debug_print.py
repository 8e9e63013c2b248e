"""T.print and T.device_assert: the same lines, in the same order, on interp, cpu, emu and the
toy thread target (the core emulator), in the format `tilecore.ir.debug` specifies; a failing
assertion stops the output at the same line everywhere and names the user's line; the CUDA
spelling compiles with nvcc when it is installed."""

import importlib.util
import shutil
import subprocess

import numpy as np
import pytest

import tilecore
import tilecore.language as T
from tilecore.errors import TileRuntimeError, TileSyntaxError, TileTargetError, TileTypeError
from tilecore.ir import debug

HAVE = {m: importlib.util.find_spec(m) is not None
        for m in ("tilecore_interp", "tilecore_cpu", "tilecore_emu", "tilecore_cuda", "tilecore_hip")}
TARGETS = [
    "toy:w4",
    pytest.param("interp", marks=pytest.mark.skipif(not HAVE["tilecore_interp"], reason="no interp")),
    pytest.param("cpu", marks=pytest.mark.skipif(not HAVE["tilecore_cpu"], reason="no cpu backend")),
    pytest.param("emu:sm_80", marks=pytest.mark.skipif(
        not (HAVE["tilecore_emu"] and HAVE["tilecore_cuda"]), reason="no emu / cuda lowering")),
]


def program(limit=100.0):
    @T.prim_func
    def show(A: T.Tensor((4, 8), "float16"), B: T.Tensor((4, 8), "float16")):
        with T.Kernel(2, threads=8) as bx:
            s = T.alloc_shared((2, 8), "float16")
            f = T.alloc_fragment((2, 8), "float32")
            v = T.alloc_var("int32")
            v = bx * 10 - 3
            T.copy(A[bx * 2, 0], s)
            T.print(v, msg="v")
            T.print("literal {braces} 100%")
            for i, j in T.Parallel(2, 8):
                f[i, j] = s[i, j] * 2.0
            for i, j in T.Parallel(2, 8):
                T.device_assert(f[i, j] < limit, "f below the limit")
            T.print(f, msg="f")
            T.print(s[1, 2] / 3.0)
            T.print(bx == 1, msg="last")
            T.copy(f, B[bx * 2, 0])

    return show


A = (np.arange(32).reshape(4, 8) / 4).astype(np.float16)
BLOCK0 = (["[block 0] v: -3", "[block 0] literal {braces} 100%"]
          + [f"[block 0] f: f[{i}, {j}] = {format(float(A[i, j]) * 2, 'g')}"
             for i in range(2) for j in range(8)]
          + ["[block 0] 0.833496094", "[block 0] last: 0"])


def _run(target, capsys, limit=100.0):
    k = tilecore.jit(program(limit), out_idx=[-1], target=target)
    capsys.readouterr()
    try:
        out = k(A)
        err = None
    except TileRuntimeError as e:
        out, err = None, e
    return capsys.readouterr().out.splitlines(), out, err


@pytest.mark.parametrize("target", TARGETS)
def test_print_lines_are_identical_on_every_target(target, capsys):
    lines, out, err = _run(target, capsys)
    assert err is None
    np.testing.assert_array_equal(out, (A.astype(np.float32) * 2).astype(np.float16))
    assert lines[:len(BLOCK0)] == BLOCK0
    assert len(lines) == 2 * len(BLOCK0)
    assert lines[len(BLOCK0)] == "[block 1] v: 7" and lines[-1] == "[block 1] last: 1"


@pytest.mark.parametrize("target", TARGETS)
def test_failed_assertion_stops_at_the_same_line(target, capsys):
    # block 0 holds f = 0 .. 7.5, block 1 f = 8 .. 15.5: the assertion fails in block 1
    lines, out, err = _run(target, capsys, limit=10.0)
    assert isinstance(err, TileRuntimeError)
    assert "T.device_assert failed in block (1): f below the limit" in str(err)
    assert "test_debug_print.py" in str(err)
    assert lines == BLOCK0 + ["[block 1] v: 7", "[block 1] literal {braces} 100%"]


@pytest.mark.skipif(not HAVE["tilecore_cpu"], reason="no cpu backend")
def test_cpu_kernels_that_print_are_served_by_the_compile_cache(capsys, monkeypatch):
    """A cpu kernel with T.print and T.device_assert is stored in the compile cache: loaded again
    (nothing generated), it prints the same lines and fails the same assertion at the same line."""
    from tilecore_cpu import codegen

    from tilecore import compile_cache

    tilecore.jit(program(10.0), out_idx=[-1], target="cpu")  # built, or loaded: the entry exists
    compile_cache.clear_memory()  # what a new process sees
    generated = []
    generate = codegen.Codegen.generate
    monkeypatch.setattr(codegen.Codegen, "generate", lambda self: generated.append(1) or generate(self))
    lines, out, err = _run("cpu", capsys, limit=10.0)
    assert generated == []
    assert isinstance(err, TileRuntimeError) and "test_debug_print.py" in str(err)
    assert "T.device_assert failed in block (1): f below the limit" in str(err)
    assert lines == BLOCK0 + ["[block 1] v: 7", "[block 1] literal {braces} 100%"]


def test_value_formats():
    from tilecore import dtypes as dt

    assert debug.format_value(np.float16(0.1), dt.float16) == "0.0999755859"
    assert debug.format_value(0.1, dt.float64) == "0.10000000000000001"
    assert debug.format_value(np.float32(1e-8), dt.float32) == "9.99999994e-09"
    assert debug.format_value(float("-inf"), dt.bfloat16) == "-inf"
    assert debug.format_value(-float("nan"), dt.float32) == "nan"
    assert debug.format_value(True, dt.bool_) == "1"
    assert debug.format_value(-(2 ** 63), dt.int64) == str(-(2 ** 63))
    fmt, conv = debug.c_format("x {} 5% {{}} {}", [dt.int8, dt.float64])
    assert fmt == "x %lld 5%% {} %.17g" and conv == ["ll", "d"]


def test_user_mistakes():
    def inside_parallel():
        @T.prim_func
        def k(A: T.Tensor((8,), "float32")):
            with T.Kernel(1, threads=8) as bx:
                for i in T.Parallel(8):
                    T.print(A[i])

    with pytest.raises(TileSyntaxError, match="inside T.Parallel"):
        inside_parallel()

    def warp_id():
        @T.prim_func
        def k(A: T.Tensor((8,), "float32")):
            with T.Kernel(1, threads=8) as bx:
                T.print(A, warp_id=1)

    with pytest.raises(TileSyntaxError, match="warp_id"):
        warp_id()

    def not_a_condition():
        @T.prim_func
        def k(A: T.Tensor((8,), "float32")):
            with T.Kernel(1, threads=8) as bx:
                T.device_assert(A[0], "nonzero")

    with pytest.raises(TileTypeError, match="condition"):
        not_a_condition()


def test_printed_ir_uses_the_format_form():
    src = program().script()
    assert "T.print_format('[block {}] v: {}', bx, v)" in src
    assert "T.device_assert(" in src and "'f below the limit')" in src


@pytest.mark.skipif(not HAVE["tilecore_cuda"], reason="no cuda backend")
def test_cuda_spelling_compiles(tmp_path):
    k = tilecore.compile(program(), out_idx=[-1], target="cuda:sm_90a")
    src = k.get_kernel_source()
    assert 'printf("[block %lld] v: %lld\\n", (long long)(bx)' in src
    assert src.count("__trap();") == 2  # one per register of f each thread checks
    nvcc = shutil.which("nvcc") or "/usr/local/cuda-13.0/bin/nvcc"
    if not shutil.which(nvcc):
        pytest.skip("nvcc not installed")
    (tmp_path / "k.cu").write_text(src)
    subprocess.run([nvcc, "-gencode=arch=compute_90a,code=sm_90a", "-c", str(tmp_path / "k.cu"),
                    "-o", str(tmp_path / "k.o")], check=True)


@pytest.mark.skipif(not HAVE["tilecore_hip"], reason="no hip backend")
def test_hip_refuses_print_but_traps_on_assert():
    with pytest.raises(TileTargetError, match="ROCm device libraries"):
        tilecore.compile(program(), out_idx=[-1], target="hip:gfx942")


def test_printed_ir_reparses_and_prints_the_same(tmp_path, capsys):
    import importlib.util

    src = "import tilecore.language as T\n\n" + program().script()
    path = tmp_path / "reprinted_show.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("reprinted_show", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    again = mod.show
    def debug_lines(f):  # the re-parsed assertion's line comment names the new file
        return [line.split("  #")[0] for line in f.script().splitlines()
                if "print_format" in line or "device_assert" in line]

    # (constants may reprint as T.cast(3.0, T.float16): the printer's spelling, not a change)
    assert debug_lines(again)[:4] == debug_lines(program())[:4] and len(debug_lines(again)) == 6
    tilecore.jit(again, out_idx=[-1], target="toy:w4")(A)
    assert capsys.readouterr().out.splitlines()[:len(BLOCK0)] == BLOCK0
