"""Compile CUDA C++ to a cubin with NVRTC (cuda-bindings) or nvcc, cached on disk.

The cache key is the source, the arch, the compiler's identity (NVRTC or nvcc version) and the
options, so a toolkit upgrade or a codegen change never serves a stale cubin. A compile error in
generated code is a bug in tilecore, so it raises :class:`CudaCompileError` (a
TileInternalError) carrying the compiler's log and the path where the source was kept.

NVRTC and nvcc get the same options (arch, -std) and, for one source, give the same register
count: no option differs that matters (-O3, fast math, -default-device, fmad, --dopt and the
arch spelling were compared with NVRTC 13.0.88 and nvcc 13.0.88). The difference once seen
(the 128x128 GEMM at 196 registers under NVRTC, 128 under nvcc) came from the front ends:
nvcc's narrows address arithmetic on shared memory to 32 bits, NVRTC's keeps generic 64-bit
pointers; the renderer therefore hands inline PTX 32-bit shared-window offsets from one base
(`GPURenderer.shared_operand_address`). `cubin_resources` reads what a cubin uses.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import struct
import subprocess
import tempfile

from tilecore import cache
from tilecore.errors import TileInternalError

# re-exported: what a compile-cache hit and a launch need lives in the small toolchain module
from .toolchain import cuda_bindings, toolchain_token  # noqa: F401

STD = "c++17"


class CudaCompileError(TileInternalError):
    """Generated CUDA source that the compiler rejected (a tilecore bug); holds the log."""

    def __init__(self, message: str, log: str, source_path: str | None):
        self.log = log
        self.source_path = source_path
        where = f"\n(source kept at {source_path})" if source_path else ""
        super().__init__(f"{message}{where}\n{log}")


def cache_dir() -> str:
    """Where cubins are cached: `tilecore.cache.root()`/cuda ($TILECORE_CACHE_DIR/cuda, else
    ~/.cache/tilecore/cuda)."""
    return str(cache.root() / "cuda")


# Checksummed entries (tilecore.cache): a truncated or foreign file is deleted and recompiled,
# never handed to the driver.
CUBINS = cache.Store("cuda")


def gencode(arch: str) -> str:
    """nvcc's `-gencode` flag for `sm_XX[a]`: machine code for exactly that arch.

    The `-gencode` form is used rather than `-arch=sm_90a`, which also runs a plain sm_90 pass
    that rejects sm_90a-only instructions on some nvcc versions.
    """
    num = arch.removeprefix("sm_")
    return f"-gencode=arch=compute_{num},code=sm_{num}"


# --------------------------------------------------------------------------- compilers


def _nvrtc():
    """The cuda-bindings NVRTC module, or None when it (or libnvrtc) cannot be loaded."""
    try:
        nvrtc = cuda_bindings("nvrtc")

        err, _, _ = nvrtc.nvrtcVersion()
        if int(err) != 0:
            return None
        return nvrtc
    except Exception:  # ImportError, or the shared library missing: fall back to nvcc
        return None


def nvcc_path() -> str | None:
    """The nvcc executable: $CUDA_HOME/bin/nvcc, else the one on PATH, else /usr/local/cuda's."""
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")):
        if root and os.path.isfile(os.path.join(root, "bin", "nvcc")):
            return os.path.join(root, "bin", "nvcc")
    found = shutil.which("nvcc")
    if found:
        return found
    if os.path.isfile("/usr/local/cuda/bin/nvcc"):
        return "/usr/local/cuda/bin/nvcc"
    return None


@functools.cache
def _nvcc_version(path: str) -> str:
    out = subprocess.run([path, "--version"], capture_output=True, text=True, check=False).stdout
    lines = [ln for ln in out.splitlines() if ln.strip()]
    return lines[-1] if lines else "nvcc-unknown"


@functools.lru_cache(maxsize=1)
def cuda_include_dirs() -> tuple[str, ...]:
    """Directories holding cuda_fp16.h & co., which NVRTC needs passed explicitly."""
    dirs: list[str] = []
    try:
        from cuda.pathfinder import find_nvidia_header_directory

        d = find_nvidia_header_directory("cudart")
        if d:
            dirs.append(d)
    except Exception:  # older cuda-pathfinder, or none: try the usual places
        pass
    nvcc = nvcc_path()
    candidates = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"),
                  os.path.dirname(os.path.dirname(nvcc)) if nvcc else None, "/usr/local/cuda"]
    for root in candidates:
        if root:
            inc = os.path.join(root, "include")
            if os.path.isfile(os.path.join(inc, "cuda_fp16.h")) and inc not in dirs:
                dirs.append(inc)
    return tuple(dirs)


def compiler_id(compiler: str) -> str:
    """A string naming the compiler and its version (part of the cache key)."""
    if compiler == "nvrtc":
        nvrtc = _nvrtc()
        if nvrtc is None:
            raise TileInternalError("NVRTC is not loadable (pip install cuda-bindings)")
        _, major, minor = nvrtc.nvrtcVersion()
        return f"nvrtc-{major}.{minor}"
    path = nvcc_path()
    if path is None:
        raise TileInternalError("nvcc not found (set CUDA_HOME or put nvcc on PATH)")
    return f"nvcc:{_nvcc_version(path)}"


def default_compiler() -> str:
    """'nvrtc' when cuda-bindings' NVRTC loads, else 'nvcc'; $TILECORE_CUDA_COMPILER overrides."""
    forced = os.environ.get("TILECORE_CUDA_COMPILER")
    if forced in ("nvrtc", "nvcc"):
        return forced
    return "nvrtc" if _nvrtc() is not None else "nvcc"


def _keep_source(source: str, name: str) -> str:
    d = os.path.join(cache_dir(), "failed")
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, f"{name}.cu")
    with open(path, "w") as f:
        f.write(source)
    return path


def _check_nvrtc(nvrtc, res, what: str) -> None:
    err = res[0] if isinstance(res, tuple) else res
    if int(err) != 0:
        raise TileInternalError(f"NVRTC {what} failed: {err}")


def _compile_nvrtc(source: str, arch: str, options: tuple[str, ...], name: str) -> bytes:
    from . import prewarm

    prewarm.wait()  # never beside the prewarm thread's NVRTC loading (one NVRTC user at a time)
    nvrtc = _nvrtc()
    err, prog = nvrtc.nvrtcCreateProgram(source.encode(), f"{name}.cu".encode(), 0, [], [])
    _check_nvrtc(nvrtc, err, "program creation")
    try:
        opts = [f"--gpu-architecture={arch}", f"-std={STD}", *options]
        opts += [f"--include-path={d}" for d in cuda_include_dirs()]
        res = nvrtc.nvrtcCompileProgram(prog, len(opts), [o.encode() for o in opts])
        _, size = nvrtc.nvrtcGetProgramLogSize(prog)
        log = b" " * size
        nvrtc.nvrtcGetProgramLog(prog, log)
        log_text = log.decode(errors="replace").rstrip("\x00 \n")
        if int(res[0]) != 0:
            raise CudaCompileError(f"NVRTC could not compile generated kernel {name} for {arch}",
                                   log_text, _keep_source(source, name))
        res = nvrtc.nvrtcGetCUBINSize(prog)
        _check_nvrtc(nvrtc, res, "cubin size")
        size = res[1]
        cubin = b" " * size
        _check_nvrtc(nvrtc, nvrtc.nvrtcGetCUBIN(prog, cubin), "cubin read")
        return bytes(cubin)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def _compile_nvcc(source: str, arch: str, options: tuple[str, ...], name: str) -> bytes:
    path = nvcc_path()
    if path is None:
        raise TileInternalError("nvcc not found (set CUDA_HOME or put nvcc on PATH)")
    with tempfile.TemporaryDirectory(prefix="tilecore_nvcc_") as tmp:
        src = os.path.join(tmp, f"{name}.cu")
        out = os.path.join(tmp, f"{name}.cubin")
        with open(src, "w") as f:
            f.write(source)
        cmd = [path, "-cubin", gencode(arch), f"-std={STD}", *options, "-o", out, src]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise CudaCompileError(f"nvcc could not compile generated kernel {name} for {arch}",
                                   (proc.stderr + proc.stdout).strip(), _keep_source(source, name))
        with open(out, "rb") as f:
            return f.read()


def compile_cuda(source: str, arch: str, *, name: str = "kernel", compiler: str | None = None,
                 options: tuple[str, ...] = (), use_cache: bool = True) -> bytes:
    """The cubin for `source` on `arch` ('sm_80', 'sm_90a', ...), from the cache when present.

    `compiler` is 'nvrtc' or 'nvcc' (default: :func:`default_compiler`).
    """
    compiler = compiler or default_compiler()
    if compiler not in ("nvrtc", "nvcc"):
        raise TileInternalError(f"unknown CUDA compiler {compiler!r}")
    key = hashlib.sha256("\x00".join(
        [source, arch, compiler_id(compiler), *options]).encode()).hexdigest()[:32]
    entry = f"{name}-{arch}-{key}"
    if use_cache:
        cubin = CUBINS.get(entry)
        if cubin is not None and cubin[:4] == b"\x7fELF":
            return cubin
    fn = _compile_nvrtc if compiler == "nvrtc" else _compile_nvcc
    cubin = fn(source, arch, tuple(options), name)
    if use_cache:
        CUBINS.put(entry, cubin)  # atomic (write, then rename), checksummed
    return cubin


def nvcc_check(source: str, archs: tuple[str, ...], name: str = "kernel") -> None:
    """Compile `source` for every arch in one nvcc run (a fatbin, discarded); raises
    :class:`CudaCompileError` with the log when any arch fails. CI's offline compile check."""
    path = nvcc_path()
    if path is None:
        raise TileInternalError("nvcc not found (set CUDA_HOME or put nvcc on PATH)")
    with tempfile.TemporaryDirectory(prefix="tilecore_nvcc_") as tmp:
        src = os.path.join(tmp, f"{name}.cu")
        with open(src, "w") as f:
            f.write(source)
        cmd = [path, "-fatbin", *(gencode(a) for a in archs), f"-std={STD}", "-o",
               os.path.join(tmp, f"{name}.fatbin"), src]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise CudaCompileError(f"nvcc could not compile generated kernel {name} for {', '.join(archs)}",
                                   (proc.stderr + proc.stdout).strip(), _keep_source(source, name))


# .nv.info attributes (EIFMT_SVAL records: u8 format, u8 attribute, u16 size, payload)
_EIATTR_FRAME_SIZE, _EIATTR_REGCOUNT, _EIFMT_SVAL = 0x11, 0x2F, 0x04
_SHT_SYMTAB = 2


def kernel_resources(cubin: bytes) -> dict[str, dict[str, int]]:
    """`{kernel name: {"registers": n, "frame_bytes": m}}` for every kernel in `cubin`, read
    from its ELF `.nv.info` section (records name kernels by symbol-table index); `frame_bytes`
    > 0 means local memory (register spills or a stack). One nvcc run of many kernels
    (`tilecore_cuda.batch`) is read per kernel here."""
    shoff, = struct.unpack_from("<Q", cubin, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
    secs = [struct.unpack_from("<IIQQQQIIQQ", cubin, shoff + i * shentsize) for i in range(shnum)]
    names = secs[shstrndx][4]
    regs: dict[int, int] = {}
    frames: dict[int, int] = {}
    symtab = None
    for sh in secs:
        if sh[1] == _SHT_SYMTAB:
            symtab = sh
        if cubin[names + sh[0]:].split(b"\0", 1)[0] != b".nv.info":
            continue
        data, i = cubin[sh[4]:sh[4] + sh[5]], 0
        while i + 4 <= len(data):
            fmt, attr = data[i], data[i + 1]
            if fmt != _EIFMT_SVAL:
                i += 4
                continue
            size, = struct.unpack_from("<H", data, i + 2)
            if attr in (_EIATTR_REGCOUNT, _EIATTR_FRAME_SIZE) and size == 8:
                sym, value = struct.unpack_from("<II", data, i + 4)
                (regs if attr == _EIATTR_REGCOUNT else frames)[sym] = value
            i += 4 + size
    if symtab is None:
        raise TileInternalError("the cubin has no symbol table")
    strtab = secs[symtab[6]][4]

    def name(sym: int) -> str:
        st_name, = struct.unpack_from("<I", cubin, symtab[4] + sym * 24)  # Elf64_Sym is 24 bytes
        return cubin[strtab + st_name:].split(b"\0", 1)[0].decode()

    return {name(sym): {"registers": n, "frame_bytes": frames.get(sym, 0)} for sym, n in regs.items()}


def cubin_resources(cubin: bytes) -> dict[str, int]:
    """`{"registers": n, "frame_bytes": m}` of the (one) kernel in `cubin` (see
    :func:`kernel_resources`)."""
    res = kernel_resources(cubin)
    if len(res) != 1:
        raise TileInternalError(f"expected one kernel's register count in the cubin, found {len(res)}")
    return next(iter(res.values()))
