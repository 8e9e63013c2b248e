"""`tilecore_cuda.prewarm` (opt-in, TILECORE_CUDA_PREWARM=1): on a cuda compile-cache miss a thread
reads NVRTC's libraries and the CUDA headers while the pipeline runs. Runs anywhere (a fake wheel
layout on sys.path)."""

from __future__ import annotations

import os
import sys
import time

from tilecore_cuda import plugin, prewarm

from tilecore.target import Target


def _fake_wheels(root):
    """nvidia/cu13/{lib,include} as the CUDA 13 wheels lay them out, with a symlinked soname."""
    lib = root / "nvidia" / "cu13" / "lib"
    inc = root / "nvidia" / "cu13" / "include"
    lib.mkdir(parents=True)
    (inc / "nv").mkdir(parents=True)
    (lib / "libnvrtc.so.13").write_bytes(b"\x7fELF" + b"n" * 5000)
    os.symlink("libnvrtc.so.13", lib / "libnvrtc.so")
    (lib / "libnvrtc-builtins.so.13.0").write_bytes(b"b" * 300)
    (lib / "libnvrtc.so.13.0.88").write_bytes(b"a copy under another name")
    (lib / "libnvrtc.alt.so.13").write_bytes(b"an alternative build")
    (lib / "libcublas.so.13").write_bytes(b"not NVRTC's")
    (inc / "cuda_fp16.h").write_text("// fp16")
    (inc / "cuda_fp16.hpp").write_text("// fp16 impl")
    (inc / "nv" / "target").write_text("// nv/target")
    (inc / "cublas_v2.h").write_text("// not included by generated code")
    return lib, inc


def test_candidates_are_nvrtc_and_the_headers_generated_code_includes(tmp_path, monkeypatch):
    lib, inc = _fake_wheels(tmp_path)
    monkeypatch.setattr(sys, "path", [str(tmp_path)])
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "no-toolkit"))
    got = [p for p in prewarm.candidate_files() if p.startswith(str(tmp_path))]
    assert got == [str(lib / "libnvrtc-builtins.so.13.0"), str(lib / "libnvrtc.so.13"),
                   str(inc / "cuda_fp16.h"), str(inc / "cuda_fp16.hpp"), str(inc / "nv" / "target")]


def test_only_the_copy_the_loader_opens_is_read(tmp_path, monkeypatch):
    """A wheel's libnvrtc and the toolkit's (the H200 machine has both): the loader takes the
    wheel's, so the toolkit's libraries and headers are not read (229 MB read there, not 114)."""
    lib, inc = _fake_wheels(tmp_path / "site")
    home = tmp_path / "toolkit"
    (home / "lib64").mkdir(parents=True)
    (home / "include").mkdir()
    (home / "lib64" / "libnvrtc.so.13").write_bytes(b"the toolkit's copy")
    (home / "lib64" / "libnvrtc-builtins.so.13.0").write_bytes(b"the toolkit's builtins")
    (home / "include" / "cuda_fp16.h").write_text("// the toolkit's fp16")
    monkeypatch.setattr(sys, "path", [str(tmp_path / "empty"), str(tmp_path / "site")])
    monkeypatch.setenv("CUDA_HOME", str(home))
    monkeypatch.delenv("CUDA_PATH", raising=False)
    got = [p for p in prewarm.candidate_files() if p.startswith(str(tmp_path))]
    assert got == [str(lib / "libnvrtc-builtins.so.13.0"), str(lib / "libnvrtc.so.13"),
                   str(inc / "cuda_fp16.h"), str(inc / "cuda_fp16.hpp"), str(inc / "nv" / "target")]
    monkeypatch.setattr(sys, "path", [str(tmp_path / "empty")])  # no wheel: the toolkit's
    got = [p for p in prewarm.candidate_files() if p.startswith(str(tmp_path))]
    assert got == [str(home / "lib64" / "libnvrtc-builtins.so.13.0"), str(home / "lib64" / "libnvrtc.so.13"),
                   str(home / "include" / "cuda_fp16.h")]


def test_the_thread_reads_them_once_per_process_and_reports(tmp_path, monkeypatch):
    lib, _ = _fake_wheels(tmp_path)
    files = [str(lib / "libnvrtc.so.13"), str(lib / "libnvrtc-builtins.so.13.0"), str(tmp_path / "gone")]
    monkeypatch.setattr(prewarm, "candidate_files", lambda: files)
    monkeypatch.setattr(prewarm, "_state", {})
    monkeypatch.delitem(sys.modules, "torch", raising=False)  # torch installed, not imported:
    monkeypatch.setattr(prewarm, "_no_torch", lambda: False)  # the thread must not load NVRTC
    assert prewarm.report() == {}
    monkeypatch.delenv(prewarm.ENV, raising=False)
    assert prewarm.start() is False and prewarm.report() == {}  # off by default
    monkeypatch.setenv(prewarm.ENV, "1")
    assert prewarm.start() is True
    assert prewarm.start() is False  # once per process
    for _ in range(500):
        if prewarm.report().get("done") is not None:
            break
        time.sleep(0.01)
    rep = prewarm.report()
    assert rep["bytes"] == 5004 + 300 and "error" not in rep
    assert [(p, n) for p, n, _ in rep["files"]] == [(files[0], 5004), (files[1], 300), (files[2], 0)]
    assert "loaded" not in rep and "compiled" not in rep and 0 <= rep["read"] <= rep["done"]


def test_the_hook_starts_it_for_cuda_on_a_gpu_machine_only(monkeypatch):
    started = []
    monkeypatch.setattr(prewarm, "start", lambda arch=None: started.append(arch) or True)
    monkeypatch.delenv("TILECORE_CUDA_COMPILER", raising=False)
    monkeypatch.setattr(plugin, "_available", lambda: (False, "no GPU"))
    plugin.tile_build_begin(target=Target("cuda", "sm_90a"))
    monkeypatch.setattr(plugin, "_available", lambda: (True, ""))
    plugin.tile_build_begin(target=Target("interp"))
    monkeypatch.setenv("TILECORE_CUDA_COMPILER", "nvcc")
    plugin.tile_build_begin(target=Target("cuda", "sm_90a"))
    assert started == []
    monkeypatch.delenv("TILECORE_CUDA_COMPILER")
    plugin.tile_build_begin(target=Target("cuda", "sm_90a"))
    assert started == ["sm_90a"]


def test_an_nvrtc_compile_waits_for_the_thread(monkeypatch):
    """NVRTC has one user at a time: a compile beside the thread broke the kernel's compile on
    the H200 (its builtin macros missing), so `build` waits for the thread before compiling."""
    from tilecore_cuda import build

    order = []

    def slow_run():
        time.sleep(0.2)
        order.append("thread done")

    monkeypatch.setattr(prewarm, "_state", {})
    monkeypatch.setattr(prewarm, "_run", slow_run)
    monkeypatch.setenv(prewarm.ENV, "1")
    monkeypatch.setattr(build, "_nvrtc", lambda: order.append("nvrtc used") or (_ for _ in ()).throw(
        RuntimeError("stop here")))
    assert prewarm.start("sm_90a") is True
    try:
        build._compile_nvrtc("", "sm_90a", (), "k")
    except RuntimeError:
        pass
    assert order == ["thread done", "nvrtc used"]
