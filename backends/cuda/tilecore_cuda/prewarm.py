"""Overlap NVRTC's first use with the lowering: on a compile-cache miss for a cuda target, a
daemon thread reads NVRTC's shared libraries, cuda-bindings' NVRTC extension and the CUDA
headers from disk while the main thread runs the tile pipeline (hundreds of milliseconds of
Python), so `tilecore_cuda.build` finds them in the page cache when it compiles.

Why: the first process on a machine paid about 0.9 s more for a cold GEMM compile than a later
process on an empty compile cache (H200 sessions 3 and 4: 2071 / 1991 ms against 1058 /
1057 ms), and the only state one process leaves another there is the page cache: libnvrtc
alone is about 100 MB. The thread only reads files (`readinto`, which releases the GIL); it
imports cuda-bindings' NVRTC module only when torch is already imported (the order
`toolchain.cuda_bindings` needs), so it never imports torch off the main thread. Nothing it
reads is trusted or executed: loading stays with the dynamic loader, as without it.

`report()` says what it read and when it finished (host_overhead.py prints it).
"""

from __future__ import annotations

import glob
import os
import sys
import threading
import time

# libnvrtc and its builtins, as the NVIDIA wheels (nvidia/cu13/lib, nvidia/cuda_nvrtc/lib) or a
# toolkit (lib64) lay them out, and the cuda-bindings modules that wrap NVRTC
_LIB_PATTERNS = ("nvidia/*/lib/libnvrtc*.so*", "cuda/bindings/*nvrtc*.so",
                 "cuda/bindings/_internal/*nvrtc*.so", "cuda/bindings/_bindings/*nvrtc*.so")
_HEADER_PATTERNS = ("cuda_fp*.h*", "cuda_bf16.h*", "vector_*.h", "nv/target", "nv/detail/*")
_CHUNK = 4 << 20
_MAX_BYTES = 1 << 30  # a safety bound: never read more than this

_lock = threading.Lock()
_state: dict = {}


def start() -> bool:
    """Start the reader thread once per process (on the first cuda compile-cache miss); False
    when it had already started."""
    with _lock:
        if _state:
            return False
        _state.update(started=time.perf_counter(), files=[], done=None)
    threading.Thread(target=_run, name="tilecore-nvrtc-prewarm", daemon=True).start()
    return True


def report() -> dict:
    """What the thread did: seconds from its start to the end of each step, the bytes read and
    the files (`{}` when it never started)."""
    with _lock:
        if not _state:
            return {}
        t0 = _state["started"]
        out = {k: (v - t0 if isinstance(v, float) and k != "started" else v)
               for k, v in _state.items() if k not in ("started", "files")}
        out["files"] = [(p, n, round(t, 4)) for p, n, t in _state["files"]]
        out["bytes"] = sum(n for _, n, _ in _state["files"])
        return out


def candidate_files() -> list[str]:
    """The files NVRTC's first compile reads, found without importing anything: libnvrtc* under
    every `sys.path` entry's `nvidia/*/lib` and under $CUDA_HOME (or /usr/local/cuda)/lib64, the
    cuda-bindings NVRTC extension modules, and the fp16/bf16/fp8 headers (with what they include)
    of the wheels' and the toolkit's include directories.
    Real paths, each once, in that order."""
    roots = [p for p in sys.path if p and os.path.isdir(p)]
    found: list[str] = []
    for root in roots:
        for pat in _LIB_PATTERNS:
            found += sorted(glob.glob(os.path.join(root, pat)))
    homes = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    for home in homes:
        if home:
            found += sorted(glob.glob(os.path.join(home, "lib64", "libnvrtc*.so*")))
    includes = [os.path.join(root, "nvidia", "*", "include") for root in roots]
    includes += [os.path.join(home, "include") for home in homes if home]
    for inc in includes:  # the headers generated code includes (cuda_fp16.h & co.) and theirs
        for pat in _HEADER_PATTERNS:
            found += sorted(glob.glob(os.path.join(inc, pat)))
    seen: set[str] = set()
    out = []
    for f in found:
        real = os.path.realpath(f)
        if real not in seen and os.path.isfile(real):
            seen.add(real)
            out.append(real)
    return out


def _run() -> None:
    """The thread: read the candidate files, then load NVRTC when that is safe here."""
    try:
        files = candidate_files()
        _mark("listed")
        buf = bytearray(_CHUNK)
        total = 0
        for path in files:
            t = time.perf_counter()
            n = _read(path, buf)
            total += n
            with _lock:
                _state["files"].append((path, n, time.perf_counter() - t))
            if total > _MAX_BYTES:
                break
        _mark("read")
        if "torch" in sys.modules or _no_torch():
            from . import build

            build.default_compiler()  # imports cuda.bindings.nvrtc and dlopens libnvrtc
            build.cuda_include_dirs()
            _mark("loaded")
    except Exception as e:  # a failed warm-up changes nothing: the compile does the real work
        with _lock:
            _state["error"] = f"{type(e).__name__}: {e}"
    finally:
        _mark("done")


def _no_torch() -> bool:
    import importlib.util

    return importlib.util.find_spec("torch") is None


def _read(path: str, buf: bytearray) -> int:
    """Read `path` to its end into `buf` (discarded); the bytes read."""
    n = 0
    try:
        with open(path, "rb", buffering=0) as f:
            while True:
                got = f.readinto(buf)
                if not got:
                    return n
                n += got
    except OSError:
        return n


def _mark(step: str) -> None:
    with _lock:
        _state[step] = time.perf_counter()
