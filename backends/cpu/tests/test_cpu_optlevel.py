"""The serial launcher's own code is optimized at `optlevel.SERIAL_OPT` (LLVM -O1 by default, a
cheaper cold compile), the functions it calls and the parallel launcher at numba's level, and
the results are bit-identical to a kernel compiled at numba's level throughout."""

import threading

import numpy as np
import pytest
import softmax  # examples/ (conftest puts it on sys.path)
from numba.core import codegen, config
from tilecore_cpu import artifact, optlevel

import tilecore

# not one of softmax.TEST_SIZES: another test in this process must not have compiled it already
M, N = 21, 200


threads: list = []  # the thread of each library's optimization (_spy_levels)


def _spy_levels(monkeypatch) -> list:
    """(library name, numba.config.OPT) each time numba builds a library's pass pipelines."""
    threads.clear()
    seen = []
    for name in ("_optimize_functions", "_optimize_final_module"):
        plain = getattr(codegen.CPUCodeLibrary, name)

        def spy(self, *a, _plain=plain):
            seen.append((self.name, int(config.OPT)))
            threads.append(threading.current_thread().name)
            return _plain(self, *a)

        monkeypatch.setattr(codegen.CPUCodeLibrary, name, spy)
    return seen


def _kernel(tmp_path, monkeypatch):
    monkeypatch.setenv("TILECORE_CACHE_DIR", str(tmp_path))  # a cold compile
    prog = softmax.program(M=M, N=N, block_M=4, dtype="float16")
    return tilecore.compile(prog, out_idx=[-1], target="cpu")


def _run(art, x):
    y = np.zeros_like(x)
    art.run([x, y], None)
    return y


def test_serial_launcher_at_serial_opt_nested_compiles_and_parallel_launcher_at_numba_level(
        tmp_path, monkeypatch):
    base = int(config.OPT)
    if optlevel.SERIAL_OPT == base:  # TILECORE_CPU_OPT or NUMBA_OPT set to make them equal
        pytest.skip(f"the serial launcher's level is numba's ({base})")
    seen = _spy_levels(monkeypatch)
    k = _kernel(tmp_path, monkeypatch)
    art = k.artifact
    assert "_reduce_" in art.source  # generated reduction helpers: compiled nested, fresh
    serial = {lvl for name, lvl in seen if name == "launch_serial"}
    nested = {lvl for name, lvl in seen if "_reduce_" in name}
    assert serial == {optlevel.SERIAL_OPT}, seen
    assert nested == {int(config.OPT)}, seen
    assert set(threads) == {"tilecore-cpu-compile"}  # optlevel.on_fresh_stack
    assert int(config.OPT) == base  # restored after the compile
    seen.clear()
    art._compile(art.launch)  # the prange launcher, for kernels that run long
    assert {lvl for name, lvl in seen if name == "launch"} == {int(config.OPT)}, seen
    # the -O1 serial launcher and the -O3 parallel one agree bit for bit
    x = (np.random.default_rng(0).standard_normal((M, N)) * 4).astype(np.float16)
    outs = []
    for launcher in (art.launch_serial, art.launch):
        y, err = np.zeros(x.shape, np.uint16), np.zeros(8, np.int64)
        launcher(x.view(np.uint16), y, err)
        assert not err.any()
        outs.append(y)
    assert np.array_equal(outs[0], outs[1])
    np.testing.assert_allclose(outs[0].view(np.float16).sum(axis=1), 1, rtol=1e-2)

def test_results_bit_identical_to_numba_level(tmp_path, monkeypatch):
    k = _kernel(tmp_path, monkeypatch)
    art = k.artifact
    # the same source compiled with the serial launcher at numba's level (a distinct module:
    # the appended comment changes its cache key)
    monkeypatch.setattr(artifact, "SERIAL_OPT", int(config.OPT))
    seen = _spy_levels(monkeypatch)
    full = artifact.CpuArtifact(art.source + "# compiled at numba's level\n", art.faults,
                                art.parallel, art.params, art.prints)
    assert {lvl for name, lvl in seen if name == "launch_serial"} == {int(config.OPT)}
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((M, N)) * 8).astype(np.float16)
    x[0, :7] = [np.inf, -np.inf, 0, -0.0, 65504, -65504, 6e-8]
    got, want = _run(art, x), _run(full, x)
    assert np.array_equal(got.view(np.uint16), want.view(np.uint16))


def test_on_fresh_stack_runs_on_a_new_thread_and_inline_under_the_compiler_lock():
    from numba.core.compiler_lock import global_compiler_lock

    here = threading.current_thread()
    assert optlevel.on_fresh_stack(threading.current_thread) is not here
    with global_compiler_lock:  # a compile inside a compile: a new thread would wait forever
        assert optlevel.on_fresh_stack(threading.current_thread) is here

    def fail():
        raise ZeroDivisionError("raised in the compile thread")

    with pytest.raises(ZeroDivisionError, match="compile thread"):
        optlevel.on_fresh_stack(fail)
