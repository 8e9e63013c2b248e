"""Overlap NVRTC's first use with the lowering, **opt-in** (`TILECORE_CUDA_PREWARM=1`): on a
compile-cache miss for a cuda target, a daemon thread reads NVRTC's shared library and the CUDA
headers from disk and loads NVRTC while the main thread runs the tile pipeline, so
`tilecore_cuda.build` finds NVRTC loaded and its files in the page cache when it compiles.

Why it is off by default: on the H200 (session 7, `benchmarks/host_cold.py`, two rounds
alternating, byte-compiled tilecore) the cold GEMM jit took 1555 / 1575 ms with the thread and
915 / 947 ms without it: the thread's Python work (cuda-bindings' and cuda-pathfinder's import,
the loader search) holds the GIL the pipeline runs on (on the 2-core development machine the
main thread ran at about 55 % of its speed while the thread lived), and NVRTC's load it saves
is 40-90 ms. It was added
because the first process on a fresh machine paid up to 0.9 s more (sessions 3-5), read then as
NVRTC's files coming from disk; in session 7 the fresh machine's first process was not slower
than a later one with the same settings. The thread never compiles: a header-only NVRTC compile
in it broke the kernel's own compile beside it on the H200 ("__forceinline__" undefined), and a
kernel's compile waits for the thread (`wait()`): NVRTC has one user at a time. It imports
cuda-bindings' NVRTC only when torch is already imported (the order `toolchain.cuda_bindings`
needs). Nothing it reads is trusted or executed; any error in it is recorded and changes nothing.

`report()` says what it read and when it finished (host_overhead.py prints it).
"""

from __future__ import annotations

import atexit
import os
import re
import sys
import threading
import time

# What the dynamic loader and NVRTC open, by name: libnvrtc by its soname (`libnvrtc.so.13`) and
# the builtins it loads (`libnvrtc-builtins.so.13.0`), not the wheels' copies under other names
# (`.so.13.0.88`, `.alt.so.13`: 4x the bytes, measured on the H200), and the headers generated
# code includes with theirs. Exact names, not glob patterns: listing and matching directories
# holds the GIL the pipeline runs on (a glob over sys.path took 0.14-0.21 s there).
_LIBS = re.compile(r"libnvrtc\.so\.\d+|libnvrtc-builtins\.so\.\d+\.\d+")
_WHEEL_DIRS = ("cu13", "cu12", "cuda_nvrtc", "cuda_runtime")
_HEADERS = ("cuda_fp16.h", "cuda_fp16.hpp", "cuda_bf16.h", "cuda_bf16.hpp", "cuda_fp8.h", "cuda_fp8.hpp",
            "vector_types.h", "vector_functions.h", "vector_functions.hpp", "nv/target",
            "nv/detail/__target_macros", "nv/detail/__preprocessor")
ENV = "TILECORE_CUDA_PREWARM"
_EXIT_WAIT_S = 10.0
_CHUNK = 4 << 20
_MAX_BYTES = 1 << 30  # a safety bound: never read more than this

_lock = threading.Lock()
_state: dict = {}


def enabled() -> bool:
    """Whether the thread is wanted: `TILECORE_CUDA_PREWARM=1` (off by default, see above)."""
    return os.environ.get(ENV) == "1"


def start(arch: str | None = None) -> bool:
    """Start the reader thread once per process when `enabled()` (on the first cuda compile-cache
    miss; `arch`: the build's, recorded in the report); False when it had already started or is
    not enabled."""
    if not enabled():
        return False
    with _lock:
        if _state:
            return False
        _state.update(started=time.perf_counter(), files=[], done=None, arch=arch)
    thread = threading.Thread(target=_run, name="tilecore-nvrtc-prewarm", daemon=True)
    _state["thread"] = thread
    thread.start()
    # a process that ends right after its jit waits for the thread (seconds at most) rather than
    # unloading NVRTC under a compile still running in it
    atexit.register(thread.join, _EXIT_WAIT_S)
    return True


def wait(timeout: float = _EXIT_WAIT_S) -> None:
    """Block until the thread (if one started) has finished: NVRTC is only ever used by one
    thread at a time (`build` calls this before it compiles)."""
    with _lock:
        thread = _state.get("thread")
    if thread is not None and thread is not threading.current_thread():
        thread.join(timeout)


def report() -> dict:
    """What the thread did: seconds from its start to the end of each step, the bytes read and
    the files (`{}` when it never started)."""
    with _lock:
        if not _state:
            return {}
        t0 = _state["started"]
        out = {k: (v - t0 if isinstance(v, float) else v)
               for k, v in _state.items() if k not in ("started", "files", "thread")}
        out["files"] = [(p, n, round(t, 4)) for p, n, t in _state["files"]]
        out["bytes"] = sum(n for _, n, _ in _state["files"])
        return out


def candidate_files() -> list[str]:
    """The files NVRTC's first compile reads, found without importing anything: libnvrtc and its
    builtins from the first directory that holds libnvrtc, in the order cuda-pathfinder loads it
    (the NVIDIA wheels, `nvidia/cu13/lib`, ... under a `sys.path` entry, then $CUDA_HOME (or
    /usr/local/cuda)/lib64), and the fp16/bf16 headers (with what they include) of the first
    include directory that has them (NVRTC takes each from the first `--include-path` holding
    it). One copy of each: the H200 machine has the wheel's and the toolkit's libnvrtc, and
    reading both doubled the thread's disk reads (229 MB). Real paths, each once, in that order."""
    libs: list[str] = []
    incs: list[str] = []
    for root in sys.path:
        base = os.path.join(root or ".", "nvidia")
        if os.path.isdir(base):  # one stat for each sys.path entry without NVIDIA wheels
            for sub in _WHEEL_DIRS:
                libs.append(os.path.join(base, sub, "lib"))
                incs.append(os.path.join(base, sub, "include"))
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home:
            libs.append(os.path.join(home, "lib64"))
            incs.append(os.path.join(home, "include"))
    found: list[str] = []
    for d in libs:
        try:
            names = sorted(os.listdir(d))
        except OSError:
            continue
        mine = [os.path.join(d, n) for n in names if _LIBS.fullmatch(n)]
        if any(os.path.basename(f).startswith("libnvrtc.so.") for f in mine):
            found += mine  # the loader stops at the first directory with libnvrtc: so do we
            break
    for d in incs:
        if os.path.isfile(os.path.join(d, _HEADERS[0])):
            found += [os.path.join(d, h) for h in _HEADERS]
            break
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

            # no NVRTC compile here: one running in this thread beside the kernel's own compile
            # broke the kernel's (NVRTC "Compilation terminated.", its builtin macros such as
            # __forceinline__ / __align__ missing: every NVRTC-built example failed on the H200)
            build.default_compiler()  # imports cuda.bindings.nvrtc, dlopens libnvrtc
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
