"""metal-cpu's build: the generated MSL compiled as C++20 by clang++ against our Metal shim into a
shared library with one launch entry point, cached on disk.

The translation unit is the kernel's MSL, unchanged but for one rewrite (kernel-scope
`threadgroup` arrays become `static`, so every CPU thread of a group sees one array: groups run
one after another), followed by a generated `tilecore_launch` that unpacks the buffers and
symbolic sizes and hands the kernel to the runner (`shim/tilecore_runner.h`).

The cache lives in `$TILECORE_CACHE_DIR/metal-cpu` (default: `tilecore-cache` in the system
temp dir, never the home directory), keyed by the translation unit, the shim's text, the flags
and the compiler's version, so editing the shim rebuilds.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from tilecore.codegen.spec import RenderedKernel
from tilecore.errors import TileTargetError

SHIM_DIR = Path(__file__).resolve().parent / "shim"
_CANDIDATES = ("clang++-22", "clang++", *(f"clang++-{v}" for v in range(21, 13, -1)))
FLAGS = ("-std=c++20", "-O2", "-fPIC", "-shared", "-pthread", "-Wno-unknown-attributes")
TSAN_FLAGS = ("-std=c++20", "-O1", "-g", "-fPIC", "-shared", "-pthread", "-fsanitize=thread",
              "-DTILECORE_SHIM_GENERIC_SPACES", "-Wno-unknown-attributes")
_TG_ARRAY = re.compile(r"^(\s*)(threadgroup \w+ \w+\[\d+\];)", re.MULTILINE)


@functools.lru_cache(maxsize=1)
def find_clang() -> str | None:
    """The clang++ to use: $TILECORE_CLANGXX, else the newest of clang++-22, clang++, clang++-21..14
    on PATH; None when there is none (g++ cannot compile MSL's address-space attributes)."""
    env = os.environ.get("TILECORE_CLANGXX")
    if env:
        return shutil.which(env) or (env if os.path.exists(env) else None)
    for name in _CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    return None


@functools.lru_cache(maxsize=4)
def clang_version(cxx: str) -> str:
    """The first line of `cxx --version` (part of the cache key)."""
    out = subprocess.run([cxx, "--version"], capture_output=True, text=True, check=False)
    return out.stdout.splitlines()[0] if out.stdout else cxx


@functools.lru_cache(maxsize=4)
def link_flags(cxx: str) -> tuple[str, ...]:
    """`-fuse-ld=lld` when LLVM's linker sits beside `cxx` (clang-22's package has it): it links
    a kernel's library with the shim's object in about half of GNU ld's time."""
    if (Path(os.path.realpath(cxx)).parent / "ld.lld").exists():
        return ("-fuse-ld=lld",)
    return ()


def cache_dir() -> Path:
    """$TILECORE_CACHE_DIR/metal-cpu, else <tempdir>/tilecore-cache/metal-cpu."""
    root = os.environ.get("TILECORE_CACHE_DIR") or os.path.join(tempfile.gettempdir(), "tilecore-cache")
    d = Path(root) / "metal-cpu"
    d.mkdir(parents=True, exist_ok=True)
    return d


def cpu_source(msl: str) -> str:
    """The MSL with kernel-scope threadgroup arrays made `static` (one per group, shared by all
    of its CPU threads; see the module docstring)."""
    return _TG_ARRAY.sub(r"\1static \2", msl)


def launcher(rendered: RenderedKernel, positions: tuple[str, ...]) -> str:
    """`extern "C" int tilecore_launch(void** bufs, const long long* sizes, gx, gy, gz)`: the
    kernel called for every thread of every group through the runner."""
    args = []
    n_buf = 0
    for i, p in enumerate(rendered.params):
        t = _c_type(p.dtype.name)
        if p.is_pointer:
            args.append(f"(device {t}*)bufs[{n_buf}]")
            n_buf += 1
        else:
            args.append(f"*(constant {t}*)&sizes_{i}")
    pos = {"tid": "tid", "bid": "bid"}
    args += [pos[k] for k in positions]
    scalars = [f"  const {_c_type(p.dtype.name)} sizes_{i} = ({_c_type(p.dtype.name)})sizes[{i}];"
               for i, p in enumerate(rendered.params) if not p.is_pointer]
    return "\n".join([
        "",
        "#include <tilecore_runner.h>",
        'extern "C" int tilecore_launch(void** bufs, const long long* sizes, unsigned gx, unsigned gy,',
        "                               unsigned gz) {",
        "  (void)bufs; (void)sizes;",
        *scalars,
        f"  return tilecore_shim::run_grid(gx, gy, gz, {rendered.block[0]}u, [&](uint3 tid, uint3 bid) {{",
        "    (void)tid; (void)bid;",
        f"    {rendered.entry}({', '.join(args)});",
        "  });",
        "}",
        "",
    ])


_C = {"float16": "half", "bfloat16": "bfloat", "float32": "float", "int8": "char", "uint8": "uchar",
      "int16": "short", "uint16": "ushort", "int32": "int", "uint32": "uint", "int64": "long",
      "bool": "bool"}


def _c_type(name: str) -> str:
    return _C[name]


def translation_unit(rendered: RenderedKernel, positions: tuple[str, ...]) -> str:
    """The whole C++ file compiled for metal-cpu."""
    return cpu_source(rendered.source) + launcher(rendered, positions)


def _shim_text() -> str:
    return "".join(p.read_text() for p in sorted(SHIM_DIR.iterdir()) if p.is_file())


def _compile(cxx: str, args: list[str], what: str) -> None:
    res = subprocess.run([cxx, *args], capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise TileTargetError(f"clang++ could not compile {what} for metal-cpu:\n{res.stderr[-4000:]}",
                              hint="this is a tilecore bug; please report it")


def precompiled_shim(cxx: str, flags: tuple[str, ...]) -> tuple[Path, Path]:
    """The shim and runner headers as a clang precompiled header plus the object holding its
    code (`-fpch-codegen`: the runner's std::thread / std::barrier code is compiled once, not
    per kernel), built once per shim text, path, flags and compiler. Parsing and compiling
    those headers are most of a small kernel's build time (0.7 s -> 0.25 s)."""
    # the header's path is part of the key: a PCH records the files it was built from, and a
    # second copy of the shim elsewhere (another checkout) must not be mixed with it
    key = hashlib.sha256("\0".join((_shim_text(), str(SHIM_DIR), " ".join(flags),
                                    clang_version(cxx))).encode())
    out = cache_dir() / f"shim_{key.hexdigest()[:24]}.pch"
    obj = out.with_suffix(".o")
    if out.exists() and obj.exists():
        return out, obj
    header = out.with_suffix(".h")  # the precompiled header names this file: it stays
    if not header.exists():
        header.write_text("#include <tilecore_runner.h>\n")
    with tempfile.TemporaryDirectory(prefix="build-", dir=out.parent) as tmp:
        part, part_obj = Path(tmp) / "shim.pch", Path(tmp) / "shim.o"
        pch_flags = [f for f in flags if f != "-shared"]
        _compile(cxx, [*pch_flags, "-I", str(SHIM_DIR), "-fpch-codegen", "-fpch-instantiate-templates",
                       "-x", "c++-header", str(header), "-o", str(part)], "the metal_stdlib shim")
        _compile(cxx, [*pch_flags, "-c", str(part), "-o", str(part_obj)], "the metal_stdlib shim's code")
        os.replace(part_obj, obj)
        os.replace(part, out)  # last: its presence (with the object) marks a complete build
    return out, obj


def compile_library(tu: str, sanitize: bool = False) -> Path:
    """The shared library built from translation unit `tu` (cached; compiled on a miss)."""
    cxx = find_clang()
    if cxx is None:
        raise TileTargetError("metal-cpu needs clang++ (g++ cannot compile MSL's address spaces)",
                              hint="apt-get install -y clang-22 (or set TILECORE_CLANGXX)")
    flags = (*(TSAN_FLAGS if sanitize else FLAGS), *link_flags(cxx))
    key = hashlib.sha256("\0".join((tu, _shim_text(), " ".join(flags), clang_version(cxx))).encode())
    out = cache_dir() / f"k_{key.hexdigest()[:24]}{'_tsan' if sanitize else ''}.so"
    if out.exists():
        return out
    pch, shim_obj = precompiled_shim(cxx, TSAN_FLAGS if sanitize else FLAGS)
    with tempfile.TemporaryDirectory(prefix="build-", dir=out.parent) as tmp:
        src = Path(tmp) / "kernel.cpp"
        src.write_text(tu)
        part = Path(tmp) / "kernel.so"
        _compile(cxx, [*flags, "-I", str(SHIM_DIR), "-include-pch", str(pch),
                       "-Xclang", "-fno-validate-pch", str(src), str(shim_obj), "-o", str(part)],
                 "the generated MSL")
        os.replace(part, out)  # atomic: concurrent builders never load a partial file
    return out


def load_launch(path: Path):
    """`tilecore_launch` of a built library, typed for ctypes."""
    lib = ctypes.CDLL(str(path))
    fn = lib.tilecore_launch
    fn.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_longlong),
                   ctypes.c_uint, ctypes.c_uint, ctypes.c_uint]
    fn.restype = ctypes.c_int
    fn.library = lib  # keep the library loaded while the function is referenced
    return fn
