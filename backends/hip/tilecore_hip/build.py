"""The offline HIP build: clang-22 without ROCm to an AMDGPU code object, and what it holds.

    clang++-22 -x hip --offload-arch=<gfx> --cuda-device-only --no-gpu-bundle-output
               -nogpuinc -nogpulib -O3 kernel.hip -o kernel.co

gives a raw AMDGPU ELF (about 0.1 s) that `hipModuleLoadData` loads. Code objects are cached on
disk by source, arch and compiler version ($TILECORE_CACHE_DIR/hip, else
~/.cache/tilecore/hip). `disassemble` runs llvm-objdump; `resources` reads the VGPR, AGPR,
SGPR, LDS and scratch counts from the code object's AMDGPU metadata note (llvm-readelf --notes).
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import subprocess
import tempfile

from tilecore.errors import TileTargetError

LLVM_VERSION = "22"
OPTIONS = ("-x", "hip", "--cuda-device-only", "--no-gpu-bundle-output", "-nogpuinc", "-nogpulib",
           "-O3", "-std=c++17")


class HipCompileError(TileTargetError):
    """clang rejected generated HIP; `log` holds its output and `source_path` a copy of the source."""

    def __init__(self, message: str, log: str, source_path: str | None):
        super().__init__(message, hint=f"the source is kept at {source_path}" if source_path else None)
        self.log = log
        self.source_path = source_path


def tool(name: str) -> str | None:
    """The path of LLVM tool `name` (clang++, llvm-objdump, llvm-readelf) of version 22, or None."""
    for cand in (f"{name}-{LLVM_VERSION}", f"/usr/lib/llvm-{LLVM_VERSION}/bin/{name}"):
        path = shutil.which(cand)
        if path:
            return path
    return None


def missing_toolchain() -> str | None:
    """Why code objects cannot be built here (the apt packages to install), or None."""
    absent = [t for t in ("clang++", "llvm-objdump", "llvm-readelf") if tool(t) is None]
    if absent:
        return (f"{', '.join(absent)} {LLVM_VERSION} not found "
                f"(apt-get install -y clang-{LLVM_VERSION} lld-{LLVM_VERSION} llvm-{LLVM_VERSION})")
    return None


def _require(name: str) -> str:
    path = tool(name)
    if path is None:
        raise TileTargetError(f"the hip backend needs {name}-{LLVM_VERSION} to build code objects",
                              hint=missing_toolchain())
    return path


@functools.cache
def compiler_id() -> str:
    """The first line of `clang++ --version` (part of the cache key)."""
    out = subprocess.run([_require("clang++"), "--version"], capture_output=True, text=True, check=True)
    return out.stdout.splitlines()[0]


def cache_dir() -> str:
    """Where code objects are cached: $TILECORE_CACHE_DIR/hip, else ~/.cache/tilecore/hip."""
    root = os.environ.get("TILECORE_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "tilecore")
    return os.path.join(root, "hip")


def _keep_source(source: str, name: str) -> str:
    d = os.path.join(cache_dir(), "failed")
    os.makedirs(d, exist_ok=True)
    fd, path = tempfile.mkstemp(dir=d, prefix=f"{name}-", suffix=".hip")
    with os.fdopen(fd, "w") as f:
        f.write(source)
    return path


def compile_hip(source: str, arch: str, *, name: str = "kernel") -> bytes:
    """The code object of `source` for `arch` (e.g. gfx942), from the cache or built by clang."""
    key = hashlib.sha256("\0".join((source, arch, compiler_id(), *OPTIONS)).encode()).hexdigest()[:24]
    path = os.path.join(cache_dir(), f"{name}-{arch}-{key}.co")
    if os.path.exists(path):
        with open(path, "rb") as f:
            return f.read()
    os.makedirs(cache_dir(), exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache_dir()) as tmp:
        src, out = os.path.join(tmp, f"{name}.hip"), os.path.join(tmp, f"{name}.co")
        with open(src, "w") as f:
            f.write(source)
        res = subprocess.run([_require("clang++"), *OPTIONS, f"--offload-arch={arch}", src, "-o", out],
                             capture_output=True, text=True)
        if res.returncode != 0:
            kept = _keep_source(source, name)
            raise HipCompileError(f"clang could not compile the generated HIP for {arch}:\n"
                                  f"{res.stderr.strip()[:4000]}", res.stderr, kept)
        with open(out, "rb") as f:
            code = f.read()
        os.replace(out, path)  # atomic: a concurrent reader sees a whole file or none
    return code


def _run_on(code: bytes, argv: list[str]) -> str:
    with tempfile.NamedTemporaryFile(suffix=".co") as f:
        f.write(code)
        f.flush()
        return subprocess.run([*argv, f.name], capture_output=True, text=True, check=True).stdout


def disassemble(code: bytes, arch: str) -> str:
    """The code object's machine code as text (llvm-objdump -d)."""
    return _run_on(code, [_require("llvm-objdump"), "-d", f"--mcpu={arch}"])


_NOTE_FIELDS = {"vgpr": ".vgpr_count", "agpr": ".agpr_count", "sgpr": ".sgpr_count",
                "lds": ".group_segment_fixed_size", "scratch": ".private_segment_fixed_size",
                "vgpr_spill": ".vgpr_spill_count", "sgpr_spill": ".sgpr_spill_count",
                "wavefront_size": ".wavefront_size", "max_threads": ".max_flat_workgroup_size"}


def resources(code: bytes) -> dict[str, int]:
    """Per-kernel register and memory use from the AMDGPU metadata note: vgpr, agpr, sgpr, lds
    (bytes), scratch (bytes per work-item), spills, wavefront size, max work-group size."""
    notes = _run_on(code, [_require("llvm-readelf"), "--notes"])
    out = {}
    for key, field in _NOTE_FIELDS.items():
        m = re.search(rf"^[\s-]*{re.escape(field)}:\s+(\d+)", notes, re.M)
        if m:
            out[key] = int(m.group(1))
    if "vgpr" not in out:
        raise TileTargetError("no AMDGPU kernel metadata in the code object's notes",
                              hint="the clang build produced no kernel: report it with the source")
    return out
