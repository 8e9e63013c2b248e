"""Core plumbing: light import, target discovery, the pass pipeline and IR printing."""

import os
import subprocess
import sys

import numpy as np
import pytest

import tilecore
import tilecore.language as T
from tilecore.language import prim_func


def test_import_is_light():
    code = ("import sys, tilecore, tilecore.language; "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('torch', 'numba') or "
            "m.startswith('tilecore_')]; print(bad); assert not bad, bad")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_targets_lists_toy_and_auto_resolves():
    from tilecore.errors import TileTargetError
    from tilecore.plugins import resolve

    assert "toy" in tilecore.targets()
    assert "toy" not in tilecore.targets(runnable_only=True)  # used only where named
    assert resolve("toy").arch == "w4"  # the default arch
    runnable = tilecore.targets(runnable_only=True)
    if runnable:
        assert resolve("auto").kind in runnable
    else:  # only the core (and the toy) installed
        with pytest.raises(TileTargetError, match="no runnable target"):
            resolve("auto")


def test_unknown_arch_is_a_target_error():
    from tilecore.errors import TileTargetError
    from tilecore.plugins import resolve

    with pytest.raises(TileTargetError, match="w4, w64"):
        resolve("toy:w32")


def test_cli_lists_targets(capsys):
    from tilecore.cli import main

    assert main(["targets"]) == 0
    out = capsys.readouterr().out
    assert "toy" in out and "[w4, w64]" in out and "name toy:w4 or toy:w64 explicitly" in out


def test_entry_points_are_remembered_until_a_path_changes(tmp_path, monkeypatch):
    """Backend discovery reads the installed metadata once; later processes take the cached
    list until a sys.path directory (an install) or a declaring metadata file changes."""
    import importlib.metadata as md

    from tilecore import plugins

    site = tmp_path / "site"
    site.mkdir()
    dist = site / "tc_fake_backend-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: tc-fake-backend\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[tilecore.backends]\nfake = tc_fake_backend.plugin\n")
    monkeypatch.setenv("TILECORE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.syspath_prepend(str(site))
    first = plugins.backend_entry_points()
    assert ("fake", "tc_fake_backend.plugin") in first
    scans = []
    real = md.entry_points
    monkeypatch.setattr(md, "entry_points", lambda **kw: scans.append(kw) or real(**kw))
    assert plugins.backend_entry_points() == first and not scans  # from the cache
    other = site / "tc_other-2.0.dist-info"  # "pip install": a new metadata directory
    other.mkdir()
    (other / "METADATA").write_text("Metadata-Version: 2.1\nName: tc-other\nVersion: 2.0\n")
    (other / "entry_points.txt").write_text("[tilecore.backends]\nother = tc_other:plugin_obj\n")
    os.utime(site, ns=(1, 1))  # a distinct mtime even on a coarse-grained filesystem
    again = plugins.backend_entry_points()
    assert scans and ("other", "tc_other:plugin_obj") in again
    assert plugins._load("os.path:join") is os.path.join


def _kernel():
    import gemm

    return tilecore.jit(gemm.program(M=32, N=32, K=32, block_M=16, block_N=16, block_K=16, threads=16),
                        out_idx=[-1], target="toy:w4")


def test_get_ir_stages_and_source():
    k = _kernel()
    assert k.stage_names[:4] == ["input", "verify", "safe-memory", "simplify"]
    # a thread-lowering target runs the core's lowering passes, in order
    lowering = ["layout-inference", "lower-threads", "async-pipeline", "prefetch-pipelined",
                "insert-barriers", "wide-offsets"]
    assert [n for n in k.stage_names if n in lowering] == lowering
    assert "T.gemm(A_shared, B_shared, C_local)" in k.get_ir("input")
    assert "toy.mma.m4n4k4" in k.get_ir("lower-threads")
    assert "thread_func gemm" in k.get_kernel_source()


def test_dump_ir_env(tmp_path):
    code = ("import sys; sys.path[:0] = ['examples', 'tests']; import gemm, tilecore, toy_backend; "
            "tilecore.plugins.register(toy_backend.TOY, name='toy'); "
            "tilecore.jit(gemm.program(M=32, N=32, K=32, block_M=16, block_N=16, block_K=16), "
            "out_idx=[-1], target='toy:w4')")
    env = {"TILECORE_DUMP_IR": str(tmp_path)}
    import os

    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env={**os.environ, **env}, cwd=os.path.join(os.path.dirname(__file__), ".."))
    assert r.returncode == 0, r.stderr
    names = sorted(p.name for p in tmp_path.iterdir())
    assert any("simplify" in n for n in names), names
    assert any("insert-barriers" in n for n in names), names


def test_printed_source_reparses_to_the_same_program(tmp_path):
    """The printer's output is valid tilecore source that computes the same result."""
    import flash_attention

    func = flash_attention.program(batch=1, heads=1, seq_len=64, dim=32, is_causal=True,
                                   block_M=32, block_N=32)
    src = "import tilecore.language as T\n\n" + func.script()
    path = tmp_path / "reprinted.py"
    path.write_text(src)
    import importlib.util

    spec = importlib.util.spec_from_file_location("reprinted", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    again = mod.flash_attention
    assert isinstance(again, tilecore.ir.module.PrimFunc) if hasattr(tilecore, "ir") else True
    args = flash_attention.make_inputs(np.random.default_rng(0), batch=1, heads=1, seq_len=64, dim=32)
    a = tilecore.jit(func, out_idx=[-1], target="toy:w4")(*args)
    b = tilecore.jit(again, out_idx=[-1], target="toy:w4")(*args)
    np.testing.assert_array_equal(a, b)


def test_jit_factory_caches_per_parameters():
    calls = []

    @tilecore.jit(out_idx=[-1], target="toy:w64")
    def scale(n, factor):
        calls.append(n)

        @prim_func
        def k(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                for i in T.Parallel(n):
                    B[i] = A[i] * factor

        return k

    k1 = scale(8, 2.0)
    k2 = scale(8, 2.0)
    assert k1 is k2 and calls == [8]
    np.testing.assert_array_equal(k1(np.ones(8, np.float32)), 2 * np.ones(8, np.float32))
